package chattts

import (
	"context"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
)

// A band's energy moves to the band at its frequency times the ratio: an octave up doubles
// the peak's frequency, an octave down halves it; the envelope (a formant) does not move.
func TestMelWarp(t *testing.T) {
	const n, rate, frames = 100, 24000, 3
	mel := func(f float64) float64 { return 2595 * math.Log10(1+f/700) }
	step := mel(rate/2) / (n + 1)
	band := func(f float64) int { return int(math.Round(mel(f)/step)) - 1 }
	for _, c := range []struct{ semitones, from, to float64 }{{12, 500, 1000}, {-12, 1000, 500}, {7, 2000, 2000 * math.Pow(2, 7.0/12)}} {
		w, err := newMelWarp(c.semitones, n, rate)
		if err != nil {
			t.Fatal(err)
		}
		m := make([]float32, n*frames)
		for i := range m {
			m[i] = -10 // log floor
		}
		for f := range frames {
			m[band(c.from)*frames+f] = 0
		}
		w.apply(m, frames)
		peak := 0
		for i := range n {
			if m[i*frames] > m[peak*frames] {
				peak = i
			}
		}
		if d := peak - band(c.to); d < -1 || d > 1 {
			t.Errorf("%+.0f semitones: the %v Hz band's peak is at band %d, want %d (%v Hz)", c.semitones, c.from, peak, band(c.to), c.to)
		}
		for f := 1; f < frames; f++ { // every frame alike
			if m[peak*frames+f] != m[peak*frames] {
				t.Errorf("frame %d differs", f)
			}
		}
	}
	// a formant (a bump ten bands wide) stays where it is while the harmonics move
	w, err := newMelWarp(7, n, rate)
	if err != nil {
		t.Fatal(err)
	}
	m := make([]float32, n)
	for i := range m {
		m[i] = float32(-8 + 6*math.Exp(-math.Pow(float64(i-40)/10, 2)))
	}
	w.apply(m, 1)
	peak := 0
	for i := range m {
		if m[i] > m[peak] {
			peak = i
		}
	}
	if peak < 38 || peak > 42 {
		t.Errorf("a formant at band 40 moved to band %d", peak)
	}
	if w, err := newMelWarp(0, n, rate); w != nil || err != nil {
		t.Errorf("no shift: %v %v", w, err)
	}
	for _, bad := range []float64{12.5, -13, math.NaN()} {
		if _, err := newMelWarp(bad, n, rate); !errors.Is(err, tts.ErrBadRequest) {
			t.Errorf("%v semitones: %v", bad, err)
		}
	}
	if _, err := newMelWarp(3, 2*envelopeCoeffs, rate); !errors.Is(err, tts.ErrBadRequest) {
		t.Errorf("%d bands (all envelope): %v", 2*envelopeCoeffs, err)
	}
}

// The demo voice as a clone with its pitch shifted: the same words in the same time (the GPT
// is untouched: only the mel frames Vocos renders move), the median F0 moved by the ratio.
func TestDemoClonePitch(t *testing.T) {
	dir := demoDir()
	if _, err := os.Stat(dir + "/config.json"); err != nil {
		t.Skipf("no demo voice in %s: %v", dir, err)
	}
	gputest.RequireORT(t)
	opts := gpu.Options{Provider: "cpu", IntraOpThreads: 1}
	e, err := New(dir, Config{GPU: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	text, codes := demoPrompt(t, e, dir, opts)
	say := func(pitch float64) []float32 {
		req := tts.Request{Text: "It is a quarter past ten and the kitchen light is on.", Seed: 5, HasSeed: true,
			Sample: &tts.Sample{Text: text, Codes: codes, Pitch: pitch}}
		st, err := e.Synthesize(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tts.ReadAll(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		return b.Data
	}
	plain := say(0)
	f0 := audio.MedianF0(plain, e.SampleRate())
	if f0 == 0 {
		t.Fatal("the clone's speech has no voiced frame")
	}
	for _, st := range []float64{4, -4} {
		got := say(st)
		if len(got) != len(plain) {
			t.Errorf("%+.0f semitones: %d samples, %d unshifted", st, len(got), len(plain))
		}
		ratio, want := audio.MedianF0(got, e.SampleRate())/f0, math.Pow(2, st/12)
		t.Logf("%+.0f semitones: median F0 %.1f Hz → %.1f Hz (×%.3f, want ×%.3f)", st, f0, f0*ratio, ratio, want)
		if math.Abs(ratio/want-1) > 0.08 {
			t.Errorf("%+.0f semitones: F0 ×%.3f, want ×%.3f", st, ratio, want)
		}
	}
	req := tts.Request{Text: "hello", Sample: &tts.Sample{Text: text, Codes: codes, Pitch: 20}}
	if _, err := e.Synthesize(ctx, req); !errors.Is(err, tts.ErrBadRequest) {
		t.Errorf("a 20-semitone shift: %v", err)
	}
}
