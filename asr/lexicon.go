package asr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// A token LM over word pieces gives a near miss that spells no word ("glassure" for
// "glacier") nearly the score of the word itself: it knows which pieces follow which, not which
// words exist. With a word list beside the LM the beam search charges each finished word the
// list does not hold (BeamOptions.OOV), as pyctcdecode's unknown-word offset does, so that a
// real word the acoustics allow wins over a non-word.

// LexiconPath is the word list beside the language model at lm: the same path with its
// extension replaced by ".words.txt" (lm.bin → lm.words.txt). One word a line, UTF-8, as the
// recogniser spells words. A word is what the recogniser writes between spaces, compared
// without ASCII case and without ASCII punctuation other than the apostrophe ("World." is
// "world"); so a list suits languages written with spaces, and a piece cut off at a segment's
// end is judged as a word.
func LexiconPath(lm string) string {
	return strings.TrimSuffix(lm, filepath.Ext(lm)) + ".words.txt"
}

// maxLexiconBytes bounds the word list read into memory (the demo's is 1.7 MB).
const maxLexiconBytes = 64 << 20

// wordHashEmpty is the hash of no text: a prefix before its first word, or a word just begun
// by a lone "▁".
const wordHashEmpty uint64 = 14695981039346656037

// wordHash continues h (FNV-1a) over b, ASCII letters folded to lower case and ASCII
// punctuation but the apostrophe left out.
func wordHash(h uint64, b []byte) uint64 {
	for _, c := range b {
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c < 0x80 && c != '\'' && !('a' <= c && c <= 'z' || '0' <= c && c <= '9'):
			continue
		}
		h = (h ^ uint64(c)) * 0x100000001b3
	}
	return h
}

// lexicon is a word list as the beam search reads it: the words' hashes, and for each token
// whether it begins a word and the text it adds.
type lexicon struct {
	words      []uint64 // sorted, distinct
	startsWord []bool   // per token: its text begins with a space ("▁" in the piece)
	text       [][]byte // per token: its text without that space
}

// has reports whether the word hashed h is in the list.
func (l *lexicon) has(h uint64) bool {
	_, ok := slices.BinarySearch(l.words, h)
	return ok
}

// parseLexicon reads a word list into its words' hashes: one word a line ("\r\n" allowed, a
// leading byte-order mark skipped), blank lines skipped; a line holding a space or a tab, or
// text that is not UTF-8, is refused with its line number, as is a list without words.
func parseLexicon(b []byte) ([]uint64, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("not UTF-8 text")
	}
	b = bytes.TrimPrefix(b, []byte("\uFEFF"))
	var hs []uint64
	for n := 1; len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			continue
		}
		if bytes.ContainsAny(line, " \t\v\f\r\x00") {
			return nil, fmt.Errorf("line %d: %q is not one word (one word a line)", n, line)
		}
		hs = append(hs, wordHash(wordHashEmpty, line))
	}
	if len(hs) == 0 {
		return nil, errors.New("no words")
	}
	slices.Sort(hs)
	return slices.Compact(hs), nil
}

// loadLexicon reads the word list beside the LM at lm for a model's tokens (as many as its
// vocabulary: loadModel checks); no list is nil.
func loadLexicon(lm string, t *Tokens) (*lexicon, error) {
	path := LexiconPath(lm)
	if err := regularFile(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLM, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLM, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLexiconBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrLM, path, err)
	}
	if len(b) > maxLexiconBytes {
		return nil, fmt.Errorf("%w: %s: word list of more than %d bytes", ErrLM, path, maxLexiconBytes)
	}
	words, err := parseLexicon(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLM, path, err)
	}
	return newLexicon(words, t.text), nil
}

// with is the list with words added (a recogniser's own, Config.Words); l itself is unchanged,
// and a nil list stays nil (without a list nothing is charged, so there is nothing to add to).
func (l *lexicon) with(words []string) *lexicon {
	if l == nil || len(words) == 0 {
		return l
	}
	hs := slices.Clone(l.words)
	for _, w := range words {
		hs = append(hs, wordHash(wordHashEmpty, []byte(w)))
	}
	slices.Sort(hs)
	return &lexicon{words: slices.Compact(hs), startsWord: l.startsWord, text: l.text}
}

// newLexicon pairs word hashes with each token's text (a leading space begins a word).
func newLexicon(words []uint64, text []string) *lexicon {
	l := &lexicon{words: words, startsWord: make([]bool, len(text)), text: make([][]byte, len(text))}
	for id, s := range text {
		l.startsWord[id] = strings.HasPrefix(s, " ")
		l.text[id] = []byte(strings.TrimPrefix(s, " "))
	}
	return l
}
