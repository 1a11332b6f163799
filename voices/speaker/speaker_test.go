package speaker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu/gputest"
)

const tiny = "../../testdata/speaker/tiny"

func open(t testing.TB, path string) *Encoder {
	t.Helper()
	gputest.RequireORT(t)
	e, err := New(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestTinyMatchesPyTorch: ONNX Runtime gives PyTorch's embeddings for the fixed inputs of
// testdata/speaker/tiny/reference.json (regenerate: make -C train test-models).
func TestTinyMatchesPyTorch(t *testing.T) {
	e := open(t, tiny)
	if e.Dim() != 192 {
		t.Fatalf("dim %d, want 192", e.Dim())
	}
	b, err := os.ReadFile(filepath.Join(tiny, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Tolerance float64 `json:"tolerance"`
		Cases     []struct {
			Name      string    `json:"name"`
			XShape    []int     `json:"x_shape"`
			X         []float32 `json:"x"`
			Embedding []float32 `json:"embedding"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &ref); err != nil || len(ref.Cases) == 0 {
		t.Fatalf("reference.json: %v", err)
	}
	for _, c := range ref.Cases {
		got, err := e.runFeats(context.Background(), c.X, c.XShape[1])
		if err != nil {
			t.Fatal(err)
		}
		var worst, scale float64
		for i := range got {
			worst = math.Max(worst, math.Abs(float64(got[i]-c.Embedding[i])))
			scale = math.Max(scale, math.Abs(float64(c.Embedding[i])))
		}
		if worst > ref.Tolerance*math.Max(1, scale) {
			t.Errorf("%s: max diff %.3g > %.0g", c.Name, worst, ref.Tolerance)
		}
	}
}

func tone(n int, hz float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(0.3*math.Sin(2*math.Pi*hz*float64(i)/SampleRate) + 0.1*math.Sin(2*math.Pi*3.1*hz*float64(i)/SampleRate))
	}
	return x
}

func TestEmbedInputs(t *testing.T) {
	e := open(t, tiny)
	ctx := context.Background()
	if _, err := e.Embed(ctx, make([]float32, MinSamples-1)); !errors.Is(err, ErrTooShort) {
		t.Errorf("short input: %v, want ErrTooShort", err)
	}
	bad := tone(SampleRate, 200)
	bad[100] = float32(math.NaN())
	if _, err := e.Embed(ctx, bad); err == nil {
		t.Error("NaN sample accepted")
	}
	a, err := e.Embed(ctx, tone(2*SampleRate, 150))
	if err != nil {
		t.Fatal(err)
	}
	// The mean over time is removed, so a constant gain (a log-domain offset) changes nothing.
	loud := tone(2*SampleRate, 150)
	for i := range loud {
		loud[i] *= 2
	}
	b, err := e.Embed(ctx, loud)
	if err != nil {
		t.Fatal(err)
	}
	if c := Cosine(a, b); c < 0.999 {
		t.Errorf("a 6 dB louder copy has cosine %.4f", c)
	}
	// 45 s takes the windowed path: bounded work, and the same voice throughout gives about
	// the direction of one window.
	long, err := e.Embed(ctx, tone(45*SampleRate, 150))
	if err != nil {
		t.Fatal(err)
	}
	one, err := e.Embed(ctx, tone(10*SampleRate, 150))
	if err != nil {
		t.Fatal(err)
	}
	if c := Cosine(long, one); c < 0.99 {
		t.Errorf("45 s vs 10 s of the same tone: cosine %.4f", c)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Embed(cctx, tone(SampleRate, 150)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestConcurrentAndClose(t *testing.T) {
	gputest.RequireORT(t)
	e, err := New(tiny, Config{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := e.Embed(context.Background(), tone(SampleRate, 220))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := e.Embed(context.Background(), tone(SampleRate, 220))
			if err != nil || Cosine(got, want) < 0.99999 {
				t.Errorf("concurrent embed: %v, cosine %.6f", err, Cosine(got, want))
			}
		}()
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Embed(context.Background(), tone(SampleRate, 220)); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestBadModels(t *testing.T) {
	gputest.RequireORT(t)
	dir := t.TempDir()
	junk := filepath.Join(dir, "model.onnx")
	os.WriteFile(junk, []byte("not a model"), 0o644)
	for name, path := range map[string]string{
		"missing":       filepath.Join(dir, "nope"),
		"empty dir":     t.TempDir(),
		"junk":          junk,
		"asr not voice": "../../testdata/sensevoice/tiny/model.onnx",
	} {
		_, err := New(path, Config{})
		if !errors.Is(err, ErrBadModel) {
			t.Errorf("%s: %v, want ErrBadModel", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestCosine(t *testing.T) {
	for _, c := range []struct {
		a, b []float32
		want float64
	}{
		{[]float32{1, 0}, []float32{2, 0}, 1},
		{[]float32{1, 0}, []float32{0, 3}, 0},
		{[]float32{1, 1}, []float32{-1, -1}, -1},
		{[]float32{0, 0}, []float32{1, 0}, 0},
		{[]float32{1}, []float32{1, 0}, 0},
	} {
		if got := Cosine(c.a, c.b); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Cosine(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestDemoTellsHeldOutVoicesApart: the embedded demo encoder on espeak-ng voices it never
// heard (the corpus holds these variants out of training): utterances of one voice are
// closer to each other than to the other voices'.
func TestDemoTellsHeldOutVoicesApart(t *testing.T) {
	demo := filepath.Join("..", "..", "assets", "demo", "speaker")
	if _, err := os.Stat(filepath.Join(demo, "model.onnx")); err != nil {
		t.Skipf("demo model not in this checkout: %v", err)
	}
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng not installed")
	}
	e := open(t, demo)
	voices := []string{"en-us+m7", "en-gb+f5", "en-gb-scotland+klatt4", "en-us+belinda"}
	texts := []string{
		"The weather will be cold and windy for the rest of the week.",
		"Could you tell me how to get to the train station from here?",
		"My favourite colour has always been a deep shade of green.",
	}
	var embs [][]float32
	var who []int
	for vi, v := range voices {
		for _, text := range texts {
			out, err := exec.Command("espeak-ng", "-v", v, "--stdout", text).Output()
			if err != nil {
				t.Fatalf("espeak-ng -v %s: %v", v, err)
			}
			b, err := audio.ReadWAV(bytes.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			pcm, err := audio.Resample(b.Data, b.Format.SampleRate, SampleRate, 1)
			if err != nil {
				t.Fatal(err)
			}
			emb, err := e.Embed(context.Background(), pcm)
			if err != nil {
				t.Fatal(err)
			}
			embs = append(embs, emb)
			who = append(who, vi)
		}
	}
	var same, diff []float64
	for i := range embs {
		for j := i + 1; j < len(embs); j++ {
			c := Cosine(embs[i], embs[j])
			if who[i] == who[j] {
				same = append(same, c)
			} else {
				diff = append(diff, c)
			}
		}
	}
	eer := equalErrorRate(same, diff)
	t.Logf("held-out voices: mean cosine same %.3f, different %.3f, EER %.1f%%", mean(same), mean(diff), 100*eer)
	if mean(same) < mean(diff)+0.2 || eer > 0.25 {
		t.Errorf("the demo encoder does not separate voices: same %.3f, different %.3f, EER %.2f", mean(same), mean(diff), eer)
	}
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(max(1, len(v)))
}

// equalErrorRate: the lowest max(false accepts, false rejects) over all thresholds.
func equalErrorRate(same, diff []float64) float64 {
	best := 1.0
	for _, th := range append(append([]float64(nil), same...), diff...) {
		var fa, fr float64
		for _, s := range same {
			if s < th {
				fr++
			}
		}
		for _, d := range diff {
			if d >= th {
				fa++
			}
		}
		best = math.Min(best, math.Max(fa/float64(len(diff)), fr/float64(len(same))))
	}
	return best
}
