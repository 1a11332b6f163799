package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/app/serve/realtime"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/skills"
)

// skillsModel is the model id of the offline skills brain.
const skillsModel = skills.ModelID

// chatMessage accepts content as a string or as an array of parts.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []llm.ToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int       `json:"max_tokens"`
	MaxCompletionTokens *int       `json:"max_completion_tokens"`
	Temperature         *float64   `json:"temperature"`
	TopP                *float64   `json:"top_p"`
	Seed                *int       `json:"seed"`
	N                   *int       `json:"n"`
	Tools               []llm.Tool `json:"tools"`
}

func messageText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content must be a string or an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part type %q is not supported (text only)", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) *APIError {
	var in chatRequest
	if e := s.decodeJSON(w, r, &in); e != nil {
		return e
	}
	if in.Model == "" {
		return missingParam("model", "you must provide a model parameter")
	}
	if len(in.Messages) == 0 {
		return invalid("messages", "'messages' must be a non-empty array of messages")
	}
	if in.N != nil && *in.N != 1 {
		return invalid("n", "n=%d is not supported: Parley returns one choice", *in.N)
	}
	req := &llm.Request{Model: in.Model, Temperature: in.Temperature, TopP: in.TopP, Seed: in.Seed, Tools: in.Tools}
	if slices.Contains(chatAliases, in.Model) {
		req.Model = s.eng.LLMModel
	} else if _, skillsOnly := s.eng.LLM.(skills.Backend); skillsOnly && in.Model != skillsModel {
		// No LLM: only the offline skills answer, under their own name or an alias. Any other
		// model is refused as OpenAI refuses a model it does not have, not silently swapped.
		return modelNotFound(in.Model)
	}
	if in.MaxTokens != nil {
		req.MaxTokens = *in.MaxTokens
	}
	if in.MaxCompletionTokens != nil {
		req.MaxTokens = *in.MaxCompletionTokens
	}
	if req.MaxTokens < 0 {
		return invalid("max_tokens", "max_tokens must be positive")
	}
	for i, m := range in.Messages {
		switch m.Role {
		case llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleTool, "developer":
		default:
			return invalid(fmt.Sprintf("messages[%d].role", i), "Invalid value: %q. Supported values are: 'system', 'developer', 'user', 'assistant' and 'tool'.", m.Role)
		}
		text, err := messageText(m.Content)
		if err != nil {
			return invalid(fmt.Sprintf("messages[%d].content", i), "%v", err)
		}
		role := m.Role
		if role == "developer" {
			role = llm.RoleSystem
		}
		req.Messages = append(req.Messages, llm.Message{Role: role, Content: text, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID})
	}
	release, err := s.llmLim.Acquire(r.Context(), 1)
	if err != nil {
		return s.queueErr(s.llmLim, err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), s.o.JobTimeout)
	defer cancel()
	id, created := newID("chatcmpl-"), time.Now().Unix()
	if in.Stream {
		return s.chatStream(ctx, w, req, id, created, in.StreamOptions != nil && in.StreamOptions.IncludeUsage)
	}
	d, err := llm.Collect(ctx, s.eng.LLM, req)
	if err != nil {
		return llmError(err, in.Model)
	}
	msg := map[string]any{"role": "assistant", "content": d.Content}
	if len(d.ToolCalls) > 0 {
		msg["tool_calls"] = d.ToolCalls
	}
	if d.Reasoning != "" {
		msg["reasoning_content"] = d.Reasoning
	}
	finish := d.FinishReason
	if finish == "" {
		finish = llm.FinishStop
	}
	out := map[string]any{
		"id": id, "object": "chat.completion", "created": created, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
	}
	if d.Usage != nil {
		out["usage"] = d.Usage
	} else {
		out["usage"] = s.countUsage(req, d.Content+d.Reasoning)
	}
	writeJSON(w, out)
	return nil
}

func llmError(err error, model string) *APIError {
	var ae *llm.APIError
	switch {
	case errors.Is(err, llm.ErrModelNotFound):
		return modelNotFound(model)
	case errors.Is(err, llm.ErrUnreachable):
		return &APIError{Status: http.StatusBadGateway, Type: "server_error", Code: str("upstream_unreachable"), Message: fmt.Sprintf("the LLM server is unreachable: %v", err)}
	case errors.Is(err, context.DeadlineExceeded):
		return timedOut("the answer took longer than the server's job timeout")
	case errors.Is(err, context.Canceled):
		return gone("client went away")
	case errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500:
		return &APIError{Status: ae.Status, Type: "invalid_request_error", Code: str(ae.Code), Message: ae.Message}
	}
	return &APIError{Status: http.StatusBadGateway, Type: "server_error", Message: fmt.Sprintf("the LLM backend failed: %v", err)}
}

func (s *Server) chatStream(ctx context.Context, w http.ResponseWriter, req *llm.Request, id string, created int64, usage bool) *APIError {
	rc := http.NewResponseController(w)
	started := false
	send := func(v any) error {
		if !started {
			started = true
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
		}
		b, _ := json.Marshal(v)
		rc.SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}}
	}
	var last *llm.Usage
	var written strings.Builder // the answer, for usage the upstream does not report
	first := true
	err := s.eng.LLM.Chat(ctx, req, func(d llm.Delta) error {
		written.WriteString(d.Content)
		written.WriteString(d.Reasoning)
		delta := map[string]any{}
		if first {
			delta["role"] = "assistant"
			first = false
		}
		if d.Content != "" || len(delta) > 0 {
			delta["content"] = d.Content
		}
		if d.Reasoning != "" {
			delta["reasoning_content"] = d.Reasoning
		}
		if len(d.ToolCalls) > 0 {
			tc := make([]map[string]any, len(d.ToolCalls))
			for i, c := range d.ToolCalls {
				tc[i] = map[string]any{"index": i, "id": c.ID, "type": "function", "function": c.Function}
			}
			delta["tool_calls"] = tc
		}
		if d.Usage != nil {
			last = d.Usage
		}
		var finish any
		if d.FinishReason != "" {
			finish = d.FinishReason
		}
		if len(delta) == 0 && finish == nil {
			return nil
		}
		return send(chunk(delta, finish))
	})
	if err != nil {
		if !started {
			return llmError(err, req.Model)
		}
		// Mid-stream: OpenAI-compatible servers send an error frame.
		e := s.cut(ctx, llmError(err, req.Model))
		send(map[string]any{"error": e})
		return nil
	}
	if first { // nothing came: still a well-formed stream
		send(chunk(map[string]any{"role": "assistant", "content": ""}, llm.FinishStop))
	}
	if usage {
		if last == nil {
			last = s.countUsage(req, written.String())
		}
		u := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": []any{}, "usage": last}
		send(u)
	}
	rc.SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
	fmt.Fprint(w, "data: [DONE]\n\n")
	rc.Flush()
	return nil
}

// modelEntry is one /v1/models entry: OpenAI's fields plus what Parley does with the model.
// Every name a request may give as `model` is listed, aliases included, and nothing else.
type modelEntry struct {
	ID           string   `json:"id"`
	Object       string   `json:"object"`
	Created      int64    `json:"created"`
	OwnedBy      string   `json:"owned_by"`
	Kind         string   `json:"kind"`               // asr | tts | llm (parley: all three)
	AliasOf      string   `json:"alias_of,omitempty"` // the model an alias runs
	Capabilities []string `json:"capabilities"`       // transcription, translation, speech, realtime, chat
	Languages    []string `json:"languages,omitempty"`
	Voices       []string `json:"voices,omitempty"` // tts: the voice names /v1/audio/speech accepts
	Note         string   `json:"note,omitempty"`
}

// chatAliases are the chat model names that mean the configured LLM (or the offline skills).
var chatAliases = []string{"parley", "default"}

// canTranslate reports whether /v1/audio/translations works: SenseVoice only transcribes, so
// translation goes through an LLM backend, and the offline skills cannot translate.
func (s *Server) canTranslate() bool {
	_, skillsOnly := s.eng.LLM.(skills.Backend)
	return s.eng.ASR != nil && s.eng.LLM != nil && !skillsOnly
}

func (s *Server) modelList(ctx context.Context) []modelEntry {
	var out []modelEntry
	add := func(e modelEntry) {
		for i, m := range out {
			if m.ID != e.ID {
				continue
			}
			if m.Kind != e.Kind {
				// "parley" names the recogniser, the voice and the chat model, by endpoint
				m.Kind, m.AliasOf, m.Note = "parley", "", "Parley's loaded model for each endpoint"
				for _, c := range e.Capabilities {
					if !slices.Contains(m.Capabilities, c) {
						m.Capabilities = append(m.Capabilities, c)
					}
				}
				out[i] = m
			}
			return
		}
		e.Object = "model"
		if e.OwnedBy == "" {
			e.OwnedBy = "parley"
		}
		out = append(out, e)
	}
	if s.eng.ASR != nil {
		caps := []string{"transcription", "realtime"}
		if s.canTranslate() {
			caps = []string{"transcription", "translation", "realtime"}
		}
		add(modelEntry{ID: s.eng.ASRModel, Kind: "asr", Capabilities: caps, Languages: s.eng.ASRLanguages, Note: s.eng.ASRNote})
		for _, a := range transcriptionModels {
			add(modelEntry{ID: a, Kind: "asr", AliasOf: s.eng.ASRModel, Capabilities: caps})
		}
	}
	if s.eng.TTS != nil {
		caps := []string{"speech", "realtime"}
		add(modelEntry{ID: s.eng.TTSEngine, Kind: "tts", Capabilities: caps, Voices: s.voiceNames()})
		for _, a := range speechModels {
			add(modelEntry{ID: a, Kind: "tts", AliasOf: s.eng.TTSEngine, Capabilities: caps})
		}
	}
	owner := s.eng.LLM.Name()
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	ms, err := s.eng.LLM.Models(cctx)
	cancel()
	if (err != nil || len(ms) == 0) && s.eng.LLMModel != "" {
		ms = []llm.Model{{ID: s.eng.LLMModel}}
	}
	for _, m := range ms {
		add(modelEntry{ID: m.ID, Kind: "llm", OwnedBy: owner, Capabilities: []string{"chat"}})
	}
	if s.eng.LLMModel != "" {
		for _, a := range chatAliases {
			add(modelEntry{ID: a, Kind: "llm", OwnedBy: owner, AliasOf: s.eng.LLMModel, Capabilities: []string{"chat"}})
		}
	}
	return out
}

// voiceNames are the voices /v1/audio/speech accepts by name: OpenAI's (mapped), the
// engine's presets and the library voices made for this engine.
func (s *Server) voiceNames() []string {
	names := sortedKeys(OpenAIVoices)
	caps := s.eng.TTS.Capabilities()
	if len(caps.Voices) > 0 {
		names = append(names, caps.Voices...)
	} else {
		names = append(names, caps.Languages...) // espeak-ng: a language is a voice
	}
	if s.eng.Voices != nil {
		vs, _ := s.eng.Voices.List()
		for _, v := range vs {
			if v.Engine == s.eng.TTSEngine {
				names = append(names, v.Name)
			}
		}
	}
	return names
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) *APIError {
	writeJSON(w, map[string]any{"object": "list", "data": s.modelList(r.Context())})
	return nil
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) *APIError {
	id := r.PathValue("id")
	for _, m := range s.modelList(r.Context()) {
		if m.ID == id {
			writeJSON(w, m)
			return nil
		}
	}
	return modelNotFound(id)
}

// messageOverhead is the tokens a chat template adds around each message (ChatML:
// <|im_start|>role\n … <|im_end|>\n), and replyOverhead the assistant's opening.
const messageOverhead, replyOverhead = 4, 3

// countUsage counts a request's and an answer's tokens when the upstream did not: the
// messages' text with the model's tokenizer (Engines.Tokens) plus the chat template's few
// tokens per message. An estimate of what the upstream's own count would say, documented so.
func (s *Server) countUsage(req *llm.Request, answer string) *llm.Usage {
	u := &llm.Usage{PromptTokens: replyOverhead}
	for _, m := range req.Messages {
		u.PromptTokens += s.tokens(m.Content) + messageOverhead
	}
	u.CompletionTokens = s.tokens(answer)
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

func (s *Server) tokens(text string) int {
	if text == "" {
		return 0
	}
	if s.eng.Tokens != nil {
		return s.eng.Tokens(text)
	}
	return realtime.EstimateTokens(text)
}
