package serve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// rtClient dials the realtime endpoint with manual turns and reads events as maps.
type rtClient struct {
	t   *testing.T
	ctx context.Context
	c   *websocket.Conn
}

func dialRealtime(t *testing.T, ctx context.Context, base string) *rtClient {
	t.Helper()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/v1/realtime", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	c.SetReadLimit(1 << 20)
	r := &rtClient{t: t, ctx: ctx, c: c}
	if m := r.read(); m["type"] != "session.created" {
		t.Fatalf("first event %v", m)
	}
	r.writeRaw([]byte(`{"type":"session.update","session":{"turn_detection":null}}`))
	if m := r.read(); m["type"] != "session.updated" {
		t.Fatalf("update: %v", m)
	}
	return r
}

func (r *rtClient) read() map[string]any {
	r.t.Helper()
	_, b, err := r.c.Read(r.ctx)
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		r.t.Fatalf("non-JSON %q", b)
	}
	return m
}

func (r *rtClient) writeRaw(b []byte) {
	r.t.Helper()
	if err := r.c.Write(r.ctx, websocket.MessageText, b); err != nil {
		r.t.Fatal(err)
	}
}

// appendOf is an input_audio_buffer.append of n bytes of PCM (a quiet tone).
func appendOf(n int) []byte {
	pcm := make([]byte, n)
	for i := 0; i+1 < n; i += 2 {
		pcm[i] = byte(i / 2 % 50)
	}
	b, _ := json.Marshal(map[string]any{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(pcm)})
	return b
}

// marker sends an event the server does not know: its error answer, carrying the id, says that
// every earlier event was handled. Returns the events before it.
func (r *rtClient) marker(id string) []map[string]any {
	r.t.Helper()
	r.writeRaw([]byte(`{"type":"parley.marker","event_id":"` + id + `"}`))
	var before []map[string]any
	for {
		m := r.read()
		if e, ok := m["error"].(map[string]any); ok && e["event_id"] == id {
			return before
		}
		before = append(before, m)
	}
}

func errorCode(m map[string]any) string {
	if e, ok := m["error"].(map[string]any); ok && m["type"] == "error" {
		s, _ := e["code"].(string)
		return s
	}
	return ""
}

func TestRealtimeOneLargeAppend(t *testing.T) {
	_, base, _, _, _ := serveAll(t, Engines{ASR: &fakeASR{}, TTS: &fakeTTS{}, Brain: echoBrain{}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := dialRealtime(t, ctx, base)
	// 60 s of 24 kHz audio in one event: 3.8 MiB of base64 (over the 768 KiB the server took before)
	msg := appendOf(60 * 24000 * 2)
	t.Logf("one append of %.1f MiB", float64(len(msg))/(1<<20))
	r.writeRaw(msg)
	for _, m := range r.marker("after-append") {
		if m["type"] == "error" {
			t.Fatalf("the large append was refused: %v", m)
		}
	}
	r.writeRaw([]byte(`{"type":"input_audio_buffer.commit"}`))
	for {
		m := r.read()
		if m["type"] == "error" {
			t.Fatalf("commit: %v", m)
		}
		if m["type"] == "input_audio_buffer.committed" {
			break
		}
	}
}

func TestRealtimeTooLargeAnEventIsAnErrorThen1009(t *testing.T) {
	_, base, _, _, _ := serveAll(t, Engines{ASR: &fakeASR{}, TTS: &fakeTTS{}, Brain: echoBrain{}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := dialRealtime(t, ctx, base)
	go r.c.Write(ctx, websocket.MessageText, appendOf(12<<20)) // 16 MiB of base64
	m := r.read()
	if errorCode(m) != "message_too_large" {
		t.Fatalf("want a message_too_large error event, got %v", m)
	}
	_, _, err := r.c.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
		t.Errorf("close status %v (%v), want 1009", got, err)
	}
}

func TestRealtimeAppendOverTheMemoryBudgetIsBusyAndTheSessionGoesOn(t *testing.T) {
	_, base, _, _, _ := serveAll(t, Engines{ASR: &fakeASR{}, TTS: &fakeTTS{}, Brain: echoBrain{}},
		func(o *Options) { o.MaxAudioMemory = 1 << 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := dialRealtime(t, ctx, base)
	r.writeRaw(appendOf(2 << 20))
	busy := false
	for _, m := range r.marker("after-big") {
		busy = busy || errorCode(m) == "server_busy"
	}
	if !busy {
		t.Fatal("an append the memory budget cannot hold was not answered with server_busy")
	}
	// the session goes on: a normal append is taken
	r.writeRaw(appendOf(4800))
	for _, m := range r.marker("after-small") {
		if m["type"] == "error" {
			t.Fatalf("small append after a busy one: %v", m)
		}
	}
}

func TestBetaClientDetection(t *testing.T) {
	for _, c := range []struct {
		header, proto string
		want          bool
	}{
		{"realtime=v1", "", true},
		{"assistants=v2, realtime=v1", "", true},
		{"", "realtime, openai-beta.realtime-v1", true},
		{"", "realtime", false},
		{"assistants=v2", "", false},
	} {
		r := httptest.NewRequest("GET", "/v1/realtime", nil)
		if c.header != "" {
			r.Header.Set("OpenAI-Beta", c.header)
		}
		if c.proto != "" {
			r.Header.Set("Sec-WebSocket-Protocol", c.proto)
		}
		if got := betaClient(r); got != c.want {
			t.Errorf("OpenAI-Beta %q, protocols %q: beta %v, want %v", c.header, c.proto, got, c.want)
		}
	}
}

// TestRealtimeBetaHeaderOverWebSocket: a client that says OpenAI-Beta: realtime=v1 gets beta
// event names from the server.
func TestRealtimeBetaHeaderOverWebSocket(t *testing.T) {
	_, base, _, _, _ := serveAll(t, Engines{ASR: &fakeASR{}, TTS: &fakeTTS{}, Brain: echoBrain{}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := http.Header{}
	h.Set("OpenAI-Beta", "realtime=v1")
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/v1/realtime", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	r := &rtClient{t: t, ctx: ctx, c: c}
	r.read() // session.created
	r.writeRaw([]byte(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}}`))
	r.writeRaw([]byte(`{"type":"response.create"}`))
	seen := map[string]bool{}
	for {
		m := r.read()
		typ, _ := m["type"].(string)
		seen[typ] = true
		if typ == "response.done" {
			break
		}
	}
	if !seen["conversation.item.created"] || !seen["response.audio.delta"] || seen["response.output_audio.delta"] || seen["conversation.item.added"] {
		t.Errorf("a beta client saw %v", seen)
	}
}
