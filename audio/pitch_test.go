package audio

import (
	"math"
	"math/rand/v2"
	"testing"
)

// voiced is a glottal-like tone: f0 with falling harmonics, at rate Hz, seconds long.
func voiced(f0 float64, rate int, seconds float64) []float32 {
	out := make([]float32, int(seconds*float64(rate)))
	for i := range out {
		t := float64(i) / float64(rate)
		v := 0.0
		for h := 1; h <= 8; h++ {
			v += math.Sin(2*math.Pi*f0*float64(h)*t) / float64(h)
		}
		out[i] = float32(0.3 * v)
	}
	return out
}

func TestMedianF0(t *testing.T) {
	for _, rate := range []int{16000, 24000} {
		for _, f0 := range []float64{85, 120, 210, 300} {
			got := MedianF0(voiced(f0, rate, 1), rate)
			if math.Abs(got-f0)/f0 > 0.02 {
				t.Errorf("rate %d: %.0f Hz tone measured %.1f Hz", rate, f0, got)
			}
		}
	}
	// most of the clip at 200 Hz: the median is that pitch, not a mean of the two
	two := append(voiced(100, 16000, 0.4), voiced(200, 16000, 0.7)...)
	if got := MedianF0(two, 16000); math.Abs(got-200) > 4 {
		t.Errorf("100 Hz then 200 Hz: %.1f Hz", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]float32, 16000)
	for i := range noise {
		noise[i] = float32(rng.NormFloat64() * 0.2)
	}
	nan := voiced(120, 16000, 0.5)
	for i := range nan {
		if i%100 == 0 {
			nan[i] = float32(math.NaN())
		}
	}
	for name, pcm := range map[string][]float32{"silence": make([]float32, 16000), "white noise": noise,
		"empty": nil, "shorter than a frame": voiced(120, 16000, 0.03), "NaN": nan} {
		if got := MedianF0(pcm, 16000); got != 0 {
			t.Errorf("%s: %.1f Hz, want 0 (unvoiced)", name, got)
		}
	}
	if f0s, n := VoicedF0(noise, 16000); len(f0s) != 0 || n < 40 {
		t.Errorf("white noise: %d voiced of %d sounding frames, want 0 of ~49", len(f0s), n)
	}
	if f0s, n := VoicedF0(voiced(120, 16000, 1), 16000); len(f0s) != n || n < 40 {
		t.Errorf("a tone: %d voiced of %d sounding frames, want all", len(f0s), n)
	}
	if _, n := VoicedF0(make([]float32, 16000), 16000); n != 0 {
		t.Errorf("silence: %d sounding frames", n)
	}
	if got := MedianF0(voiced(120, 16000, 1), 0); got != 0 {
		t.Errorf("rate 0: %.1f Hz", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := append([]float64(nil), c.xs...)
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
		for i := range in {
			if in[i] != c.xs[i] {
				t.Errorf("Median reordered its input: %v", c.xs)
			}
		}
	}
}
