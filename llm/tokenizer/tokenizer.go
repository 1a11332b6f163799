// Package tokenizer reads a Hugging Face tokenizer.json with a byte-level BPE model (Qwen2/3,
// Llama 3, GPT-2 families) and encodes and decodes text exactly as the tokenizers library does:
// added and special tokens split first, NFC normalisation, the model's regex pre-tokenizer
// (written out by hand: Go's RE2 cannot run its look-ahead), byte-level mapping and ranked
// merges. Decoding is streaming-safe: a character split across tokens is released whole.
package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ErrUnsupported is wrapped by errors about tokenizer.json features this package does not
// implement: the message names the feature found.
var ErrUnsupported = errors.New("unsupported tokenizer")

// AddedToken is a token matched literally in the text before pre-tokenization.
type AddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// Tokenizer encodes text to token ids and back. It is safe for concurrent use.
type Tokenizer struct {
	vocab   map[string]int
	tokens  []string // id → byte-level token text ("" for unused ids)
	merges  map[uint64]merge
	added   []AddedToken
	addedBy map[int]*AddedToken
	first   map[byte][]*AddedToken // added tokens by first byte, longest first
	split   splitter
	nfc     bool
	prefix  bool // ByteLevel add_prefix_space
	ignoreM bool // BPE ignore_merges: a piece that is a whole token is not merged
	byteID  [256]int

	mu    sync.Mutex
	cache map[string][]int
}

type merge struct{ rank, id int }

// maxCache bounds the per-piece cache (pieces are words; a chat uses a few thousand).
const maxCache = 1 << 16

// Load reads tokenizer.json.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

type fileJSON struct {
	AddedTokens  []AddedToken    `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
	Model        struct {
		Type                    string          `json:"type"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	} `json:"model"`
}

type component struct {
	Type           string          `json:"type"`
	Pattern        json.RawMessage `json:"pattern"`
	Behavior       string          `json:"behavior"`
	Invert         bool            `json:"invert"`
	AddPrefixSpace bool            `json:"add_prefix_space"`
	UseRegex       *bool           `json:"use_regex"`
	Pretokenizers  []component     `json:"pretokenizers"`
	Normalizers    []component     `json:"normalizers"`
}

// Parse reads the contents of a tokenizer.json.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer.json is not valid JSON: %w", err)
	}
	if f.Model.Type != "BPE" {
		return nil, fmt.Errorf("%w: model type %q (want byte-level BPE)", ErrUnsupported, f.Model.Type)
	}
	if len(f.Model.Vocab) == 0 {
		return nil, errors.New("tokenizer.json: the BPE model has no vocabulary")
	}
	if f.Model.ByteFallback {
		return nil, fmt.Errorf("%w: BPE with byte_fallback (SentencePiece-style); want byte-level BPE", ErrUnsupported)
	}
	if p := f.Model.ContinuingSubwordPrefix; p != nil && *p != "" {
		return nil, fmt.Errorf("%w: BPE continuing_subword_prefix %q", ErrUnsupported, *p)
	}
	if p := f.Model.EndOfWordSuffix; p != nil && *p != "" {
		return nil, fmt.Errorf("%w: BPE end_of_word_suffix %q", ErrUnsupported, *p)
	}
	t := &Tokenizer{vocab: f.Model.Vocab, ignoreM: f.Model.IgnoreMerges, cache: map[string][]int{}}
	if err := t.readNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if err := t.readPreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, err
	}
	maxID := 0
	for _, id := range t.vocab {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer.json: negative token id %d", id)
		}
		maxID = max(maxID, id)
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 || a.Content == "" {
			return nil, fmt.Errorf("tokenizer.json: added token %d %q is invalid", a.ID, a.Content)
		}
		maxID = max(maxID, a.ID)
	}
	if maxID > 1<<24 {
		return nil, fmt.Errorf("tokenizer.json: token id %d is out of range", maxID)
	}
	t.tokens = make([]string, maxID+1)
	for s, id := range t.vocab {
		t.tokens[id] = s
	}
	for i := range 256 {
		r := byteRune[i]
		id, ok := t.vocab[string(r)]
		if !ok {
			return nil, fmt.Errorf("%w: vocabulary lacks the byte-level symbol %q for byte 0x%02x (not a byte-level BPE)", ErrUnsupported, string(r), i)
		}
		t.byteID[i] = id
	}
	if err := t.readMerges(f.Model.Merges); err != nil {
		return nil, err
	}
	t.added = f.AddedTokens
	t.addedBy = map[int]*AddedToken{}
	t.first = map[byte][]*AddedToken{}
	for i := range t.added {
		a := &t.added[i]
		t.addedBy[a.ID] = a
		t.first[a.Content[0]] = append(t.first[a.Content[0]], a)
	}
	for _, l := range t.first {
		sort.SliceStable(l, func(i, j int) bool { return len(l[i].Content) > len(l[j].Content) })
	}
	return t, nil
}

func (t *Tokenizer) readNormalizer(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer.json: normalizer: %w", err)
	}
	list := []component{c}
	if c.Type == "Sequence" {
		list = c.Normalizers
	}
	for _, n := range list {
		switch n.Type {
		case "NFC":
			t.nfc = true
		default:
			return fmt.Errorf("%w: normalizer %q", ErrUnsupported, n.Type)
		}
	}
	return nil
}

func (t *Tokenizer) readPreTokenizer(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("%w: no pre-tokenizer (want a byte-level one)", ErrUnsupported)
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer.json: pre_tokenizer: %w", err)
	}
	list := []component{c}
	if c.Type == "Sequence" {
		list = c.Pretokenizers
	}
	byteLevel := false
	for _, p := range list {
		switch p.Type {
		case "Split":
			if t.split != nil {
				return fmt.Errorf("%w: more than one Split pre-tokenizer", ErrUnsupported)
			}
			var pat struct{ Regex, String *string }
			if err := json.Unmarshal(p.Pattern, &pat); err != nil || pat.Regex == nil {
				return fmt.Errorf("%w: Split pre-tokenizer without a regex pattern", ErrUnsupported)
			}
			if p.Behavior != "Isolated" || p.Invert {
				return fmt.Errorf("%w: Split behaviour %q (invert %v); want Isolated", ErrUnsupported, p.Behavior, p.Invert)
			}
			s, ok := splitters[*pat.Regex]
			if !ok {
				return fmt.Errorf("%w: pre-tokenizer regex %q (known: Qwen2, Llama 3 and GPT-2 patterns)", ErrUnsupported, *pat.Regex)
			}
			t.split = s
		case "ByteLevel":
			byteLevel = true
			t.prefix = p.AddPrefixSpace
			if p.UseRegex == nil || *p.UseRegex {
				if t.split != nil {
					return fmt.Errorf("%w: ByteLevel with use_regex after a Split", ErrUnsupported)
				}
				t.split = splitters[gpt2Pattern]
			}
		default:
			return fmt.Errorf("%w: pre-tokenizer %q", ErrUnsupported, p.Type)
		}
	}
	if !byteLevel {
		return fmt.Errorf("%w: no ByteLevel pre-tokenizer", ErrUnsupported)
	}
	if t.split == nil {
		t.split = wholeText
	}
	return nil
}

func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer.json: decoder: %w", err)
	}
	if c.Type != "ByteLevel" {
		return fmt.Errorf("%w: decoder %q (want ByteLevel)", ErrUnsupported, c.Type)
	}
	return nil
}

func (t *Tokenizer) readMerges(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var pairs [][2]string
	var lines []string
	if err := json.Unmarshal(raw, &lines); err == nil {
		pairs = make([][2]string, 0, len(lines))
		for i, l := range lines {
			a, b, ok := strings.Cut(l, " ")
			if !ok {
				return fmt.Errorf("tokenizer.json: merge %d %q is not two symbols", i, l)
			}
			pairs = append(pairs, [2]string{a, b})
		}
	} else if err := json.Unmarshal(raw, &pairs); err != nil {
		return fmt.Errorf("tokenizer.json: merges are neither strings nor pairs: %w", err)
	}
	t.merges = make(map[uint64]merge, len(pairs))
	for rank, p := range pairs {
		a, okA := t.vocab[p[0]]
		b, okB := t.vocab[p[1]]
		c, okC := t.vocab[p[0]+p[1]]
		if !okA || !okB || !okC {
			return fmt.Errorf("tokenizer.json: merge %d (%q %q) uses a symbol missing from the vocabulary", rank, p[0], p[1])
		}
		k := pairKey(a, b)
		if _, dup := t.merges[k]; !dup {
			t.merges[k] = merge{rank, c}
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

func pairKey(a, b int) uint64 { return uint64(a)<<32 | uint64(uint32(b)) }

// VocabSize is one more than the largest token id.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// TokenID returns the id of a vocabulary or added token.
func (t *Tokenizer) TokenID(s string) (int, bool) {
	for i := range t.added {
		if t.added[i].Content == s {
			return t.added[i].ID, true
		}
	}
	id, ok := t.vocab[s]
	return id, ok
}

// IsSpecial reports whether id is a special added token (never part of the answer text).
func (t *Tokenizer) IsSpecial(id int) bool {
	a, ok := t.addedBy[id]
	return ok && a.Special
}

// Added lists the added tokens.
func (t *Tokenizer) Added() []AddedToken { return append([]AddedToken(nil), t.added...) }

// Encode turns text into token ids, with added and special tokens in the text recognised as
// such (as Hugging Face tokenizers do by default). No BOS/EOS is added: chat templates write
// them. Invalid UTF-8 is encoded as U+FFFD, as JavaScript strings hold it.
func (t *Tokenizer) Encode(text string) []int {
	if !utf8.ValidString(text) {
		text = toValid([]byte(text))
	}
	var ids []int
	t.splitAdded(text, func(seg string, a *AddedToken) {
		if a != nil {
			ids = append(ids, a.ID)
			return
		}
		ids = t.encodeText(ids, seg)
	})
	return ids
}

// splitAdded walks text, calling fn for each plain segment (a == nil) and each added token,
// leftmost-longest as the tokenizers library matches them.
func (t *Tokenizer) splitAdded(text string, fn func(seg string, a *AddedToken)) {
	start := 0 // start of the pending plain segment
	for i := 0; i < len(text); {
		cands := t.first[text[i]]
		var hit *AddedToken
		for _, a := range cands {
			if strings.HasPrefix(text[i:], a.Content) && (!a.SingleWord || singleWordOK(text, i, i+len(a.Content))) {
				hit = a
				break
			}
		}
		if hit == nil {
			i++
			continue
		}
		segEnd, next := i, i+len(hit.Content)
		if hit.LStrip {
			for segEnd > start {
				r, n := utf8.DecodeLastRuneInString(text[start:segEnd])
				if !isWhiteSpace(r) {
					break
				}
				segEnd -= n
			}
		}
		if hit.RStrip {
			for next < len(text) {
				r, n := utf8.DecodeRuneInString(text[next:])
				if !isWhiteSpace(r) {
					break
				}
				next += n
			}
		}
		if segEnd > start {
			fn(text[start:segEnd], nil)
		}
		fn("", hit)
		i, start = next, next
	}
	if start < len(text) {
		fn(text[start:], nil)
	}
}

func singleWordOK(s string, i, j int) bool {
	if i > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:i])
		if isWordChar(r) {
			return false
		}
	}
	if j < len(s) {
		r, _ := utf8.DecodeRuneInString(s[j:])
		if isWordChar(r) {
			return false
		}
	}
	return true
}

func (t *Tokenizer) encodeText(ids []int, s string) []int {
	if t.nfc {
		s = norm.NFC.String(s)
	}
	if t.prefix && s != "" && s[0] != ' ' {
		s = " " + s
	}
	for _, piece := range t.split(s) {
		ids = append(ids, t.encodePiece(piece)...)
	}
	return ids
}

func (t *Tokenizer) encodePiece(piece string) []int {
	t.mu.Lock()
	if ids, ok := t.cache[piece]; ok {
		t.mu.Unlock()
		return ids
	}
	t.mu.Unlock()
	ids := t.bpe(piece)
	t.mu.Lock()
	if len(t.cache) >= maxCache {
		clear(t.cache)
	}
	t.cache[piece] = ids
	t.mu.Unlock()
	return ids
}

// Decode turns ids back into text; special tokens are dropped when skipSpecial is set.
// Bytes that are not valid UTF-8 become U+FFFD.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	var d Decoder
	d.t, d.SkipSpecial = t, skipSpecial
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(d.Push(id))
	}
	b.WriteString(d.Flush())
	return b.String()
}

// TokenBytes appends the bytes token id stands for (an added token's content, or the
// byte-level symbols turned back into bytes); unknown ids append nothing.
func (t *Tokenizer) TokenBytes(dst []byte, id int) []byte {
	if a, ok := t.addedBy[id]; ok {
		return append(dst, a.Content...)
	}
	if id < 0 || id >= len(t.tokens) {
		return dst
	}
	for _, r := range t.tokens[id] {
		if b, ok := runeByte(r); ok {
			dst = append(dst, b)
		} else {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}

// Decoder turns a stream of ids into text, holding back the bytes of a character that is
// split across tokens until it is complete. The zero value needs t set via NewDecoder.
type Decoder struct {
	t           *Tokenizer
	SkipSpecial bool
	buf         []byte
}

// NewDecoder returns a streaming decoder.
func (t *Tokenizer) NewDecoder(skipSpecial bool) *Decoder {
	return &Decoder{t: t, SkipSpecial: skipSpecial}
}

// Push adds one token and returns the text it completes (possibly "").
func (d *Decoder) Push(id int) string {
	if d.SkipSpecial && d.t.IsSpecial(id) {
		return ""
	}
	d.buf = d.t.TokenBytes(d.buf, id)
	// Release everything up to the last position that cannot be the start of an incomplete
	// character.
	n := completePrefix(d.buf)
	if n == 0 {
		return ""
	}
	out := toValid(d.buf[:n])
	d.buf = append(d.buf[:0], d.buf[n:]...)
	return out
}

// Flush returns what is held back (an incomplete character becomes U+FFFD).
func (d *Decoder) Flush() string {
	out := toValid(d.buf)
	d.buf = d.buf[:0]
	return out
}

// completePrefix returns the length of b without a trailing incomplete UTF-8 sequence that
// more bytes could still complete. Cutting before a lead byte never changes how the bytes
// decode: a UTF-8 decoder restarts at every non-continuation byte.
func completePrefix(b []byte) int {
	n := len(b)
	for k := 1; k <= 3 && k <= n; k++ {
		c := b[n-k]
		if c&0xC0 == 0x80 {
			continue // a continuation byte: look further back for its lead
		}
		if seqLen(c) > k {
			return n - k
		}
		return n
	}
	return n
}

func seqLen(c byte) int {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 2
	case c >= 0xE0 && c <= 0xEF:
		return 3
	case c >= 0xF0 && c <= 0xF4:
		return 4
	}
	return 1
}

// toValid decodes b as the WHATWG (and Python "replace") UTF-8 decoder does: each maximal
// invalid subsequence becomes one U+FFFD.
func toValid(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var out strings.Builder
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			out.WriteByte(c)
			i++
			continue
		}
		need, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c == 0xED:
			need, hi = 2, 0x9F
		case c >= 0xE1 && c <= 0xEF:
			need = 2
		case c == 0xF0:
			need, lo = 3, 0x90
		case c == 0xF4:
			need, hi = 3, 0x8F
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		default:
			out.WriteRune(utf8.RuneError)
			i++
			continue
		}
		j := i + 1
		ok := true
		for k := 0; k < need; k++ {
			if j >= len(b) || b[j] < lo || b[j] > hi {
				ok = false
				break
			}
			lo, hi = 0x80, 0xBF
			j++
		}
		if ok {
			out.Write(b[i:j])
		} else {
			out.WriteRune(utf8.RuneError)
		}
		i = j
	}
	return out.String()
}
