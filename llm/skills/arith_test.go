package skills

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// An independent reference for Eval: expressions are built as trees from the fuzzer's bytes,
// evaluated directly on the tree, and printed with only the parentheses the documented
// precedence needs (+ - < * / % < unary sign < ^ (right-associative, exponent may be signed)
// < postfix ! < numbers, names, parentheses). Eval must parse the text back to the same value,
// or fail exactly where the tree's evaluation fails.

type node struct {
	op   string // "num", "pi", "e", "+", "-", "*", "/", "%", "^", "neg", "pos", "!", or a function name
	v    float64
	l, r *node
}

// Levels: 1 sum, 2 product, 3 sign, 4 power, 5 postfix and function calls, 6 atoms.
func (n *node) level() int {
	switch n.op {
	case "+", "-":
		return 1
	case "*", "/", "%":
		return 2
	case "neg", "pos":
		return 3
	case "^":
		return 4
	case "!":
		return 5
	case "num", "pi", "e":
		return 6
	}
	return 5 // function call
}

var refFuncs = []string{"sqrt", "cbrt", "abs", "round", "floor", "ceil", "sin", "cos", "tan", "exp", "ln", "log", "log2"}

// errRef marks a failure of the reference evaluation.
type errRef string

func (n *node) eval() (float64, error) {
	switch n.op {
	case "num":
		return n.v, nil
	case "pi":
		return math.Pi, nil
	case "e":
		return math.E, nil
	}
	a, err := n.l.eval()
	if err != nil {
		return 0, err
	}
	switch n.op {
	case "neg":
		return -a, nil
	case "pos":
		return a, nil
	case "!":
		if a < 0 || a != math.Trunc(a) || a > 170 {
			return 0, fmt.Errorf("factorial of %v", a)
		}
		f := 1.0
		for i := 2.0; i <= a; i++ {
			f *= i
		}
		return f, nil
	case "sqrt":
		if a < 0 {
			return 0, fmt.Errorf("sqrt of %v", a)
		}
		return math.Sqrt(a), nil
	case "cbrt":
		return math.Cbrt(a), nil
	case "abs":
		return math.Abs(a), nil
	case "round":
		return math.Round(a), nil
	case "floor":
		return math.Floor(a), nil
	case "ceil":
		return math.Ceil(a), nil
	case "sin":
		return math.Sin(a), nil
	case "cos":
		return math.Cos(a), nil
	case "tan":
		return math.Tan(a), nil
	case "exp":
		return math.Exp(a), nil
	case "ln", "log", "log2":
		if a <= 0 {
			return 0, fmt.Errorf("log of %v", a)
		}
		return map[string]func(float64) float64{"ln": math.Log, "log": math.Log10, "log2": math.Log2}[n.op](a), nil
	}
	b, err := n.r.eval()
	if err != nil {
		return 0, err
	}
	switch n.op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/":
		if b == 0 {
			return 0, fmt.Errorf("division by zero")
		}
		return a / b, nil
	case "%":
		if b == 0 {
			return 0, fmt.Errorf("modulo by zero")
		}
		return math.Mod(a, b), nil
	case "^":
		return math.Pow(a, b), nil
	}
	panic("unknown op " + n.op)
}

// text prints n with the parentheses the grammar needs (and, when extra says so, a few more
// that it does not need, and varied spacing).
func (n *node) text(rnd *byteRand) string {
	wrap := func(c *node, min int) string {
		s := c.text(rnd)
		if c.level() < min || rnd.next()%16 == 0 {
			return "(" + s + ")"
		}
		return s
	}
	sp := func() string {
		if rnd.next()%3 == 0 {
			return ""
		}
		return " "
	}
	switch n.op {
	case "num":
		return strconv.FormatFloat(n.v, 'f', -1, 64)
	case "pi", "e":
		return n.op
	case "+", "-", "*", "/", "%":
		lv := n.level()
		op := n.op
		if op == "*" && rnd.next()%4 == 0 {
			op = "×"
		}
		// the right operand of a sum may be a signed term, of a product a signed factor
		return wrap(n.l, lv) + sp() + op + sp() + wrap(n.r, lv+1)
	case "^":
		// base: postfix level; exponent: a signed power (right-associative)
		return wrap(n.l, 5) + sp() + "^" + sp() + wrap(n.r, 3)
	case "neg", "pos":
		s := "-"
		if n.op == "pos" {
			s = "+"
		}
		return s + sp() + wrap(n.l, 3)
	case "!":
		c := n.l.text(rnd)
		if n.l.level() < 6 && n.l.op != "!" {
			c = "(" + c + ")"
		}
		return c + "!"
	}
	// a function takes a postfix-level argument: f(x), or f x for an atom
	if n.l.op == "num" && rnd.next()%2 == 0 {
		return n.op + " " + n.l.text(rnd)
	}
	return n.op + "(" + n.l.text(rnd) + ")"
}

type byteRand struct {
	b []byte
	i int
}

func (r *byteRand) next() int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1])
}

func build(r *byteRand, depth int) *node {
	k := r.next()
	if depth <= 0 || r.i >= len(r.b) {
		k = k % 3 // atoms only
	}
	switch k % 20 {
	case 0, 1:
		// small integers, decimals and the odd large or tiny number
		v := float64(r.next() % 13)
		switch r.next() % 6 {
		case 0:
			v += float64(r.next()%100) / 100
		case 1:
			v = float64(r.next()) * 1000
		case 2:
			v = float64(r.next()%10) / 1000
		}
		return &node{op: "num", v: v}
	case 2:
		if r.next()%2 == 0 {
			return &node{op: "pi"}
		}
		return &node{op: "e"}
	case 3, 4, 5:
		return &node{op: []string{"+", "-"}[r.next()%2], l: build(r, depth-1), r: build(r, depth-1)}
	case 6, 7, 8:
		return &node{op: []string{"*", "/", "%"}[r.next()%3], l: build(r, depth-1), r: build(r, depth-1)}
	case 9, 10:
		return &node{op: "^", l: build(r, depth-1), r: build(r, depth-1)}
	case 11, 12:
		return &node{op: []string{"neg", "pos"}[r.next()%2], l: build(r, depth-1)}
	case 13:
		return &node{op: "!", l: build(r, depth-1)}
	default:
		return &node{op: refFuncs[r.next()%len(refFuncs)], l: build(r, depth-1)}
	}
}

func checkAgainstReference(t *testing.T, data []byte) {
	t.Helper()
	r := &byteRand{b: data}
	tree := build(r, 5)
	src := tree.text(r)
	want, wantErr := tree.eval()
	if wantErr == nil && (math.IsNaN(want) || math.IsInf(want, 0)) {
		wantErr = fmt.Errorf("not finite")
	}
	if len(src) > maxExprLen {
		wantErr = fmt.Errorf("too long")
	}
	got, err := Eval(src)
	switch {
	case (err != nil) != (wantErr != nil):
		t.Fatalf("Eval(%q) = %v, %v; reference %v, %v", src, got, err, want, wantErr)
	case err == nil && !(got == want || math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))):
		t.Fatalf("Eval(%q) = %v; reference %v", src, got, want)
	}
}

// FuzzEvalMatchesReference: go test -run X -fuzz FuzzEvalMatchesReference ./llm/skills
func FuzzEvalMatchesReference(f *testing.F) {
	for _, s := range [][]byte{{}, {3, 0, 5, 1, 0, 7}, {9, 11, 0, 2, 0, 0, 3}, {13, 0, 4}, {17, 3, 0, 16},
		{6, 2, 0, 3, 0, 0, 0, 1}, {9, 9, 0, 2, 0, 11, 0, 0, 1, 0, 3}, {4, 12, 1, 0, 9, 0, 1, 3, 1}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkAgainstReference(t, data) })
}

// TestEvalMatchesReference runs the reference comparison on many generated expressions in
// every `go test`, not only under -fuzz.
func TestEvalMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(15))
	for i := 0; i < 20000; i++ {
		b := make([]byte, 8+rng.Intn(56))
		rng.Read(b)
		checkAgainstReference(t, b)
	}
}

// TestEvalPrecedenceByHand pins the rules the reference printer relies on.
func TestEvalPrecedenceByHand(t *testing.T) {
	for src, want := range map[string]float64{
		"-2^2": -4, "2^-1": 0.5, "2^3^2": 512, "10-4-3": 3, "100/10/5": 2, "2*-3": -6, "- -3": 3,
		"3!!": 720, "sqrt 16": 4, "sqrt(4)^2": 4, "17 % 5": 2, "-7 % 3": -1, "2 × 3": 6,
	} {
		if got, err := Eval(src); err != nil || got != want {
			t.Errorf("Eval(%q) = %v, %v; want %v", src, got, err, want)
		}
	}
}

// ---- percentages in words ----

func TestPercentages(t *testing.T) {
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ in, want string }{
		{"what is 20% of 50", "That's 10."},
		{"15% of 80", "That's 12."},
		{"what is 15 percent of 80", "That's 12."},
		{"what is fifteen per cent of eighty", "That's 12."},
		{"what is 50 percent of 20 percent of 80", "That's 8."},
		{"20% of 50 plus 10", "That's 20."},
		{"what is 20%", "That's 0.2."},
		{"17 % 5", "That's 2."}, // modulo: a number follows
		{"17%5", "That's 2."},
		{"17 mod 5", "That's 2."},
		{"what is the percent change from 40 to 50", "From 40 to 50 is an increase of 25%."},
		{"percentage change from 50 to 40", "From 50 to 40 is a decrease of 20%."},
		{"what's the percent increase between 200 and 250", "From 200 to 250 is an increase of 25%."},
		{"percent change from 0 to 5", "not defined"},
		{"percent change from 30 to 30", "no change"},
		{"increase 80 by 15%", "80 plus 15% is 92."},
		{"decrease 80 by 15 percent", "80 minus 15% is 68."},
		{"80 plus 15%", "80 plus 15% is 92."},
		{"80+15%", "80 plus 15% is 92."},
		{"80 minus 15%", "80 minus 15% is 68."},
		{"what is 10 percent more than 200", "200 plus 10% is 220."},
		{"20% off 50 dollars", "$50 minus 20% is $40."},
		{"what percent is 15 of 60", "15 is 25% of 60."},
		{"15 is what percent of 60", "15 is 25% of 60."},
		{"what percent of 60 is 15", "15 is 25% of 60."},
		{"3 out of 8 as a percentage", "3 is 37.5% of 8."},
		{"tip of 18% on 45 dollars", "An 18% tip on $45 is $8.10, for a total of $53.10."},
		{"what's a 20 percent tip on $60", "A 20% tip on $60 is $12, for a total of $72."},
		{"15 percent tip on 42.50", "A 15% tip on 42.50 is 6.38, for a total of 48.88."},
		{"an eight percent tip on 20", "An 8% tip on 20 is 1.60, for a total of 21.60."},
		{"how much should I tip on 80 dollars", "On $80, a 15% tip is $12, 18% is $14.40 and 20% is $16."},
		{"百分之二十乘以五十", "等于10。"},
		{"五十的百分之二十是多少", "等于10。"},
	} {
		r, err := e.Handle(context.Background(), tt.in)
		if err != nil || r.Intent != "math" || !strings.Contains(r.Text, tt.want) {
			t.Errorf("Handle(%q) = %q (intent %q, %v); want %q", tt.in, r.Text, r.Intent, err, tt.want)
		}
	}
}

// TestPercentagesAgainstReference says random percentages every way the skills accept and
// checks the spoken figure against arithmetic done here.
func TestPercentagesAgainstReference(t *testing.T) {
	e, _ := New(Options{})
	rng := rand.New(rand.NewSource(5))
	say := func(v float64) string { return FormatNumber(roundNice(v)) }
	for i := 0; i < 500; i++ {
		p := float64(rng.Intn(200)) + float64(rng.Intn(4))*0.25
		a := float64(1+rng.Intn(5000)) / float64([]int{1, 1, 10, 100}[rng.Intn(4)])
		b := float64(1+rng.Intn(5000)) / 10
		n := FormatNumber
		cases := []struct{ in, want string }{
			{n(p) + "% of " + n(a), "That's " + say(p/100*a) + "."},
			{"what is " + n(p) + " percent of " + n(a), "That's " + say(p/100*a) + "."},
			{"increase " + n(a) + " by " + n(p) + "%", " is " + say(a*(1+p/100)) + "."},
			{"decrease " + n(a) + " by " + n(p) + "%", " is " + say(a*(1-p/100)) + "."},
			{"what percent is " + n(a) + " of " + n(b), " is " + say(a/b*100) + "% of "},
			{"tip of " + n(p) + "% on " + n(a) + " dollars", " is " + moneyText(a*p/100, true) + ", for a total of " + moneyText(a+a*p/100, true) + "."},
		}
		c := (b - a) / a * 100
		change := "an increase of " + say(c) + "%"
		if c < 0 {
			change = "a decrease of " + say(-c) + "%"
		} else if c == 0 {
			change = "no change"
		}
		cases = append(cases, struct{ in, want string }{"percent change from " + n(a) + " to " + n(b), change})
		for _, tt := range cases {
			r, _ := e.Handle(context.Background(), tt.in)
			if !strings.Contains(r.Text, tt.want) {
				t.Fatalf("Handle(%q) = %q; want %q", tt.in, r.Text, tt.want)
			}
		}
	}
}

// FuzzPercentUtterance: whatever is said around a percentage, no panic, and a reply that
// states a number for "P% of A".
func FuzzPercentUtterance(f *testing.F) {
	for _, s := range []string{"what is 20% of 50", "tip of 18% on 45 dollars", "percent change from 40 to 50",
		"increase 80 by 15%", "17 % 5", "% of %", "20%%", "百分之", "50的百分之", "tip tip 5%", "-5% of -3"} {
		f.Add(s, 20.0, 50.0)
	}
	f.Fuzz(func(t *testing.T, s string, p, a float64) {
		e, _ := New(Options{})
		e.Handle(context.Background(), s)
		if math.IsNaN(p) || math.IsNaN(a) || math.Abs(p) > 1e6 || math.Abs(a) > 1e6 || p < 0 || a < 0 {
			return
		}
		p, a = math.Round(p*100)/100, math.Round(a*100)/100
		q := FormatNumber(p) + "% of " + FormatNumber(a)
		r, _ := e.Handle(context.Background(), q)
		want := "That's " + FormatNumber(roundNice(p/100*a)) + "."
		if r.Text != want {
			t.Fatalf("Handle(%q) = %q, want %q", q, r.Text, want)
		}
	})
}
