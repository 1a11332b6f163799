package voices

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func seedVoice(name string, seed int64) *Voice {
	v := New(name, "espeak", KindSeed)
	v.Seed = &seed
	v.Defaults = Defaults{Temperature: 0.5, Speed: 1.1, Language: "en"}
	return v
}

func TestLibrary(t *testing.T) {
	l, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Save(seedVoice("alice", 42), false); err != nil {
		t.Fatal(err)
	}
	if err := l.Save(seedVoice("alice", 43), false); !errors.Is(err, ErrExists) {
		t.Errorf("overwrite without flag: %v", err)
	}
	emb := New("bob", "kokoro", KindEmbedding)
	emb.Embedding = &Embedding{Dim: 256, Data: make([]float32, 256)}
	emb.Embedding.Data[3] = 0.125
	if err := l.Save(emb, false); err != nil {
		t.Fatal(err)
	}
	got, err := l.Get("bob")
	if err != nil || got.Embedding.Data[3] != 0.125 {
		t.Fatalf("Get(bob) = %+v, %v", got, err)
	}
	// a broken file does not hide the good ones
	os.WriteFile(filepath.Join(l.Dir(), "broken.json"), []byte("{"), 0o644)
	vs, errs := l.List()
	if len(vs) != 2 || len(errs) != 1 {
		t.Errorf("List = %d voices, %v", len(vs), errs)
	}
	var buf bytes.Buffer
	if err := l.Export("alice", &buf); err != nil {
		t.Fatal(err)
	}
	imp, err := l.Import(bytes.NewReader(buf.Bytes()), "carol", false)
	if err != nil || imp.Name != "carol" || *imp.Seed != 42 {
		t.Fatalf("Import = %+v, %v", imp, err)
	}
	if _, err := l.Import(bytes.NewReader(buf.Bytes()), "../evil", false); !errors.Is(err, ErrInvalid) {
		t.Errorf("import with path name: %v", err)
	}
	if err := l.Remove("carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get("carol"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after rm: %v", err)
	}
	if err := l.Remove("carol"); !errors.Is(err, ErrNotFound) {
		t.Errorf("rm twice: %v", err)
	}
	// a file renamed on disk does not take over another name
	os.WriteFile(filepath.Join(l.Dir(), "mallory.json"), Bytes(seedVoice("alice", 1)), 0o644)
	if _, err := l.Get("mallory"); !errors.Is(err, ErrInvalid) {
		t.Errorf("mismatched name: %v", err)
	}
	// mixes flatten library presets and mixes
	p := New("heart", "kokoro", KindPreset)
	p.Preset = "af_heart"
	l.Save(p, false)
	m1, err := l.MixOf("m1", "kokoro", []Part{{"heart", 1}, {"am_adam", 1}})
	if err != nil {
		t.Fatal(err)
	}
	l.Save(m1, false)
	m2, err := l.MixOf("m2", "kokoro", []Part{{"m1", 1}, {"bf_emma", 1}})
	if err != nil || len(m2.Mix) != 3 || m2.Mix[0].Voice != "af_heart" || m2.Mix[0].Weight != 0.5 {
		t.Errorf("MixOf = %+v, %v", m2, err)
	}
	if _, err := l.MixOf("m3", "kokoro", []Part{{"alice", 1}}); err == nil {
		t.Error("mixing an espeak voice into a kokoro mix")
	}
}

func TestHostileFiles(t *testing.T) {
	good := string(Bytes(seedVoice("ok", 1)))
	cases := map[string]string{
		"not json":       "hello",
		"wrong format":   strings.Replace(good, `"parley-voice"`, `"other"`, 1),
		"future version": strings.Replace(good, `"version": 1`, `"version": 99`, 1),
		"path in name":   strings.Replace(good, `"name": "ok"`, `"name": "../../etc/passwd"`, 1),
		"slash name":     strings.Replace(good, `"name": "ok"`, `"name": "a/b"`, 1),
		"wrong engine":   strings.Replace(good, `"engine": "espeak"`, `"engine": "festival"`, 1),
		"unknown field":  strings.Replace(good, `"kind"`, `"evil": 1, "kind"`, 1),
		"trailing data":  good + "{}",
		"no seed":        strings.Replace(good, `"seed": 1,`, ``, 1),
		"huge":           `{"description": "` + strings.Repeat("x", MaxFileBytes) + `"}`,
		"bad speed":      strings.Replace(good, `"speed": 1.1`, `"speed": 40`, 1),
		"wrong dim":      `{"format":"parley-voice","version":1,"name":"e","engine":"kokoro","kind":"embedding","embedding":{"dim":100,"data":[` + strings.Repeat("0,", 99) + `0]},"defaults":{},"created":"2024-01-01T00:00:00Z"}`,
		"short data":     `{"format":"parley-voice","version":1,"name":"e","engine":"kokoro","kind":"embedding","embedding":{"dim":256,"data":[1,2]},"defaults":{},"created":"2024-01-01T00:00:00Z"}`,
		"espeak emb":     `{"format":"parley-voice","version":1,"name":"e","engine":"espeak","kind":"embedding","embedding":{"dim":256,"data":[1]},"defaults":{},"created":"2024-01-01T00:00:00Z"}`,
		"bad speaker":    `{"format":"parley-voice","version":1,"name":"e","engine":"kokoro","kind":"embedding","embedding":{"dim":256,"speaker":"spk1:AAAA"},"defaults":{},"created":"2024-01-01T00:00:00Z"}`,
		"self mix":       `{"format":"parley-voice","version":1,"name":"e","engine":"kokoro","kind":"mix","mix":[{"voice":"e","weight":1}],"defaults":{},"created":"2024-01-01T00:00:00Z"}`,
		"negative mix":   `{"format":"parley-voice","version":1,"name":"e","engine":"kokoro","kind":"mix","mix":[{"voice":"a","weight":-1}],"defaults":{},"created":"2024-01-01T00:00:00Z"}`,
		"preset path":    `{"format":"parley-voice","version":1,"name":"e","engine":"kokoro","kind":"preset","preset":"../x","defaults":{},"created":"2024-01-01T00:00:00Z"}`,
	}
	for name, s := range cases {
		if _, err := Parse(strings.NewReader(s)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	// NaN cannot be written in JSON, but a speaker string can carry one
	nan := EncodeSpeaker(append(make([]float32, 255), float32(math.NaN())))
	s := `{"format":"parley-voice","version":1,"name":"e","engine":"kokoro","kind":"embedding","embedding":{"dim":256,"speaker":"` + nan + `"},"defaults":{},"created":"2024-01-01T00:00:00Z"}`
	if _, err := Parse(strings.NewReader(s)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN embedding: %v", err)
	}
	if _, err := Parse(strings.NewReader(good)); err != nil {
		t.Errorf("good file rejected: %v", err)
	}
}

func TestSpeakerString(t *testing.T) {
	v := []float32{0, 1, -1, 0.5, 3.14159, -1e-3, 65504, 1e-6}
	s := EncodeSpeaker(v)
	got, err := DecodeSpeaker(s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v {
		if d := math.Abs(float64(got[i] - v[i])); d > math.Abs(float64(v[i]))*1e-3+1e-7 {
			t.Errorf("value %d: %v → %v", i, v[i], got[i])
		}
	}
	for _, bad := range []string{"", "spk1:", "spk2:AAAA", "spk1:!!!!", s[:len(s)-3], strings.Replace(s, "A", "B", 1), EncodeSpeaker([]float32{1e9})} {
		if _, err := DecodeSpeaker(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("DecodeSpeaker(%.30q) = %v", bad, err)
		}
	}
	// the speaker form is accepted in a voice file and gives the same data
	e := New("s", "kokoro", KindEmbedding)
	data := make([]float32, 256)
	for i := range data {
		data[i] = float32(i%7) / 8
	}
	e.Embedding = &Embedding{Dim: 256, Speaker: EncodeSpeaker(data)}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(bytes.NewReader(b))
	if err != nil || back.Embedding.Data[6] != data[6] {
		t.Errorf("speaker voice roundtrip: %v", err)
	}
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"alice", "af_heart", "v1.2", "a-b"} {
		if ValidName(n) != nil {
			t.Errorf("%q rejected", n)
		}
	}
	for _, n := range []string{"", ".hidden", "../x", "a/b", `a\b`, "A", "a..b", strings.Repeat("a", 65), "a b", "nul\x00"} {
		if ValidName(n) == nil {
			t.Errorf("%q accepted", n)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Bytes(seedVoice("ok", 1)))
	f.Add([]byte(`{"format":"parley-voice","version":1,"name":"e","engine":"kokoro","kind":"mix","mix":[{"voice":"a","weight":1}],"defaults":{},"created":"2024-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"format":"parley-voice","version":1,"name":"e","engine":"kokoro","kind":"embedding","embedding":{"dim":1,"rows":0,"speaker":"spk1:UFMBAAEAAAAAPPmVZ3k"},"defaults":{},"created":"2024-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"format":"parley-voice","version":1,"name":"me","engine":"chattts","kind":"clone","seed":3,"sample":{"text":"hello there","num_vq":4,"codes":[1,2,3,4,624,0,7,9]},"defaults":{},"created":"2024-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Parse(bytes.NewReader(b))
		if err != nil {
			return
		}
		if ValidName(v.Name) != nil || strings.ContainsAny(v.Name, `/\`) {
			t.Fatalf("accepted name %q", v.Name)
		}
		out, err := v.Marshal()
		if err != nil {
			t.Fatalf("accepted voice does not marshal: %v", err)
		}
		if _, err := Parse(bytes.NewReader(out)); err != nil {
			t.Fatalf("marshalled voice does not parse: %v", err)
		}
	})
}

func FuzzDecodeSpeaker(f *testing.F) {
	f.Add(EncodeSpeaker([]float32{1, 2, 3}))
	f.Add("spk1:UFMBAAEAAAAAPPmVZ3k")
	f.Add("spk1:")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := DecodeSpeaker(s)
		if err != nil {
			return
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatal("non-finite value accepted")
			}
		}
		back, err := DecodeSpeaker(EncodeSpeaker(v))
		if err != nil || len(back) != len(v) {
			t.Fatalf("re-encode: %v", err)
		}
		for i := range v {
			if back[i] != v[i] {
				t.Fatalf("float16 values do not round-trip exactly: %v → %v", v[i], back[i])
			}
		}
	})
}

// TestParseSaysWhatIsWrong: an empty or non-JSON file gets a message a user can act on, not
// a bare "EOF".
func TestParseSaysWhatIsWrong(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", "empty file"},
		{"  \n", "empty file"},
		{"\x94\xfcBG", "not a JSON voice file"},
		{`{"name": "a"`, "cut short"},
	} {
		_, err := Parse(strings.NewReader(tt.in))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid saying %q", tt.in, err, tt.want)
		}
	}
}

func TestCloneVoice(t *testing.T) {
	ok := func() *Voice {
		v := New("me", "chattts", KindClone)
		v.Sample = &Sample{Text: "hello there", NumVQ: 4, Codes: []int32{1, 2, 3, 4, 624, 0, 7, 9}, Seconds: 3.2}
		return v
	}
	if err := ok().Validate(); err != nil {
		t.Fatal(err)
	}
	lib, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.Save(ok(), false); err != nil {
		t.Fatal(err)
	}
	got, err := lib.Get("me")
	if err != nil || got.Sample == nil || len(got.Sample.Codes) != 8 || got.Sample.Codes[4] != 624 {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	pitched := ok()
	pitched.Name, pitched.Sample.Pitch = "pitched", -3.5
	if err := lib.Save(pitched, false); err != nil {
		t.Fatal(err)
	}
	if got, err := lib.Get("pitched"); err != nil || got.Sample.Pitch != -3.5 {
		t.Fatalf("a clone's pitch shift does not round-trip: %+v %v", got, err)
	}
	for name, mod := range map[string]func(v *Voice){
		"code 625":             func(v *Voice) { v.Sample.Codes[5] = 625 },
		"negative code":        func(v *Voice) { v.Sample.Codes[0] = -1 },
		"partial frame":        func(v *Voice) { v.Sample.Codes = v.Sample.Codes[:7] },
		"no text":              func(v *Voice) { v.Sample.Text = " " },
		"no sample":            func(v *Voice) { v.Sample = nil },
		"no streams":           func(v *Voice) { v.Sample.NumVQ = 0 },
		"kokoro":               func(v *Voice) { v.Engine = "kokoro" },
		"too long":             func(v *Voice) { v.Sample.Codes = make([]int32, 4*(MaxSampleFrames+1)) },
		"pitch past an octave": func(v *Voice) { v.Sample.Pitch = 12.5 },
		"NaN pitch":            func(v *Voice) { v.Sample.Pitch = math.NaN() },
		"sample on a seed voice": func(v *Voice) {
			v.Kind = KindSeed
			s := int64(1)
			v.Seed = &s
		},
	} {
		v := ok()
		mod(v)
		if err := v.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// a voice file whose prompt codes are out of range is refused when it is read
	bad := ok()
	bad.Sample.Codes[6] = 4000
	b, _ := json.Marshal(bad)
	os.WriteFile(filepath.Join(lib.Dir(), "bad.json"), bytes.Replace(b, []byte(`"name":"me"`), []byte(`"name":"bad"`), 1), 0o644)
	if _, err := lib.Get("bad"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "code 4000 at frame 1, stream 2") {
		t.Fatalf("out-of-range prompt code: %v", err)
	}
}
