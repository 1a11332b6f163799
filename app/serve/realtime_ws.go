package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/factory/roles"
	"github.com/parley-voice/parley/app/serve/realtime"
	"github.com/parley-voice/parley/llm/chunk"
	"github.com/parley-voice/parley/llm/discover"
	"github.com/parley-voice/parley/llm/skills"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/engines"
)

// MaxRealtimeSessions bounds concurrent realtime sessions.
const MaxRealtimeSessions = 32

// freeMessageBytes is how much of a message is read without reserving it from the audio
// memory budget: the events of a normal session (20-100 ms appends) stay under it.
const freeMessageBytes = 256 << 10

// maxRealtimeBuffer bounds a session's uncommitted audio in seconds.
const maxRealtimeBuffer = 300

// session is a realtime session's handle for shutdown.
type session struct {
	closing atomic.Bool
	ws      *websocket.Conn
	stop    chan struct{} // closed at shutdown: realtime.Config.Stop
}

// shutdown stops the session: the answer in flight ends with response.done (cancelled), then
// the WebSocket closes with "going away" (goAway, from realtime.Config.AfterStop), and the
// session's read fails and it ends. (Cancelling a read's context would drop the connection
// without a close frame.) A session that does not get there in time is closed regardless.
func (ss *session) shutdown() {
	if ss.closing.CompareAndSwap(false, true) {
		close(ss.stop)
		time.AfterFunc(10*time.Second, ss.goAway)
	}
}

func (ss *session) goAway() { go ss.ws.Close(websocket.StatusGoingAway, "server shutting down") }

// wsConn adapts a WebSocket to realtime.Conn. It reads each message itself rather than
// through the library's read limit, which closes with 1009 without a word to the client: a
// message over realtime.MaxMessageBytes is refused with realtime.ErrMessageTooLarge, and a
// large one is held against the server's audio budget while it is read and decoded.
type wsConn struct {
	c      *websocket.Conn
	budget *memBudget
	held   int64  // budget reserved for the last message, given back at the next Read
	chunk  []byte // read buffer, reused across messages (appends come every 20-100 ms)
}

func newWSConn(c *websocket.Conn, budget *memBudget) *wsConn {
	c.SetReadLimit(-1) // Read enforces realtime.MaxMessageBytes
	return &wsConn{c: c, budget: budget, chunk: make([]byte, 64<<10)}
}

func (w *wsConn) Read(ctx context.Context) ([]byte, error) {
	w.release()
	for {
		typ, r, err := w.c.Reader(ctx)
		if err != nil {
			return nil, err
		}
		if typ != websocket.MessageText && typ != websocket.MessageBinary {
			continue
		}
		return w.readMessage(r)
	}
}

// readMessage reads one message, reserving what passes freeMessageBytes from the budget. A
// message the budget cannot hold is read to its end and dropped (realtime.ErrBusy).
func (w *wsConn) readMessage(r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	total, busy := 0, false
	for {
		n, err := r.Read(w.chunk)
		total += n
		if total > realtime.MaxMessageBytes {
			w.release()
			return nil, fmt.Errorf("%w: more than %d bytes", realtime.ErrMessageTooLarge, realtime.MaxMessageBytes)
		}
		if n > 0 && !busy {
			if over := int64(total-freeMessageBytes) - w.held; over > 0 && w.budget != nil {
				if w.budget.Reserve(over) {
					w.held += over
				} else {
					busy = true
					buf = bytes.Buffer{}
					w.release()
				}
			}
			if !busy {
				buf.Write(w.chunk[:n])
			}
		}
		switch {
		case err == io.EOF && busy:
			return nil, fmt.Errorf("%w: the server's audio memory is in use", realtime.ErrBusy)
		case err == io.EOF:
			return buf.Bytes(), nil
		case err != nil:
			w.release()
			return nil, err
		}
	}
}

func (w *wsConn) release() {
	if w.held > 0 {
		w.budget.Release(w.held)
		w.held = 0
	}
}

func (w *wsConn) Write(ctx context.Context, b []byte) error {
	return w.c.Write(ctx, websocket.MessageText, b)
}

func (s *Server) realtime(w http.ResponseWriter, r *http.Request) {
	route := "GET /v1/realtime"
	fail := func(e *APIError) {
		s.metrics.Observe(route, e.Status, 0)
		writeError(w, e)
	}
	if s.eng.ASR == nil || s.eng.TTS == nil {
		fail(unavailable("realtime voice needs both a speech recognition model and a voice; missing: %s", missing(s.eng.ASR == nil, s.eng.TTS == nil)))
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		fail(invalid("", "/v1/realtime is a WebSocket endpoint: connect with Upgrade: websocket"))
		return
	}
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		fail(unavailable("the server is shutting down"))
		return
	case s.rtSlots >= MaxRealtimeSessions:
		s.mu.Unlock()
		fail(busy("realtime", 5e9))
		return
	}
	s.rtSlots++ // reserved before the upgrade, so concurrent upgrades cannot overshoot
	s.wg.Add(1)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.rtSlots--
		s.mu.Unlock()
		s.wg.Done()
	}()
	var protos []string
	for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
		if p = strings.TrimSpace(p); p == "realtime" {
			protos = append(protos, p)
		}
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: protos})
	if err != nil {
		s.metrics.Observe(route, http.StatusBadRequest, 0)
		return
	}
	s.metrics.Observe(route, http.StatusSwitchingProtocols, 0)
	ss := &session{ws: c, stop: make(chan struct{})}
	s.mu.Lock()
	s.sessions[ss] = struct{}{}
	if s.closing {
		ss.shutdown()
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sessions, ss)
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := context.AfterFunc(r.Context(), cancel)
	defer stop()
	br, err := s.brain()
	if err != nil {
		c.Close(websocket.StatusInternalError, "no brain")
		return
	}
	cfg := realtime.Config{
		Transcriber: serverASR{s},
		Brain:       br,
		Voice:       rtVoice{s},
		NewVAD:      s.newVAD,
		CheckVoice: func(name string) error {
			vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			return s.checkVoice(vctx, name)
		},
		Budget:           s.audioMem,
		NewChunker:       func() app.Chunker { return chunk.New(chunk.DefaultOptions()) },
		Model:            r.URL.Query().Get("model"),
		Beta:             betaClient(r),
		RateLimits:       s.voiceRateLimits,
		Stop:             ss.stop,
		AfterStop:        ss.goAway,
		Tokens:           s.tokens,
		Log:              s.log,
		WriteTimeout:     s.o.WriteTimeout,
		MaxBufferSeconds: min(s.o.Config.MaxAudioSeconds, maxRealtimeBuffer),
		BargeIn:          s.o.BargeIn,
		BargeInMin:       s.o.BargeInMin,
		OnLatency: func(hop string, d time.Duration) {
			s.metrics.ObserveLatency("parley_realtime_"+hop+"_seconds", d)
		},
	}
	s.metrics.Counter("parley_realtime_sessions_total").Add(1)
	conn := newWSConn(c, s.audioMem)
	err = realtime.Run(ctx, conn, cfg)
	conn.release()
	switch {
	case ss.closing.Load():
	case errors.Is(err, realtime.ErrIdle):
		ss.closing.Store(true)
		c.Close(websocket.StatusNormalClosure, "idle")
	case errors.Is(err, realtime.ErrMessageTooLarge):
		ss.closing.Store(true)
		c.Close(websocket.StatusMessageTooBig, "message too large")
	case errors.Is(err, realtime.ErrTooManyBadEvents):
		ss.closing.Store(true)
		c.Close(websocket.StatusPolicyViolation, "too many malformed events")
	default:
		ss.closing.Store(true)
		c.Close(websocket.StatusNormalClosure, "")
	}
}

// voiceRateLimits is what rate_limits.updated tells a realtime client: the places in the
// voice's queue (every answer's sentences go through it), free now of all it has, and how
// long the work in it takes.
func (s *Server) voiceRateLimits() []realtime.RateLimit {
	l := s.ttsLim
	all := l.Workers() + l.QueueCap()
	free := max(all-int(l.Running()+l.Waiting()), 0)
	reset := 0.0
	if free < all {
		reset = math.Round(l.WorkSeconds()/float64(l.Workers())*100) / 100
	}
	return []realtime.RateLimit{{Name: "requests", Limit: all, Remaining: free, ResetSeconds: reset}}
}

func missing(asr, tts bool) string {
	var m []string
	if asr {
		m = append(m, "speech recognition")
	}
	if tts {
		m = append(m, "voice")
	}
	return strings.Join(m, " and ")
}

// brain returns a realtime session's brain: the configured one, else a fresh llm/brain
// conversation over the LLM backend (with the skills as tools and answering locally what
// they know), or over the offline skills alone.
func (s *Server) brain() (app.Brain, error) {
	if s.eng.Brain != nil {
		return s.eng.Brain, nil
	}
	if s.eng.NewBrain != nil {
		b, err := s.eng.NewBrain(s.eng.Skills)
		if err != nil {
			return nil, err
		}
		return roles.TextBrain{B: b}, nil
	}
	// a server built without Load (tests): the LLM it was given, else the skills alone
	var choice discover.Choice
	if _, ok := s.eng.LLM.(skills.Backend); !ok {
		choice.Backend, choice.Model = s.eng.LLM, s.eng.LLMModel
	}
	b, err := s.factory().Brain(factory.Brain{Choice: choice, Skills: s.eng.Skills, LocalFirst: true, Spoken: true})
	if err != nil {
		return nil, err
	}
	return roles.TextBrain{B: b}, nil
}

type rtVoice struct{ s *Server }

func (v rtVoice) Synthesize(ctx context.Context, text, voice string, fn func([]float32, int) error) error {
	s := v.s
	req := tts.Request{Text: text}
	if voice != "" {
		var e *APIError
		if req, e = s.applyVoice(req, voice, engines.Explicit{}); e != nil {
			return e
		}
	}
	e := s.pumpSpeech(ctx, speechJob{req: req, cost: utf8.RuneCountInString(text), emit: fn, emptyIsSilence: true,
		emitErr: func(err error) *APIError { return &APIError{Status: 499, Message: err.Error()} }})
	if e != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s", e.Message)
	}
	return nil
}

// newVAD makes a session's voice activity detector, its calls gated by vadCalls (nil: the
// session's energy detector).
func (s *Server) newVAD() (app.VAD, error) {
	if s.eng.NewVAD == nil {
		return &app.EnergyVAD{}, nil
	}
	v, err := s.eng.NewVAD()
	if err != nil {
		return nil, err
	}
	return gatedVAD{v, s.vadCalls}, nil
}

// gatedVAD runs a detector's calls under a semaphore.
type gatedVAD struct {
	app.VAD
	sem chan struct{}
}

func (g gatedVAD) Process(p []float32) ([]app.VADEvent, error) {
	g.sem <- struct{}{}
	defer func() { <-g.sem }()
	return g.VAD.Process(p)
}

func (g gatedVAD) Close() error {
	if c, ok := g.VAD.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// checkVoice says whether the voice engine speaks with the named voice: OpenAI's names and
// the library's voices for this engine are known; any other name is tried on the engine (a
// one-letter synthesis, stopped at once), so engine presets and their variants
// ("en-gb+f2") pass and unknown names fail before any answer needs them.
func (s *Server) checkVoice(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	if _, ok := OpenAIVoices[strings.ToLower(name)]; ok {
		return nil
	}
	req, e := s.applyVoice(tts.Request{Text: "a"}, name, engines.Explicit{})
	if e != nil {
		return errors.New(e.Message)
	}
	if req.Voice == "" || slices.Contains(s.eng.TTS.Capabilities().Voices, req.Voice) {
		return nil // a library voice, or a preset the engine lists
	}
	e = s.job(ctx, s.ttsLim, 1, func(ctx context.Context) *APIError {
		st, err := s.eng.TTS.Synthesize(ctx, req)
		if err != nil {
			return ttsError(err)
		}
		st.Close()
		return nil
	})
	if e != nil && e.Code != nil && *e.Code == "invalid_voice" {
		return fmt.Errorf("%s (OpenAI's voices: %s)", e.Message, strings.Join(sortedKeys(OpenAIVoices), ", "))
	}
	return nil // busy or failing engines are not the voice's fault: the answer will say
}

// betaClient reports whether the client speaks the beta realtime protocol: it says so with
// OpenAI-Beta: realtime=v1 (the header, or the subprotocol browsers use for it).
func betaClient(r *http.Request) bool {
	for _, h := range r.Header.Values("OpenAI-Beta") {
		for _, v := range strings.Split(h, ",") {
			if strings.TrimSpace(v) == "realtime=v1" {
				return true
			}
		}
	}
	for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
		if strings.TrimSpace(p) == "openai-beta.realtime-v1" {
			return true
		}
	}
	return false
}
