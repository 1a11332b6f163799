package audiotest

import (
	"math"

	"github.com/parley-voice/parley/audio"
)

// Match is where a reference was found inside a recording (see audio.Align).
type Match = audio.Match

// Find locates ref inside rec by cross-correlation (audio.Align).
func Find(rec, ref []float32) Match { return audio.Align(rec, ref) }

// BlockSNR checks a match block by block: for each block of ref (block samples) with some
// energy, it searches lags within ±search of lag (host glitches shift the rest of a
// recording) and returns each block's best SNR in dB. A clean path gives every block a high
// SNR; an underrun spoils only the blocks it touches.
func BlockSNR(rec, ref []float32, lag, block, search int) []float64 {
	var out []float64
	for s := 0; s+block <= len(ref); s += block {
		seg := ref[s : s+block]
		if audio.RMS(seg) < 1e-3 {
			continue
		}
		best := math.Inf(-1)
		for l := lag - search; l <= lag+search; l++ {
			if l+s < 0 || l+s+block > len(rec) {
				continue
			}
			m := audio.MatchAt(rec[l+s:l+s+block], seg, 0, 0)
			if m.SNR > best && m.Gain > 0.5 {
				best = m.SNR
			}
		}
		out = append(out, best)
	}
	return out
}
