package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/voices"
)

func TestSayCLI(t *testing.T) {
	dir := isolate(t)
	out := filepath.Join(dir, "out.wav")
	code, _, errOut := runCLI(t, "say", "-o", out, "--seed", "7", "Hello [uv_break] world [bogus].")
	if code != 0 {
		t.Fatalf("say exited %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "[bogus]") {
		t.Errorf("unknown control not reported: %q", errOut)
	}
	// the default voice (tts.engine auto) is the demo voice, whose card meets its goal: 24 kHz
	b, err := audio.ReadWAVFile(out)
	if err != nil || b.Duration().Seconds() < 0.5 || b.SampleRate != 24000 {
		t.Fatalf("wav: %v %v", b, err)
	}
	espeak := filepath.Join(dir, "espeak.wav")
	if code, _, errOut := runCLI(t, "say", "--engine", "espeak", "-o", espeak, "--seed", "7", "Hello [uv_break] world."); code != 0 {
		t.Fatalf("say --engine espeak exited %d: %s", code, errOut)
	}
	if b, err := audio.ReadWAVFile(espeak); err != nil || b.Duration().Seconds() < 0.5 || b.SampleRate != 22050 {
		t.Fatalf("espeak wav: %v %v", b, err)
	}
	// resampled output and raw formats
	code, _, errOut = runCLI(t, "say", "-o", filepath.Join(dir, "o16.wav"), "--rate", "16000", "hi")
	if b, _ := audio.ReadWAVFile(filepath.Join(dir, "o16.wav")); code != 0 || b == nil || b.SampleRate != 16000 {
		t.Errorf("--rate 16000: %d %s", code, errOut)
	}
	code, _, _ = runCLI(t, "say", "-o", filepath.Join(dir, "o.f32"), "hi")
	if st, err := os.Stat(filepath.Join(dir, "o.f32")); code != 0 || err != nil || st.Size()%4 != 0 || st.Size() == 0 {
		t.Errorf("f32 output: %v", err)
	}
	for _, args := range [][]string{
		{"say", "-o", out, ""},
		{"say", "-o", out, "--speed", "9", "hi"},
		{"say", "-o", out, "--engine", "festival", "hi"},
		{"say", "-o", out, "--voice", "no-such-voice-xyz", "hi"},
		{"say", "-o", out, "[uv_break] [laugh_2]"},
		{"say", "-o", filepath.Join(dir, "o.mp3"), "hi"}, // not WAV bytes under an .mp3 name
	} {
		if code, _, _ := runCLI(t, args...); code == 0 {
			t.Errorf("%v succeeded", args)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "o.mp3")); err == nil {
		t.Errorf("say -o o.mp3 wrote a file it cannot encode")
	}
	if code, _, errOut := runCLI(t, "say", "-o", filepath.Join(dir, "o.mp3"), "-format", "wav", "hi"); code != 0 {
		t.Errorf("-format wav overrides the name: %d %s", code, errOut)
	}
	code, stdout, _ := runCLI(t, "say", "--capabilities")
	if code != 0 || !strings.Contains(stdout, `"engine": "chattts"`) || !strings.Contains(stdout, `"laugh": "native"`) {
		t.Errorf("capabilities: %d %s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "say", "--engine", "espeak", "--capabilities")
	if code != 0 || !strings.Contains(stdout, `"laugh": "emulated"`) {
		t.Errorf("espeak capabilities: %d %s", code, stdout)
	}
}

func TestVoicesCLI(t *testing.T) {
	dir := isolate(t)
	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"voices", "create", "warm", "--engine", "espeak", "--seed", "42", "--temperature", "0.6"}, 0, "created warm"},
		{[]string{"voices", "create", "warm", "--seed", "1"}, 1, "already exists"},
		{[]string{"voices", "create", "../evil", "--seed", "1"}, 1, "name"},
		{[]string{"voices", "create", "two", "--seed", "1", "--preset", "en-us"}, 1, "exactly one"},
		{[]string{"voices", "create", "gb", "--preset", "en-gb+f2"}, 0, "created gb"},
		{[]string{"voices", "list"}, 0, "seed 42"},
		{[]string{"voices", "show", "warm"}, 0, `"seed": 42`},
		{[]string{"voices", "mix", "blend", "--engine", "kokoro", "af_heart=0.7", "am_adam=0.3"}, 0, "af_heart=0.7"},
		{[]string{"voices", "export", "warm", "-o", filepath.Join(dir, "warm.json")}, 0, ""},
		{[]string{"voices", "import", filepath.Join(dir, "warm.json"), "--name", "warm2"}, 0, "imported warm2"},
		{[]string{"voices", "rm", "warm2"}, 0, "removed"},
		{[]string{"voices", "rm", "warm2"}, 1, "no such voice"},
		{[]string{"voices", "preview", "warm", "-o", filepath.Join(dir, "p.wav")}, 0, ""},
		{[]string{"say", "--voice", "blend", "-o", filepath.Join(dir, "x.wav"), "hi"}, 1, "kokoro"},
		{[]string{"voices", "bogus"}, 1, "unknown command"},
	}
	for _, s := range steps {
		code, out, errOut := runCLI(t, s.args...)
		if code != s.code || !strings.Contains(out+errOut, s.want) {
			t.Errorf("%v: exit %d, output %q%q; want exit %d containing %q", s.args, code, out, errOut, s.code, s.want)
		}
	}
	if b, err := audio.ReadWAVFile(filepath.Join(dir, "p.wav")); err != nil || b.Duration().Seconds() < 2 {
		t.Errorf("preview: %v", err)
	}
	// a hostile file in the library is reported by list, not fatal
	os.WriteFile(filepath.Join(dir, "data", "parley", "voices", "evil.json"), []byte(`{"format":"parley-voice","version":1,"name":"evil","engine":"kokoro","kind":"embedding","embedding":{"dim":3,"data":[1,2,3]},"defaults":{},"created":"2024-01-01T00:00:00Z"}`), 0o644)
	code, out, errOut := runCLI(t, "voices", "list")
	if code != 0 || !strings.Contains(out, "warm") || !strings.Contains(errOut, "dimension 3") {
		t.Errorf("list with a bad file: %d %q %q", code, out, errOut)
	}
}

// TestSayChatTTS drives the ChatTTS engine end to end on the tiny random export: say with a
// seed, native capabilities, a ChatTTS seed voice and a mix of two of them.
func TestSayChatTTS(t *testing.T) {
	gputest.RequireORT(t)
	dir := isolate(t)
	model := "../../testdata/chattts/tiny"
	out := filepath.Join(dir, "c.wav")
	code, _, errOut := runCLI(t, "say", "--engine", "chattts", "--model", model, "--seed", "3", "-o", out, "hello world [laugh]")
	if code != 0 {
		t.Fatalf("say --engine chattts: %d %s", code, errOut)
	}
	if b, err := audio.ReadWAVFile(out); err != nil || b.SampleRate != 24000 || b.Duration() <= 0 {
		t.Fatalf("wav: %v %v", b, err)
	}
	spk16, err := voices.EncodeChatTTSSpeaker([]float32{1, -1, 0.5, 2, 0, 0.25, -0.5, 1, 1, 1, -2, 0.1, 0.2, 0.3, 0.4, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runCLI(t, "say", "--engine", "chattts", "--model", model, "--capabilities")
	if code != 0 || !strings.Contains(stdout, `"laugh": "native"`) || !strings.Contains(stdout, `"top_k": "native"`) {
		t.Errorf("capabilities: %d %s", code, stdout)
	}
	for _, s := range []struct {
		args []string
		want string
	}{
		{[]string{"voices", "create", "c1", "--engine", "chattts", "--seed", "11"}, "created c1"},
		{[]string{"voices", "create", "c2", "--engine", "chattts", "--seed", "12"}, "created c2"},
		{[]string{"voices", "mix", "cm", "--engine", "chattts", "c1=0.5", "c2=0.5"}, "seed:11=0.5"},
		{[]string{"say", "--voice", "c1", "--model", model, "-o", filepath.Join(dir, "c1.wav"), "hello"}, ""},
		{[]string{"say", "--voice", "cm", "--model", model, "-o", filepath.Join(dir, "cm.wav"), "hello"}, ""},
		// a ChatTTS speaker string of the model's own size (16 for the tiny export)
		{[]string{"voices", "create", "cs", "--engine", "chattts", "--speaker", spk16}, "created cs"},
		{[]string{"say", "--voice", "cs", "--model", model, "-o", filepath.Join(dir, "cs.wav"), "hello"}, ""},
	} {
		if code, o, e := runCLI(t, s.args...); code != 0 || !strings.Contains(o+e, s.want) {
			t.Errorf("%v: exit %d %q %q", s.args, code, o, e)
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, "c1.wav"))
	b, _ := os.ReadFile(filepath.Join(dir, "cm.wav"))
	if len(a) == 0 || len(b) == 0 || string(a) == string(b) {
		t.Errorf("seed voice and mix gave %d and %d bytes (equal: %v)", len(a), len(b), string(a) == string(b))
	}
}

// TestChatTTSBecomesDefault: after `parley models import DIR` of a ChatTTS export, tts.engine
// auto (the default) speaks with it; before, with the demo voice (its card meets its goal).
func TestChatTTSBecomesDefault(t *testing.T) {
	gputest.RequireORT(t)
	isolate(t)
	inUse := func(o, id string) bool {
		for _, line := range strings.Split(o, "\n") {
			if strings.HasPrefix(line, id+" ") {
				return strings.Contains(line, "in use")
			}
		}
		return false
	}
	code, stdout, _ := runCLI(t, "say", "--capabilities")
	if code != 0 || !strings.Contains(stdout, `"engine": "chattts"`) {
		t.Fatalf("before: %d %s", code, stdout)
	}
	if code, o, _ := runCLI(t, "models", "list"); code != 0 || !inUse(o, "chattts-demo") || inUse(o, "chattts") {
		t.Errorf("models list before: %s", o)
	}
	if code, o, e := runCLI(t, "models", "import", "-model", "chattts", "../../testdata/chattts/tiny"); code != 0 {
		t.Fatalf("import: %d %s %s", code, o, e)
	}
	code, stdout, _ = runCLI(t, "say", "--capabilities")
	if code != 0 || !strings.Contains(stdout, `"engine": "chattts"`) || !strings.Contains(stdout, `"laugh": "native"`) {
		t.Fatalf("after import: %d %s", code, stdout)
	}
	if code, o, _ := runCLI(t, "models", "list"); code != 0 || !inUse(o, "chattts") || inUse(o, "chattts-demo") {
		t.Errorf("models list: %s", o)
	}
}

// `say --provider cuda` on a machine without a usable GPU runs on the CPU and says why, as
// transcribe does: the provider reaches the voice's sessions (and `voices preview`'s, which
// opens the voice the same way), whose fallback is logged with its reason.
func TestSayProviderFallback(t *testing.T) {
	gputest.RequireORT(t)
	if r, err := gpu.DiscoverGPUs(); err == nil && len(r.Devices) > 0 {
		t.Skip("this machine has a GPU: the fallback is not taken")
	}
	dir := isolate(t)
	model := "../../testdata/chattts/tiny"
	for _, args := range [][]string{
		{"--provider", "cuda", "say", "--engine", "chattts", "--model", model, "--seed", "3", "-o", filepath.Join(dir, "c.wav"), "hello"},
		{"--provider", "cuda", "transcribe", "--model", tinyASR, filepath.Join("..", "..", "testdata", "speech", "test-000004.wav")},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if !strings.Contains(errOut, "execution provider unavailable, using CPU") || !strings.Contains(errOut, "wanted=cuda:0") || !strings.Contains(errOut, "reason=") {
			t.Errorf("%v: the fallback is not reported:\n%s", args[2], errOut)
		}
	}
}

// Sampling knobs espeak-ng ignores are reported only when given on the command line, not
// for the configuration's defaults.
func TestSayIgnoredKnobs(t *testing.T) {
	dir := isolate(t)
	out := filepath.Join(dir, "k.wav")
	code, _, errOut := runCLI(t, "say", "--engine", "espeak", "-o", out, "hi")
	if code != 0 || strings.Contains(errOut, "top_p") || strings.Contains(errOut, "temperature") {
		t.Errorf("config's knobs reported: %d %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "say", "--engine", "espeak", "--top-p", "0.5", "-o", out, "hi")
	if code != 0 || !strings.Contains(errOut, "top_p is not supported") || strings.Contains(errOut, "top_k") {
		t.Errorf("--top-p not reported (or more): %d %s", code, errOut)
	}
}
