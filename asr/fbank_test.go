package asr

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

type fbankCase struct {
	Name    string `json:"name"`
	Samples int    `json:"samples"`
	Frames  int    `json:"frames"`
}

func readFbankIndex(t *testing.T) []fbankCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fbank", "index.json"))
	if err != nil {
		t.Fatalf("golden index (regenerate with /usr/bin/python3 asr/testdata/make_fbank_golden.py): %v", err)
	}
	var idx struct {
		Cases []fbankCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Cases) == 0 {
		t.Fatal("golden index lists no cases")
	}
	return idx.Cases
}

func readPCM16(t testing.TB, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/2)
	for i := range out {
		out[i] = float32(int16(binary.LittleEndian.Uint16(b[2*i:]))) / 32768
	}
	return out
}

func readF32(t testing.TB, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		if d := math.Abs(float64(a[i]) - float64(b[i])); d > m {
			m = d
		}
	}
	return m
}

// TestFbankMatchesTorchaudio compares our filterbank with torchaudio.compliance.kaldi.fbank
// (same options as sherpa-onnx) on speech, silence, DC, clipping, noise and short inputs.
func TestFbankMatchesTorchaudio(t *testing.T) {
	fb := newFbank(newFbankTables(), sampleScale)
	for _, c := range readFbankIndex(t) {
		t.Run(c.Name, func(t *testing.T) {
			dir := filepath.Join("testdata", "fbank")
			pcm := readPCM16(t, filepath.Join(dir, c.Name+".pcm"))
			if len(pcm) != c.Samples {
				t.Fatalf("pcm has %d samples, index says %d", len(pcm), c.Samples)
			}
			got := fb.Compute(nil, pcm)
			if n := NumFrames(len(pcm)); n != c.Frames || len(got) != n*numMelBins {
				t.Fatalf("frames: NumFrames=%d, features=%d values, torchaudio has %d frames", n, len(got), c.Frames)
			}
			// The criterion: within 1e-3 of torchaudio run in float32 (as Kaldi and
			// sherpa-onnx run), and tighter against the float64 run, which is what we compute.
			for _, ref := range []struct {
				file string
				tol  float64
			}{{c.Name + ".f32ref.f32", 1e-3}, {c.Name + ".f32", 1e-4}} {
				want := readF32(t, filepath.Join(dir, ref.file))
				if len(want) != len(got) {
					t.Fatalf("%s: %d values, we have %d", ref.file, len(want), len(got))
				}
				if d := maxAbsDiff(got, want); d > ref.tol {
					t.Errorf("%s: max abs diff %.3g > %.0g", ref.file, d, ref.tol)
				} else {
					t.Logf("%s: max abs diff %.3g", ref.file, d)
				}
			}
		})
	}
}

func TestFbankAppendsAndIsReusable(t *testing.T) {
	fb := newFbank(newFbankTables(), sampleScale)
	x := make([]float32, 1600)
	for i := range x {
		x[i] = float32(math.Sin(float64(i) * 0.05))
	}
	a := fb.Compute(nil, x)
	prefix := []float32{42}
	b := fb.Compute(prefix, x)
	if len(b) != 1+len(a) || b[0] != 42 {
		t.Fatalf("Compute did not append: len %d", len(b))
	}
	if d := maxAbsDiff(a, b[1:]); d != 0 {
		t.Fatalf("second run differs by %g", d)
	}
	if n := testing.AllocsPerRun(10, func() { fb.Compute(a[:0], x) }); n != 0 {
		t.Fatalf("Compute into a large enough buffer allocated %v times", n)
	}
}

func TestNumFrames(t *testing.T) {
	for _, c := range []struct{ n, want int }{{0, 0}, {1, 0}, {399, 0}, {400, 1}, {559, 1}, {560, 2}, {16000, 98}} {
		if got := NumFrames(c.n); got != c.want {
			t.Errorf("NumFrames(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}
