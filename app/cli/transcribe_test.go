package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu/gputest"
)

const tinyASR = "../../testdata/sensevoice/tiny"

// speechWAV writes asr's golden speech clip as a WAV file in the given layout.
func speechWAV(t *testing.T, dir string, rate, channels int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "asr", "testdata", "fbank", "speech_en.pcm"))
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, len(b)/2)
	audio.DecodePCM(x, b, audio.S16)
	buf := &audio.Buffer{Format: audio.Mono16k, Data: x}
	if rate != 16000 || channels != 1 {
		if buf, err = audio.ResampleBuffer(buf, rate); err != nil {
			t.Fatal(err)
		}
		if channels == 2 {
			buf = &audio.Buffer{Format: audio.Format{SampleRate: rate, Channels: 2}, Data: audio.UpMix(nil, buf.Data, 2)}
		}
	}
	p := filepath.Join(dir, "speech.wav")
	if err := audio.WriteWAVFile(p, buf, audio.S16); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTranscribeCLI(t *testing.T) {
	gputest.RequireORT(t)
	dir := isolate(t)
	wav := speechWAV(t, dir, 16000, 1)
	code, out, errs := runCLI(t, "--provider", "cpu", "transcribe", "--model", tinyASR, "--format", "verbose_json", wav)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v struct {
		Duration float64 `json:"duration"`
		Segments []struct {
			Start, End float64
		} `json:"segments"`
		Words []struct{ Word string } `json:"words"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("verbose_json: %v\n%s", err, out)
	}
	if v.Duration < 2.4 || v.Duration > 2.5 || len(v.Segments) != 1 {
		t.Errorf("verbose_json: %+v", v)
	}
	for _, f := range []string{"text", "json", "srt", "vtt"} {
		code, out, errs := runCLI(t, "--provider", "cpu", "transcribe", "--model", tinyASR, "--format", f, wav)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", f, code, errs)
		}
		if f == "vtt" && !strings.HasPrefix(out, "WEBVTT\n") || f == "srt" && !strings.Contains(out, " --> ") {
			t.Errorf("%s output:\n%s", f, out)
		}
	}
	// Another layout of the same audio and standard input both work.
	stereo := speechWAV(t, t.TempDir(), 44100, 2)
	if code, _, errs := runCLI(t, "--provider", "cpu", "transcribe", "--model", tinyASR, stereo); code != 0 {
		t.Errorf("44.1 kHz stereo: exit %d: %s", code, errs)
	}
}

func TestTranscribeCLIErrors(t *testing.T) {
	gputest.RequireORT(t)
	dir := isolate(t)
	junk := filepath.Join(dir, "junk.bin")
	os.WriteFile(junk, []byte("this is not audio at all, not even close"), 0o644)
	empty := filepath.Join(dir, "empty.wav")
	os.WriteFile(empty, nil, 0o644)
	truncated := filepath.Join(dir, "trunc.wav")
	os.WriteFile(truncated, []byte("RIFF\x24\x00\x00\x00WAVEfmt "), 0o644)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no files", nil, 2, "no input files"},
		{"bad format", []string{"--format", "mp3", junk}, 2, "--format"},
		{"bad language", []string{"--lang", "fr", junk}, 2, "--lang"},
		{"srt of two files", []string{"--format", "srt", junk, junk}, 2, "one file"},
		{"missing file", []string{filepath.Join(dir, "nope.wav")}, 1, "nope.wav"},
		{"empty file", []string{empty}, 1, "empty input"},
		{"truncated WAV", []string{truncated}, 1, "trunc.wav"},
		{"not audio", []string{junk}, 1, "junk.bin"},
		{"bad model dir", []string{"--model", dir, junk}, 1, "no SenseVoice model file"},
	}
	for _, c := range cases {
		args := []string{"--provider", "cpu", "transcribe"}
		if c.name != "bad model dir" {
			args = append(args, "--model", tinyASR)
		}
		code, _, errs := runCLI(t, append(args, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d (want %d), stderr %q (want %q)", c.name, code, c.code, errs, c.want)
		}
	}
	// Without ffmpeg, non-WAV input gets a message that says so.
	t.Setenv("PATH", t.TempDir())
	if _, err := exec.LookPath("ffmpeg"); err == nil {
		t.Skip("ffmpeg still found")
	}
	code, _, errs := runCLI(t, "--provider", "cpu", "transcribe", "--model", tinyASR, junk)
	if code != 1 || !strings.Contains(errs, "ffmpeg") || !strings.Contains(errs, "not installed") {
		t.Errorf("without ffmpeg: exit %d, %q", code, errs)
	}
}

// TestTranscribeDefaultModel: with no --model and nothing installed, the embedded demo
// model is extracted and used; its decode is the one PyTorch gives (testdata/speech).
func TestTranscribeDefaultModel(t *testing.T) {
	if _, err := os.Stat(filepath.Join("..", "..", "assets", "demo", "sensevoice", "model.onnx")); err != nil {
		t.Skip("no demo model in this checkout")
	}
	gputest.RequireORT(t)
	dir := isolate(t)
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
	// greedy decoding (--lm none) is PyTorch's; the default beam search with the model's lm.bin
	// is checked in asr (TestDemoModel)
	code, out, errs := runCLI(t, "--provider", "cpu", "transcribe", "--itn=false", "--lang", "en", "--lm", "none", filepath.Join("..", "..", "testdata", "speech", "test-000004.wav"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// the golden decode travels with the model (refreshed whenever the model is retrained)
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "speech", "demo_expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Items []struct {
			File string
			En   struct{ Text string }
		}
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatalf("demo_expected.json: %v", err)
	}
	want := ""
	for _, it := range golden.Items {
		if it.File == "test-000004.wav" {
			want = it.En.Text
		}
	}
	if want == "" {
		t.Fatal("demo_expected.json has no en decode of test-000004.wav")
	}
	if got := strings.TrimSpace(out); got != want {
		t.Fatalf("got %q, want the demo model's decode %q (testdata/speech/demo_expected.json)", got, want)
	}
}

// --beam-alpha, --beam-beta, --beam-width, --beam-top and --beam-oov reach the recogniser: they win over the weights
// beside the model's lm.bin (lm.json), which fill the rest; the recogniser's debug log says
// what it decodes with. Bad values and beam flags with --lm none are usage errors.
func TestTranscribeBeamFlags(t *testing.T) {
	demo := filepath.Join("..", "..", "assets", "demo", "sensevoice")
	if _, err := os.Stat(filepath.Join(demo, "lm.bin")); err != nil {
		t.Skip("no demo model with lm.bin in this checkout")
	}
	gputest.RequireORT(t)
	dir := isolate(t)
	model := filepath.Join(dir, "model")
	if err := os.Mkdir(model, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"model.onnx", "tokens.txt", "lm.bin"} {
		abs, err := filepath.Abs(filepath.Join(demo, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(model, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(model, "lm.json"), []byte(`{"alpha": 0.9, "beta": 3.5, "width": 16}`), 0o644); err != nil {
		t.Fatal(err)
	}
	wav := filepath.Join("..", "..", "testdata", "speech", "test-000004.wav")
	beamLine := func(errs string) string {
		for _, l := range strings.Split(errs, "\n") {
			if strings.Contains(l, `msg="asr beam search"`) {
				return l
			}
		}
		return ""
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, "alpha=0.9 beta=3.5 width=16 top=8 prune=-10"},
		{[]string{"--beam-beta", "1.25"}, "alpha=0.9 beta=1.25 width=16 top=8"},
		{[]string{"--beam-alpha", "0.77", "--beam-beta", "-0.5", "--beam-width", "5"}, "alpha=0.77 beta=-0.5 width=5 top=8"},
		{[]string{"--beam-beta", "0"}, "alpha=0.9 beta=0 width=16"}, // an explicit zero, not lm.json's 3.5
		{[]string{"--beam-alpha", "0"}, "alpha=0 beta=3.5 width=16"},
		{[]string{"--beam-top", "12"}, "alpha=0.9 beta=3.5 width=16 top=12 prune=-10"},
		{[]string{"--beam-oov", "0"}, "prune=-10 oov=0 words=false"},
	} {
		args := append([]string{"--provider", "cpu", "--log-level", "debug", "transcribe", "--model", model, "--lang", "en"}, c.flags...)
		code, out, errs := runCLI(t, append(args, wav)...)
		if code != 0 || strings.TrimSpace(out) == "" {
			t.Fatalf("%v: exit %d, %q: %s", c.flags, code, out, errs)
		}
		if l := beamLine(errs); !strings.Contains(l, c.want) {
			t.Errorf("%v: the recogniser's beam %q, want %q", c.flags, l, c.want)
		}
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--lm", "none", "--beam-width", "4"}, "--beam-width with --lm none"},
		{[]string{"--beam-alpha", "-1"}, "--beam-alpha -1 outside 0..20"},
		{[]string{"--beam-alpha", "25"}, "--beam-alpha 25 outside 0..20"}, // lm.json's range too
		{[]string{"--beam-beta", "NaN"}, "--beam-beta NaN"},
		{[]string{"--beam-width", "-2"}, "--beam-width -2"},
		{[]string{"--beam-width", "many"}, "beam-width"},
		{[]string{"--beam-top", "-1"}, "--beam-top -1 outside 0..4096"},
		{[]string{"--lm", "none", "--beam-top", "4"}, "--beam-top with --lm none"},
		{[]string{"--beam-oov", "-1"}, "--beam-oov -1 outside 0..100"},
		{[]string{"--lm", "none", "--beam-oov", "2"}, "--beam-oov with --lm none"},
	} {
		code, _, errs := runCLI(t, append(append([]string{"--provider", "cpu", "transcribe", "--model", model}, c.flags...), wav)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.flags, code, errs, c.want)
		}
	}
	// a charge for unlisted words needs the word list beside the LM (lm.words.txt)
	words := filepath.Join(model, "lm.words.txt")
	code, _, errs := runCLI(t, "--provider", "cpu", "transcribe", "--model", model, "--beam-oov", "2", wav)
	if code == 0 || !strings.Contains(errs, words) {
		t.Errorf("--beam-oov without a word list: exit %d, %q; want a failure naming %s", code, errs, words)
	}
	if err := os.WriteFile(words, []byte("hello\nworld\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "--provider", "cpu", "--log-level", "debug", "transcribe", "--model", model, "--lang", "en",
		"--beam-oov", "2.5", wav)
	if l := beamLine(errs); code != 0 || strings.TrimSpace(out) == "" || !strings.Contains(l, "oov=2.5 words=true") {
		t.Errorf("--beam-oov with a word list: exit %d, %q, beam %q", code, out, l)
	}
	// a charge in lm.json is used, and --beam-oov 0 is an explicit zero over it, not "inherit"
	if err := os.WriteFile(filepath.Join(model, "lm.json"), []byte(`{"alpha": 0.9, "oov": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for flags, want := range map[string]string{"": "oov=3 words=true", "--beam-oov=0": "oov=0 words=true"} {
		args := []string{"--provider", "cpu", "--log-level", "debug", "transcribe", "--model", model, "--lang", "en"}
		if flags != "" {
			args = append(args, flags)
		}
		code, _, errs := runCLI(t, append(args, wav)...)
		if l := beamLine(errs); code != 0 || !strings.Contains(l, want) {
			t.Errorf("%q over lm.json's oov 3: exit %d, beam %q, want %q", flags, code, l, want)
		}
	}
	// --words: the user's own words join the list (comma-separated); each must be one word
	code, _, errs = runCLI(t, "--provider", "cpu", "--log-level", "debug", "transcribe", "--model", model, "--lang", "en",
		"--words", "anouk, kubernetes,", wav)
	if l := beamLine(errs); code != 0 || !strings.Contains(l, "own_words=2") {
		t.Errorf("--words: exit %d, beam %q", code, l)
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--words", "anouk,two words"}, `--words: "two words" is not one word`},
		{[]string{"--words", "anouk,..."}, `--words: "..." has no letter or digit`},
		{[]string{"--lm", "none", "--words", "anouk"}, "--words with --lm none"},
	} {
		code, _, errs := runCLI(t, append(append([]string{"--provider", "cpu", "transcribe", "--model", model}, c.flags...), wav)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.flags, code, errs, c.want)
		}
	}
}
