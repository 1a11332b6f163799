package skills

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Expression limits: arithmetic comes from speech or a model, never needs more.
const (
	maxExprLen   = 500
	maxExprDepth = 64
)

// ErrExpr is wrapped by every arithmetic error.
var ErrExpr = errors.New("skills: bad expression")

// Eval evaluates an arithmetic expression: numbers (1, 2.5, 1e3, 1,000 is not a number: use
// 1000), + - * / % ^ (also ** and × ÷), unary signs, parentheses, postfix ! (factorial) and
// the functions sqrt, cbrt, abs, round, floor, ceil, sin, cos, tan (radians), ln, log
// (base 10), log2, exp and the constants pi and e. ^ is right-associative and binds tighter
// than unary minus (-2^2 = -4), as in mathematics.
func Eval(s string) (float64, error) {
	if len(s) > maxExprLen {
		return 0, fmt.Errorf("%w: longer than %d characters", ErrExpr, maxExprLen)
	}
	p := &parser{src: s}
	p.next()
	v, err := p.expr(0)
	if err != nil {
		return 0, err
	}
	if p.tok.kind != tEOF {
		return 0, fmt.Errorf("%w: unexpected %q at %d", ErrExpr, p.tok.text, p.tok.pos)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%w: the result is not a finite number", ErrExpr)
	}
	return v, nil
}

type tkind int

const (
	tEOF tkind = iota
	tNum
	tIdent
	tOp
	tLParen
	tRParen
	tBad
)

type token struct {
	kind tkind
	text string
	num  float64
	pos  int
}

type parser struct {
	src string
	i   int
	tok token
}

func (p *parser) next() {
	for p.i < len(p.src) && (p.src[p.i] == ' ' || p.src[p.i] == '\t') {
		p.i++
	}
	start := p.i
	if p.i >= len(p.src) {
		p.tok = token{kind: tEOF, pos: start}
		return
	}
	c := p.src[p.i]
	switch {
	case c >= '0' && c <= '9' || c == '.':
		j := p.i
		for j < len(p.src) && (p.src[j] >= '0' && p.src[j] <= '9' || p.src[j] == '.') {
			j++
		}
		if j < len(p.src) && (p.src[j] == 'e' || p.src[j] == 'E') {
			k := j + 1
			if k < len(p.src) && (p.src[k] == '+' || p.src[k] == '-') {
				k++
			}
			if k < len(p.src) && p.src[k] >= '0' && p.src[k] <= '9' {
				for k < len(p.src) && p.src[k] >= '0' && p.src[k] <= '9' {
					k++
				}
				j = k
			}
		}
		text := p.src[p.i:j]
		p.i = j
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			p.tok = token{kind: tBad, text: text, pos: start}
			return
		}
		p.tok = token{kind: tNum, text: text, num: v, pos: start}
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		j := p.i
		for j < len(p.src) && (p.src[j] >= 'a' && p.src[j] <= 'z' || p.src[j] >= 'A' && p.src[j] <= 'Z' || p.src[j] >= '0' && p.src[j] <= '9') {
			j++
		}
		p.tok = token{kind: tIdent, text: strings.ToLower(p.src[p.i:j]), pos: start}
		p.i = j
	case c == '(':
		p.i++
		p.tok = token{kind: tLParen, text: "(", pos: start}
	case c == ')':
		p.i++
		p.tok = token{kind: tRParen, text: ")", pos: start}
	case c == '*' && p.i+1 < len(p.src) && p.src[p.i+1] == '*':
		p.i += 2
		p.tok = token{kind: tOp, text: "^", pos: start}
	case strings.IndexByte("+-*/%^!", c) >= 0:
		p.i++
		p.tok = token{kind: tOp, text: string(c), pos: start}
	default:
		for _, alt := range []struct{ s, op string }{{"×", "*"}, {"÷", "/"}, {"−", "-"}, {"·", "*"}} {
			if strings.HasPrefix(p.src[p.i:], alt.s) {
				p.i += len(alt.s)
				p.tok = token{kind: tOp, text: alt.op, pos: start}
				return
			}
		}
		p.i++
		for p.i < len(p.src) && p.src[p.i]&0xC0 == 0x80 {
			p.i++
		}
		p.tok = token{kind: tBad, text: p.src[start:p.i], pos: start}
	}
}

// expr parses additions and subtractions.
func (p *parser) expr(depth int) (float64, error) {
	if depth > maxExprDepth {
		return 0, fmt.Errorf("%w: nested too deeply", ErrExpr)
	}
	v, err := p.term(depth)
	if err != nil {
		return 0, err
	}
	for p.tok.kind == tOp && (p.tok.text == "+" || p.tok.text == "-") {
		op := p.tok.text
		p.next()
		r, err := p.term(depth)
		if err != nil {
			return 0, err
		}
		if op == "+" {
			v += r
		} else {
			v -= r
		}
	}
	return v, nil
}

func (p *parser) term(depth int) (float64, error) {
	v, err := p.unary(depth)
	if err != nil {
		return 0, err
	}
	for p.tok.kind == tOp && (p.tok.text == "*" || p.tok.text == "/" || p.tok.text == "%") {
		op := p.tok.text
		p.next()
		r, err := p.unary(depth)
		if err != nil {
			return 0, err
		}
		switch op {
		case "*":
			v *= r
		case "/":
			if r == 0 {
				return 0, fmt.Errorf("%w: division by zero", ErrExpr)
			}
			v /= r
		case "%":
			if r == 0 {
				return 0, fmt.Errorf("%w: modulo by zero", ErrExpr)
			}
			v = math.Mod(v, r)
		}
	}
	return v, nil
}

func (p *parser) unary(depth int) (float64, error) {
	if depth > maxExprDepth {
		return 0, fmt.Errorf("%w: nested too deeply", ErrExpr)
	}
	if p.tok.kind == tOp && (p.tok.text == "-" || p.tok.text == "+") {
		neg := p.tok.text == "-"
		p.next()
		v, err := p.unary(depth + 1)
		if neg {
			v = -v
		}
		return v, err
	}
	return p.power(depth)
}

func (p *parser) power(depth int) (float64, error) {
	b, err := p.postfix(depth)
	if err != nil {
		return 0, err
	}
	if p.tok.kind == tOp && p.tok.text == "^" {
		p.next()
		e, err := p.unary(depth + 1) // right-associative; allows 2^-1
		if err != nil {
			return 0, err
		}
		return math.Pow(b, e), nil
	}
	return b, nil
}

func (p *parser) postfix(depth int) (float64, error) {
	v, err := p.primary(depth)
	if err != nil {
		return 0, err
	}
	for p.tok.kind == tOp && p.tok.text == "!" {
		p.next()
		if v < 0 || v != math.Trunc(v) || v > 170 {
			return 0, fmt.Errorf("%w: factorial needs a whole number from 0 to 170", ErrExpr)
		}
		f := 1.0
		for i := 2.0; i <= v; i++ {
			f *= i
		}
		v = f
	}
	return v, nil
}

var funcs = map[string]func(float64) (float64, error){
	"sqrt": func(x float64) (float64, error) {
		if x < 0 {
			return 0, fmt.Errorf("%w: square root of a negative number", ErrExpr)
		}
		return math.Sqrt(x), nil
	},
	"cbrt":  func(x float64) (float64, error) { return math.Cbrt(x), nil },
	"abs":   func(x float64) (float64, error) { return math.Abs(x), nil },
	"round": func(x float64) (float64, error) { return math.Round(x), nil },
	"floor": func(x float64) (float64, error) { return math.Floor(x), nil },
	"ceil":  func(x float64) (float64, error) { return math.Ceil(x), nil },
	"sin":   func(x float64) (float64, error) { return math.Sin(x), nil },
	"cos":   func(x float64) (float64, error) { return math.Cos(x), nil },
	"tan":   func(x float64) (float64, error) { return math.Tan(x), nil },
	"exp":   func(x float64) (float64, error) { return math.Exp(x), nil },
	"ln":    logf(math.Log),
	"log":   logf(math.Log10),
	"log2":  logf(math.Log2),
}

func logf(f func(float64) float64) func(float64) (float64, error) {
	return func(x float64) (float64, error) {
		if x <= 0 {
			return 0, fmt.Errorf("%w: logarithm of a number that is not positive", ErrExpr)
		}
		return f(x), nil
	}
}

func (p *parser) primary(depth int) (float64, error) {
	if depth > maxExprDepth {
		return 0, fmt.Errorf("%w: nested too deeply", ErrExpr)
	}
	t := p.tok
	switch t.kind {
	case tNum:
		p.next()
		return t.num, nil
	case tLParen:
		p.next()
		v, err := p.expr(depth + 1)
		if err != nil {
			return 0, err
		}
		if p.tok.kind != tRParen {
			return 0, fmt.Errorf("%w: missing )", ErrExpr)
		}
		p.next()
		return v, nil
	case tIdent:
		p.next()
		switch t.text {
		case "pi":
			return math.Pi, nil
		case "e":
			return math.E, nil
		}
		f, ok := funcs[t.text]
		if !ok {
			return 0, fmt.Errorf("%w: unknown name %q", ErrExpr, t.text)
		}
		arg, err := p.postfix(depth + 1) // sqrt 16, sqrt(16)
		if err != nil {
			return 0, err
		}
		return f(arg)
	case tEOF:
		return 0, fmt.Errorf("%w: incomplete", ErrExpr)
	}
	return 0, fmt.Errorf("%w: unexpected %q at %d", ErrExpr, t.text, t.pos)
}

// FormatNumber writes v the way it should be said: integers without decimals, others with
// at most six significant decimals.
func FormatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	if math.Abs(v) >= 1e15 || math.Abs(v) < 1e-6 {
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
	s := strconv.FormatFloat(v, 'f', 6, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
