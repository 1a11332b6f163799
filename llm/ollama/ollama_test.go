package ollama

import (
	"bufio"
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
	"testing"
	"time"

	"github.com/parley-voice/parley/llm"
)

func replay(t *testing.T, file string) http.HandlerFunc {
	t.Helper()
	f, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		sc := bufio.NewScanner(strings.NewReader(string(f)))
		for sc.Scan() {
			fmt.Fprintln(w, sc.Text())
			w.(http.Flusher).Flush()
		}
	}
}

func client(t *testing.T, url string) *Client {
	t.Helper()
	c, err := New(Config{URL: url, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func req() *llm.Request {
	return &llm.Request{Model: "qwen3:0.6b", Messages: []llm.Message{{Role: "user", Content: "hi"}}}
}

func TestChatStream(t *testing.T) {
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/chat" {
			t.Errorf("path %s", r.URL.Path)
		}
		json.NewDecoder(r.Body).Decode(&body)
		replay(t, "chat.ndjson")(w, r)
	}))
	defer srv.Close()
	r := req()
	r.MaxTokens = 99
	think := true
	r.Think = &think
	d, err := llm.Collect(context.Background(), client(t, srv.URL), r)
	if err != nil {
		t.Fatal(err)
	}
	if d.Content != "Hi there." || d.Reasoning != "Greeting; be brief." || d.FinishReason != "stop" {
		t.Errorf("%+v", d)
	}
	if d.Usage == nil || d.Usage.PromptTokens != 26 || d.Usage.CompletionTokens != 5 {
		t.Errorf("usage %+v", d.Usage)
	}
	if body["keep_alive"] != "30m0s" || body["stream"] != true || body["think"] != true {
		t.Errorf("body %v", body)
	}
	if opts, _ := body["options"].(map[string]any); opts["num_predict"] != float64(99) {
		t.Errorf("options %v", body["options"])
	}
}

func TestToolCalls(t *testing.T) {
	var body struct {
		Messages []message `json:"messages"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewDecoder(r.Body).Decode(&body)
		replay(t, "tools.ndjson")(w, r)
	}))
	defer srv.Close()
	r := req()
	// A history with a previous tool round: arguments must travel as JSON objects and the
	// tool result must name its tool.
	r.Messages = append(r.Messages,
		llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "call_0", Type: "function", Function: llm.FunctionCall{Name: "get_time", Arguments: `{"zone":"UTC"}`}}}},
		llm.Message{Role: "tool", ToolCallID: "call_0", Content: `{"time":"10:00"}`},
	)
	d, err := llm.Collect(context.Background(), client(t, srv.URL), r)
	if err != nil {
		t.Fatal(err)
	}
	if d.FinishReason != llm.FinishToolCalls || len(d.ToolCalls) != 1 {
		t.Fatalf("%+v", d)
	}
	tc := d.ToolCalls[0]
	if tc.Function.Name != "set_timer" || tc.ID == "" {
		t.Errorf("%+v", tc)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil || args["seconds"] != float64(300) {
		t.Errorf("args %q: %v", tc.Function.Arguments, err)
	}
	if len(body.Messages) != 3 || string(body.Messages[1].ToolCalls[0].Function.Arguments) != `{"zone":"UTC"}` || body.Messages[2].ToolName != "get_time" {
		t.Errorf("sent %+v", body.Messages)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name    string
		h       http.HandlerFunc
		want    error
		content string
	}{
		{"mid-stream error", replay(t, "error.ndjson"), llm.ErrServer, "Once"},
		{"invalid JSON", replay(t, "invalid.ndjson"), llm.ErrBadStream, "Once"},
		{"cut mid-way", replay(t, "cut.ndjson"), llm.ErrTruncated, "Once upon"},
		{"wrong model", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(404)
			io.WriteString(w, `{"error":"model \"qwen3:0.6b\" not found, try pulling it first"}`)
		}, llm.ErrModelNotFound, ""},
		{"500", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			io.WriteString(w, `{"error":"llama runner process has terminated: signal: killed"}`)
		}, llm.ErrServer, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.h)
			defer srv.Close()
			d, err := llm.Collect(context.Background(), client(t, srv.URL), req())
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if d.Content != tt.content {
				t.Errorf("content %q want %q", d.Content, tt.content)
			}
		})
	}
}

func TestServerDown(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c := client(t, addr)
	if err := c.Health(context.Background()); !errors.Is(err, llm.ErrUnreachable) {
		t.Fatalf("health: %v", err)
	}
	if err := c.Chat(context.Background(), req(), func(llm.Delta) error { return nil }); !errors.Is(err, llm.ErrUnreachable) {
		t.Fatalf("chat: %v", err)
	}
}

func TestCancellationReachesServer(t *testing.T) {
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(gone)
		for i := 0; ; i++ {
			fmt.Fprintf(w, `{"model":"m","message":{"role":"assistant","content":"t%d "},"done":false}`+"\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := client(t, srv.URL).Chat(ctx, req(), func(llm.Delta) error {
		if n++; n == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("server never saw the disconnect")
	}
}

func TestModelsHealthPull(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"models":[{"name":"llama3.2:latest","model":"llama3.2:latest","modified_at":"2026-10-01T10:00:00Z","size":2019393189,"digest":"a80c4f17acd5","details":{"parent_model":"","format":"gguf","family":"llama","families":["llama"],"parameter_size":"3.2B","quantization_level":"Q4_K_M"}}]}`)
	})
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"version":"0.12.3"}`)
	})
	mux.HandleFunc("POST /api/pull", func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b)
		if b["model"] == "nope" {
			io.WriteString(w, `{"status":"pulling manifest"}`+"\n"+`{"error":"pull model manifest: file does not exist"}`+"\n")
			return
		}
		replay(t, "pull.ndjson")(w, r)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := client(t, srv.URL+"/")
	ms, err := c.Models(context.Background())
	if err != nil || len(ms) != 1 || ms[0].ID != "llama3.2:latest" || ms[0].Family != "llama" {
		t.Fatalf("%+v %v", ms, err)
	}
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	var last Progress
	var n int
	if err := c.Pull(context.Background(), "llama3.2", func(p Progress) { last = p; n++ }); err != nil {
		t.Fatal(err)
	}
	if n != 7 || last.Status != "success" {
		t.Errorf("%d updates, last %+v", n, last)
	}
	if err := c.Pull(context.Background(), "nope", nil); !errors.Is(err, llm.ErrModelNotFound) {
		t.Errorf("pull nope: %v", err)
	}
}

func TestProgressFraction(t *testing.T) {
	if f := (Progress{Total: 4, Completed: 1}).Fraction(); f != 0.25 {
		t.Error(f)
	}
	if f := (Progress{}).Fraction(); f != -1 {
		t.Error(f)
	}
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzChatStream feeds arbitrary bytes as an /api/chat response body: no panic, and a
// stream without a final done message never passes as complete.
func FuzzChatStream(f *testing.F) {
	for _, name := range []string{"chat.ndjson", "tools.ndjson", "error.ndjson", "invalid.ndjson", "cut.ndjson"} {
		b, _ := os.ReadFile("testdata/" + name)
		f.Add(string(b))
	}
	f.Add(`{"done":true}` + "\n" + `{"done":true}`)
	f.Fuzz(func(t *testing.T, body string) {
		hc := &http.Client{Transport: rtFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}}, nil
		})}
		c, err := New(Config{URL: "http://fuzz", HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		var finished bool
		err = c.Chat(context.Background(), req(), func(d llm.Delta) error {
			if d.FinishReason != "" {
				finished = true
			}
			return nil
		})
		if err == nil && !finished {
			t.Fatalf("stream %q accepted without a done message", body)
		}
	})
}

func TestBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "http://127.0.0.1:11434",
		"127.0.0.1:11434":           "http://127.0.0.1:11434",
		"http://h:11434/":           "http://h:11434",
		"http://h:11434/api":        "http://h:11434",
		"http://h:11434/v1/":        "http://h:11434",
		"https://proxy/ollama/api/": "https://proxy/ollama",
	} {
		c, err := New(Config{URL: in})
		if err != nil {
			t.Errorf("New(%q): %v", in, err)
			continue
		}
		if c.URL() != want {
			t.Errorf("New(%q).URL() = %q, want %q", in, c.URL(), want)
		}
	}
	if _, err := New(Config{URL: "ftp://x"}); err == nil {
		t.Error("ftp accepted")
	}
}

// A server (or proxy) that keeps the response open after the final "done" message must not
// hold the finished turn until the stall watchdog fires: the answer ends with "done".
func TestDoneEndsTheStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"model":"m","message":{"role":"assistant","content":"Hi."},"done":false}`+"\n")
		io.WriteString(w, `{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop"}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // never ends the body on its own
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL, Retries: -1, StallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	err = c.Chat(context.Background(), req(), func(d llm.Delta) error { text += d.Content; return nil })
	if err != nil || text != "Hi." {
		t.Fatalf("Chat = %v, text %q; want no error and %q", err, text, "Hi.")
	}
}

// The connection defaults: a zero Config takes httpx's shared ones and this backend's own
// 300 s to the response headers (Ollama loads the model first).
func TestConfigDefaults(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c.URL() != DefaultURL || c.conn.Retries != 2 || c.conn.Backoff != 250*time.Millisecond || c.conn.Stall != 60*time.Second {
		t.Errorf("defaults: %s %+v", c.URL(), c.conn)
	}
	if h := c.conn.HC.Transport.(*http.Transport).ResponseHeaderTimeout; h != 300*time.Second {
		t.Errorf("header timeout %s", h)
	}
	c, _ = New(Config{Retries: -1, StallTimeout: -1})
	if c.conn.Retries != 0 || c.conn.Stall != -1 {
		t.Errorf("Retries -1, StallTimeout -1: %+v", c.conn)
	}
	// Bad URLs are quoted as configured.
	for in, want := range map[string]string{" ftp://x ": `ollama: bad server URL " ftp://x "`, "h:bad port": `ollama: bad server URL "h:bad port"`} {
		if _, err := New(Config{URL: in}); err == nil || err.Error() != want {
			t.Errorf("New(%q): %v, want %s", in, err, want)
		}
	}
}
