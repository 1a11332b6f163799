package chattts

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func readF32(t testing.TB, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%4 != 0 {
		t.Fatalf("%s: %d bytes is not float32 data", path, len(b))
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestISTFTMatchesTorch checks the Go ISTFT against torch.istft (train/tts/chattts_istft_ref.py)
// on Vocos-like random magnitude/phase (with a clipped bin), a chirp's STFT, and two frames.
func TestISTFTMatchesTorch(t *testing.T) {
	dir := "testdata/istft"
	var idx struct {
		NFFT  int `json:"n_fft"`
		Hop   int `json:"hop"`
		Cases []struct {
			Name                  string
			Bins, Frames, Samples int
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	s, err := NewISTFT(idx.NFFT, idx.Hop)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range idx.Cases {
		t.Run(c.Name, func(t *testing.T) {
			mag := readF32(t, filepath.Join(dir, c.Name+".mag.f32"))
			phase := readF32(t, filepath.Join(dir, c.Name+".phase.f32"))
			want := readF32(t, filepath.Join(dir, c.Name+".wav.f32"))
			got, err := s.Run(mag, phase, c.Frames)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) || len(got) != s.Samples(c.Frames) {
				t.Fatalf("%d samples, torch gave %d", len(got), len(want))
			}
			var maxErr, peak float64
			for i := range got {
				maxErr = math.Max(maxErr, math.Abs(float64(got[i]-want[i])))
				peak = math.Max(peak, math.Abs(float64(want[i])))
			}
			t.Logf("max |go-torch| = %.3g (peak %.3g)", maxErr, peak)
			if maxErr > 1e-5*math.Max(1, peak) {
				t.Fatalf("max |go-torch| = %g exceeds 1e-5·max(1, peak %g)", maxErr, peak)
			}
		})
	}
	// istft(stft(x)) is x itself: the chirp comes back
	x := readF32(t, filepath.Join(dir, "chirp.signal.f32"))
	y := readF32(t, filepath.Join(dir, "chirp.wav.f32"))
	for i := range y {
		if d := math.Abs(float64(x[i] - y[i])); d > 1e-5 {
			t.Fatalf("round trip: sample %d differs by %g", i, d)
		}
	}
}

func TestISTFTBadInput(t *testing.T) {
	if _, err := NewISTFT(1000, 256); err == nil {
		t.Error("n_fft 1000 accepted")
	}
	if _, err := NewISTFT(1024, 0); err == nil {
		t.Error("hop 0 accepted")
	}
	s, err := NewISTFT(1024, 256)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(make([]float32, 513*3), make([]float32, 513*2), 3); err == nil {
		t.Error("short phase accepted")
	}
	if _, err := s.Run(nil, nil, 0); err == nil {
		t.Error("zero frames accepted")
	}
	// one frame is valid and gives no samples after the centre trim (torch agrees)
	out, err := s.Run(make([]float32, 513), make([]float32, 513), 1)
	if err != nil || len(out) != 0 {
		t.Errorf("one frame: %d samples, %v", len(out), err)
	}
	// hop = n_fft leaves the Hann window's zero at every frame start: refused, not divided by 0
	s2, _ := NewISTFT(16, 16)
	if _, err := s2.Run(make([]float32, 9*4), make([]float32, 9*4), 4); err == nil {
		t.Error("vanishing envelope accepted")
	}
}

func BenchmarkISTFT(b *testing.B) {
	s, _ := NewISTFT(1024, 256)
	frames := 94 // one second at 24 kHz
	mag := make([]float32, 513*frames)
	ph := make([]float32, 513*frames)
	for i := range mag {
		mag[i], ph[i] = float32(i%7)*0.1, float32(i%13)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Run(mag, ph, frames); err != nil {
			b.Fatal(err)
		}
	}
}
