package cli

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/gpu/gputest"
)

func transcribeVerbose(t *testing.T, file string) (text string, duration float64, stderr string) {
	t.Helper()
	code, out, errs := runCLI(t, "--provider", "cpu", "transcribe", "--model", tinyASR, "--format", "verbose_json", file)
	if code != 0 {
		t.Fatalf("%s: exit %d: %s", file, code, errs)
	}
	var v struct {
		Text     string  `json:"text"`
		Duration float64 `json:"duration"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return v.Text, v.Duration, errs
}

// A WAV whose recorder was killed before it wrote the data size (0), and one cut in half,
// are read as far as they go, with a warning, as sox and ffmpeg read them.
func TestTranscribeDamagedWAV(t *testing.T) {
	gputest.RequireORT(t)
	dir := isolate(t)
	good := speechWAV(t, dir, 16000, 1)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	wantText, wantDur, errs := transcribeVerbose(t, good)
	if strings.Contains(errs, "warning") {
		t.Fatalf("intact file warned: %s", errs)
	}

	zero := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(zero[4:], 0)  // RIFF size
	binary.LittleEndian.PutUint32(zero[40:], 0) // data size (canonical 44-byte header)
	if string(zero[36:40]) != "data" {
		t.Fatalf("speechWAV header is not canonical: %q", zero[36:40])
	}
	zeroFile := filepath.Join(dir, "killed.wav")
	os.WriteFile(zeroFile, zero, 0o644)
	text, dur, errs := transcribeVerbose(t, zeroFile)
	if text != wantText || math.Abs(dur-wantDur) > 0.01 {
		t.Errorf("data size 0: %q (%.2f s), want %q (%.2f s)", text, dur, wantText, wantDur)
	}
	if !strings.Contains(errs, "warning: "+zeroFile) || !strings.Contains(errs, "data size 0") {
		t.Errorf("data size 0: no warning: %q", errs)
	}

	half := filepath.Join(dir, "half.wav")
	os.WriteFile(half, data[:44+(len(data)-44)/2], 0o644)
	_, dur, errs = transcribeVerbose(t, half)
	if math.Abs(dur-wantDur/2) > 0.01 {
		t.Errorf("cut in half: %.2f s, want %.2f s", dur, wantDur/2)
	}
	if !strings.Contains(errs, "warning: "+half) || !strings.Contains(errs, "cut short") {
		t.Errorf("cut in half: no warning: %q", errs)
	}
}

// encode writes b through ffmpeg in another format (by the file name's extension).
func encode(t *testing.T, b *audio.Buffer, name string) string {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg is not installed")
	}
	dir := t.TempDir()
	wav := filepath.Join(dir, "in.wav")
	if err := audio.WriteWAVFile(wav, b, audio.S16); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	// to a pipe, as many tools write MP3: no gapless header
	cmd := exec.Command("sh", "-c", `ffmpeg -nostdin -loglevel error -i "$1" -f "$2" - | cat > "$3"`, "sh", wav,
		strings.TrimPrefix(filepath.Ext(name), "."), out)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, o)
	}
	return out
}

// parley wake reads any format ffmpeg reads, with the same detection times as the WAV.
func TestWakeOtherFormats(t *testing.T) {
	gputest.RequireModel(t, "openwakeword/hey_jarvis_v0.1.onnx")
	speech := audiotest.RequireSpeech(t, "hey jarvis", "en-us", 0)
	lead := &audio.Buffer{Format: speech.Format, Data: append(make([]float32, speech.SampleRate), speech.Data...)}
	lead.Data = append(lead.Data, make([]float32, speech.SampleRate)...)
	dir := t.TempDir()
	wav := filepath.Join(dir, "hey.wav")
	if err := audio.WriteWAVFile(wav, lead, audio.S16); err != nil {
		t.Fatal(err)
	}
	detect := func(file string) float64 {
		code, out, errs := runCLI(t, "wake", "--model", "hey_jarvis_v0.1", file)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", file, code, errs)
		}
		var d struct{ Label string }
		var sec struct {
			Sec float64 `json:"sec"`
		}
		json.Unmarshal([]byte(out), &d)
		json.Unmarshal([]byte(out), &sec)
		if d.Label != "hey_jarvis_v0.1" || strings.Count(out, "\n") != 1 {
			t.Fatalf("%s: detections %q", file, out)
		}
		return sec.Sec
	}
	want := detect(wav)
	for _, name := range []string{"hey.mp3", "hey.flac", "hey.ogg"} {
		if got := detect(encode(t, lead, name)); math.Abs(got-want) > 0.09 { // one 80 ms step
			t.Errorf("%s: detected at %.3f s, the WAV at %.3f s", name, got, want)
		}
	}
}

// vad on an MP3 written to a pipe (no gapless header) reports the WAV's times: the priming
// ffmpeg leaves in is removed in the shared decode path.
func TestVADMP3Times(t *testing.T) {
	gputest.RequireModel(t, "silero-vad-v5/silero_vad.onnx")
	speech := audiotest.RequireSpeech(t, "the quick brown fox jumps over the lazy dog", "en-us", 0)
	b := &audio.Buffer{Format: speech.Format, Data: append(make([]float32, speech.SampleRate), speech.Data...)}
	b.Data = append(b.Data, make([]float32, speech.SampleRate)...)
	b16, err := audio.ResampleBuffer(b, 16000)
	if err != nil {
		t.Fatal(err)
	}
	wav := filepath.Join(t.TempDir(), "fox.wav")
	audio.WriteWAVFile(wav, b16, audio.S16)
	starts := func(file string) []float64 {
		code, out, errs := runCLI(t, "vad", file)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", file, code, errs)
		}
		var r vadFileReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		var s []float64
		for _, seg := range r.Segments {
			s = append(s, seg.StartSec, seg.EndSec)
		}
		return s
	}
	want := starts(wav)
	got := starts(encode(t, b16, "fox.mp3"))
	if len(got) != len(want) || len(want) == 0 {
		t.Fatalf("mp3 segments %v, WAV %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 0.035 { // one 32 ms VAD window
			t.Errorf("mp3 boundary %d at %.3f s, WAV at %.3f s", i, got[i], want[i])
		}
	}
}
