package stretch

import (
	"math"
	"math/rand"
	"testing"
)

// voiced is a harmonic tone at f0 with a slow amplitude envelope, like a sustained vowel.
func voiced(rate int, f0 float64, secs float64) []float32 {
	x := make([]float32, int(float64(rate)*secs))
	for i := range x {
		t := float64(i) / float64(rate)
		v := 0.0
		for h := 1; h <= 5; h++ {
			v += math.Sin(2*math.Pi*f0*float64(h)*t) / float64(h)
		}
		x[i] = float32(0.3 * v * (0.6 + 0.4*math.Sin(2*math.Pi*3*t)))
	}
	return x
}

// pitch estimates the fundamental of x by autocorrelation between 60 and 400 Hz: the
// shortest lag within 5% of the best (a multiple of the period correlates as well).
func pitch(x []float32, rate int) float64 {
	lags := make([]float64, rate/60+1)
	best := math.Inf(-1)
	for lag := rate / 400; lag <= rate/60; lag++ {
		var c float64
		for i := 0; i+lag < len(x); i++ {
			c += float64(x[i]) * float64(x[i+lag])
		}
		lags[lag] = c / float64(len(x)-lag)
		best = max(best, lags[lag])
	}
	for lag := rate / 400; lag <= rate/60; lag++ {
		if lags[lag] >= 0.95*best && lags[lag] >= lags[lag-1] && lags[lag] >= lags[lag+1] {
			return float64(rate) / float64(lag)
		}
	}
	return 0
}

func stretchAll(rate int, speed float64, x []float32, chunk func() int) []float32 {
	s := New(rate, speed)
	var out []float32
	for len(x) > 0 {
		n := min(chunk(), len(x))
		out = append(out, s.Push(x[:n])...)
		x = x[n:]
	}
	return append(out, s.Flush()...)
}

func TestDurationFollowsSpeedAndPitchStays(t *testing.T) {
	const rate = 24000
	in := voiced(rate, 150, 2)
	for _, speed := range []float64{0.6, 0.8, 1.25, 1.6} {
		out := stretchAll(rate, speed, in, func() int { return 960 })
		if want := int(math.Round(float64(len(in)) / speed)); len(out) != want {
			t.Errorf("speed %.2f: %d samples, want %d", speed, len(out), want)
		}
		mid := out[len(out)/4 : 3*len(out)/4]
		if f := pitch(mid, rate); math.Abs(f-150)/150 > 0.03 {
			t.Errorf("speed %.2f: pitch %.1f Hz, want 150", speed, f)
		}
		// no clicks or gaps: the level stays that of the input (within 25%)
		rms := func(x []float32) float64 {
			var e float64
			for _, v := range x {
				e += float64(v) * float64(v)
			}
			return math.Sqrt(e / float64(len(x)))
		}
		if r := rms(mid) / rms(in); r < 0.75 || r > 1.25 {
			t.Errorf("speed %.2f: level ratio %.2f", speed, r)
		}
	}
}

func TestOutputDoesNotDependOnPushSizes(t *testing.T) {
	const rate = 16000
	in := voiced(rate, 110, 1.3)
	whole := stretchAll(rate, 1.4, in, func() int { return len(in) })
	rng := rand.New(rand.NewSource(1))
	pieces := stretchAll(rate, 1.4, in, func() int { return 1 + rng.Intn(700) })
	if len(whole) != len(pieces) {
		t.Fatalf("%d vs %d samples", len(whole), len(pieces))
	}
	for i := range whole {
		if whole[i] != pieces[i] {
			t.Fatalf("sample %d differs: %v vs %v", i, whole[i], pieces[i])
		}
	}
}

func TestSpeedOnePassesThroughAndBadSpeedsDo(t *testing.T) {
	in := voiced(16000, 200, 0.2)
	for _, speed := range []float64{1, 0, -2, math.NaN(), math.Inf(1), 9} {
		out := stretchAll(16000, speed, in, func() int { return 333 })
		if len(out) != len(in) {
			t.Fatalf("speed %v: %d samples, want %d", speed, len(out), len(in))
		}
		for i := range in {
			if out[i] != in[i] {
				t.Fatalf("speed %v: sample %d changed", speed, i)
			}
		}
	}
}

func TestEmptyAndTinyInputs(t *testing.T) {
	s := New(24000, 1.5)
	if out := s.Flush(); len(out) != 0 {
		t.Errorf("empty stream gave %d samples", len(out))
	}
	if out := s.Push([]float32{1, 2, 3}); out != nil {
		t.Errorf("push after flush gave %d samples", len(out))
	}
	out := stretchAll(24000, 0.5, []float32{0.1, 0.2, 0.3}, func() int { return 1 })
	if len(out) != 6 {
		t.Errorf("3 samples at half speed: %d, want 6", len(out))
	}
}

func BenchmarkStretch(b *testing.B) {
	const rate = 24000
	in := voiced(rate, 150, 1)
	b.SetBytes(int64(len(in) * 4))
	for i := 0; i < b.N; i++ {
		stretchAll(rate, 1.3, in, func() int { return 2400 })
	}
}
