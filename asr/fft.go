package asr

import "math"

// realFFT computes power spectra of real frames of a fixed power-of-two length n by a
// complex radix-2 FFT of length n/2 over the even/odd-packed input, followed by the usual
// split step. Tables are built once and only read, so one realFFT serves many goroutines;
// power allocates nothing (callers pass scratch).
type realFFT struct {
	n      int
	m      int       // n/2, the complex FFT length
	bitrev []int32   // bit-reversal permutation for m
	twRe   []float64 // e^{-2πi j/m}, j < m/2
	twIm   []float64
	spRe   []float64 // e^{-2πi k/n}, k <= m, for the split step
	spIm   []float64
}

func newRealFFT(n int) *realFFT {
	if n < 4 || n&(n-1) != 0 {
		panic("asr: realFFT length must be a power of two >= 4")
	}
	m := n / 2
	f := &realFFT{n: n, m: m,
		bitrev: make([]int32, m),
		twRe:   make([]float64, m/2), twIm: make([]float64, m/2),
		spRe: make([]float64, m+1), spIm: make([]float64, m+1),
	}
	bits := 0
	for 1<<bits < m {
		bits++
	}
	for i := range m {
		r := 0
		for b := range bits {
			if i&(1<<b) != 0 {
				r |= 1 << (bits - 1 - b)
			}
		}
		f.bitrev[i] = int32(r)
	}
	for j := range m / 2 {
		s, c := math.Sincos(-2 * math.Pi * float64(j) / float64(m))
		f.twRe[j], f.twIm[j] = c, s
	}
	for k := 0; k <= m; k++ {
		s, c := math.Sincos(-2 * math.Pi * float64(k) / float64(n))
		f.spRe[k], f.spIm[k] = c, s
	}
	return f
}

// power writes |X[k]|² for k = 0..n/2 of the real input x (length n) into out (length
// n/2+1), using re and im (length ≥ n/2 each) as scratch.
func (f *realFFT) power(x, out, re, im []float64) {
	m := f.m
	re, im = re[:m], im[:m]
	x = x[:f.n]
	out = out[:m+1]
	for i, r := range f.bitrev {
		re[r] = x[2*i]
		im[r] = x[2*i+1]
	}
	// First stage (size 2) has the trivial twiddle.
	for i := 0; i < m; i += 2 {
		ar, ai := re[i], im[i]
		br, bi := re[i+1], im[i+1]
		re[i], im[i] = ar+br, ai+bi
		re[i+1], im[i+1] = ar-br, ai-bi
	}
	for size := 4; size <= m; size <<= 1 {
		half := size >> 1
		step := m / size
		for start := 0; start < m; start += size {
			a := re[start : start+size]
			b := im[start : start+size]
			for j := 0; j < half; j++ {
				wr, wi := f.twRe[j*step], f.twIm[j*step]
				ur, ui := a[j+half], b[j+half]
				tr := ur*wr - ui*wi
				ti := ur*wi + ui*wr
				a[j+half], b[j+half] = a[j]-tr, b[j]-ti
				a[j], b[j] = a[j]+tr, b[j]+ti
			}
		}
	}
	// Split: X[k] = E[k] + W^k O[k], with E = (Z[k] + conj Z[m-k])/2, O = (Z[k] - conj Z[m-k])/(2i).
	out[0] = sq(re[0] + im[0])
	out[m] = sq(re[0] - im[0])
	for k := 1; k < m; k++ {
		zr, zi := re[k], im[k]
		cr, ci := re[m-k], -im[m-k]
		er, ei := 0.5*(zr+cr), 0.5*(zi+ci)
		// (z - c)/(2i) = (dzi, -dzr)/2
		or, oi := 0.5*(zi-ci), -0.5*(zr-cr)
		wr, wi := f.spRe[k], f.spIm[k]
		xr := er + or*wr - oi*wi
		xi := ei + or*wi + oi*wr
		out[k] = xr*xr + xi*xi
	}
}

func sq(v float64) float64 { return v * v }
