package jinja

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/llm/internal/peer"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json from @huggingface/jinja")

type testCase struct {
	Template string          `json:"template"`
	Vars     json.RawMessage `json:"vars"`
}

func loadCases(t *testing.T) ([]testCase, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []testCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases, data
}

// render renders one case; errors come back as {"error": …} like the peer script's.
func render(c testCase) (string, error) {
	tmpl, err := Parse(c.Template)
	if err != nil {
		return "", err
	}
	v, err := FromJSON(c.Vars)
	if err != nil {
		return "", err
	}
	vars := map[string]Value{}
	for _, k := range v.m.Keys {
		vars[k] = v.m.Vals[k]
	}
	return tmpl.Render(vars)
}

func compare(t *testing.T, cases []testCase, want []json.RawMessage, who string) {
	t.Helper()
	if len(want) != len(cases) {
		t.Fatalf("%d results from %s for %d cases", len(want), who, len(cases))
	}
	for i, c := range cases {
		got, err := render(c)
		var s string
		if json.Unmarshal(want[i], &s) != nil {
			if err == nil {
				t.Errorf("case %d: rendered %q, %s failed with %s", i, got, who, want[i])
			}
			continue
		}
		if err != nil {
			t.Errorf("case %d: %v; %s rendered %q", i, err, who, s)
			continue
		}
		if got != s {
			t.Errorf("case %d (%s):\n got %q\nwant %q", i, who, got, s)
		}
	}
}

// TestGolden: every case renders string-for-string as @huggingface/jinja rendered it
// (regenerate: go test ./llm/jinja -run TestPeer -update).
func TestGolden(t *testing.T) {
	cases, _ := loadCases(t)
	data, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want []json.RawMessage
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	compare(t, cases, want, "the committed golden")
}

func TestPeer(t *testing.T) {
	cases, data := loadCases(t)
	script, err := os.ReadFile(filepath.Join("testdata", "peer_render.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := peer.Node(ctx, string(script), data)
	if errors.Is(err, peer.ErrAbsent) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var want []json.RawMessage
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	if *update {
		pretty, _ := json.MarshalIndent(want, "", " ")
		if err := os.WriteFile(filepath.Join("testdata", "golden.json"), append(pretty, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	compare(t, cases, want, "@huggingface/jinja")
}

// TestLlama3Peer renders the Llama 3 template shipped with the peers' @lenml package.
func TestLlama3Peer(t *testing.T) {
	dir, err := peer.Dir()
	if err != nil {
		t.Skip(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "node_modules", "@lenml", "tokenizer-llama3_1", "models", "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	vars := `{"bos_token": "<|begin_of_text|>", "add_generation_prompt": true, "messages": [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi\n"}, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}]}`
	cases := []testCase{{Template: cfg.ChatTemplate, Vars: json.RawMessage(vars)}}
	in, _ := json.Marshal(cases)
	script, _ := os.ReadFile(filepath.Join("testdata", "peer_render.mjs"))
	out, err := peer.Node(context.Background(), string(script), in)
	if err != nil {
		t.Fatal(err)
	}
	var want []json.RawMessage
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	compare(t, cases, want, "@huggingface/jinja (Llama 3)")
}

func TestErrors(t *testing.T) {
	for _, src := range []string{"{% if %}", "{{ 'unterminated }}", "{% for x in %}{% endfor %}", "{% if x %}no end", "{{ a.b }}", "{% bogus %}", "{{ x | nofilter }}", "{{ 1 / 0 }}"} {
		tmpl, err := Parse(src)
		if err == nil {
			_, err = tmpl.Render(map[string]Value{"x": Int(1)})
		}
		if err == nil {
			t.Errorf("%q: no error", src)
		} else if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRender) {
			t.Errorf("%q: %v wraps neither ErrSyntax nor ErrRender", src, err)
		}
	}
}

// Nesting is bounded: the parser recurses once per level, and a template of a few million
// "(" overflowed the goroutine stack (a fatal error, not a panic). Deep nesting is a syntax
// error; the depth real templates use parses.
func TestNestingIsBounded(t *testing.T) {
	const n = 1 << 16
	for name, src := range map[string]string{
		"parentheses": "{{ " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + " }}",
		"lists":       "{{ " + strings.Repeat("[", n) + strings.Repeat("]", n) + " }}",
		"not":         "{{ " + strings.Repeat("not ", n) + "x }}",
		"minus":       "{{ " + strings.Repeat("- ", n) + "1 }}",
		"ternaries":   "{{ " + strings.Repeat("1 if x else ", n) + "2 }}",
		"blocks":      strings.Repeat("{% if x %}", n) + strings.Repeat("{% endif %}", n),
	} {
		if _, err := Parse(src); !errors.Is(err, ErrSyntax) {
			t.Errorf("%s nested %d deep: %v, want ErrSyntax", name, n, err)
		}
	}
	deep := strings.Repeat("{% if x %}", 20) + "{{ " + strings.Repeat("(", 100) + "-1" + strings.Repeat(")", 100) + " }}" + strings.Repeat("{% endif %}", 20)
	tmpl, err := Parse(deep)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tmpl.Render(map[string]Value{"x": Bool(true)}); err != nil || got != "-1" {
		t.Errorf("20 blocks and 100 parentheses: %q, %v", got, err)
	}
}

func FuzzRender(f *testing.F) {
	q, _ := os.ReadFile(filepath.Join("..", "..", "train", "llm", "qwen3_chat_template.jinja"))
	f.Add(string(q), `{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":true}`)
	f.Add("{% for a, b in x.items() %}{{ a ~ b | tojson }}{% endfor %}", `{"x":{"k":[1,2]}}`)
	f.Add("{{ s[::-2] }}{% set n = namespace(v=1) %}{{ n.v * 3 }}", `{"s":"héllo"}`)
	f.Fuzz(func(t *testing.T, src, vars string) {
		if len(src) > 4096 || strings.Contains(src, "range") {
			return
		}
		tmpl, err := Parse(src)
		if err != nil {
			return
		}
		v, err := FromJSON([]byte(vars))
		if err != nil || v.k != kMap {
			return
		}
		m := map[string]Value{}
		for _, k := range v.m.Keys {
			m[k] = v.m.Vals[k]
		}
		_, _ = tmpl.Render(m)
	})
}
