package kokoro

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/parley-voice/parley/tts/espeak"
)

// MaxTokens is the most phoneme tokens one model call takes (510 + the two pads = 512).
const MaxTokens = 510

// ErrVocab is wrapped by vocabulary errors.
var ErrVocab = errors.New("kokoro: bad vocabulary")

// Vocab maps phoneme characters to token ids.
type Vocab map[rune]int64

// LoadVocab reads the phoneme vocabulary from <dir>/config.json ("vocab", as hexgrad and
// kokoro-onnx ship it) or <dir>/tokenizer.json ("model"."vocab", as onnx-community ships it).
func LoadVocab(dir string) (Vocab, error) {
	var errs []string
	for _, f := range []string{"config.json", "tokenizer.json"} {
		path := filepath.Join(dir, f)
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		v, err := VocabFromJSON(path, b)
		if errors.Is(err, errNoVocab) {
			errs = append(errs, err.Error())
			continue
		}
		return v, err
	}
	return nil, fmt.Errorf("%w: %w: %s", ErrVocab, errVocabMissing, strings.Join(errs, "; "))
}

var errNoVocab = errors.New("has no vocab")

// errVocabMissing: no file beside the model holds a vocabulary (none is broken).
var errVocabMissing = errors.New("no vocabulary beside the model")

// VocabFromJSON reads a vocabulary from a JSON document with a top-level "vocab" object
// (config.json, or the config kokoro-onnx ≥ v1.1 embeds in the model's metadata) or a
// "model"."vocab" object (tokenizer.json). name is used in errors.
func VocabFromJSON(name string, b []byte) (Vocab, error) {
	if len(b) > 16<<20 {
		return nil, fmt.Errorf("%w: %s is too large", ErrVocab, name)
	}
	var doc struct {
		Vocab map[string]int64 `json:"vocab"`
		Model struct {
			Vocab map[string]int64 `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrVocab, name, err)
	}
	m := doc.Vocab
	if len(m) == 0 {
		m = doc.Model.Vocab
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%w: %s %w", ErrVocab, name, errNoVocab)
	}
	return parseVocab(name, m)
}

func parseVocab(path string, m map[string]int64) (Vocab, error) {
	v := Vocab{}
	for k, id := range m {
		r, n := utf8.DecodeRuneInString(k)
		if n != len(k) || r == utf8.RuneError {
			if k == "$" || k == "<pad>" { // tokenizer.json pad entry
				continue
			}
			return nil, fmt.Errorf("%w: %s: key %q is not one character", ErrVocab, path, k)
		}
		if id <= 0 || id > 4096 {
			if id == 0 {
				continue
			}
			return nil, fmt.Errorf("%w: %s: id %d for %q out of range", ErrVocab, path, id, k)
		}
		v[r] = id
	}
	return v, nil
}

// Tokenize maps phonemes to ids, dropping characters the vocabulary lacks (counted in dropped).
func (v Vocab) Tokenize(ph string) (ids []int64, dropped int) {
	for _, r := range ph {
		if id, ok := v[r]; ok {
			ids = append(ids, id)
		} else {
			dropped++
		}
	}
	return ids, dropped
}

// marks is the punctuation that phonemizer (and so Kokoro's training data) keeps.
const marks = ";:,.!?¡¿—…\"«»“”()"

// Phonemize turns text into Kokoro's phoneme string: espeak-ng IPA with stress, punctuation
// kept between phonemized runs, and the substitutions kokoro-onnx applies to espeak's output
// (r→ɹ, x→k, ɬ→l, ʲ→j, "hundred" split, American "nineti"→"naindi").
func Phonemize(text, voice string) (string, error) {
	var b strings.Builder
	run := func(s string) error {
		if strings.TrimSpace(s) == "" {
			return nil
		}
		p, err := espeak.Phonemes(s, voice)
		if err != nil {
			return err
		}
		if b.Len() > 0 && !strings.HasSuffix(b.String(), " ") {
			b.WriteByte(' ')
		}
		b.WriteString(p)
		return nil
	}
	start := 0
	for i, r := range text {
		if !strings.ContainsRune(marks, r) {
			continue
		}
		if err := run(text[start:i]); err != nil {
			return "", err
		}
		b.WriteRune(r)
		start = i + utf8.RuneLen(r)
		if start < len(text) && text[start] == ' ' {
			b.WriteByte(' ')
		}
	}
	if err := run(text[start:]); err != nil {
		return "", err
	}
	s := strings.NewReplacer("ʲ", "j", "r", "ɹ", "x", "k", "ɬ", "l").Replace(b.String())
	s = strings.ReplaceAll(s, "hˈʌndɹɪd", " hˈʌndɹɪd")
	s = strings.ReplaceAll(s, "  hˈʌndɹɪd", " hˈʌndɹɪd")
	if strings.HasPrefix(strings.ToLower(voice), "en-us") || voice == "" {
		s = strings.ReplaceAll(s, "nˈaɪnti", "nˈaɪndi")
	}
	return strings.Join(strings.Fields(s), " "), nil
}

// Chunks splits a phoneme string into pieces of at most max tokens (as characters), cutting
// after sentence punctuation when it can, then after other punctuation, then at spaces, then
// anywhere.
func Chunks(ph string, max int) []string {
	var out []string
	rs := []rune(ph)
	for len(rs) > max {
		cut := -1
		for _, set := range []string{".!?…", ";:,—", " "} {
			for i := max - 1; i > max/4; i-- {
				if strings.ContainsRune(set, rs[i]) {
					cut = i + 1
					break
				}
			}
			if cut > 0 {
				break
			}
		}
		if cut <= 0 {
			cut = max
		}
		if s := strings.TrimSpace(string(rs[:cut])); s != "" {
			out = append(out, s)
		}
		rs = rs[cut:]
	}
	if s := strings.TrimSpace(string(rs)); s != "" {
		out = append(out, s)
	}
	return out
}
