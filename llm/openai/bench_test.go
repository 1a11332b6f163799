package openai

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parley-voice/parley/llm"
)

const benchTokens = 1000

// benchStream is a realistic llama.cpp-style SSE answer of benchTokens content deltas.
func benchStream() []byte {
	var b bytes.Buffer
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}` + "\n\n")
	for i := 0; i < benchTokens; i++ {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732000000,"model":"m","system_fingerprint":"b4000-abc","choices":[{"index":0,"delta":{"content":" tok%d"},"finish_reason":null}]}`+"\n\n", i)
	}
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732000000,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1732000000,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1000,"total_tokens":1010}}` + "\n\ndata: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkClientOverhead streams benchTokens tokens from a local httptest server through the
// client and, in the same run, through a bare loop that only reads the lines (the least any
// client must do). overhead-ns/token is what decoding, assembling and delivering deltas cost.
func BenchmarkClientOverhead(b *testing.B) {
	body := benchStream()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{}
	req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}}
	ctx := context.Background()

	bare := func() {
		resp, err := hc.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)))
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		n := 0
		for sc.Scan() {
			n += len(sc.Bytes())
		}
		resp.Body.Close()
	}
	client := func() {
		n := 0
		if err := c.Chat(ctx, req, func(d llm.Delta) error { n += len(d.Content); return nil }); err != nil {
			b.Fatal(err)
		}
	}
	bare()
	client()
	b.ResetTimer()
	var tBare, tClient time.Duration
	for i := 0; i < b.N; i++ {
		// Interleaved so both see the same machine load.
		s := time.Now()
		bare()
		tBare += time.Since(s)
		s = time.Now()
		client()
		tClient += time.Since(s)
	}
	n := float64(b.N * benchTokens)
	b.ReportMetric(float64(tClient.Nanoseconds())/n, "client-ns/token")
	b.ReportMetric(float64(tBare.Nanoseconds())/n, "bare-ns/token")
	b.ReportMetric(float64((tClient-tBare).Nanoseconds())/n, "overhead-ns/token")
	b.ReportMetric(float64(tClient)/float64(tBare), "x-bare")
}
