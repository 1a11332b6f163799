package realtime

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/serve/internal/pcmbuf"
	"github.com/parley-voice/parley/audio"
)

// asrRate is the rate of everything the VAD and the recognizer hear.
const asrRate = 16000

// Conn carries whole messages both ways (a WebSocket in the server).
type Conn interface {
	Read(ctx context.Context) ([]byte, error)
	Write(ctx context.Context, msg []byte) error
}

// Voice speaks one sentence with the named voice ("" = default), streaming mono PCM at
// rate to fn.
type Voice interface {
	Synthesize(ctx context.Context, text, voice string, fn func(pcm []float32, rate int) error) error
}

// Config holds a session's engines and limits.
type Config struct {
	Transcriber app.Transcriber
	Brain       app.Brain
	Voice       Voice
	// NewVAD returns the session's voice activity detector; nil: app.EnergyVAD.
	NewVAD func() (app.VAD, error)
	// NewChunker cuts answers into sentences; nil: app.NewSimpleChunker.
	NewChunker func() app.Chunker
	// MaxBufferSeconds bounds the uncommitted input audio (manual turns); default 900.
	MaxBufferSeconds int
	// MaxUtterance cuts an utterance under server VAD; default 30 s.
	MaxUtterance time.Duration
	// MaxBadEvents closes a session after this many malformed events in a row; default 100.
	MaxBadEvents int
	// WriteTimeout bounds each message sent; default 10 s.
	WriteTimeout time.Duration
	// IdleTimeout ends a session when the client sends nothing for this long; default 10 min.
	IdleTimeout time.Duration
	// BargeIn is the assistant's policy for speech over an answer (app.BargeInOn by
	// default; app.BargeInOff never interrupts; app.BargeInMinSpeech interrupts once the
	// speech has lasted BargeInMin, default 300 ms). A session's
	// turn_detection.interrupt_response = false turns it off too.
	BargeIn    app.BargeIn
	BargeInMin time.Duration
	// CheckVoice, if set, vets a voice a session.update asks for, so an unknown one fails
	// there (invalid_value) instead of at the first answer.
	CheckVoice func(name string) error
	// Budget, if set, bounds the memory input audio buffers hold across sessions: a buffer
	// grows only by reserving from it (else the client gets input_audio_buffer_full), and
	// gives it back when the audio is transcribed, cleared or the session ends.
	Budget Budget
	// OnLatency, if set, is told each turn's hops from the end of the user's speech (server
	// VAD turns): "transcript", "first_audio".
	OnLatency func(hop string, d time.Duration)
	Model     string
	Log       *slog.Logger
	// Tokens counts a text's tokens for response.done's usage; nil: about 4 characters a
	// token. Only text is counted (the transcripts of the user's audio and of the answer):
	// Parley does not tokenise audio, so audio_tokens is 0.
	Tokens func(text string) int
	// Stop, if set, stops the session when it is closed (the server is shutting down): the
	// response in flight ends with response.done (status cancelled, reason
	// "server_shutdown"), turns queued behind it are dropped, no new response starts, and
	// then AfterStop is called (within a few seconds) for the caller to close the connection
	// with its reason.
	Stop      <-chan struct{}
	AfterStop func()
	// RateLimits, if set, is sent after each response.done as rate_limits.updated, as OpenAI
	// does: the server's own limits as they stand.
	RateLimits func() []RateLimit
	// Beta makes the session speak the beta protocol (the client sent OpenAI-Beta:
	// realtime=v1): every server event under its beta name and shape (see dialect.go).
	Beta bool
}

// RateLimit is one limit of rate_limits.updated: Name is "requests" or "tokens"; Remaining
// of Limit are free now, and ResetSeconds is when all of them will be.
type RateLimit struct {
	Name             string
	Limit, Remaining int
	ResetSeconds     float64
}

// Budget is memory shared by many sessions' buffers, in bytes.
type Budget = pcmbuf.Budget

// ErrTooManyBadEvents ends a session that keeps sending malformed events.
var ErrTooManyBadEvents = errors.New("realtime: too many malformed events")

// ErrMessageTooLarge ends a session whose client sent an event over MaxMessageBytes: the
// client is told with an error event first (the connection then closes with 1009).
var ErrMessageTooLarge = errors.New("realtime: message too large")

// ErrBusy is a Conn's answer to a message it could not hold (the server's audio memory is
// in use): the message is dropped, the client told, and the session goes on.
var ErrBusy = errors.New("realtime: server busy")

// ErrIdle ends a session whose client sent nothing for Config.IdleTimeout.
var ErrIdle = errors.New("realtime: client idle")

type session struct {
	cfg   Config
	conn  Conn
	ctx   context.Context
	id    string
	seq   atomic.Int64
	wmu   sync.Mutex
	dead  atomic.Bool
	jobs  chan func(ctx context.Context)
	jobMu sync.Mutex
	// cancelResp cancels the response in flight (nil when none); gen counts barge-ins so
	// queued responses from before one are dropped.
	cancelResp   context.CancelFunc
	respGen      atomic.Int64
	cancelReason atomic.Value // string: why the last response was cancelled
	stopping     atomic.Bool  // Config.Stop closed: no response starts

	// owned by the read loop
	td           *TurnDetection
	textOnly     bool // output_modalities ["text"] (beta: modalities ["text"]): answers in text, no audio
	voice        string
	instructions string
	vad          app.VAD
	vadBase      int64
	in           *audio.Resampler
	buf          []float32
	reserved     int64 // bytes of the budget buf holds (its capacity)
	bufStart     int64 // absolute index of buf[0]
	total        int64 // samples appended so far (16 kHz)
	inSpeech     bool
	speechStart  int64
	bargePending bool            // min-speech barge-in: waiting for enough voiced audio
	voiced       int64           // loud samples since the pending barge-in's speech start
	level        app.SpeechLevel // of that speech, for its loud part
	speechItem   string
	speechEnd    time.Time // when the last server-VAD utterance ended (zero for manual commits)

	// history, shared with the worker
	hmu      sync.Mutex
	lastItem string // the conversation's latest item, for previous_item_id
	history  []app.Message
	pending  string // user text not yet answered
	last     answer // the latest answer, for conversation.item.truncate
}

// answer is what an answer item holds: its sentences and where each ended in the audio.
type answer struct {
	item      string
	sentences []string
	endMS     []int64
}

// Run serves one session until the client goes away or ctx ends.
func Run(ctx context.Context, conn Conn, cfg Config) error {
	if cfg.MaxBufferSeconds <= 0 {
		cfg.MaxBufferSeconds = 900
	}
	if cfg.MaxUtterance <= 0 {
		cfg.MaxUtterance = 30 * time.Second
	}
	if cfg.MaxBadEvents <= 0 {
		cfg.MaxBadEvents = 100
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Model == "" {
		cfg.Model = "parley-realtime"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.BargeInMin <= 0 {
		cfg.BargeInMin = 300 * time.Millisecond
	}
	s := &session{cfg: cfg, conn: conn, ctx: ctx, id: newID("sess_"), jobs: make(chan func(context.Context), 8),
		td: &TurnDetection{Type: "server_vad"}}
	var err error
	if cfg.NewVAD != nil {
		s.vad, err = cfg.NewVAD()
		if err != nil {
			s.sendError("server_error", "vad_unavailable", "", fmt.Sprintf("voice activity detection is unavailable: %v", err))
			return err
		}
	} else {
		s.vad = &app.EnergyVAD{}
	}
	if c, ok := s.vad.(interface{ Close() error }); ok {
		defer c.Close()
	}
	if s.in, err = audio.NewResampler(Rate, asrRate, 1, audio.QualityMedium); err != nil {
		return err
	}
	var wg, watch sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.worker() }()
	if cfg.Stop != nil {
		watch.Add(1)
		go func() {
			defer watch.Done()
			select {
			case <-cfg.Stop:
				s.stop()
			case <-ctx.Done():
			}
		}()
	}
	defer func() {
		cancel() // stops the job in flight, whatever it is
		watch.Wait()
		close(s.jobs)
		wg.Wait()
		s.setBuf(nil)
	}()
	s.send(map[string]any{"type": "session.created", "session": s.sessionObject()})
	bad := 0
	for {
		rctx, rcancel := context.WithTimeout(ctx, cfg.IdleTimeout)
		msg, err := conn.Read(rctx)
		idle := rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		rcancel()
		switch {
		case errors.Is(err, ErrMessageTooLarge):
			s.sendError("invalid_request_error", "message_too_large", "",
				fmt.Sprintf("%v: an event may be at most %d bytes (%d MiB); send the audio in several appends", err, MaxMessageBytes, MaxMessageBytes>>20))
			return ErrMessageTooLarge
		case errors.Is(err, ErrBusy):
			s.sendError("server_error", "server_busy", "", fmt.Sprintf("%v: the event was dropped; send it again shortly, or in smaller appends", err))
			continue
		case err != nil:
			if idle {
				return ErrIdle
			}
			return nil
		}
		e, err := DecodeClientEvent(msg)
		if err != nil {
			bad++
			id := ""
			if e != nil {
				id = e.EventID
			}
			s.sendErrorFor("invalid_request_error", "invalid_event", "", strings.TrimPrefix(err.Error(), "realtime: bad event: "), id)
			if bad >= cfg.MaxBadEvents {
				return ErrTooManyBadEvents
			}
			continue
		}
		bad = 0
		s.handle(e)
		if s.dead.Load() {
			return nil
		}
	}
}

func newID(prefix string) string {
	var b [10]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// send writes one server event (with a fresh event_id). A failed write marks the session
// dead: the client is gone or not reading.
func (s *session) send(ev map[string]any) {
	if s.dead.Load() {
		return
	}
	if s.cfg.Beta && !toBeta(ev) {
		return // an event the beta protocol has no counterpart for
	}
	ev["event_id"] = fmt.Sprintf("event_%d", s.seq.Add(1))
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.WriteTimeout)
	defer cancel()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.conn.Write(ctx, b); err != nil {
		s.dead.Store(true)
	}
}

func (s *session) sendError(typ, code, param, msg string) { s.sendErrorFor(typ, code, param, msg, "") }

func (s *session) sendErrorFor(typ, code, param, msg, eventID string) {
	e := map[string]any{"type": typ, "code": code, "message": msg, "param": nil, "event_id": nil}
	if param != "" {
		e["param"] = param
	}
	if eventID != "" {
		e["event_id"] = eventID
	}
	s.send(map[string]any{"type": "error", "error": e})
}

func (s *session) sessionObject() map[string]any {
	var td any
	if s.td != nil {
		td = s.td
	}
	format := map[string]any{"type": "audio/pcm", "rate": Rate}
	s.hmu.Lock()
	voice := s.voice
	s.hmu.Unlock()
	if voice == "" {
		voice = "alloy"
	}
	return map[string]any{
		"id": s.id, "object": "realtime.session", "type": "realtime", "model": s.cfg.Model,
		"instructions": s.instructions, "output_modalities": s.outputModalities(),
		"audio": map[string]any{
			"input":  map[string]any{"format": format, "turn_detection": td},
			"output": map[string]any{"format": format, "voice": voice},
		},
		// beta-shape mirrors
		"voice": voice, "turn_detection": td, "input_audio_format": "pcm16", "output_audio_format": "pcm16",
		"modalities": s.betaModalities(),
	}
}

func (s *session) outputModalities() []string {
	if s.textOnly {
		return []string{"text"}
	}
	return []string{"audio"}
}

func (s *session) betaModalities() []string {
	if s.textOnly {
		return []string{"text"}
	}
	return []string{"text", "audio"}
}

// modalities reads what an update asks the answers to be: GA output_modalities is ["audio"]
// (with its transcript) or ["text"]; the beta's modalities are ["text", "audio"] or ["text"].
// Anything else is refused, naming what is supported.
func modalities(c SessionConfig) (textOnly, set bool, param string, err error) {
	switch {
	case c.OutputMods != nil:
		param = "session.output_modalities"
		switch {
		case len(c.OutputMods) == 1 && c.OutputMods[0] == "audio":
			return false, true, param, nil
		case len(c.OutputMods) == 1 && c.OutputMods[0] == "text":
			return true, true, param, nil
		}
		return false, false, param, fmt.Errorf("output_modalities %q is not supported: use [\"audio\"] (speech with its transcript) or [\"text\"]", c.OutputMods)
	case c.Modalities != nil:
		param = "session.modalities"
		has := map[string]bool{}
		for _, m := range c.Modalities {
			has[m] = true
		}
		switch {
		case len(has) == 1 && has["text"]:
			return true, true, param, nil
		case len(has) == 2 && has["text"] && has["audio"]:
			return false, true, param, nil
		}
		return false, false, param, fmt.Errorf("modalities %q is not supported: use [\"text\", \"audio\"] or [\"text\"]", c.Modalities)
	}
	return false, false, "", nil
}

func (s *session) handle(e *ClientEvent) {
	switch e.Type {
	case SessionUpdate:
		s.update(e)
	case InputAudioAppend:
		s.appendAudio(e)
	case InputAudioCommit:
		s.commit(e)
	case InputAudioClear:
		s.setBuf(nil)
		s.bufStart, s.inSpeech = s.total, false
		s.vad.Reset()
		s.vadBase = s.total
		s.send(map[string]any{"type": "input_audio_buffer.cleared"})
	case ResponseCreate:
		if over, ok := s.responseOverrides(e); ok {
			s.enqueueResponse(over)
		}
	case ResponseCancel:
		s.cancelResponse()
	case ConversationItemCreate:
		s.createItem(e)
	case ConversationItemTruncate:
		s.truncate(e)
	default:
		s.sendErrorFor("invalid_request_error", "invalid_event", "type",
			fmt.Sprintf("Invalid value: '%s'. Parley supports session.update, input_audio_buffer.append|commit|clear, conversation.item.create|truncate, response.create and response.cancel.", e.Type), e.EventID)
	}
}

func (s *session) update(e *ClientEvent) {
	c := e.Session
	td, set, err := c.turnDetection()
	if err != nil {
		s.sendErrorFor("invalid_request_error", "invalid_value", "session.turn_detection", err.Error(), e.EventID)
		return
	}
	for _, f := range []struct {
		raw   json.RawMessage
		param string
	}{{c.InputFormat, "session.input_audio_format"}, {c.OutputFormat, "session.output_audio_format"}} {
		if err := checkFormat(f.raw, f.param); err != nil {
			s.sendErrorFor("invalid_request_error", "invalid_value", f.param, err.Error(), e.EventID)
			return
		}
	}
	var voice *string
	voiceParam := "session.voice"
	if c.Audio != nil {
		if c.Audio.Input != nil {
			if err := checkFormat(c.Audio.Input.Format, "session.audio.input.format"); err != nil {
				s.sendErrorFor("invalid_request_error", "invalid_value", "session.audio.input.format", err.Error(), e.EventID)
				return
			}
		}
		if c.Audio.Output != nil {
			if err := checkFormat(c.Audio.Output.Format, "session.audio.output.format"); err != nil {
				s.sendErrorFor("invalid_request_error", "invalid_value", "session.audio.output.format", err.Error(), e.EventID)
				return
			}
			if c.Audio.Output.Voice != nil {
				voice, voiceParam = c.Audio.Output.Voice, "session.audio.output.voice"
			}
		}
	}
	if c.Voice != nil {
		voice, voiceParam = c.Voice, "session.voice"
	}
	textOnly, modsSet, modsParam, err := modalities(*c)
	if err != nil {
		s.sendErrorFor("invalid_request_error", "invalid_value", modsParam, err.Error(), e.EventID)
		return
	}
	// every check before anything applies: a refused update changes nothing
	if voice != nil && s.cfg.CheckVoice != nil {
		if err := s.cfg.CheckVoice(*voice); err != nil {
			s.sendErrorFor("invalid_request_error", "invalid_value", voiceParam, err.Error(), e.EventID)
			return
		}
	}
	if set {
		s.td = td
		s.inSpeech = false
	}
	if voice != nil {
		s.setVoice(*voice)
	}
	if c.Instructions != nil {
		s.instructions = *c.Instructions
	}
	if modsSet {
		s.hmu.Lock()
		s.textOnly = textOnly
		s.hmu.Unlock()
	}
	s.send(map[string]any{"type": "session.updated", "session": s.sessionObject()})
}

func (s *session) setVoice(v string) {
	s.hmu.Lock()
	s.voice = v
	s.hmu.Unlock()
}

func (s *session) ms(sample int64) int64 { return sample * 1000 / asrRate }

func (s *session) appendAudio(e *ClientEvent) {
	n := len(e.PCM) / 2
	x := make([]float32, n)
	audio.DecodePCM(x, e.PCM, audio.S16)
	y := s.in.Process(nil, x)
	if s.td == nil && len(s.buf)+len(y) > s.cfg.MaxBufferSeconds*asrRate {
		s.sendErrorFor("invalid_request_error", "input_audio_buffer_full", "",
			fmt.Sprintf("the input audio buffer holds more than %d s: commit or clear it", s.cfg.MaxBufferSeconds), e.EventID)
		return
	}
	if !s.grow(len(y)) {
		s.sendErrorFor("invalid_request_error", "input_audio_buffer_full", "",
			"the server's memory for buffered audio is full (too many sessions hold long uncommitted audio): commit or clear the buffer, or retry later", e.EventID)
		return
	}
	s.buf = append(s.buf, y...)
	s.total += int64(len(y))
	if s.td == nil {
		return
	}
	evs, err := s.vad.Process(y)
	if err != nil {
		s.sendError("server_error", "vad_failed", "", err.Error())
		return
	}
	for _, ev := range evs {
		at := s.vadBase + ev.Sample
		switch ev.Kind {
		case app.SpeechStart:
			if s.inSpeech {
				continue
			}
			pad := int64(300)
			if s.td.PrefixPaddingMS != nil {
				pad = int64(max(0, *s.td.PrefixPaddingMS))
			}
			s.inSpeech = true
			s.speechStart = max(s.bufStart, at-pad*asrRate/1000)
			s.speechItem = newID("item_")
			s.send(map[string]any{"type": "input_audio_buffer.speech_started", "audio_start_ms": s.ms(s.speechStart), "item_id": s.speechItem})
			if s.td.InterruptResponse == nil || *s.td.InterruptResponse {
				switch s.cfg.BargeIn {
				case app.BargeInOn:
					s.bargeIn()
				case app.BargeInMinSpeech:
					s.bargePending, s.voiced, s.level = true, 0, app.SpeechLevel{}
				}
			}
		case app.SpeechEnd:
			if !s.inSpeech {
				continue
			}
			s.bargePending = false
			end := min(s.total, at+int64(asrRate/10))
			s.endUtterance(end)
		}
	}
	if s.bargePending && s.inSpeech {
		// As the assistant core does: count only loud audio (not the VAD's hang-over).
		if s.level.Loud(y) {
			s.voiced += int64(len(y))
		}
		if s.voiced >= int64(s.cfg.BargeInMin.Seconds()*asrRate) {
			s.bargePending = false
			s.bargeIn()
		}
	}
	if s.inSpeech && time.Duration(s.total-s.speechStart)*time.Second/asrRate > s.cfg.MaxUtterance {
		s.endUtterance(s.total)
	}
	if !s.inSpeech && len(s.buf) > 2*asrRate {
		drop := len(s.buf) - asrRate
		s.keep(drop, len(s.buf))
		s.bufStart += int64(drop)
	}
}

// endUtterance closes the utterance at end under server VAD and queues its turn.
func (s *session) endUtterance(end int64) {
	s.inSpeech = false
	from := int(s.speechStart - s.bufStart)
	to := int(end - s.bufStart)
	from = max(0, min(from, len(s.buf)))
	to = max(from, min(to, len(s.buf)))
	pcm, held := s.take(from, to)
	s.bufStart += int64(to)
	item := s.speechItem
	s.send(map[string]any{"type": "input_audio_buffer.speech_stopped", "audio_end_ms": s.ms(end), "item_id": item})
	s.committed(item)
	respond := s.td == nil || s.td.CreateResponse == nil || *s.td.CreateResponse
	s.speechEnd = time.Now()
	s.enqueueTranscription(pcm, held, item, respond)
}

func (s *session) latency(hop string, since time.Time) {
	if s.cfg.OnLatency != nil && !since.IsZero() {
		s.cfg.OnLatency(hop, time.Since(since))
	}
}

// nextItem records item as the conversation's latest and returns the one before it (nil
// for the first), for previous_item_id.
func (s *session) nextItem(item string) any {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	var prev any
	if s.lastItem != "" {
		prev = s.lastItem
	}
	s.lastItem = item
	return prev
}

// committed announces a committed input audio buffer and the user message item it becomes:
// input_audio_buffer.committed, then conversation.item.added and .done (its transcript comes
// later in conversation.item.input_audio_transcription.completed), as OpenAI's GA events go.
func (s *session) committed(item string) {
	prev := s.nextItem(item)
	s.send(map[string]any{"type": "input_audio_buffer.committed", "previous_item_id": prev, "item_id": item})
	it := map[string]any{"id": item, "object": "realtime.item", "type": "message", "status": "completed", "role": "user",
		"content": []any{map[string]any{"type": "input_audio", "transcript": nil}}}
	s.send(map[string]any{"type": "conversation.item.added", "previous_item_id": prev, "item": it})
	s.send(map[string]any{"type": "conversation.item.done", "previous_item_id": prev, "item": it})
}

func (s *session) commit(e *ClientEvent) {
	from := 0
	if s.inSpeech {
		from = int(s.speechStart - s.bufStart)
	}
	pcm := s.buf[max(0, from):]
	if len(pcm) < asrRate/10 {
		s.sendErrorFor("invalid_request_error", "input_audio_buffer_commit_empty", "",
			fmt.Sprintf("Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has %.2fms of audio.", float64(len(pcm))*1000/asrRate), e.EventID)
		return
	}
	item := s.speechItem
	if !s.inSpeech || item == "" {
		item = newID("item_")
	}
	s.inSpeech = false
	n := len(s.buf)
	pcm, held := s.take(max(0, from), n)
	s.bufStart += int64(n)
	s.committed(item)
	// Manual turns wait for response.create; under server VAD a commit answers at once.
	respond := s.td != nil && (s.td.CreateResponse == nil || *s.td.CreateResponse)
	s.enqueueTranscription(pcm, held, item, respond)
}

// truncate records that the client played only audio_end_ms of an answer (its user spoke
// over it): the brain keeps the sentences heard in full.
func (s *session) truncate(e *ClientEvent) {
	s.hmu.Lock()
	last := s.last
	s.hmu.Unlock()
	if e.ItemID != last.item || last.item == "" {
		s.sendErrorFor("invalid_request_error", "item_not_found", "item_id", fmt.Sprintf("no answer item %q to truncate (the latest is %q)", e.ItemID, last.item), e.EventID)
		return
	}
	total := int64(0)
	if n := len(last.endMS); n > 0 {
		total = last.endMS[n-1]
	}
	end := *e.AudioEndMS
	if end > total {
		s.sendErrorFor("invalid_request_error", "invalid_value", "audio_end_ms", fmt.Sprintf("audio_end_ms %d is past the end of the item's audio (%d ms)", end, total), e.EventID)
		return
	}
	var heard []string
	for i, ms := range last.endMS {
		if ms <= end {
			heard = append(heard, last.sentences[i])
		}
	}
	spoken := strings.Join(heard, " ")
	if ib, ok := s.cfg.Brain.(app.Interruptible); ok {
		ib.Interrupted(spoken)
	}
	s.hmu.Lock()
	for i := len(s.history) - 1; i >= 0; i-- {
		if s.history[i].Role == "assistant" {
			s.history[i].Text = spoken
			break
		}
	}
	s.hmu.Unlock()
	s.send(map[string]any{"type": "conversation.item.truncated", "item_id": e.ItemID, "content_index": e.ContentIndex, "audio_end_ms": end})
}

func (s *session) createItem(e *ClientEvent) {
	it := e.Item
	if it.Type != "message" || (it.Role != "user" && it.Role != "system") {
		s.sendErrorFor("invalid_request_error", "invalid_value", "item", "Parley accepts message items from the user (input_text) or system", e.EventID)
		return
	}
	var text strings.Builder
	for _, c := range it.Content {
		if c.Type == "input_text" || c.Type == "text" {
			text.WriteString(c.Text)
		}
	}
	if it.ID == "" {
		it.ID = newID("item_")
	}
	if it.Role == "system" {
		s.instructions = text.String()
	} else {
		s.hmu.Lock()
		s.pending = strings.TrimSpace(s.pending + " " + text.String())
		s.hmu.Unlock()
	}
	it.Object, it.Status = "realtime.item", "completed"
	prev := s.nextItem(it.ID)
	s.send(map[string]any{"type": "conversation.item.added", "previous_item_id": prev, "item": it})
	s.send(map[string]any{"type": "conversation.item.done", "previous_item_id": prev, "item": it})
}

// enqueue queues a job for the worker; a full queue is an error the client sees.
func (s *session) enqueue(job func(ctx context.Context)) bool {
	select {
	case s.jobs <- job:
		return true
	default:
		s.sendError("invalid_request_error", "too_many_pending", "", "too many turns are waiting: wait for response.done")
		return false
	}
}

// enqueueTranscription queues an utterance's transcription; held is the budget its audio
// holds, given back once it is transcribed (or dropped).
func (s *session) enqueueTranscription(pcm []float32, held int64, item string, respond bool) {
	gen := s.respGen.Load()
	ended := s.speechEnd
	s.speechEnd = time.Time{}
	release := func() {
		if s.cfg.Budget != nil {
			s.cfg.Budget.Release(held)
		}
	}
	ok := s.enqueue(func(ctx context.Context) {
		defer release()
		if ctx.Err() != nil {
			return
		}
		t, err := s.cfg.Transcriber.Transcribe(ctx, pcm, app.TranscribeOptions{})
		s.latency("transcript", ended)
		if err != nil {
			if ctx.Err() == nil {
				s.send(map[string]any{"type": "conversation.item.input_audio_transcription.failed", "item_id": item, "content_index": 0,
					"error": map[string]any{"type": "transcription_error", "code": "transcription_failed", "message": err.Error(), "param": nil}})
			}
			return
		}
		s.send(map[string]any{"type": "conversation.item.input_audio_transcription.completed", "item_id": item, "content_index": 0,
			"transcript": t.Text, "language": t.Lang, "emotion": t.Emotion, "audio_event": t.Event})
		s.hmu.Lock()
		s.pending = strings.TrimSpace(s.pending + " " + t.Text)
		s.hmu.Unlock()
		if respond && s.respGen.Load() == gen && strings.TrimSpace(t.Text) != "" {
			s.respondFrom(ctx, t, ended)
		}
	})
	if !ok {
		release()
	}
}

// overrides are what one response.create asks of its answer alone, over the session's.
type overrides struct {
	textOnly *bool
	voice    *string
}

// responseOverrides reads response.create's response object: output_modalities (beta
// modalities) and the voice (GA audio.output.voice, beta voice), checked as session.update
// checks them; a bad one is an error event on its response.* parameter and no response.
func (s *session) responseOverrides(e *ClientEvent) (overrides, bool) {
	var o overrides
	if len(e.Response) == 0 || string(e.Response) == "null" {
		return o, true
	}
	var c SessionConfig
	if err := json.Unmarshal(e.Response, &c); err != nil {
		s.sendErrorFor("invalid_request_error", "invalid_value", "response", fmt.Sprintf("response must be an object: %v", err), e.EventID)
		return o, false
	}
	textOnly, set, param, err := modalities(c)
	if err != nil {
		s.sendErrorFor("invalid_request_error", "invalid_value", strings.Replace(param, "session.", "response.", 1), err.Error(), e.EventID)
		return o, false
	}
	if set {
		o.textOnly = &textOnly
	}
	param = "response.voice"
	o.voice = c.Voice
	if c.Audio != nil && c.Audio.Output != nil && c.Audio.Output.Voice != nil {
		o.voice, param = c.Audio.Output.Voice, "response.audio.output.voice"
	}
	if o.voice != nil && s.cfg.CheckVoice != nil {
		if err := s.cfg.CheckVoice(*o.voice); err != nil {
			s.sendErrorFor("invalid_request_error", "invalid_value", param, err.Error(), e.EventID)
			return o, false
		}
	}
	return o, true
}

func (s *session) enqueueResponse(over overrides) {
	gen := s.respGen.Load()
	s.enqueue(func(ctx context.Context) {
		if ctx.Err() != nil || s.respGen.Load() != gen {
			return
		}
		s.respondWith(ctx, app.Transcript{}, time.Time{}, over)
	})
}

// bargeIn cancels the answer in flight and any queued before now.
func (s *session) bargeIn() {
	s.respGen.Add(1)
	s.stopResponse("turn_detected")
}

func (s *session) cancelResponse() { s.stopResponse("client_cancelled") }

// stopResponse cancels the response in flight, if any, for reason. The first cause wins: a
// response.cancel that a client sends on speech_started must not relabel a barge-in.
func (s *session) stopResponse(reason string) {
	s.jobMu.Lock()
	if s.cancelResp != nil {
		s.cancelReason.Store(reason)
		s.cancelResp()
		s.cancelResp = nil
	}
	s.jobMu.Unlock()
}

// stop ends the session for the server's shutdown (Config.Stop): the answer in flight is
// cancelled and its response.done sent, turns queued are dropped, then Config.AfterStop.
func (s *session) stop() {
	s.stopping.Store(true)
	s.respGen.Add(1)
	s.stopResponse("server_shutdown")
	// The worker runs jobs in order: this one runs once the cancelled answer has said so.
	flushed := make(chan struct{})
	wait := min(s.cfg.WriteTimeout, 5*time.Second)
	select {
	case s.jobs <- func(context.Context) { close(flushed) }:
		select {
		case <-flushed:
		case <-time.After(wait):
		}
	case <-time.After(wait):
	}
	if s.cfg.AfterStop != nil {
		s.cfg.AfterStop()
	}
}

func (s *session) worker() {
	// Every job is called, even after the session ended: each gives back what it holds
	// (they return at once on a done context).
	for job := range s.jobs {
		job(s.ctx)
	}
}

// grow makes room for n more samples in buf, reserving the memory from the budget; false
// when the budget has no room. Growth is by a quarter (at least 5 s), not doubling, so a
// long buffer holds little slack.
func (s *session) grow(n int) bool {
	buf, delta, ok := pcmbuf.Grow(s.buf, n, 5*asrRate, s.cfg.Budget)
	s.buf, s.reserved = buf, s.reserved+delta
	return ok
}

// setBuf replaces buf (with a fresh, unreserved slice, or nil), giving back what the old one held.
func (s *session) setBuf(b []float32) {
	if s.cfg.Budget != nil {
		s.cfg.Budget.Release(s.reserved)
	}
	s.buf, s.reserved = b, 0
}

// keep keeps buf[from:to], in a small fresh buffer when the old one is much larger.
func (s *session) keep(from, to int) {
	if cap(s.buf) <= 10*asrRate {
		s.buf = append(s.buf[:0], s.buf[from:to]...)
		return
	}
	rest := s.buf[from:to]
	s.setBuf(nil)
	if s.grow(len(rest)) {
		s.buf = append(s.buf, rest...)
	}
}

// take hands buf[from:to] to a transcription with the budget the buffer holds (given back
// when it is done), and keeps what follows to in a fresh buffer.
func (s *session) take(from, to int) (pcm []float32, held int64) {
	pcm, held = s.buf[from:to], s.reserved
	rest := s.buf[to:]
	s.buf, s.reserved = nil, 0
	if len(rest) > 0 && s.grow(len(rest)) {
		s.buf = append(s.buf, rest...)
	}
	return pcm, held
}

// respond answers the pending user text: response.created, audio and transcript deltas
// sentence by sentence, then response.done (completed, cancelled or failed).
func (s *session) respondFrom(parent context.Context, heard app.Transcript, ended time.Time) {
	s.respondWith(parent, heard, ended, overrides{})
}

// respondWith is respondFrom with one response's own modalities and voice.
func (s *session) respondWith(parent context.Context, heard app.Transcript, ended time.Time, over overrides) {
	s.hmu.Lock()
	user := s.pending
	s.pending = ""
	hist := append([]app.Message(nil), s.history...)
	voice := s.voice
	textOnly := s.textOnly
	s.hmu.Unlock()
	if over.voice != nil {
		voice = *over.voice
	}
	if over.textOnly != nil {
		textOnly = *over.textOnly
	}
	ctx, cancel := context.WithCancel(parent)
	s.jobMu.Lock()
	if s.stopping.Load() { // the server is shutting down: no answer starts
		s.jobMu.Unlock()
		cancel()
		return
	}
	s.cancelResp = cancel
	s.jobMu.Unlock()
	defer func() {
		s.jobMu.Lock()
		s.cancelResp = nil
		s.jobMu.Unlock()
		cancel()
	}()
	respID, itemID := newID("resp_"), newID("item_")
	var prevItem any
	s.hmu.Lock()
	s.last = answer{item: itemID}
	s.hmu.Unlock()
	sentSamples := int64(0)
	s.send(map[string]any{"type": "response.created", "response": map[string]any{"id": respID, "object": "realtime.response", "status": "in_progress", "output": []any{}}})
	item := func(status string, content []any) map[string]any {
		return map[string]any{"id": itemID, "object": "realtime.item", "type": "message", "status": status, "role": "assistant", "content": content}
	}
	part := func(text string) map[string]any { return map[string]any{"type": "output_audio", "transcript": text} }
	if textOnly {
		part = func(text string) map[string]any { return map[string]any{"type": "output_text", "text": text} }
	}
	ids := func(ev map[string]any) map[string]any {
		ev["response_id"], ev["item_id"], ev["output_index"], ev["content_index"] = respID, itemID, 0, 0
		return ev
	}
	begun := false
	done := func(status string, details any, text string) {
		var output []any
		if begun {
			if textOnly {
				s.send(ids(map[string]any{"type": "response.output_text.done", "text": text}))
			} else {
				s.send(ids(map[string]any{"type": "response.output_audio.done"}))
				s.send(ids(map[string]any{"type": "response.output_audio_transcript.done", "transcript": text}))
			}
			s.send(ids(map[string]any{"type": "response.content_part.done", "part": part(text)}))
			it := item(map[bool]string{true: "completed", false: "incomplete"}[status == "completed"], []any{part(text)})
			s.send(map[string]any{"type": "response.output_item.done", "response_id": respID, "output_index": 0, "item": it})
			s.send(map[string]any{"type": "conversation.item.done", "previous_item_id": prevItem, "item": it})
			output = []any{it}
		}
		s.send(map[string]any{"type": "response.done", "response": map[string]any{"id": respID, "object": "realtime.response", "status": status,
			"status_details": details, "output": output, "usage": s.usage(user, hist, text)}})
		if s.cfg.RateLimits != nil {
			var limits []any
			for _, l := range s.cfg.RateLimits() {
				limits = append(limits, map[string]any{"name": l.Name, "limit": l.Limit, "remaining": l.Remaining, "reset_seconds": l.ResetSeconds})
			}
			s.send(map[string]any{"type": "rate_limits.updated", "rate_limits": limits})
		}
	}
	if strings.TrimSpace(user) == "" {
		s.sendError("invalid_request_error", "no_input", "", "there is nothing to respond to yet: send audio or a conversation.item.create first")
		done("failed", map[string]any{"type": "failed", "error": map[string]any{"type": "invalid_request_error", "code": "no_input"}}, "")
		return
	}
	// the answer's item and its audio part open before any of its audio
	begun = true
	prevItem = s.nextItem(itemID)
	s.send(map[string]any{"type": "response.output_item.added", "response_id": respID, "output_index": 0, "item": item("in_progress", []any{})})
	s.send(map[string]any{"type": "conversation.item.added", "previous_item_id": prevItem, "item": item("in_progress", []any{})})
	s.send(ids(map[string]any{"type": "response.content_part.added", "part": part("")}))
	heard.Text = user
	var spoken strings.Builder
	out := app.RateFollower{Rate: Rate, Quality: audio.QualityMedium}
	buf := make([]byte, 0, 9600)
	speak := func(sentence string) error {
		s.send(map[string]any{"type": "response.output_audio_transcript.delta", "response_id": respID, "item_id": itemID, "output_index": 0, "content_index": 0, "delta": sentence})
		err := s.cfg.Voice.Synthesize(ctx, sentence, voice, func(pcm []float32, rate int) error {
			pcm, err := out.Process(pcm, rate)
			if err != nil {
				return err
			}
			for len(pcm) > 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
				n := min(len(pcm), Rate/5)
				if sentSamples == 0 {
					s.latency("first_audio", ended)
				}
				buf = audio.EncodePCM(buf[:0], pcm[:n], audio.S16)
				pcm = pcm[n:]
				sentSamples += int64(n)
				s.send(map[string]any{"type": "response.output_audio.delta", "response_id": respID, "item_id": itemID, "output_index": 0, "content_index": 0,
					"delta": base64.StdEncoding.EncodeToString(buf)})
				if s.dead.Load() {
					return context.Canceled
				}
			}
			return nil
		})
		if err == nil {
			spoken.WriteString(sentence)
			spoken.WriteString(" ")
			s.hmu.Lock()
			if s.last.item == itemID {
				s.last.sentences = append(s.last.sentences, sentence)
				s.last.endMS = append(s.last.endMS, sentSamples*1000/Rate)
			}
			s.hmu.Unlock()
		}
		return err
	}
	var written strings.Builder // text mode: the answer as streamed
	sink := app.AnswerSink{Sentence: speak}
	if textOnly {
		sink = app.AnswerSink{Delta: func(delta string) error {
			written.WriteString(delta)
			s.send(ids(map[string]any{"type": "response.output_text.delta", "delta": delta}))
			return nil
		}}
	}
	err := app.StreamAnswer(ctx, s.cfg.Brain, heard, hist, s.newChunker(), sink)
	text := strings.TrimSpace(spoken.String())
	if textOnly {
		text = strings.TrimSpace(written.String())
	}
	s.hmu.Lock()
	s.history = append(s.history, app.Message{Role: "user", Text: user})
	if text != "" {
		s.history = append(s.history, app.Message{Role: "assistant", Text: text})
	}
	s.hmu.Unlock()
	switch {
	case err == nil:
		done("completed", nil, text)
	case ctx.Err() != nil:
		if ib, ok := s.cfg.Brain.(app.Interruptible); ok {
			ib.Interrupted(text)
		}
		reason, _ := s.cancelReason.Load().(string)
		if reason == "" || parent.Err() != nil {
			reason = "client_cancelled"
		}
		done("cancelled", map[string]any{"type": "cancelled", "reason": reason}, text)
	default:
		s.sendError("server_error", "response_failed", "", err.Error())
		done("failed", map[string]any{"type": "failed", "error": map[string]any{"type": "server_error", "message": err.Error()}}, text)
	}
}

// EstimateTokens is a text's token count without a tokenizer: about 4 characters a token.
func EstimateTokens(text string) int { return (utf8.RuneCountInString(text) + 3) / 4 }

// usage is response.done's usage: the text tokens of what the model read (the history and
// the user's turn) and of what it wrote.
func (s *session) usage(user string, hist []app.Message, answer string) map[string]any {
	count := s.cfg.Tokens
	if count == nil {
		count = EstimateTokens
	}
	in := count(user)
	for _, m := range hist {
		in += count(m.Text)
	}
	out := count(answer)
	return map[string]any{"total_tokens": in + out, "input_tokens": in, "output_tokens": out,
		"input_token_details":  map[string]any{"text_tokens": in, "audio_tokens": 0, "cached_tokens": 0},
		"output_token_details": map[string]any{"text_tokens": out, "audio_tokens": 0}}
}

func (s *session) newChunker() app.Chunker {
	if s.cfg.NewChunker != nil {
		return s.cfg.NewChunker()
	}
	return app.NewSimpleChunker()
}
