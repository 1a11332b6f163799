// Package fbank computes Kaldi-compatible log-mel filterbank features, the input of
// SenseVoice (as sherpa-onnx and FunASR configure it) and of CAM++-style speaker encoders
// (as torchaudio.compliance.kaldi.fbank computes it for CosyVoice): 16 kHz, 25 ms frames every
// 10 ms with snip_edges, per-frame DC removal, pre-emphasis 0.97, a Hamming or Povey window,
// 512-point FFT, power spectrum, 80 triangular mel bins from 20 Hz to Nyquist on the HTK mel
// scale, natural log floored at FLT_EPSILON, no dither.
package fbank

import (
	"math"
)

const (
	// SampleRate is the only input rate: resample before computing features.
	SampleRate = 16000
	// NumBins is the number of mel bins per frame.
	NumBins      = 80
	frameLength  = 400 // 25 ms
	frameShift   = 160 // 10 ms
	fftSize      = 512 // frameLength rounded up to a power of two
	numMelBins   = NumBins
	lowFreq      = 20.0
	preemphCoeff = 0.97
	// fltEpsilon is C's FLT_EPSILON, the floor Kaldi applies before the log.
	fltEpsilon = 1.1920928955078125e-07
	// Int16Scale turns [-1, 1) floats into 16-bit integer amplitudes (sherpa-onnx's
	// normalize_samples=0, FunASR's WavFrontend).
	Int16Scale = 32768
)

// Window is the analysis window.
type Window int

const (
	// Hamming is 0.54 - 0.46 cos(2πi/(N-1)): FunASR and sherpa-onnx for SenseVoice.
	Hamming Window = iota
	// Povey is (0.5 - 0.5 cos(2πi/(N-1)))^0.85: Kaldi's and torchaudio's default, used by
	// speaker encoders (CAM++ in CosyVoice and 3D-Speaker).
	Povey
)

// NumFrames is the number of fbank frames Kaldi's snip_edges framing gives for n samples:
// none for fewer than 400 samples, else 1 + (n-400)/160.
func NumFrames(n int) int {
	if n < frameLength {
		return 0
	}
	return 1 + (n-frameLength)/frameShift
}

// melBin is one triangular filter: weights for power-spectrum bins start..start+len(w)-1.
type melBin struct {
	start int
	w     []float64
}

// Tables holds everything that does not depend on the input: window, FFT twiddles and bit
// reversal, mel filters. Build them once and share them read-only between goroutines.
type Tables struct {
	window [frameLength]float64
	fft    *realFFT
	mel    [numMelBins]melBin
}

// melScale32 is Kaldi's MelScale in float32: 1127 · logf(1 + f/700).
func melScale32(f float32) float32 {
	x := 1 + f/700
	return 1127 * float32(math.Log(float64(x)))
}

// NewTables builds the tables for a window.
func NewTables(w Window) *Tables {
	t := &Tables{fft: newRealFFT(fftSize)}
	a := 2 * math.Pi / float64(frameLength-1)
	for i := range t.window {
		switch w {
		case Povey:
			t.window[i] = math.Pow(0.5-0.5*math.Cos(a*float64(i)), 0.85)
		default:
			t.window[i] = 0.54 - 0.46*math.Cos(a*float64(i))
		}
	}
	// Kaldi MelBanks: num_fft_bins = padded/2 (the Nyquist bin is never used), bins equally
	// spaced on the mel scale between low and high frequency, triangles evaluated in mel.
	// Computed in float32 with Kaldi's (kaldi-native-fbank's) exact expressions, so that the
	// weights are the ones sherpa-onnx uses, rounding included.
	const numFFTBins = fftSize / 2
	nyquist := float32(0.5 * SampleRate)
	binWidth := float32(SampleRate) / float32(fftSize)
	melLow, melHigh := melScale32(lowFreq), melScale32(nyquist)
	delta := (melHigh - melLow) / float32(numMelBins+1)
	for b := 0; b < numMelBins; b++ {
		left := melLow + float32(b)*delta
		center := melLow + float32(b+1)*delta
		right := melLow + float32(b+2)*delta
		first, last := -1, -1
		var w [numFFTBins]float64
		for i := 0; i < numFFTBins; i++ {
			mel := melScale32(binWidth * float32(i))
			if mel > left && mel < right {
				var weight float32
				if mel <= center {
					weight = (mel - left) / (center - left)
				} else {
					weight = (right - mel) / (right - center)
				}
				w[i] = float64(weight)
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		if first < 0 { // cannot happen for 80 bins at 16 kHz; keep an empty filter
			continue
		}
		t.mel[b] = melBin{start: first, w: append([]float64(nil), w[first:last+1]...)}
	}
	return t
}

// Fbank computes filterbank features. It owns scratch buffers, so one Fbank must not be
// used by two goroutines at once; make one per worker (they share the Tables).
type Fbank struct {
	t     *Tables
	scale float32 // Int16Scale for sherpa-onnx's normalize_samples=0, 1 for torchaudio on floats
	frame [fftSize]float64
	power [fftSize/2 + 1]float64
	re    [fftSize / 2]float64
	im    [fftSize / 2]float64
}

// New returns a feature computer over shared tables; samples are multiplied by scale first.
func New(t *Tables, scale float32) *Fbank { return &Fbank{t: t, scale: scale} }

// Compute appends the log-mel frames of samples (16 kHz, [-1, 1) floats times scale) to dst, 80 values
// per frame, and returns it. It allocates only when dst must grow.
func (f *Fbank) Compute(dst []float32, samples []float32) []float32 {
	n := NumFrames(len(samples))
	dst = grow(dst, n*numMelBins)
	for i := 0; i < n; i++ {
		f.frameInto(dst[len(dst)-(n-i)*numMelBins:][:numMelBins], samples[i*frameShift:i*frameShift+frameLength])
	}
	return dst
}

// frameInto computes one frame's 80 log-mel energies into out.
func (f *Fbank) frameInto(out []float32, in []float32) {
	fr := &f.frame
	// Scale to 16-bit amplitudes in float32, as sherpa-onnx does, then work in float64.
	// For 16-bit PCM input every value is an integer, so the frame sum below is exact.
	var sum float64
	scale := f.scale
	for i, v := range in[:frameLength] {
		x := float64(v * scale)
		fr[i] = x
		sum += x
	}
	mean := sum / frameLength
	// DC removal, pre-emphasis (w[i] -= 0.97·w[i-1], w[0] -= 0.97·w[0]) and the window in
	// one pass from the end, so that w[i-1] is still unmodified when w[i] needs it.
	win := &f.t.window
	prev := fr[frameLength-1] - mean
	for i := frameLength - 1; i > 0; i-- {
		cur := prev
		prev = fr[i-1] - mean
		fr[i] = (cur - preemphCoeff*prev) * win[i]
	}
	fr[0] = (prev - preemphCoeff*prev) * win[0]
	clear(fr[frameLength:])
	f.t.fft.power(fr[:], f.power[:], f.re[:], f.im[:])
	for b := range f.t.mel {
		m := &f.t.mel[b]
		p := f.power[m.start : m.start+len(m.w)]
		var e float64
		for i, w := range m.w {
			e += w * p[i]
		}
		if e < fltEpsilon {
			e = fltEpsilon
		}
		out[b] = float32(math.Log(e))
	}
}

// grow extends s by n elements (contents unspecified) and returns it.
func grow(s []float32, n int) []float32 {
	if cap(s)-len(s) >= n {
		return s[:len(s)+n]
	}
	ns := make([]float32, len(s)+n, 2*len(s)+n)
	copy(ns, s)
	return ns
}
