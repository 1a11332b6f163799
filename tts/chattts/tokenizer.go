package chattts

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ErrTokenizer wraps every tokenizer.json problem.
var ErrTokenizer = errors.New("chattts: bad tokenizer")

// MaxTokenizerBytes bounds tokenizer.json (ChatTTS's is ~0.5 MB).
const MaxTokenizerBytes = 64 << 20

// Tokenizer is a Hugging Face tokenizers WordPiece pipeline read from tokenizer.json, as
// ChatTTS's BertTokenizerFast runs it with add_special_tokens=False: added tokens are split
// out first (those with normalized=false on the raw text, the others on the normalized text),
// the rest goes through the BertNormalizer (clean text, spaces around CJK characters,
// lowercase, strip accents), the BertPreTokenizer (split on whitespace, isolate punctuation)
// and greedy longest-match-first WordPiece with the "##" continuation prefix.
type Tokenizer struct {
	vocab    map[string]int // the WordPiece model's own vocabulary
	addedIDs map[string]int // added token content → id
	tokens   []string       // id → token, added tokens included
	unk      int
	unkTok   string
	prefix   string
	maxChars int
	norm     *bertNormalizer
	preBert  bool
	added    map[int]addedToken
	raw      *trie // added tokens matched on the raw text (normalized=false)
	normed   *trie // added tokens matched on the normalized text
}

type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

type bertNormalizer struct {
	CleanText          bool  `json:"clean_text"`
	HandleChineseChars bool  `json:"handle_chinese_chars"`
	StripAccents       *bool `json:"strip_accents"`
	Lowercase          bool  `json:"lowercase"`
}

// LoadTokenizer reads a tokenizer.json file.
func LoadTokenizer(path string) (*Tokenizer, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenizer, err)
	}
	if fi.Size() > MaxTokenizerBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes (max %d)", ErrTokenizer, path, fi.Size(), MaxTokenizerBytes)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenizer, err)
	}
	return ParseTokenizer(path, b)
}

// ParseTokenizer parses tokenizer.json content; name is used in errors.
func ParseTokenizer(name string, b []byte) (*Tokenizer, error) {
	var doc struct {
		AddedTokens  []addedToken    `json:"added_tokens"`
		Normalizer   json.RawMessage `json:"normalizer"`
		PreTokenizer json.RawMessage `json:"pre_tokenizer"`
		Model        struct {
			Type                    string         `json:"type"`
			UnkToken                string         `json:"unk_token"`
			ContinuingSubwordPrefix *string        `json:"continuing_subword_prefix"`
			MaxInputCharsPerWord    *int           `json:"max_input_chars_per_word"`
			Vocab                   map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if len(b) > MaxTokenizerBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes (max %d)", ErrTokenizer, name, len(b), MaxTokenizerBytes)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrTokenizer, name, err)
	}
	m := doc.Model
	if m.Type != "WordPiece" {
		return nil, fmt.Errorf("%w: %s: model type %q (want WordPiece, as ChatTTS's BERT tokenizer)", ErrTokenizer, name, m.Type)
	}
	if len(m.Vocab) == 0 {
		return nil, fmt.Errorf("%w: %s: empty WordPiece vocabulary", ErrTokenizer, name)
	}
	t := &Tokenizer{vocab: make(map[string]int, len(m.Vocab)), addedIDs: map[string]int{}, prefix: "##", maxChars: 100,
		unkTok: m.UnkToken, added: map[int]addedToken{}}
	if m.ContinuingSubwordPrefix != nil {
		t.prefix = *m.ContinuingSubwordPrefix
	}
	if m.MaxInputCharsPerWord != nil {
		t.maxChars = *m.MaxInputCharsPerWord
	}
	maxID := -1
	for tok, id := range m.Vocab {
		if id < 0 || id > 1<<24 {
			return nil, fmt.Errorf("%w: %s: token %q has id %d", ErrTokenizer, name, tok, id)
		}
		t.vocab[tok] = id
		maxID = max(maxID, id)
	}
	for _, a := range doc.AddedTokens {
		if a.Content == "" || a.ID < 0 || a.ID > 1<<24 {
			return nil, fmt.Errorf("%w: %s: added token %q with id %d", ErrTokenizer, name, a.Content, a.ID)
		}
		maxID = max(maxID, a.ID)
	}
	t.tokens = make([]string, maxID+1)
	for tok, id := range m.Vocab {
		if t.tokens[id] != "" {
			return nil, fmt.Errorf("%w: %s: id %d is both %q and %q", ErrTokenizer, name, id, t.tokens[id], tok)
		}
		t.tokens[id] = tok
	}
	var ok bool
	if t.unk, ok = t.vocab[m.UnkToken]; !ok {
		return nil, fmt.Errorf("%w: %s: unk token %q is not in the vocabulary", ErrTokenizer, name, m.UnkToken)
	}
	switch n, err := parseNormalizer(doc.Normalizer); {
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v", ErrTokenizer, name, err)
	default:
		t.norm = n
	}
	if err := t.parsePreTokenizer(doc.PreTokenizer); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrTokenizer, name, err)
	}
	var raw, normed []trieWord
	for _, a := range doc.AddedTokens {
		t.added[a.ID] = a
		t.tokens[a.ID] = a.Content
		if _, dup := t.addedIDs[a.Content]; !dup {
			t.addedIDs[a.Content] = a.ID
		}
		normalized := !a.Special
		if a.Normalized != nil {
			normalized = *a.Normalized
		}
		if normalized && t.norm != nil {
			normed = append(normed, trieWord{t.norm.apply(a.Content), a.ID})
		} else {
			raw = append(raw, trieWord{a.Content, a.ID})
		}
	}
	t.raw, t.normed = newTrie(raw), newTrie(normed)
	return t, nil
}

func parseNormalizer(raw json.RawMessage) (*bertNormalizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var typ struct{ Type string }
	if err := json.Unmarshal(raw, &typ); err != nil {
		return nil, fmt.Errorf("normalizer: %v", err)
	}
	if typ.Type != "BertNormalizer" {
		return nil, fmt.Errorf("normalizer %q is not supported (want BertNormalizer or none)", typ.Type)
	}
	n := &bertNormalizer{CleanText: true, HandleChineseChars: true, Lowercase: true}
	if err := json.Unmarshal(raw, n); err != nil {
		return nil, fmt.Errorf("normalizer: %v", err)
	}
	return n, nil
}

func (t *Tokenizer) parsePreTokenizer(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var typ struct{ Type string }
	if err := json.Unmarshal(raw, &typ); err != nil {
		return fmt.Errorf("pre_tokenizer: %v", err)
	}
	if typ.Type != "BertPreTokenizer" {
		return fmt.Errorf("pre_tokenizer %q is not supported (want BertPreTokenizer or none)", typ.Type)
	}
	t.preBert = true
	return nil
}

// Len is the number of ids (the model vocabulary plus added tokens).
func (t *Tokenizer) Len() int { return len(t.tokens) }

// ID returns the id of a token (added tokens first, as tokenizers' token_to_id).
func (t *Tokenizer) ID(token string) (int, bool) {
	if id, ok := t.addedIDs[token]; ok {
		return id, true
	}
	id, ok := t.vocab[token]
	return id, ok
}

// Token returns the token of an id ("" when unknown).
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// Unknown is the id of the unknown token.
func (t *Tokenizer) Unknown() int { return t.unk }

// Encode tokenizes text into ids (no [CLS]/[SEP]: ChatTTS encodes with add_special_tokens=False).
func (t *Tokenizer) Encode(text string) []int {
	var ids []int
	for _, sp := range t.raw.split(text, t.added) {
		if sp.id >= 0 {
			ids = append(ids, sp.id)
			continue
		}
		s := sp.text
		if t.norm != nil {
			s = t.norm.apply(s)
		}
		for _, sub := range t.normed.split(s, t.added) {
			if sub.id >= 0 {
				ids = append(ids, sub.id)
				continue
			}
			ids = t.model(ids, sub.text)
		}
	}
	return ids
}

// model pre-tokenizes s and runs WordPiece on each word.
func (t *Tokenizer) model(ids []int, s string) []int {
	if !t.preBert {
		if s != "" {
			ids = t.wordPiece(ids, s)
		}
		return ids
	}
	start := -1
	for i, r := range s {
		switch {
		case isBertSpace(r):
			if start >= 0 {
				ids = t.wordPiece(ids, s[start:i])
				start = -1
			}
		case isBertPunct(r):
			if start >= 0 {
				ids = t.wordPiece(ids, s[start:i])
				start = -1
			}
			ids = t.wordPiece(ids, s[i:i+utf8.RuneLen(r)])
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		ids = t.wordPiece(ids, s[start:])
	}
	return ids
}

// wordPiece splits one word greedily into the longest vocabulary pieces, continuation pieces
// carrying the prefix; a word with an unmatchable rest, or longer than maxChars characters,
// is the unknown token.
func (t *Tokenizer) wordPiece(ids []int, word string) []int {
	if utf8.RuneCountInString(word) > t.maxChars {
		return append(ids, t.unk)
	}
	n := len(ids)
	start := 0
	var buf strings.Builder
	for start < len(word) {
		end := len(word)
		found := -1
		for end > start {
			sub := word[start:end]
			if start > 0 {
				buf.Reset()
				buf.WriteString(t.prefix)
				buf.WriteString(sub)
				sub = buf.String()
			}
			if id, ok := t.vocab[sub]; ok {
				found = id
				break
			}
			_, sz := utf8.DecodeLastRuneInString(word[start:end])
			end -= sz
		}
		if found < 0 {
			return append(ids[:n], t.unk)
		}
		ids = append(ids, found)
		start = end
	}
	return ids
}

// BERT character classes, as tokenizers' normalizers/bert.rs and pre_tokenizers/bert.rs.

// isBertSpace is Rust's char::is_whitespace (the White_Space property), as unicode.IsSpace.
func isBertSpace(r rune) bool { return unicode.IsSpace(r) }

func isBertControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

func isBertPunct(r rune) bool {
	return (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126) || unicode.IsPunct(r)
}

func isChineseChar(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) || (r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) || (r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}

func (n *bertNormalizer) apply(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		if n.CleanText {
			if r == 0 || r == 0xFFFD || isBertControl(r) {
				continue
			}
			if isBertSpace(r) {
				r = ' '
			}
		}
		if n.HandleChineseChars && isChineseChar(r) {
			b.WriteByte(' ')
			b.WriteRune(r)
			b.WriteByte(' ')
			continue
		}
		b.WriteRune(r)
	}
	out := b.String()
	strip := n.Lowercase
	if n.StripAccents != nil {
		strip = *n.StripAccents
	}
	if strip {
		d := norm.NFD.String(out)
		b.Reset()
		for _, r := range d {
			if !unicode.Is(unicode.Mn, r) {
				b.WriteRune(r)
			}
		}
		out = b.String()
	}
	if n.Lowercase {
		b.Reset()
		for _, r := range out {
			if r == 'İ' { // the one unconditional multi-character lowercase mapping
				b.WriteString("i\u0307")
				continue
			}
			b.WriteRune(unicode.ToLower(r))
		}
		out = b.String()
	}
	return out
}

// trie matches added tokens leftmost-longest, as tokenizers' AddedVocabulary does.
type trie struct {
	next map[rune]*trie
	id   int // -1: not the end of a word
}

type trieWord struct {
	text string
	id   int
}

func newTrie(words []trieWord) *trie {
	if len(words) == 0 {
		return nil
	}
	sort.Slice(words, func(i, j int) bool { return words[i].id < words[j].id })
	root := &trie{id: -1}
	for _, w := range words {
		n := root
		for _, r := range w.text {
			c := n.next[r]
			if c == nil {
				if n.next == nil {
					n.next = map[rune]*trie{}
				}
				c = &trie{id: -1}
				n.next[r] = c
			}
			n = c
		}
		if n.id < 0 { // the first (lowest id) of equal contents wins
			n.id = w.id
		}
	}
	return root
}

type piece struct {
	text string
	id   int // -1: plain text
}

// split cuts s into added tokens and the text between them, applying each token's lstrip,
// rstrip and single_word options.
func (tr *trie) split(s string, added map[int]addedToken) []piece {
	if tr == nil {
		if s == "" {
			return nil
		}
		return []piece{{s, -1}}
	}
	var out []piece
	from := 0 // start of pending plain text
	i := 0
	for i < len(s) {
		// longest match starting at i
		n, end, id := tr, -1, -1
		for j := i; j < len(s); {
			r, sz := utf8.DecodeRuneInString(s[j:])
			n = n.next[r]
			if n == nil {
				break
			}
			j += sz
			if n.id >= 0 {
				end, id = j, n.id
			}
		}
		if id < 0 {
			_, sz := utf8.DecodeRuneInString(s[i:])
			i += sz
			continue
		}
		a := added[id]
		start, stop := i, end
		if a.SingleWord {
			before, _ := utf8.DecodeLastRuneInString(s[:start])
			after, _ := utf8.DecodeRuneInString(s[stop:])
			if (start > 0 && isWordChar(before)) || (stop < len(s) && isWordChar(after)) {
				i = end // the match is consumed without splitting, as aho-corasick's iterator does
				continue
			}
		}
		if a.LStrip {
			for start > from {
				r, sz := utf8.DecodeLastRuneInString(s[:start])
				if !unicode.IsSpace(r) {
					break
				}
				start -= sz
			}
		}
		if a.RStrip {
			for stop < len(s) {
				r, sz := utf8.DecodeRuneInString(s[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += sz
			}
		}
		if from < start {
			out = append(out, piece{s[from:start], -1})
		}
		out = append(out, piece{s[start:stop], id})
		from, i = stop, stop
	}
	if from < len(s) {
		out = append(out, piece{s[from:], -1})
	}
	return out
}

func isWordChar(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }
