package serve

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
)

// A realtime session thinks as the assistant does: the configured language model with
// llm.persona (it used Parley's default persona whatever the configuration said).
func TestRealtimeBrainFollowsTheConfig(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
	bodies := make(chan string, 8)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"qwen3-4b","object":"model"}]}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies <- string(b)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Arr, the sea.\"}}]}\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	llmSrv := httptest.NewServer(mux)
	defer llmSrv.Close()

	cfg := config.Default()
	cfg.LLM.Backend, cfg.LLM.URL = "openai", llmSrv.URL+"/v1"
	cfg.LLM.Persona = "You are Captain Parley, a pirate of few words."
	cfg.TTS.Engine = "espeak"
	l, err := Load(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := New(Options{Config: cfg.Serve, Engines: l.Engines})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.brain()
	if err != nil {
		t.Fatal(err)
	}
	var said strings.Builder
	if err := b.Answer(context.Background(), app.Transcript{Text: "tell me about the sea"}, nil, func(d string) error {
		said.WriteString(d)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(said.String(), "Arr") {
		t.Errorf("answer %q is not the model's", said.String())
	}
	select {
	case body := <-bodies:
		if !strings.Contains(body, "Captain Parley") {
			t.Errorf("the model was not given llm.persona: %s", body)
		}
	default:
		t.Fatal("the model was not asked")
	}
}
