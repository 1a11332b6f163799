package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/llm"
)

// replay serves a testdata stream frame by frame, flushing each.
func replay(t *testing.T, file string) http.HandlerFunc {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, frame := range strings.SplitAfter(string(b), "\n\n") {
			io.WriteString(w, frame)
			w.(http.Flusher).Flush()
		}
	}
}

func newClient(t *testing.T, url string, mod ...func(*Config)) *Client {
	t.Helper()
	cfg := Config{URL: url, Backoff: time.Millisecond, Retries: -1}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func req() *llm.Request {
	return &llm.Request{Model: "qwen3", Messages: []llm.Message{{Role: "user", Content: "hi"}}}
}

func TestStreamReasoningUsage(t *testing.T) {
	srv := httptest.NewServer(replay(t, "llamacpp_reasoning.sse"))
	defer srv.Close()
	c := newClient(t, srv.URL)
	var deltas []llm.Delta
	err := c.Chat(context.Background(), req(), func(d llm.Delta) error { deltas = append(deltas, d); return nil })
	if err != nil {
		t.Fatal(err)
	}
	var content, reasoning string
	var u *llm.Usage
	var finish string
	for _, d := range deltas {
		content += d.Content
		reasoning += d.Reasoning
		if d.Usage != nil {
			u = d.Usage
		}
		if d.FinishReason != "" {
			finish = d.FinishReason
		}
	}
	if content != "Hello there! How can I help?" {
		t.Errorf("content %q", content)
	}
	if reasoning != "The user greets. Answer briefly." {
		t.Errorf("reasoning %q", reasoning)
	}
	if finish != "stop" || u == nil || u.TotalTokens != 21 {
		t.Errorf("finish %q usage %+v", finish, u)
	}
	// The null first content frame produces no delta.
	if deltas[0].Content == "" && deltas[0].Reasoning == "" {
		t.Errorf("empty first delta delivered: %+v", deltas[0])
	}
}

func TestRequestBody(t *testing.T) {
	var got map[string]any
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			t.Errorf("path %s", r.URL.Path)
		}
		auth = r.Header.Get("Authorization")
		json.NewDecoder(r.Body).Decode(&got)
		replay(t, "cut.sse")(w, r)
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, func(c *Config) { c.APIKey = "sk-test" })
	r := req()
	r.MaxTokens = 64
	r.Tools = []llm.Tool{{Type: "function", Function: llm.FunctionDef{Name: "get_time", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	if _, err := llm.Collect(context.Background(), c, r); err != nil {
		t.Fatal(err)
	}
	if auth != "Bearer sk-test" {
		t.Errorf("auth %q", auth)
	}
	if got["stream"] != true || got["model"] != "qwen3" || got["max_tokens"] != float64(64) {
		t.Errorf("body %v", got)
	}
	if tools, _ := got["tools"].([]any); len(tools) != 1 {
		t.Errorf("tools %v", got["tools"])
	}
	if so, _ := got["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options %v", got["stream_options"])
	}
}

func TestToolCallsAssembledByIndex(t *testing.T) {
	srv := httptest.NewServer(replay(t, "tool_calls.sse"))
	defer srv.Close()
	d, err := llm.Collect(context.Background(), newClient(t, srv.URL), req())
	if err != nil {
		t.Fatal(err)
	}
	if d.FinishReason != "tool_calls" || len(d.ToolCalls) != 2 {
		t.Fatalf("got %+v", d)
	}
	want := []llm.ToolCall{
		{ID: "call_a", Type: "function", Function: llm.FunctionCall{Name: "calculate", Arguments: `{"expression": "2+2"}`}},
		{ID: "call_b", Type: "function", Function: llm.FunctionCall{Name: "get_time", Arguments: `{}`}},
	}
	for i := range want {
		if d.ToolCalls[i] != want[i] {
			t.Errorf("call %d = %+v, want %+v", i, d.ToolCalls[i], want[i])
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error
		wantMsg string
		content string
	}{
		{"mid-stream error frame", replay(t, "error_midstream.sse"), llm.ErrServer, "out of memory", "Par"},
		{"invalid JSON frame", replay(t, "invalid_frame.sse"), llm.ErrBadStream, "invalid JSON", "Hi"},
		{"cut mid-way", replay(t, "cut.sse"), llm.ErrTruncated, "", "One. Two"},
		{"llama.cpp legacy error field", replay(t, "llamacpp_legacy_error.sse"), llm.ErrServer, "exceeds the available context size", ""},
		{"wrong model", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"message":"The model 'gpt-9' does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
		}, llm.ErrModelNotFound, "gpt-9", ""},
		{"ollama-style 404", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"message":"model \"nope\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`)
		}, llm.ErrModelNotFound, "pulling", ""},
		{"bad key", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
		}, llm.ErrAuth, "API key", ""},
		{"500 plain text", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream exploded", 500)
		}, llm.ErrServer, "upstream exploded", ""},
		{"garbage line", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "<html>oops</html>\n")
		}, llm.ErrBadStream, "unexpected line", ""},
		{"huge line", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: "+strings.Repeat("x", 5<<20))
		}, llm.ErrBadStream, "longer than", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			d, err := llm.Collect(context.Background(), newClient(t, srv.URL), req())
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err %q lacks %q", err, tt.wantMsg)
			}
			if d.Content != tt.content {
				t.Errorf("content before the error = %q, want %q", d.Content, tt.content)
			}
		})
	}
}

func TestServerDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: connection refused
	c := newClient(t, "http://"+addr, func(c *Config) { c.Retries = 2 })
	err = c.Chat(context.Background(), req(), func(llm.Delta) error { return nil })
	if !errors.Is(err, llm.ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
	if err := c.Health(context.Background()); !errors.Is(err, llm.ErrUnreachable) {
		t.Fatalf("health = %v", err)
	}
}

// flakyDial fails the first n dials like a refused connection.
func flakyDial(n int32, dials *atomic.Int32) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials.Add(1) <= n {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
		}
		return d.DialContext(ctx, network, addr)
	}
}

func TestRetryOnConnectErrorsOnly(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("X-Fail") != "" {
			http.Error(w, "boom", 500)
			return
		}
		replay(t, "llamacpp_reasoning.sse")(w, r)
	}))
	defer srv.Close()

	var dials atomic.Int32
	hc := &http.Client{Transport: &http.Transport{DialContext: flakyDial(2, &dials)}}
	c := newClient(t, srv.URL, func(c *Config) { c.Retries = 3; c.HTTPClient = hc })
	if _, err := llm.Collect(context.Background(), c, req()); err != nil {
		t.Fatalf("after 2 refused dials: %v", err)
	}
	if dials.Load() != 3 || hits.Load() != 1 {
		t.Errorf("dials %d hits %d, want 3 and 1", dials.Load(), hits.Load())
	}

	// A 500 is not retried: the request may have started a generation.
	hits.Store(0)
	srv500 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "boom", 500)
	}))
	defer srv500.Close()
	c = newClient(t, srv500.URL, func(c *Config) { c.Retries = 3 })
	if _, err := llm.Collect(context.Background(), c, req()); !errors.Is(err, llm.ErrServer) {
		t.Fatalf("err %v", err)
	}
	if hits.Load() != 1 {
		t.Errorf("500 retried: %d hits", hits.Load())
	}
}

// endless streams tokens until the client goes away and reports that it saw the disconnect.
func endless(gone chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; ; i++ {
			_, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d \"}}]}\n\n", i)
			w.(http.Flusher).Flush()
			if err != nil {
				break
			}
			select {
			case <-r.Context().Done():
				close(gone)
				return
			case <-time.After(time.Millisecond):
			}
		}
		<-r.Context().Done()
		close(gone)
	}
}

func TestCancellationReachesServer(t *testing.T) {
	for _, how := range []string{"context", "callback error"} {
		t.Run(how, func(t *testing.T) {
			gone := make(chan struct{})
			srv := httptest.NewServer(endless(gone))
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := errors.New("enough")
			n := 0
			err := newClient(t, srv.URL).Chat(ctx, req(), func(d llm.Delta) error {
				n++
				if n == 3 {
					if how == "context" {
						cancel()
						return nil
					}
					return stop
				}
				return nil
			})
			if how == "context" && !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
			if how != "context" && !errors.Is(err, stop) {
				t.Errorf("err = %v, want the callback's error", err)
			}
			select {
			case <-gone:
			case <-time.After(10 * time.Second):
				t.Fatal("the server never saw the client disconnect")
			}
		})
	}
}

func TestStall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hm\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, func(c *Config) { c.StallTimeout = 50 * time.Millisecond })
	_, err := llm.Collect(context.Background(), c, req())
	if !errors.Is(err, llm.ErrStalled) {
		t.Fatalf("err = %v, want ErrStalled", err)
	}
}

func TestNonStreamedReply(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Whole answer."},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	}))
	defer srv.Close()
	d, err := llm.Collect(context.Background(), newClient(t, srv.URL), req())
	if err != nil || d.Content != "Whole answer." || d.FinishReason != "stop" || d.Usage.TotalTokens != 3 {
		t.Fatalf("%+v %v", d, err)
	}
}

func TestModels(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `{"object":"list","data":[{"id":"qwen2.5-7b-instruct","object":"model","owned_by":"organization_owner"},{"id":"llama-3.2-3b","object":"model"}]}`)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL+"/v1/")
	ms, err := c.Models(context.Background())
	if err != nil || len(ms) != 2 || ms[0].ID != "qwen2.5-7b-instruct" {
		t.Fatalf("%v %v", ms, err)
	}
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestBaseURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1"},
		{"127.0.0.1:1234", "http://127.0.0.1:1234/v1"},
		{"https://api.openai.com/v1", "https://api.openai.com/v1"},
		{"http://h/v1/chat/completions", "http://h/v1"},
		{"http://h/openai/v1/", "http://h/openai/v1"},
	}
	for _, tt := range tests {
		got, err := BaseURL(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("BaseURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "ftp://x", "http://"} {
		if _, err := BaseURL(bad); err == nil {
			t.Errorf("BaseURL(%q) accepted", bad)
		}
	}
}

func FuzzSSELine(f *testing.F) {
	for _, s := range []string{
		`data: {"choices":[{"delta":{"content":"hi"}}]}`,
		`data: {"choices":[{"delta":{"tool_calls":[{"index":3,"function":{"arguments":"{"}}]}}]}`,
		`data: {"error":"x"}`, `data: [DONE]`, `: ping`, `event: error`, `{"choices":[]}`,
		`data: {"choices":[{"delta":{"tool_calls":[{"index":-1,"id":"a"},{"id":"b"}]},"finish_reason":"tool_calls"}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s := &sse{fn: func(llm.Delta) error { return nil }}
		_ = s.line([]byte(line))
		_ = s.line([]byte(line))
		_ = s.line(nil)
		_ = s.flush()
		_ = s.finish()
	})
}

func TestAdaptsRejectedParameters(t *testing.T) {
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		bodies = append(bodies, b)
		switch {
		case b["stream_options"] != nil:
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error"}}`)
		case b["max_tokens"] != nil:
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}`)
		default:
			replay(t, "llamacpp_reasoning.sse")(w, r)
		}
	}))
	defer srv.Close()
	r := req()
	r.MaxTokens = 50
	d, err := llm.Collect(context.Background(), newClient(t, srv.URL), r)
	if err != nil || d.Content != "Hello there! How can I help?" {
		t.Fatalf("%+v %v", d, err)
	}
	if len(bodies) != 3 || bodies[2]["max_completion_tokens"] != float64(50) {
		t.Errorf("%d requests, last %v", len(bodies), bodies[len(bodies)-1])
	}
	// Any other 400 is final.
	bodies = nil
	srv400 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bodies = append(bodies, nil)
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"message":"messages: field required"}}`)
	}))
	defer srv400.Close()
	if _, err := llm.Collect(context.Background(), newClient(t, srv400.URL), req()); !errors.Is(err, llm.ErrServer) || len(bodies) != 1 {
		t.Errorf("err %v after %d requests", err, len(bodies))
	}
}

func TestSSEFraming(t *testing.T) {
	tests := []struct{ name, body string }{
		{"multi-line data", "data: {\"choices\":[{\"index\":0,\n" + "data: \"delta\":{\"content\":\"Hi.\"}}]}\n\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"},
		{"no blank lines", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi.\"}}]}\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\ndata: [DONE]\n"},
		{"CRLF and event names", "event: message\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi.\"}}]}\r\n\r\n" +
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n"},
		{"empty data frames", "data:\n\ndata: \n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi.\"},\"finish_reason\":\"stop\"}]}\n\ndata:\n\ndata: [DONE]"},
		{"last event without blank line", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi.\"},\"finish_reason\":\"stop\"}]}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			d, err := llm.Collect(context.Background(), newClient(t, srv.URL), req())
			if err != nil || d.Content != "Hi." || d.FinishReason != "stop" {
				t.Errorf("%+v %v", d, err)
			}
		})
	}
}

// A server that sends data lines that never join into valid JSON and never ends the event
// must not make the client buffer them without limit: the event is capped like a line.
func TestUnendingEventIsCapped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		line := "data: {" + strings.Repeat("x", 64<<10) + "\n"
		for i := 0; i < 200; i++ { // 13 MB in all, > 3 × MaxLine
			if _, err := io.WriteString(w, line); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	err := c.Chat(context.Background(), req(), func(llm.Delta) error { return nil })
	if !errors.Is(err, llm.ErrBadStream) {
		t.Fatalf("err = %v, want ErrBadStream", err)
	}
	if !strings.Contains(err.Error(), "longer than") {
		t.Errorf("error %q does not say the event was too long", err)
	}
}

// Each data line of an unfinished event re-validates the joined data, so an event of many short
// lines ("[", "1,", "1,", …) would cost time quadratic in its length: the number of lines one
// event may join is capped.
func TestManyLineEventIsCapped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: [\n")
		io.WriteString(w, strings.Repeat("data: 1,\n", 200000))
		io.WriteString(w, "data: 1]\n\n")
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	err := c.Chat(context.Background(), req(), func(llm.Delta) error { return nil })
	if !errors.Is(err, llm.ErrBadStream) || !strings.Contains(err.Error(), "lines") {
		t.Fatalf("err = %v, want ErrBadStream naming the line count", err)
	}
}

// An oversized non-streamed reply or model list is reported as the server's reply being too
// large, not as net/http's "request body too large" (it is the response).
func TestOversizedWholeReply(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[{"id":"`+strings.Repeat("x", 5<<20)+`"}],"choices":[]}`)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	_, err := llm.Collect(context.Background(), c, req())
	if err == nil || strings.Contains(err.Error(), "request body") || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("chat: %v, want an error saying the reply is larger than the limit", err)
	}
	_, err = c.Models(context.Background())
	if err == nil || strings.Contains(err.Error(), "request body") || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("models: %v, want an error saying the reply is larger than the limit", err)
	}
}

// The connection defaults: a zero Config takes httpx's shared ones and this backend's own
// 120 s to the response headers.
func TestConfigDefaults(t *testing.T) {
	c, err := New(Config{URL: "127.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "openai" || c.conn.Retries != 2 || c.conn.Backoff != 250*time.Millisecond || c.conn.Stall != 60*time.Second {
		t.Errorf("defaults: %s %+v", c.Name(), c.conn)
	}
	if h := c.conn.HC.Transport.(*http.Transport).ResponseHeaderTimeout; h != 120*time.Second {
		t.Errorf("header timeout %s", h)
	}
	c, _ = New(Config{URL: "127.0.0.1:8080", Retries: -1})
	if c.conn.Retries != 0 {
		t.Errorf("Retries -1: %d", c.conn.Retries)
	}
	// Bad URLs are quoted with the scheme Parley assumed.
	for in, want := range map[string]string{"": "openai: no server URL", " ftp://x ": `openai: bad server URL "ftp://x"`,
		"h:bad port": `openai: bad server URL "http://h:bad port"`} {
		if _, err := New(Config{URL: in}); err == nil || err.Error() != want {
			t.Errorf("New(%q): %v, want %s", in, err, want)
		}
	}
}
