package asr

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The beam search decodes as its Python reference (train/sensevoice/beam.py) on the fixture it
// wrote: a small LM and random peaky logits (`python3 -m train.sensevoice.beam --golden
// testdata/asr/beam`).
func TestBeamMatchesReference(t *testing.T) {
	var fx struct {
		Vocab     int `json:"vocab"`
		FirstText int `json:"first_text"`
		Cases     []struct {
			T      int       `json:"t"`
			Logits []float32 `json:"logits"`
			Alpha  float64   `json:"alpha"`
			Beta   float64   `json:"beta"`
			Width  int       `json:"width"`
			Top    int       `json:"top"`
			Prune  float64   `json:"prune"`
			IDs    []int32   `json:"ids"`
		} `json:"cases"`
	}
	b, err := os.ReadFile("../testdata/asr/beam/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	lm, err := loadLM("../testdata/asr/beam/lm.bin", fx.Vocab)
	if err != nil {
		t.Fatal(err)
	}
	isText := make([]bool, fx.Vocab)
	for i := fx.FirstText; i < fx.Vocab; i++ {
		isText[i] = true
	}
	for i, c := range fx.Cases {
		o := BeamOptions{Width: c.Width, Alpha: c.Alpha, Beta: c.Beta, Top: c.Top, Prune: c.Prune}
		ids, frames := beamCTC(c.Logits, c.T, fx.Vocab, 0, 0, isText, lm, nil, o, nil, nil)
		if !slices.Equal(ids, c.IDs) {
			t.Errorf("case %d: %v, the reference %v", i, ids, c.IDs)
		}
		if len(frames) != len(ids) || !slices.IsSorted(frames) {
			t.Errorf("case %d: frames %v for %d ids", i, frames, len(ids))
		}
	}
}

// With the acoustics undecided between two spellings, the language model picks the one it
// has seen; greedy takes whichever scores a hair higher.
func TestBeamPrefersWhatTheLMKnows(t *testing.T) {
	lm, err := loadLM("../testdata/asr/beam/lm.bin", 12)
	if err != nil {
		t.Fatal(err)
	}
	isText := make([]bool, 12)
	for i := 4; i < 12; i++ {
		isText[i] = true
	}
	// frames: "7" then either "8" (a word in the LM: 7 8) or "5" (never after 7), 5 a hair ahead
	logits := make([]float32, 0, 4*12)
	row := func(hot map[int]float32) {
		r := make([]float32, 12)
		for i := range r {
			r[i] = -8
		}
		for k, v := range hot {
			r[k] = v
		}
		logits = append(logits, r...)
	}
	row(map[int]float32{7: 5})
	row(map[int]float32{0: 5})
	row(map[int]float32{5: 3.05, 8: 3})
	row(map[int]float32{0: 5})
	greedy, _ := greedyCTC(slices.Clone(logits), 4, 12, 0, -1, nil, nil)
	beam, _ := beamCTC(logits, 4, 12, 0, 0, isText, lm, nil, defaultBeam, nil, nil)
	if !slices.Equal(greedy, []int32{7, 5}) || !slices.Equal(beam, []int32{7, 8}) {
		t.Errorf("greedy %v (want 7 5), beam %v (want 7 8)", greedy, beam)
	}
}

func TestLMRefusesBadFiles(t *testing.T) {
	good, err := os.ReadFile("../testdata/asr/beam/lm.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseLM(good, 12); err != nil {
		t.Fatal(err)
	}
	nan := slices.Clone(good)
	// the first unigram's log p
	copy(nan[20+4+2:], []byte{0, 0, 0xc0, 0x7f})
	huge := slices.Clone(good) // finite, but summed in the search past its "impossible" -1e30
	binary.LittleEndian.PutUint32(huge[20+4+2:], math.Float32bits(-3e38))
	hugeBack := slices.Clone(good)
	binary.LittleEndian.PutUint32(hugeBack[20+4+2+4:], math.Float32bits(5e3))
	for name, c := range map[string]struct {
		b     []byte
		vocab int
		want  string
	}{
		"not an LM":       {[]byte("hello world, this is text"), 12, "no PARLEYLM header"},
		"other vocab":     {good, 300, "made for 12 tokens"},
		"truncated":       {good[:len(good)-3], 12, "do not fit"},
		"trailing bytes":  {append(slices.Clone(good), 1, 2, 3), 12, "after the last"},
		"NaN probability": {nan, 12, "log10 p"},
		"huge log p":      {huge, 12, "log10 p -3e+38"},
		"huge back-off":   {hugeBack, 12, "back-off 5000"},
		"no </s>":         {good, 2, "want 3..65536"},
	} {
		_, err := parseLM(c.b, c.vocab)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	p := filepath.Join(t.TempDir(), "lm.bin")
	os.WriteFile(p, []byte("PARLEYLM"), 0o644)
	if _, err := loadLM(p, 12); !errors.Is(err, ErrLM) || !strings.Contains(err.Error(), p) {
		t.Errorf("a bad file: %v", err)
	}
}

func FuzzParseLM(f *testing.F) {
	if b, err := os.ReadFile("../testdata/asr/beam/lm.bin"); err == nil {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte("PARLEYLM\x01\x00\x00\x00\x03\x00\x00\x00\x0c\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lm, err := parseLM(b, 12)
		if err != nil {
			return
		}
		// a model that loads answers every query with a finite log probability
		for _, w := range []int32{0, 4, 11} {
			if p := lm.logp([]int32{1, 1, 5}, w); math.IsNaN(float64(p)) || math.IsInf(float64(p), 0) {
				t.Fatalf("logp %g", p)
			}
		}
	})
}
