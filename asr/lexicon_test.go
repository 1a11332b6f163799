package asr

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLexiconPath(t *testing.T) {
	for in, want := range map[string]string{
		"/m/lm.bin":      "/m/lm.words.txt",
		"/lms/o5m4.bin":  "/lms/o5m4.words.txt",
		"/lms/plain":     "/lms/plain.words.txt",
		"/a.b/lm.v2.bin": "/a.b/lm.v2.words.txt",
	} {
		if got := LexiconPath(in); got != want {
			t.Errorf("LexiconPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseLexicon(t *testing.T) {
	hs, err := parseLexicon([]byte("cat\r\nDog\n\n  \ncat\ndon't\nzoë"))
	if err == nil {
		t.Fatalf("a line of spaces passed: %v", hs)
	}
	hs, err = parseLexicon([]byte("\uFEFFcat\r\nDog\n\ncat\ndon't\nzoë\ne.g."))
	if err != nil || len(hs) != 5 || !slices.IsSorted(hs) {
		t.Fatalf("%v, %v; want 5 sorted hashes (a repeat once)", hs, err)
	}
	l := &lexicon{words: hs}
	// a leading byte-order mark is not part of the first word; ASCII case and punctuation
	// (but the apostrophe) do not count
	for _, w := range []string{"cat", "dog", "DOG", "Cat", "don't", "zoë", "cat.", "\"Dog,\"", "eg", "E.G."} {
		if !l.has(wordHash(wordHashEmpty, []byte(w))) {
			t.Errorf("%q not found (ASCII letters match without case)", w)
		}
	}
	for _, w := range []string{"ca", "cats", "dont", "zoe", "ZOË", ""} {
		if l.has(wordHash(wordHashEmpty, []byte(w))) {
			t.Errorf("%q found", w)
		}
	}
	for in, want := range map[string]string{
		"":                 "no words",
		"\n\r\n\n":         "no words",
		"cat\ntwo words\n": `line 2: "two words"`,
		"cat\tdog":         "line 1",
		"a\nb\x00c":        "line 2",
		"caf\xe9\n":        "not UTF-8",
	} {
		if _, err := parseLexicon([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", in, err, want)
		}
	}
}

// A recogniser's own words (Config.Words) join a copy of the model's list; the model's list is
// left as it was, and with no list there is nothing to add to.
func TestLexiconWith(t *testing.T) {
	hs, err := parseLexicon([]byte("cat\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := newLexicon(hs, []string{"", " ca", "t"})
	own := l.with([]string{"Anouk", "cat", "O'Neill"})
	for w, want := range map[string][2]bool{"cat": {true, true}, "anouk": {false, true}, "o'neill": {false, true}, "dog": {false, false}} {
		h := wordHash(wordHashEmpty, []byte(w))
		if l.has(h) != want[0] || own.has(h) != want[1] {
			t.Errorf("%q: in the model's list %v, with the own words %v; want %v", w, l.has(h), own.has(h), want)
		}
	}
	if len(own.words) != 3 || own.startsWord == nil {
		t.Errorf("merged list %d words (want 3, cat once)", len(own.words))
	}
	if l.with(nil) != l || (*lexicon)(nil).with([]string{"anouk"}) != nil {
		t.Error("nothing to add, or no list: the list itself")
	}
}

// FuzzParseLexicon: any bytes parse or fail without panicking; a list that parses holds every
// one of its lines.
func FuzzParseLexicon(f *testing.F) {
	f.Add([]byte("cat\ndog\r\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte("a b\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hs, err := parseLexicon(b)
		if err != nil {
			return
		}
		l := &lexicon{words: hs}
		for _, line := range bytes.Split(b, []byte("\n")) {
			line = bytes.TrimSuffix(line, []byte("\r"))
			if len(line) > 0 && !l.has(wordHash(wordHashEmpty, line)) {
				t.Fatalf("line %q of a parsed list not found", line)
			}
		}
	})
}

// A near miss that spells no word loses to the listed word the acoustics nearly chose: the
// frames say " ca", then "p" a little over "t"; with "cat" listed and "cap" not, a charge
// for unlisted words turns "cap" into "cat", at the end of the utterance and before the next word.
func TestBeamChargesUnlistedWords(t *testing.T) {
	text := []string{"", "", "", " ca", "t", "p", " on"}
	isText := []bool{false, false, false, true, true, true, true}
	const v = 7
	frame := func(probs map[int]float32) []float32 {
		row := make([]float32, v)
		for i := range row {
			row[i] = -20
		}
		for id, p := range probs {
			row[id] = p
		}
		return row
	}
	near := frame(map[int]float32{5: 0, 4: -0.2, 0: -3}) // "p" over "t"
	lm := &ngramLM{order: 1, vocab: v, shift: lmIDBits(v), prob: []map[uint64]float32{{}}, back: []map[uint64]float32{{}}, floor: -5}
	words, err := parseLexicon([]byte("on\ncat\n"))
	if err != nil {
		t.Fatal(err)
	}
	lex := newLexicon(words, text)
	spell := func(ids []int32) string {
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(text[id])
		}
		return strings.TrimSpace(b.String())
	}
	for _, c := range []struct {
		name   string
		frames [][]float32
		oov    float64
		lex    *lexicon
		want   string
	}{
		{"no list, at the end", [][]float32{frame(map[int]float32{3: 0}), frame(map[int]float32{0: 0}), near}, 4, nil, "cap"},
		{"no charge, at the end", [][]float32{frame(map[int]float32{3: 0}), frame(map[int]float32{0: 0}), near}, 0, lex, "cap"},
		{"charged, at the end", [][]float32{frame(map[int]float32{3: 0}), frame(map[int]float32{0: 0}), near}, 4, lex, "cat"},
		{"charged, before the next word", [][]float32{frame(map[int]float32{3: 0}), near, frame(map[int]float32{0: 0}),
			frame(map[int]float32{6: 0}), frame(map[int]float32{0: 0})}, 4, lex, "cat on"},
	} {
		logits := slices.Concat(c.frames...)
		o := BeamOptions{Width: 8, Top: 4, Alpha: 0, Beta: 0, Prune: -10, OOV: c.oov}
		ids, _ := beamCTC(logits, len(c.frames), v, 0, 0, isText, lm, c.lex, o, nil, nil)
		if got := spell(ids); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// BenchmarkParseLexicon: what the demo model's word list adds to loading it, beside parsing its
// token LM (the baseline, lm.bin) in the same run.
func BenchmarkParseLexicon(b *testing.B) {
	words, err := os.ReadFile(filepath.Join(demoDir, LexiconPath(LMFile)))
	if err != nil {
		b.Skipf("no word list beside the demo model: %v", err)
	}
	lm, err := os.ReadFile(filepath.Join(demoDir, LMFile))
	if err != nil {
		b.Skipf("no LM beside the demo model: %v", err)
	}
	tokens, err := os.ReadFile(filepath.Join(demoDir, "tokens.txt"))
	if err != nil {
		b.Skip(err)
	}
	vocab := bytes.Count(tokens, []byte("\n"))
	b.Run("lm.bin", func(b *testing.B) {
		b.SetBytes(int64(len(lm)))
		for b.Loop() {
			if _, err := parseLM(lm, vocab); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lm.words.txt", func(b *testing.B) {
		b.SetBytes(int64(len(words)))
		for b.Loop() {
			if _, err := parseLexicon(words); err != nil {
				b.Fatal(err)
			}
		}
	})
}
