package wake

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
)

func openDetector(t testing.TB, cfg Config) *Detector {
	t.Helper()
	gputest.RequireModel(t, "openwakeword/melspectrogram.onnx")
	gputest.RequireModel(t, "openwakeword/embedding_model.onnx")
	gputest.RequireModel(t, "openwakeword/hey_jarvis_v0.1.onnx")
	d, err := New("", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

var voices = []string{"en-us", "en-gb", "en+f3", "en-us+m5", "en+f2", "en-gb+m3", "en+m7", "en+f4"}

func maxScore(s []float32) float32 {
	var m float32
	for _, v := range s {
		m = max(m, v)
	}
	return m
}

// TestHeyJarvis: the wake phrase in eight espeak-ng voices is detected in each; other phrases
// (including the wake word alone, and other wake words) never fire hey_jarvis. The near miss
// "hey travis" is measured and reported, not asserted.
func TestHeyJarvis(t *testing.T) {
	d := openDetector(t, Config{})
	ctx := context.Background()
	hits := 0
	for _, v := range voices {
		b := audiotest.RequireSpeech(t, "hey jarvis", v, 0)
		dets, scores, err := d.Process(ctx, audio.NewBufferSource(b))
		if err != nil {
			t.Fatal(err)
		}
		if len(dets) != 1 || dets[0].Label != "hey_jarvis_v0.1" {
			t.Errorf("voice %s: detections %+v (max score %.2f), want exactly one", v, dets, maxScore(scores["hey_jarvis_v0.1"]))
			continue
		}
		hits++
		// fires after the phrase, within half a second of its end (1 s of lead-in silence)
		end := 1 + b.Duration().Seconds()
		if dets[0].Sec < end-0.5 || dets[0].Sec > end+0.5 {
			t.Errorf("voice %s: fired at %.2f s, phrase ends at %.2f s", v, dets[0].Sec, end)
		}
	}
	t.Logf("hey jarvis: detected in %d of %d voices", hits, len(voices))
	negatives := []string{"what time is it", "jarvis", "hello there", "hey there, how are you", "turn on the lights", "alexa", "play some jazz music", "harvest the carrots"}
	fa, n := 0, 0
	for i, p := range negatives {
		for _, v := range []string{voices[i%len(voices)], voices[(i+3)%len(voices)], voices[(i+5)%len(voices)]} {
			b := audiotest.RequireSpeech(t, p, v, 0)
			dets, _, err := d.Process(ctx, audio.NewBufferSource(b))
			if err != nil {
				t.Fatal(err)
			}
			n++
			if len(dets) > 0 {
				fa++
				t.Errorf("false alarm on %q (%s): %+v", p, v, dets)
			}
		}
	}
	t.Logf("other phrases: %d false alarms in %d clips", fa, n)
	near := 0
	for _, v := range voices {
		b := audiotest.RequireSpeech(t, "hey travis", v, 0)
		dets, _, _ := d.Process(ctx, audio.NewBufferSource(b))
		if len(dets) > 0 {
			near++
		}
	}
	t.Logf("near miss \"hey travis\": fires in %d of %d voices (a known confusion, reported not asserted)", near, len(voices))
	// run-on commands: "hey jarvis" followed by a question after a pause of 0, 150 or 300 ms
	cmd := audiotest.RequireSpeech(t, "what time is it", "en-us", 0)
	for _, gap := range []float64{0, 0.15, 0.3} {
		found := 0
		for _, v := range voices {
			b := audiotest.RequireSpeech(t, "hey jarvis", v, 0)
			x := append(append(append([]float32(nil), b.Data...), make([]float32, int(gap*Rate))...), cmd.Data...)
			dets, _, _ := d.Process(ctx, audio.NewBufferSource(&audio.Buffer{Format: audio.Mono16k, Data: x}))
			if len(dets) > 0 {
				found++
			}
		}
		t.Logf("\"hey jarvis\" + %.0f ms + \"what time is it\": detected in %d of %d voices", gap*1000, found, len(voices))
	}
}

// TestStreamInConversation: the wake phrase inside a minute of other speech fires once, at the
// right place, whatever the chunking; a repeat inside the refractory period does not fire again.
func TestStreamInConversation(t *testing.T) {
	d := openDetector(t, Config{})
	ctx := context.Background()
	var x []float32
	add := func(text, voice string, gap float64) (float64, float64) {
		b := audiotest.RequireSpeech(t, text, voice, 0)
		start := float64(len(x)) / Rate
		x = append(x, b.Data...)
		end := float64(len(x)) / Rate
		x = append(x, make([]float32, int(gap*Rate))...)
		return start, end
	}
	add("good morning, what is on my calendar today", "en-us", 0.8)
	add("remind me to call the office at noon", "en+f3", 1.2)
	_, wakeEnd := add("hey jarvis", "en-gb", 0.3)
	add("hey jarvis", "en-gb", 0.5) // a repeat within the 2 s refractory period
	add("what is the weather like in london this afternoon", "en-gb", 1.0)
	add("and set a timer for the pasta please", "en+f2", 1.0)
	noise := audiotest.WhiteNoise(len(x), 0.003, 3)
	audio.Mix(x, noise, 1)

	run := func(chunk int) []Detection {
		d.Reset()
		var dets []Detection
		for i := 0; i < len(x); i += chunk {
			got, err := d.Accept(ctx, x[i:min(i+chunk, len(x))])
			if err != nil {
				t.Fatal(err)
			}
			dets = append(dets, got...)
		}
		got, _ := d.Flush(ctx)
		return append(dets, got...)
	}
	want := run(Chunk)
	if len(want) != 1 {
		t.Fatalf("%d detections, want 1: %+v", len(want), want)
	}
	if want[0].Sec < wakeEnd-0.3 || want[0].Sec > wakeEnd+0.6 {
		t.Errorf("fired at %.2f s, the phrase ends at %.2f s", want[0].Sec, wakeEnd)
	}
	for _, chunk := range []int{160, 777, 16000} {
		got := run(chunk)
		if len(got) != len(want) || got[0].At != want[0].At || got[0].Score != want[0].Score {
			t.Errorf("chunks of %d: %+v, want %+v", chunk, got, want)
		}
	}
}

func TestModelsAndErrors(t *testing.T) {
	gputest.RequireModel(t, "openwakeword/timer_v0.1.onnx")
	d := openDetector(t, Config{Models: []string{"hey_jarvis", "timer_v0.1", "alexa"}})
	if got := strings.Join(d.Models(), ","); got != "hey_jarvis_v0.1,timer_v0.1,alexa_v0.1" {
		t.Errorf("models %s", got)
	}
	b := audiotest.RequireSpeech(t, "set a timer for five minutes", "en-us", 0)
	if _, _, err := d.Process(context.Background(), audio.NewBufferSource(b)); err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"5_minute_timer", "hey_jarvis_v0.1", "alexa_v0.1"} {
		if _, ok := d.Scores()[label]; !ok {
			t.Errorf("no score for %s: %v", label, d.Scores())
		}
	}
	if _, err := New("", Config{Models: []string{"hey_nobody"}}); !errors.Is(err, ErrNoModel) || !strings.Contains(err.Error(), "hey_jarvis_v0.1") {
		t.Errorf("unknown model: %v (want ErrNoModel listing the available ones)", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.onnx")
	os.WriteFile(bad, []byte("garbage"), 0o644)
	if _, err := New("", Config{Models: []string{bad}}); err == nil {
		t.Error("garbage model accepted")
	}
	// the embedding model is not a wake classifier
	if _, err := New("", Config{Models: []string{filepath.Join(DefaultDir(), "embedding_model.onnx")}}); !errors.Is(err, ErrBadModel) {
		t.Errorf("embedding model as wake model: %v", err)
	}
	if _, err := New("", Config{Threshold: 2}); err == nil {
		t.Error("threshold 2 accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Accept(ctx, make([]float32, 4*Chunk)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// Each of the detector's models (melspectrogram, embedding, one classifier) is loaded once.
func TestModelsLoadedOnce(t *testing.T) {
	gputest.RequireModel(t, "openwakeword/hey_jarvis_v0.1.onnx")
	before := gpu.Loads()
	openDetector(t, Config{})
	if n := gpu.Loads() - before; n != 3 {
		t.Errorf("loaded %d sessions for 3 models", n)
	}
}

// TestSilenceSkipsTheModels: after a stretch of digital silence the models' outputs no longer
// change, so further silent chunks repeat them; every chunk's score, and the detections, are
// the same as when every chunk runs the models.
func TestSilenceSkipsTheModels(t *testing.T) {
	ctx := context.Background()
	var x []float32
	for _, v := range []string{"en-gb", "en-us"} {
		x = append(x, make([]float32, 5*Rate)...)
		x = append(x, audiotest.RequireSpeech(t, "hey jarvis", v, 0).Data...)
	}
	x = append(x, make([]float32, 4*Rate)...)
	trace := func(d *Detector) ([]float32, []Detection) {
		var scores []float32
		var dets []Detection
		for i := 0; i < len(x); i += Chunk {
			got, err := d.Accept(ctx, x[i:min(i+Chunk, len(x))])
			if err != nil {
				t.Fatal(err)
			}
			dets = append(dets, got...)
			scores = append(scores, d.scores["hey_jarvis_v0.1"])
		}
		return scores, dets
	}
	gated := openDetector(t, Config{})
	gs, gd := trace(gated)
	if gated.steady == 0 || gated.steady > 40 {
		t.Fatalf("steady after %d silent chunks", gated.steady)
	}
	as, ad := trace(openDetector(t, Config{Quiet: -1}))
	if len(gd) != 2 || len(ad) != 2 {
		t.Fatalf("detections: %+v with the gate, %+v without; want two each", gd, ad)
	}
	for i := range gd {
		if gd[i].At != ad[i].At || math.Abs(float64(gd[i].Score-ad[i].Score)) > 1e-5 {
			t.Errorf("detection %d: %+v with the gate, %+v without", i, gd[i], ad[i])
		}
	}
	for i := range gs {
		if math.Abs(float64(gs[i]-as[i])) > 1e-5 {
			t.Fatalf("chunk %d: score %.6f with the gate, %.6f without", i, gs[i], as[i])
		}
	}
	// a gate over every chunk: once steady, the models never run again, so nothing fires
	if _, dets := trace(openDetector(t, Config{Quiet: 10})); len(dets) != 0 {
		t.Errorf("a gate above every chunk still detected %+v: the models ran", dets)
	}
}
