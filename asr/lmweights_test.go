package asr

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
)

func TestLMWeightsPath(t *testing.T) {
	for in, want := range map[string]string{
		"/m/lm.bin":       "/m/lm.json",
		"/lms/o5m4.bin":   "/lms/o5m4.json",
		"/lms/plain":      "/lms/plain.json",
		"/a.b/lm.v2.bin":  "/a.b/lm.v2.json",
		"rel/dir.d/model": "rel/dir.d/model.json",
	} {
		if got := LMWeightsPath(in); got != want {
			t.Errorf("LMWeightsPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseLMWeights(t *testing.T) {
	d := defaultBeam
	for _, c := range []struct {
		in   string
		want BeamOptions
	}{
		{`{}`, d},
		{`{"alpha": 0.5, "beta": 2.5, "width": 16}`, BeamOptions{Width: 16, Alpha: 0.5, Beta: 2.5, Top: d.Top, Prune: d.Prune}},
		{`{"top": 4, "prune": -6}`, BeamOptions{Width: d.Width, Alpha: d.Alpha, Beta: d.Beta, Top: 4, Prune: -6}},
		// a zero in the file is that value, not "the default"
		{`{"beta": 0, "alpha": 0}` + "\n", BeamOptions{Width: d.Width, Alpha: 0, Beta: 0, Top: d.Top, Prune: d.Prune}},
		{`{"beta": -1.5}`, BeamOptions{Width: d.Width, Alpha: d.Alpha, Beta: -1.5, Top: d.Top, Prune: d.Prune}},
		{`{"oov": 3.5}`, BeamOptions{Width: d.Width, Alpha: d.Alpha, Beta: d.Beta, Top: d.Top, Prune: d.Prune, OOV: 3.5}},
	} {
		got, err := parseLMWeights([]byte(c.in), d)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for in, want := range map[string]string{
		`{"alpha": 0.5, "gamma": 1}`: `unknown field "gamma"`,
		`{"alpha": -0.1}`:            "alpha -0.1 outside",
		`{"alpha": 21}`:              "alpha 21 outside",
		`{"beta": 1e9}`:              "beta 1e+09 outside",
		`{"width": 0}`:               "width 0 outside",
		`{"width": 100000}`:          "width 100000 outside",
		`{"width": 2.5}`:             "cannot unmarshal number 2.5",
		`{"top": -1}`:                "top -1 outside",
		`{"prune": 1}`:               "prune 1 outside",
		`{"oov": -1}`:                "oov -1 outside",
		`{"oov": 101}`:               "oov 101 outside",
		`{"alpha": "0.5"}`:           "cannot unmarshal string",
		`{"alpha": 0.5`:              "unexpected EOF",
		`{"alpha": 0.5} {}`:          "more after the JSON object",
		`[0.5, 2]`:                   "cannot unmarshal array",
		``:                           "EOF",
	} {
		_, err := parseLMWeights([]byte(in), d)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", in, err, want)
		}
	}
}

// writeLM writes a language model of the given order for vocab tokens: every token a unigram
// and, when order > 1, the one n-gram top (len order) at log10 p -0.1.
func writeLM(t *testing.T, path string, order, vocab int, top []uint16) {
	t.Helper()
	b := []byte(lmMagic)
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	f32 := func(v float32) { u32(math.Float32bits(v)) }
	u32(1)
	u32(uint32(order))
	u32(uint32(vocab))
	for k := 1; k <= order; k++ {
		switch {
		case k == 1:
			u32(uint32(vocab))
			for w := range vocab {
				b = binary.LittleEndian.AppendUint16(b, uint16(w))
				f32(float32(-math.Log10(float64(vocab))))
				f32(0)
			}
		case k == order:
			u32(1)
			for _, w := range top {
				b = binary.LittleEndian.AppendUint16(b, w)
			}
			f32(-0.1)
			f32(0)
		default:
			u32(0)
		}
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Orders above 4 load when the vocabulary's ids pack into a 64-bit key (300 tokens: 9 bits, up
// to order 7), and each n-gram is found by its whole context, not a neighbour's.
func TestLMHigherOrders(t *testing.T) {
	dir := t.TempDir()
	for _, order := range []int{5, 6, 7} {
		top := []uint16{299, 3, 298, 7, 256, 5, 11}[:order]
		p := filepath.Join(dir, "lm.bin")
		writeLM(t, p, order, 300, top)
		lm, err := loadLM(p, 300)
		if err != nil {
			t.Fatalf("order %d: %v", order, err)
		}
		ctx := make([]int32, order-1)
		for i := range ctx {
			ctx[i] = int32(top[i])
		}
		if got := lm.logp(ctx, int32(top[order-1])); math.Abs(float64(got)-(-0.1*math.Ln10)) > 1e-5 {
			t.Errorf("order %d: the n-gram's log p %v, want %v", order, got, -0.1*math.Ln10)
		}
		ctx[0] = int32(top[0]) ^ 1 // another context: back off to the unigram
		if got := lm.logp(ctx, int32(top[order-1])); math.Abs(float64(got)-(-math.Log(300))) > 1e-4 {
			t.Errorf("order %d: another context's log p %v, want the unigram's %v", order, got, -math.Log(300))
		}
	}
	p := filepath.Join(dir, "lm.bin")
	writeLM(t, p, 8, 300, []uint16{1, 2, 3, 4, 5, 6, 7, 8})
	if _, err := loadLM(p, 300); err == nil || !strings.Contains(err.Error(), "order 8 (want 1..7 for 300 tokens)") {
		t.Errorf("order 8 over 300 tokens: %v", err)
	}
	writeLM(t, p, 5, 40000, []uint16{1, 2, 3, 4, 5})
	if _, err := loadLM(p, 40000); err == nil || !strings.Contains(err.Error(), "order 5 (want 1..4") {
		t.Errorf("order 5 over 40000 tokens: %v", err)
	}
}

// The model's LM brings its sidecar's weights: the directory's lm.bin its lm.json, an explicit
// file its own .json; no sidecar is the defaults, a bad one an error naming it.
func TestLoadLMSidecar(t *testing.T) {
	pieces := []string{"<blk>", "<s>", "</s>", "<unk>", "a", "b", "c", "d", "e", "f", "g", "h"}
	good, err := os.ReadFile("../testdata/asr/beam/lm.bin")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("lm.bin", string(good))
	load := func(spec string) (*model, error) {
		m := &model{vocab: 12, tokens: newTokens(pieces)}
		return m, m.loadLM(spec, dir)
	}
	m, err := load("")
	if err != nil || m.lm == nil || m.beam != defaultBeam {
		t.Fatalf("no sidecar: %+v, %v; want the defaults", m.beam, err)
	}
	write("lm.json", `{"alpha": 0.7, "beta": 0, "width": 12}`)
	m, err = load("")
	if want := (BeamOptions{Width: 12, Alpha: 0.7, Beta: 0, Top: 8, Prune: -10}); err != nil || m.beam != want || m.lmPath != filepath.Join(dir, "lm.bin") {
		t.Errorf("lm.json: %+v from %s, %v; want %+v", m.beam, m.lmPath, err, want)
	}
	if m, err = load("none"); err != nil || m.lm != nil {
		t.Errorf("none: %v, %v", m.lm, err)
	}
	other := write("o5.bin", string(good))
	write("o5.json", `{"alpha": 1.25}`)
	if m, err = load(other); err != nil || m.beam.Alpha != 1.25 || m.beam.Width != 32 {
		t.Errorf("o5.bin with o5.json: %+v, %v", m.beam, err)
	}
	// a charge for unlisted words needs the list beside the LM, which must parse
	write("lm.json", `{"oov": 2}`)
	words := filepath.Join(dir, "lm.words.txt")
	if _, err = load(""); !errors.Is(err, ErrLM) || !strings.Contains(err.Error(), words) {
		t.Errorf("oov without a word list: %v; want ErrLM naming %s", err, words)
	}
	write("lm.words.txt", "bad\nace\r\n\ncab\n")
	if m, err = load(""); err != nil || m.beam.OOV != 2 || m.lex == nil || !m.lex.has(wordHash(wordHashEmpty, []byte("ace"))) {
		t.Errorf("oov with a word list: %+v, %v", m.beam, err)
	}
	write("lm.words.txt", "bad\nace cab\n")
	if _, err = load(""); !errors.Is(err, ErrLM) || !strings.Contains(err.Error(), words) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a line of two words: %v; want ErrLM naming %s and line 2", err, words)
	}
	os.Remove(words)
	os.Mkdir(words, 0o755) // not a regular file: refused rather than read
	if _, err = load(""); !errors.Is(err, ErrLM) || !strings.Contains(err.Error(), words+" is not a regular file") {
		t.Errorf("a word list that is a directory: %v", err)
	}
	os.Remove(words)
	bad := write("lm.json", `{"alpha": 0.7, "gamma": 1}`)
	if _, err = load(""); !errors.Is(err, ErrLM) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "gamma") {
		t.Errorf("an unknown field: %v; want ErrLM naming %s and the field", err, bad)
	}
	write("lm.json", `{"alpha": 0.7,`)
	if _, err = load(""); !errors.Is(err, ErrLM) || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad JSON: %v; want ErrLM naming %s", err, bad)
	}
	write("lm.json", `{"width": -3}`)
	if _, err = load(""); err == nil || !strings.Contains(err.Error(), "width -3 outside") {
		t.Errorf("a width out of range: %v", err)
	}
	os.Remove(bad)
	os.Mkdir(bad, 0o755) // a sidecar that cannot be read is an error too, not the defaults
	if _, err = load(""); !errors.Is(err, ErrLM) || !strings.Contains(err.Error(), bad+" is not a regular file") {
		t.Errorf("an unreadable sidecar: %v", err)
	}
	// an LM named by the caller that is not a regular file is refused, not read
	if _, err = load(dir); !errors.Is(err, ErrLM) || !strings.Contains(err.Error(), dir+" is not a regular file") {
		t.Errorf("a directory as the LM: %v", err)
	}
}

// On the demo model: Config.Beam's non-zero fields win over the sidecar, which wins over the
// defaults; the recogniser reports the weights it decodes with, and refuses NaN weights.
func TestRecognizerBeamPrecedence(t *testing.T) {
	dir := demoWithLM(t)
	cpu := gpu.Options{Provider: "cpu", IntraOpThreads: 1}
	beam := func(c Config) BeamOptions {
		t.Helper()
		c.GPU = cpu
		r, err := New(dir, c)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		info := r.Info()
		if info.LM != filepath.Join(dir, LMFile) {
			t.Errorf("Info().LM %q", info.LM)
		}
		return info.Beam
	}
	if got := beam(Config{}); got != defaultBeam {
		t.Errorf("no sidecar: %+v, want the defaults %+v", got, defaultBeam)
	}
	if err := os.WriteFile(filepath.Join(dir, "lm.json"), []byte(`{"alpha": 0.9, "beta": 3.5, "width": 16}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := beam(Config{}), (BeamOptions{Width: 16, Alpha: 0.9, Beta: 3.5, Top: 8, Prune: -10}); got != want {
		t.Errorf("sidecar: %+v, want %+v", got, want)
	}
	if got, want := beam(Config{Beam: BeamOptions{Alpha: 0.3, Top: 4}}), (BeamOptions{Width: 16, Alpha: 0.3, Beta: 3.5, Top: 4, Prune: -10}); got != want {
		t.Errorf("Config.Beam over the sidecar: %+v, want %+v", got, want)
	}
	r, err := New(dir, Config{GPU: cpu, LM: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if info := r.Info(); info.LM != "" || info.Beam != (BeamOptions{}) {
		t.Errorf("greedy: Info LM %q beam %+v", info.LM, info.Beam)
	}
	r.Close()
	if _, err := New(dir, Config{GPU: cpu, Beam: BeamOptions{Beta: math.NaN()}}); !errors.Is(err, ErrConfig) {
		t.Errorf("a NaN beta: %v, want ErrConfig", err)
	}
	// a recogniser's own words must each be one word
	for _, w := range []string{"two words", "", "tab\there", "..."} {
		if _, err := New(dir, Config{GPU: cpu, Words: []string{"anouk", w}}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "Words: ") {
			t.Errorf("Words with %q: %v, want ErrConfig naming Words", w, err)
		}
	}
	// a charge for unlisted words with no word list beside the LM is refused, naming the list
	if _, err := New(dir, Config{GPU: cpu, Beam: BeamOptions{OOV: 2}}); !errors.Is(err, ErrConfig) ||
		!strings.Contains(err.Error(), LexiconPath(filepath.Join(dir, LMFile))) {
		t.Errorf("oov without a word list: %v, want ErrConfig naming it", err)
	}
	// Config.Beam takes the ranges a sidecar does: an alpha lm.json could not hold is refused
	if _, err := New(dir, Config{GPU: cpu, Beam: BeamOptions{Alpha: MaxBeamAlpha + 1}}); !errors.Is(err, ErrConfig) {
		t.Errorf("alpha %v: %v, want ErrConfig", MaxBeamAlpha+1, err)
	}
}

// One range check for every source of beam weights: Validate passes the zero (inherit) value
// and refuses what the sidecar parser refuses (which also refuses a zero width or top: a
// sidecar has nothing to inherit from).
func TestBeamOptionsValidate(t *testing.T) {
	if err := (BeamOptions{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
	if err := defaultBeam.Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	// BeamZero is an explicit zero: it survives the defaults (a zero field inherits them)
	if got := (BeamOptions{Alpha: BeamZero, Beta: BeamZero}).or(defaultBeam); got.Alpha != 0 || got.Beta != 0 || got.Width != defaultBeam.Width {
		t.Errorf("BeamZero over the defaults: %+v", got)
	}
	withOOV := defaultBeam
	withOOV.OOV = 4
	if got := (BeamOptions{OOV: BeamZero}).or(withOOV); got.OOV != 0 {
		t.Errorf("BeamZero oov over a sidecar's 4: %v", got.OOV)
	}
	if got := (BeamOptions{}).or(withOOV); got.OOV != 4 {
		t.Errorf("no oov over a sidecar's 4: %v", got.OOV)
	}
	if got := (BeamOptions{}).or(defaultBeam); got != defaultBeam {
		t.Errorf("zero options over the defaults: %+v", got)
	}
	if err := (BeamOptions{Alpha: BeamZero, Beta: BeamZero}).Validate(); err != nil {
		t.Errorf("BeamZero: %v", err)
	}
	for _, c := range []struct {
		o    BeamOptions
		json string
	}{
		{BeamOptions{Alpha: -0.1}, `{"alpha": -0.1}`},
		{BeamOptions{Alpha: 20.5}, `{"alpha": 20.5}`},
		{BeamOptions{Beta: -51}, `{"beta": -51}`},
		{BeamOptions{Width: 5000}, `{"width": 5000}`},
		{BeamOptions{Top: 4097}, `{"top": 4097}`},
		{BeamOptions{Prune: 0.5}, `{"prune": 0.5}`},
		{BeamOptions{Prune: -2000}, `{"prune": -2000}`},
	} {
		if err := c.o.Validate(); err == nil {
			t.Errorf("%+v passed Validate", c.o)
		}
		if _, err := parseLMWeights([]byte(c.json), defaultBeam); err == nil {
			t.Errorf("%s parsed", c.json)
		}
	}
}

// demoWithLM is a directory holding the demo model, its vocabulary and its token LM (links),
// without the LM's weights or word list, for a test to add its own; it skips without an LM or
// ONNX Runtime.
func demoWithLM(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(demoDir, LMFile)); err != nil {
		t.Skipf("no %s beside the demo model: %v", LMFile, err)
	}
	gputest.RequireORT(t)
	dir := t.TempDir()
	for _, f := range []string{"model.onnx", "tokens.txt", LMFile} {
		if err := os.Symlink(filepath.Join(mustAbs(t, demoDir), f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func FuzzParseLMWeights(f *testing.F) {
	for _, s := range []string{`{}`, `{"alpha": 0.5, "beta": 2.5, "width": 32}`, `{"top": 4, "prune": -6}`,
		`{"beta": -1e400}`, `{"alpha": 0.5} x`, `null`, `{"width": 1e99}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := parseLMWeights(b, defaultBeam)
		if err != nil {
			if o != defaultBeam {
				t.Errorf("an error with changed weights %+v", o)
			}
			return
		}
		// what parses is in range
		if !(o.Alpha >= 0 && o.Alpha <= MaxBeamAlpha) || !(math.Abs(o.Beta) <= MaxBeamBeta) ||
			o.Width < 1 || o.Width > MaxBeamWidth || o.Top < 1 || o.Top > MaxBeamTop ||
			!(o.Prune >= MinBeamPrune && o.Prune <= 0) {
			t.Errorf("%q parsed to %+v, out of range", b, o)
		}
	})
}
