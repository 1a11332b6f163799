package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizer regexes this package knows, exactly as tokenizer.json spells them. Each
// has a hand-written matcher with the same leftmost-first alternation and backtracking
// (Oniguruma semantics: \s is Unicode White_Space, (?i:) folds ASCII letters).
const (
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	gpt2Pattern   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// splitter cuts normalised text into the pieces BPE encodes separately.
type splitter func(string) []string

var splitters = map[string]splitter{
	qwen2Pattern:  func(s string) []string { return splitModern(s, 1) },
	llama3Pattern: func(s string) []string { return splitModern(s, 3) },
	gpt2Pattern:   splitGPT2,
}

func wholeText(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func isL(r rune) bool          { return unicode.IsLetter(r) }
func isN(r rune) bool          { return unicode.IsNumber(r) }
func isWhiteSpace(r rune) bool { return unicode.Is(unicode.White_Space, r) }
func isNL(r rune) bool         { return r == '\r' || r == '\n' }
func isPunct(r rune) bool      { return !isWhiteSpace(r) && !isL(r) && !isN(r) }
func isWordChar(r rune) bool   { return r == '_' || isL(r) || isN(r) || unicode.Is(unicode.Mn, r) }

// runes decodes s with the byte offset of every rune (and len(s) at the end).
func runes(s string) ([]rune, []int) {
	rs := make([]rune, 0, len(s))
	off := make([]int, 0, len(s)+1)
	for i, r := range s {
		rs = append(rs, r)
		off = append(off, i)
	}
	return rs, append(off, len(s))
}

func lower(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// contraction matches 's 't 're 've 'm 'll 'd at i; fold makes the letters case-insensitive.
func contraction(rs []rune, i int, fold bool) int {
	if rs[i] != '\'' || i+1 >= len(rs) {
		return 0
	}
	at := func(k int) rune {
		if k >= len(rs) {
			return 0
		}
		if fold {
			return lower(rs[k])
		}
		return rs[k]
	}
	switch at(i + 1) {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if at(i+2) == 'e' {
			return 3
		}
	case 'l':
		if at(i+2) == 'l' {
			return 3
		}
	}
	return 0
}

func run(rs []rune, i int, in func(rune) bool) int {
	for i < len(rs) && in(rs[i]) {
		i++
	}
	return i
}

// whitespace handles the three trailing alternatives shared by all patterns:
// (\s*[\r\n]+ when newlines is set) | \s+(?!\S) | \s+.
func whitespace(rs []rune, i int, newlines bool) int {
	if !isWhiteSpace(rs[i]) {
		return 0
	}
	j := run(rs, i, isWhiteSpace)
	if newlines {
		for k := j - 1; k >= i; k-- {
			if isNL(rs[k]) {
				return k + 1 - i
			}
		}
	}
	if j == len(rs) || j-i == 1 {
		return j - i
	}
	return j - 1 - i
}

// splitModern is the Qwen2 (digits=1) and Llama 3 (digits=3) pattern.
func splitModern(s string, digits int) []string {
	rs, off := runes(s)
	var out []string
	for i := 0; i < len(rs); {
		n := matchModern(rs, i, digits)
		out = append(out, s[off[i]:off[i+n]])
		i += n
	}
	return out
}

func matchModern(rs []rune, i, digits int) int {
	if n := contraction(rs, i, true); n > 0 {
		return n
	}
	r := rs[i]
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if !isNL(r) && !isL(r) && !isN(r) && i+1 < len(rs) && isL(rs[i+1]) {
		return run(rs, i+1, isL) - i
	}
	if isL(r) {
		return run(rs, i, isL) - i
	}
	// \p{N}{1,digits}
	if isN(r) {
		j := i
		for j < len(rs) && j-i < digits && isN(rs[j]) {
			j++
		}
		return j - i
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	k := i
	if r == ' ' && i+1 < len(rs) && isPunct(rs[i+1]) {
		k++
	}
	if isPunct(rs[k]) {
		j := run(rs, k, isPunct)
		return run(rs, j, isNL) - i
	}
	if n := whitespace(rs, i, true); n > 0 {
		return n
	}
	return 1 // unreachable: every rune is a letter, number, space or punctuation
}

// splitGPT2 is ByteLevel's own pattern (use_regex: true).
func splitGPT2(s string) []string {
	rs, off := runes(s)
	var out []string
	for i := 0; i < len(rs); {
		n := matchGPT2(rs, i)
		out = append(out, s[off[i]:off[i+n]])
		i += n
	}
	return out
}

func matchGPT2(rs []rune, i int) int {
	if n := contraction(rs, i, false); n > 0 {
		return n
	}
	for _, class := range []func(rune) bool{isL, isN, isPunct} {
		k := i
		if rs[k] == ' ' && k+1 < len(rs) && class(rs[k+1]) {
			k++
		}
		if class(rs[k]) {
			return run(rs, k, class) - i
		}
	}
	if n := whitespace(rs, i, false); n > 0 {
		return n
	}
	return 1
}

// byteRune maps each byte to the printable rune GPT-2's byte-level BPE uses for it.
var byteRune, runeToByte = byteTables()

func byteTables() ([256]rune, map[rune]byte) {
	var tab [256]rune
	rev := make(map[rune]byte, 256)
	n := 0
	for b := range 256 {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			tab[b] = rune(b)
		} else {
			tab[b] = rune(256 + n)
			n++
		}
		rev[tab[b]] = byte(b)
	}
	return tab, rev
}

func runeByte(r rune) (byte, bool) {
	b, ok := runeToByte[r]
	return b, ok
}

// appendByteRunes appends the byte-level spelling of s.
func appendByteRunes(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		dst = utf8.AppendRune(dst, byteRune[s[i]])
	}
	return dst
}
