// Package chunk cuts a streamed LLM answer into speakable pieces for text-to-speech, as early
// as possible: the delta that completes a sentence emits it.
//
// Sentences end at . ! ? ; … 。！？； and at line breaks. The first chunk may also end at a
// comma (，、,) so audio starts sooner. Guards keep abbreviations (Mr. Dr. e.g.), decimals
// (3.14), thousands (1,000), numbered-list markers (1.), URLs, inline code, links and fenced
// code blocks in one piece; a minimum weight merges tiny fragments and a maximum length forces
// a cut at the best soft break. With Markdown set, symbols that should not be spoken (**, #,
// `, bullets, table pipes, link targets) are removed from each chunk. TTS control tokens such
// as [laugh], [uv_break] and [break_3] pass through untouched.
package chunk

import (
	"strings"
	"unicode"
)

// Options tune a Chunker. The zero value is a raw splitter (no markdown stripping, no comma
// rule, defaults for the lengths); DefaultOptions is what TTS wants.
type Options struct {
	// MinWeight holds back a chunk lighter than this and joins it to the next one. Letters and
	// digits weigh 1, CJK characters 2. 0: 3.
	MinWeight int
	// MaxRunes forces a cut in text that has no sentence end for this long. 0: 220.
	MaxRunes int
	// FirstComma lets the first chunk end at a comma once it weighs FirstCommaMin.
	FirstComma    bool
	FirstCommaMin int // 0: 12
	// Markdown removes markdown symbols from the chunks and drops chunks left with nothing to say.
	Markdown bool
}

// DefaultOptions are the settings for speech.
func DefaultOptions() Options {
	return Options{MinWeight: 3, MaxRunes: 220, FirstComma: true, FirstCommaMin: 12, Markdown: true}
}

// Chunker turns a stream of text deltas into chunks. It is not safe for concurrent use.
type Chunker struct {
	opt   Options
	buf   []rune // text since the last cut
	pos   int    // next rune of buf to examine
	first bool   // no chunk emitted yet

	fence    bool // inside ``` … ```
	tick     bool // inside `inline code`
	brackets int  // depth of [ … ]
	link     bool // inside the (target) of [text](target)

	lastSoft  int // index after the last clean comma/colon, for forced cuts; -1 none
	lastSpace int // index of the last clean whitespace; -1 none
}

// New returns a Chunker.
func New(opt Options) *Chunker {
	if opt.MinWeight <= 0 {
		opt.MinWeight = 3
	}
	if opt.MaxRunes <= 0 {
		opt.MaxRunes = 220
	}
	if opt.FirstCommaMin <= 0 {
		opt.FirstCommaMin = 12
	}
	c := &Chunker{opt: opt}
	c.Reset()
	return c
}

// Reset forgets all buffered text, for a new answer.
func (c *Chunker) Reset() {
	c.buf, c.pos, c.first = c.buf[:0], 0, true
	c.fence, c.tick, c.brackets, c.link = false, false, 0, false
	c.lastSoft, c.lastSpace = -1, -1
}

// Pending returns the text held back so far.
func (c *Chunker) Pending() string { return string(c.buf) }

// Push adds a delta and returns the chunks it completes, in order (usually none or one).
func (c *Chunker) Push(s string) []string {
	if s == "" {
		return nil
	}
	for _, r := range s {
		c.buf = append(c.buf, r)
	}
	var out []string
	c.scan(false, &out)
	return out
}

// Flush ends the stream and returns whatever is left, cut into chunks.
func (c *Chunker) Flush() []string {
	var out []string
	c.scan(true, &out)
	c.emit(len(c.buf), true, &out)
	c.Reset()
	return out
}

// Split cuts a whole text at once.
func Split(text string, opt Options) []string {
	c := New(opt)
	out := c.Push(text)
	return append(out, c.Flush()...)
}

type decision int

const (
	keep decision = iota // not a cut here
	cut                  // a sentence ends here
	wait                 // can't tell until the next rune arrives
)

func (c *Chunker) scan(final bool, out *[]string) {
	for c.pos < len(c.buf) {
		r := c.buf[c.pos]
		if r == '`' {
			n := 0
			for c.pos+n < len(c.buf) && c.buf[c.pos+n] == '`' && n < 3 {
				n++
			}
			if n < 3 && c.pos+n == len(c.buf) && !final {
				return // maybe a fence still arriving
			}
			if n == 3 {
				if !c.fence {
					// Text before a code block is a chunk of its own.
					c.emit(c.pos, true, out)
				}
				c.fence = !c.fence
				c.tick = false
				c.pos += 3
				if !c.fence {
					// A closed code block is a unit: cut after it.
					c.emit(c.pos, false, out)
				}
				continue
			}
			if !c.fence {
				c.tick = !c.tick
			}
			c.pos++
			continue
		}
		if !c.fence {
			switch c.decide(c.pos, final) {
			case wait:
				return
			case cut:
				if r == '\n' {
					c.tick, c.brackets, c.link = false, 0, false
				}
				end := c.pos + 1
				for end < len(c.buf) && (isCloser(c.buf[end]) || isEnd(c.buf[end])) {
					end++
				}
				if c.emit(end, false, out) {
					continue
				}
			}
		}
		c.update(r)
		c.pos++
		if c.pos >= c.opt.MaxRunes {
			c.force(out)
		}
	}
}

// update advances the markup state over r.
func (c *Chunker) update(r rune) {
	if c.fence {
		if r == '\n' {
			c.lastSpace = c.pos
		}
		return
	}
	switch {
	case r == '\n':
		c.tick, c.brackets, c.link = false, 0, false
	case c.tick:
		return
	case r == '[':
		if c.brackets < 8 {
			c.brackets++
		}
	case r == ']':
		if c.brackets > 0 {
			c.brackets--
		}
	case r == '(' && c.pos > 0 && c.buf[c.pos-1] == ']' && c.brackets == 0:
		c.link = true // the (target) of [text](target)
	case r == ')' && c.link:
		c.link = false
	}
	if c.clean() {
		switch {
		case unicode.IsSpace(r):
			c.lastSpace = c.pos
		case r == ',' || r == '，' || r == '、' || r == ':' || r == '：' || r == ';' || r == '—':
			c.lastSoft = c.pos + 1
		}
	}
}

func (c *Chunker) clean() bool { return !c.tick && c.brackets == 0 && !c.link && !c.fence }

// force cuts an over-long chunk at the best break before pos.
func (c *Chunker) force(out *[]string) {
	end := c.pos
	switch {
	case c.lastSoft > 0 && weight(c.buf[:c.lastSoft]) >= c.opt.MinWeight:
		end = c.lastSoft
	case c.lastSpace > 0:
		end = c.lastSpace
	default:
		// A hard cut: don't split a [control] token.
		if i := lastIndex(c.buf[:end], '['); i > 0 && lastIndex(c.buf[:end], ']') < i {
			end = i
		}
	}
	c.emit(end, true, out)
}

// emit cuts buf[:end] off as a chunk. Unless forced, a chunk below the minimum weight is left
// in place (and false returned) so that it joins the next sentence.
func (c *Chunker) emit(end int, force bool, out *[]string) bool {
	if end <= 0 || end > len(c.buf) {
		return false
	}
	raw := c.buf[:end]
	if !force && weight(raw) < c.opt.MinWeight {
		return false
	}
	text := strings.TrimSpace(string(raw))
	if c.opt.Markdown {
		// Closing quotes or stray end marks that arrived after their sentence was sent.
		text = strings.TrimLeftFunc(text, func(r rune) bool { return isCloser(r) || (isEnd(r) && r != '\n') || unicode.IsSpace(r) })
		text = Strip(text)
		if !speakable(text) {
			text = ""
		}
	}
	if text != "" {
		*out = append(*out, text)
		c.first = false
	}
	n := copy(c.buf, c.buf[end:])
	c.buf = c.buf[:n]
	c.pos -= end
	if c.pos < 0 {
		c.pos = 0
	}
	c.lastSoft, c.lastSpace = -1, -1
	return true
}

// decide tells whether the rune at i ends a chunk.
func (c *Chunker) decide(i int, final bool) decision {
	r := c.buf[i]
	if !isEnd(r) && !isComma(r) {
		return keep
	}
	if r == '\n' {
		return cut
	}
	if !c.clean() {
		return keep
	}
	var next rune
	known := i+1 < len(c.buf)
	if known {
		next = c.buf[i+1]
	}
	// "unknown" at the end of the stream behaves like a following space.
	if !known && final {
		known, next = true, ' '
	}
	boundary := known && (unicode.IsSpace(next) || isCloser(next) || isEnd(next) || isCJK(next) || next == '[' || next == '*' || next == '_')

	if isComma(r) {
		if !c.opt.FirstComma || !c.first || weight(c.buf[:i]) < c.opt.FirstCommaMin {
			return keep
		}
		if r != ',' {
			return cut // ，、 never sit inside numbers
		}
		if i > 0 && isDigit(c.buf[i-1]) {
			if !known {
				return wait // 1,000 or "1, 2, 3"?
			}
			if isDigit(next) {
				return keep
			}
		}
		if known && !boundary {
			return keep
		}
		return cut
	}

	switch r {
	case '。', '！', '？', '；', '…':
		return cut
	}
	w := c.word(i)
	url := isURL(w)
	if url {
		if !known {
			return wait
		}
		if unicode.IsSpace(next) {
			return cut
		}
		return keep
	}
	if r == '!' || r == '?' || r == ';' {
		if known && !boundary {
			return keep // "?!" is handled by boundary; letters follow: not an end
		}
		if r == ';' && strings.HasPrefix(string(w), "&") {
			return keep // &amp;
		}
		return cut
	}
	// r == '.'
	if known && !boundary {
		return keep // 3.14, e.g. inner dots, example.com, file.txt
	}
	if len(w) == 0 {
		return cut // ". " after punctuation or a closing bracket
	}
	lw := ""
	if len(w) <= 8 {
		lw = strings.ToLower(string(w))
	}
	if neverEnds[lw] {
		return keep
	}
	if len(w) == 1 && unicode.IsLetter(w[0]) {
		return keep // an initial: "J. R. R. Tolkien"
	}
	if allDigits(w) {
		if c.lineStart(i - len(w)) {
			return keep // "1. " list marker
		}
		if !known {
			return wait // "3." or "3.14"?
		}
		return cut
	}
	if containsRune(w, '.') {
		// a.m., U.S., i.e. (handled above): might continue.
		if !known {
			return wait
		}
		return cut
	}
	return cut
}

// word returns the word that ends just before i (letters, digits, dots and URL characters).
func (c *Chunker) word(i int) []rune {
	j := i
	for j > 0 {
		p := c.buf[j-1]
		if unicode.IsSpace(p) || p == '(' || p == '[' || p == '"' || p == '\'' || p == '“' || p == '‘' || p == '*' || p == '_' || isCJK(p) {
			break
		}
		j--
		if i-j > 512 {
			break
		}
	}
	return c.buf[j:i]
}

// lineStart reports whether only whitespace or a list bullet precedes i on its line
// (or in the current chunk).
func (c *Chunker) lineStart(i int) bool {
	for j := i - 1; j >= 0; j-- {
		r := c.buf[j]
		if r == '\n' {
			return true
		}
		if !unicode.IsSpace(r) && r != '-' && r != '*' && r != '+' && r != '>' && r != '#' {
			return false
		}
	}
	return true
}

var neverEnds = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "sr": true, "jr": true,
	"st": true, "vs": true, "e.g": true, "i.e": true, "cf": true, "approx": true, "fig": true,
	"vol": true, "ca": true, "mt": true, "gen": true, "sgt": true, "capt": true, "lt": true,
	"col": true, "rev": true, "hon": true, "eg": true, "ie": true, "pp": true, "ch": true,
	"dept": true, "est": true, "govt": true, "etc": true, "corp": true, "assn": true, "bros": true,
}

func isEnd(r rune) bool {
	switch r {
	case '.', '!', '?', ';', '…', '。', '！', '？', '；', '\n':
		return true
	}
	return false
}

func isComma(r rune) bool { return r == ',' || r == '，' || r == '、' }

func isCloser(r rune) bool {
	switch r {
	case '"', '\'', ')', ']', '”', '’', '」', '』', '）', '》', '〉', '】':
		return true
	}
	return false
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

func allDigits(w []rune) bool {
	for _, r := range w {
		if !isDigit(r) {
			return false
		}
	}
	return len(w) > 0
}

func isURL(w []rune) bool {
	if len(w) > 12 {
		w = w[:12] // a scheme or www. comes first
	}
	s := strings.ToLower(string(w))
	return strings.Contains(s, "://") || s == "www" || strings.HasPrefix(s, "www.") || strings.HasPrefix(s, "mailto:")
}

func isCJK(r rune) bool {
	if r < 0x1100 {
		return false
	}
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

// weight counts what would be spoken: letters and digits 1, CJK characters 2.
func weight(rs []rune) int {
	n := 0
	for _, r := range rs {
		switch {
		case isCJK(r):
			n += 2
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			n++
		}
	}
	return n
}

func speakable(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

func lastIndex(rs []rune, r rune) int {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i] == r {
			return i
		}
	}
	return -1
}

func containsRune(rs []rune, r rune) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}
