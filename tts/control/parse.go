package control

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxPause caps explicit pauses; longer ones are clipped with a warning.
const MaxPause = 10 * time.Second

const (
	maxTagLen  = 256 // a '<' tag longer than this is malformed
	maxTokLen  = 32  // a '[' token longer than this is not a token
	maxDepth   = 64  // nesting deeper than this is ignored with a warning
	maxWarn    = 100 // further warnings are counted, not listed
	tokenChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
)

type frame struct {
	name     string
	emphasis bool
	laughing bool
	rate     float64
	mute     bool   // inside <sub alias>: the content is replaced by the alias
	sayAs    string // inside <say-as>: "characters" or "digits"
}

type parser struct {
	in      string
	items   []Item
	stack   []frame
	speed   float64 // [speed_N] factor in effect
	text    strings.Builder
	textOff int
	s       Script
	dropped int
}

// Parse turns text with inline controls into a Script. It never fails: problems are reported
// as warnings and the offending control is dropped (never spoken). Invalid UTF-8 is replaced.
func Parse(text string) *Script {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	p := &parser{in: text, speed: 1}
	p.s.Oral, p.s.LaughLevel, p.s.BreakLevel = -1, -1, -1
	p.run()
	if p.dropped > 0 {
		p.s.Warnings = append(p.s.Warnings, Warning{Offset: len(text), Token: "", Reason: fmt.Sprintf("%d more warnings not listed", p.dropped)})
	}
	return &p.s
}

func (p *parser) warn(off int, tok, reason string) {
	if len(p.s.Warnings) >= maxWarn {
		p.dropped++
		return
	}
	if len(tok) > 40 {
		tok = strings.ToValidUTF8(tok[:40], "") + "…"
	}
	p.s.Warnings = append(p.s.Warnings, Warning{Offset: off, Token: tok, Reason: reason})
}

func (p *parser) top() frame {
	if len(p.stack) == 0 {
		return frame{rate: 1}
	}
	return p.stack[len(p.stack)-1]
}

func (p *parser) rate() float64 { return p.top().rate * p.speed }

// flush ends the pending text span.
func (p *parser) flush() {
	if p.text.Len() == 0 {
		return
	}
	t := p.text.String()
	p.text.Reset()
	f := p.top()
	if f.mute {
		return
	}
	if f.sayAs != "" {
		t = spellOut(t, f.sayAs)
	}
	it := Item{Kind: Text, Text: t, Emphasis: f.emphasis, Laughing: f.laughing, Rate: p.rate()}
	if n := len(p.s.Items); n > 0 {
		last := &p.s.Items[n-1]
		if last.Kind == Text && last.Emphasis == it.Emphasis && last.Laughing == it.Laughing && last.Rate == it.Rate {
			last.Text += t
			return
		}
	}
	p.s.Items = append(p.s.Items, it)
}

func (p *parser) emit(it Item) {
	p.flush()
	p.s.Items = append(p.s.Items, it)
}

func (p *parser) run() {
	in := p.in
	i := 0
	for i < len(in) {
		c := in[i]
		switch c {
		case '[':
			i = p.bracket(i)
		case '<':
			i = p.angle(i)
		case '&':
			i = p.entity(i)
		default:
			r, n := utf8.DecodeRuneInString(in[i:])
			p.text.WriteRune(r)
			i += n
		}
	}
	p.flush()
	for j := len(p.stack) - 1; j >= 0; j-- {
		if p.stack[j].name != "speak" {
			p.warn(len(in), "<"+p.stack[j].name+">", "not closed before the end of the text")
		}
	}
	// trim: drop whitespace-only text items at the very start and end
	items := p.s.Items[:0]
	for _, it := range p.s.Items {
		if it.Kind == Text && strings.TrimSpace(it.Text) == "" {
			// keep a single space between words around controls, but never as its own item
			continue
		}
		items = append(items, it)
	}
	p.s.Items = items
}

// bracket handles '[' at i and returns the index to continue from.
func (p *parser) bracket(i int) int {
	in := p.in
	j := i + 1
	for j < len(in) && j-i <= maxTokLen+1 && strings.IndexByte(tokenChars, in[j]) >= 0 {
		j++
	}
	name := in[i+1 : j]
	if j < len(in) && in[j] == ']' && name != "" {
		p.token(i, strings.ToLower(name), in[i:j+1])
		return j + 1
	}
	if name == "" {
		// "[" followed by something that is not a token: treat the bracket as punctuation and
		// drop it (brackets are not spoken).
		p.text.WriteByte(' ')
		return i + 1
	}
	// "[laugh" without "]" or with odd characters: malformed token, dropped.
	p.warn(i, in[i:j], "malformed control token (missing ']')")
	return j
}

// token handles a complete [name] token.
func (p *parser) token(off int, name, src string) {
	switch name {
	case "uv_break":
		p.emit(Item{Kind: Pause, Strength: UVBreak, Source: src})
		return
	case "v_break":
		p.emit(Item{Kind: Pause, Strength: VBreak, Source: src})
		return
	case "lbreak":
		p.emit(Item{Kind: Pause, Strength: LBreak, Source: src})
		return
	case "laugh", "laughter":
		p.emit(Item{Kind: Laugh, Level: 1, Source: src})
		return
	case "breath", "breathing":
		p.emit(Item{Kind: Breath, Source: src})
		return
	case "cough":
		p.emit(Item{Kind: Cough, Source: src})
		return
	case "sigh":
		p.emit(Item{Kind: Sigh, Source: src})
		return
	}
	if base, n, ok := levelToken(name); ok {
		switch base {
		case "oral":
			if n <= 9 {
				p.s.Oral = n
				return
			}
		case "laugh":
			if n <= 2 {
				p.s.LaughLevel = n
				return
			}
		case "break":
			if n <= 7 {
				p.s.BreakLevel = n
				p.emit(Item{Kind: Pause, Strength: Strength("break_" + strconv.Itoa(n)), Level: n, Source: src})
				return
			}
		case "speed":
			if n <= 9 {
				p.flush()
				p.speed = SpeedLevel(n)
				p.emit(Item{Kind: SpeedChange, Rate: p.rate(), Level: n, Source: src})
				return
			}
		default:
			p.warn(off, src, "unknown control token")
			return
		}
		p.warn(off, src, "level out of range")
		return
	}
	p.warn(off, src, "unknown control token")
}

func levelToken(name string) (string, int, bool) {
	k := strings.LastIndexByte(name, '_')
	if k <= 0 || k == len(name)-1 || len(name)-k > 3 {
		return "", 0, false
	}
	n, err := strconv.Atoi(name[k+1:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return name[:k], n, true
}

// entity decodes the XML entities SSML text uses; anything else is kept as text.
func (p *parser) entity(i int) int {
	for _, e := range [...]struct{ s, r string }{{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&nbsp;", " "}} {
		if strings.HasPrefix(p.in[i:], e.s) {
			p.text.WriteString(e.r)
			return i + len(e.s)
		}
	}
	p.text.WriteByte('&')
	return i + 1
}

type tag struct {
	name    string
	closing bool
	self    bool
	attrs   map[string]string
}

// angle handles '<' at i.
func (p *parser) angle(i int) int {
	in := p.in
	if i+1 >= len(in) || !(isLetter(in[i+1]) || (in[i+1] == '/' && i+2 < len(in) && isLetter(in[i+2])) || in[i+1] == '!' || in[i+1] == '?') {
		p.text.WriteByte('<') // "a < b": a literal less-than
		return i + 1
	}
	end := strings.IndexByte(in[i:], '>')
	if end < 0 || end > maxTagLen {
		// unterminated tag: drop the tag name, keep going after it
		j := i + 1
		for j < len(in) && (isLetter(in[j]) || in[j] == '/' || in[j] == '-' || in[j] == ':') {
			j++
		}
		p.warn(i, in[i:j], "malformed tag (no closing '>')")
		return j
	}
	src := in[i : i+end+1]
	if in[i+1] == '!' || in[i+1] == '?' { // comments, <?xml ?>, <!DOCTYPE>: skip silently
		if strings.HasPrefix(in[i:], "<!--") {
			if k := strings.Index(in[i+4:], "-->"); k >= 0 {
				return i + 4 + k + 3
			}
			p.warn(i, "<!--", "unterminated comment")
			return len(in)
		}
		return i + end + 1
	}
	t, err := parseTag(src)
	if err != nil {
		p.warn(i, src, err.Error())
		return i + end + 1
	}
	p.element(i, t, src)
	return i + end + 1
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

func parseTag(src string) (tag, error) {
	s := src[1 : len(src)-1]
	var t tag
	if strings.HasPrefix(s, "/") {
		t.closing = true
		s = s[1:]
	}
	if strings.HasSuffix(s, "/") {
		t.self = true
		s = s[:len(s)-1]
	}
	k := 0
	for k < len(s) && (isLetter(s[k]) || s[k] == '-' || s[k] == ':' || (k > 0 && s[k] >= '0' && s[k] <= '9')) {
		k++
	}
	t.name = strings.ToLower(s[:k])
	if i := strings.IndexByte(t.name, ':'); i >= 0 { // ssml:break, mstts:…
		t.name = t.name[i+1:]
	}
	rest := s[k:]
	if rest != "" && !isSpace(rune(rest[0])) {
		return t, fmt.Errorf("malformed tag name")
	}
	t.attrs = map[string]string{}
	for {
		rest = strings.TrimLeft(rest, " \t\r\n")
		if rest == "" {
			break
		}
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return t, fmt.Errorf("malformed attribute %q", rest)
		}
		key := strings.ToLower(strings.TrimSpace(rest[:eq]))
		rest = strings.TrimLeft(rest[eq+1:], " \t\r\n")
		var val string
		if rest != "" && (rest[0] == '"' || rest[0] == '\'') {
			q := rest[0]
			e := strings.IndexByte(rest[1:], q)
			if e < 0 {
				return t, fmt.Errorf("unterminated attribute value for %s", key)
			}
			val = rest[1 : 1+e]
			rest = rest[2+e:]
		} else {
			e := strings.IndexAny(rest, " \t\r\n")
			if e < 0 {
				e = len(rest)
			}
			val = rest[:e]
			rest = rest[e:]
		}
		t.attrs[key] = val
	}
	if t.closing && (t.self || len(t.attrs) > 0) {
		return t, fmt.Errorf("malformed closing tag")
	}
	return t, nil
}

// element applies a parsed tag.
func (p *parser) element(off int, t tag, src string) {
	switch t.name {
	case "break":
		if t.closing {
			return // </break> after <break>: harmless
		}
		p.breakTag(off, t, src)
		return
	case "s", "p":
		// sentence/paragraph markers: a sentence gap at their boundaries
		if t.closing || t.self {
			p.emit(Item{Kind: Pause, Strength: Sentence, Source: src})
		}
		return
	case "laughter", "strong", "emphasis", "prosody", "speak", "voice", "lang", "say-as", "sub", "audio", "mark":
	default:
		p.warn(off, src, "unknown tag")
		return
	}
	if t.name == "mark" || t.name == "audio" && t.self {
		return
	}
	if t.self {
		if t.name == "laughter" {
			p.emit(Item{Kind: Laugh, Level: 1, Source: src})
			return
		}
		return
	}
	if t.closing {
		p.close(off, t.name, src)
		return
	}
	if len(p.stack) >= maxDepth {
		p.warn(off, src, "nesting too deep; tag ignored")
		p.stack = append(p.stack, p.top()) // keep the stack balanced with its closing tag
		p.stack[len(p.stack)-1].name = t.name
		return
	}
	p.flush()
	f := p.top()
	f.name = t.name
	switch t.name {
	case "strong", "emphasis":
		if lvl := t.attrs["level"]; lvl == "none" || lvl == "reduced" {
			f.emphasis = false
		} else {
			f.emphasis = true
		}
	case "laughter":
		f.laughing = true
	case "prosody":
		for k, v := range t.attrs {
			switch k {
			case "rate":
				r, err := parseRate(v)
				if err != nil {
					p.warn(off, src, err.Error())
					continue
				}
				f.rate *= r
			default:
				p.warn(off, src, "prosody "+k+" is not supported; ignored")
			}
		}
	case "sub":
		if alias, ok := t.attrs["alias"]; ok && !f.mute {
			// the alias is plain text: control syntax in it is not interpreted nor spoken
			alias = strings.Map(func(r rune) rune {
				if strings.ContainsRune("[]<>", r) {
					return ' '
				}
				return r
			}, alias)
			p.text.WriteString(" " + alias + " ")
			p.flush()
			f.mute = true
		} else if !ok {
			p.warn(off, src, "<sub> without alias; its text is spoken")
		}
	case "say-as":
		switch v := strings.ToLower(t.attrs["interpret-as"]); v {
		case "characters", "spell-out", "verbatim":
			f.sayAs = "characters"
		case "digits", "telephone":
			f.sayAs = "digits"
		case "cardinal", "number", "date", "time", "currency", "":
			// the normaliser reads these forms already
		default:
			p.warn(off, src, "say-as "+v+" is not supported; its text is spoken plainly")
		}
	case "voice", "lang", "audio":
		p.warn(off, src, "<"+t.name+"> is not supported; its text is spoken plainly")
	}
	before := p.rate()
	p.stack = append(p.stack, f)
	if p.rate() != before {
		p.emit(Item{Kind: SpeedChange, Rate: p.rate(), Source: src})
	}
}

func (p *parser) close(off int, name, src string) {
	for j := len(p.stack) - 1; j >= 0; j-- {
		if p.stack[j].name != name {
			continue
		}
		p.flush()
		for k := len(p.stack) - 1; k > j; k-- {
			p.warn(off, "<"+p.stack[k].name+">", "closed implicitly by "+src)
		}
		before := p.rate()
		p.stack = p.stack[:j]
		if p.rate() != before {
			p.emit(Item{Kind: SpeedChange, Rate: p.rate(), Source: src})
		}
		return
	}
	p.warn(off, src, "closing tag without an opening tag")
}

func (p *parser) breakTag(off int, t tag, src string) {
	if v, ok := t.attrs["time"]; ok {
		d, err := parseDuration(v)
		if err != nil {
			p.warn(off, src, err.Error())
			return
		}
		if d > MaxPause {
			p.warn(off, src, "pause longer than "+MaxPause.String()+"; clipped")
			d = MaxPause
		}
		p.emit(Item{Kind: Pause, Pause: d, Source: src})
		return
	}
	s := Strength(strings.ToLower(t.attrs["strength"]))
	if s == "" {
		s = StrengthMedium
	}
	switch s {
	case StrengthNone, StrengthXWeak, StrengthWeak, StrengthMedium, StrengthStrong, StrengthXStrong:
		p.emit(Item{Kind: Pause, Strength: s, Source: src})
	default:
		p.warn(off, src, "unknown break strength")
	}
}

// spellOut separates characters (or only digits) with spaces so engines read them one by one.
func spellOut(t, mode string) string {
	var b strings.Builder
	for _, r := range t {
		if r == ' ' || r == '\t' || r == '\n' {
			b.WriteRune(r)
			continue
		}
		if mode == "digits" && (r < '0' || r > '9') {
			if r == '-' || r == '(' || r == ')' || r == '+' || r == '.' {
				b.WriteByte(' ')
				continue
			}
			b.WriteRune(r)
			continue
		}
		b.WriteRune(r)
		b.WriteByte(' ')
	}
	return b.String()
}

// parseDuration parses SSML times: "300ms", "1.5s", "2s".
func parseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(strings.ToLower(v))
	unit := time.Second
	switch {
	case strings.HasSuffix(v, "ms"):
		unit, v = time.Millisecond, v[:len(v)-2]
	case strings.HasSuffix(v, "s"):
		v = v[:len(v)-1]
	default:
		return 0, fmt.Errorf("break time %q needs a unit (ms or s)", v)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e6 {
		return 0, fmt.Errorf("bad break time %q", v)
	}
	return time.Duration(f * float64(unit)), nil
}

// parseRate parses SSML prosody rates: keywords, "150%", "+20%", "-10%", or a bare factor.
func parseRate(v string) (float64, error) {
	v = strings.TrimSpace(strings.ToLower(v))
	switch v {
	case "x-slow":
		return 0.5, nil
	case "slow":
		return 0.75, nil
	case "medium", "default", "":
		return 1, nil
	case "fast":
		return 1.25, nil
	case "x-fast":
		return 1.75, nil
	}
	var f float64
	var err error
	if strings.HasSuffix(v, "%") {
		num := v[:len(v)-1]
		f, err = strconv.ParseFloat(num, 64)
		if err == nil {
			if strings.HasPrefix(num, "+") || strings.HasPrefix(num, "-") {
				f = 1 + f/100
			} else {
				f /= 100
			}
		}
	} else {
		f, err = strconv.ParseFloat(v, 64)
	}
	if err != nil || math.IsNaN(f) || f < 0.25 || f > 4 {
		return 0, fmt.Errorf("prosody rate %q not understood or outside 25%%–400%%", v)
	}
	return f, nil
}
