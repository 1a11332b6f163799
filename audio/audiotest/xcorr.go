package audiotest

import (
	"math"
	"math/cmplx"
)

// Match is where a reference was found inside a recording.
type Match struct {
	Lag  int     // recording[Lag+i] ≈ Gain × reference[i]
	Gain float64 // least-squares gain
	SNR  float64 // dB: power of Gain×reference over the residual, on the overlap
	Corr float64 // normalised correlation at the peak (-1..1)
}

// Find locates ref inside rec by FFT cross-correlation (lags 0..len(rec)-1; the reference may
// run past the end of the recording) and measures how well it matches there.
func Find(rec, ref []float32) Match {
	n := 1
	for n < len(rec)+len(ref) {
		n <<= 1
	}
	a := make([]complex128, n)
	b := make([]complex128, n)
	for i, v := range rec {
		a[i] = complex(float64(v), 0)
	}
	for i, v := range ref {
		b[i] = complex(float64(v), 0)
	}
	fft(a, false)
	fft(b, false)
	for i := range a {
		a[i] *= cmplx.Conj(b[i])
	}
	fft(a, true)
	best, lag := math.Inf(-1), 0
	// normalise by the recording's energy under the window so loud passages do not win
	var win float64
	m := len(ref)
	prefix := make([]float64, len(rec)+1)
	for i, v := range rec {
		prefix[i+1] = prefix[i] + float64(v)*float64(v)
	}
	var refE float64
	for _, v := range ref {
		refE += float64(v) * float64(v)
	}
	for k := 0; k < len(rec); k++ {
		e := prefix[min(k+m, len(rec))] - prefix[k]
		if e <= 0 {
			continue
		}
		c := real(a[k]) / math.Sqrt(e*refE)
		if c > best {
			best, lag, win = c, k, e
		}
	}
	_ = win
	return measure(rec, ref, lag, best)
}

func measure(rec, ref []float32, lag int, corr float64) Match {
	var xy, yy float64
	end := min(len(ref), len(rec)-lag)
	for i := 0; i < end; i++ {
		xy += float64(rec[lag+i]) * float64(ref[i])
		yy += float64(ref[i]) * float64(ref[i])
	}
	m := Match{Lag: lag, Corr: corr}
	if yy == 0 {
		return m
	}
	m.Gain = xy / yy
	var sig, res float64
	for i := 0; i < end; i++ {
		s := m.Gain * float64(ref[i])
		d := float64(rec[lag+i]) - s
		sig += s * s
		res += d * d
	}
	if res == 0 {
		m.SNR = 300
	} else {
		m.SNR = 10 * math.Log10(sig/res)
	}
	return m
}

// fft is an in-place radix-2 FFT (len(x) a power of two); inverse includes the 1/n scale.
func fft(x []complex128, inverse bool) {
	n := len(x)
	for i, j := 1, 0; i < n; i++ {
		bit := n >> 1
		for ; j&bit != 0; bit >>= 1 {
			j ^= bit
		}
		j ^= bit
		if i < j {
			x[i], x[j] = x[j], x[i]
		}
	}
	sign := -1.0
	if inverse {
		sign = 1
	}
	for size := 2; size <= n; size <<= 1 {
		w := cmplx.Exp(complex(0, sign*2*math.Pi/float64(size)))
		for start := 0; start < n; start += size {
			wk := complex(1, 0)
			for k := 0; k < size/2; k++ {
				u := x[start+k]
				v := x[start+k+size/2] * wk
				x[start+k] = u + v
				x[start+k+size/2] = u - v
				wk *= w
			}
		}
	}
	if inverse {
		for i := range x {
			x[i] /= complex(float64(n), 0)
		}
	}
}

// BlockSNR checks a match block by block: for each block of ref (block samples) with some
// energy, it searches lags within ±search of lag (host glitches shift the rest of a
// recording) and returns each block's best SNR in dB. A clean path gives every block a high
// SNR; an underrun spoils only the blocks it touches.
func BlockSNR(rec, ref []float32, lag, block, search int) []float64 {
	var out []float64
	for s := 0; s+block <= len(ref); s += block {
		seg := ref[s : s+block]
		if RMS64(seg) < 1e-3 {
			continue
		}
		best := math.Inf(-1)
		for l := lag - search; l <= lag+search; l++ {
			if l+s < 0 || l+s+block > len(rec) {
				continue
			}
			m := measure(rec[l+s:l+s+block], seg, 0, 0)
			if m.SNR > best && m.Gain > 0.5 {
				best = m.SNR
			}
		}
		out = append(out, best)
	}
	return out
}

// RMS64 is the RMS of p computed in float64.
func RMS64(p []float32) float64 {
	if len(p) == 0 {
		return 0
	}
	var s float64
	for _, v := range p {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / float64(len(p)))
}
