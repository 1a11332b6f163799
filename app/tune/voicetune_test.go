package tune

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/voices"
)

func tinyVoice(t *testing.T) string {
	t.Helper()
	d, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "chattts", "tiny"))
	return d
}

// TestVoiceFineTuneTiny runs the voice fine-tune on the tiny ChatTTS export: the starting point
// recovered from ONNX, a speaker vector (then the GPT too) trained on the dataset's training
// clips, the export; installing adds an embedding voice (and, with the GPT, a local model);
// a name that is taken is refused and leaves no model behind.
func TestVoiceFineTuneTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	d := testDataset(t, 10)
	st := openStore(t)
	r := realRunner(t, st)
	ctx := context.Background()
	init := make([]float32, 16)
	init[3] = 1
	j, err := NewTTSJob(ctx, r, d, TTSConfig{Model: tinyVoice(t), Epochs: 2, Procs: 1, Threads: 1, SpeakerInit: init})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := TTSMetaOf(j)
	if len(m.Train) == 0 || len(m.HeldOut) == 0 || m.GPT {
		t.Fatalf("meta %+v", m)
	}
	b, _ := os.ReadFile(filepath.Join(j.Spec.Dir, "clips.jsonl"))
	for _, id := range m.HeldOut {
		if strings.Contains(string(b), id) {
			t.Fatalf("held-out clip %s in the training clips", id)
		}
	}
	if j, err = r.Run(ctx, j.ID, nil); err != nil {
		t.Fatalf("job: %v (%s)", err, j.Error)
	}
	if !slices.Equal(j.Progress.StagesDone, []string{"prepare", "train", "export"}) {
		t.Fatalf("stages %v", j.Progress.StagesDone)
	}
	spk, err := TrainedSpeaker(j)
	if err != nil || len(spk) != 16 {
		t.Fatalf("speaker %v: %v", spk, err)
	}
	if slices.Equal(spk, init) {
		t.Error("the speaker did not move from its starting point")
	}
	lib, _ := voices.Open(t.TempDir())
	mgr, _ := assets.NewManager(nil, assets.Options{Dir: t.TempDir()})
	id, err := InstallVoice(ctx, mgr, lib, j, "anna", false)
	if err != nil || id != "" {
		t.Fatalf("install: %q %v", id, err)
	}
	v, err := lib.Get("anna")
	if err != nil || v.Kind != voices.KindEmbedding || v.Engine != "chattts" || len(v.Embedding.Data) != 16 {
		t.Fatalf("voice %+v: %v", v, err)
	}
	if _, err := InstallVoice(ctx, mgr, lib, j, "anna", false); !errors.Is(err, voices.ErrExists) {
		t.Fatalf("second install: %v", err)
	}

	// the GPT too: a new model, installed as a local model with the voice
	g, err := NewTTSJob(ctx, r, d, TTSConfig{Model: tinyVoice(t), GPT: true, Epochs: 1, Procs: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if g, err = r.Run(ctx, g.ID, nil); err != nil {
		t.Fatalf("gpt job: %v (%s)", err, g.Error)
	}
	if _, err := InstallVoice(ctx, mgr, lib, g, "anna", false); !errors.Is(err, voices.ErrExists) {
		t.Fatalf("taken name: %v", err)
	}
	if _, err := mgr.Registry().Lookup("chattts-anna"); err == nil {
		t.Fatal("a refused install left its model")
	}
	id, err = InstallVoice(ctx, mgr, lib, g, "anna-gpt", false)
	if err != nil || id != "chattts-anna-gpt" {
		t.Fatalf("gpt install: %q %v", id, err)
	}
	fresh, _ := assets.NewManager(nil, assets.Options{Dir: mgr.Dir()})
	if p, err := fresh.Path(ctx, id); err != nil || p == "" {
		t.Fatalf("model %s: %v", id, err)
	}
	// trained again: beside the first under another name, or over it (voice and model)
	if _, err := InstallVoice(ctx, mgr, lib, g, "anna-gpt", false); !errors.Is(err, voices.ErrExists) {
		t.Fatalf("the same name again without replacing: %v", err)
	}
	if id2, err := InstallVoice(ctx, mgr, lib, g, "anna-gpt2", false); err != nil || id2 != "chattts-anna-gpt2" {
		t.Fatalf("a second install beside the first: %q %v", id2, err)
	}
	if id3, err := InstallVoice(ctx, mgr, lib, g, "anna-gpt", true); err != nil || id3 != "chattts-anna-gpt" {
		t.Fatalf("replacing the first: %q %v", id3, err)
	}
	fresh, _ = assets.NewManager(nil, assets.Options{Dir: mgr.Dir()})
	if p, err := fresh.Path(ctx, "chattts-anna-gpt"); err != nil || p == "" {
		t.Fatalf("the replaced model: %v", err)
	}
	// installed as the demo voice ships: the int8 GPT beside a float16-stored gpt.onnx
	fdir, _ := fresh.ModelDir("chattts-anna-gpt")
	var conf struct{ Files map[string]string }
	if b, err := os.ReadFile(filepath.Join(fdir, "config.json")); err != nil || json.Unmarshal(b, &conf) != nil {
		t.Fatalf("the model's config.json: %v", err)
	}
	if conf.Files["gpt_int8"] == "" {
		t.Fatalf("no int8 GPT in the fine-tuned model's files: %v", conf.Files)
	}
	if _, err := os.Stat(filepath.Join(fdir, conf.Files["gpt_int8"])); err != nil {
		t.Fatalf("the int8 GPT was not installed: %v", err)
	}
	// a voice that cannot be saved (its library gone) takes the new model out and puts the
	// fine-tune it replaced back
	libDir := lib.Dir()
	if err := os.Rename(libDir, libDir+".away"); err != nil {
		t.Fatal(err)
	}
	oldDir, _ := fresh.ModelDir("chattts-anna-gpt")
	before, _ := os.ReadFile(filepath.Join(oldDir, "config.json"))
	if _, err := InstallVoice(ctx, fresh, lib, g, "anna-gpt", true); err == nil {
		t.Fatal("installed a voice into a library that is gone")
	}
	os.Rename(libDir+".away", libDir)
	fresh, _ = assets.NewManager(nil, assets.Options{Dir: mgr.Dir()})
	if p, err := fresh.Path(ctx, "chattts-anna-gpt"); err != nil || p == "" {
		t.Fatalf("the earlier fine-tune after a failed replace: %v", err)
	}
	newDir, _ := fresh.ModelDir("chattts-anna-gpt")
	if after, _ := os.ReadFile(filepath.Join(newDir, "config.json")); len(before) == 0 || string(after) != string(before) {
		t.Fatalf("the earlier fine-tune's config changed: %d vs %d bytes", len(before), len(after))
	}
	if _, err := lib.Get("anna-gpt"); err != nil {
		t.Fatalf("the earlier voice: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(g.Spec.Dir, "replaced-*")); len(left) != 0 {
		t.Fatalf("copies left behind: %v", left)
	}
	// a voice named so that its model would be one of Parley's own is refused, never replaced
	if _, err := InstallVoice(ctx, fresh, lib, g, "demo", true); !errors.Is(err, voices.ErrExists) || !strings.Contains(err.Error(), "chattts-demo") {
		t.Fatalf("a voice named demo: %v", err)
	}
	if _, err := fresh.Registry().Lookup("chattts-demo"); err != nil {
		t.Fatalf("the demo voice's entry: %v", err)
	}
}
