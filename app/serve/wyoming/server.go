package wyoming

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/serve/internal/pcmbuf"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/llm/chunk"
)

// Event types.
const (
	TypeDescribe          = "describe"
	TypeInfo              = "info"
	TypeTranscribe        = "transcribe"
	TypeTranscript        = "transcript"
	TypeTranscriptStart   = "transcript-start"
	TypeTranscriptChunk   = "transcript-chunk"
	TypeTranscriptStop    = "transcript-stop"
	TypeAudioStart        = "audio-start"
	TypeAudioChunk        = "audio-chunk"
	TypeAudioStop         = "audio-stop"
	TypeSynthesize        = "synthesize"
	TypeSynthesizeStart   = "synthesize-start"
	TypeSynthesizeChunk   = "synthesize-chunk"
	TypeSynthesizeStop    = "synthesize-stop"
	TypeSynthesizeStopped = "synthesize-stopped"
	TypeError             = "error"
	TypePing              = "ping"
	TypePong              = "pong"
)

// Attribution credits an artifact.
type Attribution struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// Artifact is what info.py's Artifact holds.
type Artifact struct {
	Name        string      `json:"name"`
	Attribution Attribution `json:"attribution"`
	Installed   bool        `json:"installed"`
	Description string      `json:"description"`
	Version     string      `json:"version,omitempty"`
}

// AsrModel is one speech recognition model.
type AsrModel struct {
	Artifact
	Languages []string `json:"languages"`
}

// AsrProgram is a speech recognition service.
type AsrProgram struct {
	Artifact
	Models                      []AsrModel `json:"models"`
	SupportsTranscriptStreaming bool       `json:"supports_transcript_streaming"`
}

// Speaker is one speaker of a voice.
type Speaker struct {
	Name string `json:"name"`
}

// TtsVoice is one voice.
type TtsVoice struct {
	Artifact
	Languages []string  `json:"languages"`
	Speakers  []Speaker `json:"speakers,omitempty"`
}

// TtsProgram is a speech synthesis service.
type TtsProgram struct {
	Artifact
	Voices                      []TtsVoice `json:"voices"`
	SupportsSynthesizeStreaming bool       `json:"supports_synthesize_streaming"`
}

// Info answers describe.
type Info struct {
	ASR    []AsrProgram `json:"asr"`
	TTS    []TtsProgram `json:"tts"`
	Handle []any        `json:"handle"`
	Intent []any        `json:"intent"`
	Wake   []any        `json:"wake"`
}

// AudioFormat is the data of audio-start and audio-chunk.
type AudioFormat struct {
	Rate      int    `json:"rate"`
	Width     int    `json:"width"`
	Channels  int    `json:"channels"`
	Timestamp *int64 `json:"timestamp,omitempty"`
}

// Voice is the voice a synthesize event asks for.
type Voice struct {
	Name     string `json:"name,omitempty"`
	Language string `json:"language,omitempty"`
	Speaker  string `json:"speaker,omitempty"`
}

// Transcript is the transcript event's data.
type Transcript struct {
	Text     string `json:"text"`
	Language string `json:"language,omitempty"`
}

// Synthesizer speaks text, streaming mono PCM (and its rate) to emit.
type Synthesizer interface {
	Synthesize(ctx context.Context, text string, v Voice, emit func(pcm []float32, rate int) error) error
}

// Budget is memory shared by many connections' buffers, in bytes.
type Budget = pcmbuf.Budget

// Server answers Wyoming connections: ASR when ASR is set, TTS when TTS is set.
type Server struct {
	ASR  app.Transcriber // utterances of 16 kHz mono; the client's language goes in its options
	TTS  Synthesizer
	Info Info

	Limits          Limits
	MaxAudioSeconds int           // per transcription; default 300
	MaxText         int           // characters per synthesis; default 16384
	MaxConns        int           // concurrent connections; default 256
	IdleTimeout     time.Duration // between events; default 5 min
	BodyTimeout     time.Duration // for an event's data and payload once its header is in; default 30 s
	WriteTimeout    time.Duration // per event written; default 30 s
	Log             *slog.Logger
	// ErrorCode names an error for the error event's code (e.g. "busy"); nil: "error".
	ErrorCode func(error) string
	// Count, if set, is told of each event type handled (for metrics).
	Count func(typ string)
	// Budget, if set, bounds the memory utterances buffer across connections: audio grows
	// only by reserving from it (else the client gets a "busy" error event).
	Budget Budget
	// MaxConnsPerClient bounds one client address's connections; default 16.
	MaxConnsPerClient int
	// MinRate is the lowest audio rate accepted; default 4000 Hz.
	MinRate int

	mu       sync.Mutex
	lns      []net.Listener
	conns    map[net.Conn]*conn
	byHost   map[string]int
	wg       sync.WaitGroup
	draining atomic.Bool
}

func (s *Server) defaults() {
	if s.MaxAudioSeconds <= 0 {
		s.MaxAudioSeconds = 300
	}
	if s.MaxText <= 0 {
		s.MaxText = 16384
	}
	if s.MaxConns <= 0 {
		s.MaxConns = 256
	}
	if s.MaxConnsPerClient <= 0 {
		s.MaxConnsPerClient = 16
	}
	if s.MinRate <= 0 {
		s.MinRate = 4000
	}
	if s.IdleTimeout <= 0 {
		s.IdleTimeout = 5 * time.Minute
	}
	if s.WriteTimeout <= 0 {
		s.WriteTimeout = 30 * time.Second
	}
	if s.BodyTimeout <= 0 {
		s.BodyTimeout = 30 * time.Second
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
}

// Serve accepts connections until ln is closed (by CloseListener) or ctx ends. Connections
// live under ctx: cancelling it stops work in flight.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.defaults()
	s.mu.Lock()
	s.lns = append(s.lns, ln)
	if s.conns == nil {
		s.conns = map[net.Conn]*conn{}
		s.byHost = map[string]int{}
	}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		host := c.RemoteAddr().String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		s.mu.Lock()
		if len(s.conns) >= s.MaxConns || s.byHost[host] >= s.MaxConnsPerClient {
			s.mu.Unlock()
			c.SetWriteDeadline(time.Now().Add(time.Second))
			WriteEvent(c, NewEvent(TypeError, map[string]string{"text": "too many connections", "code": "busy"}))
			c.Close()
			continue
		}
		cn := &conn{s: s, c: c, ctx: ctx}
		s.conns[c] = cn
		s.byHost[host]++
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				if s.byHost[host]--; s.byHost[host] <= 0 {
					delete(s.byHost, host)
				}
				s.mu.Unlock()
			}()
			s.serveConn(cn)
		}()
	}
}

// CloseListener stops accepting new connections and starts draining: connections end after
// the exchange they are in (an utterance being sent, a streamed synthesis) is answered; idle
// ones end now.
func (s *Server) CloseListener() {
	s.draining.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lns {
		l.Close()
	}
	for c, cn := range s.conns {
		if !cn.busy.Load() {
			c.SetReadDeadline(time.Now())
		}
	}
}

// Wait waits for connections to end; when ctx ends first, it closes them.
func (s *Server) Wait(ctx context.Context) {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	<-done
}

// conn is one connection's state.
type conn struct {
	s    *Server
	c    net.Conn
	ctx  context.Context
	busy atomic.Bool // inside a multi-event exchange

	// ASR
	language  string
	inAudio   bool
	format    AudioFormat
	resampler *audio.Resampler
	pcm       []float32
	reserved  int64 // bytes of the budget pcm holds
	tmp       []float32

	// TTS streaming
	streaming   bool
	streamed    bool // a streamed synthesis just ended: ignore the compatibility synthesize
	voice       Voice
	chunker     *chunk.Chunker
	audioOpen   bool
	streamChars int
	rate        int
}

// serveConn serves one connection until it ends, then closes it and gives back what it
// held of the audio budget.
func (s *Server) serveConn(cn *conn) {
	defer cn.c.Close()
	defer cn.dropAudio()
	s.handle(cn)
}

func (s *Server) handle(cn *conn) {
	c, ctx := cn.c, cn.ctx
	r := NewReader(c, s.Limits)
	for {
		c.SetReadDeadline(time.Now().Add(s.IdleTimeout))
		if s.draining.Load() && !cn.busy.Load() && r.Buffered() == 0 {
			return
		}
		e, err := readEvent(r, s.Limits, func(int, int) {
			// A header announced data and payload: they must follow promptly (a client that
			// lies about the length and stalls is dropped, not kept for the idle timeout).
			c.SetReadDeadline(time.Now().Add(s.BodyTimeout))
		})
		if err != nil {
			if errors.Is(err, ErrFrame) {
				cn.sendError(err.Error(), "bad-frame")
				// Let the client read the error: stop writing, swallow what it still sends
				// (closing with unread input would reset the connection), then close.
				if tc, ok := c.(interface{ CloseWrite() error }); ok {
					tc.CloseWrite()
					c.SetReadDeadline(time.Now().Add(time.Second))
					io.Copy(io.Discard, io.LimitReader(c, 1<<20))
				}
			} else if !errors.Is(err, io.EOF) && ctx.Err() == nil && !s.draining.Load() {
				s.Log.Debug("wyoming: connection ended", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		if s.Count != nil {
			s.Count(e.Type)
		}
		err = cn.dispatch(e)
		cn.busy.Store(cn.inAudio || cn.streaming)
		if err != nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (cn *conn) send(e *Event) error {
	cn.c.SetWriteDeadline(time.Now().Add(cn.s.WriteTimeout))
	return WriteEvent(cn.c, e)
}

func (cn *conn) sendError(text, code string) error {
	return cn.send(NewEvent(TypeError, map[string]string{"text": text, "code": code}))
}

func (cn *conn) fail(err error) error {
	code := "error"
	if cn.s.ErrorCode != nil {
		code = cn.s.ErrorCode(err)
	}
	return cn.sendError(err.Error(), code)
}

// dispatch handles one event; an error ends the connection.
func (cn *conn) dispatch(e *Event) error {
	switch e.Type {
	case TypeDescribe:
		return cn.send(NewEvent(TypeInfo, cn.s.Info))
	case TypePing:
		return cn.send(NewEvent(TypePong, e.Data))
	case TypeTranscribe, TypeAudioStart, TypeAudioChunk, TypeAudioStop:
		if cn.s.ASR == nil {
			return cn.sendError("this server does not recognise speech (it is the TTS service)", "unsupported")
		}
		return cn.asrEvent(e)
	case TypeSynthesize, TypeSynthesizeStart, TypeSynthesizeChunk, TypeSynthesizeStop:
		if cn.s.TTS == nil {
			return cn.sendError("this server does not synthesise speech (it is the ASR service)", "unsupported")
		}
		return cn.ttsEvent(e)
	}
	// Unknown events are ignored, as Wyoming services do.
	return nil
}

func (cn *conn) asrEvent(e *Event) error {
	switch e.Type {
	case TypeTranscribe:
		var t struct {
			Name     string `json:"name"`
			Language string `json:"language"`
		}
		if err := e.Decode(&t); err != nil {
			return cn.sendError(err.Error(), "bad-request")
		}
		cn.language = t.Language
		return nil
	case TypeAudioStart, TypeAudioChunk:
		var f AudioFormat
		if err := e.Decode(&f); err != nil {
			return cn.sendError(err.Error(), "bad-request")
		}
		if e.Type == TypeAudioStart || !cn.inAudio {
			if err := cn.startAudio(f); err != nil {
				cn.inAudio = false
				return cn.sendError(err.Error(), "bad-audio")
			}
		}
		if e.Type == TypeAudioChunk {
			if f.Rate != 0 && (f.Rate != cn.format.Rate || f.Width != cn.format.Width || f.Channels != cn.format.Channels) {
				cn.inAudio = false
				return cn.sendError(fmt.Sprintf("audio-chunk format %d Hz/%d bytes/%d ch differs from audio-start's %d Hz/%d bytes/%d ch",
					f.Rate, f.Width, f.Channels, cn.format.Rate, cn.format.Width, cn.format.Channels), "bad-audio")
			}
			return cn.addAudio(e.Payload)
		}
		return nil
	case TypeAudioStop:
		if !cn.inAudio {
			return cn.sendError("audio-stop without audio", "bad-request")
		}
		cn.inAudio = false
		if cn.resampler != nil {
			if cn.grow(4096) {
				cn.pcm = cn.resampler.Flush(cn.pcm)
			}
		}
		pcm := cn.pcm
		defer cn.dropAudio() // once transcribed, the utterance's memory goes back
		if len(pcm) == 0 {
			return cn.sendError("no audio was sent between audio-start and audio-stop", "bad-audio")
		}
		return cn.transcribe(pcm)
	}
	return nil
}

func (cn *conn) startAudio(f AudioFormat) error {
	if f.Rate < cn.s.MinRate || f.Rate > 384000 {
		// below the floor a few bytes would claim minutes of audio once resampled
		return fmt.Errorf("audio rate %d Hz is not supported (%d–384000 Hz)", f.Rate, cn.s.MinRate)
	}
	if f.Channels < 1 || f.Channels > 8 {
		return fmt.Errorf("audio channels %d is not supported", f.Channels)
	}
	switch f.Width {
	case 1, 2, 4:
	default:
		return fmt.Errorf("audio width %d bytes is not supported (1, 2 or 4)", f.Width)
	}
	cn.dropAudio()
	cn.format, cn.inAudio = f, true
	cn.resampler = nil
	if f.Rate != 16000 {
		r, err := audio.NewResampler(f.Rate, 16000, 1, audio.QualityHigh)
		if err != nil {
			return err
		}
		cn.resampler = r
	}
	return nil
}

func (cn *conn) addAudio(b []byte) error {
	f := cn.format
	frame := f.Width * f.Channels
	if len(b)%frame != 0 {
		cn.inAudio = false
		return cn.sendError(fmt.Sprintf("audio-chunk payload of %d bytes is not whole frames of %d bytes", len(b), frame), "bad-audio")
	}
	sf := map[int]audio.SampleFormat{1: audio.U8, 2: audio.S16, 4: audio.S32}[f.Width]
	// in blocks, so a large payload needs no large scratch buffer
	const blockFrames = 8192
	for len(b) > 0 {
		blk := b[:min(len(b), blockFrames*frame)]
		b = b[len(blk):]
		n := len(blk) / f.Width
		if cap(cn.tmp) < n {
			cn.tmp = make([]float32, n)
		}
		x := cn.tmp[:n]
		audio.DecodePCM(x, blk, sf)
		if f.Channels > 1 {
			x = audio.DownMix(x[:0], x, f.Channels)
		}
		if len(cn.pcm)+len(x)*16000/f.Rate > cn.s.MaxAudioSeconds*16000 {
			cn.inAudio = false
			cn.dropAudio()
			return cn.sendError(fmt.Sprintf("audio longer than %d s", cn.s.MaxAudioSeconds), "too-long")
		}
		if !cn.grow(len(x)*16000/f.Rate + 256) {
			cn.inAudio = false
			cn.dropAudio()
			return cn.sendError("the server's memory for buffered audio is full; retry shortly", "busy")
		}
		if cn.resampler != nil {
			cn.pcm = cn.resampler.Process(cn.pcm, x)
		} else {
			cn.pcm = append(cn.pcm, x...)
		}
	}
	return nil
}

// grow makes room for n more samples in pcm, reserving the memory from the budget. Growth
// is by a quarter (at least 5 s), not doubling, so a long utterance holds little slack.
func (cn *conn) grow(n int) bool {
	pcm, delta, ok := pcmbuf.Grow(cn.pcm, n, 5*16000, cn.s.Budget)
	cn.pcm, cn.reserved = pcm, cn.reserved+delta
	return ok
}

// dropAudio lets go of the buffered utterance and what it held of the budget.
func (cn *conn) dropAudio() {
	if cn.s.Budget != nil {
		cn.s.Budget.Release(cn.reserved)
	}
	cn.pcm, cn.reserved = nil, 0
}

func (cn *conn) transcribe(pcm []float32) error {
	started := false
	var sendErr error
	heard, err := cn.s.ASR.Transcribe(cn.ctx, pcm, app.TranscribeOptions{Language: cn.language, OnSegment: func(text string) error {
		if !started {
			started = true
			if sendErr = cn.send(NewEvent(TypeTranscriptStart, map[string]string{"language": cn.language})); sendErr != nil {
				return sendErr
			}
		}
		sendErr = cn.send(NewEvent(TypeTranscriptChunk, map[string]string{"text": text}))
		return sendErr
	}})
	if sendErr != nil {
		return sendErr
	}
	if err != nil {
		return cn.fail(err)
	}
	t := Transcript{Text: heard.Text, Language: heard.Lang}
	if t.Language == "" {
		t.Language = cn.language
	}
	if !started {
		if err := cn.send(NewEvent(TypeTranscriptStart, map[string]string{"language": t.Language})); err != nil {
			return err
		}
		if t.Text != "" {
			if err := cn.send(NewEvent(TypeTranscriptChunk, map[string]string{"text": t.Text})); err != nil {
				return err
			}
		}
	}
	if err := cn.send(NewEvent(TypeTranscriptStop, nil)); err != nil {
		return err
	}
	return cn.send(NewEvent(TypeTranscript, t))
}

func (cn *conn) ttsEvent(e *Event) error {
	switch e.Type {
	case TypeSynthesize:
		if cn.streaming || cn.streamed {
			// Clients send the whole text as a plain synthesize too, for servers without
			// streaming; we already spoke it.
			cn.streamed = false
			return nil
		}
		var req struct {
			Text  string `json:"text"`
			Voice Voice  `json:"voice"`
		}
		if err := e.Decode(&req); err != nil {
			return cn.sendError(err.Error(), "bad-request")
		}
		if strings.TrimSpace(req.Text) == "" {
			return cn.sendError("synthesize has no text", "bad-request")
		}
		if n := utf8.RuneCountInString(req.Text); n > cn.s.MaxText {
			return cn.sendError(fmt.Sprintf("text of %d characters is over the limit of %d", n, cn.s.MaxText), "too-long")
		}
		cn.audioOpen = false
		ok, err := cn.speak(req.Text, req.Voice)
		if err != nil || !ok {
			return err
		}
		return cn.closeAudio()
	case TypeSynthesizeStart:
		var req struct {
			Voice Voice `json:"voice"`
		}
		if err := e.Decode(&req); err != nil {
			return cn.sendError(err.Error(), "bad-request")
		}
		cn.streaming, cn.streamed, cn.voice = true, false, req.Voice
		cn.chunker = chunk.New(chunk.DefaultOptions())
		cn.audioOpen, cn.streamChars = false, 0
		return nil
	case TypeSynthesizeChunk:
		if !cn.streaming {
			return cn.sendError("synthesize-chunk without synthesize-start", "bad-request")
		}
		var req struct {
			Text string `json:"text"`
		}
		if err := e.Decode(&req); err != nil {
			return cn.sendError(err.Error(), "bad-request")
		}
		cn.streamChars += utf8.RuneCountInString(req.Text)
		if cn.streamChars > cn.s.MaxText {
			cn.streaming = false
			return cn.sendError(fmt.Sprintf("streamed text is over the limit of %d characters", cn.s.MaxText), "too-long")
		}
		for _, sentence := range cn.chunker.Push(req.Text) {
			if ok, err := cn.speak(sentence, cn.voice); err != nil || !ok {
				cn.streaming = false
				return err
			}
		}
		return nil
	case TypeSynthesizeStop:
		if !cn.streaming {
			return cn.sendError("synthesize-stop without synthesize-start", "bad-request")
		}
		cn.streaming, cn.streamed = false, true
		for _, sentence := range cn.chunker.Flush() {
			if ok, err := cn.speak(sentence, cn.voice); err != nil || !ok {
				return err
			}
		}
		if err := cn.closeAudio(); err != nil {
			return err
		}
		return cn.send(NewEvent(TypeSynthesizeStopped, nil))
	}
	return nil
}

// speak synthesises text into audio-chunk events (opening the audio with audio-start on
// the first chunk). ok is false when the engine failed (an error event was sent).
func (cn *conn) speak(text string, v Voice) (ok bool, err error) {
	if strings.TrimSpace(text) == "" {
		return true, nil
	}
	var sendErr error
	buf := make([]byte, 0, 4096)
	synthErr := cn.s.TTS.Synthesize(cn.ctx, text, v, func(pcm []float32, rate int) error {
		if !cn.audioOpen {
			cn.audioOpen, cn.rate = true, rate
			if sendErr = cn.send(NewEvent(TypeAudioStart, AudioFormat{Rate: rate, Width: 2, Channels: 1})); sendErr != nil {
				return sendErr
			}
		}
		for len(pcm) > 0 {
			n := min(len(pcm), 1024)
			buf = audio.EncodePCM(buf[:0], pcm[:n], audio.S16)
			pcm = pcm[n:]
			e := NewEvent(TypeAudioChunk, AudioFormat{Rate: cn.rate, Width: 2, Channels: 1})
			e.Payload = buf
			if sendErr = cn.send(e); sendErr != nil {
				return sendErr
			}
		}
		return nil
	})
	if sendErr != nil {
		return false, sendErr
	}
	if synthErr != nil {
		if cn.audioOpen {
			cn.closeAudio()
		}
		return false, cn.fail(synthErr)
	}
	return true, nil
}

// closeAudio ends the audio with audio-stop (sending an empty audio-start first when no
// audio was produced, so clients always see a well-formed stream).
func (cn *conn) closeAudio() error {
	if !cn.audioOpen {
		rate := cn.rate
		if rate == 0 {
			rate = 22050
		}
		if err := cn.send(NewEvent(TypeAudioStart, AudioFormat{Rate: rate, Width: 2, Channels: 1})); err != nil {
			return err
		}
	}
	cn.audioOpen = false
	return cn.send(NewEvent(TypeAudioStop, nil))
}
