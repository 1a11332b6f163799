// Package openai is an llm.Backend for any OpenAI-compatible chat server: llama.cpp's
// llama-server, LM Studio, vLLM, Ollama's /v1 endpoint, OpenAI itself. It streams
// /v1/chat/completions over server-sent events.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/internal/httpx"
)

// Config configures a Client. Zero durations take the defaults shown.
type Config struct {
	URL            string        // base URL: "http://127.0.0.1:8080" or ".../v1"; required
	APIKey         string        // sent as "Authorization: Bearer"; optional for local servers
	Name           string        // display name ("llama.cpp", "lmstudio"); default "openai"
	ConnectTimeout time.Duration // 5s
	HeaderTimeout  time.Duration // time to the response headers (model loading): 120s
	StallTimeout   time.Duration // longest silence inside a stream: 60s
	Retries        int           // extra attempts on connect errors; default 2, <0 for none
	Backoff        time.Duration // first retry delay, doubling: 250ms
	NoUsage        bool          // don't send stream_options.include_usage (strict old servers)
	HTTPClient     *http.Client  // overrides the timeouts above except StallTimeout
	Log            *slog.Logger
}

// DefaultHeaderTimeout is the time to the response headers when Config leaves it zero.
const DefaultHeaderTimeout = 120 * time.Second

// Client talks to one OpenAI-compatible server. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base string // ends in /v1 (or the user's own API root), no trailing slash
	conn *httpx.Conn
}

// New checks cfg and returns a client. It does not contact the server (see Health).
func New(cfg Config) (*Client, error) {
	base, err := BaseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = "openai"
	}
	conn := httpx.NewConn(httpx.Options{
		ConnectTimeout: cfg.ConnectTimeout, HeaderTimeout: cfg.HeaderTimeout, StallTimeout: cfg.StallTimeout,
		Retries: cfg.Retries, Backoff: cfg.Backoff, HTTPClient: cfg.HTTPClient, Log: cfg.Log,
	}, DefaultHeaderTimeout)
	return &Client{cfg: cfg, base: base, conn: conn}, nil
}

// BaseURL normalises a server URL to its API root: a bare host gets "/v1".
func BaseURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("openai: no server URL")
	}
	raw, u := httpx.BackendURL(raw)
	if u == nil {
		return "", fmt.Errorf("openai: bad server URL %q", raw)
	}
	p := strings.TrimRight(u.Path, "/")
	p = strings.TrimSuffix(p, "/chat/completions")
	if p == "" {
		p = "/v1"
	}
	u.Path, u.RawQuery, u.Fragment = p, "", ""
	return u.String(), nil
}

// Name implements llm.Backend.
func (c *Client) Name() string { return c.cfg.Name }

// URL implements llm.Backend.
func (c *Client) URL() string { return c.base }

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []llm.Message  `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	// MaxCompletionTokens replaces max_tokens for servers that reject it (OpenAI o-series).
	MaxCompletionTokens int        `json:"max_completion_tokens,omitempty"`
	Temperature         *float64   `json:"temperature,omitempty"`
	TopP                *float64   `json:"top_p,omitempty"`
	Seed                *int       `json:"seed,omitempty"`
	Tools               []llm.Tool `json:"tools,omitempty"`
}

type toolDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type delta struct {
	Content          *string     `json:"content"`
	Reasoning        *string     `json:"reasoning"`
	ReasoningContent *string     `json:"reasoning_content"`
	ToolCalls        []toolDelta `json:"tool_calls"`
}

type chunk struct {
	Choices []struct {
		Delta        delta   `json:"delta"`
		Message      *delta  `json:"message"` // non-streamed replies
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *llm.Usage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// Chat implements llm.Backend.
func (c *Client) Chat(ctx context.Context, req *llm.Request, fn func(llm.Delta) error) error {
	if req.Model == "" {
		return llm.ErrNoModel
	}
	body := chatRequest{
		Model: req.Model, Messages: req.Messages, Stream: true,
		MaxTokens: req.MaxTokens, Temperature: req.Temperature, TopP: req.TopP, Seed: req.Seed,
		Tools: req.Tools,
	}
	if !c.cfg.NoUsage {
		body.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var resp *http.Response
	// A 400 that names stream_options or max_completion_tokens means nothing was generated:
	// adapt the request (older servers; OpenAI's reasoning models) and send it again.
	for attempt := 0; ; attempt++ {
		buf, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("openai: encode request: %w", err)
		}
		resp, err = c.conn.Do(ctx, func() (*http.Request, error) {
			r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/chat/completions", bytes.NewReader(buf))
			if err != nil {
				return nil, err
			}
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "text/event-stream")
			if c.cfg.APIKey != "" {
				r.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
			}
			return r, nil
		})
		if err != nil {
			return fmt.Errorf("openai: %s: %w", c.base, err)
		}
		if resp.StatusCode == http.StatusOK {
			break
		}
		e := httpx.APIError(resp)
		resp.Body.Close()
		msg := strings.ToLower(e.Message)
		switch {
		case attempt < 2 && e.Status == http.StatusBadRequest && body.StreamOptions != nil && strings.Contains(msg, "stream_options"):
			body.StreamOptions = nil
			continue
		case attempt < 2 && e.Status == http.StatusBadRequest && body.MaxTokens > 0 && strings.Contains(msg, "max_completion_tokens"):
			body.MaxCompletionTokens, body.MaxTokens = body.MaxTokens, 0
			continue
		}
		if errors.Is(e, llm.ErrModelNotFound) && !strings.Contains(e.Message, req.Model) {
			e.Message = fmt.Sprintf("model %q: %s", req.Model, e.Message)
		}
		return e
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		// The server ignored "stream": one whole completion.
		return c.whole(resp, fn)
	}

	wd := c.conn.Watchdog(cancel)
	defer wd.Stop()
	s := &sse{fn: fn}
	err := httpx.ReadLines(resp.Body, func(line []byte) error {
		wd.Kick()
		return s.line(line)
	})
	if err == nil || (!errors.Is(err, errDone) && s.fnErr == nil && ctx.Err() == nil && s.pending != nil && json.Valid(s.pending)) {
		// The stream ended (or broke) right after a complete event without its blank line.
		if ferr := s.flush(); ferr != nil {
			err = ferr
		}
	}
	if errors.Is(err, errDone) {
		return s.finish()
	}
	if err != nil {
		if s.fnErr != nil {
			return s.fnErr
		}
		return fmt.Errorf("openai: %w", httpx.StreamError(ctx, err))
	}
	if ctx.Err() != nil {
		return fmt.Errorf("openai: %w", context.Cause(ctx))
	}
	if !s.finished {
		return fmt.Errorf("openai: %w: no [DONE] and no finish_reason", llm.ErrTruncated)
	}
	return s.finish() // finish_reason seen but no [DONE]: accept
}

var errDone = errors.New("done")

// maxEventLines caps the data lines of one event (real servers send one per event).
const maxEventLines = 1024

// sse decodes the frames of one stream and assembles tool calls.
type sse struct {
	fn       func(llm.Delta) error
	fnErr    error
	finished bool // a finish_reason was seen
	sentTC   bool
	calls    []llm.ToolCall
	byIndex  map[int]int

	pending    []byte // data of the event being read; nil: none
	pendingBuf []byte // reused storage
	// pendingLines counts the data lines joined into pending.
	pendingLines int
}

func (s *sse) call(d llm.Delta) error {
	if err := s.fn(d); err != nil {
		s.fnErr = err
		return err
	}
	return nil
}

// line handles one line of the event stream. Data lines accumulate until the blank line
// that ends the event (multi-line data joins with "\n", as the SSE spec says); a server that
// omits blank lines still works, because a new data line first dispatches pending data that
// is complete JSON on its own.
func (s *sse) line(line []byte) error {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 { // end of the event
		return s.flush()
	}
	if line[0] == ':' { // comment (keep-alive)
		return nil
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "data":
	case "event", "id", "retry":
		return nil
	case "error":
		// llama.cpp's server before late 2025 reported mid-stream failures as a non-standard
		// "error:" field: error: {"code":400,"message":"…","type":"invalid_request_error"}
		if err := s.flush(); err != nil {
			return err
		}
		e := httpx.ParseError(append(append([]byte(`{"error":`), value...), '}'))
		if e == nil {
			e = &llm.APIError{Message: string(bytes.TrimSpace(value)), Kind: llm.ErrServer}
		}
		return e
	default:
		// Some servers send bare JSON lines; accept those, reject anything else.
		if len(line) > 0 && line[0] == '{' {
			value = line
			break
		}
		return fmt.Errorf("%w: unexpected line %s", llm.ErrBadStream, httpx.Excerpt(line))
	}
	if s.pending != nil {
		if !json.Valid(s.pending) && !isDone(s.pending) {
			if len(s.pending)+1+len(value) > httpx.MaxLine {
				return fmt.Errorf("%w: an event longer than %d bytes", llm.ErrBadStream, httpx.MaxLine)
			}
			// Every line re-validates the joined data: bound the lines so that cost stays linear.
			if s.pendingLines++; s.pendingLines >= maxEventLines {
				return fmt.Errorf("%w: an event of more than %d data lines", llm.ErrBadStream, maxEventLines)
			}
			s.pending = append(append(s.pending, '\n'), value...)
			return nil
		}
		if err := s.flush(); err != nil {
			return err
		}
	}
	s.pending = append(s.pendingBuf[:0], value...)
	s.pendingLines = 1
	return nil
}

func isDone(b []byte) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("[DONE]")) }

// flush decodes and delivers the pending event's data.
func (s *sse) flush() error {
	if s.pending == nil {
		return nil
	}
	value := s.pending
	s.pendingBuf, s.pending = s.pending, nil
	if len(bytes.TrimSpace(value)) == 0 {
		return nil // an empty data: frame
	}
	if isDone(value) {
		return errDone
	}
	var ch chunk
	if err := json.Unmarshal(value, &ch); err != nil {
		return fmt.Errorf("%w: invalid JSON frame %s: %w", llm.ErrBadStream, httpx.Excerpt(value), err)
	}
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		if e := httpx.ParseError(value); e != nil {
			return e
		}
	}
	var d llm.Delta
	for _, choice := range ch.Choices {
		dd := choice.Delta
		if choice.Message != nil {
			dd = *choice.Message
		}
		if dd.Content != nil {
			d.Content += *dd.Content
		}
		if dd.Reasoning != nil {
			d.Reasoning += *dd.Reasoning
		}
		if dd.ReasoningContent != nil {
			d.Reasoning += *dd.ReasoningContent
		}
		for i, t := range dd.ToolCalls {
			s.addTool(i, t)
		}
		if choice.FinishReason != nil && *choice.FinishReason != "" {
			d.FinishReason = *choice.FinishReason
		}
		break // only the first choice (n=1)
	}
	d.Usage = ch.Usage
	if d.FinishReason != "" {
		s.finished = true
		if len(s.calls) > 0 && !s.sentTC {
			d.ToolCalls, s.sentTC = s.calls, true
		}
	}
	if d.Content == "" && d.Reasoning == "" && d.FinishReason == "" && d.Usage == nil && len(d.ToolCalls) == 0 {
		return nil // role-only or empty frame
	}
	return s.call(d)
}

func (s *sse) addTool(pos int, t toolDelta) {
	if s.byIndex == nil {
		s.byIndex = map[int]int{}
	}
	idx := pos
	if t.Index != nil {
		idx = *t.Index
	}
	i, ok := s.byIndex[idx]
	if !ok || (t.ID != "" && s.calls[i].ID != "" && t.ID != s.calls[i].ID) {
		s.calls = append(s.calls, llm.ToolCall{ID: t.ID, Type: "function"})
		i = len(s.calls) - 1
		s.byIndex[idx] = i
	}
	tc := &s.calls[i]
	if t.ID != "" {
		tc.ID = t.ID
	}
	tc.Function.Name += t.Function.Name
	tc.Function.Arguments += t.Function.Arguments
}

// finish delivers tool calls that no finish_reason carried.
func (s *sse) finish() error {
	if len(s.calls) > 0 && !s.sentTC {
		s.sentTC = true
		return s.call(llm.Delta{ToolCalls: s.calls, FinishReason: llm.FinishToolCalls})
	}
	return nil
}

func (c *Client) whole(resp *http.Response, fn func(llm.Delta) error) error {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(httpx.LimitBody(resp.Body)); err != nil {
		if errors.Is(err, llm.ErrBadStream) {
			return fmt.Errorf("openai: %w", err)
		}
		return fmt.Errorf("openai: %w: %w", llm.ErrTruncated, err)
	}
	s := &sse{fn: fn}
	err := s.line(append([]byte("data: "), buf.Bytes()...))
	if err == nil {
		err = s.flush()
	}
	if err != nil && !errors.Is(err, errDone) {
		return fmt.Errorf("openai: %w", err)
	}
	return s.finish()
}

// Models implements llm.Backend: GET /models.
func (c *Client) Models(ctx context.Context) ([]llm.Model, error) {
	resp, err := c.conn.Do(ctx, func() (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/models", nil)
		if err == nil && c.cfg.APIKey != "" {
			r.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
		}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("openai: %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, httpx.APIError(resp)
	}
	var v struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(httpx.LimitBody(resp.Body)).Decode(&v); err != nil {
		if errors.Is(err, llm.ErrBadStream) {
			return nil, fmt.Errorf("openai: %s/models: %w", c.base, err)
		}
		return nil, fmt.Errorf("openai: %s/models: %w: %w", c.base, llm.ErrBadStream, err)
	}
	out := make([]llm.Model, 0, len(v.Data))
	for _, m := range v.Data {
		if m.ID != "" {
			out = append(out, llm.Model{ID: m.ID})
		}
	}
	return out, nil
}

// Health implements llm.Backend: the server answers the model list.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.Models(ctx)
	return err
}
