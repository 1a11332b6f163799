// Package ollama is an llm.Backend for Ollama's native API: /api/chat NDJSON streaming with
// keep_alive (the model stays loaded between turns), /api/tags for listing, /api/pull with
// progress, /api/version for health.
package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/internal/httpx"
)

// DefaultURL is where Ollama listens by default.
const DefaultURL = "http://127.0.0.1:11434"

// DefaultHeaderTimeout is the time to the response headers when Config leaves it zero:
// Ollama answers headers only after loading the model.
const DefaultHeaderTimeout = 300 * time.Second

// Config configures a Client. Zero values take the defaults shown.
type Config struct {
	URL            string        // DefaultURL
	KeepAlive      time.Duration // how long Ollama keeps the model loaded after a turn: 30m; <0 forever
	ConnectTimeout time.Duration // 5s
	HeaderTimeout  time.Duration // 300s (Ollama answers headers only after loading the model)
	StallTimeout   time.Duration // 60s
	Retries        int           // extra attempts on connect errors: 2; <0 none
	Backoff        time.Duration // 250ms
	NumCtx         int           // options.num_ctx; 0: the model's default
	HTTPClient     *http.Client
	Log            *slog.Logger
}

// Client talks to one Ollama server. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base string
	conn *httpx.Conn
}

// New checks cfg and returns a client; it does not contact the server (see Health).
func New(cfg Config) (*Client, error) {
	raw := strings.TrimSpace(cfg.URL)
	if raw == "" {
		raw = DefaultURL
	}
	_, u := httpx.BackendURL(raw)
	if u == nil {
		return nil, fmt.Errorf("ollama: bad server URL %q", cfg.URL)
	}
	// Accept the URL of Ollama's OpenAI-compatible API (…/v1) or of the native one (…/api).
	u.Path = strings.TrimSuffix(strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/api"), "/v1")
	u.RawQuery, u.Fragment = "", ""
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = 30 * time.Minute
	}
	conn := httpx.NewConn(httpx.Options{
		ConnectTimeout: cfg.ConnectTimeout, HeaderTimeout: cfg.HeaderTimeout, StallTimeout: cfg.StallTimeout,
		Retries: cfg.Retries, Backoff: cfg.Backoff, HTTPClient: cfg.HTTPClient, Log: cfg.Log,
	}, DefaultHeaderTimeout)
	return &Client{cfg: cfg, base: u.String(), conn: conn}, nil
}

// Name implements llm.Backend.
func (c *Client) Name() string { return "ollama" }

// URL implements llm.Backend.
func (c *Client) URL() string { return c.base }

type toolCall struct {
	Function struct {
		Index     *int            `json:"index,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type message struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	Thinking  string     `json:"thinking,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
	ToolName  string     `json:"tool_name,omitempty"`
}

type chatRequest struct {
	Model     string         `json:"model"`
	Messages  []message      `json:"messages"`
	Tools     []llm.Tool     `json:"tools,omitempty"`
	Stream    bool           `json:"stream"`
	KeepAlive string         `json:"keep_alive,omitempty"`
	Think     *bool          `json:"think,omitempty"`
	Options   map[string]any `json:"options,omitempty"`
}

type chatResponse struct {
	Model           string  `json:"model"`
	Message         message `json:"message"`
	Done            bool    `json:"done"`
	DoneReason      string  `json:"done_reason"`
	PromptEvalCount int     `json:"prompt_eval_count"`
	EvalCount       int     `json:"eval_count"`
	Error           string  `json:"error"`
}

func keepAlive(d time.Duration) string {
	if d < 0 {
		return "-1"
	}
	return d.String()
}

func toWire(msgs []llm.Message) []message {
	names := map[string]string{} // tool call id → function name, for tool_name
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		w := message{Role: m.Role, Content: m.Content}
		for _, tc := range m.ToolCalls {
			var t toolCall
			t.Function.Name = tc.Function.Name
			t.Function.Arguments = json.RawMessage(`{}`)
			if a := strings.TrimSpace(tc.Function.Arguments); a != "" && json.Valid([]byte(a)) {
				t.Function.Arguments = json.RawMessage(a)
			}
			w.ToolCalls = append(w.ToolCalls, t)
			names[tc.ID] = tc.Function.Name
		}
		if m.Role == llm.RoleTool {
			w.ToolName = names[m.ToolCallID]
			if w.ToolName == "" {
				w.ToolName = m.Name
			}
		}
		out = append(out, w)
	}
	return out
}

// errDone stops reading a chat stream after its final message.
var errDone = errors.New("done")

// Chat implements llm.Backend.
func (c *Client) Chat(ctx context.Context, req *llm.Request, fn func(llm.Delta) error) error {
	if req.Model == "" {
		return llm.ErrNoModel
	}
	body := chatRequest{
		Model: req.Model, Messages: toWire(req.Messages), Tools: req.Tools, Stream: true,
		KeepAlive: keepAlive(c.cfg.KeepAlive), Think: req.Think,
	}
	opts := map[string]any{}
	if req.MaxTokens > 0 {
		opts["num_predict"] = req.MaxTokens
	}
	if req.Temperature != nil {
		opts["temperature"] = *req.Temperature
	}
	if req.TopP != nil {
		opts["top_p"] = *req.TopP
	}
	if req.Seed != nil {
		opts["seed"] = *req.Seed
	}
	if c.cfg.NumCtx > 0 {
		opts["num_ctx"] = c.cfg.NumCtx
	}
	if len(opts) > 0 {
		body.Options = opts
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	resp, err := c.post(ctx, "/api/chat", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := httpx.APIError(resp)
		if errors.Is(e, llm.ErrModelNotFound) && !strings.Contains(e.Message, req.Model) {
			e.Message = fmt.Sprintf("model %q: %s", req.Model, e.Message)
		}
		return e
	}

	wd := c.conn.Watchdog(cancel)
	defer wd.Stop()
	var (
		calls []llm.ToolCall
		done  bool
		fnErr error
	)
	err = httpx.ReadLines(resp.Body, func(line []byte) error {
		wd.Kick()
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			return nil
		}
		if done {
			return fmt.Errorf("%w: data after done: %s", llm.ErrBadStream, httpx.Excerpt(line))
		}
		var r chatResponse
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("%w: invalid JSON line %s: %w", llm.ErrBadStream, httpx.Excerpt(line), err)
		}
		if r.Error != "" {
			return &llm.APIError{Message: r.Error, Kind: llm.ErrServer}
		}
		d := llm.Delta{Content: r.Message.Content, Reasoning: r.Message.Thinking}
		for _, tc := range r.Message.ToolCalls {
			args := string(tc.Function.Arguments)
			if args == "" || args == "null" {
				args = "{}"
			}
			calls = append(calls, llm.ToolCall{
				ID: fmt.Sprintf("call_%d", len(calls)), Type: "function",
				Function: llm.FunctionCall{Name: tc.Function.Name, Arguments: args},
			})
		}
		if r.Done {
			done = true
			d.FinishReason = r.DoneReason
			if d.FinishReason == "" {
				d.FinishReason = llm.FinishStop
			}
			if len(calls) > 0 {
				d.ToolCalls, d.FinishReason = calls, llm.FinishToolCalls
			}
			d.Usage = &llm.Usage{PromptTokens: r.PromptEvalCount, CompletionTokens: r.EvalCount, TotalTokens: r.PromptEvalCount + r.EvalCount}
		}
		if d.Content == "" && d.Reasoning == "" && d.FinishReason == "" {
			return nil
		}
		if err := fn(d); err != nil {
			fnErr = err
			return err
		}
		if done {
			// The answer is complete: stop reading rather than wait for the body to end (a
			// proxy that keeps it open would otherwise turn it into a stall error).
			return errDone
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	if errors.Is(err, errDone) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ollama: %w", httpx.StreamError(ctx, err))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("ollama: %w", context.Cause(ctx))
	}
	if !done {
		return fmt.Errorf("ollama: %w: no final \"done\" message", llm.ErrTruncated)
	}
	return nil
}

func (c *Client) post(ctx context.Context, path string, body any) (*http.Response, error) {
	buf, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("ollama: encode request: %w", err)
	}
	resp, err := c.conn.Do(ctx, func() (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(buf))
		if err == nil {
			r.Header.Set("Content-Type", "application/json")
		}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("ollama: %s: %w", c.base, err)
	}
	return resp, nil
}

func (c *Client) get(ctx context.Context, path string, v any) error {
	resp, err := c.conn.Do(ctx, func() (*http.Request, error) {
		return http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	})
	if err != nil {
		return fmt.Errorf("ollama: %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return httpx.APIError(resp)
	}
	if err := json.NewDecoder(httpx.LimitBody(resp.Body)).Decode(v); err != nil {
		if errors.Is(err, llm.ErrBadStream) {
			return fmt.Errorf("ollama: %s%s: %w", c.base, path, err)
		}
		return fmt.Errorf("ollama: %s%s: %w: %w", c.base, path, llm.ErrBadStream, err)
	}
	return nil
}

// Models implements llm.Backend: GET /api/tags.
func (c *Client) Models(ctx context.Context) ([]llm.Model, error) {
	var v struct {
		Models []struct {
			Name    string `json:"name"`
			Model   string `json:"model"`
			Size    int64  `json:"size"`
			Details struct {
				Family string `json:"family"`
			} `json:"details"`
		} `json:"models"`
	}
	if err := c.get(ctx, "/api/tags", &v); err != nil {
		return nil, err
	}
	out := make([]llm.Model, 0, len(v.Models))
	for _, m := range v.Models {
		id := m.Name
		if id == "" {
			id = m.Model
		}
		if id != "" {
			out = append(out, llm.Model{ID: id, Size: m.Size, Family: m.Details.Family})
		}
	}
	return out, nil
}

// Version returns the server's version (GET /api/version).
func (c *Client) Version(ctx context.Context) (string, error) {
	var v struct {
		Version string `json:"version"`
	}
	if err := c.get(ctx, "/api/version", &v); err != nil {
		return "", err
	}
	if v.Version == "" {
		return "", fmt.Errorf("ollama: %s/api/version: %w: no version", c.base, llm.ErrBadStream)
	}
	return v.Version, nil
}

// Health implements llm.Backend: the server reports its version.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.Version(ctx)
	return err
}

// Progress is one /api/pull status update.
type Progress struct {
	Status    string // "pulling manifest", "downloading", "verifying sha256 digest", "success", …
	Digest    string
	Total     int64
	Completed int64
}

// Fraction is Completed/Total, or -1 when unknown.
func (p Progress) Fraction() float64 {
	if p.Total <= 0 {
		return -1
	}
	return float64(p.Completed) / float64(p.Total)
}

// Pull asks Ollama to fetch a model, reporting progress to fn (which may be nil). It returns
// when Ollama reports success, an error, or ctx ends (which aborts the pull).
func (c *Client) Pull(ctx context.Context, model string, fn func(Progress)) error {
	if strings.TrimSpace(model) == "" {
		return llm.ErrNoModel
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	resp, err := c.post(ctx, "/api/pull", map[string]any{"model": model, "stream": true})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return httpx.APIError(resp)
	}
	wd := c.conn.Watchdog(cancel)
	defer wd.Stop()
	success := false
	err = httpx.ReadLines(resp.Body, func(line []byte) error {
		wd.Kick()
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			return nil
		}
		var v struct {
			Status    string `json:"status"`
			Digest    string `json:"digest"`
			Total     int64  `json:"total"`
			Completed int64  `json:"completed"`
			Error     string `json:"error"`
		}
		if err := json.Unmarshal(line, &v); err != nil {
			return fmt.Errorf("%w: invalid JSON line %s: %w", llm.ErrBadStream, httpx.Excerpt(line), err)
		}
		if v.Error != "" {
			kind := llm.ErrServer
			if strings.Contains(strings.ToLower(v.Error), "file does not exist") || strings.Contains(v.Error, "not found") {
				kind = llm.ErrModelNotFound
			}
			return &llm.APIError{Message: fmt.Sprintf("pull %q: %s", model, v.Error), Kind: kind}
		}
		if v.Status == "success" {
			success = true
		}
		if fn != nil {
			fn(Progress{Status: v.Status, Digest: v.Digest, Total: v.Total, Completed: v.Completed})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ollama: %w", httpx.StreamError(ctx, err))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("ollama: %w", context.Cause(ctx))
	}
	if !success {
		return fmt.Errorf("ollama: pull %q: %w: no success status", model, llm.ErrTruncated)
	}
	return nil
}
