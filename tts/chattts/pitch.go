package chattts

import (
	"fmt"
	"math"

	"github.com/parley-voice/parley/tts"
)

// envelopeCoeffs is how many cosine coefficients across the mel bands make a frame's spectral
// envelope (its formants): what varies over 2·bands/envelopeCoeffs bands or more (17 of
// Vocos's 100). A voice's harmonics repeat faster across the bands where the bands resolve
// them (low down, about 20 Hz a band: every 5 bands at 100 Hz, 15 at 300 Hz), so they stay
// out of it.
const envelopeCoeffs = 12

// melWarp shifts the pitch of log-mel frames by a ratio before Vocos renders them, keeping the
// formants: each frame is split into its envelope (the first envelopeCoeffs coefficients of a
// DCT across the bands) and the rest (the harmonics); the rest is moved along the frequency
// axis (each band takes the value at its centre frequency divided by the ratio, interpolated)
// and the envelope is put back unmoved. A clone voice uses it to speak at its recording's
// pitch where the model's voice comes out higher or lower (tts.Sample.Pitch).
type melWarp struct {
	lo   []int     // per band: the lower source band
	frac []float32 // per band: the weight of the band above it
	dct  [][]float32
}

// newMelWarp builds the warp for n mel bands of Vocos's htk scale over 0..rate/2 Hz, shifted
// by semitones.
func newMelWarp(semitones float64, n, rate int) (*melWarp, error) {
	if math.IsNaN(semitones) || math.Abs(semitones) > tts.MaxPitch {
		return nil, fmt.Errorf("%w: pitch shift %v semitones (at most %v either way)", tts.ErrBadRequest, semitones, tts.MaxPitch)
	}
	if semitones == 0 {
		return nil, nil
	}
	if n <= 2*envelopeCoeffs {
		return nil, fmt.Errorf("%w: a pitch shift needs more than %d mel bands (this model has %d)", tts.ErrBadRequest, 2*envelopeCoeffs, n)
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
	for k := range min(envelopeCoeffs, n) { // orthonormal DCT-II rows
		row := make([]float32, n)
		scale := math.Sqrt(2 / float64(n))
		if k == 0 {
			scale = math.Sqrt(1 / float64(n))
		}
		for i := range row {
			row[i] = float32(scale * math.Cos(math.Pi*float64(k)*(float64(i)+0.5)/float64(n)))
		}
		w.dct = append(w.dct, row)
	}
	return w, nil
}

// apply warps mel (bands × frames, row-major) in place.
func (w *melWarp) apply(mel []float32, frames int) {
	if w == nil {
		return
	}
	n := len(w.lo)
	col, env, rest := make([]float32, n), make([]float32, n), make([]float32, n)
	for t := range frames {
		for i := range n {
			col[i], env[i] = mel[i*frames+t], 0
		}
		for _, row := range w.dct {
			var c float32
			for i, v := range col {
				c += row[i] * v
			}
			for i, r := range row {
				env[i] += c * r
			}
		}
		for i := range n {
			rest[i] = col[i] - env[i]
		}
		for i, lo := range w.lo {
			mel[i*frames+t] = env[i] + rest[lo] + w.frac[i]*(rest[lo+1]-rest[lo])
		}
	}
}
