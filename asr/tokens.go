package asr

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxVocab bounds the symbol tables we accept (SenseVoice-Small has 25055 pieces).
const maxVocab = 1 << 20

// Tokens is a model's symbol table: piece strings by id, their text forms (a leading "▁"
// becomes a space and byte-fallback pieces "<0xAB>" become that byte, as sherpa-onnx's
// SymbolTable does) and the ids of the SenseVoice tags.
type Tokens struct {
	pieces []string
	text   []string
	ids    map[string]int
}

// Len is the number of pieces.
func (t *Tokens) Len() int { return len(t.pieces) }

// Piece is the piece string of id as written in the tokens file, "" when out of range.
func (t *Tokens) Piece(id int) string {
	if id < 0 || id >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// ID is the id of a piece, or -1.
func (t *Tokens) ID(piece string) int {
	if id, ok := t.ids[piece]; ok {
		return id
	}
	return -1
}

// ParseTokensTxt reads the sherpa-onnx tokens.txt format: one "piece id" per line, ids
// 0..n-1 each exactly once. name is used in errors.
func ParseTokensTxt(r io.Reader, name string) (*Tokens, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	byID := map[int]string{}
	maxID := -1
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(s) == "" {
			continue
		}
		// The id is the last field; the piece is everything before the last run of blanks
		// (pieces never contain blanks in SentencePiece vocabularies, but be lenient).
		i := strings.LastIndexAny(s, " \t")
		if i <= 0 {
			return nil, fmt.Errorf("%w: %s line %d: want \"piece id\", got %q", ErrBadModel, name, line, clip(s))
		}
		piece := strings.TrimRight(s[:i], " \t")
		id, err := strconv.Atoi(s[i+1:])
		if err != nil || id < 0 || id >= maxVocab {
			return nil, fmt.Errorf("%w: %s line %d: bad id %q", ErrBadModel, name, line, clip(s[i+1:]))
		}
		if piece == "" {
			return nil, fmt.Errorf("%w: %s line %d: empty piece", ErrBadModel, name, line)
		}
		if _, dup := byID[id]; dup {
			return nil, fmt.Errorf("%w: %s line %d: id %d appears twice", ErrBadModel, name, line, id)
		}
		if len(byID) >= maxVocab {
			return nil, fmt.Errorf("%w: %s: more than %d pieces", ErrBadModel, name, maxVocab)
		}
		byID[id] = piece
		maxID = max(maxID, id)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s line %d: %v", ErrBadModel, name, line+1, err)
	}
	if len(byID) == 0 {
		return nil, fmt.Errorf("%w: %s has no tokens", ErrBadModel, name)
	}
	pieces := make([]string, maxID+1)
	for id := range pieces {
		p, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("%w: %s: id %d is missing (ids must be 0..%d)", ErrBadModel, name, id, maxID)
		}
		pieces[id] = p
	}
	return newTokens(pieces), nil
}

// ParseTokensJSON reads the FunASR/ModelScope tokens.json format: a JSON array of piece
// strings, the index being the id.
func ParseTokensJSON(r io.Reader, name string) (*Tokens, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var pieces []string
	if err := json.Unmarshal(bytes.TrimSpace(b), &pieces); err != nil {
		return nil, fmt.Errorf("%w: %s: want a JSON array of strings: %v", ErrBadModel, name, err)
	}
	if len(pieces) == 0 {
		return nil, fmt.Errorf("%w: %s has no tokens", ErrBadModel, name)
	}
	if len(pieces) > maxVocab {
		return nil, fmt.Errorf("%w: %s: more than %d pieces", ErrBadModel, name, maxVocab)
	}
	return newTokens(pieces), nil
}

func newTokens(pieces []string) *Tokens {
	t := &Tokens{pieces: pieces, text: make([]string, len(pieces)), ids: make(map[string]int, len(pieces))}
	for id, p := range pieces {
		if _, dup := t.ids[p]; !dup {
			t.ids[p] = id
		}
		t.text[id] = pieceText(id, p)
	}
	return t
}

// pieceText is sherpa-onnx's SymbolTable rule: a leading "▁" becomes a space; "<0xAB>" at
// id 3+0xAB (byte-level BPE) becomes the byte 0xAB.
func pieceText(id int, p string) string {
	if strings.HasPrefix(p, "▁") {
		return " " + p[len("▁"):]
	}
	if len(p) == 6 && strings.HasPrefix(p, "<0x") && p[5] == '>' && id >= 3 && id <= 258 {
		if v, err := strconv.ParseUint(p[3:5], 16, 8); err == nil && int(v) == id-3 {
			return string([]byte{byte(v)})
		}
	}
	return p
}

// isTag reports whether p looks like a SenseVoice tag, "<|...|>".
func isTag(p string) bool {
	return len(p) > 4 && strings.HasPrefix(p, "<|") && strings.HasSuffix(p, "|>")
}

// tagName strips "<|" and "|>" from a tag piece; other pieces give "".
func tagName(p string) string {
	if !isTag(p) {
		return ""
	}
	return p[2 : len(p)-2]
}

func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	return s
}
