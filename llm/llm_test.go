package llm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func runThink(parts []string) (content, reasoning string) {
	var f ThinkFilter
	var c, r strings.Builder
	for _, p := range parts {
		a, b := f.Push(p)
		c.WriteString(a)
		r.WriteString(b)
	}
	a, b := f.Flush()
	c.WriteString(a)
	r.WriteString(b)
	return c.String(), r.String()
}

func TestThinkFilter(t *testing.T) {
	tests := []struct {
		name         string
		parts        []string
		content, rsn string
	}{
		{"whole", []string{"<think>plan it</think>\n\nHello."}, "Hello.", "plan it"},
		{"split tags", []string{"<th", "ink>pl", "an</thi", "nk>", "\n", "Hel", "lo."}, "Hello.", "plan"},
		{"rune by rune", strings.Split("<think>a<b</think> Hi <there>", ""), "Hi <there>", "a<b"},
		{"no think", []string{"Just ", "an answer <", "3"}, "Just an answer <3", ""},
		{"unclosed", []string{"<think>still thinking"}, "", "still thinking"},
		{"lone close", []string{"answer</think>"}, "answer</think>", ""},
		{"two blocks", []string{"<think>x</think>A <think>y</think>B"}, "A B", "xy"},
		{"partial at end", []string{"Hello <thi"}, "Hello <thi", ""},
	}
	for _, tt := range tests {
		c, r := runThink(tt.parts)
		if c != tt.content || r != tt.rsn {
			t.Errorf("%s: content %q reasoning %q; want %q %q", tt.name, c, r, tt.content, tt.rsn)
		}
	}
}

func FuzzThinkFilter(f *testing.F) {
	f.Add("<think>x</think>y", 3)
	f.Add("a<thin</think><think>", 1)
	f.Fuzz(func(t *testing.T, s string, step int) {
		if step <= 0 || step > 16 {
			step = 1
		}
		var parts []string
		for i := 0; i < len(s); i += step {
			parts = append(parts, s[i:min(i+step, len(s))])
		}
		c1, r1 := runThink(parts)
		c2, r2 := runThink([]string{s})
		if c1 != c2 || r1 != r2 {
			t.Fatalf("split %q: %q/%q, whole %q/%q", parts, c1, r1, c2, r2)
		}
		if len(c1)+len(r1) > len(s) {
			t.Fatalf("output longer than input")
		}
	})
}

func TestPersonaAndListener(t *testing.T) {
	s := Persona{Spoken: true, Language: "zh", Tools: true}.System()
	for _, want := range []string{"Parley", "markdown", "Chinese", "<tool_result>"} {
		if !strings.Contains(s, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, s)
		}
	}
	if got := (Listener{}).Context(); got != "" {
		t.Errorf("empty listener: %q", got)
	}
	got := Listener{Language: "yue", Emotion: "SAD", Event: "Cough"}.Context()
	for _, want := range []string{"Cantonese", "sad", "cough"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if got := (Listener{Emotion: "NEUTRAL"}).Context(); got != "" {
		t.Errorf("neutral listener: %q", got)
	}
	// any case; the languages a model may be asked to reply in beyond SenseVoice's; others as they are
	for code, want := range map[string]string{"EN": "English", "de": "German", "ru": "Russian", "xx": "xx", "Zh-TW": "Zh-TW"} {
		if s := (Persona{Language: code}).System(); !strings.HasSuffix(s, "Always reply in "+want+".") {
			t.Errorf("Persona{Language: %q}: %q", code, s[strings.LastIndex(s, "\n")+1:])
		}
		if got := (Listener{Language: code}).Context(); !strings.Contains(got, "speaks "+want+".") {
			t.Errorf("Listener{Language: %q}: %q", code, got)
		}
	}
}

func TestConversationBudget(t *testing.T) {
	c := &Conversation{System: "sys", Budget: 200}
	for i := 0; i < 20; i++ {
		c.Add(Message{Role: RoleUser, Content: fmt.Sprintf("question number %d about something long enough", i)},
			Message{Role: RoleAssistant, Content: fmt.Sprintf("answer number %d with some words in it", i)})
	}
	msgs := c.Prompt(Listener{Language: "en"})
	total := 0
	for _, m := range msgs {
		total += messageTokens(m, EstimateTokens)
	}
	if total > 200 {
		t.Errorf("prompt of %d tokens exceeds budget 200", total)
	}
	if msgs[0].Role != RoleSystem || !strings.Contains(msgs[0].Content, "Summary of the earlier conversation") ||
		!strings.Contains(msgs[0].Content, "speaks English") {
		t.Errorf("system message %q", msgs[0].Content)
	}
	if msgs[1].Role != RoleUser {
		t.Errorf("history must start at a user turn, got %s", msgs[1].Role)
	}
	last := msgs[len(msgs)-1]
	if last.Content != "answer number 19 with some words in it" {
		t.Errorf("newest turn lost: %q", last.Content)
	}
	if !strings.Contains(c.Summary, "answer number") || len([]rune(c.Summary)) > 600 {
		t.Errorf("summary %q", c.Summary)
	}
	// A tool round is trimmed as a whole: no orphan tool message at the start.
	c = &Conversation{Budget: 60}
	c.Add(Message{Role: RoleUser, Content: "what time is it"},
		Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Type: "function", Function: FunctionCall{Name: "get_time", Arguments: "{}"}}}},
		Message{Role: RoleTool, ToolCallID: "1", Content: `{"time":"10:00"}`},
		Message{Role: RoleAssistant, Content: "It is ten."},
		Message{Role: RoleUser, Content: strings.Repeat("long question ", 12)})
	msgs = c.Prompt(Listener{})
	for _, m := range msgs {
		if m.Role == RoleTool {
			t.Errorf("tool message kept without its turn: %+v", msgs)
		}
	}
	if msgs[len(msgs)-1].Role != RoleUser {
		t.Errorf("current question dropped")
	}
}

func TestInterrupted(t *testing.T) {
	c := &Conversation{}
	c.Add(Message{Role: RoleUser, Content: "tell me a story"}, Message{Role: RoleAssistant, Content: "Once upon a time there was a fox. It was red."})
	c.Interrupted("Once upon a time")
	if got := c.Messages[1].Content; !strings.HasPrefix(got, "Once upon a time …") || !strings.Contains(got, "interrupted") {
		t.Errorf("%q", got)
	}
}

func TestEstimateTokens(t *testing.T) {
	if n := EstimateTokens("你好世界"); n != 4 {
		t.Errorf("CJK: %d", n)
	}
	if n := EstimateTokens("abcdefgh"); n != 2 {
		t.Errorf("latin: %d", n)
	}
}

func TestAPIErrorUnwrap(t *testing.T) {
	var err error = &APIError{Status: 404, Message: "model x not found", Kind: ErrModelNotFound}
	if !errors.Is(err, ErrModelNotFound) || !strings.Contains(err.Error(), "404") {
		t.Error(err)
	}
}
