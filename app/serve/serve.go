// Package serve is Parley's headless face (`parley --serve`): an OpenAI-compatible HTTP API
// (audio transcriptions, speech, chat completions, models), a realtime voice session over
// WebSocket (a subset of OpenAI's Realtime events, with server VAD and barge-in) and Home
// Assistant's Wyoming protocol on TCP for speech recognition and synthesis.
//
// Engines are reached through small interfaces (Recognizer, tts.Engine, llm.Backend,
// app.Brain), so handlers run on fakes in unit tests and on the real engines in the product.
// Every engine sits behind a Limiter: a few jobs run, a bounded number wait, and the rest
// are refused at once with 429 and Retry-After.
package serve

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/serve/wyoming"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/lang"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/brain"
	"github.com/parley-voice/parley/llm/skills"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"
)

// Recognizer is the speech recognizer with all of asr's options and results (the HTTP API
// returns word timings and segments); *asr.Recognizer is one. Realtime sessions and Wyoming
// hear through app.Transcriber, which the server makes of it.
type Recognizer interface {
	TranscribeWith(ctx context.Context, samples []float32, o asr.Options) (*asr.Result, error)
	Options() asr.Options
}

// VoiceLibrary is the user's voice library; *voices.Library is one.
type VoiceLibrary interface {
	Get(name string) (*voices.Voice, error)
	List() ([]*voices.Voice, []error)
}

// Engines are what the server serves. Any may be nil: requests that need a missing engine
// get a clear 503 (or the protocol's own error), the rest keep working.
type Engines struct {
	ASR          Recognizer
	ASRModel     string   // model id shown in /v1/models and Wyoming info
	ASRLanguages []string // languages the model knows (default lang.Codes: asr.Languages minus auto)
	ASRNote      string   // e.g. "demo-grade model"

	TTS       tts.Engine
	TTSEngine string       // engine name (espeak, kokoro); default Capabilities().Engine
	Voices    VoiceLibrary // optional library voices

	LLM      llm.Backend    // chat backend; nil: the offline skills answer
	LLMModel string         // model asked of LLM
	Skills   *skills.Engine // offline brain; nil: one is made

	// Brain answers realtime turns; nil: built from LLM/Skills.
	Brain app.Brain
	// NewBrain makes a realtime session's brain over Skills as the configuration says (the
	// language model, llm.persona, llm.max_tokens): Load sets it through app/factory, so a
	// session thinks as the assistant does. nil: LLM/Skills with Parley's default persona.
	NewBrain func(skills *skills.Engine) (*brain.Brain, error)
	// NewVAD returns a fresh voice activity detector per realtime session; nil: the energy
	// detector of package app.
	NewVAD func() (app.VAD, error)
	// Tokens counts the tokens of a text with the model's tokenizer (Load: the installed
	// Qwen3 tokenizer), for usage an upstream does not report; nil: about 4 characters a
	// token.
	Tokens func(text string) int
	// Factory is what the engines were opened with (Load sets it): the server opens what it
	// makes itself through it (the offline skills and a realtime session's brain when
	// Skills and NewBrain are nil). nil: a factory of the default configuration.
	Factory *factory.Factory
}

// Options configure a Server.
type Options struct {
	Config  config.Serve
	Engines Engines
	Log     *slog.Logger
	Version string
	// QueueLen is how many jobs may wait per engine beyond those running (it bounds the
	// memory waiting jobs hold); 0: 32 per worker.
	QueueLen int
	// MaxQueueWait admits a job while the work queued ahead of it (its estimated time, from
	// the jobs' audio seconds or characters and the measured speed) keeps it waiting less
	// than this; 0: 60 s.
	MaxQueueWait time.Duration
	// MinUploadRate is the rate floor for request bodies, in bytes a second on average once
	// UploadGrace has passed (0: 16 kB/s; negative: none). A slower body is cut with 408.
	MinUploadRate float64
	UploadGrace   time.Duration // 0: 10 s
	// MaxUploads and MaxUploadsPerClient bound the audio uploads being received and decoded
	// at once, in all and per client address; 0: 64 and 16. A client address alone may hold
	// more, an even share of what is left after MaxUploadsPerClient for a newcomer.
	MaxUploads, MaxUploadsPerClient int
	// MaxConns and MaxConnsPerClient bound open HTTP connections, in all and per client
	// address (beyond: an immediate 429); 0: 1024 and 128. Wyoming has its own (64, 16).
	MaxConns, MaxConnsPerClient int
	// TempDir holds uploads spooled to disk; "": the system's temporary directory.
	TempDir string
	// MaxAudioMemory bounds, in bytes, the audio that realtime sessions and Wyoming
	// connections buffer at once, all together; 0: 128 MiB.
	MaxAudioMemory int64
	// MemoryLimit is the Go runtime's soft memory limit while serving, in bytes above what
	// the process holds when Serve starts (the engines' models): the collector works harder
	// near it instead of letting garbage double the heap. 0: 256 MiB; negative: none. The
	// GOMEMLIMIT environment variable, when set, wins.
	MemoryLimit int64
	// JobTimeout bounds one transcription or synthesis; 0: 5 minutes.
	JobTimeout time.Duration
	// UploadTimeout bounds reading a request body; 0: 2 minutes.
	UploadTimeout time.Duration
	// WriteTimeout bounds each write of a streamed response (an abandoned client frees its
	// slot after this); 0: 30 s.
	WriteTimeout time.Duration
	// DrainTimeout bounds graceful shutdown; 0: 30 s.
	DrainTimeout time.Duration
	// BargeIn and BargeInMin are the assistant's barge-in policy (assistant.barge_in,
	// assistant.barge_in_min_seconds), applied to realtime sessions.
	BargeIn    app.BargeIn
	BargeInMin time.Duration
	// TLSCertFile and TLSKeyFile, when both set, serve HTTPS (and wss:// for realtime, which
	// OpenAI's SDKs insist on).
	TLSCertFile, TLSKeyFile string
}

// Server is the headless server. Create it with New, run it with Run or Serve.
type Server struct {
	o       Options
	log     *slog.Logger
	eng     Engines
	asrLim  *Limiter
	ttsLim  *Limiter
	llmLim  *Limiter
	metrics *Metrics
	mux     *http.ServeMux
	// uploads bounds request bodies being received; decoders bounds uploads decoding at once.
	uploads  *uploadGate
	decoders chan struct{}
	// audioMem bounds the audio realtime sessions and Wyoming connections buffer.
	audioMem *memBudget
	// vadCalls bounds the voice activity detector calls running at once: each is a cgo call
	// that pins an OS thread, and the Go runtime never gives threads back, so 32 sessions
	// calling at once would leave 32 threads behind for good.
	vadCalls chan struct{}

	// sessions are realtime WebSocket sessions, cancelled at shutdown.
	mu       sync.Mutex
	sessions map[*session]struct{}
	rtSlots  int // realtime sessions admitted (including those still upgrading)
	closing  bool
	drainEnd time.Time // when the drain ends (zero until shutdown begins)
	wg       sync.WaitGroup
}

// Listeners are the sockets Serve runs on; nil ones are not served.
type Listeners struct {
	HTTP       net.Listener
	WyomingASR net.Listener
	WyomingTTS net.Listener
}

// New checks the configuration and returns a server. A non-loopback HTTP address needs an
// API key unless allow_unauthenticated is set; Wyoming has no authentication at all, so a
// non-loopback Wyoming address needs allow_unauthenticated.
func New(o Options) (*Server, error) {
	c := &o.Config
	if c.Addr == "" {
		c.Addr = config.Default().Serve.Addr
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return nil, fmt.Errorf("%w: TLS needs both a certificate and a key file", ErrConfig)
	}
	if o.TLSCertFile != "" {
		if _, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile); err != nil {
			return nil, fmt.Errorf("%w: TLS certificate %s / key %s: %v", ErrConfig, o.TLSCertFile, o.TLSKeyFile, err)
		}
	}
	for _, a := range []struct{ key, addr string }{{"addr", c.Addr}, {"wyoming_asr_addr", c.WyomingASRAddr}, {"wyoming_tts_addr", c.WyomingTTSAddr}} {
		if a.addr == "" || a.addr == "off" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return nil, fmt.Errorf("%w: serve.%s %q is not a host:port address (for example 127.0.0.1:8780): %v", ErrConfig, a.key, a.addr, err)
		}
	}
	if !isLoopback(c.Addr) && c.APIKey == "" && !c.AllowNoAuth {
		return nil, fmt.Errorf("%w: serve.addr %s is not a loopback address: set serve.api_key (clients send Authorization: Bearer KEY) or serve.allow_unauthenticated = true", ErrConfig, c.Addr)
	}
	for _, a := range []struct{ key, addr string }{{"wyoming_asr_addr", c.WyomingASRAddr}, {"wyoming_tts_addr", c.WyomingTTSAddr}} {
		if a.addr != "" && a.addr != "off" && !isLoopback(a.addr) && !c.AllowNoAuth {
			return nil, fmt.Errorf("%w: serve.%s %s is not a loopback address and Wyoming has no authentication: set serve.allow_unauthenticated = true to expose it", ErrConfig, a.key, a.addr)
		}
	}
	if c.MaxUploadMB <= 0 {
		c.MaxUploadMB = 50
	}
	if c.MaxAudioSeconds <= 0 {
		c.MaxAudioSeconds = 3600
	}
	if c.MaxConcurrentASR <= 0 {
		c.MaxConcurrentASR = 2
	}
	if c.MaxConcurrentTTS <= 0 {
		c.MaxConcurrentTTS = 2
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.JobTimeout <= 0 {
		o.JobTimeout = 5 * time.Minute
	}
	if o.UploadTimeout <= 0 {
		o.UploadTimeout = 2 * time.Minute
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.MaxQueueWait <= 0 {
		o.MaxQueueWait = time.Minute
	}
	if o.MinUploadRate == 0 {
		o.MinUploadRate = 16000
	}
	if o.MinUploadRate < 0 {
		o.MinUploadRate = 0
	}
	if o.UploadGrace <= 0 {
		o.UploadGrace = 10 * time.Second
	}
	if o.MaxUploads <= 0 {
		o.MaxUploads = 64
	}
	if o.MaxUploadsPerClient <= 0 {
		o.MaxUploadsPerClient = 16
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = 256 << 20
	}
	if o.MaxAudioMemory <= 0 {
		o.MaxAudioMemory = 128 << 20
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 1024
	}
	if o.MaxConnsPerClient <= 0 {
		o.MaxConnsPerClient = 128
	}
	q := func(workers int) int {
		if o.QueueLen > 0 {
			return o.QueueLen
		}
		return 32 * workers
	}
	asrBatch := 1
	if _, ok := o.Engines.ASR.(batchRecognizer); ok {
		asrBatch = 8
	}
	s := &Server{
		o: o, log: o.Log, eng: o.Engines, metrics: newMetrics(), sessions: map[*session]struct{}{},
		// costs: seconds of audio (plus a second for the call), characters, requests
		asrLim:   NewLimiter("asr", LimiterConfig{Workers: c.MaxConcurrentASR, MaxQueued: q(c.MaxConcurrentASR), MaxWait: o.MaxQueueWait, MaxBatch: asrBatch, Prior: 0.05}),
		ttsLim:   NewLimiter("tts", LimiterConfig{Workers: c.MaxConcurrentTTS, MaxQueued: q(c.MaxConcurrentTTS), MaxWait: o.MaxQueueWait, Prior: 0.01}),
		llmLim:   NewLimiter("llm", LimiterConfig{Workers: 4, MaxQueued: q(4), MaxWait: o.MaxQueueWait, Prior: 2}),
		uploads:  newUploadGate(o.MaxUploads, o.MaxUploadsPerClient),
		decoders: make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		audioMem: newMemBudget(o.MaxAudioMemory),
		vadCalls: make(chan struct{}, runtime.GOMAXPROCS(0)),
	}
	if s.eng.Skills == nil { // a server built without Load (tests)
		sk, err := s.factory().ServerSkills()
		if err != nil {
			return nil, fmt.Errorf("serve: skills: %w", err)
		}
		s.eng.Skills = sk
	}
	if s.eng.LLM == nil {
		s.eng.LLM = skills.Backend{E: s.eng.Skills}
		s.eng.LLMModel = skillsModel
	}
	if s.eng.ASR != nil && s.eng.ASRModel == "" {
		s.eng.ASRModel = "sensevoice"
	}
	if len(s.eng.ASRLanguages) == 0 {
		s.eng.ASRLanguages = lang.Codes()
	}
	if s.eng.TTS != nil && s.eng.TTSEngine == "" {
		s.eng.TTSEngine = s.eng.TTS.Capabilities().Engine
	}
	s.metrics.limiterGauges(s.asrLim, s.ttsLim, s.llmLim)
	s.metrics.Gauge(s.modelGauges)
	s.metrics.Gauge(writeRuntimeMetrics)
	s.routes()
	return s, nil
}

// isLoopback reports whether a listen address binds only the loopback interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Metrics is the server's metrics registry.
func (s *Server) Metrics() *Metrics { return s.metrics }

// factory is the factory the server's engines were opened with (Engines.Factory, set by
// Load); a server built without Load (tests) opens through one of the default configuration.
func (s *Server) factory() *factory.Factory {
	if s.eng.Factory != nil {
		return s.eng.Factory
	}
	return factory.New(nil, s.log)
}

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler { return s.mux }

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /health", s.health)
	m.Handle("GET /metrics", s.auth(http.HandlerFunc(s.metricsPage)))
	m.Handle("POST /v1/audio/transcriptions", s.api(s.transcriptions))
	m.Handle("POST /v1/audio/translations", s.api(s.translations))
	m.Handle("POST /v1/audio/speech", s.api(s.speech))
	m.Handle("POST /v1/chat/completions", s.api(s.chat))
	m.Handle("GET /v1/models", s.api(s.models))
	m.Handle("GET /v1/models/{id}", s.api(s.model))
	m.Handle("GET /v1/realtime", s.auth(http.HandlerFunc(s.realtime)))
	// Known paths with the wrong method: 405 in OpenAI's shape (the mux's own is plain text).
	for path, method := range map[string]string{"/v1/audio/transcriptions": "POST", "/v1/audio/translations": "POST", "/v1/audio/speech": "POST",
		"/v1/chat/completions": "POST", "/v1/models": "GET", "/v1/realtime": "GET", "/health": "GET", "/metrics": "GET"} {
		m.Handle(path, s.api(func(w http.ResponseWriter, r *http.Request) *APIError {
			w.Header().Set("Allow", method)
			return &APIError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: str("method_not_allowed"),
				Message: fmt.Sprintf("%s %s is not supported: use %s", r.Method, path, method)}
		}))
	}
	m.Handle("/", s.api(func(w http.ResponseWriter, r *http.Request) *APIError {
		return &APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: str("unknown_url"),
			Message: fmt.Sprintf("Unknown request URL: %s %s. Parley serves /v1/audio/transcriptions, /v1/audio/translations, /v1/audio/speech, /v1/chat/completions, /v1/models, /v1/realtime, /health and /metrics.", r.Method, r.URL.Path)}
	}))
	s.mux = m
}

// auth checks the bearer key when one is configured.
func (s *Server) auth(h http.Handler) http.Handler {
	key := s.o.Config.APIKey
	if key == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		if !ok && r.URL.Path == "/v1/realtime" {
			// Browsers cannot set headers on a WebSocket: OpenAI accepts the key as a
			// subprotocol "openai-insecure-api-key.KEY".
			for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
				if k, found := strings.CutPrefix(strings.TrimSpace(p), "openai-insecure-api-key."); found {
					got, ok = k, true
				}
			}
		}
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(key)) != 1 {
			msg := "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
			if ok {
				msg = "Incorrect API key provided."
			}
			s.metrics.Observe(pattern(r), http.StatusUnauthorized, 0)
			writeError(w, &APIError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: str("invalid_api_key"), Message: msg})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearer reads "Authorization: Bearer KEY"; the scheme is case-insensitive (RFC 9110).
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

func pattern(r *http.Request) string {
	if r.Pattern == "" || r.Pattern == "/" {
		return "other"
	}
	return r.Pattern
}

// api wraps a handler: authentication, metrics, and APIError responses.
func (s *Server) api(h func(http.ResponseWriter, *http.Request) *APIError) http.Handler {
	return s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			p := recover()
			if p != nil && p != http.ErrAbortHandler {
				s.log.Error("handler panic", "route", r.Pattern, "panic", p)
				if !sw.written {
					writeError(sw, internal("internal error"))
				}
			}
			code := sw.code
			if !sw.written {
				code = http.StatusOK
			}
			s.metrics.Observe(pattern(r), code, time.Since(start))
			if p == http.ErrAbortHandler {
				panic(p) // net/http drops the connection without a word
			}
		}()
		if e := h(sw, r); e != nil {
			drained := cutByDrain(r.Context())
			if drained {
				e = shuttingDown(s.restartAfter())
			}
			if sw.written {
				// Headers are gone (a stream failed midway): the client must see a cut stream.
				if drained {
					s.log.Warn("stream cut: the server is shutting down", "route", r.Pattern)
				} else {
					s.log.Warn("request failed mid-stream", "route", r.Pattern, "err", e.Message)
				}
				abort(sw, e)
			}
			if e.Status >= 500 {
				s.log.Warn("request failed", "route", r.Pattern, "status", e.Status, "err", e.Message)
			}
			writeError(sw, e)
		}
	}))
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	type model struct {
		Kind   string `json:"kind"`
		ID     string `json:"id,omitempty"`
		Loaded bool   `json:"loaded"`
		Note   string `json:"note,omitempty"`
	}
	out := struct {
		Status  string  `json:"status"`
		Version string  `json:"version,omitempty"`
		Models  []model `json:"models"`
	}{Status: "ok", Version: s.o.Version}
	out.Models = append(out.Models,
		model{Kind: "asr", ID: s.eng.ASRModel, Loaded: s.eng.ASR != nil, Note: s.eng.ASRNote},
		model{Kind: "tts", ID: s.eng.TTSEngine, Loaded: s.eng.TTS != nil},
		model{Kind: "llm", ID: s.eng.LLMModel, Loaded: s.eng.LLM != nil})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
	s.metrics.Observe("GET /health", 200, 0)
}

func (s *Server) modelGauges(w io.Writer) {
	b := func(v bool) int {
		if v {
			return 1
		}
		return 0
	}
	fmt.Fprintln(w, "# HELP parley_model_loaded Whether each engine's model is loaded.")
	fmt.Fprintln(w, "# TYPE parley_model_loaded gauge")
	fmt.Fprintf(w, "parley_model_loaded{kind=\"asr\",model=\"%s\"} %d\n", label(s.eng.ASRModel), b(s.eng.ASR != nil))
	fmt.Fprintf(w, "parley_model_loaded{kind=\"tts\",model=\"%s\"} %d\n", label(s.eng.TTSEngine), b(s.eng.TTS != nil))
	fmt.Fprintf(w, "parley_model_loaded{kind=\"llm\",model=\"%s\"} %d\n", label(s.eng.LLMModel), b(s.eng.LLM != nil))
	s.mu.Lock()
	n := len(s.sessions)
	s.mu.Unlock()
	fmt.Fprintln(w, "# TYPE parley_realtime_sessions gauge")
	fmt.Fprintf(w, "parley_realtime_sessions %d\n", n)
	fmt.Fprintln(w, "# HELP parley_audio_buffer_bytes Audio buffered by realtime sessions and Wyoming connections.")
	fmt.Fprintln(w, "# TYPE parley_audio_buffer_bytes gauge")
	fmt.Fprintf(w, "parley_audio_buffer_bytes %d\n", s.audioMem.Used())
	fmt.Fprintln(w, "# TYPE parley_audio_buffer_limit_bytes gauge")
	fmt.Fprintf(w, "parley_audio_buffer_limit_bytes %d\n", s.o.MaxAudioMemory)
	fmt.Fprintln(w, "# HELP parley_uploads_receiving Audio uploads being received or decoded.")
	fmt.Fprintln(w, "# TYPE parley_uploads_receiving gauge")
	fmt.Fprintf(w, "parley_uploads_receiving %d\n", s.uploads.active())
}

func (s *Server) metricsPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.Write(w)
}

// Run listens on the configured addresses and serves until ctx ends, then drains.
func (s *Server) Run(ctx context.Context) error {
	c := s.o.Config
	var ls Listeners
	var err error
	if ls.HTTP, err = net.Listen("tcp", c.Addr); err != nil {
		return fmt.Errorf("listen on %s: %w (set serve.addr or PARLEY_SERVE_ADDR)", c.Addr, err)
	}
	// Wyoming ports that cannot be bound (another Wyoming service on the default port) are
	// reported and skipped: the HTTP API still comes up.
	wy := func(addr, key string) net.Listener {
		if addr == "" || addr == "off" {
			return nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			s.log.Warn("Wyoming service not started", "key", "serve."+key, "err", fmt.Errorf("listen on %s: %w (set serve.%s, or \"off\")", addr, err, key))
			return nil
		}
		return ln
	}
	if s.eng.ASR != nil {
		ls.WyomingASR = wy(c.WyomingASRAddr, "wyoming_asr_addr")
	}
	if s.eng.TTS != nil {
		ls.WyomingTTS = wy(c.WyomingTTSAddr, "wyoming_tts_addr")
	}
	return s.Serve(ctx, ls)
}

// Serve serves on the given listeners until ctx ends, then stops accepting, lets work in
// flight finish (up to DrainTimeout), cancels what is left and returns.
func (s *Server) Serve(ctx context.Context, ls Listeners) error {
	if s.o.MemoryLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		prev := debug.SetMemoryLimit(goMemory() + s.o.MemoryLimit)
		defer debug.SetMemoryLimit(prev)
	}
	hs := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	// Every request's context comes from base: cancelling it with errWorkCut at the end of the
	// drain stops the work still running, whose requests then end with a 503 (or a stream with
	// an error) instead of a connection dropped mid-answer.
	base, cutWork := context.WithCancelCause(context.Background())
	defer cutWork(nil)
	hs.BaseContext = func(net.Listener) context.Context { return base }
	errc := make(chan error, 3)
	var run sync.WaitGroup
	// Wyoming connections live under their own context, cancelled after the drain.
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	if ls.HTTP != nil {
		s.log.Info("serving HTTP", "addr", ls.HTTP.Addr().String())
		run.Add(1)
		go func() {
			defer run.Done()
			var err error
			if s.o.TLSCertFile != "" && s.o.TLSKeyFile != "" {
				err = hs.ServeTLS(newCapListener(ls.HTTP, s.o.MaxConns, s.o.MaxConnsPerClient, nil), s.o.TLSCertFile, s.o.TLSKeyFile)
			} else {
				err = hs.Serve(newCapListener(ls.HTTP, s.o.MaxConns, s.o.MaxConnsPerClient, refuseHTTP))
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	var wys []*wyoming.Server
	for _, l := range []struct {
		ln  net.Listener
		asr bool
	}{{ls.WyomingASR, true}, {ls.WyomingTTS, false}} {
		if l.ln == nil {
			continue
		}
		ws := s.newWyoming(l.asr)
		wys = append(wys, ws)
		s.log.Info("serving Wyoming", "addr", l.ln.Addr().String(), "asr", l.asr, "tts", !l.asr)
		run.Add(1)
		go func(ln net.Listener) {
			defer run.Done()
			if err := ws.Serve(wctx, ln); err != nil {
				errc <- err
			}
		}(l.ln)
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	// Drain: stop accepting; queued work that cannot finish in the drain is refused (503 with
	// Retry-After) at once, the rest and the running work may finish until a grace period
	// before the end, when what still runs is cut; the connections close at the end.
	end := time.Now().Add(s.o.DrainTimeout)
	grace := min(2*time.Second, s.o.DrainTimeout/5)
	dctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	s.mu.Lock()
	s.closing, s.drainEnd = true, end
	for ss := range s.sessions {
		ss.shutdown() // a realtime answer in flight ends with response.done (cancelled), then a "going away" close
	}
	s.mu.Unlock()
	refused := 0
	for _, l := range []*Limiter{s.asrLim, s.ttsLim, s.llmLim} {
		refused += l.Drain(end.Add(-grace))
	}
	s.log.Info("draining", "seconds", s.o.DrainTimeout.Seconds(), "queued_refused", refused)
	cutTimer := time.AfterFunc(s.o.DrainTimeout-grace, func() {
		s.log.Warn("drain time is up: stopping the work still running")
		cutWork(errWorkCut)
	})
	defer cutTimer.Stop()
	for _, ws := range wys {
		ws.CloseListener()
	}
	if e := hs.Shutdown(dctx); e != nil {
		hs.Close()
	}
	for _, ws := range wys {
		ws.Wait(dctx)
	}
	wcancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); run.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.log.Warn("some connections did not end in time")
	}
	return err
}

// job runs f under the engine's limiter, its place sized by cost, with the job timeout.
func (s *Server) job(ctx context.Context, l *Limiter, cost float64, f func(ctx context.Context) *APIError) *APIError {
	release, err := l.Acquire(ctx, cost)
	if err != nil {
		return s.queueErr(l, err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, s.o.JobTimeout)
	defer cancel()
	return f(ctx)
}

// errWorkCut is the cause of every request context cancelled at the end of the drain.
var errWorkCut = fmt.Errorf("%w: the drain's time is up", ErrShuttingDown)

// queueErr is the answer to a job its limiter did not run: the queue was full, the server is
// shutting down, or the client left while it waited.
func (s *Server) queueErr(l *Limiter, err error) *APIError {
	switch {
	case errors.Is(err, ErrBusy):
		return busy(l.name, l.RetryAfter())
	case errors.Is(err, ErrShuttingDown):
		return shuttingDown(s.restartAfter())
	}
	return gone("client went away while queued")
}

// restartAfter is the Retry-After of work refused at shutdown: the drain's time left, and a
// few seconds for a supervisor to start the server again.
func (s *Server) restartAfter() time.Duration {
	s.mu.Lock()
	end := s.drainEnd
	s.mu.Unlock()
	return max(time.Until(end), 0) + 5*time.Second
}

// cut says whether ctx was ended by the drain's end, and if so turns e into the 503 the
// client is owed; otherwise e is returned as it is.
func (s *Server) cut(ctx context.Context, e *APIError) *APIError {
	if e != nil && cutByDrain(ctx) {
		return shuttingDown(s.restartAfter())
	}
	return e
}

// cutByDrain says whether ctx was ended by the drain's end (errWorkCut).
func cutByDrain(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrShuttingDown) }

// abort ends a response whose headers were sent so that the client sees it failed: a
// server-sent-event stream gets an error event first, then the connection is dropped before
// the body's end (a chunked body's last chunk, or its Content-Length), which HTTP clients
// report as an error rather than a short success.
func abort(w http.ResponseWriter, e *APIError) {
	if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		b, _ := json.Marshal(map[string]any{"type": "error", "error": e})
		fmt.Fprintf(w, "data: %s\n\n", b)
		http.NewResponseController(w).Flush()
	}
	panic(http.ErrAbortHandler)
}

// goMemory is the memory the Go runtime holds now (heap, stacks, its own structures).
func goMemory() int64 {
	m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(m[0].Value.Uint64())
}
