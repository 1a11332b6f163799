package builtin

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/parley-voice/parley/llm"
)

const (
	toolOpen  = "<tool_call>"
	toolClose = "</tool_call>"
)

// stream turns generated tokens into deltas: UTF-8-safe decoding, stop strings, the
// <think> split (llm.ThinkFilter) and Qwen's <tool_call>{json}</tool_call> blocks, which
// become llm.ToolCalls on the final delta.
type stream struct {
	m       *Model
	dec     interface{ Push(int) string }
	flush   func() string
	stops   []string
	fn      func(llm.Delta) error
	think   llm.ThinkFilter
	held    string // raw text held back: a possible stop-string prefix
	content string // content held back: a possible <tool_call> prefix or an open call
	calls   []llm.ToolCall
	stopped bool
	err     error
}

func newStream(m *Model, stops []string, fn func(llm.Delta) error) *stream {
	d := m.Tokenizer.NewDecoder(true)
	var nonEmpty []string
	for _, s := range stops {
		if s != "" {
			nonEmpty = append(nonEmpty, s)
		}
	}
	return &stream{m: m, dec: d, flush: d.Flush, stops: nonEmpty, fn: fn}
}

// push takes one token; it returns ErrStop at a stop string.
func (s *stream) push(id int) error {
	text := s.dec.Push(id)
	if text == "" {
		return nil
	}
	return s.raw(text, false)
}

func (s *stream) raw(text string, final bool) error {
	text = s.held + text
	s.held = ""
	for _, stop := range s.stops {
		if i := strings.Index(text, stop); i >= 0 {
			s.stopped = true
			if err := s.emit(text[:i]); err != nil {
				return err
			}
			return ErrStop
		}
	}
	if !final {
		keep := 0
		for _, stop := range s.stops {
			keep = max(keep, partialSuffix(text, stop))
		}
		s.held = text[len(text)-keep:]
		text = text[:len(text)-keep]
	}
	return s.emit(text)
}

func (s *stream) emit(text string) error {
	c, r := s.think.Push(text)
	if r != "" {
		if err := s.send(llm.Delta{Reasoning: r}); err != nil {
			return err
		}
	}
	return s.contentText(c, false)
}

// contentText passes answer text on, cutting out tool-call blocks.
func (s *stream) contentText(c string, final bool) error {
	c = s.content + c
	s.content = ""
	var out strings.Builder
	for c != "" {
		i := strings.Index(c, toolOpen)
		if i < 0 {
			keep := 0
			if !final {
				keep = partialSuffix(c, toolOpen)
			}
			out.WriteString(c[:len(c)-keep])
			s.content = c[len(c)-keep:]
			break
		}
		out.WriteString(c[:i])
		rest := c[i+len(toolOpen):]
		j := strings.Index(rest, toolClose)
		if j < 0 {
			if final {
				s.parseCall(rest) // an unclosed call at the end: take what is there
			} else {
				s.content = c[i:]
			}
			break
		}
		s.parseCall(rest[:j])
		c = rest[j+len(toolClose):]
	}
	if out.Len() == 0 {
		return nil
	}
	text := out.String()
	if len(s.calls) > 0 && strings.TrimSpace(text) == "" {
		return nil // whitespace between calls
	}
	return s.send(llm.Delta{Content: text})
}

func (s *stream) parseCall(body string) {
	var call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &call); err != nil || call.Name == "" {
		// Not a call we can run: say it as text rather than lose it.
		s.send(llm.Delta{Content: toolOpen + body + toolClose})
		return
	}
	args := strings.TrimSpace(string(call.Arguments))
	if args == "" || args == "null" {
		args = "{}"
	}
	var str string
	if json.Unmarshal(call.Arguments, &str) == nil {
		args = str // arguments given as a JSON string
	}
	s.calls = append(s.calls, llm.ToolCall{ID: fmt.Sprintf("call_%d", len(s.calls)+1), Type: "function",
		Function: llm.FunctionCall{Name: call.Name, Arguments: args}})
}

func (s *stream) send(d llm.Delta) error {
	if s.err != nil {
		return s.err
	}
	if err := s.fn(d); err != nil {
		s.err = err
		return err
	}
	return nil
}

// finish flushes everything held back and sends the final delta.
func (s *stream) finish(reason string, usage *llm.Usage) error {
	if !s.stopped {
		if err := s.raw(s.flush(), true); err != nil && err != ErrStop {
			return err
		}
	}
	c, r := s.think.Flush()
	if r != "" {
		if err := s.send(llm.Delta{Reasoning: r}); err != nil {
			return err
		}
	}
	if err := s.contentText(c, true); err != nil {
		return err
	}
	d := llm.Delta{FinishReason: reason, Usage: usage}
	if len(s.calls) > 0 {
		d.ToolCalls, d.FinishReason = s.calls, llm.FinishToolCalls
	}
	return s.send(d)
}

// partialSuffix is the length of the longest suffix of s that is a proper prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(tag)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
