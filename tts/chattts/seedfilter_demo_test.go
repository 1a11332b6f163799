package chattts

import (
	"context"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
)

// TestDemoSeedFilter: the demo voice's seeds 1–20 whisper (under 15 % of their sound voiced)
// less often with its seed filter than without, and its suggested seeds are all voiced and
// span more than an octave of pitch (the fit measured 113–269 Hz). One sentence at the
// engine's rate, not tune.SeedVoice's two at 16 kHz (that package imports this one): a lighter
// check of the same thing, so the bounds have margins (measured: 6 → 2 of 20; another CPU's
// floats may move a take a little too).
func TestDemoSeedFilter(t *testing.T) {
	dir := demoDir()
	if _, err := os.Stat(dir + "/config.json"); err != nil {
		t.Skipf("no demo voice in %s: %v", dir, err)
	}
	gputest.RequireORT(t)
	e, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.stat.Filter == nil || len(e.SuggestedSeeds()) < 8 {
		t.Fatalf("the demo voice has no seed filter (%v) or few suggested seeds (%v)", e.stat.Filter != nil, e.SuggestedSeeds())
	}
	ctx := context.Background()
	take := func(seed int64) (voiced, f0 float64) {
		st, err := e.Synthesize(ctx, tts.Request{Text: "Good evening, how can I help you tonight?", Seed: seed, HasSeed: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		b, err := tts.ReadAll(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		f0s, sounding := audio.VoicedF0(b.Data, b.Format.SampleRate)
		return float64(len(f0s)) / float64(max(1, sounding)), audio.Median(f0s)
	}
	whispering := func() (n int) {
		for seed := int64(1); seed <= 20; seed++ {
			if v, _ := take(seed); v < 0.15 {
				n++
			}
		}
		return n
	}
	filtered := whispering()
	filter := e.stat.Filter
	e.stat.Filter = nil
	plain := whispering()
	e.stat.Filter = filter
	t.Logf("seeds 1–20 whispering: %d without the filter, %d with it", plain, filtered)
	if filtered >= plain || filtered > 4 {
		t.Errorf("seeds 1–20: %d whisper with the filter, %d without", filtered, plain)
	}
	var f0s []float64
	for _, seed := range e.SuggestedSeeds() {
		v, f0 := take(seed)
		if v < 0.3 {
			t.Errorf("suggested seed %d is %.0f %% voiced", seed, 100*v)
		}
		f0s = append(f0s, f0)
	}
	lo, hi := slices.Min(f0s), slices.Max(f0s)
	t.Logf("suggested seeds: %.0f–%.0f Hz", lo, hi)
	if lo <= 0 || hi < 2*lo {
		t.Errorf("suggested seeds span %.0f–%.0f Hz (want over an octave)", lo, hi)
	}
	// listed from the lowest voice to the highest (the server gives onyx the first): the first
	// in the lowest fifth of the range, the last in the highest, and mostly rising between
	third := math.Pow(hi/lo, 0.2)
	if f0s[0] > lo*third || f0s[len(f0s)-1] < hi/third {
		t.Errorf("suggested seeds are not lowest voice first: %.0f Hz … %.0f Hz (range %.0f–%.0f)", f0s[0], f0s[len(f0s)-1], lo, hi)
	}
	rises := 0
	for i := 1; i < len(f0s); i++ {
		if f0s[i] > f0s[i-1] {
			rises++
		}
	}
	if rises < (len(f0s)-1)*3/4 {
		t.Errorf("suggested seeds' pitch rises %d times of %d: %.0f", rises, len(f0s)-1, f0s)
	}
}
