package serve

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/parley-voice/parley/app/config"
)

// With llm.backend auto and no llm.url the server looks for a local LLM server as the
// assistant does: here a fake LM Studio on its usual port.
func TestBackendDiscoversLocalServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:1234")
	if err != nil {
		t.Skip("port 1234 (LM Studio's) is taken here:", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"qwen3-4b","object":"model"}]}`)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	cfg := config.Default()
	b, model, err := backend(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b == nil || model != "qwen3-4b" {
		t.Fatalf("backend %v, model %q: the local server was not found", b, model)
	}

	// llm.backend skills never probes; an explicit URL is used as configured
	cfg.LLM.Backend = "skills"
	if b, _, err := backend(context.Background(), cfg, nil); b != nil || err != nil {
		t.Errorf("skills: backend %v, err %v", b, err)
	}
	cfg.LLM.Backend, cfg.LLM.URL, cfg.LLM.Model = "auto", "http://127.0.0.1:1234/v1", "other"
	if b, model, err := backend(context.Background(), cfg, nil); b == nil || model != "other" || err != nil {
		t.Errorf("configured: backend %v, model %q, err %v", b, model, err)
	}
}
