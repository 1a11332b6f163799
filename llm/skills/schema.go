package skills

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// schema is the subset of JSON Schema the tools use; validate checks model-supplied arguments
// against it so a bad call becomes a clear error for the model instead of a wrong action.
type schema struct {
	Type                 string             `json:"type"`
	Description          string             `json:"description,omitempty"`
	Properties           map[string]*schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	Enum                 []any              `json:"enum,omitempty"`
	Minimum              *float64           `json:"minimum,omitempty"`
	Maximum              *float64           `json:"maximum,omitempty"`
	MinLength            *int               `json:"minLength,omitempty"`
	MaxLength            *int               `json:"maxLength,omitempty"`
	Pattern              string             `json:"pattern,omitempty"`
	AdditionalProperties *bool              `json:"additionalProperties,omitempty"`

	re *regexp.Regexp
}

func mustSchema(s string) *schema {
	var sc schema
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		panic("skills: bad built-in schema: " + err.Error())
	}
	sc.compile()
	return &sc
}

func (s *schema) compile() {
	if s.Pattern != "" {
		s.re = regexp.MustCompile(s.Pattern)
	}
	for _, p := range s.Properties {
		p.compile()
	}
}

// maxArgs caps the arguments of one tool call.
const maxArgs = 16 << 10

// parseArgs decodes and validates tool-call arguments (JSON text) against s.
func (s *schema) parseArgs(args string) (map[string]any, error) {
	args = strings.TrimSpace(args)
	if args == "" || args == "null" {
		args = "{}"
	}
	if len(args) > maxArgs {
		return nil, fmt.Errorf("arguments longer than %d bytes", maxArgs)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(args)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("arguments hold more than one JSON value")
	}
	if err := s.validate("arguments", v); err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

func (s *schema) validate(path string, v any) error {
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s must be an object", path)
		}
		for _, r := range s.Required {
			if _, ok := m[r]; !ok {
				return fmt.Errorf("%s.%s is required", path, r)
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, ok := s.Properties[k]
			if !ok {
				if s.AdditionalProperties != nil && !*s.AdditionalProperties {
					return fmt.Errorf("%s.%s is not a known parameter", path, k)
				}
				continue
			}
			if err := p.validate(path+"."+k, m[k]); err != nil {
				return err
			}
		}
		return nil
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s must be a string", path)
		}
		n := len([]rune(str))
		if s.MinLength != nil && n < *s.MinLength {
			return fmt.Errorf("%s must have at least %d characters", path, *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			return fmt.Errorf("%s must have at most %d characters", path, *s.MaxLength)
		}
		if s.re != nil && !s.re.MatchString(str) {
			return fmt.Errorf("%s must match %s", path, s.Pattern)
		}
		return s.checkEnum(path, str)
	case "integer", "number":
		num, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s must be a %s", path, s.Type)
		}
		f, err := num.Float64()
		if err != nil {
			return fmt.Errorf("%s must be a %s", path, s.Type)
		}
		if s.Type == "integer" {
			if _, err := num.Int64(); err != nil {
				return fmt.Errorf("%s must be a whole number", path)
			}
		}
		if s.Minimum != nil && f < *s.Minimum {
			return fmt.Errorf("%s must be at least %v", path, *s.Minimum)
		}
		if s.Maximum != nil && f > *s.Maximum {
			return fmt.Errorf("%s must be at most %v", path, *s.Maximum)
		}
		return nil
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s must be true or false", path)
		}
		return nil
	}
	return nil
}

func (s *schema) checkEnum(path, v string) error {
	if len(s.Enum) == 0 {
		return nil
	}
	var names []string
	for _, e := range s.Enum {
		if e == v {
			return nil
		}
		names = append(names, fmt.Sprint(e))
	}
	return fmt.Errorf("%s must be one of %s", path, strings.Join(names, ", "))
}
