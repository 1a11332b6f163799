package audio

import (
	"math"
	"math/cmplx"
)

// Match is where a reference signal was found inside a recording.
type Match struct {
	Lag  int     // recording[Lag+i] ≈ Gain × reference[i]
	Gain float64 // least-squares gain at that lag
	SNR  float64 // dB: power of Gain×reference over the residual, on the overlap
	Corr float64 // normalised correlation at the peak (−1..1)
}

// Align finds ref inside rec by FFT cross-correlation over lags 0..len(rec)−1, normalised by
// the recording's energy under the window (so loud passages do not win), and measures the
// match there. Use it to find a played signal (an echo reference) in a capture, or a test
// signal in a recording. Cost: O((len(rec)+len(ref))·log) time and memory.
func Align(rec, ref []float32) Match {
	if len(rec) == 0 || len(ref) == 0 {
		return Match{}
	}
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
	prefix := make([]float64, len(rec)+1)
	for i, v := range rec {
		prefix[i+1] = prefix[i] + float64(v)*float64(v)
	}
	var refE float64
	for _, v := range ref {
		refE += float64(v) * float64(v)
	}
	best, lag := math.Inf(-1), 0
	for k := 0; k < len(rec); k++ {
		e := prefix[min(k+len(ref), len(rec))] - prefix[k]
		if e <= 0 || refE == 0 {
			continue
		}
		if c := real(a[k]) / math.Sqrt(e*refE); c > best {
			best, lag = c, k
		}
	}
	if math.IsInf(best, -1) {
		best = 0
	}
	return MatchAt(rec, ref, lag, best)
}

// MatchAt measures how well ref matches rec at lag (corr is passed through).
func MatchAt(rec, ref []float32, lag int, corr float64) Match {
	m := Match{Lag: lag, Corr: corr}
	end := min(len(ref), len(rec)-lag)
	var xy, yy float64
	for i := 0; i < end; i++ {
		xy += float64(rec[lag+i]) * float64(ref[i])
		yy += float64(ref[i]) * float64(ref[i])
	}
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
