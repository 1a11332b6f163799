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
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/voices"
)

// TestVoicesClone clones a voice from an espeak-ng clip with the tiny ChatTTS export, speaks
// with it, and refuses bad input in the step where it happens: a clip of silence, one longer
// than a minute, a transcript in another language than the audio, a voice file whose prompt
// codes are out of range.
func TestVoicesClone(t *testing.T) {
	models := assets.ModelsDir()
	if _, err := os.Stat(filepath.Join(models, "silero-vad-v5", "silero_vad.onnx")); err != nil {
		t.Skipf("Silero VAD not set up (make setup): %v", err)
	}
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng not installed")
	}
	gputest.RequireORT(t)
	isolate(t)
	t.Setenv("PARLEY_MODELS", models)
	tiny, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "chattts", "tiny"))
	dir := t.TempDir()
	out, err := exec.Command("espeak-ng", "-v", "en-us", "--stdout", "what time is it in london and in tokyo right now").Output()
	if err != nil {
		t.Fatal(err)
	}
	clip := filepath.Join(dir, "My Voice.wav")
	os.WriteFile(clip, out, 0o644)
	write := func(name string, secs float64) string {
		p := filepath.Join(dir, name)
		b := &audio.Buffer{Format: audio.Mono16k, Data: make([]float32, int(secs*16000))}
		if err := audio.WriteWAVFile(p, b, audio.S16); err != nil {
			t.Fatal(err)
		}
		return p
	}

	code, stdout, errs := runCLI(t, "voices", "clone", clip, "--model", tiny, "--text", "what time is it in london and in tokyo right now", "--seeds", "2", "--json")
	if code != 0 {
		t.Fatalf("clone: exit %d\n%s%s", code, stdout, errs)
	}
	var res struct {
		Name    string
		Frames  int
		Text    string
		ClipF0  float64 `json:"clip_f0"`
		VoiceF0 float64 `json:"voice_f0"`
		Pitch   float64
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Name != "my-voice" || res.Frames < 50 {
		t.Fatalf("clone result %s: %v", stdout, err)
	}
	lib, _ := voices.Open(voices.DefaultDir())
	v, err := lib.Get("my-voice")
	if err != nil || v.Kind != voices.KindClone || v.Sample == nil || len(v.Sample.Codes) != 4*res.Frames {
		t.Fatalf("saved voice %+v: %v", v, err)
	}
	if res.ClipF0 < 60 || v.Sample.Pitch != res.Pitch {
		t.Errorf("pitch: the clip at %.1f Hz, the voice saved with %v semitones, reported %v", res.ClipF0, v.Sample.Pitch, res.Pitch)
	}
	code, stdout, errs = runCLI(t, "voices", "clone", clip, "--model", tiny, "--text", "what time is it", "--seeds", "0", "--keep-pitch", "--name", "kept", "--json")
	if err := json.Unmarshal([]byte(stdout), &res); code != 0 || err != nil || res.Pitch != 0 || res.VoiceF0 != 0 {
		t.Errorf("--keep-pitch: exit %d, %s %s", code, stdout, errs)
	}
	wav := filepath.Join(dir, "out.wav")
	if code, _, errs := runCLI(t, "say", "--engine", "chattts", "--model", tiny, "--voice", "my-voice", "-o", wav, "Hello there."); code != 0 {
		t.Fatalf("say with the clone: %d %s", code, errs)
	}
	if st, err := os.Stat(wav); err != nil || st.Size() < 1000 {
		t.Fatalf("no audio from the clone: %v", err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{write("silence.wav", 5)}, "of speech found (silence, music or noise?)"},
		{[]string{write("long.wav", 65), "--name", "long"}, "longer than 60 s"},
		{[]string{clip, "--name", "zh", "--text", "今天天气很好"}, "is not in the language of"},
		{[]string{clip}, "exists"},
	} {
		code, _, errs := runCLI(t, append([]string{"voices", "clone", "--model", tiny}, c.args...)...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("clone %v: exit %d, %q; want %q", c.args, code, errs, c.want)
		}
	}
	// a damaged voice file: a prompt code out of range
	b, _ := os.ReadFile(filepath.Join(voices.DefaultDir(), "my-voice.json"))
	b = bytes.Replace(b, []byte(`"name": "my-voice"`), []byte(`"name": "broken"`), 1)
	var raw map[string]any
	json.Unmarshal(b, &raw)
	raw["sample"].(map[string]any)["codes"].([]any)[5] = 7000
	b, _ = json.Marshal(raw)
	os.WriteFile(filepath.Join(voices.DefaultDir(), "broken.json"), b, 0o644)
	code, _, errs = runCLI(t, "say", "--engine", "chattts", "--model", tiny, "--voice", "broken", "-o", wav, "Hello.")
	if code == 0 || !strings.Contains(errs, "prompt code 7000 at frame 1, stream 1 is outside 0..624") {
		t.Errorf("say with a damaged clone: %d %s", code, errs)
	}
}
