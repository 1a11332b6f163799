package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/voices/clone"
)

// TestFinetuneSteps walks the wizard's first four steps from the command line on espeak-ng
// speech: new, import (a folder with a WAV and a file that is not audio), slice, label with
// the demo recogniser, proofread (clips, edit, drop), status.
func TestFinetuneSteps(t *testing.T) {
	models := assets.ModelsDir()
	if _, err := os.Stat(filepath.Join(models, "silero-vad-v5", "silero_vad.onnx")); err != nil {
		t.Skipf("Silero VAD not set up (make setup): %v", err)
	}
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng not installed")
	}
	isolate(t)
	t.Setenv("PARLEY_MODELS", models)
	in := t.TempDir()
	var pcm []float32
	for _, s := range []string{"what time is it in london and in tokyo right now", "set a timer for five minutes and then remind me to call home", "what is the weather like today in the mountains"} {
		out, err := exec.Command("espeak-ng", "-v", "en-us", "--stdout", s).Output()
		if err != nil {
			t.Fatal(err)
		}
		b, err := audio.ReadWAV(bytes.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		x, _ := audio.Resample(b.Data, b.Format.SampleRate, 16000, 1)
		pcm = append(pcm, make([]float32, 24000)...)
		pcm = append(pcm, x...)
	}
	pcm = append(pcm, make([]float32, 24000)...)
	if err := audio.WriteWAVFile(filepath.Join(in, "me.wav"), &audio.Buffer{Format: audio.Mono16k, Data: pcm}, audio.S16); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(in, "readme.txt"), []byte("not audio"), 0o644)

	step := func(want int, args ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, args...)
		if code != want {
			t.Fatalf("parley %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errs)
		}
		return out
	}
	step(0, "finetune", "new", "me")
	step(1, "finetune", "new", "me")
	if out := step(1, "finetune", "import", "nobody", in); !strings.Contains(out, "") {
		t.Log(out)
	}
	out := step(0, "finetune", "import", "me", in)
	if !strings.Contains(out, "imported 1 recordings") {
		t.Errorf("import: %s", out)
	}
	out = step(0, "finetune", "slice", "me")
	if !strings.Contains(out, "next: parley finetune label me") {
		t.Errorf("slice: %s", out)
	}
	step(0, "finetune", "label", "me", "--model", filepath.Join("..", "..", "assets", "demo", "sensevoice"))
	var clips []clone.Clip
	if err := json.Unmarshal([]byte(step(0, "finetune", "clips", "me", "--json")), &clips); err != nil {
		t.Fatal(err)
	}
	if len(clips) == 0 {
		t.Fatal("no clips")
	}
	for _, c := range clips {
		t.Logf("%s %.1f s %q %s", c.ID, c.Seconds, c.Text, c.Warning)
		if c.Lang == "" {
			t.Errorf("clip %s has no language", c.ID)
		}
	}
	step(0, "finetune", "edit", "me", clips[0].ID, "what time is it")
	step(0, "finetune", "drop", "me", clips[len(clips)-1].ID)
	step(1, "finetune", "drop", "me", "nope")
	var st struct {
		Summary clone.Summary `json:"summary"`
	}
	if err := json.Unmarshal([]byte(step(0, "finetune", "status", "me", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Summary.Sources != 1 || st.Summary.Dropped != 1 || st.Summary.Usable+st.Summary.Unlabelled != len(clips)-1 {
		t.Errorf("status %+v for %d clips", st.Summary, len(clips))
	}
	if out := step(0, "finetune", "list"); !strings.Contains(out, "me") {
		t.Errorf("list: %s", out)
	}
	step(0, "finetune", "rm", "me")
	step(1, "finetune", "status", "me")
}
