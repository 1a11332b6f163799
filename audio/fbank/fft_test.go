package fbank

import (
	"math"
	"testing"
)

// TestRealFFTMatchesDFT checks the packed real FFT against a direct DFT.
func TestRealFFTMatchesDFT(t *testing.T) {
	for _, n := range []int{8, 16, 64, 512} {
		f := newRealFFT(n)
		x := make([]float64, n)
		for i := range x {
			x[i] = math.Sin(float64(i)*0.3) + 0.25*float64(i%7) - 1
		}
		got := make([]float64, n/2+1)
		f.power(x, got, make([]float64, n/2), make([]float64, n/2))
		for k := 0; k <= n/2; k++ {
			var re, im float64
			for i, v := range x {
				s, c := math.Sincos(-2 * math.Pi * float64(k*i) / float64(n))
				re += v * c
				im += v * s
			}
			want := re*re + im*im
			if math.Abs(got[k]-want) > 1e-9*(1+want) {
				t.Fatalf("n=%d bin %d: %g, DFT %g", n, k, got[k], want)
			}
		}
	}
}
