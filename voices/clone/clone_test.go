package clone

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/gpu/gputest"
)

// openWAV is the OpenFunc of these tests: WAV only (the CLI adds ffmpeg).
func openWAV(_ context.Context, path string) (audio.Source, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	r, err := audio.NewWAVReader(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return r, func() { f.Close() }, nil
}

// speak is espeak-ng's rendering of text at 16 kHz.
func speak(t testing.TB, text, voice string) []float32 {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng not installed (make setup installs it)")
	}
	out, err := exec.Command("espeak-ng", "-v", voice, "--stdout", text).Output()
	if err != nil {
		t.Fatalf("espeak-ng: %v", err)
	}
	b, err := audio.ReadWAV(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	pcm, err := audio.Resample(b.Data, b.Format.SampleRate, 16000, 1)
	if err != nil {
		t.Fatal(err)
	}
	return pcm
}

func silence(s float64) []float32 { return make([]float32, int(s*16000)) }

func writeWAV(t testing.TB, path string, rate, channels int, pcm []float32) {
	t.Helper()
	if err := audio.WriteWAVFile(path, &audio.Buffer{Format: audio.Format{SampleRate: rate, Channels: channels}, Data: pcm}, audio.S16); err != nil {
		t.Fatal(err)
	}
}

func concat(parts ...[]float32) []float32 {
	var out []float32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func gain(p []float32, g float64) []float32 {
	out := make([]float32, len(p))
	for i, v := range p {
		out[i] = float32(math.Max(-1, math.Min(1, float64(v)*g)))
	}
	return out
}

func addNoise(p []float32, rms float64, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, len(p))
	for i, v := range p {
		out[i] = v + float32(r.NormFloat64()*rms)
	}
	return out
}

func newDataset(t *testing.T) *Dataset {
	t.Helper()
	d, err := Create(filepath.Join(t.TempDir(), "me"), "me")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCreateOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	for _, bad := range []string{"", "../x", "a/b", strings.Repeat("x", 65), ".hidden"} {
		if _, err := Create(dir, bad); !errors.Is(err, ErrBadName) {
			t.Errorf("name %q: %v, want ErrBadName", bad, err)
		}
	}
	d, err := Create(dir, "Ada Lovelace")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dir, "again"); !errors.Is(err, ErrExists) {
		t.Errorf("second Create: %v", err)
	}
	again, err := Open(dir)
	if err != nil || again.Name != "Ada Lovelace" {
		t.Fatalf("Open: %v %+v", err, again)
	}
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrNotDataset) {
		t.Errorf("empty dir: %v", err)
	}
	// a record that points outside the dataset is refused, not followed
	d.Sources = append(d.Sources, Source{ID: "s0001", Path: "../../etc/passwd"})
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrNotDataset) {
		t.Errorf("escaping path: %v", err)
	}
	os.WriteFile(filepath.Join(dir, datasetFile), []byte("{"), 0o600)
	if _, err := Open(dir); !errors.Is(err, ErrNotDataset) {
		t.Errorf("corrupt json: %v", err)
	}
}

func TestImport(t *testing.T) {
	d := newDataset(t)
	in := t.TempDir()
	tone := make([]float32, 2*44100*2)
	for i := range tone {
		tone[i] = float32(0.3 * math.Sin(float64(i/2)*0.05))
	}
	writeWAV(t, filepath.Join(in, "stereo44.wav"), 44100, 2, tone)
	sub := filepath.Join(in, "folder")
	os.MkdirAll(sub, 0o755)
	writeWAV(t, filepath.Join(sub, "a.wav"), 16000, 1, silence(1))
	writeWAV(t, filepath.Join(sub, "tiny.wav"), 16000, 1, silence(0.2))
	os.WriteFile(filepath.Join(sub, "notes.txt"), []byte("not audio"), 0o644)
	os.WriteFile(filepath.Join(sub, "broken.wav"), []byte("RIFF\x00\x00\x00\x00WAVEjunk"), 0o644)
	empty := filepath.Join(in, "nothing-here")
	os.MkdirAll(empty, 0o755)

	added, problems, err := d.Import(context.Background(), []string{filepath.Join(in, "stereo44.wav"), sub, empty, filepath.Join(in, "missing.wav")}, openWAV, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 2 {
		t.Fatalf("added %d sources, want 2 (stereo44, a): %+v", len(added), added)
	}
	if math.Abs(added[0].Seconds-2) > 0.01 {
		t.Errorf("44.1 kHz stereo 2 s imported as %.3f s", added[0].Seconds)
	}
	b, err := audio.ReadWAVFile(d.Abs(added[0].Path))
	if err != nil || b.Format != audio.Mono16k {
		t.Fatalf("raw file: %v %v", err, b)
	}
	want := map[string]string{"tiny.wav": "only 0.20 s", "broken.wav": "", "nothing-here": "no audio files", "missing.wav": "cannot open"}
	if len(problems) != len(want) {
		t.Errorf("problems %v, want one for each of %v", problems, want)
	}
	for _, p := range problems {
		w, ok := want[filepath.Base(p.File)]
		if !ok || !strings.Contains(p.Reason, w) {
			t.Errorf("problem %q: want a reason with %q", p, w)
		}
	}
	again, err := Open(d.Dir())
	if err != nil || len(again.Sources) != 2 {
		t.Fatalf("reopened: %v, %d sources", err, len(again.Sources))
	}
	// too many files is refused before anything is imported
	if _, _, err := d.Import(context.Background(), []string{sub}, openWAV, ImportOptions{MaxFiles: 2}); err == nil || !strings.Contains(err.Error(), "at most 2") {
		t.Errorf("too many files: %v", err)
	}
	// too long a recording
	_, problems, err = d.Import(context.Background(), []string{filepath.Join(in, "stereo44.wav")}, openWAV, ImportOptions{MaxSourceSeconds: 1})
	if err != nil || len(problems) != 1 || !strings.Contains(problems[0].Reason, "longer than") {
		t.Errorf("too long: %v %v", err, problems)
	}
	if len(d.Sources) != 2 {
		t.Errorf("a refused import left %d sources", len(d.Sources))
	}
	leftovers, _ := filepath.Glob(filepath.Join(d.Dir(), "raw", ".tmp-*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func TestImportUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into read-only directories")
	}
	d := newDataset(t)
	in := t.TempDir()
	writeWAV(t, filepath.Join(in, "a.wav"), 16000, 1, silence(1))
	os.Chmod(filepath.Join(d.Dir(), "raw"), 0o500)
	defer os.Chmod(filepath.Join(d.Dir(), "raw"), 0o700)
	_, _, err := d.Import(context.Background(), []string{filepath.Join(in, "a.wav"), filepath.Join(in, "a.wav")}, openWAV, ImportOptions{})
	var disk *diskError
	if !errors.As(err, &disk) {
		t.Fatalf("unwritable dataset: %v, want a disk error that stops the import", err)
	}
}

func detector(t *testing.T) *vad.Detector {
	t.Helper()
	det, err := vad.New(gputest.RequireModel(t, "silero-vad-v5/silero_vad.onnx"), vad.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { det.Close() })
	return det
}

// TestSlice: a recording of nine sentences in two voices, pauses between them, with a
// clipped one, a whispered-quiet one, and a second recording in loud noise; a recording of
// silence; a recording of one 20 s run of speech without pauses.
func TestSlice(t *testing.T) {
	det := detector(t)
	d := newDataset(t)
	in := t.TempDir()
	s1 := speak(t, "The quick brown fox jumps over the lazy dog near the river bank.", "en-us")
	s2 := speak(t, "Please remind me to water the plants every morning at eight.", "en+f3")
	s3 := speak(t, "I would like a cup of tea with a little milk and no sugar.", "en-us")
	long := concat(s1, s2, s3, s1, s2, s3) // ~20 s with no pause longer than espeak's own
	rec := concat(silence(0.5), s1, silence(1.5), s2, silence(0.3), s3, silence(1.5),
		gain(s1, 20), silence(1.5), // clipped
		gain(s2, 0.05), silence(1.5), // too quiet
		s3, silence(0.8))
	writeWAV(t, filepath.Join(in, "talk.wav"), 16000, 1, rec)
	writeWAV(t, filepath.Join(in, "noisy.wav"), 16000, 1, addNoise(concat(silence(0.5), s1, silence(1.5), s2, silence(0.5)), 0.05, 3))
	writeWAV(t, filepath.Join(in, "silence.wav"), 16000, 1, silence(5))
	writeWAV(t, filepath.Join(in, "monologue.wav"), 16000, 1, concat(silence(0.3), long, silence(0.3)))
	if _, problems, err := d.Import(context.Background(), []string{in}, openWAV, ImportOptions{}); err != nil || len(problems) != 0 {
		t.Fatalf("import: %v %v", err, problems)
	}
	problems, err := d.Slice(context.Background(), det, SliceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Reason, "no speech") || filepath.Base(problems[0].File) != "silence.wav" {
		t.Errorf("problems %v, want silence.wav without speech", problems)
	}
	bySource := map[string][]Clip{}
	origin := map[string]string{}
	for _, s := range d.Sources {
		origin[s.ID] = filepath.Base(s.Origin)
		if !s.Sliced {
			t.Errorf("%s not marked sliced", s.Origin)
		}
	}
	for _, c := range d.Clips {
		bySource[origin[c.Source]] = append(bySource[origin[c.Source]], c)
		if c.Seconds > 15+0.25 {
			t.Errorf("clip %s is %.1f s", c.ID, c.Seconds)
		}
		if pcm, err := d.ReadClip(c.Path); err != nil || math.Abs(float64(len(pcm))/16000-c.Seconds) > 0.01 {
			t.Errorf("clip %s audio: %v, %d samples for %.2f s", c.ID, err, len(pcm), c.Seconds)
		}
		t.Logf("%-12s %-10s %5.1f-%5.1f s  peak %5.1f  speech %5.1f dBFS  SNR %4.1f  %s %s", origin[c.Source], c.ID, c.Start, c.End, c.PeakDB, c.SpeechDB, c.SNR, c.Rejected, c.Warning)
	}
	reasons := func(file string) []string {
		var r []string
		for _, c := range bySource[file] {
			r = append(r, reasonKind(c.Rejected))
		}
		return r
	}
	talk := reasons("talk.wav")
	// s2 and s3 are 0.3 s apart: one clip; then s1, clipped, quiet, s3
	wantTalk := []string{"", "", "clipped", "too quiet", ""}
	if strings.Join(talk, "|") != strings.Join(wantTalk, "|") {
		t.Errorf("talk.wav clips rejected as %q, want %q", talk, wantTalk)
	}
	for _, r := range reasons("noisy.wav") {
		if r != "too noisy" {
			t.Errorf("noisy.wav clip: %q, want too noisy", r)
		}
	}
	mono := bySource["monologue.wav"]
	if len(mono) < 2 {
		t.Fatalf("a 25 s monologue gave %d clips", len(mono))
	}
	var total float64
	for _, c := range mono {
		total += c.Seconds
		if c.Rejected != "" {
			t.Errorf("monologue clip %s rejected: %s", c.ID, c.Rejected)
		}
	}
	if want := float64(len(long)) / 16000; total < want-0.5 {
		t.Errorf("monologue clips cover %.1f s of %.1f", total, want)
	}
	s := d.Summary()
	if s.Unsliced != 0 || s.Rejected["clipped"] != 1 || s.Rejected["too quiet"] != 1 || s.Usable != 0 || s.Unlabelled == 0 {
		t.Errorf("summary %+v", s)
	}
	// slicing again does nothing; reslicing one source cuts it again
	n := len(d.Clips)
	if _, err := d.Slice(context.Background(), det, SliceOptions{}); err != nil || len(d.Clips) != n {
		t.Errorf("second Slice: %v, %d clips (was %d)", err, len(d.Clips), n)
	}
	if err := d.Reslice(d.Sources[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Slice(context.Background(), det, SliceOptions{}); err != nil || len(d.Clips) != n {
		t.Errorf("reslice: %v, %d clips (was %d)", err, len(d.Clips), n)
	}
}

type fakeEar map[string]Heard // clip duration key → what it hears

func (f fakeEar) Transcribe(_ context.Context, pcm []float32) (Heard, error) {
	h, ok := f[fmt.Sprintf("%.1f", float64(len(pcm))/16000)]
	if !ok {
		return Heard{}, errors.New("unexpected clip")
	}
	return h, nil
}

func TestLabelAndProofread(t *testing.T) {
	d := newDataset(t)
	mk := func(id string, secs float64, text string, edited bool) {
		c := Clip{ID: id, Source: "s0001", Path: filepath.Join("clips", id+".wav"), Seconds: secs, Text: text, Edited: edited}
		if err := d.writeWAV(c.Path, make([]float32, int(secs*16000))); err != nil {
			t.Fatal(err)
		}
		d.Clips = append(d.Clips, c)
	}
	mk("a", 3.0, "", false)
	mk("b", 4.0, "", false)
	mk("c", 5.0, "", false)
	mk("d", 6.0, "", false)
	mk("e", 7.0, "the cat sat on the mat", true) // a prompt the person read
	mk("f", 8.0, "il pleut des cordes", true)    // a prompt in the wrong language
	mk("g", 9.0, "", false)
	d.Clips[6].Rejected = "too noisy (3 dB SNR, need 15)"
	ear := fakeEar{
		"3.0": {Text: "hello there", Lang: "en", Event: "Speech"},
		"4.0": {Text: "good morning", Lang: "en", Event: "Speech"},
		"5.0": {Text: "", Lang: "en", Event: "BGM"},
		"6.0": {Text: "你好", Lang: "zh", Event: "Speech"},
		"7.0": {Text: "the cat sat on a mat", Lang: "en", Event: "Speech"},
		"8.0": {Text: "it is raining cats and dogs", Lang: "en", Event: "Speech"},
	}
	if err := d.Label(context.Background(), ear, LabelOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ text, warn string }{
		"a": {"hello there", ""},
		"b": {"good morning", ""},
		"c": {"", "sounds like BGM"},
		"d": {"你好", "language zh"},
		"e": {"the cat sat on the mat", ""},
		"f": {"il pleut des cordes", "does not match"},
		"g": {"", ""},
	}
	for _, c := range d.Clips {
		w := want[c.ID]
		if c.Text != w.text || (w.warn == "") != (c.Warning == "") || !strings.Contains(c.Warning, w.warn) {
			t.Errorf("clip %s: text %q warning %q, want %q / %q", c.ID, c.Text, c.Warning, w.text, w.warn)
		}
	}
	if d.Lang != "en" {
		t.Errorf("dataset language %q", d.Lang)
	}
	s := d.Summary()
	// a, b, d, e, f have text; c has none; g is rejected
	if s.Usable != 5 || s.Unlabelled != 1 || s.Warnings != 3 || s.Rejected["too noisy"] != 1 {
		t.Errorf("summary %+v", s)
	}
	if err := d.SetText("c", "  la la la  "); err != nil {
		t.Fatal(err)
	}
	if err := d.Drop("d", true); err != nil {
		t.Fatal(err)
	}
	if err := d.SetText("zz", "x"); !errors.Is(err, ErrNoClip) {
		t.Errorf("unknown clip: %v", err)
	}
	again, err := Open(d.Dir())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := again.Clip("c")
	dd, _ := again.Clip("d")
	if c.Text != "la la la" || !c.Edited || c.Warning != "" || !dd.Dropped {
		t.Errorf("edits not kept: %+v %+v", c, dd)
	}
	got := again.Summary()
	if got.Usable != 5 || got.Dropped != 1 || math.Abs(got.UsableMinutes-(3+4+5+7+8)/60.0) > 1e-9 {
		t.Errorf("after edits: %+v", got)
	}
	// the recogniser's texts are unchecked until the person confirms them (c was typed)
	unchecked := 0
	for _, c := range again.Clips {
		if c.Usable() && !c.Edited {
			unchecked++
		}
	}
	if c, _ := again.Clip("c"); got.Unchecked != unchecked || unchecked == 0 || !c.Edited {
		t.Errorf("%d unchecked clips, want %d", got.Unchecked, unchecked)
	}
	// Force relabels the recogniser's texts, never the person's
	ear["3.0"] = Heard{Text: "hello there again", Lang: "en", Event: "Speech"}
	if err := again.Label(context.Background(), ear, LabelOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	a, _ := again.Clip("a")
	c, _ = again.Clip("c")
	if a.Text != "hello there again" || c.Text != "la la la" {
		t.Errorf("forced relabel: a %q, c %q", a.Text, c.Text)
	}
	// ConfirmAll checks the rest (once; a second call has nothing left), and it is kept
	left := again.Summary().Unchecked
	if n, err := again.ConfirmAll(); n != left || n == 0 || err != nil {
		t.Errorf("ConfirmAll: %d, %v", n, err)
	}
	if n, _ := again.ConfirmAll(); n != 0 {
		t.Errorf("second ConfirmAll: %d", n)
	}
	if re, _ := Open(again.Dir()); re.Summary().Unchecked != 0 {
		t.Errorf("confirmation not saved: %+v", re.Summary())
	}
	b, _ := os.ReadFile(filepath.Join(d.Dir(), datasetFile))
	if !json.Valid(b) {
		t.Error("dataset.json is not valid JSON")
	}
}

func TestGroup(t *testing.T) {
	seg := func(a, b float64) vad.Segment { return vad.Segment{Start: int64(a * 16000), End: int64(b * 16000)} }
	o := SliceOptions{}
	o.fill()
	got := group([]vad.Segment{seg(0, 3), seg(3.5, 6), seg(8, 10), seg(10.2, 24), seg(24.5, 56)}, o)
	var s []string
	for _, g := range got {
		s = append(s, fmt.Sprintf("%.1f-%.1f%s", float64(g.start)/16000, float64(g.end)/16000, map[bool]string{true: "!"}[g.forced]))
	}
	want := "0.0-6.0 8.0-10.0 10.2-24.0 24.5-35.0! 35.0-45.5! 45.5-56.0!"
	if strings.Join(s, " ") != want {
		t.Errorf("groups %s, want %s", strings.Join(s, " "), want)
	}
}

func TestMismatch(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"The cat sat.", "the cat sat", false},
		{"the cat sat on the mat", "the cat sat on a mat", false},
		{"il pleut des cordes", "it is raining cats and dogs", true},
		{"hello", "", true},
		{"", "", false},
	} {
		if got := mismatch(c.a, c.b); got != c.want {
			t.Errorf("mismatch(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

func TestPrompts(t *testing.T) {
	for _, lang := range PromptLanguages() {
		ps := Prompts(lang)
		if len(ps) < 20 {
			t.Errorf("%s: %d prompts, want at least 20", lang, len(ps))
		}
		seen := map[string]bool{}
		var questions, exclamations int
		for _, p := range ps {
			if seen[p] {
				t.Errorf("%s: %q twice", lang, p)
			}
			seen[p] = true
			n := len([]rune(p))
			if lang == "en" {
				n = len(strings.Fields(p))
			}
			if lang == "en" && (n < 3 || n > 20) || lang == "zh" && (n < 8 || n > 30) {
				t.Errorf("%s: %q has length %d: too short or too long to read in one breath", lang, p, n)
			}
			questions += strings.Count(p, "?") + strings.Count(p, "？")
			exclamations += strings.Count(p, "!") + strings.Count(p, "！")
		}
		if questions < 5 || exclamations < 3 {
			t.Errorf("%s: %d questions and %d exclamations: the list should also sound like conversation", lang, questions, exclamations)
		}
	}
	// every letter of the alphabet is read somewhere in English
	all := strings.ToLower(strings.Join(Prompts("en"), " "))
	for c := 'a'; c <= 'z'; c++ {
		if !strings.ContainsRune(all, c) {
			t.Errorf("no English prompt has the letter %c", c)
		}
	}
	if got := Prompts("xx"); len(got) != len(Prompts("en")) {
		t.Errorf("unknown language: %d prompts, want the English ones", len(got))
	}
	d := newDataset(t)
	ps := Prompts("en")
	if _, err := d.AddRecording(make([]float32, 16000), "  "+ps[1]+" "); err != nil {
		t.Fatal(err)
	}
	second, err := d.AddRecording(make([]float32, 16000), ps[1])
	if err != nil {
		t.Fatal(err)
	}
	got := d.Recorded(ps[:3])
	if got[0] || !got[1] || got[2] {
		t.Errorf("Recorded = %v, want only the second", got)
	}
	if id := d.PromptSource(ps[1]); id != second.ID {
		t.Errorf("PromptSource = %q, want the last take %q", id, second.ID)
	}
	if id := d.PromptSource(ps[0]); id != "" {
		t.Errorf("PromptSource of an unread prompt = %q", id)
	}
}

func TestCheckAndAddTake(t *testing.T) {
	voice := speak(t, "please remind me to buy bread and milk on the way home tonight", "en-us")
	take := concat(silence(0.4), voice, silence(0.5))
	for _, c := range []struct {
		name          string
		pcm           []float32
		problem, warn string
	}{
		{"good", take, "", ""},
		{"short", voice[:8000], "only 0.5 s", ""},
		{"silent", silence(3), "heard almost nothing", ""},
		{"clipped", gain(take, 40), "", "clipped"},
		{"quiet", gain(take, 0.05), "", "quiet"},
	} {
		problem, warn := CheckTake(c.pcm)
		if (c.problem == "") != (problem == "") || !strings.Contains(problem, c.problem) || (c.warn == "") != (warn == "") || !strings.Contains(warn, c.warn) {
			t.Errorf("%s: problem %q, warn %q", c.name, problem, warn)
		}
	}
	d := newDataset(t)
	p := Prompts("en")[3]
	if _, _, err := d.AddTake(silence(2), p); !errors.Is(err, ErrBadTake) || len(d.Sources) != 0 {
		t.Errorf("silent take: %v, %d sources", err, len(d.Sources))
	}
	first, _, err := d.AddTake(take, p)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := d.AddTake(take, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Sources) != 1 || d.Sources[0].ID != second.ID || d.PromptSource(p) != second.ID {
		t.Errorf("the retake did not replace the take: %+v", d.Sources)
	}
	if _, err := os.Stat(d.Abs(first.Path)); !os.IsNotExist(err) {
		t.Errorf("the first take's audio is left behind: %v", err)
	}
}
