// Package llm is Parley's brain-facing layer: a small streaming chat Backend interface with
// OpenAI-compatible message and tool types, conversation shaping (persona, context budget,
// listener hints) and a streaming-safe filter for <think>…</think> reasoning blocks.
//
// Concrete backends live in sub-packages (llm/openai, llm/ollama), discovery of local servers
// in llm/discover, the sentence chunker for TTS in llm/chunk, offline skills in llm/skills and
// the turn loop (backend or skills, tools, caps) in llm/brain.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Roles of chat messages (OpenAI names).
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Finish reasons (OpenAI names; Ollama's done_reason values map onto them).
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
	FinishCancelled = "cancelled" // ours: the caller stopped the stream
	FinishTimeout   = "timeout"   // ours: the wall-clock cap ended the stream
)

// Message is one chat message in OpenAI's shape.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a model's request to run a function. Arguments is JSON text, as OpenAI sends it.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool describes a function the model may call (OpenAI "tools" entry).
type Tool struct {
	Type     string      `json:"type"` // "function"
	Function FunctionDef `json:"function"`
}

// FunctionDef is a tool's name, description and JSON-schema parameters.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Request is one streaming chat call.
type Request struct {
	Model       string
	Messages    []Message
	Tools       []Tool
	MaxTokens   int      // 0: server default
	Temperature *float64 // nil: server default
	TopP        *float64
	Seed        *int
	Stop        []string // stop strings (the built-in backend honours them)
	// Think asks reasoning models to think (Ollama "think"); nil leaves the server default.
	Think *bool
}

// Usage counts tokens as the server reports them.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Delta is one piece of a streamed answer. Content is the spoken answer; Reasoning is kept
// apart (reasoning/reasoning_content/thinking fields). ToolCalls are delivered complete
// (assembled from their fragments) on the delta that carries FinishReason. Usage arrives when
// the server sends it, usually on the last delta.
type Delta struct {
	Content      string
	Reasoning    string
	ToolCalls    []ToolCall
	FinishReason string
	Usage        *Usage
}

// Model is one model a backend can serve.
type Model struct {
	ID      string `json:"id"`
	Size    int64  `json:"size,omitempty"`
	Family  string `json:"family,omitempty"`
	Context int    `json:"context,omitempty"`
}

// Backend is a chat server. Chat streams deltas to fn until the answer ends, fn returns an
// error, or ctx is cancelled; in the last two cases the connection is closed so the server
// stops generating. Chat returns nil after a clean end of stream.
type Backend interface {
	Name() string // "openai", "ollama", … for display
	URL() string  // base URL, for display
	Chat(ctx context.Context, req *Request, fn func(Delta) error) error
	Models(ctx context.Context) ([]Model, error)
	Health(ctx context.Context) error
}

// Sentinel errors. Backends wrap them (errors.Is works) inside *APIError or with %w.
var (
	ErrUnreachable   = errors.New("llm: server unreachable")
	ErrModelNotFound = errors.New("llm: model not found")
	ErrAuth          = errors.New("llm: not authorised")
	ErrBadStream     = errors.New("llm: malformed stream")
	ErrTruncated     = errors.New("llm: stream ended early")
	ErrServer        = errors.New("llm: server error")
	ErrStalled       = errors.New("llm: stream stalled")
	ErrNoModel       = errors.New("llm: no model configured or available")
)

// APIError is an error reported by the server, as an HTTP status or a mid-stream error frame.
type APIError struct {
	Status  int    // HTTP status; 0 for a mid-stream error frame
	Type    string // OpenAI error.type
	Code    string // OpenAI error.code
	Message string
	Kind    error // one of the sentinels above
}

func (e *APIError) Error() string {
	s := "llm: server"
	if e.Status != 0 {
		s += fmt.Sprintf(" status %d", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Unwrap makes errors.Is(err, ErrModelNotFound) and friends work.
func (e *APIError) Unwrap() error { return e.Kind }

// Collect runs a chat call and gathers the whole answer: content, reasoning, tool calls,
// the finish reason and usage.
func Collect(ctx context.Context, b Backend, req *Request) (Delta, error) {
	var all Delta
	var content, reasoning strings.Builder
	err := b.Chat(ctx, req, func(d Delta) error {
		content.WriteString(d.Content)
		reasoning.WriteString(d.Reasoning)
		all.ToolCalls = append(all.ToolCalls, d.ToolCalls...)
		if d.FinishReason != "" {
			all.FinishReason = d.FinishReason
		}
		if d.Usage != nil {
			all.Usage = d.Usage
		}
		return nil
	})
	all.Content, all.Reasoning = content.String(), reasoning.String()
	return all, err
}
