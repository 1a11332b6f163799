package asr

import "github.com/parley-voice/parley/audio/fbank"

// SenseVoice's frontend is Kaldi's fbank as sherpa-onnx configures it (audio/fbank):
// Hamming window, samples scaled to 16-bit amplitudes, 80 bins.
const (
	SampleRate  = fbank.SampleRate
	numMelBins  = fbank.NumBins
	sampleScale = fbank.Int16Scale
)

// NumFrames is the number of fbank frames for n samples (see fbank.NumFrames).
func NumFrames(n int) int { return fbank.NumFrames(n) }

func newFbankTables() *fbank.Tables { return fbank.NewTables(fbank.Hamming) }

func newFbank(t *fbank.Tables, scale float32) *fbank.Fbank { return fbank.New(t, scale) }

// grow extends s by n elements (contents unspecified) and returns it.
func grow(s []float32, n int) []float32 {
	if cap(s)-len(s) >= n {
		return s[:len(s)+n]
	}
	ns := make([]float32, len(s)+n, 2*len(s)+n)
	copy(ns, s)
	return ns
}
