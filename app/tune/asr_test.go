package tune

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/voices/clone"
)

// speechClips are testdata/speech's recordings and their texts.
func speechClips(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "speech", "manifest.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct{ Source, Target string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out[r.Source] = r.Target
	}
	return out
}

// testDataset makes a labelled dataset of n clips from testdata/speech (recordings reused).
func testDataset(t *testing.T, n int, texts ...string) *clone.Dataset {
	t.Helper()
	d, err := clone.Create(filepath.Join(t.TempDir(), "anna"), "anna")
	if err != nil {
		t.Fatal(err)
	}
	src := speechClips(t)
	var files []string
	for f := range src {
		files = append(files, f)
	}
	slices.Sort(files)
	for i := range n {
		f := files[i%len(files)]
		id := fmt.Sprintf("s%04d-001", i+1)
		rel := filepath.Join("clips", id+".wav")
		copyFile(t, filepath.Join("..", "..", "testdata", "speech", f), d.Abs(rel))
		text := src[f]
		if i < len(texts) {
			text = texts[i]
		}
		d.Clips = append(d.Clips, clone.Clip{ID: id, Source: fmt.Sprintf("s%04d", i+1), Path: rel, Seconds: 2.5, Text: text, Lang: "en"})
	}
	d.Lang = "en"
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	return d
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()
}

func TestSplitClips(t *testing.T) {
	d := testDataset(t, 30)
	d.Clips[3].Dropped = true
	d.Clips[4].Rejected = "too short (1.2 s)"
	d.Clips[5].Text = ""
	train, held, err := SplitClips(d, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	if len(train)+len(held) != 27 || len(held) < 3 || len(held) > 9 {
		t.Fatalf("%d train, %d held out of 27 usable", len(train), len(held))
	}
	ids := map[string]bool{}
	for _, c := range train {
		ids[c.ID] = true
	}
	for _, c := range held {
		if ids[c.ID] {
			t.Fatalf("%s both trained on and held out", c.ID)
		}
	}
	for _, c := range append(train, held...) {
		if c.ID == d.Clips[3].ID || c.ID == d.Clips[4].ID || c.ID == d.Clips[5].ID {
			t.Fatalf("unusable clip %s in the split", c.ID)
		}
	}
	// a clip keeps its side when recordings are added
	d2 := testDataset(t, 60)
	_, held2, _ := SplitClips(d2, 0.2)
	in2 := map[string]bool{}
	for _, c := range held2 {
		in2[c.ID] = true
	}
	for _, c := range held {
		if clipHash(c.ID) < 0.2 && !in2[c.ID] {
			t.Errorf("%s moved from held-out to training when clips were added", c.ID)
		}
	}
	// small datasets hold out at least one clip
	_, held3, err := SplitClips(testDataset(t, 8), 0.2)
	if err != nil || len(held3) != 2 {
		t.Fatalf("8 clips: %d held out, %v", len(held3), err)
	}
	if _, _, err := SplitClips(testDataset(t, 5), 0.2); !errors.Is(err, ErrTooFewClips) {
		t.Fatalf("5 clips: %v", err)
	}
}

func TestCharErrors(t *testing.T) {
	for _, c := range []struct {
		ref, hyp string
		errs, n  int
	}{
		{"Set a timer, please.", "set a timer please", 0, 18},
		{"hello world", "hallo world", 1, 11},
		{"hello", "", 5, 5},
		{"", "noise", 5, 0},
		{"今天天气很好", "今天天气好", 1, 6},
		{"  what   time is it ", "what time is it", 0, 15},
	} {
		e, n := CharErrors(c.ref, c.hyp)
		if e != c.errs || n != c.n {
			t.Errorf("CharErrors(%q, %q) = %d, %d; want %d, %d", c.ref, c.hyp, e, n, c.errs, c.n)
		}
	}
}

func TestLocalID(t *testing.T) {
	for name, want := range map[string]string{"anna": "sensevoice-anna", "Anna Smith": "sensevoice-anna-smith",
		"my.voice_2": "sensevoice-my-voice-2", "-x-": "sensevoice-x"} {
		if got := LocalID(name); got != want {
			t.Errorf("LocalID(%q) = %q, want %q", name, got, want)
		}
	}
	if id := LocalID("Ärger"); !strings.HasPrefix(id, "sensevoice-") || len(id) < 13 {
		t.Errorf("LocalID of a non-ASCII name: %q", id)
	}
	if LocalID("日本") == LocalID("中国") {
		t.Error("names without ASCII letters must not collide")
	}
}

func tinyBase(t *testing.T) string {
	t.Helper()
	d, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "sensevoice", "tiny"))
	return d
}

// tinyBaseWithLM is a copy of the tiny recogniser with a unigram token LM (asr's lm.bin
// format: PARLEYLM, version, order, vocabulary, then per order a count and id/log10 p/back-off
// records), beam weights and a word list beside it, as the shipped demo recogniser has.
func tinyBaseWithLM(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var vocab int
	for _, f := range []string{"model.onnx", "model.int8.onnx", "tokens.txt"} {
		b, err := os.ReadFile(filepath.Join(tinyBase(t), f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "tokens.txt" {
			vocab = bytes.Count(b, []byte("\n"))
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lm := binary.LittleEndian.AppendUint32([]byte("PARLEYLM"), 1)
	lm = binary.LittleEndian.AppendUint32(lm, 1)
	lm = binary.LittleEndian.AppendUint32(lm, uint32(vocab))
	lm = binary.LittleEndian.AppendUint32(lm, uint32(vocab))
	for id := range vocab {
		lm = binary.LittleEndian.AppendUint16(lm, uint16(id))
		lm = binary.LittleEndian.AppendUint32(lm, math.Float32bits(float32(-math.Log10(float64(vocab)))))
		lm = binary.LittleEndian.AppendUint32(lm, 0)
	}
	if err := os.WriteFile(filepath.Join(dir, "lm.bin"), lm, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lm.json"), []byte(`{"alpha": 0.3, "beta": 1.5, "width": 4, "oov": 2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lm.words.txt"), []byte("zzz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestNewASRJobManifest: the manifest holds the training clips only; a transcript in a script
// the recogniser cannot write is left out with the reason (the tiny model writes a-z and ').
func TestNewASRJobManifest(t *testing.T) {
	d := testDataset(t, 20, "今天天气很好", "what time is it")
	st := openStore(t)
	r := fakeRunner(t, st)
	j, err := NewASRJob(context.Background(), r, d, ASRConfig{Base: tinyBase(t), BaseID: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ASRMetaOf(j)
	if err != nil {
		t.Fatal(err)
	}
	if j.Spec.Dir != filepath.Join(d.Dir(), "jobs", "asr-finetune-1") {
		t.Fatalf("job dir %s", j.Spec.Dir)
	}
	if len(m.Train)+len(m.HeldOut)+len(m.Skipped) != 20 && len(m.Train)+len(m.HeldOut) != 20 {
		t.Fatalf("split %d + %d, skipped %v", len(m.Train), len(m.HeldOut), m.Skipped)
	}
	chinese := d.Clips[0].ID
	if slices.Contains(m.HeldOut, chinese) {
		t.Skip("the Chinese clip was held out; the split changed")
	}
	if why := m.Skipped[chinese]; !strings.Contains(why, "cannot write") || !strings.Contains(why, "今") {
		t.Fatalf("the Chinese transcript: %q", why)
	}
	b, err := os.ReadFile(filepath.Join(j.Spec.Dir, "train.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(m.Train) {
		t.Fatalf("%d manifest lines for %d training clips", len(lines), len(m.Train))
	}
	for _, l := range lines {
		var rec struct {
			Key, Source, Target string
			SourceLen           int    `json:"source_len"`
			Lang                string `json:"text_language"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(m.HeldOut, rec.Key) || rec.Key == chinese {
			t.Fatalf("%s is in the training manifest", rec.Key)
		}
		if !filepath.IsAbs(rec.Source) || rec.SourceLen != 250 || rec.Lang != "<|en|>" {
			t.Fatalf("record %s", l)
		}
	}
	if j.Spec.Steps[0].Module != "train.sensevoice.base" || !slices.Contains(j.Spec.Steps[0].Args, tinyBase(t)) || !j.Spec.Steps[1].Train {
		t.Fatalf("steps %+v", j.Spec.Steps)
	}
}

// asrOpener opens recognisers for Evaluate.
func asrOpener(dir string) (clone.Transcriber, func(), error) {
	rec, err := asr.New(dir, asr.Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		return nil, nil, err
	}
	return ear{rec}, func() { rec.Close() }, nil
}

type ear struct{ r *asr.Recognizer }

func (e ear) Transcribe(ctx context.Context, pcm []float32) (clone.Heard, error) {
	res, err := e.r.Transcribe(ctx, pcm)
	return clone.Heard{Text: res.Text, Lang: res.Lang}, err
}

// TestASRFineTuneTiny runs the whole recogniser fine-tune on the tiny random SenseVoice (a
// Parley export): starting point recovered from ONNX, training, export, scores before and
// after on the held-out clips, then installing as a local model (twice: the second replaces
// the first) and an install that fails leaving the earlier one in place.
func TestASRFineTuneTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	gputest.RequireORT(t)
	d := testDataset(t, 10)
	st := openStore(t)
	r := realRunner(t, st)
	ctx := context.Background()
	base := tinyBaseWithLM(t) // a base with a token LM and its weights: the fine-tune decodes with them too
	j, err := NewASRJob(ctx, r, d, ASRConfig{Base: base, BaseID: "tiny", Epochs: 2, Procs: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	j, err = r.Run(ctx, j.ID, rec.on)
	if err != nil {
		t.Fatalf("job: %v (%s)", err, j.Error)
	}
	if !slices.Equal(j.Progress.StagesDone, []string{"prepare", "train", "export"}) || j.Progress.Step == 0 {
		t.Fatalf("progress %+v", j.Progress)
	}
	var prep struct {
		Size string `json:"size"`
	}
	if err := json.Unmarshal(j.Progress.Results["prepare"], &prep); err != nil || prep.Size != "tiny" {
		t.Fatalf("prepare result %s", j.Progress.Results["prepare"])
	}
	res, err := Evaluate(ctx, j, asrOpener)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := ASRMetaOf(j)
	if len(res.Before.Clips) != len(m.HeldOut) || len(res.After.Clips) != len(m.HeldOut) || res.Before.Chars == 0 {
		t.Fatalf("scores %+v", res)
	}
	if err := r.SetResult(ctx, j.ID, "evaluate", res); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Job(ctx, j.ID); got.Progress.Results["evaluate"] == nil || got.Status != store.JobDone {
		t.Fatal("evaluation not recorded")
	}

	models := t.TempDir()
	mgr, err := assets.NewManager(nil, assets.Options{Dir: models})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := Install(ctx, mgr, j, res)
	if err != nil {
		t.Fatal(err)
	}
	id := LocalID("anna")
	if dir != filepath.Join(models, id) {
		t.Fatalf("installed in %s", dir)
	}
	mgr2, _ := assets.NewManager(nil, assets.Options{Dir: models})
	model, err := mgr2.Registry().Lookup(id)
	if err != nil || model.Kind != assets.KindASR || len(model.Files) != 5 || model.Files[0].SHA256 == "" {
		t.Fatalf("registry entry %+v: %v", model, err)
	}
	for _, f := range []string{"lm.bin", "lm.json"} {
		want, _ := os.ReadFile(filepath.Join(base, f))
		if got, err := os.ReadFile(filepath.Join(dir, f)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("installed %s: %v (the base's: %d bytes)", f, err, len(want))
		}
	}
	// the word list: the base's, then every word of the training clips, and none that only
	// held-out clips say
	list, err := os.ReadFile(filepath.Join(dir, "lm.words.txt"))
	if err != nil || !strings.HasPrefix(string(list), "zzz\n") {
		t.Errorf("installed word list %q: %v", list, err)
	}
	have := strings.Fields(string(list))
	trained := map[string]bool{}
	for _, id := range m.Train {
		c, _ := d.Clip(id)
		for _, w := range strings.Fields(NormalizeText(c.Text)) {
			trained[w] = true
			if !slices.Contains(have, w) {
				t.Errorf("word %q of training clip %s not in the installed list", w, id)
			}
		}
	}
	heldOnly := 0
	for _, id := range m.HeldOut {
		c, _ := d.Clip(id)
		for _, w := range strings.Fields(NormalizeText(c.Text)) {
			if !trained[w] {
				heldOnly++
				if slices.Contains(have, w) {
					t.Errorf("word %q, said only in held-out clip %s, is in the installed list", w, id)
				}
			}
		}
	}
	if heldOnly == 0 {
		t.Fatal("no held-out clip says a word the training clips do not: the list's leak check would check nothing")
	}
	if p, err := mgr2.Path(ctx, id); err != nil || p != dir {
		t.Fatalf("path %s: %v", p, err)
	}
	if st, err := mgr2.Verify(ctx, id); err != nil || len(st.Problems()) > 0 {
		t.Fatalf("verify: %v %v", err, st.Problems())
	}
	if _, _, err := asrOpener(dir); err != nil {
		t.Fatalf("the installed model does not load: %v", err)
	}
	// a second fine-tune replaces it
	if _, err := Install(ctx, mgr2, j, res); err != nil {
		t.Fatalf("replacing: %v", err)
	}
	// an export that is incomplete fails before touching the installed one
	os.Remove(filepath.Join(ModelDir(j), "tokens.txt"))
	mgr3, _ := assets.NewManager(nil, assets.Options{Dir: models})
	if _, err := Install(ctx, mgr3, j, res); err == nil {
		t.Fatal("installing an incomplete export")
	}
	if p, err := mgr3.Path(ctx, id); err != nil || p != dir {
		t.Fatalf("the earlier version is gone: %v", err)
	}
}

// The words a fine-tune adds to its list are those of its own training manifest as the
// recogniser writes them (lower case, no punctuation), each once, sorted; a manifest that is
// missing or does not parse is an error naming the job.
func TestTrainWords(t *testing.T) {
	dir := t.TempDir()
	j := Job{Spec: Spec{Dir: dir}}
	j.ID = 7
	if _, err := trainWords(j); err == nil || !strings.Contains(err.Error(), "job 7") {
		t.Errorf("no manifest: %v", err)
	}
	manifest := `{"key": "a", "target": "Hello, Anouk!"}` + "\n" + `{"key": "b", "target": "the Kubernetes pod, the"}` + "\r\n\n" +
		`{"key": "c", "target": "it's 42"}`
	if err := os.WriteFile(filepath.Join(dir, "train.jsonl"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := trainWords(j)
	if want := []string{"42", "anouk", "hello", "it's", "kubernetes", "pod", "the"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("trainWords %q, %v; want %q", got, err, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "train.jsonl"), []byte(manifest+"\n{\"target\": 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := trainWords(j); err == nil || !strings.Contains(err.Error(), "line 5") {
		t.Errorf("a bad line: %v", err)
	}
	if got := string(withWords([]byte("hello\r\nPod  \n"), []string{"anouk", "hello", "pod"})); got != "hello\r\nPod  \nanouk\n" {
		t.Errorf("withWords: %q", got)
	}
}

// A fine-tune keeps its base's vocabulary, so it decodes with its base's token LM and beam
// weights: carryLM copies them when tokens.txt matches byte for byte, and only then.
func TestCarryLM(t *testing.T) {
	write := func(dir, name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(dir, name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	base, same, other := t.TempDir(), t.TempDir(), t.TempDir()
	write(base, "tokens.txt", "<blk> 0\n▁a 1\n")
	write(base, "lm.bin", "LMDATA")
	write(base, "lm.json", `{"alpha": 0.7}`)
	write(base, "lm.words.txt", "a\n")
	write(same, "tokens.txt", "<blk> 0\n▁a 1\n")
	write(same, "lm.json", `{"alpha": 9}`) // a stale one is replaced
	write(other, "tokens.txt", "<blk> 0\n▁b 1\n")
	for _, dst := range []string{same, other} {
		if err := carryLM(base, dst, nil); err != nil {
			t.Fatal(err)
		}
	}
	if read(same, "lm.bin") != "LMDATA" || read(same, "lm.json") != `{"alpha": 0.7}` || read(same, "lm.words.txt") != "a\n" {
		t.Errorf("same vocabulary: lm.bin %q lm.json %q lm.words.txt %q", read(same, "lm.bin"), read(same, "lm.json"),
			read(same, "lm.words.txt"))
	}
	if _, err := os.Stat(filepath.Join(other, "lm.bin")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("another vocabulary got the base's LM: %v", err)
	}
	// a second carry (Install after Evaluate) leaves the copies as they are, not rewritten
	var before []os.FileInfo
	for _, f := range lmFiles {
		st, err := os.Stat(filepath.Join(same, f))
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, st)
	}
	if err := carryLM(base, same, nil); err != nil {
		t.Fatal(err)
	}
	for i, f := range lmFiles {
		if after, err := os.Stat(filepath.Join(same, f)); err != nil || !os.SameFile(before[i], after) {
			t.Errorf("a second carry rewrote %s: %v", f, err)
		}
	}
	// the fine-tune's own words join the list (once each, the base's kept as they were)
	if err := carryLM(base, same, []string{"a", "zoë", "anouk"}); err != nil {
		t.Fatal(err)
	}
	if got := read(same, "lm.words.txt"); got != "a\nzoë\nanouk\n" {
		t.Errorf("the list with the fine-tune's words: %q", got)
	}
	write(base, "lm.words.txt", "A") // no final newline, another case
	if err := carryLM(base, same, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if got := read(same, "lm.words.txt"); got != "A\nb\n" {
		t.Errorf("the list with the fine-tune's words: %q", got)
	}
	// an LM without weights or word list replaces stale ones with none (the defaults)
	os.Remove(filepath.Join(base, "lm.json"))
	os.Remove(filepath.Join(base, "lm.words.txt"))
	if err := carryLM(base, same, nil); err != nil || read(same, "lm.bin") != "LMDATA" {
		t.Fatal(err)
	}
	for _, f := range []string{"lm.json", "lm.words.txt"} {
		if _, err := os.Stat(filepath.Join(same, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stale %s kept: %v", f, err)
		}
	}
	// no base: nothing to do; a base without an LM: the export has none either (not a stale one)
	if err := carryLM("", same, nil); err != nil || read(same, "lm.bin") != "LMDATA" {
		t.Errorf("no base: %v", err)
	}
	if err := carryLM(other, same, nil); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(same, "lm.bin")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a stale lm.bin kept under a base without an LM: %v", err)
	}
	// an unreadable LM is an error that names it
	os.Remove(filepath.Join(base, "lm.bin"))
	if err := os.Mkdir(filepath.Join(base, "lm.bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := carryLM(base, same, nil); err == nil || !strings.Contains(err.Error(), "language model") {
		t.Errorf("an unreadable lm.bin: %v", err)
	}
}
