// Package jinja renders the Jinja chat templates that ship in Hugging Face tokenizer configs,
// string-for-string as @huggingface/jinja (what transformers.js uses) renders them: the
// subset those templates use (if/for/set/macro-free statements, namespaces, filters, tests,
// string and dict methods, slicing), with trim_blocks and lstrip_blocks on.
package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Kinds of values.
type kind int

const (
	kUndef kind = iota
	kNone
	kBool
	kInt
	kFloat
	kStr
	kList
	kMap
	kFunc
)

// Value is a template value. Maps keep their keys' insertion order, as JavaScript objects do.
type Value struct {
	k    kind
	b    bool
	i    int64
	f    float64
	s    string
	list *[]Value
	m    *Map
	fn   func(args []Value, kw *Map) (Value, error)
}

// Map is an insertion-ordered string-keyed map.
type Map struct {
	Keys []string
	Vals map[string]Value
	ns   bool // a namespace(): attributes may be assigned
}

// NewMap returns an empty map.
func NewMap() *Map { return &Map{Vals: map[string]Value{}} }

// Set adds or replaces a key.
func (m *Map) Set(k string, v Value) {
	if _, ok := m.Vals[k]; !ok {
		m.Keys = append(m.Keys, k)
	}
	m.Vals[k] = v
}

// Get returns a key's value (undefined when absent).
func (m *Map) Get(k string) (Value, bool) {
	v, ok := m.Vals[k]
	return v, ok
}

var undefined = Value{k: kUndef}
var none = Value{k: kNone}

// Str, Int, Bool, List and MapValue build values.
func Str(s string) Value      { return Value{k: kStr, s: s} }
func Int(i int64) Value       { return Value{k: kInt, i: i} }
func Float(f float64) Value   { return Value{k: kFloat, f: f} }
func Bool(b bool) Value       { return Value{k: kBool, b: b} }
func List(vs ...Value) Value  { l := append([]Value(nil), vs...); return Value{k: kList, list: &l} }
func MapValue(m *Map) Value   { return Value{k: kMap, m: m} }
func None() Value             { return none }
func Undefined() Value        { return undefined }
func (v Value) IsUndef() bool { return v.k == kUndef }

func fn(f func(args []Value, kw *Map) (Value, error)) Value { return Value{k: kFunc, fn: f} }

// FromJSON converts JSON text to a Value, keeping object key order. Numbers that are whole
// become integers, as JavaScript's Number.isInteger decides for @huggingface/jinja.
func FromJSON(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readJSON(dec)
	if err != nil {
		return undefined, err
	}
	if dec.More() {
		return undefined, fmt.Errorf("jinja: trailing data after JSON value")
	}
	return v, nil
}

func readJSON(dec *json.Decoder) (Value, error) {
	t, err := dec.Token()
	if err != nil {
		return undefined, err
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '[':
			var l []Value
			for dec.More() {
				v, err := readJSON(dec)
				if err != nil {
					return undefined, err
				}
				l = append(l, v)
			}
			if _, err := dec.Token(); err != nil {
				return undefined, err
			}
			return Value{k: kList, list: &l}, nil
		case '{':
			m := NewMap()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return undefined, err
				}
				k, _ := kt.(string)
				v, err := readJSON(dec)
				if err != nil {
					return undefined, err
				}
				m.Set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return undefined, err
			}
			return MapValue(m), nil
		}
	case string:
		return Str(x), nil
	case bool:
		return Bool(x), nil
	case nil:
		return none, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return undefined, err
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return Int(int64(f)), nil
		}
		return Float(f), nil
	}
	return undefined, fmt.Errorf("jinja: unexpected JSON token %v", t)
}

func (v Value) truthy() bool {
	switch v.k {
	case kBool:
		return v.b
	case kInt:
		return v.i != 0
	case kFloat:
		return v.f != 0
	case kStr:
		return v.s != ""
	case kList:
		return len(*v.list) > 0
	case kMap:
		return len(v.m.Keys) > 0
	case kFunc:
		return true
	}
	return false
}

func (v Value) typeName() string {
	return [...]string{"undefined", "none", "boolean", "integer", "float", "string", "list", "object", "function"}[v.k]
}

// String renders v as {{ v }} prints it.
func (v Value) String() string {
	switch v.k {
	case kUndef:
		return ""
	case kNone:
		return "" // as @huggingface/jinja prints null
	case kBool:
		return strconv.FormatBool(v.b) // @huggingface/jinja prints JavaScript's true/false
	case kInt:
		return strconv.FormatInt(v.i, 10)
	case kFloat:
		s := jsNumber(v.f)
		if !strings.ContainsAny(s, ".eEIN") {
			s += ".0"
		}
		return s
	case kStr:
		return v.s
	case kList, kMap:
		return toJSON(v, "", 0, true)
	}
	return "[function]"
}

// jsNumber formats a float as JavaScript's Number#toString does.
func jsNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	a := math.Abs(f)
	if a != 0 && (a >= 1e21 || a < 1e-6) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		e, _ := strconv.Atoi(exp)
		sign := "+"
		if e < 0 {
			sign = "-"
			e = -e
		}
		return mant + "e" + sign + strconv.Itoa(e)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// toJSON is @huggingface/jinja's tojson: ", " and ": " separators without indent.
func toJSON(v Value, indent string, depth int, undefToNull bool) string {
	item, key := ", ", ": "
	if indent != "" {
		item = ","
	}
	switch v.k {
	case kUndef:
		if undefToNull {
			return "null"
		}
		return "undefined"
	case kNone:
		return "null"
	case kBool:
		return strconv.FormatBool(v.b)
	case kInt:
		return strconv.FormatInt(v.i, 10)
	case kFloat:
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) {
			return "null"
		}
		return jsNumber(v.f)
	case kStr:
		return jsonString(v.s)
	case kList, kMap:
		base := "\n" + strings.Repeat(indent, depth)
		child := base + indent
		var parts []string
		if v.k == kList {
			for _, x := range *v.list {
				parts = append(parts, toJSON(x, indent, depth+1, undefToNull))
			}
			if indent != "" && len(parts) > 0 {
				return "[" + child + strings.Join(parts, item+child) + base + "]"
			}
			return "[" + strings.Join(parts, item) + "]"
		}
		for _, k := range v.m.Keys {
			p := jsonString(k) + key + toJSON(v.m.Vals[k], indent, depth+1, undefToNull)
			if indent != "" {
				p = child + p
			}
			parts = append(parts, p)
		}
		if indent != "" && len(parts) > 0 {
			return "{" + strings.Join(parts, item) + base + "}"
		}
		return "{" + strings.Join(parts, item) + "}"
	}
	return "null"
}

// jsonString is JSON.stringify for a string: only quotes, backslashes and control characters
// are escaped (not <, >, & or non-ASCII).
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else if utf16.IsSurrogate(r) {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
