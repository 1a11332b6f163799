package fbank

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func readLE[T int16 | float32](t *testing.T, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var zero T
	size := binary.Size(zero)
	out := make([]T, len(b)/size)
	for i := range out {
		switch p := any(&out[i]).(type) {
		case *int16:
			*p = int16(binary.LittleEndian.Uint16(b[2*i:]))
		case *float32:
			*p = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return out
}

// TestPoveyMatchesTorchaudio: the Povey window on [-1, 1] samples gives what CosyVoice's
// kaldi.fbank(speech, num_mel_bins=80, dither=0) gives a CAM++ speaker encoder.
func TestPoveyMatchesTorchaudio(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "index.json"))
	if err != nil {
		t.Fatalf("%v (regenerate with /usr/bin/python3 audio/fbank/testdata/make_povey_golden.py)", err)
	}
	var idx struct {
		Cases []struct {
			Name    string `json:"name"`
			Samples int    `json:"samples"`
			Frames  int    `json:"frames"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &idx); err != nil || len(idx.Cases) == 0 {
		t.Fatalf("index.json: %v (%d cases)", err, len(idx.Cases))
	}
	fb := New(NewTables(Povey), 1)
	for _, c := range idx.Cases {
		pcm := readLE[int16](t, filepath.Join("testdata", c.Name+".pcm"))
		x := make([]float32, len(pcm))
		for i, v := range pcm {
			x[i] = float32(v) / 32768
		}
		got := fb.Compute(nil, x)
		want := readLE[float32](t, filepath.Join("testdata", c.Name+".f32"))
		if NumFrames(len(x)) != c.Frames || len(got) != len(want) {
			t.Fatalf("%s: %d values (NumFrames %d), torchaudio %d (%d frames)", c.Name, len(got), NumFrames(len(x)), len(want), c.Frames)
		}
		var worst float64
		for i := range got {
			worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
		}
		// torchaudio builds its float32 mel filters with slightly different rounding
		// (up to ~2e-4 in the log domain, see asr's fbank test); 1e-3 as there.
		if worst > 1e-3 {
			t.Errorf("%s: max abs diff %.3g > 1e-3", c.Name, worst)
		} else {
			t.Logf("%s: max abs diff %.3g", c.Name, worst)
		}
	}
}

// TestHammingIsNotPovey: the golden tells the windows apart, so the test above can fail.
func TestHammingIsNotPovey(t *testing.T) {
	pcm := readLE[int16](t, filepath.Join("testdata", "povey_speech.pcm"))
	x := make([]float32, len(pcm))
	for i, v := range pcm {
		x[i] = float32(v) / 32768
	}
	got := New(NewTables(Hamming), 1).Compute(nil, x)
	want := readLE[float32](t, filepath.Join("testdata", "povey_speech.f32"))
	var worst float64
	for i := range got {
		worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
	}
	if worst < 0.05 {
		t.Errorf("Hamming features within %.3g of the Povey golden", worst)
	}
}
