package fbank

import "math"

// realFFT computes power spectra of real frames of a fixed power-of-two length n by a
// complex radix-2 FFT of length n/2 over the even/odd-packed input, followed by the usual
// split step. Tables are built once and only read, so one realFFT serves many goroutines;
// power allocates nothing (callers pass scratch).
type realFFT struct {
	n      int
	m      int       // n/2, the complex FFT length
	bitrev []int32   // bit-reversal permutation for m
	twRe   []float64 // per stage of size 8..m, e^{-2πi j/size} for j < size/2, concatenated
	twIm   []float64
	spRe   []float64 // e^{-2πi k/n}, k <= m, for the split step
	spIm   []float64
}

func newRealFFT(n int) *realFFT {
	if n < 8 || n&(n-1) != 0 {
		panic("asr: realFFT length must be a power of two >= 8")
	}
	m := n / 2
	f := &realFFT{n: n, m: m,
		bitrev: make([]int32, m),
		twRe:   make([]float64, 0, m), twIm: make([]float64, 0, m),
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
	for size := 8; size <= m; size <<= 1 {
		for j := range size / 2 {
			s, c := math.Sincos(-2 * math.Pi * float64(j) / float64(size))
			f.twRe = append(f.twRe, c)
			f.twIm = append(f.twIm, s)
		}
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
	// The first two stages (sizes 2 and 4) together: their twiddles are 1 and -i.
	for i := 0; i+3 < m; i += 4 {
		r, q := re[i:i+4:i+4], im[i:i+4:i+4]
		b0r, b0i := r[0]+r[1], q[0]+q[1]
		b1r, b1i := r[0]-r[1], q[0]-q[1]
		b2r, b2i := r[2]+r[3], q[2]+q[3]
		b3r, b3i := r[2]-r[3], q[2]-q[3]
		r[0], q[0] = b0r+b2r, b0i+b2i
		r[2], q[2] = b0r-b2r, b0i-b2i
		// -i·b3 = (b3i, -b3r)
		r[1], q[1] = b1r+b3i, b1i-b3r
		r[3], q[3] = b1r-b3i, b1i+b3r
	}
	tw := 0
	for size := 8; size <= m; size <<= 1 {
		half := size >> 1
		wr, wi := f.twRe[tw:tw+half], f.twIm[tw:tw+half]
		tw += half
		for start := 0; start < m; start += size {
			ar, ai := re[start:start+half], im[start:start+half]
			br, bi := re[start+half:start+size], im[start+half:start+size]
			br, bi = br[:len(ar)], bi[:len(ar)]
			ai = ai[:len(ar)]
			for j := range ar {
				ur, ui := br[j], bi[j]
				tr := ur*wr[j] - ui*wi[j]
				ti := ur*wi[j] + ui*wr[j]
				br[j], bi[j] = ar[j]-tr, ai[j]-ti
				ar[j], ai[j] = ar[j]+tr, ai[j]+ti
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
