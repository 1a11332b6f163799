package ollama

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

func benchStream() []byte {
	var b bytes.Buffer
	for i := 0; i < benchTokens; i++ {
		fmt.Fprintf(&b, `{"model":"llama3.2","created_at":"2026-11-22T06:00:00.%06dZ","message":{"role":"assistant","content":" tok%d"},"done":false}`+"\n", i, i)
	}
	b.WriteString(`{"model":"llama3.2","created_at":"2026-11-22T06:00:01Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":1,"prompt_eval_count":10,"eval_count":1000}` + "\n")
	return b.Bytes()
}

// BenchmarkClientOverhead: as in llm/openai, the client against a bare line-reading loop on
// the same local stream, interleaved in one run.
func BenchmarkClientOverhead(b *testing.B) {
	body := benchStream()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write(body)
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{}
	req := &llm.Request{Model: "llama3.2", Messages: []llm.Message{{Role: "user", Content: "hi"}}}
	ctx := context.Background()
	bare := func() {
		resp, err := hc.Post(srv.URL+"/api/chat", "application/json", bytes.NewReader([]byte(`{"model":"llama3.2","stream":true,"messages":[{"role":"user","content":"hi"}]}`)))
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
		if err := c.Chat(ctx, req, func(llm.Delta) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	bare()
	client()
	b.ResetTimer()
	var tBare, tClient time.Duration
	for i := 0; i < b.N; i++ {
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
