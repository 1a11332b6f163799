package audio

import (
	"math"
	"slices"
)

// Pitch range MedianF0 searches: below a bass's lowest note, above a child's speaking voice.
const (
	MinF0 = 60.0
	MaxF0 = 400.0
)

// MedianF0 is the median fundamental frequency (Hz) of the voiced frames of mono pcm at rate
// Hz (VoicedF0), 0 when no frame is voiced. It is the algorithm train/'s voice evaluation uses
// (train.chattts.evaluate.f0_median, there at 24 kHz: at 16 kHz its lags are coarser, by up to
// 0.3 semitones at 300 Hz), so a clone's pitch is matched in the terms it is scored in.
func MedianF0(pcm []float32, rate int) float64 {
	f0s, _ := VoicedF0(pcm, rate)
	return Median(f0s)
}

// VoicedF0 is the fundamental frequency (Hz) of each voiced 40 ms frame of mono pcm at rate Hz,
// a frame every 20 ms, by normalised autocorrelation: a frame is voiced where its best lag in
// MinF0–MaxF0 keeps more than half the frame's energy. sounding is how many frames were not
// silent, voiced or not: len(f0s)/sounding is how much of the sound is voiced (a whisper's
// is near 0, speech's about 0.6).
func VoicedF0(pcm []float32, rate int) (f0s []float64, sounding int) {
	if rate <= 0 {
		return nil, 0
	}
	win, hop := rate*40/1000, rate*20/1000
	lo, hi := int(float64(rate)/MaxF0), int(float64(rate)/MinF0)
	if win <= hi || hop < 1 || lo < 1 {
		return nil, 0
	}
	frame := make([]float64, win)
	for s := 0; s+win < len(pcm); s += hop {
		mean := 0.0
		for _, v := range pcm[s : s+win] {
			mean += float64(v)
		}
		mean /= float64(win)
		energy := 0.0
		for i, v := range pcm[s : s+win] {
			frame[i] = float64(v) - mean
			energy += frame[i] * frame[i]
		}
		if math.Sqrt(energy/float64(win)) < 1e-3 || math.IsNaN(energy) || math.IsInf(energy, 0) {
			continue // silence (or garbage): no pitch
		}
		sounding++
		best, bestK := math.Inf(-1), 0
		for k := lo; k < hi; k++ {
			ac := 0.0
			for i := 0; i+k < win; i++ {
				ac += frame[i] * frame[i+k]
			}
			if ac > best {
				best, bestK = ac, k
			}
		}
		if best/energy > 0.5 {
			f0s = append(f0s, float64(rate)/float64(bestK))
		}
	}
	return f0s, sounding
}

// Median is the median of xs (numpy's: the mean of the middle two of an even count), 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
