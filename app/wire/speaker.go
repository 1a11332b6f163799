package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"
)

// Speaker is the assistant's playback device, closed while nothing plays: a push-to-talk
// assistant at rest (the Mic's gate), and in every mode once it has had nothing to play for
// speakerIdle. An open output stream plays silence and costs about a percent of a core;
// opening one takes milliseconds, done when Talk is pressed or by the first write of an
// answer. It keeps the playback device's behaviour (a lost device is reopened) and one echo
// reference across its streams (the echo is aligned by sample counts and re-synchronised
// after the gap, see Echo).
type Speaker struct {
	open func() (*device.ResilientPlayback, error)
	// openAside opens a stream for audio that is not part of a live turn (a voice preview):
	// a deep device buffer, so that a busy machine does not make it stutter; nil: open
	openAside func() (*device.ResilientPlayback, error)
	in        audio.Format
	echo      audio.Format // the echo reference's format; zero: none
	log       *slog.Logger

	mu      sync.Mutex
	cur     *device.ResilientPlayback // nil while closed
	closed  bool
	changed chan struct{} // closed (and replaced) when cur or closed change
	linger  *time.Timer   // a pending close
	writing int           // Writes in progress: the stream is not closed under them
	idle    *time.Timer   // closes the stream speakerIdle after the last write
	aside   bool          // cur was opened by openAside
	// closing counts streams taken out of cur and being closed outside mu (the idle and
	// linger timers, an aside replaced): Close waits for them, so that the device host the
	// owner closes next is never shut down under a stream still stopping (PortAudio's
	// Terminate would then join the stream's thread a second time and hang).
	closing sync.WaitGroup
}

// speakerIdle is how long an open stream with nothing to play stays open.
const speakerIdle = 3 * time.Second

// speakerLinger is how long the stream stays open after the gate closes: the device plays
// out its last buffers, and a quick follow-up does not reopen it.
const speakerLinger = 3 * time.Second

func newSpeaker(first *device.ResilientPlayback, open func() (*device.ResilientPlayback, error), log *slog.Logger) *Speaker {
	s := &Speaker{open: open, in: first.Format(), log: log, cur: first, changed: make(chan struct{})}
	if first.EchoRef() != nil {
		s.echo = first.DeviceFormat()
	}
	s.mu.Lock()
	s.armIdleLocked()
	s.mu.Unlock()
	return s
}

// armIdleLocked (re)starts the idle close. s.mu is held.
func (s *Speaker) armIdleLocked() {
	if s.idle == nil {
		s.idle = time.AfterFunc(speakerIdle, s.closeIfIdle)
		return
	}
	s.idle.Reset(speakerIdle)
}

// closeIfIdle closes the stream when nothing is being written or waits to be played.
func (s *Speaker) closeIfIdle() {
	s.mu.Lock()
	if s.closed || s.cur == nil || s.writing > 0 {
		s.mu.Unlock()
		return
	}
	if q := s.cur.Queued(); q > 0 {
		s.idle.Reset(q + speakerIdle)
		s.mu.Unlock()
		return
	}
	cur := s.detachLocked()
	s.mu.Unlock()
	s.log.Debug("speaker closed: nothing to play")
	s.closeDetached(cur)
}

// detachLocked takes the stream out of cur for closing outside mu (closeDetached). s.mu is held.
func (s *Speaker) detachLocked() *device.ResilientPlayback {
	cur := s.cur
	s.cur = nil
	s.bump()
	if cur != nil {
		s.closing.Add(1)
	}
	return cur
}

// closeDetached closes a stream detachLocked took out.
func (s *Speaker) closeDetached(cur *device.ResilientPlayback) {
	if cur != nil {
		defer s.closing.Done()
		cur.Close()
	}
}

// setOpen opens the stream at once, or closes it after speakerLinger.
func (s *Speaker) setOpen(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.linger != nil {
		s.linger.Stop()
		s.linger = nil
	}
	if !on {
		if s.cur != nil {
			s.linger = time.AfterFunc(speakerLinger, s.closeNow)
		}
		return
	}
	if s.cur == nil {
		if _, err := s.openLocked(false); err != nil {
			s.log.Warn("speaker did not open", "err", err) // Write tries again and reports it
		}
	}
	s.armIdleLocked()
}

func (s *Speaker) closeNow() {
	s.mu.Lock()
	cur := s.detachLocked()
	s.linger = nil
	s.mu.Unlock()
	s.closeDetached(cur)
}

func (s *Speaker) bump() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// openLocked opens a stream: the deep-buffered one for an aside when there is one. s.mu is
// held.
func (s *Speaker) openLocked(aside bool) (*device.ResilientPlayback, error) {
	open := s.open
	if aside = aside && s.openAside != nil; aside {
		open = s.openAside
	}
	c, err := open()
	if err != nil {
		return nil, err
	}
	s.cur, s.aside = c, aside
	s.bump()
	return c, nil
}

// acquire returns the open stream, opening it if a write came while closed. A live write
// replaces a stream opened for an aside (whose deep buffer would delay the answer).
func (s *Speaker) acquire(aside bool) (*device.ResilientPlayback, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, device.ErrClosed
	}
	if s.cur != nil && (aside || !s.aside) {
		defer s.mu.Unlock()
		return s.cur, nil
	}
	if s.cur != nil { // an aside's stream: closed (what it still queues is cut), then a live one
		old := s.detachLocked()
		s.mu.Unlock()
		s.closeDetached(old)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, device.ErrClosed
		}
		if s.cur != nil { // another write opened one meanwhile
			defer s.mu.Unlock()
			return s.cur, nil
		}
	}
	defer s.mu.Unlock()
	return s.openLocked(aside)
}

// Write writes to the open stream (see device.ResilientPlayback.Write), opening it if needed.
func (s *Speaker) Write(ctx context.Context, pcm []float32) (int, error) {
	return s.write(ctx, pcm, false)
}

// writeAside is Write for audio outside a live turn: at rest it opens the deep-buffered
// stream (openAside).
func (s *Speaker) writeAside(ctx context.Context, pcm []float32) (int, error) {
	return s.write(ctx, pcm, true)
}

func (s *Speaker) write(ctx context.Context, pcm []float32, aside bool) (int, error) {
	s.mu.Lock()
	s.writing++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.writing--; s.writing == 0 && !s.closed {
			s.armIdleLocked()
		}
		s.mu.Unlock()
	}()
	cur, err := s.acquire(aside)
	if err != nil {
		return 0, err
	}
	return cur.Write(ctx, pcm)
}

// current is the open stream (nil while closed).
func (s *Speaker) current() *device.ResilientPlayback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Latency is the open stream's output latency (0 while closed).
func (s *Speaker) Latency() time.Duration {
	cur := s.current()
	if cur == nil {
		return 0
	}
	return cur.Latency()
}

// Format is the format Write accepts.
func (s *Speaker) Format() audio.Format { return s.in }

// Queued is the audio waiting to be played (0 while closed).
func (s *Speaker) Queued() time.Duration {
	cur := s.current()
	if cur == nil {
		return 0
	}
	return cur.Queued()
}

// Stop drops everything queued.
func (s *Speaker) Stop() {
	if cur := s.current(); cur != nil {
		cur.Stop()
	}
}

// IsOpen says whether the device stream is open now.
func (s *Speaker) IsOpen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil
}

// Health is the open stream's recovery record (zero while closed).
func (s *Speaker) Health() device.Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return device.Health{}
	}
	return s.cur.Health()
}

// EchoRef is what the speaker played, stream after stream (nil without an echo reference).
// While it is closed nothing is played and a Read waits.
func (s *Speaker) EchoRef() audio.Source {
	if s.echo.SampleRate == 0 {
		return nil
	}
	return &speakerEcho{s: s}
}

// Close closes the stream for good.
func (s *Speaker) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.linger != nil {
		s.linger.Stop()
	}
	if s.idle != nil {
		s.idle.Stop()
	}
	cur := s.cur
	s.cur = nil
	s.bump()
	s.mu.Unlock()
	var err error
	if cur != nil {
		err = cur.Close()
	}
	s.closing.Wait() // a timer's close still stopping its stream
	return err
}

type speakerEcho struct {
	s   *Speaker
	cur *device.ResilientPlayback // the stream src belongs to
	src audio.Source
}

func (e *speakerEcho) Format() audio.Format { return e.s.echo }

func (e *speakerEcho) Read(ctx context.Context, dst []float32) (int, error) {
	for {
		if e.src == nil {
			s := e.s
			s.mu.Lock()
			cur, closed, changed := s.cur, s.closed, s.changed
			s.mu.Unlock()
			switch {
			case closed:
				return 0, io.EOF
			case cur == nil || cur == e.cur:
				select {
				case <-changed:
					continue
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
			e.cur, e.src = cur, cur.EchoRef()
			if e.src == nil {
				return 0, io.EOF
			}
		}
		n, err := e.src.Read(ctx, dst)
		if n > 0 || err == nil || ctx.Err() != nil || !errors.Is(err, io.EOF) {
			return n, err
		}
		e.src = nil // this stream was closed and its echo drained: on to the next
	}
}

// ErrNoSpeaker: the assistant has no playback device (text only).
var ErrNoSpeaker = errors.New("wire: the assistant has no speaker")

// PlayAside plays audio that is not an answer (the desktop app's voice preview) on the
// assistant's own speaker, so that its echo reference holds it and its microphone takes it
// for Parley's voice, not the user's (a preview in hands-free mode would otherwise start a
// turn). At rest the speaker opens with a deep device buffer for it (asideLatency), since
// nothing waits on this audio and a busy machine must not make it stutter; an answer that
// comes later gets a low-latency stream again. Call it while the assistant is quiet; it
// returns once the audio has been played out, or ctx ends (then it stops it).
func (a *Assistant) PlayAside(ctx context.Context, b *audio.Buffer) error {
	s := a.Speaker
	if s == nil {
		return ErrNoSpeaker
	}
	if b.Channels != 1 {
		return fmt.Errorf("wire: play aside: %d channels, want mono", b.Channels)
	}
	pcm, err := audio.Resample(b.Data, b.SampleRate, s.Format().SampleRate, 1)
	if err != nil {
		return err
	}
	defer func() {
		if a.Mic != nil && !a.Mic.IsOpen() {
			s.setOpen(false) // push-to-talk at rest: the speaker rests again
		}
	}()
	if _, err := s.writeAside(ctx, pcm); err != nil {
		if ctx.Err() != nil {
			s.Stop()
		}
		return err
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for s.Queued() > 0 {
		select {
		case <-ctx.Done():
			s.Stop()
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
