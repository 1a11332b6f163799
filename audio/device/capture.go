package device

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/audio"
)

// counters are the atomics a callback updates. They live in the C callback's memory
// (prt_counters in rt.go, the same layout).
type counters struct {
	callbacks, frames, overflows, dropped, underflows, hostFlags atomic.Uint64
	firstTime                                                    atomic.Int64 // stream time (ns) of the first frame, +1 so 0 means unset
}

func (c *counters) stats() Stats {
	return Stats{
		Callbacks: c.callbacks.Load(), Frames: c.frames.Load(), Overflows: c.overflows.Load(),
		Dropped: c.dropped.Load(), Underflows: c.underflows.Load(), HostFlags: c.hostFlags.Load(),
	}
}

// stream is what Capture and Playback share: the PortAudio stream, its watchdog and events.
type stream struct {
	info   Info
	cfg    StreamConfig
	dev    audio.Format
	pa     *rtStream    // the PortAudio stream, or
	pulse  *pulseStream // a capture through PulseAudio's own API
	ctr    *counters
	events chan Event
	lost   atomic.Pointer[error]
	done   chan struct{}
	once   sync.Once
	shared bool         // the PortAudio stream belongs to a Duplex, which stops and closes it
	beat   atomic.Int64 // wall clock (Unix ns) when the watchdog last saw callbacks progress
	kick   func()       // wakes the goroutines sleeping on the stream's rings
	wg     sync.WaitGroup
	poll   time.Duration
}

func (s *stream) emit(e Event) {
	e.Time = time.Now()
	select {
	case s.events <- e:
	default: // nobody listening: counters still tell
	}
}

// watch turns silence from the callback into a Lost event and reports new over/underflows.
func (s *stream) watch(dir Direction) {
	defer s.wg.Done()
	tick := time.NewTicker(min(s.cfg.LossTimeout/4, 250*time.Millisecond))
	defer tick.Stop()
	last, lastAt := s.ctr.callbacks.Load(), time.Now()
	s.beat.Store(lastAt.UnixNano())
	var over, under uint64
	for {
		select {
		case <-s.done:
			return
		case now := <-tick.C:
			n := s.ctr.callbacks.Load()
			limit := s.cfg.LossTimeout
			if s.ctr.frames.Load() < uint64(s.cfg.SampleRate/5) { // not yet past start-up (200 ms)
				limit = s.cfg.StartTimeout // some hosts take a while to deliver the first buffer
			}
			if n != last {
				last, lastAt = n, now
				s.beat.Store(now.UnixNano())
			} else if now.Sub(lastAt) > limit {
				err := fmt.Errorf("%w: %s %q: no audio callback for %v", ErrDeviceLost, dir, s.info.Name, now.Sub(lastAt).Round(time.Millisecond))
				s.lost.Store(&err)
				if s.kick != nil {
					s.kick()
				}
				s.emit(Event{Kind: Lost, Err: err})
				return
			}
			if o := s.ctr.overflows.Load(); o != over {
				over = o
				s.emit(Event{Kind: Overflow})
			}
			if u := s.ctr.underflows.Load(); u != under {
				under = u
				s.emit(Event{Kind: Underflow})
			}
		}
	}
}

// WaitRunning blocks until the stream has handled at least d of audio in callbacks (some hosts
// start slowly: PulseAudio through ALSA takes up to two seconds), ctx ends or the device is lost.
func (s *stream) WaitRunning(ctx context.Context, d time.Duration) error {
	want := uint64(int64(d) * int64(s.cfg.SampleRate) / int64(time.Second))
	for s.ctr.frames.Load() < want {
		if err := s.lostErr(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.poll):
		}
	}
	return nil
}

// Now is the stream's clock (PortAudio's stream time; CLOCK_MONOTONIC through PulseAudio's
// own API), the clock of StartTime.
func (s *stream) Now() time.Duration {
	if s.pulse != nil {
		return s.pulse.Time()
	}
	return s.pa.Time()
}

func (s *stream) lostErr() error {
	if p := s.lost.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *stream) close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		s.wg.Wait()
		if s.shared {
			return
		}
		if s.pulse != nil {
			s.pulse.Close()
			return
		}
		if s.lostErr() != nil {
			// a dead host may hang in Stop; Abort is immediate
			s.pa.Abort()
		} else {
			err = s.pa.Stop()
		}
		if cerr := pa.closeStream(s.pa); err == nil {
			err = cerr
		}
	})
	return err
}

// Capture records from an input device. It implements audio.Source in the format it was
// opened with. One goroutine reads at a time.
type Capture struct {
	stream
	rt     *rtCapture // the ring the callback fills, in C memory
	conv   audio.Source
	closed atomic.Bool
}

// CaptureConfig configures OpenCapture.
type CaptureConfig struct {
	StreamConfig
	Format audio.Format // what Read delivers; zero = audio.Mono16k
}

// OpenCapture opens and starts an input stream. The default device, where a PulseAudio (or
// PipeWire) server runs, is recorded through PulseAudio's own API (usePulse); other devices,
// and the default when that fails, through PortAudio.
func (h *Host) OpenCapture(cfg CaptureConfig) (*Capture, error) {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	if usePulse(cfg.Device) {
		c, err := h.openPulseCapture(cfg)
		if err == nil {
			return c, nil
		}
		h.log.Debug("capture: PulseAudio's own API failed, using PortAudio", "err", err)
	}
	c, d, err := h.newCapture(cfg)
	if err != nil {
		return nil, err
	}
	st, err := pa.openStream(c.cfg.params(d, Input), c.rt, nil)
	if err != nil {
		return nil, fmt.Errorf("device: opening input %q at %d Hz × %d: %w", d.Name, c.cfg.SampleRate, c.cfg.Channels, err)
	}
	c.pa = st
	if err := st.Start(); err != nil {
		st.Close()
		pa.open-- // pa.mu is held: closeStream would wait for it forever
		return nil, fmt.Errorf("device: starting input %q: %w", d.Name, err)
	}
	h.started(c)
	return c, nil
}

// openPulseCapture opens the default source through PulseAudio's own API, at the rate and
// channels Read delivers unless the configuration pins the device's (the server converts).
// Call with pa.mu held.
func (h *Host) openPulseCapture(cfg CaptureConfig) (*Capture, error) {
	f := cfg.Format
	if f == (audio.Format{}) {
		f = audio.Mono16k
	}
	if cfg.SampleRate == 0 {
		cfg.SampleRate = f.SampleRate
	}
	if cfg.Channels == 0 {
		cfg.Channels = f.Channels
	}
	c, _, err := h.newCapture(cfg)
	if err != nil {
		return nil, err
	}
	if c.pulse, err = openPulse(c.rt, "", c.cfg.SampleRate, c.cfg.Channels, c.cfg.BufferFrames); err != nil {
		return nil, err
	}
	c.info.HostAPI = pulseHostAPI
	h.started(c)
	return c, nil
}

// started watches a capture that runs (Lost and xrun events) and logs it.
func (h *Host) started(c *Capture) {
	c.wg.Add(1)
	go c.watch(Input)
	h.log.Debug("capture open", "device", c.info.Name, "api", c.info.HostAPI, "rate", c.cfg.SampleRate, "channels", c.cfg.Channels, "buffer", c.cfg.BufferFrames, "format", c.Format())
}

// newCapture prepares a Capture (rings, converter) without opening a stream. Call with pa.mu
// held.
func (h *Host) newCapture(cfg CaptureConfig) (*Capture, Info, error) {
	if cfg.Format == (audio.Format{}) {
		cfg.Format = audio.Mono16k
	}
	if err := cfg.Format.Validate(); err != nil {
		return nil, Info{}, err
	}
	d, err := h.lookup(cfg.Device, Input)
	if err != nil {
		return nil, Info{}, err
	}
	if err := cfg.fill(d, Input, cfg.Format.Channels); err != nil {
		return nil, Info{}, err
	}
	c := &Capture{}
	c.info, c.cfg = d, cfg.StreamConfig
	c.dev = audio.Format{SampleRate: cfg.SampleRate, Channels: cfg.Channels}
	c.events = make(chan Event, 16)
	c.done = make(chan struct{})
	c.poll = pollInterval(cfg.BufferFrames, cfg.SampleRate)
	if c.rt, err = newRTCapture(int(int64(cfg.Ring)*int64(cfg.SampleRate)/int64(time.Second)*int64(cfg.Channels)), cfg.Channels); err != nil {
		return nil, Info{}, err
	}
	c.ctr = c.rt.counters()
	c.kick = c.rt.wake.kick
	freeWhenUnreachable(c, &c.rt.inStream, c.rt.free)
	raw := &ringSource{c: c}
	if c.conv, err = audio.Convert(raw, cfg.Format, audio.Quality(cfg.Quality)); err != nil {
		return nil, Info{}, err
	}
	return c, d, nil
}

// Format is the format Read delivers.
func (c *Capture) Format() audio.Format { return c.conv.Format() }

// DeviceFormat is the format the device runs at.
func (c *Capture) DeviceFormat() audio.Format { return c.dev }

// Device describes the device in use.
func (c *Capture) Device() Info { return c.info }

// Read implements audio.Source: it blocks until converted samples are available, ctx is
// done, the device is lost (ErrDeviceLost) or the capture is closed (io.EOF).
func (c *Capture) Read(ctx context.Context, p []float32) (int, error) {
	return c.conv.Read(ctx, p)
}

// Stats returns the counters.
func (c *Capture) Stats() Stats { return c.ctr.stats() }

// Events delivers Lost and Overflow events (dropped when nobody reads them).
func (c *Capture) Events() <-chan Event { return c.events }

// StartTime is the PortAudio stream time at which the first captured frame entered the ADC
// (0 before the first callback); frame i was captured at StartTime + i/rate.
func (c *Capture) StartTime() time.Duration {
	return time.Duration(c.ctr.firstTime.Load() - 1)
}

// Close stops the stream; a blocked Read returns io.EOF.
func (c *Capture) Close() error {
	c.closed.Store(true)
	c.rt.wake.kick()
	return c.close()
}

// ringSource is the device-format Source that the converter reads.
type ringSource struct{ c *Capture }

func (r *ringSource) Format() audio.Format { return r.c.dev }

func (r *ringSource) Read(ctx context.Context, p []float32) (int, error) {
	c := r.c
	ch := c.dev.Channels
	p = p[:len(p)/ch*ch]
	ring, wake := c.rt.ring, c.rt.wake
	want := max(1, min(len(p), c.cfg.batchSamples()))
	for {
		if n := ring.Read(p); n > 0 {
			return n, nil
		}
		if c.closed.Load() {
			return 0, io.EOF
		}
		if err := c.lostErr(); err != nil {
			return 0, err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		wake.armFor(want)
		if ring.Len() >= want { // arrived before the flag was seen
			continue
		}
		if err := wake.sleep(ctx); err != nil {
			return 0, err
		}
	}
}

var _ audio.Source = (*Capture)(nil)
