package factory

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/llm"
)

// isolate gives the test empty data and models directories.
func isolate(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
	return dir
}

func TestGPUIsRuntime(t *testing.T) {
	cfg := config.Default()
	cfg.Runtime = config.Runtime{Provider: "cuda:1", IntraOpThreads: 3, InterOpThreads: 2}
	g := New(cfg, nil).GPU()
	if g.Provider != "cuda:1" || g.IntraOpThreads != 3 || g.InterOpThreads != 2 {
		t.Errorf("session options %+v from runtime %+v", g, cfg.Runtime)
	}
}

func TestFindASR(t *testing.T) {
	isolate(t)
	f := New(nil, nil)
	// nothing installed: the demo model the binary embeds, demo-grade
	m, err := f.FindASR(context.Background(), "")
	if err != nil || !m.Demo {
		t.Fatalf("nothing installed: %+v, %v", m, err)
	}
	if n := ASRNote(m, err); n == nil || n.Part != app.PartASR || n.Kind != app.NoteDemo || n.Model != RealASR ||
		!strings.Contains(n.Message, "demo-grade") || !strings.Contains(n.Message, m.ID) {
		t.Errorf("demo note %+v", n)
	}
	if !errors.Is(ErrNoASR, assets.ErrNotInstalled) {
		t.Error("ErrNoASR is not assets.ErrNotInstalled")
	}
	if n := ASRNote(Model{}, ErrNoASR); n == nil || n.Kind != app.NoteMissing || n.Model != RealASR {
		t.Errorf("nothing at all: note %+v", n)
	}
	// a model named in the configuration that is not installed is named in the error
	cfg := config.Default()
	cfg.ASR.Model = "sensevoice-small"
	m, err = New(cfg, nil).FindASR(context.Background(), "")
	if err == nil || errors.Is(err, ErrNoASR) || !strings.Contains(err.Error(), "sensevoice-small") {
		t.Fatalf("asr.model not installed: %+v, %v", m, err)
	}
	if n := ASRNote(m, err); n == nil || n.Kind != app.NoteMissing || n.Model != "sensevoice-small" {
		t.Errorf("note %+v", n)
	}
	// a directory is taken as it is; the demo model's registry entry says it is demo-grade
	dir := filepath.Join("..", "..", "testdata", "sensevoice", "tiny")
	if m, err = f.FindASR(context.Background(), dir); err != nil || m.Path != dir || m.Demo {
		t.Errorf("directory: %+v, %v", m, err)
	}
	if n := ASRNote(m, nil); n != nil {
		t.Errorf("a real model: note %+v", n)
	}
}

func TestStorePath(t *testing.T) {
	dir := isolate(t)
	cfg := config.Default()
	f := New(cfg, nil)
	if got, want := f.StorePath(""), filepath.Join(dir, "data", "parley", "parley.db"); got != want {
		t.Errorf("default: %s, want %s", got, want)
	}
	cfg.Store.Path = "/var/lib/p.db"
	if got := f.StorePath(""); got != "/var/lib/p.db" {
		t.Errorf("store.path: %s", got)
	}
	if got := f.StorePath("x.db"); got != "x.db" {
		t.Errorf("given: %s", got)
	}
}

// fakeOpenAI is an OpenAI-compatible server listing one model.
func fakeOpenAI(t *testing.T, model string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	list := func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"`+model+`","object":"model"}]}`)
	}
	mux.HandleFunc("GET /v1/models", list)
	mux.HandleFunc("GET /models", list)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// LLM never fails for want of a server: what cannot be used leaves the offline skills, and
// a note says why.
func TestLLM(t *testing.T) {
	isolate(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	live := fakeOpenAI(t, "qwen3-4b")
	cases := []struct {
		name             string
		llm              config.LLM
		model            string // "" = the offline skills
		kind             app.NoteKind
		noteErr          error
		strictErrs, warn bool
	}{
		{name: "skills", llm: config.LLM{Backend: "skills"}, kind: app.NoteFallback},
		{name: "configured server down, no model", llm: config.LLM{Backend: "auto", URL: deadURL},
			kind: app.NoteFallback, noteErr: llm.ErrUnreachable, strictErrs: true},
		{name: "configured server down, model set", llm: config.LLM{Backend: "openai", URL: deadURL, Model: "m"},
			model: "m", kind: app.NoteWarning, warn: true},
		{name: "configured server", llm: config.LLM{Backend: "auto", URL: live.URL + "/v1"}, model: "qwen3-4b"},
		{name: "built-in model not installed", llm: config.LLM{Backend: "builtin"},
			kind: app.NoteFallback, noteErr: llm.ErrNoModel, strictErrs: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.LLM = c.llm
			f := New(cfg, nil)
			_, serr := f.SelectLLM(context.Background())
			if (serr != nil) != c.strictErrs {
				t.Errorf("SelectLLM: %v", serr)
			}
			choice, notes, err := f.LLM(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if (choice.Backend == nil) != (c.model == "") || choice.Model != c.model {
				t.Errorf("backend %v, model %q; want model %q", choice.Backend, choice.Model, c.model)
			}
			if c.kind == "" {
				if len(notes) != 0 {
					t.Errorf("notes %+v", notes)
				}
				return
			}
			if len(notes) != 1 || notes[0].Part != app.PartBrain || notes[0].Kind != c.kind || !strings.HasPrefix(notes[0].Message, "brain: ") {
				t.Fatalf("notes %+v, want one of kind %s", notes, c.kind)
			}
			if c.noteErr != nil && !errors.Is(notes[0].Err, c.noteErr) {
				t.Errorf("note's error %v, want %v", notes[0].Err, c.noteErr)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := config.Default()
	cfg.LLM = config.LLM{Backend: "auto", URL: deadURL}
	if _, _, err := New(cfg, nil).LLM(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// With llm.backend auto and no llm.url the factory looks for a local LLM server (for the
// assistant and the server alike): here a fake LM Studio on its usual port.
func TestLLMDiscoversLocalServer(t *testing.T) {
	isolate(t)
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

	choice, notes, err := New(config.Default(), nil).LLM(context.Background())
	if err != nil || choice.Backend == nil || choice.Model != "qwen3-4b" || len(notes) != 0 {
		t.Fatalf("backend %v, model %q, notes %+v, err %v: the local server was not found", choice.Backend, choice.Model, notes, err)
	}
}

func TestSkillsTimers(t *testing.T) {
	dir := t.TempDir()
	sk, err := New(nil, nil).Skills(dir)
	if err != nil || sk == nil {
		t.Fatal(err)
	}
	// a timers file that cannot be read is kept, and the skills work with timers in memory
	bad := t.TempDir()
	if err := writeFile(filepath.Join(bad, "timers.json"), "{not json"); err != nil {
		t.Fatal(err)
	}
	sk, err = New(nil, nil).Skills(bad)
	if sk == nil || err == nil {
		t.Fatalf("unreadable timers: skills %v, err %v", sk, err)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

// An empty tts.engine is the setting's default, "auto", both where the voice is named and where
// it is opened (it once named auto's choice but opened espeak-ng).
// asr.words reaches the recogniser the factory opens unless the caller gives words of its own
// (an empty list too): a bad word in the configuration (Load would refuse it; set here
// directly) fails the opening, a caller's empty list opens.
func TestRecognizerTakesASRWords(t *testing.T) {
	isolate(t)
	gputest.RequireORT(t)
	cfg := config.Default()
	cfg.ASR.Words = []string{"anouk", "two words"}
	f := New(cfg, nil)
	if _, _, err := f.Recognizer(context.Background(), "", asr.Config{}); !errors.Is(err, asr.ErrConfig) ||
		!strings.Contains(err.Error(), "two words") {
		t.Errorf("asr.words not passed on: %v", err)
	}
	r, _, err := f.Recognizer(context.Background(), "", asr.Config{Words: []string{}})
	if err != nil {
		t.Fatalf("the caller's own (empty) words: %v", err)
	}
	r.Close()
}

func TestVoiceEngineNamedIsOpened(t *testing.T) {
	if EngineName("") != EngineName("auto") || EngineName("AUTO") != EngineName("auto") {
		t.Fatalf("empty/AUTO: %q %q, auto: %q", EngineName(""), EngineName("AUTO"), EngineName("auto"))
	}
	if got := EngineName("espeak-ng"); got != "espeak" {
		t.Errorf("espeak-ng: %q", got)
	}
	gputest.RequireORT(t)
	cfg := config.Default()
	cfg.TTS.Engine = ""
	e, err := New(cfg, nil).Voice(Voice{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got := e.Capabilities().Engine
	if got == "espeak-ng" {
		got = "espeak"
	}
	if got != EngineName("") {
		t.Errorf("opened %s, named %s", got, EngineName(""))
	}
}

// A face's one factory is passed down as it is; a part with a configuration of its own gets
// a factory of that configuration with the same logger.
func TestWith(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	log := slog.New(slog.DiscardHandler)
	f := New(cfg, log)
	if f.With(cfg) != f {
		t.Error("With(its own configuration) is not the factory itself")
	}
	c := *cfg
	c.LLM.Model = "other"
	g := f.With(&c)
	if g == f || g.Config() != &c || g.Log() != log {
		t.Errorf("With(another configuration): same %v, config %p (want %p), log kept %v", g == f, g.Config(), &c, g.Log() == log)
	}
	if New(nil, nil).Log() == nil {
		t.Error("a factory without a logger has a nil Log")
	}
}
