package app

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

// voiceLike is noise shaped into syllables: 4 Hz bursts of band-limited noise.
func voiceLike(n int, seed int64) []float32 {
	rng := rand.New(rand.NewSource(seed))
	out := make([]float32, n)
	var lp float64
	for i := range out {
		lp = 0.7*lp + 0.3*rng.NormFloat64()
		env := math.Max(0, math.Sin(2*math.Pi*4*float64(i)/SampleRate+float64(seed)))
		out[i] = float32(0.2 * lp * env)
	}
	return out
}

func energy(x []float32) float64 {
	var e float64
	for _, v := range x {
		e += float64(v) * float64(v)
	}
	return e
}

func diffDB(a, b []float32) float64 {
	d := make([]float32, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return 10 * math.Log10(energy(d)/energy(b))
}

func TestCancelEcho(t *testing.T) {
	const n, lags, delay = 2 * SampleRate, 9600, 3217
	user := voiceLike(n, 1)
	ref := voiceLike(n+lags, 2) // what Parley played
	mixed := func(userGain, echoGain float32, shift func(i int) int) []float32 {
		c := make([]float32, n)
		for i := range c {
			c[i] = userGain*user[i] + echoGain*ref[i+shift(i)]
		}
		return c
	}
	fixed := func(int) int { return delay }
	cases := []struct {
		name     string
		capture  []float32
		ref      []float32
		userGain float32
		maxDB    float64 // the cleaned capture's distance from the user's voice alone
	}{
		{"echo under speech", mixed(1, 0.6, fixed), ref, 1, -20},
		{"echo alone", mixed(0, 0.6, fixed), ref, 0, -25},
		{"echo louder than the user", mixed(0.3, 1, fixed), ref, 0.3, -15},
		// a host under-run shifts the second half of the echo by 20 ms
		{"echo that jumps", mixed(1, 0.6, func(i int) int {
			if i > n/2 {
				return delay + 320
			}
			return delay
		}), ref, 1, -15},
		// a barge-in: Parley alone, then the user starts over it, louder
		{"user starts over the echo", func() []float32 {
			c := mixed(1, 0.3, fixed)
			for i := range n / 2 {
				c[i] -= user[i]
			}
			return c
		}(), ref, -1, -30},
		{"nothing played", mixed(1, 0, fixed), make([]float32, n+lags), 1, -100},
		{"another voice played", mixed(1, 0, fixed), voiceLike(n+lags, 3), 1, -15},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := make([]float32, n)
			for i := range want {
				want[i] = c.userGain * user[i]
				if c.userGain < 0 { // the user speaks in the second half only
					want[i] = 0
					if i >= n/2 {
						want[i] = user[i]
					}
				}
			}
			before := append([]float32(nil), c.capture...)
			cancelEcho(c.capture, c.ref, lags)
			got := c.capture
			if c.userGain == 0 {
				ratio := 10 * math.Log10(energy(got)/energy(before))
				t.Logf("echo alone reduced by %.1f dB", -ratio)
				if ratio > c.maxDB {
					t.Errorf("echo alone: only %.1f dB taken out", -ratio)
				}
				return
			}
			if energy(got) == 0 && energy(want) > 0 {
				t.Fatal("all removed")
			}
			d := diffDB(got, want)
			if c.maxDB == -100 {
				if d != math.Inf(-1) {
					t.Errorf("nothing was played, but the capture changed (%.1f dB)", d)
				}
				return
			}
			t.Logf("left of the echo: %.1f dB under the user's voice (before: %.1f dB)", d, diffDB(before, want))
			if d > c.maxDB {
				t.Errorf("cleaned capture is %.1f dB from the user's voice, want ≤ %.0f dB", d, c.maxDB)
			}
		})
	}
}

func TestCancelEchoShortInputs(t *testing.T) {
	for _, n := range []int{0, 1, 100, SampleRate / 20} {
		c := voiceLike(n, 4)
		cancelEcho(c, voiceLike(n/2, 5), 800) // reference shorter than the capture: left alone
		cancelEcho(c, voiceLike(n+800, 5), 800)
	}
}

// roomEcho is the room's speaker signal by capture sample: a sample-locked echo reference, as
// audio/device's loop-back gives (the microphone reads one room sample per capture sample).
type roomEcho struct{ r *room }

func (roomEcho) Captured(int) {}

func (e roomEcho) Reference(dst []float32, from int64) {
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	for i := range dst {
		dst[i] = 0
		if k := from + int64(i); k >= 0 && k < int64(len(e.r.playedSig)) {
			dst[i] = e.r.playedSig[k]
		}
	}
}

// A question asked over Parley's answer reaches the recogniser without the answer under it
// (with the raw capture, as before the canceller, the echo is 9 dB under the question).
func TestBargeInHeardWithoutEcho(t *testing.T) {
	r := newRig(t, Options{Mode: HandsFree}, fixed(long), func(p *Parts) {
		p.Echo = roomEcho{p.Ear.(mic).r} // a device's own loop-back, not the player's position under load
	})
	r.room.echoGain, r.room.echoDelay = 0.5, 37*SampleRate/1000
	r.ears.texts = []string{"tell me a story", "what time is it"}
	question := speech(time.Second, 0.08, 4321)
	r.room.when(SampleRate*2, func(rm *room) { rm.user = append(rm.user, question...) })
	r.room.say(speech(time.Second, 0.05, 99))
	if ex := r.turnDone(t); !ex.Interrupted {
		t.Fatalf("no barge-in: %+v", ex)
	}
	r.turnDone(t)
	r.ears.mu.Lock()
	heard := r.ears.heard[len(r.ears.heard)-1]
	r.ears.mu.Unlock()
	// where a stretch of the question lies in what was heard
	probe := question[len(question)/2 : len(question)/2+SampleRate/8]
	if len(heard) < len(probe) {
		t.Fatalf("heard only %d samples", len(heard))
	}
	pos, rho := bestLag(probe, heard, 0, len(heard)-len(probe))
	if rho < 0.5 {
		t.Fatalf("the question is not in what the recogniser got (ρ %.2f)", rho)
	}
	at := len(question)/2 - pos // question[i] is heard[i-at]
	var got, want []float32
	for i := range question {
		if j := i - at; j >= 0 && j < len(heard) {
			got, want = append(got, heard[j]), append(want, question[i])
		}
	}
	left := diffDB(got, want)
	t.Logf("the recogniser got %d samples of the question with the echo %.1f dB under it", len(got), left)
	if left > -20 {
		var lens []int
		r.ears.mu.Lock()
		for _, h := range r.ears.heard {
			lens = append(lens, len(h))
		}
		r.ears.mu.Unlock()
		t.Errorf("echo %.1f dB under the question, want ≤ -20 dB (transcribed %v samples; events %s)", left, lens, kinds(r.seen))
	}
}

// fitFilterDirect is fitFilter's normal equations built sample by sample (the reference).
func fitFilterDirect(c, r []float32, base, taps int, ranges [][2]int) []float64 {
	R := make([]float64, taps*taps)
	p := make([]float64, taps)
	for _, sp := range mergeSpans(ranges, max(0, -base), min(len(c), len(r)-base-taps+1)) {
		for i := sp[0]; i < sp[1]; i++ {
			for a := range taps {
				p[a] += float64(c[i]) * float64(r[i+base+a])
				for b := range taps {
					R[a*taps+b] += float64(r[i+base+a]) * float64(r[i+base+b])
				}
			}
		}
	}
	var tr float64
	for a := range taps {
		tr += R[a*taps+a]
	}
	for a := range taps {
		R[a*taps+a] += 1e-4 * tr / float64(taps)
	}
	w, _ := solve(R, p, taps)
	return w
}

func TestFitFilterMatchesDirect(t *testing.T) {
	const n = 6000
	r := voiceLike(n+400, 7)
	c := make([]float32, n)
	for i := range c { // a 3-tap path at delay 120, plus noise
		c[i] = 0.5*r[i+120] - 0.2*r[i+121] + 0.1*r[i+119] + 0.01*float32(math.Sin(float64(i)))
	}
	ranges := [][2]int{{0, 800}, {400, 1200}, {3000, 3800}, {5900, 7000}, {-50, 10}}
	for _, base := range []int{100, -5, 390} {
		got, ok := fitFilter(c, r, base, 41, ranges)
		want := fitFilterDirect(c, r, base, 41, ranges)
		if !ok || want == nil {
			t.Fatalf("base %d: fit failed (%v)", base, ok)
		}
		for k := range want {
			if math.Abs(got[k]-want[k]) > 1e-6 {
				t.Fatalf("base %d: tap %d: %g, direct %g", base, k, got[k], want[k])
			}
		}
	}
	if w, _ := fitFilter(c, r, 100, 41, [][2]int{{0, 800}}); math.Abs(w[20]-0.5) > 0.01 || math.Abs(w[21]+0.2) > 0.01 {
		t.Errorf("path taps %v, want 0.5 and −0.2 at 20 and 21", w[19:23])
	}
	if _, ok := fitFilter(c, r, 100, 41, [][2]int{{0, 100}}); ok {
		t.Error("a fit from 100 samples for 41 taps")
	}
}
