package chattts

import (
	"fmt"
	"math"

	"github.com/parley-voice/parley/tts"
)

// MaxPitch bounds a clone voice's pitch shift (semitones either way): an octave. Further than
// that the voice is no longer a person's.
const MaxPitch = 12.0

// melWarp shifts the pitch of log-mel frames by a ratio before Vocos renders them: each mel
// band takes the value the frame had at its centre frequency divided by the ratio (linear
// interpolation between bands), so the harmonics and the formants move together, as a voice
// whose pitch and vocal tract scale by the ratio would. A clone voice uses it to speak at its
// recording's pitch where the model's voice comes out higher or lower (tts.Sample.Pitch).
type melWarp struct {
	lo   []int     // per band: the lower source band
	frac []float32 // per band: the weight of the band above it
}

// newMelWarp builds the warp for n mel bands of Vocos's htk scale over 0..rate/2 Hz, shifted
// by semitones.
func newMelWarp(semitones float64, n, rate int) (*melWarp, error) {
	if math.IsNaN(semitones) || math.Abs(semitones) > MaxPitch {
		return nil, fmt.Errorf("%w: pitch shift %v semitones (at most %v either way)", tts.ErrBadRequest, semitones, MaxPitch)
	}
	if semitones == 0 || n < 2 {
		return nil, nil
	}
	ratio := math.Pow(2, semitones/12)
	mel := func(f float64) float64 { return 2595 * math.Log10(1+f/700) }
	hz := func(m float64) float64 { return 700 * (math.Pow(10, m/2595) - 1) }
	top := mel(float64(rate) / 2)
	step := top / float64(n+1) // band i is centred on mel (i+1)·step
	w := &melWarp{lo: make([]int, n), frac: make([]float32, n)}
	for i := range n {
		src := mel(hz(float64(i+1)*step)/ratio)/step - 1 // fractional source band
		src = min(max(src, 0), float64(n-1))
		lo := min(int(src), n-2)
		w.lo[i], w.frac[i] = lo, float32(src-float64(lo))
	}
	return w, nil
}

// apply warps mel (bands × frames, row-major) in place.
func (w *melWarp) apply(mel []float32, frames int) {
	if w == nil {
		return
	}
	src := append([]float32(nil), mel...)
	for i, lo := range w.lo {
		a, b, f := src[lo*frames:(lo+1)*frames], src[(lo+1)*frames:(lo+2)*frames], w.frac[i]
		out := mel[i*frames : (i+1)*frames]
		for t := range out {
			out[t] = a[t] + f*(b[t]-a[t])
		}
	}
}
