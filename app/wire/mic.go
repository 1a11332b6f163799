package wire

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

	"github.com/parley-voice/parley/audio/device"
)

// Mic is the assistant's microphone with a gate (app.MicGate): the device stream is really
// closed while the loop does not listen (push-to-talk at rest), and opened again when it
// does. A capture stream costs a few percent of a core even when nobody speaks, and a
// closed one tells the desktop that nothing records.
type Mic struct {
	open func() (*device.ResilientCapture, error)
	log  *slog.Logger
	// gated is told as the microphone closes (false) and opens (true): the echo reference
	// is needed only while it is open
	gated func(open bool)

	mu      sync.Mutex
	cur     *device.ResilientCapture // nil while closed
	want    bool
	closed  bool
	err     error         // the last opening failed; Read reports it once
	changed chan struct{} // closed (and replaced) when cur, err or closed change
	kick    chan struct{}
	done    chan struct{}
}

// newMic starts the gate's worker with first as the open stream.
func newMic(first *device.ResilientCapture, open func() (*device.ResilientCapture, error), gated func(bool), log *slog.Logger) *Mic {
	m := &Mic{open: open, gated: gated, log: log, cur: first, want: true, changed: make(chan struct{}),
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	go m.run()
	return m
}

// SetOpen implements app.MicGate: the stream is opened or closed on the gate's own goroutine.
func (m *Mic) SetOpen(open bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.want = open
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// run opens and closes the stream until it is as wanted, one device call at a time.
func (m *Mic) run() {
	defer close(m.done)
	for range m.kick {
		for {
			m.mu.Lock()
			if m.closed {
				m.mu.Unlock()
				return
			}
			want, cur := m.want, m.cur
			m.mu.Unlock()
			if want == (cur != nil) {
				break
			}
			if !want {
				m.set(nil, nil)
				cur.Close() // a Read blocked on it returns io.EOF and waits for the next opening
				if m.gated != nil {
					m.gated(false)
				}
				continue
			}
			if m.gated != nil {
				m.gated(true)
			}
			c, err := m.open()
			if err != nil {
				m.log.Warn("microphone did not open", "err", err)
				m.set(nil, err)
				m.mu.Lock()
				m.want = false // the next Talk tries again
				m.mu.Unlock()
				continue
			}
			m.mu.Lock()
			stale := m.closed
			m.mu.Unlock()
			if stale {
				c.Close()
				return
			}
			m.set(c, nil)
		}
	}
}

func (m *Mic) set(c *device.ResilientCapture, err error) {
	m.mu.Lock()
	m.cur, m.err = c, err
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// Read implements app.Capture: it reads the open stream, and waits while the microphone is
// closed. A failed opening is returned once, as a temporary error (the loop reports it and
// goes on; the next opening tries again).
func (m *Mic) Read(ctx context.Context, p []float32) (int, error) {
	for {
		m.mu.Lock()
		cur, err, closed, changed := m.cur, m.err, m.closed, m.changed
		m.err = nil
		m.mu.Unlock()
		switch {
		case closed:
			return 0, io.EOF
		case err != nil:
			return 0, micError{err}
		case cur == nil:
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		n, err := cur.Read(ctx, p)
		if errors.Is(err, io.EOF) && ctx.Err() == nil {
			m.mu.Lock()
			gated := m.cur != cur && !m.closed
			m.mu.Unlock()
			if gated { // closed by the gate, not for good
				if n > 0 {
					return n, nil
				}
				continue
			}
		}
		return n, err
	}
}

// micError is an opening that failed; temporary: the loop carries on.
type micError struct{ err error }

func (e micError) Error() string   { return e.err.Error() }
func (e micError) Unwrap() error   { return e.err }
func (e micError) Temporary() bool { return true }

// IsOpen says whether the device stream is open now.
func (m *Mic) IsOpen() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur != nil
}

// Health is the open stream's recovery record (zero while closed).
func (m *Mic) Health() device.Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil {
		return device.Health{}
	}
	return m.cur.Health()
}

// Close closes the stream for good; a blocked Read returns io.EOF.
func (m *Mic) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	cur := m.cur
	m.cur = nil
	close(m.changed)
	m.changed = make(chan struct{})
	close(m.kick)
	m.mu.Unlock()
	<-m.done
	if cur != nil {
		return cur.Close()
	}
	return nil
}
