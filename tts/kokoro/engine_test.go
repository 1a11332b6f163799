package kokoro

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/control"
)

func testEngine(t testing.TB, dir string) *Engine {
	t.Helper()
	gputest.RequireORT(t)
	e, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		t.Fatalf("New(%s): %v", dir, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func synth(t testing.TB, e *Engine, req tts.Request) (*audio.Buffer, []string) {
	t.Helper()
	s, err := e.Synthesize(context.Background(), req)
	if err != nil {
		t.Fatalf("Synthesize(%q): %v", req.Text, err)
	}
	b, err := tts.ReadAll(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return b, s.Warnings()
}

// TestParity runs the same ids and style as the PyTorch reference and compares samples.
func TestParity(t *testing.T) {
	e := testEngine(t, "testdata")
	raw, err := os.ReadFile("testdata/reference.npy")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ReadNPY(raw)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{50, 83, 54, 156, 57, 135, 16, 65, 156, 87, 54, 46, 4}
	af, _ := e.Pack("af_tiny")
	got, err := e.run(context.Background(), ids, af.Style(len(ids)), 1)
	if err != nil {
		t.Fatal(err)
	}
	var maxDiff float64
	for i, v := range ref.Data {
		maxDiff = math.Max(maxDiff, math.Abs(float64(v-got[i])))
	}
	// the model integrates its phase with a float32 cumsum over ~5000 samples; ORT and
	// PyTorch sum in different orders, so allow a few thousandths on a 0.3 amplitude
	if maxDiff > 5e-3 {
		t.Errorf("max |ORT − PyTorch| = %g", maxDiff)
	}
}

func TestBothInputNames(t *testing.T) {
	dir := t.TempDir()
	// no config.json: the vocabulary comes from the model's "kokoro_config" metadata
	for _, f := range []string{"voices.npz"} {
		b, _ := os.ReadFile(filepath.Join("testdata", f))
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	b, _ := os.ReadFile("testdata/model_tokens.onnx")
	os.WriteFile(filepath.Join(dir, "model.onnx"), b, 0o644)
	e := testEngine(t, dir)
	if e.input != "tokens" || e.output != "audio" {
		t.Errorf("input %q output %q, want tokens/audio", e.input, e.output)
	}
	x, _ := synth(t, e, tts.Request{Text: "Hello world."})
	y, _ := synth(t, testEngine(t, "testdata"), tts.Request{Text: "Hello world."})
	if !slices.Equal(x.Data, y.Data) {
		t.Error("the tokens and input_ids exports of the same weights differ")
	}
}

func speech(b *audio.Buffer) time.Duration {
	return b.Format.Duration(len(tts.Trim(b.Data, b.SampleRate, -50, 0)))
}

func TestSpeedPausesSeeds(t *testing.T) {
	e := testEngine(t, "testdata")
	text := "The quick brown fox jumps over the lazy dog."
	base, _ := synth(t, e, tts.Request{Text: text})
	if base.SampleRate != SampleRate {
		t.Fatalf("rate %d", base.SampleRate)
	}
	for _, sp := range []float64{0.5, 2} {
		b, _ := synth(t, e, tts.Request{Text: text, Speed: sp})
		ratio := float64(speech(base)) / float64(speech(b))
		if math.Abs(ratio-sp)/sp > 0.05 {
			t.Errorf("speed %g: duration ratio %.3f", sp, ratio)
		}
	}
	// pauses: the model is silent on spaces and punctuation (one token, 50 ms), so look for
	// gaps over 120 ms
	cal := control.DefaultCalibration()
	var prev time.Duration
	for n := 2; n <= 6; n += 2 {
		b, _ := synth(t, e, tts.Request{Text: "hello there [break_" + string(rune('0'+n)) + "] good morning"})
		gaps := tts.Silences(b.Data, b.SampleRate, -50, 120*time.Millisecond)
		if len(gaps) != 1 {
			t.Fatalf("break_%d: gaps %v", n, gaps)
		}
		want := time.Duration(n) * cal.BreakStep
		// the model's own trailing/leading pad and space tokens add up to 2×50 ms
		if d := gaps[0].Len() - want; d < 0 || d > 120*time.Millisecond {
			t.Errorf("break_%d: gap %v, calibration %v", n, gaps[0].Len(), want)
		}
		if gaps[0].Len() <= prev {
			t.Errorf("break_%d gap %v not longer than the previous", n, gaps[0].Len())
		}
		prev = gaps[0].Len()
	}
	// seeds: reproducible samples, distinct voices
	a, _ := synth(t, e, tts.Request{Text: text, Seed: 11})
	a2, _ := synth(t, e, tts.Request{Text: text, Seed: 11})
	c, _ := synth(t, e, tts.Request{Text: text, Seed: 12})
	if !slices.Equal(a.Data, a2.Data) {
		t.Error("same seed, different samples")
	}
	if slices.Equal(a.Data, c.Data) {
		t.Error("different seeds, same samples")
	}
	if d := StyleDistance(e.SeedPack(11), e.SeedPack(12), 30); d < 1 {
		t.Errorf("seed style distance %.3f", d)
	}
	// mixes and embeddings are honoured
	m, _ := synth(t, e, tts.Request{Text: text, Mix: []tts.VoiceWeight{{Voice: "af_tiny", Weight: 1}, {Voice: "am_tiny", Weight: 1}}})
	if slices.Equal(m.Data, base.Data) {
		t.Error("mix sounds like the default voice")
	}
	af, _ := e.Pack("af_tiny")
	emb, _ := synth(t, e, tts.Request{Text: text, Embedding: af.Data})
	ref, _ := synth(t, e, tts.Request{Text: text, Voice: "af_tiny"})
	if !slices.Equal(emb.Data, ref.Data) {
		t.Error("embedding of af_tiny differs from voice af_tiny")
	}
	laugh, warn := synth(t, e, tts.Request{Text: "well [laugh] then [breath] ok", TopK: 5})
	plain, _ := synth(t, e, tts.Request{Text: "well then ok"})
	if w := strings.Join(warn, ";"); !strings.Contains(w, "breath") || !strings.Contains(w, "top_k") || strings.Contains(w, "laugh") {
		t.Errorf("warnings %q: want breath and top_k ignored, laugh emulated", warn)
	}
	if laugh.Duration() < plain.Duration()+200*time.Millisecond {
		t.Errorf("[laugh] added %v", laugh.Duration()-plain.Duration())
	}
	strong, _ := synth(t, e, tts.Request{Text: "this is <strong>very important</strong> indeed"})
	flat, _ := synth(t, e, tts.Request{Text: "this is very important indeed"})
	if strong.Duration() <= flat.Duration() {
		t.Errorf("emphasis %v not slower than plain %v", strong.Duration(), flat.Duration())
	}
}

func TestLongTextChunksAndCancel(t *testing.T) {
	e := testEngine(t, "testdata")
	long := strings.Repeat("and this goes on and on and on and on without any end in sight, ", 12) + "done."
	s, err := e.Synthesize(context.Background(), tts.Request{Text: long})
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	for {
		c, err := s.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		chunks++
		if c.Sentence != 0 {
			t.Errorf("chunk of sentence %d, want 0", c.Sentence)
		}
	}
	if chunks < 2 {
		t.Errorf("a %d-character sentence came in %d chunk(s); want ≥2 (≤%d tokens each)", len(long), chunks, MaxTokens)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err = e.Synthesize(ctx, tts.Request{Text: long + " " + long})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	for err == nil {
		_, err = s.Next(context.Background())
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: %v", err)
	}
	s.Close()
}

func TestBadModelDirs(t *testing.T) {
	gputest.RequireORT(t)
	cases := map[string]func(dir string){
		"no model": func(dir string) {},
		"garbage":  func(dir string) { os.WriteFile(filepath.Join(dir, "model.onnx"), []byte("not onnx"), 0o644) },
		"broken vocab": func(dir string) {
			copyFile(dir, "model.onnx")
			copyFile(dir, "voices.npz")
			os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"vocab": {"a": "one"}}`), 0o644)
		},
		"no voices": func(dir string) { copyFile(dir, "model.onnx"); copyFile(dir, "config.json") },
		"wrong signature": func(dir string) {
			b, _ := os.ReadFile("../../gpu/testdata/scale.onnx")
			os.WriteFile(filepath.Join(dir, "model.onnx"), b, 0o644)
			copyFile(dir, "config.json")
			copyFile(dir, "voices.npz")
		},
	}
	for name, setup := range cases {
		dir := t.TempDir()
		setup(dir)
		if _, err := New(dir, Config{}); err == nil {
			t.Errorf("%s: New succeeded", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	if _, err := New("testdata", Config{Voice: "zz_nobody"}); !errors.Is(err, tts.ErrUnknownVoice) {
		t.Errorf("unknown voice: %v", err)
	}
}

func copyFile(dir, name string) {
	b, _ := os.ReadFile(filepath.Join("testdata", name))
	os.WriteFile(filepath.Join(dir, name), b, 0o644)
}

// The model is loaded once (no inspection session before the real one).
func TestModelLoadedOnce(t *testing.T) {
	gputest.RequireORT(t)
	before := gpu.Loads()
	testEngine(t, "testdata")
	if n := gpu.Loads() - before; n != 1 {
		t.Errorf("loaded %d sessions, want 1", n)
	}
}

// TestIntSpeedModel: kokoro-v1.1-zh takes speed as int32. Such a model runs at 1× and other
// speeds time-scale its audio; the capability report says so.
func TestIntSpeedModel(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"voices.npz", "config.json"} {
		b, _ := os.ReadFile(filepath.Join("testdata", f))
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	b, err := os.ReadFile("testdata/model_int_speed.onnx")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "model.onnx"), b, 0o644)
	e := testEngine(t, dir)
	if c := e.Capabilities(); c.Support(tts.CtlSpeed) != tts.Emulated {
		t.Errorf("speed on an int32-speed model reported as %v", c.Support(tts.CtlSpeed))
	}
	text := "The quick brown fox jumps over the lazy dog."
	one, _ := synth(t, e, tts.Request{Text: text})
	ref, _ := synth(t, testEngine(t, "testdata"), tts.Request{Text: text})
	if !slices.Equal(one.Data, ref.Data) {
		t.Error("at 1× the int32-speed model differs from the float one with the same weights")
	}
	for _, speed := range []float64{0.8, 1.25} {
		x, _ := synth(t, e, tts.Request{Text: text, Speed: speed})
		if r := float64(len(one.Data)) / float64(len(x.Data)); math.Abs(r-speed)/speed > 0.03 {
			t.Errorf("speed %.2f: %d samples against %d at 1× (ratio %.3f)", speed, len(x.Data), len(one.Data), r)
		}
	}
}

// A model that comes without its vocabulary (kokoro-onnx's kokoro-v1.0.onnx and
// voices-v1.0.bin, no config.json) loads with Kokoro v1.0's built in, and speaks exactly as
// with the config.json that holds it; the built-in table is the fixture's.
func TestModelWithoutVocabularyUsesV1(t *testing.T) {
	dir := t.TempDir()
	copyFile(dir, "model.onnx")
	copyFile(dir, "voices.npz")
	bare := testEngine(t, dir)
	b, _ := os.ReadFile("testdata/config.json")
	want, err := VocabFromJSON("testdata/config.json", b)
	if err != nil {
		t.Fatal(err)
	}
	if got := BuiltinV1Vocab(); !maps.Equal(got, want) {
		t.Errorf("built-in vocabulary (%d symbols) differs from v1.0's config.json (%d)", len(got), len(want))
	}
	text := "Hello there, this is Kokoro."
	x, _ := synth(t, bare, tts.Request{Text: text})
	y, _ := synth(t, testEngine(t, "testdata"), tts.Request{Text: text})
	if len(x.Data) != len(y.Data) || !slices.Equal(x.Data, y.Data) {
		t.Errorf("without config.json: %d samples, differing from the %d with it", len(x.Data), len(y.Data))
	}
}

// Chinese and Japanese are refused before any audio, with the reason: espeak-ng's phonemes
// are not the misaki ones Kokoro's voices for them learnt. Other languages still speak.
func TestChineseAndJapaneseRefused(t *testing.T) {
	e := testEngine(t, "testdata")
	for _, req := range []tts.Request{
		{Text: "你好，今天天气很好。", Language: "zh"},
		{Text: "こんにちは、元気ですか。", Language: "ja"},
		{Text: "Hello. 你好。"}, // a Chinese run inside English text
	} {
		_, err := e.Synthesize(context.Background(), req)
		if !errors.Is(err, tts.ErrBadRequest) || !strings.Contains(fmt.Sprint(err), "misaki") {
			t.Errorf("%q (%s): %v", req.Text, req.Language, err)
		}
	}
	if c := e.Capabilities(); slices.ContainsFunc(c.Languages, func(l string) bool { return strings.HasPrefix(l, "zh") || l == "ja" }) {
		t.Errorf("languages %v still claim zh or ja", c.Languages)
	}
	synth(t, e, tts.Request{Text: "Bonjour tout le monde.", Language: "fr"})
}
