package discover

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/parley-voice/parley/llm"
)

func ollamaServer(models string) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"version":"0.12.3"}`) })
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"models":[`+models+`]}`) })
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"object":"list","data":[]}`) })
	return httptest.NewServer(mux)
}

func openaiServer(models string) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[`+models+`]}`)
	})
	return httptest.NewServer(mux)
}

// hanging accepts connections and never answers, until the test ends.
func hanging(t *testing.T) string {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv.URL
}

func deadURL() string {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

func TestSelectAuto(t *testing.T) {
	oll := ollamaServer(`{"name":"nomic-embed-text:latest"},{"name":"llama3.2:latest","details":{"family":"llama"}}`)
	defer oll.Close()
	lcpp := openaiServer(`{"id":"qwen2.5-7b-instruct-q4_k_m.gguf"}`)
	defer lcpp.Close()
	empty := ollamaServer(``)
	defer empty.Close()

	tests := []struct {
		name      string
		cands     []Candidate
		wantName  string
		wantModel string
	}{
		{"first answering wins", []Candidate{{"ollama", KindOllama, oll.URL}, {"llama.cpp", KindOpenAI, lcpp.URL}}, "ollama", "llama3.2:latest"},
		{"dead and hanging skipped", []Candidate{{"ollama", KindOllama, deadURL()}, {"x", KindOpenAI, hanging(t)}, {"llama.cpp", KindOpenAI, lcpp.URL}}, "llama.cpp", "qwen2.5-7b-instruct-q4_k_m.gguf"},
		{"server without models skipped", []Candidate{{"ollama", KindOllama, empty.URL}, {"lmstudio", KindOpenAI, lcpp.URL}}, "lmstudio", "qwen2.5-7b-instruct-q4_k_m.gguf"},
		{"openai server is not ollama", []Candidate{{"ollama", KindOllama, lcpp.URL}}, "skills", ""},
		{"nothing: skills", []Candidate{{"ollama", KindOllama, deadURL()}}, "skills", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := Select(context.Background(), Options{Candidates: tt.cands})
			if err != nil {
				t.Fatal(err)
			}
			if ch.Name != tt.wantName || ch.Model != tt.wantModel || (ch.Backend == nil) != (tt.wantName == "skills") {
				t.Errorf("got %s %q %v", ch.Name, ch.Model, ch.Backend)
			}
			if len(ch.Found) != len(tt.cands) {
				t.Errorf("found %d", len(ch.Found))
			}
		})
	}
}

func TestConfiguredWins(t *testing.T) {
	oll := ollamaServer(`{"name":"llama3.2:latest"}`)
	defer oll.Close()
	lcpp := openaiServer(`{"id":"local-model"}`)
	defer lcpp.Close()
	cands := []Candidate{{"ollama", KindOllama, oll.URL}}

	ch, err := Select(context.Background(), Options{URL: lcpp.URL, Candidates: cands})
	if err != nil || ch.Backend == nil || ch.Backend.Name() != "openai-compatible" || ch.Model != "local-model" {
		t.Fatalf("%+v %v", ch, err)
	}
	// An Ollama URL in auto mode uses the native API.
	ch, err = Select(context.Background(), Options{URL: oll.URL, Model: "qwen3"})
	if err != nil || ch.Backend.Name() != "ollama" || ch.Model != "qwen3" {
		t.Fatalf("%+v %v", ch, err)
	}
	// Forced kind.
	ch, err = Select(context.Background(), Options{URL: oll.URL, Kind: "openai", Model: "m"})
	if err != nil || ch.Backend.Name() == "ollama" {
		t.Fatalf("%+v %v", ch, err)
	}
	// Configured but down: still used when a model is set, with a warning.
	dead := deadURL()
	ch, err = Select(context.Background(), Options{URL: dead, Model: "m", Candidates: cands})
	if err != nil || ch.Backend == nil || ch.Warning == "" {
		t.Fatalf("%+v %v", ch, err)
	}
	// … and an error without a model.
	if _, err := Select(context.Background(), Options{URL: dead, Candidates: cands}); !errors.Is(err, llm.ErrUnreachable) {
		t.Fatalf("err %v", err)
	}
}

func TestSelectOptions(t *testing.T) {
	if ch, err := Select(context.Background(), Options{Kind: "skills", URL: "http://x"}); err != nil || ch.Backend != nil || ch.Name != "skills" {
		t.Errorf("%+v %v", ch, err)
	}
	if _, err := Select(context.Background(), Options{Kind: "gpt"}); err == nil {
		t.Error("bad kind accepted")
	}
	if _, err := Select(context.Background(), Options{URL: "http://"}); err == nil {
		t.Error("bad URL accepted")
	}
	// An explicit kind with nothing answering is an error, not a silent fallback.
	_, err := Select(context.Background(), Options{Kind: "ollama", Candidates: []Candidate{{"ollama", KindOllama, deadURL()}}})
	if !errors.Is(err, llm.ErrUnreachable) {
		t.Errorf("err %v", err)
	}
}
