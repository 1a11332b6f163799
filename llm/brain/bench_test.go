package brain

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/skills"
)

// BenchmarkTurnOverhead streams a 1000-token answer through Brain.Turn (think filter, caps,
// events, history) and, interleaved in the same run, through the bare backend client.
func BenchmarkTurnOverhead(b *testing.B) {
	const n = 1000
	var body bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&body, `data: {"choices":[{"index":0,"delta":{"content":" word%d."},"finish_reason":null}]}`+"\n\n", i)
	}
	body.WriteString(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body.Bytes())
	}))
	defer srv.Close()
	be := backend(b, srv.URL)
	sk, _ := skills.New(skills.Options{})
	br, err := New(Config{Backend: be, Model: "m", Skills: sk, MaxTokens: 1 << 20, NoTools: true})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}
	b.ResetTimer()
	var tBare, tBrain time.Duration
	for i := 0; i < b.N; i++ {
		s := time.Now()
		if err := be.Chat(ctx, req, func(llm.Delta) error { return nil }); err != nil {
			b.Fatal(err)
		}
		tBare += time.Since(s)
		br.Reset()
		s = time.Now()
		if _, err := br.Turn(ctx, Input{Text: "hi"}, func(Event) error { return nil }); err != nil {
			b.Fatal(err)
		}
		tBrain += time.Since(s)
	}
	tokens := float64(b.N * n)
	b.ReportMetric(float64(tBrain.Nanoseconds())/tokens, "brain-ns/token")
	b.ReportMetric(float64(tBare.Nanoseconds())/tokens, "client-ns/token")
	b.ReportMetric(float64((tBrain-tBare).Nanoseconds())/tokens, "overhead-ns/token")
}
