package kokoro

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// npy builds an .npy file (format version v) from a header dict and raw body.
func npy(v byte, header string, body []byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x93NUMPY")
	b.WriteByte(v)
	b.WriteByte(0)
	h := header + strings.Repeat(" ", 64-(len(header)+11)%64) + "\n"
	if v == 1 {
		binary.Write(&b, binary.LittleEndian, uint16(len(h)))
	} else {
		binary.Write(&b, binary.LittleEndian, uint32(len(h)))
	}
	b.WriteString(h)
	b.Write(body)
	return b.Bytes()
}

func f32body(order binary.ByteOrder, vals ...float32) []byte {
	var b bytes.Buffer
	binary.Write(&b, order, vals)
	return b.Bytes()
}

func TestReadNPY(t *testing.T) {
	le := f32body(binary.LittleEndian, 1, -2.5, 3, 4, 5, 6)
	var f8 bytes.Buffer
	binary.Write(&f8, binary.LittleEndian, []float64{1, 2})
	tests := []struct {
		name  string
		in    []byte
		shape []int
		first float32
		err   bool
	}{
		{"v1 f4", npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", le), []int{2, 3}, 1, false},
		{"v2 f4 3d", npy(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 3), }", le), []int{2, 1, 3}, 1, false},
		{"big endian", npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f32body(binary.BigEndian, 7, 8)), []int{2}, 7, false},
		{"f8", npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", f8.Bytes()), []int{2}, 1, false},
		{"f2", npy(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }", []byte{0x00, 0x3c}), []int{1}, 1, false},
		{"scalar", npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f32body(binary.LittleEndian, 9)), []int{}, 9, false},
		{"bad magic", []byte("NUMPY\x01\x00\x00\x00"), nil, 0, true},
		{"int dtype", npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", make([]byte, 8)), nil, 0, true},
		{"fortran", npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", le), nil, 0, true},
		{"short body", npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 3), }", le), nil, 0, true},
		{"long body", npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", le), nil, 0, true},
		{"huge shape", npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999), }", le), nil, 0, true},
		{"negative", npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", le), nil, 0, true},
		{"missing key", npy(1, "{'descr': '<f4', 'shape': (6,), }", le), nil, 0, true},
		{"object", npy(1, "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", le[:4]), nil, 0, true},
		{"header overruns", []byte("\x93NUMPY\x01\x00\xff\xff{"), nil, 0, true},
		{"version 9", npy(9, "{}", nil), nil, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ReadNPY(tt.in)
			if tt.err {
				if err == nil || !errors.Is(err, ErrNPY) {
					t.Fatalf("err = %v, want ErrNPY", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a.Shape, tt.shape) || a.Data[0] != tt.first {
				t.Errorf("got shape %v first %v", a.Shape, a.Data[0])
			}
		})
	}
}

func TestReadNPZ(t *testing.T) {
	b, err := os.ReadFile("testdata/voices.npz")
	if err != nil {
		t.Fatal(err)
	}
	arrs, err := ReadNPZ(b, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(arrs) != 3 || !slices.Equal(arrs["af_tiny"].Shape, []int{PackRows, 1, StyleDim}) {
		t.Fatalf("arrays %v", arrs)
	}
	if _, err := ReadNPZ(b, 1000); err == nil {
		t.Error("size limit not enforced")
	}
	if _, err := ReadNPZ([]byte("not a zip"), 1<<20); !errors.Is(err, ErrNPY) {
		t.Errorf("err = %v", err)
	}
}

func zipOf(files map[string][]byte) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for n, d := range files {
		w, _ := zw.Create(n)
		w.Write(d)
	}
	zw.Close()
	return b.Bytes()
}

func FuzzReadNPY(f *testing.F) {
	f.Add(npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1), }", f32body(binary.LittleEndian, 1, 2)))
	f.Add(npy(2, "{'descr': '>f8', 'fortran_order': False, 'shape': (0,), }", nil))
	f.Add([]byte("\x93NUMPY\x03\x00\x10\x00\x00\x00{'shape': (1,)}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ReadNPY(b)
		if err != nil {
			return
		}
		n := 1
		for _, d := range a.Shape {
			n *= d
		}
		if n != len(a.Data) {
			t.Fatalf("shape %v but %d values", a.Shape, len(a.Data))
		}
	})
}

func FuzzReadNPZ(f *testing.F) {
	good, _ := os.ReadFile("testdata/voices.npz")
	f.Add(good[:min(len(good), 4096)])
	f.Add(zipOf(map[string][]byte{"a.npy": npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32body(binary.LittleEndian, 1))}))
	f.Add(zipOf(map[string][]byte{"x.npy": []byte("junk")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		arrs, err := ReadNPZ(b, 1<<20)
		if err != nil {
			return
		}
		for n, a := range arrs {
			if _, err := FromArray(n, a); err == nil && len(a.Data)%StyleDim != 0 {
				t.Fatalf("%s accepted with %d floats", n, len(a.Data))
			}
		}
	})
}

func TestPacks(t *testing.T) {
	packs, err := LoadPacks("testdata")
	if err != nil {
		t.Fatal(err)
	}
	af := packs["af_tiny"]
	if af == nil || af.Rows != PackRows {
		t.Fatalf("packs %v", packs)
	}
	// the same pack as a raw onnx-community voices/*.bin gives the same data
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "voices"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "voices", "af_raw.bin"), f32body(binary.LittleEndian, af.Data...), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := LoadPacks(dir)
	if err != nil || !slices.Equal(raw["af_raw"].Data, af.Data) {
		t.Fatalf("raw .bin pack differs: %v", err)
	}
	// hostile packs
	for name, data := range map[string][]byte{
		"odd.bin": make([]byte, 1000),
		"nan.bin": f32body(binary.LittleEndian, append(make([]float32, StyleDim-1), float32(math.NaN()))...),
	} {
		d := t.TempDir()
		os.MkdirAll(filepath.Join(d, "voices"), 0o755)
		os.WriteFile(filepath.Join(d, "voices", name), data, 0o644)
		if _, err := LoadPacks(d); !errors.Is(err, ErrVoice) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v, want ErrVoice naming the file", name, err)
		}
	}
	// blending: halfway between two packs
	am := packs["am_tiny"]
	mix, err := Blend("mix", []*Pack{af, am}, []float64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	if d1, d2 := StyleDistance(mix, af, 10), StyleDistance(mix, am, 10); math.Abs(d1-d2) > 1e-3 || d1 == 0 {
		t.Errorf("50/50 blend distances %v %v", d1, d2)
	}
	if _, err := Blend("x", []*Pack{af}, []float64{0}); err == nil {
		t.Error("zero-weight blend accepted")
	}
}

func TestAudioSeed(t *testing.T) {
	packs, err := LoadPacks("testdata")
	if err != nil {
		t.Fatal(err)
	}
	st, err := ComputeStats(packs)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := st.Sample(1), st.Sample(1), st.Sample(2)
	if !slices.Equal(a.Data, b.Data) {
		t.Error("same seed gave different styles")
	}
	// different seeds are about as far apart as two installed voices are
	dSeeds := StyleDistance(a, c, 20)
	dVoices := StyleDistance(packs["af_tiny"], packs["am_tiny"], 20)
	t.Logf("style distance: seeds 1↔2 %.2f, af_tiny↔am_tiny %.2f", dSeeds, dVoices)
	if dSeeds < 0.25*dVoices {
		t.Errorf("seeds 1 and 2 too close: %.3f (voices are %.3f apart)", dSeeds, dVoices)
	}
	// and sampled styles stay within the installed distribution
	for j, v := range a.Data {
		if math.Abs(float64(v-st.Mean[j])) > 6*math.Max(float64(st.Std[j]), 0.05*math.Abs(float64(st.Mean[j])))+1e-6 {
			t.Fatalf("dim %d: %v is far outside mean %v ± %v", j, v, st.Mean[j], st.Std[j])
		}
	}
	if _, err := ComputeStats(nil); err == nil {
		t.Error("stats of no packs")
	}
}

func TestVocab(t *testing.T) {
	v, err := LoadVocab("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 114 || v[' '] != 16 || v['ˈ'] != 156 {
		t.Fatalf("vocab has %d entries, ' '=%d ˈ=%d", len(v), v[' '], v['ˈ'])
	}
	ids, dropped := v.Tokenize("həlˈoʊ, wˈɜːld!#")
	if dropped != 1 || ids[0] != 50 || ids[len(ids)-1] != 5 {
		t.Errorf("Tokenize = %v dropped %d", ids, dropped)
	}
	// onnx-community's tokenizer.json layout
	d := t.TempDir()
	os.WriteFile(filepath.Join(d, "tokenizer.json"), []byte(`{"model": {"vocab": {"$": 0, "a": 43, "ˈ": 156}}}`), 0o644)
	if v2, err := LoadVocab(d); err != nil || v2['a'] != 43 || len(v2) != 2 {
		t.Errorf("tokenizer.json vocab = %v, %v", v2, err)
	}
	for _, bad := range []string{`{"vocab": {"ab": 3}}`, `{"vocab": {"a": -4}}`, `{"vocab": `, `{}`} {
		os.WriteFile(filepath.Join(d, "tokenizer.json"), []byte(bad), 0o644)
		if _, err := LoadVocab(d); !errors.Is(err, ErrVocab) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

func TestPhonemizeAndChunks(t *testing.T) {
	ph, err := Phonemize("Hello, world! I have ninety cars.", "en-us")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(ph)
	for _, want := range []string{"həlˈoʊ,", "wˈɜːld!", "nˈaɪndi", "kˈɑːɹz."} {
		if !strings.Contains(ph, want) {
			t.Errorf("Phonemize = %q, missing %q", ph, want)
		}
	}
	long := strings.Repeat("ðɪs ɪz ɐ sˈɛntəns. ", 60)
	chunks := Chunks(long, MaxTokens)
	if len(chunks) < 2 {
		t.Fatalf("%d chunks", len(chunks))
	}
	total := 0
	for _, c := range chunks {
		n := len([]rune(c))
		total += n
		if n > MaxTokens {
			t.Errorf("chunk of %d > %d", n, MaxTokens)
		}
		if !strings.HasSuffix(c, ".") {
			t.Errorf("chunk not cut at a sentence end: …%q", c[max(0, len(c)-10):])
		}
	}
	if total < len([]rune(strings.TrimSpace(long)))-len(chunks) {
		t.Errorf("chunks lost text: %d of %d", total, len([]rune(long)))
	}
	if c := Chunks(strings.Repeat("a", 1200), 500); len(c) != 3 {
		t.Errorf("unbroken text: %d chunks", len(c))
	}
	_ = fmt.Sprint()
}
