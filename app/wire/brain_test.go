package wire_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/serve"
	"github.com/parley-voice/parley/app/wire"
)

// The server and the assistant, two recipes over one factory, choose the same brain, when the
// language model answers and when it cannot be used (the offline skills then, for both).
func TestServerAndAssistantChooseTheSameBrain(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models")) // no built-in model, no Silero
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"qwen3-4b","object":"model"}]}`)
	})
	live := httptest.NewServer(mux)
	defer live.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()

	for _, c := range []struct {
		name string
		llm  config.LLM
		want string // the assistant's brain.Source()
	}{
		{"skills", config.LLM{Backend: "skills"}, "skills (offline)"},
		{"configured server", config.LLM{Backend: "auto", URL: live.URL + "/v1"}, "openai-compatible qwen3-4b at " + live.URL + "/v1"},
		{"configured server and model", config.LLM{Backend: "openai", URL: live.URL + "/v1", Model: "qwen3-4b"}, "openai-compatible qwen3-4b at " + live.URL + "/v1"},
		{"configured server down", config.LLM{Backend: "auto", URL: dead.URL}, "skills (offline)"},
		{"built-in model not installed", config.LLM{Backend: "builtin"}, "skills (offline)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.LLM = c.llm
			cfg.LLM.MaxTokens = 64
			cfg.TTS.Engine = "espeak"
			f := factory.New(cfg, nil)
			a, err := wire.BuildFrom(context.Background(), f, wire.Options{NoAudio: true, NoHistory: true})
			if err != nil {
				t.Fatalf("assistant: %v", err)
			}
			assistant := a.Brain.Source()
			a.Close()
			l, err := serve.LoadFrom(context.Background(), f)
			if err != nil {
				t.Fatalf("server: %v", err)
			}
			defer l.Close()
			if l.Engines.Factory != f {
				t.Error("the server does not keep the factory it was loaded from")
			}
			server := "skills (offline)"
			if b := l.Engines.LLM; b != nil {
				server = b.Name() + " " + l.Engines.LLMModel + " at " + b.URL()
			}
			if assistant != c.want || server != assistant {
				t.Errorf("assistant %q, server %q; want %q for both", assistant, server, c.want)
			}
		})
	}
}
