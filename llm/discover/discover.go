// Package discover finds a local LLM server: it probes the usual endpoints (Ollama on 11434,
// llama.cpp's llama-server on 8080, LM Studio on 1234) quickly and concurrently, and builds
// the backend to use. A configured URL always wins over what probing finds.
package discover

import (
	"context"
	"errors"
	"fmt"
	"github.com/parley-voice/parley/gpu"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/builtin"
	"github.com/parley-voice/parley/llm/internal/httpx"
	"github.com/parley-voice/parley/llm/ollama"
	"github.com/parley-voice/parley/llm/openai"
)

// Backend kinds.
const (
	KindAuto   = "auto"
	KindOpenAI = "openai"
	KindOllama = "ollama"
	KindSkills = "skills"
	// KindBuiltin runs an installed onnx-community model in-process (llm/builtin).
	KindBuiltin = "builtin"
)

// Candidate is an endpoint to probe.
type Candidate struct {
	Name string // display name: "ollama", "llama.cpp", "lmstudio"
	Kind string // KindOllama or KindOpenAI
	URL  string
}

// DefaultCandidates are the usual local servers, in order of preference.
func DefaultCandidates() []Candidate {
	return []Candidate{
		{Name: "ollama", Kind: KindOllama, URL: ollama.DefaultURL},
		{Name: "llama.cpp", Kind: KindOpenAI, URL: "http://127.0.0.1:8080"},
		{Name: "lmstudio", Kind: KindOpenAI, URL: "http://127.0.0.1:1234"},
	}
}

// Found is the outcome of probing one candidate.
type Found struct {
	Candidate
	Models []llm.Model
	Err    error // nil: the server answered
}

// Options configure Select. The zero value probes the default candidates.
type Options struct {
	Kind       string        // KindAuto (default), KindOpenAI, KindOllama or KindSkills
	URL        string        // a configured server: it wins
	Model      string        // a configured model; empty: the server's first chat model
	APIKey     string        // for OpenAI-compatible servers
	Candidates []Candidate   // nil: DefaultCandidates()
	Timeout    time.Duration // per probe: 500ms (a configured URL gets at least 3s)
	Log        *slog.Logger
	// For KindBuiltin (and auto's fallback to an installed built-in model): the ONNX Runtime
	// session options, as every engine takes them (zero threads: gpu.DefaultIntraOpThreads).
	GPU gpu.Options
	// NoBuiltin keeps auto from falling back to an installed built-in model.
	NoBuiltin bool
}

// Choice is what Select picked.
type Choice struct {
	Backend llm.Backend // nil: offline skills
	Name    string      // "ollama", "llama.cpp", "openai", … or "skills"
	Model   string
	Found   []Found // every probe made, for the UI
	Warning string  // set when the configured server did not answer the probe
}

// Probe checks the candidates concurrently, each with its own short timeout, and returns
// their results in the candidates' order.
func Probe(ctx context.Context, cands []Candidate, timeout time.Duration) []Found {
	if timeout <= 0 {
		timeout = 500 * time.Millisecond
	}
	out := make([]Found, len(cands))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = probe(ctx, c, timeout, "")
		}()
	}
	wg.Wait()
	return out
}

func probe(ctx context.Context, c Candidate, timeout time.Duration, key string) Found {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	f := Found{Candidate: c}
	b, err := newBackend(c, key, timeout)
	if err != nil {
		f.Err = err
		return f
	}
	if o, ok := b.(*ollama.Client); ok {
		// /api/version tells Ollama apart from other servers that copy /api/tags.
		if _, err := o.Version(ctx); err != nil {
			f.Err = err
			return f
		}
	}
	f.Models, f.Err = b.Models(ctx)
	return f
}

// newBackend builds a client; probe > 0 gives it probe-sized timeouts and no retries.
func newBackend(c Candidate, key string, probe time.Duration) (llm.Backend, error) {
	switch c.Kind {
	case KindOllama:
		cfg := ollama.Config{URL: c.URL}
		if probe > 0 {
			cfg.ConnectTimeout, cfg.HeaderTimeout, cfg.Retries = probe, probe, -1
		}
		return ollama.New(cfg)
	case KindOpenAI:
		cfg := openai.Config{URL: c.URL, Name: c.Name, APIKey: key}
		if probe > 0 {
			cfg.ConnectTimeout, cfg.HeaderTimeout, cfg.Retries = probe, probe, -1
		}
		return openai.New(cfg)
	}
	return nil, fmt.Errorf("discover: unknown backend kind %q (want openai or ollama)", c.Kind)
}

// Select picks the backend and model: skills when asked; the configured URL when given
// (its kind detected when "auto"); else the first default candidate that answers and has a
// model; else the offline skills.
func Select(ctx context.Context, opt Options) (Choice, error) {
	kind := strings.ToLower(strings.TrimSpace(opt.Kind))
	if kind == "" {
		kind = KindAuto
	}
	switch kind {
	case KindAuto, KindOpenAI, KindOllama, KindSkills, KindBuiltin:
	default:
		return Choice{}, fmt.Errorf("discover: unknown backend %q (want auto, openai, ollama, builtin or skills)", opt.Kind)
	}
	if kind == KindSkills {
		return Choice{Name: KindSkills}, nil
	}
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if kind == KindBuiltin {
		return selectBuiltin(opt.Model, opt, log)
	}
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = 500 * time.Millisecond
	}

	if strings.TrimSpace(opt.URL) != "" {
		// A configured server may be remote: give it longer than a local probe.
		return selectConfigured(ctx, kind, opt, max(timeout, 3*time.Second), log)
	}

	cands := opt.Candidates
	if cands == nil {
		cands = DefaultCandidates()
	}
	if kind != KindAuto {
		var keep []Candidate
		for _, c := range cands {
			if c.Kind == kind {
				keep = append(keep, c)
			}
		}
		cands = keep
	}
	found := Probe(ctx, cands, timeout)
	for _, f := range found {
		if f.Err != nil {
			log.Debug("llm: probe", "name", f.Name, "url", f.URL, "err", f.Err)
			continue
		}
		model := opt.Model
		if model == "" {
			model = pickModel(f.Models)
		}
		if model == "" {
			log.Info("llm: server has no models", "name", f.Name, "url", f.URL)
			continue
		}
		b, err := newBackend(f.Candidate, opt.APIKey, 0)
		if err != nil {
			return Choice{}, err
		}
		return Choice{Backend: b, Name: f.Name, Model: model, Found: found}, nil
	}
	if kind != KindAuto {
		return Choice{Found: found}, fmt.Errorf("discover: no %s server answered on %s: %w", kind, urls(cands), llm.ErrUnreachable)
	}
	if !opt.NoBuiltin {
		// No server: an installed built-in model still gives an open conversation.
		if _, err := builtin.FindModel(""); err == nil {
			c, err := selectBuiltin("", opt, log)
			if err == nil {
				c.Found = found
				return c, nil
			}
			log.Warn("llm: built-in model failed to load", "err", err)
		}
	}
	return Choice{Name: KindSkills, Found: found}, nil
}

// selectBuiltin loads a built-in model: spec is a model id, a directory, or "" for the first
// installed one.
func selectBuiltin(spec string, opt Options, log *slog.Logger) (Choice, error) {
	dir, err := builtin.FindModel(spec)
	if err != nil {
		return Choice{}, err
	}
	b, err := builtin.New(dir, builtin.Config{GPU: opt.GPU, Log: log})
	if err != nil {
		return Choice{}, err
	}
	return Choice{Backend: b, Name: KindBuiltin, Model: b.ID()}, nil
}

func selectConfigured(ctx context.Context, kind string, opt Options, timeout time.Duration, log *slog.Logger) (Choice, error) {
	raw, u := httpx.ServerURL(opt.URL)
	if u == nil {
		return Choice{}, fmt.Errorf("discover: bad LLM URL %q", opt.URL)
	}
	var cands []Candidate
	if kind == KindAuto {
		// Ollama serves an OpenAI-compatible API too; its native one is preferred.
		cands = []Candidate{{Name: "ollama", Kind: KindOllama, URL: raw}, {Name: nameFor(u), Kind: KindOpenAI, URL: raw}}
	} else {
		name := KindOllama
		if kind == KindOpenAI {
			name = nameFor(u)
		}
		cands = []Candidate{{Name: name, Kind: kind, URL: raw}}
	}
	found := make([]Found, len(cands))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i] = probe(ctx, c, timeout, opt.APIKey)
		}()
	}
	wg.Wait()
	pick := -1
	for i, f := range found {
		if f.Err == nil {
			pick = i
			break
		}
	}
	ch := Choice{Found: found}
	if pick < 0 {
		// Down for now: use it anyway (the configured server wins), guessing its kind.
		c := cands[len(cands)-1]
		if kind == KindAuto && u.Port() == "11434" {
			c = cands[0]
		}
		ch.Warning = fmt.Sprintf("the configured LLM server %s did not answer: %v", opt.URL, errors.Join(errs(found)...))
		log.Warn("llm: " + ch.Warning)
		if opt.Model == "" {
			return ch, fmt.Errorf("discover: %s did not answer and no model is configured: %w", opt.URL, llm.ErrUnreachable)
		}
		pick = indexOf(cands, c)
	}
	c := cands[pick]
	b, err := newBackend(c, opt.APIKey, 0)
	if err != nil {
		return Choice{}, err
	}
	ch.Backend, ch.Name, ch.Model = b, c.Name, opt.Model
	if ch.Model == "" {
		ch.Model = pickModel(found[pick].Models)
		if ch.Model == "" {
			return ch, fmt.Errorf("discover: %s lists no models; pull one or set a model: %w", opt.URL, llm.ErrNoModel)
		}
	}
	return ch, nil
}

// pickModel chooses the first model that looks like a chat model.
func pickModel(ms []llm.Model) string {
	for _, m := range ms {
		id := strings.ToLower(m.ID)
		if strings.Contains(id, "embed") || strings.Contains(id, "rerank") || strings.Contains(id, "whisper") || strings.Contains(id, "tts") {
			continue
		}
		return m.ID
	}
	return ""
}

func nameFor(u *url.URL) string {
	switch u.Port() {
	case "8080":
		return "llama.cpp"
	case "1234":
		return "lmstudio"
	case "11434":
		return "ollama"
	}
	if strings.Contains(u.Host, "openai.com") {
		return "openai"
	}
	return "openai-compatible"
}

func errs(fs []Found) []error {
	var out []error
	for _, f := range fs {
		if f.Err != nil {
			out = append(out, f.Err)
		}
	}
	return out
}

func indexOf(cs []Candidate, c Candidate) int {
	for i := range cs {
		if cs[i] == c {
			return i
		}
	}
	return 0
}

func urls(cs []Candidate) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.URL)
	}
	return strings.Join(s, ", ")
}
