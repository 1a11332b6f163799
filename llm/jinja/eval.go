package jinja

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// ErrRender is wrapped by errors raised while rendering (including raise_exception).
var ErrRender = errors.New("jinja: render error")

// maxOutput bounds a render, so a runaway template cannot exhaust memory.
const maxOutput = 64 << 20

type scope struct {
	vars   map[string]Value
	parent *scope
}

func (s *scope) get(n string) (Value, bool) {
	for x := s; x != nil; x = x.parent {
		if v, ok := x.vars[n]; ok {
			return v, true
		}
	}
	return undefined, false
}

type loopCtl int

const (
	ctlNone loopCtl = iota
	ctlBreak
	ctlContinue
)

type renderer struct {
	out   strings.Builder
	steps int
	now   func() time.Time
}

// Render renders the template with the given variables (values from FromJSON, Str, …).
func (t *Template) Render(vars map[string]Value) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrRender, r)
		}
	}()
	r := &renderer{now: time.Now}
	sc := &scope{vars: map[string]Value{}}
	for k, v := range globals(r) {
		sc.vars[k] = v
	}
	for k, v := range vars {
		sc.vars[k] = v
	}
	if _, err := r.nodes(t.body, sc); err != nil {
		return "", err
	}
	return r.out.String(), nil
}

func globals(r *renderer) map[string]Value {
	return map[string]Value{
		"namespace": fn(func(args []Value, kw *Map) (Value, error) {
			m := NewMap()
			m.ns = true
			for _, a := range args {
				if a.k == kMap {
					for _, k := range a.m.Keys {
						m.Set(k, a.m.Vals[k])
					}
				}
			}
			if kw != nil {
				for _, k := range kw.Keys {
					m.Set(k, kw.Vals[k])
				}
			}
			return MapValue(m), nil
		}),
		"raise_exception": fn(func(args []Value, _ *Map) (Value, error) {
			msg := "raise_exception called"
			if len(args) > 0 {
				msg = args[0].String()
			}
			return undefined, fmt.Errorf("%w: %s", ErrRender, msg)
		}),
		"range": fn(func(args []Value, _ *Map) (Value, error) {
			var a [3]int64
			a[2] = 1
			switch len(args) {
			case 1:
				a[1] = args[0].i
			case 2, 3:
				a[0], a[1] = args[0].i, args[1].i
				if len(args) == 3 {
					a[2] = args[2].i
				}
			default:
				return undefined, fmt.Errorf("%w: range takes 1 to 3 arguments", ErrRender)
			}
			if a[2] == 0 {
				return undefined, fmt.Errorf("%w: range step is zero", ErrRender)
			}
			var l []Value
			for i := a[0]; (a[2] > 0 && i < a[1]) || (a[2] < 0 && i > a[1]); i += a[2] {
				if len(l) > 1<<20 {
					return undefined, fmt.Errorf("%w: range too long", ErrRender)
				}
				l = append(l, Int(i))
			}
			return Value{k: kList, list: &l}, nil
		}),
		"strftime_now": fn(func(args []Value, _ *Map) (Value, error) {
			if len(args) != 1 || args[0].k != kStr {
				return undefined, fmt.Errorf("%w: strftime_now takes a format string", ErrRender)
			}
			return Str(strftime(r.now(), args[0].s)), nil
		}),
	}
}

func (r *renderer) nodes(ns []node, sc *scope) (loopCtl, error) {
	for _, n := range ns {
		r.steps++
		if r.steps > 10_000_000 || r.out.Len() > maxOutput {
			return ctlNone, fmt.Errorf("%w: template too expensive", ErrRender)
		}
		switch n := n.(type) {
		case textNode:
			r.out.WriteString(n.s)
		case outputNode:
			v, err := r.eval(n.e, sc)
			if err != nil {
				return ctlNone, err
			}
			r.out.WriteString(v.String())
		case ifNode:
			done := false
			for i, c := range n.conds {
				v, err := r.eval(c, sc)
				if err != nil {
					return ctlNone, err
				}
				if v.truthy() {
					if ctl, err := r.nodes(n.bodies[i], sc); err != nil || ctl != ctlNone {
						return ctl, err
					}
					done = true
					break
				}
			}
			if !done && n.els != nil {
				if ctl, err := r.nodes(n.els, sc); err != nil || ctl != ctlNone {
					return ctl, err
				}
			}
		case forNode:
			if err := r.loop(n, sc); err != nil {
				return ctlNone, err
			}
		case setNode:
			if err := r.set(n, sc); err != nil {
				return ctlNone, err
			}
		case breakNode:
			return ctlBreak, nil
		case continueNode:
			return ctlContinue, nil
		}
	}
	return ctlNone, nil
}

func (r *renderer) set(n setNode, sc *scope) error {
	var v Value
	if n.body != nil {
		inner := &renderer{now: r.now}
		if _, err := inner.nodes(n.body, sc); err != nil {
			return err
		}
		v = Str(inner.out.String())
	} else {
		var err error
		if v, err = r.eval(n.e, sc); err != nil {
			return err
		}
	}
	switch t := n.target.(type) {
	case nameExpr:
		if len(n.names) > 1 {
			items, err := iterate(v)
			if err != nil {
				return err
			}
			if len(items) != len(n.names) {
				return fmt.Errorf("%w: cannot unpack %d values into %d names", ErrRender, len(items), len(n.names))
			}
			for i, name := range n.names {
				sc.vars[name] = items[i]
			}
			return nil
		}
		sc.vars[t.name] = v
	case attrExpr:
		obj, err := r.eval(t.obj, sc)
		if err != nil {
			return err
		}
		if obj.k != kMap || !obj.m.ns {
			return fmt.Errorf("%w: cannot set attribute %s on %s (only a namespace())", ErrRender, t.name, obj.typeName())
		}
		obj.m.Set(t.name, v)
	default:
		return fmt.Errorf("%w: bad set target", ErrRender)
	}
	return nil
}

func iterate(v Value) ([]Value, error) {
	switch v.k {
	case kList:
		return *v.list, nil
	case kMap:
		out := make([]Value, len(v.m.Keys))
		for i, k := range v.m.Keys {
			out[i] = Str(k)
		}
		return out, nil
	case kStr:
		var out []Value
		for _, c := range v.s {
			out = append(out, Str(string(c)))
		}
		return out, nil
	case kUndef, kNone:
		return nil, nil
	}
	return nil, fmt.Errorf("%w: cannot iterate over %s", ErrRender, v.typeName())
}

func (r *renderer) loop(n forNode, sc *scope) error {
	it, err := r.eval(n.iter, sc)
	if err != nil {
		return err
	}
	items, err := iterate(it)
	if err != nil {
		return err
	}
	if n.cond != nil {
		var kept []Value
		for _, x := range items {
			inner := &scope{vars: map[string]Value{}, parent: sc}
			if err := bind(inner, n.vars, x); err != nil {
				return err
			}
			c, err := r.eval(n.cond, inner)
			if err != nil {
				return err
			}
			if c.truthy() {
				kept = append(kept, x)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		if n.els != nil {
			_, err := r.nodes(n.els, sc)
			return err
		}
		return nil
	}
	for i, x := range items {
		inner := &scope{vars: map[string]Value{}, parent: sc}
		if err := bind(inner, n.vars, x); err != nil {
			return err
		}
		l := NewMap()
		l.Set("index", Int(int64(i+1)))
		l.Set("index0", Int(int64(i)))
		l.Set("revindex", Int(int64(len(items)-i)))
		l.Set("revindex0", Int(int64(len(items)-i-1)))
		l.Set("first", Bool(i == 0))
		l.Set("last", Bool(i == len(items)-1))
		l.Set("length", Int(int64(len(items))))
		prev, nxt := undefined, undefined
		if i > 0 {
			prev = items[i-1]
		}
		if i+1 < len(items) {
			nxt = items[i+1]
		}
		l.Set("previtem", prev)
		l.Set("nextitem", nxt)
		inner.vars["loop"] = MapValue(l)
		ctl, err := r.nodes(n.body, inner)
		if err != nil {
			return err
		}
		if ctl == ctlBreak {
			break
		}
	}
	return nil
}

func bind(sc *scope, names []string, v Value) error {
	if len(names) == 1 {
		sc.vars[names[0]] = v
		return nil
	}
	items, err := iterate(v)
	if err != nil {
		return err
	}
	if len(items) != len(names) {
		return fmt.Errorf("%w: cannot unpack %d values into %d loop variables", ErrRender, len(items), len(names))
	}
	for i, n := range names {
		sc.vars[n] = items[i]
	}
	return nil
}

func (r *renderer) evalArgs(args []expr, kw []kwArg, sc *scope) ([]Value, *Map, error) {
	vals := make([]Value, len(args))
	for i, a := range args {
		v, err := r.eval(a, sc)
		if err != nil {
			return nil, nil, err
		}
		vals[i] = v
	}
	var m *Map
	if len(kw) > 0 {
		m = NewMap()
		for _, k := range kw {
			v, err := r.eval(k.e, sc)
			if err != nil {
				return nil, nil, err
			}
			m.Set(k.name, v)
		}
	}
	return vals, m, nil
}

func (r *renderer) eval(e expr, sc *scope) (Value, error) {
	switch e := e.(type) {
	case litExpr:
		return e.v, nil
	case nameExpr:
		v, _ := sc.get(e.name)
		return v, nil
	case listExpr:
		l := make([]Value, 0, len(e.items))
		for _, x := range e.items {
			v, err := r.eval(x, sc)
			if err != nil {
				return undefined, err
			}
			l = append(l, v)
		}
		return Value{k: kList, list: &l}, nil
	case dictExpr:
		m := NewMap()
		for i := range e.keys {
			k, err := r.eval(e.keys[i], sc)
			if err != nil {
				return undefined, err
			}
			v, err := r.eval(e.vals[i], sc)
			if err != nil {
				return undefined, err
			}
			m.Set(k.String(), v)
		}
		return MapValue(m), nil
	case attrExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return undefined, err
		}
		return member(obj, e.name)
	case indexExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return undefined, err
		}
		idx, err := r.eval(e.idx, sc)
		if err != nil {
			return undefined, err
		}
		return index(obj, idx)
	case sliceExpr:
		obj, err := r.eval(e.obj, sc)
		if err != nil {
			return undefined, err
		}
		var p [3]*int64
		for i, x := range []expr{e.start, e.stop, e.stp} {
			if x == nil {
				continue
			}
			v, err := r.eval(x, sc)
			if err != nil {
				return undefined, err
			}
			if v.k == kInt {
				n := v.i
				p[i] = &n
			}
		}
		return slice(obj, p)
	case callExpr:
		f, err := r.eval(e.fn, sc)
		if err != nil {
			return undefined, err
		}
		if f.k != kFunc {
			return undefined, fmt.Errorf("%w: %s is not callable", ErrRender, describe(e.fn))
		}
		args, kw, err := r.evalArgs(e.args, e.kw, sc)
		if err != nil {
			return undefined, err
		}
		return f.fn(args, kw)
	case filterExpr:
		v, err := r.eval(e.obj, sc)
		if err != nil {
			return undefined, err
		}
		args, kw, err := r.evalArgs(e.args, e.kw, sc)
		if err != nil {
			return undefined, err
		}
		return filter(e.name, v, args, kw)
	case testExpr:
		v, err := r.eval(e.obj, sc)
		if err != nil {
			return undefined, err
		}
		args, _, err := r.evalArgs(e.args, nil, sc)
		if err != nil {
			return undefined, err
		}
		ok, err := test(e.name, v, args)
		if err != nil {
			return undefined, err
		}
		return Bool(ok != e.neg), nil
	case condExpr:
		c, err := r.eval(e.cond, sc)
		if err != nil {
			return undefined, err
		}
		if c.truthy() {
			return r.eval(e.yes, sc)
		}
		return r.eval(e.no, sc)
	case unaryExpr:
		v, err := r.eval(e.e, sc)
		if err != nil {
			return undefined, err
		}
		switch e.op {
		case "not":
			return Bool(!v.truthy()), nil
		case "-":
			switch v.k {
			case kInt:
				return Int(-v.i), nil
			case kFloat:
				return Float(-v.f), nil
			}
			return undefined, fmt.Errorf("%w: cannot negate %s", ErrRender, v.typeName())
		}
	case binExpr:
		return r.binary(e, sc)
	}
	return undefined, fmt.Errorf("%w: unknown expression %T", ErrRender, e)
}

func describe(e expr) string {
	switch e := e.(type) {
	case nameExpr:
		return e.name
	case attrExpr:
		return describe(e.obj) + "." + e.name
	}
	return "expression"
}

func (r *renderer) binary(e binExpr, sc *scope) (Value, error) {
	l, err := r.eval(e.l, sc)
	if err != nil {
		return undefined, err
	}
	switch e.op {
	case "and":
		if !l.truthy() {
			return l, nil
		}
		return r.eval(e.r, sc)
	case "or":
		if l.truthy() {
			return l, nil
		}
		return r.eval(e.r, sc)
	}
	rv, err := r.eval(e.r, sc)
	if err != nil {
		return undefined, err
	}
	switch e.op {
	case "==":
		return Bool(equal(l, rv)), nil
	case "!=":
		return Bool(!equal(l, rv)), nil
	case "~":
		return Str(l.String() + rv.String()), nil
	case "in":
		switch rv.k {
		case kStr:
			if l.k != kStr {
				return undefined, fmt.Errorf("%w: 'in <string>' needs a string on the left, not %s", ErrRender, l.typeName())
			}
			return Bool(strings.Contains(rv.s, l.s)), nil
		case kList:
			return Bool(slices.ContainsFunc(*rv.list, func(x Value) bool { return equal(x, l) })), nil
		case kMap:
			_, ok := rv.m.Vals[l.String()]
			return Bool(ok && l.k == kStr), nil
		case kUndef, kNone:
			return Bool(false), nil
		}
		return undefined, fmt.Errorf("%w: 'in' on %s", ErrRender, rv.typeName())
	case "+":
		switch {
		case l.k == kStr && rv.k == kStr:
			return Str(l.s + rv.s), nil
		case l.k == kList && rv.k == kList:
			return List(append(append([]Value(nil), *l.list...), *rv.list...)...), nil
		case l.k == kStr || rv.k == kStr:
			if l.k == kUndef || rv.k == kUndef {
				return undefined, fmt.Errorf("%w: cannot add %s and %s", ErrRender, l.typeName(), rv.typeName())
			}
			return Str(l.String() + rv.String()), nil
		}
	}
	if isNum(l) && isNum(rv) {
		if l.k == kInt && rv.k == kInt {
			a, b := l.i, rv.i
			switch e.op {
			case "+":
				return Int(a + b), nil
			case "-":
				return Int(a - b), nil
			case "*":
				return Int(a * b), nil
			case "/":
				if b == 0 {
					return undefined, fmt.Errorf("%w: division by zero", ErrRender)
				}
				return Float(float64(a) / float64(b)), nil
			case "//":
				if b == 0 {
					return undefined, fmt.Errorf("%w: division by zero", ErrRender)
				}
				return Int(int64(math.Floor(float64(a) / float64(b)))), nil
			case "%":
				if b == 0 {
					return undefined, fmt.Errorf("%w: modulo by zero", ErrRender)
				}
				m := a % b
				if m != 0 && (m < 0) != (b < 0) {
					m += b
				}
				return Int(m), nil
			case "<":
				return Bool(a < b), nil
			case ">":
				return Bool(a > b), nil
			case "<=":
				return Bool(a <= b), nil
			case ">=":
				return Bool(a >= b), nil
			}
		}
		a, b := num(l), num(rv)
		switch e.op {
		case "+":
			return Float(a + b), nil
		case "-":
			return Float(a - b), nil
		case "*":
			return Float(a * b), nil
		case "/":
			return Float(a / b), nil
		case "<":
			return Bool(a < b), nil
		case ">":
			return Bool(a > b), nil
		case "<=":
			return Bool(a <= b), nil
		case ">=":
			return Bool(a >= b), nil
		}
	}
	if l.k == kStr && rv.k == kStr {
		switch e.op {
		case "<":
			return Bool(l.s < rv.s), nil
		case ">":
			return Bool(l.s > rv.s), nil
		case "<=":
			return Bool(l.s <= rv.s), nil
		case ">=":
			return Bool(l.s >= rv.s), nil
		}
	}
	if l.k == kStr && rv.k == kInt && e.op == "*" {
		return Str(strings.Repeat(l.s, int(max(0, min(rv.i, 1<<20))))), nil
	}
	return undefined, fmt.Errorf("%w: unsupported %s %s %s", ErrRender, l.typeName(), e.op, rv.typeName())
}

func isNum(v Value) bool { return v.k == kInt || v.k == kFloat }
func num(v Value) float64 {
	if v.k == kInt {
		return float64(v.i)
	}
	return v.f
}

func equal(a, b Value) bool {
	if isNum(a) && isNum(b) {
		return num(a) == num(b)
	}
	if a.k != b.k {
		return false
	}
	switch a.k {
	case kUndef, kNone:
		return true
	case kBool:
		return a.b == b.b
	case kStr:
		return a.s == b.s
	case kList:
		return slices.EqualFunc(*a.list, *b.list, equal)
	case kMap:
		if len(a.m.Keys) != len(b.m.Keys) {
			return false
		}
		for _, k := range a.m.Keys {
			bv, ok := b.m.Vals[k]
			if !ok || !equal(a.m.Vals[k], bv) {
				return false
			}
		}
		return true
	}
	return false
}

func index(obj, idx Value) (Value, error) {
	switch obj.k {
	case kList:
		if idx.k != kInt {
			return undefined, fmt.Errorf("%w: list index must be an integer, not %s", ErrRender, idx.typeName())
		}
		i := idx.i
		if i < 0 {
			i += int64(len(*obj.list))
		}
		if i < 0 || i >= int64(len(*obj.list)) {
			return undefined, nil
		}
		return (*obj.list)[i], nil
	case kStr:
		if idx.k != kInt {
			return undefined, fmt.Errorf("%w: string index must be an integer", ErrRender)
		}
		rs := []rune(obj.s)
		i := idx.i
		if i < 0 {
			i += int64(len(rs))
		}
		if i < 0 || i >= int64(len(rs)) {
			return undefined, nil
		}
		return Str(string(rs[i])), nil
	case kMap:
		return member(obj, idx.String())
	case kUndef, kNone:
		return undefined, fmt.Errorf("%w: cannot index %s", ErrRender, obj.typeName())
	}
	return undefined, fmt.Errorf("%w: cannot index %s", ErrRender, obj.typeName())
}

func slice(obj Value, p [3]*int64) (Value, error) {
	var n int
	switch obj.k {
	case kList:
		n = len(*obj.list)
	case kStr:
		n = utf8.RuneCountInString(obj.s)
	default:
		return undefined, fmt.Errorf("%w: cannot slice %s", ErrRender, obj.typeName())
	}
	step := int64(1)
	if p[2] != nil {
		step = *p[2]
	}
	if step == 0 {
		return undefined, fmt.Errorf("%w: slice step is zero", ErrRender)
	}
	norm := func(x *int64, def int64) int64 {
		if x == nil {
			return def
		}
		v := *x
		if v < 0 {
			v += int64(n)
		}
		if step > 0 {
			return max(0, min(v, int64(n)))
		}
		return max(-1, min(v, int64(n)-1))
	}
	var idx []int
	if step > 0 {
		for i := norm(p[0], 0); i < norm(p[1], int64(n)); i += step {
			idx = append(idx, int(i))
		}
	} else {
		for i := norm(p[0], int64(n)-1); i > norm(p[1], -1); i += step {
			idx = append(idx, int(i))
		}
	}
	if obj.k == kList {
		out := make([]Value, len(idx))
		for k, i := range idx {
			out[k] = (*obj.list)[i]
		}
		return Value{k: kList, list: &out}, nil
	}
	rs := []rune(obj.s)
	var b strings.Builder
	for _, i := range idx {
		b.WriteRune(rs[i])
	}
	return Str(b.String()), nil
}

func isJSSpace(r rune) bool {
	return unicode.IsSpace(r) || r == '\ufeff'
}

func member(obj Value, name string) (Value, error) {
	switch obj.k {
	case kMap:
		if v, ok := obj.m.Vals[name]; ok {
			return v, nil
		}
		switch name {
		case "items":
			return fn(func([]Value, *Map) (Value, error) {
				var l []Value
				for _, k := range obj.m.Keys {
					l = append(l, List(Str(k), obj.m.Vals[k]))
				}
				return List(l...), nil
			}), nil
		case "keys":
			return fn(func([]Value, *Map) (Value, error) {
				var l []Value
				for _, k := range obj.m.Keys {
					l = append(l, Str(k))
				}
				return List(l...), nil
			}), nil
		case "values":
			return fn(func([]Value, *Map) (Value, error) {
				var l []Value
				for _, k := range obj.m.Keys {
					l = append(l, obj.m.Vals[k])
				}
				return List(l...), nil
			}), nil
		case "get":
			return fn(func(args []Value, _ *Map) (Value, error) {
				if len(args) == 0 {
					return undefined, fmt.Errorf("%w: get needs a key", ErrRender)
				}
				if v, ok := obj.m.Vals[args[0].String()]; ok {
					return v, nil
				}
				if len(args) > 1 {
					return args[1], nil
				}
				return none, nil
			}), nil
		}
		return undefined, nil
	case kStr:
		return stringMethod(obj.s, name)
	case kList:
		if name == "append" {
			return fn(func(args []Value, _ *Map) (Value, error) {
				*obj.list = append(*obj.list, args...)
				return none, nil
			}), nil
		}
		return undefined, nil
	case kUndef:
		return undefined, fmt.Errorf("%w: cannot read attribute %q of undefined", ErrRender, name)
	case kNone:
		return undefined, fmt.Errorf("%w: cannot read attribute %q of none", ErrRender, name)
	}
	return undefined, nil
}

func strArg(args []Value, i int) (string, bool) {
	if i < len(args) && args[i].k == kStr {
		return args[i].s, true
	}
	return "", false
}

func stringMethod(s, name string) (Value, error) {
	strip := func(f func(string, string) string, g func(string, func(rune) bool) string) Value {
		return fn(func(args []Value, _ *Map) (Value, error) {
			if chars, ok := strArg(args, 0); ok {
				return Str(f(s, chars)), nil
			}
			return Str(g(s, isJSSpace)), nil
		})
	}
	switch name {
	case "strip":
		return strip(strings.Trim, strings.TrimFunc), nil
	case "lstrip":
		return strip(strings.TrimLeft, strings.TrimLeftFunc), nil
	case "rstrip":
		return strip(strings.TrimRight, strings.TrimRightFunc), nil
	case "upper":
		return fn(func([]Value, *Map) (Value, error) { return Str(strings.ToUpper(s)), nil }), nil
	case "lower":
		return fn(func([]Value, *Map) (Value, error) { return Str(strings.ToLower(s)), nil }), nil
	case "title":
		return fn(func([]Value, *Map) (Value, error) { return Str(title(s)), nil }), nil
	case "capitalize":
		return fn(func([]Value, *Map) (Value, error) { return Str(capitalize(s)), nil }), nil
	case "startswith", "endswith":
		return fn(func(args []Value, _ *Map) (Value, error) {
			var prefixes []string
			if len(args) > 0 && args[0].k == kList {
				for _, x := range *args[0].list {
					prefixes = append(prefixes, x.String())
				}
			} else if p, ok := strArg(args, 0); ok {
				prefixes = []string{p}
			} else {
				return undefined, fmt.Errorf("%w: %s needs a string", ErrRender, name)
			}
			for _, p := range prefixes {
				if (name == "startswith" && strings.HasPrefix(s, p)) || (name == "endswith" && strings.HasSuffix(s, p)) {
					return Bool(true), nil
				}
			}
			return Bool(false), nil
		}), nil
	case "split":
		return fn(func(args []Value, _ *Map) (Value, error) {
			var parts []string
			sep, ok := strArg(args, 0)
			limit := -1
			if len(args) > 1 && args[1].k == kInt {
				limit = int(args[1].i)
			}
			if !ok {
				parts = strings.FieldsFunc(s, isJSSpace)
			} else if sep == "" {
				return undefined, fmt.Errorf("%w: empty separator", ErrRender)
			} else if limit >= 0 {
				parts = strings.SplitN(s, sep, limit+1)
			} else {
				parts = strings.Split(s, sep)
			}
			l := make([]Value, len(parts))
			for i, p := range parts {
				l[i] = Str(p)
			}
			return Value{k: kList, list: &l}, nil
		}), nil
	case "replace":
		return fn(func(args []Value, _ *Map) (Value, error) {
			a, ok1 := strArg(args, 0)
			b, ok2 := strArg(args, 1)
			if !ok1 || !ok2 {
				return undefined, fmt.Errorf("%w: replace needs two strings", ErrRender)
			}
			n := -1
			if len(args) > 2 && args[2].k == kInt {
				n = int(args[2].i)
			}
			return Str(strings.Replace(s, a, b, n)), nil
		}), nil
	case "count":
		return fn(func(args []Value, _ *Map) (Value, error) {
			a, _ := strArg(args, 0)
			return Int(int64(strings.Count(s, a))), nil
		}), nil
	case "find":
		return fn(func(args []Value, _ *Map) (Value, error) {
			a, _ := strArg(args, 0)
			i := strings.Index(s, a)
			if i >= 0 {
				i = utf8.RuneCountInString(s[:i])
			}
			return Int(int64(i)), nil
		}), nil
	}
	return undefined, nil
}

func title(s string) string {
	var b strings.Builder
	prev := ' '
	for _, r := range s {
		if unicode.IsSpace(prev) || !unicode.IsLetter(prev) && !unicode.IsDigit(prev) {
			b.WriteRune(unicode.ToUpper(r))
		} else {
			b.WriteRune(unicode.ToLower(r))
		}
		prev = r
	}
	return b.String()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + strings.ToLower(s[n:])
}

func length(v Value) (int, error) {
	switch v.k {
	case kStr:
		return utf8.RuneCountInString(v.s), nil
	case kList:
		return len(*v.list), nil
	case kMap:
		return len(v.m.Keys), nil
	case kUndef:
		return 0, nil
	}
	return 0, fmt.Errorf("%w: %s has no length", ErrRender, v.typeName())
}

func filter(name string, v Value, args []Value, kw *Map) (Value, error) {
	switch name {
	case "safe":
		return v, nil
	case "tojson":
		indent := ""
		if kw != nil {
			if iv, ok := kw.Get("indent"); ok && iv.k == kInt {
				indent = strings.Repeat(" ", int(iv.i))
			}
		}
		if len(args) > 0 && args[0].k == kInt {
			indent = strings.Repeat(" ", int(args[0].i))
		}
		return Str(toJSON(v, indent, 0, true)), nil
	case "length", "count":
		n, err := length(v)
		return Int(int64(n)), err
	case "string":
		return Str(v.String()), nil
	case "trim":
		if v.k != kStr {
			return undefined, fmt.Errorf("%w: trim on %s", ErrRender, v.typeName())
		}
		return Str(strings.TrimFunc(v.s, isJSSpace)), nil
	case "upper", "lower", "title", "capitalize":
		if v.k != kStr {
			return undefined, fmt.Errorf("%w: %s on %s", ErrRender, name, v.typeName())
		}
		m, _ := stringMethod(v.s, name)
		return m.fn(nil, nil)
	case "replace":
		if v.k != kStr {
			return undefined, fmt.Errorf("%w: replace on %s", ErrRender, v.typeName())
		}
		m, _ := stringMethod(v.s, "replace")
		return m.fn(args, nil)
	case "default", "d":
		if v.k == kUndef || (len(args) > 1 && args[1].truthy() && !v.truthy()) {
			if len(args) > 0 {
				return args[0], nil
			}
			return Str(""), nil
		}
		return v, nil
	case "first", "last":
		items, err := iterate(v)
		if err != nil || len(items) == 0 {
			return undefined, err
		}
		if name == "first" {
			return items[0], nil
		}
		return items[len(items)-1], nil
	case "list":
		items, err := iterate(v)
		return List(items...), err
	case "reverse":
		if v.k == kStr {
			rs := []rune(v.s)
			slices.Reverse(rs)
			return Str(string(rs)), nil
		}
		items, err := iterate(v)
		out := append([]Value(nil), items...)
		slices.Reverse(out)
		return List(out...), err
	case "join":
		items, err := iterate(v)
		if err != nil {
			return undefined, err
		}
		sep, _ := strArg(args, 0)
		parts := make([]string, len(items))
		for i, x := range items {
			parts[i] = x.String()
		}
		return Str(strings.Join(parts, sep)), nil
	case "items":
		if v.k != kMap {
			return undefined, fmt.Errorf("%w: items on %s", ErrRender, v.typeName())
		}
		m, _ := member(v, "items")
		return m.fn(nil, nil)
	case "int":
		switch v.k {
		case kInt:
			return v, nil
		case kFloat:
			return Int(int64(v.f)), nil
		case kStr:
			var n int64
			_, err := fmt.Sscan(strings.TrimSpace(v.s), &n)
			if err != nil {
				return Int(0), nil
			}
			return Int(n), nil
		}
		return Int(0), nil
	case "abs":
		if v.k == kInt {
			return Int(max(v.i, -v.i)), nil
		}
		return Float(math.Abs(num(v))), nil
	case "indent":
		if v.k != kStr {
			return undefined, fmt.Errorf("%w: indent on %s", ErrRender, v.typeName())
		}
		w := 4
		if len(args) > 0 && args[0].k == kInt {
			w = int(args[0].i)
		}
		pad := strings.Repeat(" ", w)
		lines := strings.Split(v.s, "\n")
		for i := 1; i < len(lines); i++ {
			if lines[i] != "" {
				lines[i] = pad + lines[i]
			}
		}
		return Str(strings.Join(lines, "\n")), nil
	case "map":
		items, err := iterate(v)
		if err != nil {
			return undefined, err
		}
		var attr Value
		ok := false
		if kw != nil {
			attr, ok = kw.Get("attribute")
		}
		if !ok {
			return undefined, fmt.Errorf("%w: map needs attribute=", ErrRender)
		}
		out := make([]Value, len(items))
		for i, x := range items {
			if out[i], err = member(x, attr.String()); err != nil {
				return undefined, err
			}
		}
		return List(out...), nil
	case "selectattr", "rejectattr":
		items, err := iterate(v)
		if err != nil {
			return undefined, err
		}
		attr, _ := strArg(args, 0)
		var out []Value
		for _, x := range items {
			a, err := member(x, attr)
			if err != nil {
				return undefined, err
			}
			keep := a.truthy()
			if len(args) > 1 {
				if keep, err = test(args[1].String(), a, args[2:]); err != nil {
					return undefined, err
				}
			}
			if keep == (name == "selectattr") {
				out = append(out, x)
			}
		}
		return List(out...), nil
	}
	return undefined, fmt.Errorf("%w: unknown filter %q", ErrRender, name)
}

func test(name string, v Value, args []Value) (bool, error) {
	switch name {
	case "defined":
		return v.k != kUndef, nil
	case "undefined":
		return v.k == kUndef, nil
	case "none":
		return v.k == kNone, nil
	case "string":
		return v.k == kStr, nil
	case "number":
		return isNum(v), nil
	case "integer":
		return v.k == kInt, nil
	case "float":
		return v.k == kFloat, nil
	case "boolean":
		return v.k == kBool, nil
	case "true":
		return v.k == kBool && v.b, nil
	case "false":
		return v.k == kBool && !v.b, nil
	case "mapping":
		return v.k == kMap, nil
	case "sequence", "iterable":
		return v.k == kList || v.k == kStr || (name == "iterable" && v.k == kMap), nil
	case "callable":
		return v.k == kFunc, nil
	case "odd", "even":
		if v.k != kInt {
			return false, fmt.Errorf("%w: %s on %s", ErrRender, name, v.typeName())
		}
		return (v.i%2 != 0) == (name == "odd"), nil
	case "equalto", "eq", "==":
		return len(args) > 0 && equal(v, args[0]), nil
	case "ne", "!=":
		return len(args) > 0 && !equal(v, args[0]), nil
	case "divisibleby":
		if v.k != kInt || len(args) == 0 || args[0].k != kInt || args[0].i == 0 {
			return false, fmt.Errorf("%w: divisibleby needs integers", ErrRender)
		}
		return v.i%args[0].i == 0, nil
	case "lower":
		return v.k == kStr && strings.ToLower(v.s) == v.s, nil
	case "upper":
		return v.k == kStr && strings.ToUpper(v.s) == v.s, nil
	}
	return false, fmt.Errorf("%w: unknown test %q", ErrRender, name)
}

// strftime formats t with the C directives chat templates use.
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'p':
			b.WriteString(t.Format("PM"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}
