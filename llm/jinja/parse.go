package jinja

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// ErrSyntax is wrapped by template parse errors.
var ErrSyntax = errors.New("jinja: syntax error")

// Template is a parsed template.
type Template struct{ body []node }

var (
	lstripRe = regexp.MustCompile(`(?m)^[ \t]*(\{[#%-])`)
	trimRe   = regexp.MustCompile(`([#%-]\})\n`)
	genRe    = regexp.MustCompile(`(?s)(\s*)\{%(-?)\s*(?:end)?generation\s*(-?)%\}(\s*)`)
)

// preprocess applies trim_blocks and lstrip_blocks and drops {% generation %} tags, as
// @huggingface/jinja does before tokenizing.
func preprocess(src string) string {
	src = strings.TrimSuffix(src, "\n")
	src = lstripRe.ReplaceAllString(src, "$1")
	src = trimRe.ReplaceAllString(src, "$1")
	return genRe.ReplaceAllStringFunc(src, func(m string) string {
		g := genRe.FindStringSubmatch(m)
		out := ""
		if g[2] == "" {
			out += g[1]
		}
		if g[3] == "" {
			out += g[4]
		}
		return out
	})
}

// segment is raw text or the inside of a {{ }} / {% %} tag.
type segment struct {
	kind byte // 't' text, 'o' output, 's' statement
	text string
	pos  int
}

func split(src string) ([]segment, error) {
	var segs []segment
	i := 0
	trimNext := false
	for i < len(src) {
		j := nextTag(src[i:])
		if j < 0 || i+j+1 >= len(src) {
			segs = append(segs, segment{'t', trimLeft(src[i:], trimNext), i})
			break
		}
		text := trimLeft(src[i:i+j], trimNext)
		trimNext = false
		open := src[i+j : i+j+2]
		start := i + j + 2
		if start < len(src) && src[start] == '-' {
			text = strings.TrimRightFunc(text, unicode.IsSpace)
			start++
		}
		if text != "" {
			segs = append(segs, segment{'t', text, i})
		}
		closeTag := map[string]string{"{{": "}}", "{%": "%}", "{#": "#}"}[open]
		end, err := findClose(src, start, closeTag, open == "{#")
		if err != nil {
			return nil, err
		}
		inner := src[start:end]
		if strings.HasSuffix(inner, "-") {
			inner = inner[:len(inner)-1]
			trimNext = true
		}
		switch open {
		case "{{":
			segs = append(segs, segment{'o', inner, start})
		case "{%":
			segs = append(segs, segment{'s', inner, start})
		}
		i = end + 2
	}
	return segs, nil
}

// nextTag is the offset of the first "{{", "{%" or "{#" in s, or -1.
func nextTag(s string) int {
	for k := 0; k+1 < len(s); k++ {
		if s[k] == '{' && (s[k+1] == '{' || s[k+1] == '%' || s[k+1] == '#') {
			return k
		}
	}
	return -1
}

func trimLeft(s string, on bool) string {
	if on {
		return strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	return s
}

// findClose finds the closing delimiter, skipping string literals inside expressions.
func findClose(src string, i int, closeTag string, comment bool) (int, error) {
	if comment {
		k := strings.Index(src[i:], closeTag)
		if k < 0 {
			return 0, fmt.Errorf("%w: unclosed comment at offset %d", ErrSyntax, i)
		}
		return i + k, nil
	}
	var quote byte
	for ; i+1 < len(src); i++ {
		c := src[i]
		if quote != 0 {
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
			continue
		}
		if c == '\'' || c == '"' {
			quote = c
			continue
		}
		if src[i:i+2] == closeTag {
			if closeTag == "}}" && i+2 < len(src) && src[i+2] == '}' {
				continue // "}}}": a dict literal closes first
			}
			return i, nil
		}
	}
	return 0, fmt.Errorf("%w: unclosed %s tag", ErrSyntax, map[string]string{"}}": "{{", "%}": "{%"}[closeTag])
}

// --- expression tokens ---

type tok struct {
	t string // "name", "str", "int", "float", "op", "eof"
	v string
}

func lex(s string) ([]tok, error) {
	var out []tok
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '_' || unicode.IsLetter(rune(c)):
			j := i
			for j < len(s) && (s[j] == '_' || unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j]))) {
				j++
			}
			out = append(out, tok{"name", s[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			t := "int"
			if j+1 < len(s) && s[j] == '.' && s[j+1] >= '0' && s[j+1] <= '9' {
				t = "float"
				j++
				for j < len(s) && s[j] >= '0' && s[j] <= '9' {
					j++
				}
			}
			out = append(out, tok{t, s[i:j]})
			i = j
		case c == '\'' || c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
					switch s[j] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					case 'r':
						b.WriteByte('\r')
					case 'b':
						b.WriteByte('\b')
					case 'f':
						b.WriteByte('\f')
					case 'v':
						b.WriteByte('\v')
					case '0':
						b.WriteByte(0)
					case 'x', 'u':
						n := 2
						if s[j] == 'u' {
							n = 4
						}
						if j+n < len(s) {
							if r, err := strconv.ParseUint(s[j+1:j+1+n], 16, 32); err == nil {
								b.WriteRune(rune(r))
								j += n
								continue
							}
						}
						b.WriteByte(s[j])
					default:
						b.WriteByte(s[j])
					}
					continue
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("%w: unterminated string", ErrSyntax)
			}
			out = append(out, tok{"str", b.String()})
			i = j + 1
		default:
			two := ""
			if i+1 < len(s) {
				two = s[i : i+2]
			}
			switch two {
			case "==", "!=", "<=", ">=", "//", "**":
				out = append(out, tok{"op", two})
				i += 2
				continue
			}
			if strings.IndexByte("+-*/%~<>()[]{}.,:|=!?", c) < 0 {
				return nil, fmt.Errorf("%w: unexpected character %q", ErrSyntax, c)
			}
			out = append(out, tok{"op", string(c)})
			i++
		}
	}
	return append(out, tok{"eof", ""}), nil
}

// --- AST ---

type node interface{}

type textNode struct{ s string }
type outputNode struct{ e expr }
type ifNode struct {
	conds  []expr
	bodies [][]node
	els    []node
}
type forNode struct {
	vars  []string
	iter  expr
	cond  expr
	body  []node
	els   []node
	recur bool
}
type setNode struct {
	target expr // name or attribute
	names  []string
	e      expr
	body   []node // {% set x %}…{% endset %}
}
type breakNode struct{}
type continueNode struct{}

type expr interface{}

type litExpr struct{ v Value }
type nameExpr struct{ name string }
type attrExpr struct {
	obj  expr
	name string
}
type indexExpr struct {
	obj expr
	idx expr
}
type sliceExpr struct {
	obj              expr
	start, stop, stp expr
}
type callExpr struct {
	fn   expr
	args []expr
	kw   []kwArg
}
type kwArg struct {
	name string
	e    expr
}
type filterExpr struct {
	obj  expr
	name string
	args []expr
	kw   []kwArg
}
type testExpr struct {
	obj  expr
	name string
	args []expr
	neg  bool
}
type binExpr struct {
	op   string
	l, r expr
}
type unaryExpr struct {
	op string
	e  expr
}
type condExpr struct{ cond, yes, no expr }
type listExpr struct{ items []expr }
type dictExpr struct{ keys, vals []expr }

// Parse parses a template.
func Parse(src string) (*Template, error) {
	segs, err := split(preprocess(src))
	if err != nil {
		return nil, err
	}
	p := &parser{segs: segs}
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, fmt.Errorf("%w: unexpected {%% %s %%}", ErrSyntax, end)
	}
	return &Template{body: body}, nil
}

type parser struct {
	segs  []segment
	i     int
	depth int // blocks and sub-expressions open (see maxDepth)
	// expression state
	toks []tok
	k    int
}

// maxDepth bounds how deep blocks and expressions nest. A template is outside input (it
// comes with a model), and the parser recurses once per level: a few megabytes of "(((("
// would overflow the goroutine stack, a fatal error no recover catches. Real chat templates
// nest a handful of levels.
const maxDepth = 512

// enter opens one nesting level (leave closes it), failing past maxDepth.
func (p *parser) enter() error {
	if p.depth++; p.depth > maxDepth {
		return fmt.Errorf("%w: nested more than %d levels deep", ErrSyntax, maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// block parses nodes until an end-like statement, returned with its whole text.
func (p *parser) block(ends ...string) ([]node, string, error) {
	if err := p.enter(); err != nil {
		return nil, "", err
	}
	defer p.leave()
	var out []node
	for p.i < len(p.segs) {
		s := p.segs[p.i]
		p.i++
		switch s.kind {
		case 't':
			out = append(out, textNode{s.text})
		case 'o':
			e, err := p.exprOf(s.text)
			if err != nil {
				return nil, "", err
			}
			out = append(out, outputNode{e})
		case 's':
			word := strings.Fields(s.text)
			if len(word) == 0 {
				return nil, "", fmt.Errorf("%w: empty {%% %%}", ErrSyntax)
			}
			for _, e := range ends {
				if word[0] == e {
					return out, strings.TrimSpace(s.text), nil
				}
			}
			n, err := p.statement(word[0], strings.TrimSpace(s.text))
			if err != nil {
				return nil, "", err
			}
			out = append(out, n)
		}
	}
	if len(ends) > 0 {
		return nil, "", fmt.Errorf("%w: missing {%% %s %%}", ErrSyntax, ends[len(ends)-1])
	}
	return out, "", nil
}

func (p *parser) statement(word, text string) (node, error) {
	rest := strings.TrimSpace(strings.TrimPrefix(text, word))
	switch word {
	case "if":
		n := ifNode{}
		cond, err := p.exprOf(rest)
		if err != nil {
			return nil, err
		}
		for {
			body, end, err := p.block("elif", "else", "endif")
			if err != nil {
				return nil, err
			}
			n.conds = append(n.conds, cond)
			n.bodies = append(n.bodies, body)
			switch strings.Fields(end)[0] {
			case "elif":
				if cond, err = p.exprOf(strings.TrimSpace(strings.TrimPrefix(end, "elif"))); err != nil {
					return nil, err
				}
				continue
			case "else":
				if n.els, _, err = p.block("endif"); err != nil {
					return nil, err
				}
			}
			return n, nil
		}
	case "for":
		if err := p.startExpr(rest); err != nil {
			return nil, err
		}
		n := forNode{}
		for {
			t := p.next()
			if t.t != "name" {
				return nil, fmt.Errorf("%w: for: want a loop variable", ErrSyntax)
			}
			n.vars = append(n.vars, t.v)
			if !p.accept("op", ",") {
				break
			}
		}
		if !p.accept("name", "in") {
			return nil, fmt.Errorf("%w: for: want 'in'", ErrSyntax)
		}
		it, err := p.orExpr() // no ternary: "if" filters the loop
		if err != nil {
			return nil, err
		}
		n.iter = it
		if p.accept("name", "if") {
			if n.cond, err = p.ternary(); err != nil {
				return nil, err
			}
		}
		if p.accept("name", "recursive") {
			n.recur = true
		}
		if err := p.expectEOF(); err != nil {
			return nil, err
		}
		body, end, err := p.block("else", "endfor")
		if err != nil {
			return nil, err
		}
		n.body = body
		if end == "else" {
			if n.els, _, err = p.block("endfor"); err != nil {
				return nil, err
			}
		}
		return n, nil
	case "set":
		if err := p.startExpr(rest); err != nil {
			return nil, err
		}
		n := setNode{}
		target, err := p.postfix()
		if err != nil {
			return nil, err
		}
		n.target = target
		if ne, ok := target.(nameExpr); ok {
			n.names = []string{ne.name}
			for p.accept("op", ",") {
				t := p.next()
				if t.t != "name" {
					return nil, fmt.Errorf("%w: set: bad target", ErrSyntax)
				}
				n.names = append(n.names, t.v)
			}
		}
		if p.accept("op", "=") {
			if n.e, err = p.exprList(); err != nil {
				return nil, err
			}
			return n, p.expectEOF()
		}
		if err := p.expectEOF(); err != nil {
			return nil, err
		}
		if n.body, _, err = p.block("endset"); err != nil {
			return nil, err
		}
		return n, nil
	case "break":
		return breakNode{}, nil
	case "continue":
		return continueNode{}, nil
	}
	return nil, fmt.Errorf("%w: unsupported statement {%% %s %%}", ErrSyntax, word)
}

func (p *parser) startExpr(s string) error {
	toks, err := lex(s)
	if err != nil {
		return err
	}
	p.toks, p.k = toks, 0
	return nil
}

func (p *parser) exprOf(s string) (expr, error) {
	if err := p.startExpr(s); err != nil {
		return nil, err
	}
	e, err := p.exprList()
	if err != nil {
		return nil, err
	}
	return e, p.expectEOF()
}

// exprList is an expression, or a bare tuple "a, b" (as a list).
func (p *parser) exprList() (expr, error) {
	e, err := p.ternary()
	if err != nil {
		return nil, err
	}
	if p.peek().t == "op" && p.peek().v == "," {
		items := []expr{e}
		for p.accept("op", ",") {
			x, err := p.ternary()
			if err != nil {
				return nil, err
			}
			items = append(items, x)
		}
		return listExpr{items}, nil
	}
	return e, nil
}

func (p *parser) expectEOF() error {
	if t := p.peek(); t.t != "eof" {
		return fmt.Errorf("%w: unexpected %q", ErrSyntax, t.v)
	}
	return nil
}

func (p *parser) peek() tok { return p.toks[p.k] }
func (p *parser) next() tok {
	t := p.toks[p.k]
	if t.t != "eof" {
		p.k++
	}
	return t
}
func (p *parser) accept(t, v string) bool {
	if x := p.peek(); x.t == t && x.v == v {
		p.k++
		return true
	}
	return false
}

func (p *parser) ternary() (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	e, err := p.orExpr()
	if err != nil {
		return nil, err
	}
	if p.accept("name", "if") {
		cond, err := p.orExpr()
		if err != nil {
			return nil, err
		}
		var no expr = litExpr{undefined}
		if p.accept("name", "else") {
			if no, err = p.ternary(); err != nil {
				return nil, err
			}
		}
		return condExpr{cond, e, no}, nil
	}
	return e, nil
}

func (p *parser) orExpr() (expr, error) {
	l, err := p.andExpr()
	for err == nil && p.accept("name", "or") {
		var r expr
		r, err = p.andExpr()
		l = binExpr{"or", l, r}
	}
	return l, err
}

func (p *parser) andExpr() (expr, error) {
	l, err := p.notExpr()
	for err == nil && p.accept("name", "and") {
		var r expr
		r, err = p.notExpr()
		l = binExpr{"and", l, r}
	}
	return l, err
}

func (p *parser) notExpr() (expr, error) {
	if p.accept("name", "not") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		e, err := p.notExpr()
		return unaryExpr{"not", e}, err
	}
	return p.compare()
}

func (p *parser) compare() (expr, error) {
	l, err := p.additive()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch {
		case t.t == "op" && (t.v == "==" || t.v == "!=" || t.v == "<" || t.v == ">" || t.v == "<=" || t.v == ">="):
			p.next()
			r, err := p.additive()
			if err != nil {
				return nil, err
			}
			l = binExpr{t.v, l, r}
		case t.t == "name" && t.v == "in":
			p.next()
			r, err := p.additive()
			if err != nil {
				return nil, err
			}
			l = binExpr{"in", l, r}
		case t.t == "name" && t.v == "not" && p.toks[p.k+1].t == "name" && p.toks[p.k+1].v == "in":
			p.k += 2
			r, err := p.additive()
			if err != nil {
				return nil, err
			}
			l = unaryExpr{"not", binExpr{"in", l, r}}
		case t.t == "name" && t.v == "is":
			p.next()
			te := testExpr{obj: l}
			te.neg = p.accept("name", "not")
			n := p.next()
			if n.t != "name" {
				return nil, fmt.Errorf("%w: want a test name after 'is'", ErrSyntax)
			}
			te.name = n.v
			if p.accept("op", "(") {
				args, _, err := p.args()
				if err != nil {
					return nil, err
				}
				te.args = args
			} else if x := p.peek(); x.t == "str" || x.t == "int" || x.t == "float" {
				a, err := p.primary()
				if err != nil {
					return nil, err
				}
				te.args = []expr{a}
			}
			l = te
		default:
			return l, nil
		}
	}
}

func (p *parser) additive() (expr, error) {
	l, err := p.multiplicative()
	for err == nil {
		t := p.peek()
		if t.t != "op" || (t.v != "+" && t.v != "-" && t.v != "~") {
			break
		}
		p.next()
		var r expr
		r, err = p.multiplicative()
		l = binExpr{t.v, l, r}
	}
	return l, err
}

func (p *parser) multiplicative() (expr, error) {
	l, err := p.unary()
	for err == nil {
		t := p.peek()
		if t.t != "op" || (t.v != "*" && t.v != "/" && t.v != "//" && t.v != "%" && t.v != "**") {
			break
		}
		p.next()
		var r expr
		r, err = p.unary()
		l = binExpr{t.v, l, r}
	}
	return l, err
}

func (p *parser) unary() (expr, error) {
	neg := p.accept("op", "-")
	if !neg && !p.accept("op", "+") {
		return p.filtered()
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	e, err := p.unary()
	if neg {
		return unaryExpr{"-", e}, err
	}
	return e, err
}

func (p *parser) filtered() (expr, error) {
	e, err := p.postfix()
	for err == nil && p.accept("op", "|") {
		n := p.next()
		if n.t != "name" {
			return nil, fmt.Errorf("%w: want a filter name after '|'", ErrSyntax)
		}
		f := filterExpr{obj: e, name: n.v}
		if p.accept("op", "(") {
			if f.args, f.kw, err = p.args(); err != nil {
				return nil, err
			}
		}
		e = f
	}
	return e, err
}

func (p *parser) postfix() (expr, error) {
	e, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.accept("op", "."):
			n := p.next()
			if n.t != "name" && n.t != "int" {
				return nil, fmt.Errorf("%w: want an attribute name after '.'", ErrSyntax)
			}
			e = attrExpr{e, n.v}
		case p.accept("op", "["):
			var parts [3]expr
			isSlice := false
			for i := 0; i < 3; i++ {
				if x := p.peek(); !(x.t == "op" && (x.v == ":" || x.v == "]")) {
					if parts[i], err = p.ternary(); err != nil {
						return nil, err
					}
				}
				if !p.accept("op", ":") {
					break
				}
				isSlice = true
			}
			if !p.accept("op", "]") {
				return nil, fmt.Errorf("%w: want ']'", ErrSyntax)
			}
			if isSlice {
				e = sliceExpr{e, parts[0], parts[1], parts[2]}
			} else {
				e = indexExpr{e, parts[0]}
			}
		case p.accept("op", "("):
			args, kw, err := p.args()
			if err != nil {
				return nil, err
			}
			e = callExpr{e, args, kw}
		default:
			return e, nil
		}
	}
}

// args parses call arguments after '(' up to ')'.
func (p *parser) args() ([]expr, []kwArg, error) {
	var args []expr
	var kw []kwArg
	for !p.accept("op", ")") {
		if len(args)+len(kw) > 0 && !p.accept("op", ",") {
			return nil, nil, fmt.Errorf("%w: want ',' or ')' in arguments", ErrSyntax)
		}
		if p.accept("op", ")") {
			break
		}
		if t := p.peek(); t.t == "name" && p.toks[p.k+1].t == "op" && p.toks[p.k+1].v == "=" {
			p.k += 2
			e, err := p.ternary()
			if err != nil {
				return nil, nil, err
			}
			kw = append(kw, kwArg{t.v, e})
			continue
		}
		e, err := p.ternary()
		if err != nil {
			return nil, nil, err
		}
		args = append(args, e)
	}
	return args, kw, nil
}

func (p *parser) primary() (expr, error) {
	t := p.next()
	switch t.t {
	case "str":
		s := t.v
		for p.peek().t == "str" { // adjacent literals concatenate
			s += p.next().v
		}
		return litExpr{Str(s)}, nil
	case "int":
		n, err := strconv.ParseInt(t.v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: bad integer %s", ErrSyntax, t.v)
		}
		return litExpr{Int(n)}, nil
	case "float":
		f, _ := strconv.ParseFloat(t.v, 64)
		return litExpr{Float(f)}, nil
	case "name":
		switch t.v {
		case "true", "True":
			return litExpr{Bool(true)}, nil
		case "false", "False":
			return litExpr{Bool(false)}, nil
		case "none", "None":
			return litExpr{none}, nil
		}
		return nameExpr{t.v}, nil
	case "op":
		switch t.v {
		case "(":
			e, err := p.exprList()
			if err != nil {
				return nil, err
			}
			if !p.accept("op", ")") {
				return nil, fmt.Errorf("%w: want ')'", ErrSyntax)
			}
			return e, nil
		case "[":
			var items []expr
			for !p.accept("op", "]") {
				if len(items) > 0 && !p.accept("op", ",") {
					return nil, fmt.Errorf("%w: want ',' or ']'", ErrSyntax)
				}
				if p.accept("op", "]") {
					break
				}
				e, err := p.ternary()
				if err != nil {
					return nil, err
				}
				items = append(items, e)
			}
			return listExpr{items}, nil
		case "{":
			var d dictExpr
			for !p.accept("op", "}") {
				if len(d.keys) > 0 && !p.accept("op", ",") {
					return nil, fmt.Errorf("%w: want ',' or '}'", ErrSyntax)
				}
				if p.accept("op", "}") {
					break
				}
				k, err := p.ternary()
				if err != nil {
					return nil, err
				}
				if !p.accept("op", ":") {
					return nil, fmt.Errorf("%w: want ':' in a dict", ErrSyntax)
				}
				v, err := p.ternary()
				if err != nil {
					return nil, err
				}
				d.keys, d.vals = append(d.keys, k), append(d.vals, v)
			}
			return d, nil
		}
	}
	if t.t == "eof" {
		return nil, fmt.Errorf("%w: unexpected end of expression", ErrSyntax)
	}
	return nil, fmt.Errorf("%w: unexpected %q", ErrSyntax, t.v)
}
