package chattts

import (
	"fmt"
	"math"
	"math/bits"
)

// ISTFT turns Vocos's magnitude/phase frames into a waveform the way Vocos's ISTFTHead does
// with padding "center" (torch.istft, center=True): each frame is the inverse real FFT of
// mag·e^{i·phase} (the imaginary parts of the DC and Nyquist bins are ignored, as in any C2R
// transform), windowed by a periodic Hann window, overlap-added at hop, divided by the summed
// squared window, and the first and last NFFT/2 samples are trimmed. F frames give
// Hop·(F−1) samples.
type ISTFT struct {
	NFFT, Hop int
	window    []float64 // periodic Hann, length NFFT
	fft       *fftPlan  // complex FFT of NFFT/2 points
	post      []complex128
	buf       []complex128
	frame     []float64
}

// NewISTFT prepares an inverse STFT. nfft must be a power of two ≥ 4; 0 < hop ≤ nfft.
func NewISTFT(nfft, hop int) (*ISTFT, error) {
	if nfft < 4 || nfft&(nfft-1) != 0 {
		return nil, fmt.Errorf("chattts: istft: n_fft %d is not a power of two ≥ 4", nfft)
	}
	if hop <= 0 || hop > nfft {
		return nil, fmt.Errorf("chattts: istft: hop %d outside 1..%d", hop, nfft)
	}
	s := &ISTFT{NFFT: nfft, Hop: hop, window: make([]float64, nfft), fft: newFFTPlan(nfft / 2),
		post: make([]complex128, nfft/2), buf: make([]complex128, nfft/2), frame: make([]float64, nfft)}
	for n := range s.window {
		s.window[n] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(n)/float64(nfft))
	}
	// e^{+i2πk/N}: the inverse transform's twiddles for recombining the half-size FFT
	for k := range s.post {
		s.post[k] = complex(math.Cos(2*math.Pi*float64(k)/float64(nfft)), math.Sin(2*math.Pi*float64(k)/float64(nfft)))
	}
	return s, nil
}

// Bins is the number of frequency bins per frame (NFFT/2+1).
func (s *ISTFT) Bins() int { return s.NFFT/2 + 1 }

// Samples is the output length for frames frames.
func (s *ISTFT) Samples(frames int) int {
	if frames < 1 {
		return 0
	}
	return s.Hop * (frames - 1)
}

// Run inverts frames frames of magnitude and phase laid out bin-major as Vocos writes them:
// mag[b*frames+t] is bin b of frame t, as is phase. It returns Hop·(frames−1) samples.
// An ISTFT is not safe for concurrent use (it owns scratch buffers).
func (s *ISTFT) Run(mag, phase []float32, frames int) ([]float32, error) {
	bins := s.Bins()
	if frames < 1 || len(mag) != bins*frames || len(phase) != bins*frames {
		return nil, fmt.Errorf("chattts: istft: %d magnitudes and %d phases for %d frames of %d bins", len(mag), len(phase), frames, bins)
	}
	n := s.NFFT
	total := n + s.Hop*(frames-1)
	y := make([]float64, total)
	env := make([]float64, total)
	spec := make([]complex128, bins)
	for t := 0; t < frames; t++ {
		for b := 0; b < bins; b++ {
			m, p := float64(mag[b*frames+t]), float64(phase[b*frames+t])
			spec[b] = complex(m*math.Cos(p), m*math.Sin(p))
		}
		s.irfft(spec, s.frame)
		off := t * s.Hop
		for i, v := range s.frame {
			w := s.window[i]
			y[off+i] += v * w
			env[off+i] += w * w
		}
	}
	start, end := n/2, total-n/2
	out := make([]float32, end-start)
	for i := range out {
		e := env[start+i]
		if e <= 1e-11 {
			// torch.istft refuses such windows (NOLA); with Hann and hop ≤ NFFT/2 it cannot happen
			return nil, fmt.Errorf("chattts: istft: window envelope vanishes at sample %d (hop %d too large for n_fft %d)", i, s.Hop, n)
		}
		out[i] = float32(y[start+i] / e)
	}
	return out, nil
}

// irfft computes the inverse real DFT of the half spectrum x (N/2+1 bins) into out (N
// samples), with 1/N scaling, through one complex FFT of N/2 points.
func (s *ISTFT) irfft(x []complex128, out []float64) {
	h := s.NFFT / 2
	x0 := complex(real(x[0]), 0)
	xh := complex(real(x[h]), 0)
	// Z[k] = (X[k] + conj(X[h−k])) + i·e^{i2πk/N}·(X[k] − conj(X[h−k])) packs the even and odd
	// output samples as z[m] = out[2m] + i·out[2m+1].
	for k := 0; k < h; k++ {
		a := x[k]
		if k == 0 {
			a = x0
		}
		var c complex128
		if k == 0 {
			c = xh
		} else {
			c = complex(real(x[h-k]), -imag(x[h-k]))
		}
		e := a + c
		o := (a - c) * s.post[k]
		s.buf[k] = e + complex(-imag(o), real(o))
	}
	s.fft.inverse(s.buf)
	scale := 1 / float64(s.NFFT)
	for m := 0; m < h; m++ {
		out[2*m] = real(s.buf[m]) * scale
		out[2*m+1] = imag(s.buf[m]) * scale
	}
}

// fftPlan is an iterative radix-2 complex FFT of a fixed power-of-two size.
type fftPlan struct {
	n    int
	rev  []int
	twid []complex128 // e^{+i2πk/n}, k < n/2 (inverse direction)
}

func newFFTPlan(n int) *fftPlan {
	p := &fftPlan{n: n, rev: make([]int, n), twid: make([]complex128, n/2)}
	lg := bits.TrailingZeros(uint(n))
	for i := range p.rev {
		p.rev[i] = int(bits.Reverse(uint(i)) >> (bits.UintSize - lg))
	}
	for k := range p.twid {
		a := 2 * math.Pi * float64(k) / float64(n)
		p.twid[k] = complex(math.Cos(a), math.Sin(a))
	}
	return p
}

// inverse transforms x in place: x[m] ← Σ_k x[k]·e^{+i2πkm/n} (no scaling).
func (p *fftPlan) inverse(x []complex128) {
	for i, j := range p.rev {
		if i < j {
			x[i], x[j] = x[j], x[i]
		}
	}
	for size := 2; size <= p.n; size <<= 1 {
		half, step := size/2, p.n/size
		for start := 0; start < p.n; start += size {
			for k := 0; k < half; k++ {
				w := p.twid[k*step]
				a, b := x[start+k], x[start+k+half]*w
				x[start+k], x[start+k+half] = a+b, a-b
			}
		}
	}
}
