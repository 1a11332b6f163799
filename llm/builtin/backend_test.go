package builtin

import (
	"context"
	"errors"
	"github.com/parley-voice/parley/gpu"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/llm"
)

func tinyBackend(t *testing.T, variant string) *Backend {
	t.Helper()
	needORT(t)
	b, err := New(tinyDir, Config{Variant: variant, GPU: gpu.Options{IntraOpThreads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func zero() *float64 { z := 0.0; return &z }

func chat(t *testing.T, b *Backend, req *llm.Request) llm.Delta {
	t.Helper()
	d, err := llm.Collect(context.Background(), b, req)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The second turn of a conversation reuses the cached prefix and answers exactly as a fresh
// cache would.
func TestPrefixReuse(t *testing.T) {
	b := tinyBackend(t, "fp32")
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: "You are Parley."}, {Role: llm.RoleUser, Content: "What time is it?"}}
	first := chat(t, b, &llm.Request{Messages: msgs, MaxTokens: 12, Temperature: zero()})
	if first.Usage == nil || first.Usage.CompletionTokens == 0 {
		t.Fatalf("no usage or no tokens: %+v", first)
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: first.Content}, llm.Message{Role: llm.RoleUser, Content: "And the date?"})
	second := chat(t, b, &llm.Request{Messages: msgs, MaxTokens: 12, Temperature: zero()})
	st := b.LastStats()
	if st.Reused == 0 || st.Reused >= st.PromptTokens {
		t.Errorf("second turn reused %d of %d prompt tokens; want a shared prefix", st.Reused, st.PromptTokens)
	}
	fresh := tinyBackend(t, "fp32")
	again := chat(t, fresh, &llm.Request{Messages: msgs, MaxTokens: 12, Temperature: zero()})
	if fresh.LastStats().Reused != 0 {
		t.Error("a fresh backend reused tokens")
	}
	if again.Content != second.Content || again.Reasoning != second.Reasoning {
		t.Errorf("cached answer %q/%q differs from fresh %q/%q", second.Content, second.Reasoning, again.Content, again.Reasoning)
	}
}

// Seeded sampling repeats; a different seed (almost surely) differs; MaxTokens gives "length".
func TestSamplingSeed(t *testing.T) {
	b := tinyBackend(t, "fp32")
	temp, seed, other := 1.0, 42, 43
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Tell me a story"}}, MaxTokens: 16, Temperature: &temp, Seed: &seed}
	a, c := chat(t, b, req), chat(t, b, req)
	if a.Content+a.Reasoning != c.Content+c.Reasoning {
		t.Errorf("same seed, different answers: %q vs %q", a.Content, c.Content)
	}
	req.Seed = &other
	d := chat(t, b, req)
	if d.Content+d.Reasoning == a.Content+a.Reasoning {
		t.Errorf("seeds 42 and 43 gave the same 16 tokens")
	}
	if a.FinishReason != llm.FinishLength && a.FinishReason != llm.FinishStop {
		t.Errorf("finish %q", a.FinishReason)
	}
}

func TestSamplerProcessors(t *testing.T) {
	logits := func() []float32 { return []float32{1, 5, 3, 4, 2} }
	if id := newSampler(Sampling{}, nil).next(logits()); id != 1 {
		t.Errorf("greedy picked %d", id)
	}
	// top-k 1 is greedy whatever the temperature
	for seed := range uint64(20) {
		if id := newSampler(Sampling{Temperature: 5, TopK: 1, Seed: seed}, nil).next(logits()); id != 1 {
			t.Fatalf("top-k 1 picked %d", id)
		}
	}
	// min-p 0.5 at T=1 keeps only tokens within ln 2 of the best: just 1
	if id := newSampler(Sampling{Temperature: 1, MinP: 0.5, Seed: 3}, nil).next(logits()); id != 1 {
		t.Errorf("min-p picked %d", id)
	}
	// repetition penalty 100 on token 1 (seen) makes 3 the greedy choice
	if id := newSampler(Sampling{RepetitionPenalty: 100}, []int{1}).next(logits()); id != 3 {
		t.Errorf("repetition penalty: picked %d, want 3", id)
	}
	// top-p 0.5: token 1 has about 64% of the mass, so it alone survives
	for seed := range uint64(20) {
		if id := newSampler(Sampling{Temperature: 1, TopP: 0.5, Seed: seed}, nil).next(logits()); id != 1 {
			t.Fatalf("top-p picked %d", id)
		}
	}
}

// feed runs a text through the stream as the model would produce it, token by token.
func feedStream(t *testing.T, b *Backend, text string, stops []string) (llm.Delta, error) {
	t.Helper()
	var all llm.Delta
	s := newStream(b.m, stops, func(d llm.Delta) error {
		all.Content += d.Content
		all.Reasoning += d.Reasoning
		all.ToolCalls = append(all.ToolCalls, d.ToolCalls...)
		if d.FinishReason != "" {
			all.FinishReason = d.FinishReason
		}
		return nil
	})
	for _, id := range b.m.Tokenizer.Encode(text) {
		if err := s.push(id); err != nil {
			if err == ErrStop {
				break
			}
			return all, err
		}
	}
	return all, s.finish(llm.FinishStop, nil)
}

func TestStreamToolCallsThinkStops(t *testing.T) {
	b := tinyBackend(t, "fp32")
	d, err := feedStream(t, b, "<think>\nThe user wants the time.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"Europe/Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"set_timer\", \"arguments\": \"{\\\"seconds\\\": 5}\"}\n</tool_call><|im_end|>", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Reasoning != "\nThe user wants the time.\n" || d.Content != "Let me check.\n" {
		t.Errorf("reasoning %q content %q", d.Reasoning, d.Content)
	}
	if len(d.ToolCalls) != 2 || d.ToolCalls[0].Function.Name != "get_time" || d.ToolCalls[0].Function.Arguments != `{"zone": "Europe/Paris"}` ||
		d.ToolCalls[1].Function.Arguments != `{"seconds": 5}` || d.FinishReason != llm.FinishToolCalls {
		t.Errorf("tool calls %+v finish %q", d.ToolCalls, d.FinishReason)
	}
	d, err = feedStream(t, b, "Hello there. STOP here and never this", []string{"STOP"})
	if err != nil || d.Content != "Hello there. " {
		t.Errorf("stop string: %q %v", d.Content, err)
	}
	d, err = feedStream(t, b, "<tool_call>not json</tool_call> ok", nil)
	if err != nil || !strings.Contains(d.Content, "not json") || len(d.ToolCalls) != 0 {
		t.Errorf("bad tool call kept as text: %+v %v", d, err)
	}
}

// Cancelling the context stops generation within a step.
func TestCancel(t *testing.T) {
	b := tinyBackend(t, "fp32")
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := b.Chat(ctx, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "go on"}}, MaxTokens: 500, Temperature: zero()},
		func(d llm.Delta) error {
			n++
			if n == 3 {
				cancel()
			}
			return nil
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if got := b.LastStats().Generated; got > 10 {
		t.Errorf("generated %d tokens after cancel", got)
	}
	// the backend still works afterwards
	chat(t, b, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, MaxTokens: 4, Temperature: zero()})
}

// A conversation longer than the window loses its oldest turns; a single turn that cannot fit
// is a clear error; invalid UTF-8 in a turn is replaced, not fatal.
func TestContextAndBadInput(t *testing.T) {
	needORT(t)
	b, err := New(tinyDir, Config{Variant: "fp32", GPU: gpu.Options{IntraOpThreads: 1}, Context: 160})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var msgs []llm.Message
	for i := range 8 {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: strings.Repeat("word ", 10) + string(rune('a'+i))},
			llm.Message{Role: llm.RoleAssistant, Content: "fine"})
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: "last \xff\xfe question"})
	d := chat(t, b, &llm.Request{Messages: msgs, MaxTokens: 8, Temperature: zero()})
	if d.Usage.PromptTokens+8 > 160 {
		t.Errorf("prompt %d tokens does not leave room in a 160-token window", d.Usage.PromptTokens)
	}
	_, err = llm.Collect(context.Background(), b, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: strings.Repeat("long ", 400)}}, MaxTokens: 8})
	if !errors.Is(err, ErrContext) {
		t.Errorf("oversized turn: %v, want ErrContext", err)
	}
}

// copyTiny copies the tiny model so a test can break it.
func copyTiny(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(tinyDir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tinyDir, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestBadModels(t *testing.T) {
	needORT(t)
	t.Run("missing external data", func(t *testing.T) {
		dir := copyTiny(t)
		os.Remove(filepath.Join(dir, "onnx", "model.onnx_data"))
		_, err := OpenModel(dir, Config{Variant: "fp32"})
		if !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "model.onnx_data") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("kv shapes disagree with config", func(t *testing.T) {
		dir := copyTiny(t)
		cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(strings.Replace(string(cfg), `"head_dim": 32`, `"head_dim": 64`, 1)), 0o644)
		_, err := OpenModel(dir, Config{Variant: "fp32"})
		if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "head dim") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("other layout", func(t *testing.T) {
		dir := copyTiny(t)
		sv, err := os.ReadFile(filepath.Join("..", "..", "testdata", "sensevoice", "tiny", "model.onnx"))
		if err != nil {
			t.Skip(err)
		}
		os.WriteFile(filepath.Join(dir, "onnx", "model_q4.onnx"), sv, 0o644)
		_, err = OpenModel(dir, Config{Variant: "q4"})
		if !errors.Is(err, ErrLayout) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("got %v", err)
		}
		t.Log(err)
	})
	t.Run("template fails to render", func(t *testing.T) {
		dir := copyTiny(t)
		os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("{{ raise_exception('no tools here') if tools else messages[0].content }}"), 0o644)
		b, err := New(dir, Config{Variant: "fp32", GPU: gpu.Options{IntraOpThreads: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		_, err = llm.Collect(context.Background(), b, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
			Tools: []llm.Tool{{Type: "function", Function: llm.FunctionDef{Name: "x"}}}})
		if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "no tools here") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("broken template", func(t *testing.T) {
		dir := copyTiny(t)
		os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("{% if %}"), 0o644)
		if _, err := New(dir, Config{Variant: "fp32"}); !errors.Is(err, ErrModel) {
			t.Errorf("got %v", err)
		}
	})
}
