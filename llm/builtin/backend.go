package builtin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/jinja"
)

// Backend is an llm.Backend over one model. It keeps one conversation's KV cache: a request
// whose prompt starts like the previous one (the same conversation, one turn later) reuses
// the keys and values of the shared prefix. Chat calls are serialised.
type Backend struct {
	m    *Model
	tmpl *jinja.Template
	log  *slog.Logger

	mu   sync.Mutex
	seq  *Sequence
	last Stats
}

// NewBackend parses the model's chat template and returns a backend.
func NewBackend(m *Model) (*Backend, error) {
	t, err := jinja.Parse(m.Template)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: chat template: %w", ErrModel, m.Dir, err)
	}
	seq, err := m.NewSequence()
	if err != nil {
		return nil, err
	}
	return &Backend{m: m, tmpl: t, log: m.log, seq: seq}, nil
}

// New opens the model in dir (the engine contract: a model directory and a Config) and returns
// its backend; Close closes both.
func New(dir string, o Config) (*Backend, error) {
	m, err := OpenModel(dir, o)
	if err != nil {
		return nil, err
	}
	b, err := NewBackend(m)
	if err != nil {
		m.Close()
		return nil, err
	}
	return b, nil
}

// Close frees the cache and the model.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq.Close()
	return b.m.Close()
}

// Model returns the loaded model.
func (b *Backend) Model() *Model { return b.m }

// LastStats describes the previous Chat call's generation.
func (b *Backend) LastStats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

func (b *Backend) Name() string { return "builtin" }
func (b *Backend) URL() string  { return b.m.Dir }

// ID is the model's name: its directory's.
func (b *Backend) ID() string { return filepath.Base(b.m.Dir) }

func (b *Backend) Models(context.Context) ([]llm.Model, error) {
	return []llm.Model{{ID: b.ID(), Family: b.m.ModelConfig.ModelType, Context: b.m.Context}}, nil
}

func (b *Backend) Health(context.Context) error { return nil }

// ErrTemplate wraps chat-template rendering failures.
var ErrTemplate = errors.New("builtin: chat template failed")

// Render renders the chat template for msgs and tools and returns the prompt text.
func (b *Backend) Render(msgs []llm.Message, tools []llm.Tool, think *bool) (string, error) {
	vars := map[string]jinja.Value{
		"messages":              messagesValue(msgs),
		"add_generation_prompt": jinja.Bool(true),
		"bos_token":             jinja.Str(b.m.Specials["bos_token"]),
		"eos_token":             jinja.Str(b.m.Specials["eos_token"]),
	}
	if len(tools) > 0 {
		vars["tools"] = toolsValue(tools)
	}
	if think != nil {
		vars["enable_thinking"] = jinja.Bool(*think)
	}
	s, err := b.tmpl.Render(vars)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	return s, nil
}

func clean(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func messagesValue(msgs []llm.Message) jinja.Value {
	var out []jinja.Value
	for _, m := range msgs {
		v := jinja.NewMap()
		v.Set("role", jinja.Str(m.Role))
		v.Set("content", jinja.Str(clean(m.Content)))
		if m.Name != "" {
			v.Set("name", jinja.Str(clean(m.Name)))
		}
		if m.ToolCallID != "" {
			v.Set("tool_call_id", jinja.Str(m.ToolCallID))
		}
		if len(m.ToolCalls) > 0 {
			var calls []jinja.Value
			for _, tc := range m.ToolCalls {
				f := jinja.NewMap()
				f.Set("name", jinja.Str(clean(tc.Function.Name)))
				// Arguments as an object when they parse (templates print them with tojson),
				// else the text as given.
				if a, err := jinja.FromJSON([]byte(tc.Function.Arguments)); err == nil && strings.HasPrefix(strings.TrimSpace(tc.Function.Arguments), "{") {
					f.Set("arguments", a)
				} else {
					f.Set("arguments", jinja.Str(clean(tc.Function.Arguments)))
				}
				c := jinja.NewMap()
				if tc.ID != "" {
					c.Set("id", jinja.Str(tc.ID))
				}
				c.Set("type", jinja.Str("function"))
				c.Set("function", jinja.MapValue(f))
				calls = append(calls, jinja.MapValue(c))
			}
			v.Set("tool_calls", jinja.List(calls...))
		}
		out = append(out, jinja.MapValue(v))
	}
	return jinja.List(out...)
}

func toolsValue(tools []llm.Tool) jinja.Value {
	var out []jinja.Value
	for _, t := range tools {
		// Parameters go through the ordered decoder so the schema keeps its key order.
		f := jinja.NewMap()
		f.Set("name", jinja.Str(t.Function.Name))
		if t.Function.Description != "" {
			f.Set("description", jinja.Str(t.Function.Description))
		}
		if len(t.Function.Parameters) > 0 {
			if p, err := jinja.FromJSON(t.Function.Parameters); err == nil {
				f.Set("parameters", p)
			}
		}
		v := jinja.NewMap()
		v.Set("type", jinja.Str("function"))
		v.Set("function", jinja.MapValue(f))
		out = append(out, jinja.MapValue(v))
	}
	return jinja.List(out...)
}

// prompt renders and tokenizes the conversation, dropping the oldest turns (after any system
// message) until it leaves room for reserve answer tokens. It returns how many messages were
// dropped.
func (b *Backend) prompt(req *llm.Request, reserve int) ([]int, int, error) {
	msgs := req.Messages
	dropped := 0
	for {
		text, err := b.Render(msgs, req.Tools, req.Think)
		if err != nil {
			return nil, 0, err
		}
		ids := b.m.Tokenizer.Encode(text)
		if len(ids)+reserve <= b.m.Context {
			return ids, dropped, nil
		}
		// the oldest turn: from the first non-system message up to the next user message
		start := 0
		for start < len(msgs) && msgs[start].Role == llm.RoleSystem {
			start++
		}
		end := start + 1
		for end < len(msgs) && msgs[end].Role != llm.RoleUser {
			end++
		}
		if end >= len(msgs) {
			return nil, 0, fmt.Errorf("%w: the prompt is %d tokens and the answer needs %d, but the window is %d tokens",
				ErrContext, len(ids), reserve, b.m.Context)
		}
		msgs = append(append([]llm.Message(nil), msgs[:start]...), msgs[end:]...)
		dropped += end - start
	}
}

// Chat implements llm.Backend.
func (b *Backend) Chat(ctx context.Context, req *llm.Request, fn func(llm.Delta) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = min(1024, b.m.Context/4)
	}
	reserve := min(maxTokens, b.m.Context/2)
	ids, dropped, err := b.prompt(req, reserve)
	if err != nil {
		return err
	}
	if dropped > 0 {
		b.log.Warn("builtin llm: conversation longer than the context window; oldest turns left out",
			"dropped_messages", dropped, "window", b.m.Context)
	}
	s := b.sampling(req)
	out := newStream(b.m, req.Stop, fn)
	st, err := b.seq.Generate(ctx, ids, GenOptions{Sampling: s, MaxTokens: maxTokens}, out.push)
	b.last = st
	if err != nil {
		return err
	}
	if out.err != nil {
		return out.err
	}
	finish := llm.FinishStop
	if st.Stopped == "length" || st.Stopped == "context" {
		finish = llm.FinishLength
	}
	return out.finish(finish, &llm.Usage{PromptTokens: st.PromptTokens, CompletionTokens: st.Generated,
		TotalTokens: st.PromptTokens + st.Generated})
}

func (b *Backend) sampling(req *llm.Request) Sampling {
	c := b.m.ModelConfig
	s := Sampling{Temperature: c.Temperature, TopK: c.TopK, TopP: c.TopP, MinP: c.MinP, RepetitionPenalty: c.RepPenalty}
	if s.Temperature == 0 && c.TopK == 0 && c.TopP == 0 {
		s.Temperature = 0.7 // no generation_config.json: a sensible chat default
	}
	if req.Temperature != nil {
		s.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		s.TopP = *req.TopP
	}
	if req.Seed != nil {
		s.Seed = uint64(*req.Seed)
	} else {
		s.Seed = uint64(os.Getpid())<<20 ^ uint64(len(req.Messages))
	}
	return s
}

// FindModel resolves a model spec: a directory, or a model id under the models directory; ""
// picks the first installed model in the onnx-community layout (registry order).
func FindModel(spec string) (string, error) {
	isModel := func(dir string) bool {
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
			return false
		}
		_, err := findModel(dir, "auto")
		return err == nil
	}
	if spec != "" {
		if st, err := os.Stat(spec); err == nil && st.IsDir() {
			if !isModel(spec) {
				return "", fmt.Errorf("%w: %s has no config.json and onnx/model*.onnx", ErrModel, spec)
			}
			return spec, nil
		}
		dir := filepath.Join(assets.ModelsDir(), spec)
		if isModel(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%w: built-in model %q is not installed (`parley models pull %s`)", llm.ErrModelNotFound, spec, spec)
	}
	for _, id := range KnownModels() {
		if dir := filepath.Join(assets.ModelsDir(), id); isModel(dir) {
			return dir, nil
		}
	}
	entries, _ := os.ReadDir(assets.ModelsDir())
	for _, e := range entries {
		if dir := filepath.Join(assets.ModelsDir(), e.Name()); e.IsDir() && isModel(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w: no built-in model installed (`parley models pull %s`)", llm.ErrNoModel, KnownModels()[0])
}

// Installed lists the model ids installed under the models directory that this backend can
// run: the registry's first, then any other directory in the onnx-community layout.
func Installed() []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range KnownModels() {
		if _, err := FindModel(id); err == nil {
			out, seen[id] = append(out, id), true
		}
	}
	entries, _ := os.ReadDir(assets.ModelsDir())
	for _, e := range entries {
		if !e.IsDir() || seen[e.Name()] {
			continue
		}
		dir := filepath.Join(assets.ModelsDir(), e.Name())
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
			continue
		}
		if _, err := findModel(dir, "auto"); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// KnownModels are the registry ids of the models this backend runs, best first.
func KnownModels() []string {
	return []string{"qwen3-0.6b", "qwen2.5-0.5b-instruct"}
}
