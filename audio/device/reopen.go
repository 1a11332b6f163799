package device

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// ErrReopening is returned once per loss by the Read/Write of a ResilientCapture or
// ResilientPlayback (wrapped in a *LostError): the device was lost and is being reopened. Keep
// calling: later calls block (up to their context) until the device is back, then work.
var ErrReopening = errors.New("device: audio device lost, reopening")

// LostError reports a lost device that is being reopened. errors.Is(err, ErrReopening) and
// errors.Is(err, ErrDeviceLost) both hold, and Temporary reports true (for callers that must
// not import this package).
type LostError struct {
	Dir    Direction
	Device string // the device that was lost
	Err    error  // why (wraps ErrDeviceLost)
}

func (e *LostError) Error() string {
	return fmt.Sprintf("device: %s %q lost, reopening: %v", e.Dir, e.Device, e.Err)
}

// Unwrap returns ErrReopening and the cause.
func (e *LostError) Unwrap() []error { return []error{ErrReopening, e.Err} }

// Temporary reports that the condition is temporary: the stream is being reopened.
func (e *LostError) Temporary() bool { return true }

// Recovery configures how a resilient stream reopens a lost device. The zero value is the
// default.
type Recovery struct {
	MinBackoff time.Duration // wait after the first failed reopen; 0 = 100 ms
	MaxBackoff time.Duration // the wait doubles up to this; 0 = 5 s
	NoFallback bool          // only ever reopen the configured device (default: fall back to the system default while it cannot be opened)
	NoRescan   bool          // never re-initialise PortAudio to look for devices that came back (default: rescan before a retry when no stream is open)
}

func (r Recovery) backoff(attempt int) time.Duration {
	lo, hi := r.MinBackoff, r.MaxBackoff
	if lo <= 0 {
		lo = 100 * time.Millisecond
	}
	if hi <= 0 {
		hi = 5 * time.Second
	}
	d := lo
	for i := 0; i < attempt && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// Stream states reported by Health.
const (
	StateRunning   = "running"
	StateReopening = "reopening"
	StateClosed    = "closed"
)

// Health is a resilient stream's recovery record, for `parley doctor` and the GUI.
type Health struct {
	State      string    `json:"state"`                // StateRunning, StateReopening or StateClosed
	Requested  string    `json:"requested"`            // the configured device spec ("" = default)
	Device     string    `json:"device,omitempty"`     // the device in use (the last one while reopening)
	Fallback   bool      `json:"fallback,omitempty"`   // running on the default device because the configured one could not be opened
	Losses     uint64    `json:"losses"`               // streams lost after they had run
	Reopens    uint64    `json:"reopens"`              // successful reopens
	Failures   uint64    `json:"failures"`             // failed reopen attempts (including streams that never started)
	Rescans    uint64    `json:"rescans"`              // PortAudio re-initialisations done by this stream
	LastError  string    `json:"last_error,omitempty"` // the last loss or failure
	LastLoss   time.Time `json:"last_loss,omitzero"`
	LastReopen time.Time `json:"last_reopen,omitzero"`
	Stream     Stats     `json:"stream"` // the current stream's counters (zero while reopening)
}

// endpoint is what the reopener needs of a stream (*Capture, *Playback, or a test fake).
type endpoint interface {
	comparable
	Events() <-chan Event
	Close() error
	Device() Info
	Stats() Stats
	ran() bool
}

func (s *stream) ran() bool { return s.ctr.callbacks.Load() > 0 }

// reopener keeps one stream of a resilient capture or playback open: a supervisor goroutine
// watches the current stream's events, and on loss closes it and opens a new one with capped
// exponential backoff, trying the configured device, then (after a PortAudio rescan if nothing
// else is open) again, then the default device. Readers and writers get the current stream with
// acquire, a *LostError once per loss, and a channel to wait on while there is none.
type reopener[E endpoint] struct {
	dir    Direction
	spec   string
	rec    Recovery
	open   func(spec string) (E, error)
	rescan func() (bool, error) // nil: never
	ready  func() error         // nil: always; else why the device cannot be tried yet
	after  func(time.Duration) <-chan time.Time
	now    func() time.Time
	onSwap func(prev, cur E) // called with mu held when a new stream is installed
	log    *slog.Logger

	mu       sync.Mutex
	cur      E // zero while reopening
	last     E // the last stream installed
	dead     E // lost, not yet closed
	pending  error
	changed  chan struct{} // closed (and replaced) on every change
	closed   bool
	attempt  int
	fallback bool
	h        Health

	kick   chan struct{}
	quit   chan struct{}
	exited chan struct{}
	events chan Event
}

func newReopener[E endpoint](dir Direction, spec string, rec Recovery, open func(string) (E, error), log *slog.Logger) *reopener[E] {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &reopener[E]{
		dir: dir, spec: spec, rec: rec, open: open, log: log,
		after: time.After, now: time.Now,
		changed: make(chan struct{}), kick: make(chan struct{}, 1),
		quit: make(chan struct{}), exited: make(chan struct{}), events: make(chan Event, 16),
		h: Health{State: StateRunning, Requested: spec},
	}
}

// start installs the first stream and starts the supervisor.
func (r *reopener[E]) start(first E) {
	r.cur, r.last = first, first
	r.h.Device = first.Device().Name
	go r.run()
}

// bump wakes everyone waiting for a change. Call with mu held.
func (r *reopener[E]) bump() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *reopener[E]) emit(e Event) {
	if e.Time.IsZero() {
		e.Time = r.now()
	}
	select {
	case r.events <- e:
	default:
	}
}

func (r *reopener[E]) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *reopener[E]) run() {
	defer close(r.exited)
	var zero E
	for {
		r.mu.Lock()
		cur, closed := r.cur, r.closed
		r.mu.Unlock()
		if closed {
			return
		}
		if cur == zero {
			if !r.reopen() {
				return
			}
			continue
		}
		select {
		case <-r.quit:
			return
		case ev := <-cur.Events():
			if ev.Kind == Lost {
				r.lose(cur, ev.Err, false)
			} else {
				ev.Device = cur.Device().Name
				r.emit(ev)
			}
		case <-r.kick:
		}
	}
}

// lose takes s out of service (if it still is the current stream). A stream that had run
// arms a *LostError for the next Read/Write; one that never ran counts as a failed attempt.
// planned (Reopen) arms nothing.
func (r *reopener[E]) lose(s E, cause error, planned bool) {
	var zero E
	r.mu.Lock()
	if r.closed || s == zero || s != r.cur {
		r.mu.Unlock()
		return
	}
	r.cur, r.dead = zero, s
	r.h.State = StateReopening
	var le *LostError
	switch {
	case planned:
		r.attempt = 0
	case s.ran():
		le = &LostError{Dir: r.dir, Device: s.Device().Name, Err: cause}
		r.pending = le
		r.attempt = 0
		r.h.Losses++
		r.h.LastError = cause.Error()
		r.h.LastLoss = r.now()
	default:
		r.h.Failures++
		r.h.LastError = cause.Error()
	}
	r.bump()
	r.mu.Unlock()
	if le != nil {
		r.log.Warn("audio device lost; reopening", "dir", r.dir, "device", le.Device, "err", cause)
		r.emit(Event{Kind: Lost, Err: le, Device: le.Device})
	}
	r.poke()
}

// reopen closes the dead stream and opens a new one, backing off between failures. It
// returns false when the reopener is closed.
func (r *reopener[E]) reopen() bool {
	r.closeDead()
	select { // the kick that announced this loss
	case <-r.kick:
	default:
	}
	for {
		select {
		case <-r.quit:
			return false
		default:
		}
		s, fallback, err := r.try()
		r.mu.Lock()
		if err == nil {
			if r.closed {
				r.mu.Unlock()
				s.Close()
				return false
			}
			prev := r.last
			r.cur, r.last, r.fallback = s, s, fallback
			r.h.State, r.h.Device, r.h.Fallback = StateRunning, s.Device().Name, fallback
			r.h.Reopens++
			r.h.LastReopen = r.now()
			if r.onSwap != nil {
				r.onSwap(prev, s)
			}
			r.bump()
			r.mu.Unlock()
			r.log.Info("audio device reopened", "dir", r.dir, "device", s.Device().Name, "fallback", fallback)
			r.emit(Event{Kind: Reopened, Device: s.Device().Name})
			return true
		}
		r.h.Failures++
		r.h.LastError = err.Error()
		d := r.rec.backoff(r.attempt)
		r.attempt++
		r.mu.Unlock()
		r.log.Debug("reopening audio device failed", "dir", r.dir, "err", err, "retry_in", d)
		select {
		case <-r.quit:
			return false
		case <-r.after(d):
		case <-r.kick: // Reopen: try now
		}
	}
}

// try opens the configured device; failing that, rescans and tries again; failing that, the
// default device.
func (r *reopener[E]) try() (E, bool, error) {
	if r.ready != nil {
		if err := r.ready(); err != nil {
			var zero E
			return zero, false, err
		}
	}
	s, err := r.open(r.spec)
	if err == nil {
		return s, false, nil
	}
	if r.rescan != nil && !r.rec.NoRescan {
		did, rerr := r.rescan()
		if did {
			r.mu.Lock()
			r.h.Rescans++
			r.mu.Unlock()
		}
		if rerr != nil {
			err = errors.Join(err, rerr)
		} else if did {
			if s, err = r.open(r.spec); err == nil {
				return s, false, nil
			}
		}
	}
	if !r.rec.NoFallback && !isDefault(r.spec) {
		s, ferr := r.open("")
		if ferr == nil {
			return s, true, nil
		}
		err = fmt.Errorf("%w; default %s device: %w", err, r.dir, ferr)
	}
	var zero E
	return zero, false, err
}

func isDefault(spec string) bool {
	spec = strings.TrimSpace(spec)
	return spec == "" || spec == "default"
}

// acquire returns, in this order: ErrClosed once closed; the pending *LostError (once); the
// current stream; or, while reopening, a channel closed at the next change.
func (r *reopener[E]) acquire() (E, <-chan struct{}, error) {
	var zero E
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return zero, nil, ErrClosed
	case r.pending != nil:
		err := r.pending
		r.pending = nil
		return zero, nil, err
	case r.cur == zero:
		return zero, r.changed, nil
	}
	return r.cur, nil, nil
}

// current is acquire without taking the pending error.
func (r *reopener[E]) current() (E, <-chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur, r.changed, r.closed
}

// reopenNow makes a reopening stream retry at once, and a running one on the fallback device
// (or any running one, if force) close and reopen, configured device first.
func (r *reopener[E]) reopenNow(force bool) {
	r.mu.Lock()
	cur, fb := r.cur, r.fallback
	r.mu.Unlock()
	if fb || force {
		r.lose(cur, nil, true)
	}
	r.poke()
}

func (r *reopener[E]) health() Health {
	var zero E
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	if r.cur != zero {
		h.Stream = r.cur.Stats()
	}
	return h
}

// close stops the supervisor (waiting for an open in progress) and closes the streams.
func (r *reopener[E]) close() error {
	var zero E
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	cur := r.cur
	r.cur = zero
	r.h.State = StateClosed
	r.bump()
	r.mu.Unlock()
	close(r.quit)
	<-r.exited
	var err error
	if cur != zero {
		err = cur.Close()
	}
	r.closeDead()
	return err
}

// closeDead closes the stream a loss left behind, if it is still held.
func (r *reopener[E]) closeDead() {
	var zero E
	r.mu.Lock()
	dead := r.dead
	r.dead = zero
	r.mu.Unlock()
	if dead != zero {
		dead.Close()
	}
}
