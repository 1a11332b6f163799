package device

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/audio"
)

// Playback plays to an output device. It implements audio.Sink in the format it was opened
// with; one goroutine writes at a time, while Stop may be called from any goroutine.
//
// Everything the device played (silence included) is also written, frame-aligned, to the echo
// reference (EchoRef), for echo suppression.
type Playback struct {
	stream
	in     audio.Format
	rt     *rtPlayback // the rings and flags the callback shares, in C memory
	rs     *audio.Resampler
	mixed  []float32
	conv   []float32
	gen    atomic.Uint64 // bumped by Stop
	wgen   uint64        // writer-owned: the generation of the last Write
	closed atomic.Bool
}

// The callback's state (rt.go): poison is the write position before which the callback
// discards queued samples; streaming is set between the first Write and Drain/Stop (a short
// ring is then an underflow); handed is the ring position handed to the device.
func (p *Playback) poison() *atomic.Uint64 { return p.rt.poison() }
func (p *Playback) handed() *atomic.Uint64 { return p.rt.handed() }
func (p *Playback) setStreaming(on bool) {
	var v uint32
	if on {
		v = 1
	}
	p.rt.streaming().Store(v)
}

// PlaybackConfig configures OpenPlayback.
type PlaybackConfig struct {
	StreamConfig
	Format audio.Format  // what Write accepts; zero = audio.Mono16k
	Echo   time.Duration // echo reference ring; 0 = 4 s, < 0 = no echo reference
}

// OpenPlayback opens and starts an output stream (playing silence until written to).
func (h *Host) OpenPlayback(cfg PlaybackConfig) (*Playback, error) {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	p, d, err := h.newPlayback(cfg)
	if err != nil {
		return nil, err
	}
	st, err := pa.openStream(p.cfg.params(d, Output), nil, p.rt)
	if err != nil {
		return nil, fmt.Errorf("device: opening output %q at %d Hz × %d: %w", d.Name, p.cfg.SampleRate, p.cfg.Channels, err)
	}
	p.pa = st
	if err := st.Start(); err != nil {
		st.Close()
		pa.open-- // pa.mu is held: closeStream would wait for it forever
		return nil, fmt.Errorf("device: starting output %q: %w", d.Name, err)
	}
	p.wg.Add(1)
	go p.watch(Output)
	h.log.Debug("playback open", "device", d.Name, "rate", p.cfg.SampleRate, "channels", p.cfg.Channels, "buffer", p.cfg.BufferFrames, "format", p.in)
	return p, nil
}

// newPlayback prepares a Playback (rings, resampler) without opening a stream. Call with
// pa.mu held.
func (h *Host) newPlayback(cfg PlaybackConfig) (*Playback, Info, error) {
	if cfg.Format == (audio.Format{}) {
		cfg.Format = audio.Mono16k
	}
	if err := cfg.Format.Validate(); err != nil {
		return nil, Info{}, err
	}
	d, err := h.lookup(cfg.Device, Output)
	if err != nil {
		return nil, Info{}, err
	}
	if err := cfg.fill(d, Output, cfg.Format.Channels); err != nil {
		return nil, Info{}, err
	}
	if cfg.Format.Channels != cfg.Channels && cfg.Format.Channels != 1 && cfg.Channels != 1 {
		return nil, Info{}, fmt.Errorf("%w: cannot map %d channels to the device's %d", audio.ErrUnsupported, cfg.Format.Channels, cfg.Channels)
	}
	p := &Playback{in: cfg.Format}
	p.info, p.cfg = d, cfg.StreamConfig
	p.dev = audio.Format{SampleRate: cfg.SampleRate, Channels: cfg.Channels}
	p.events = make(chan Event, 16)
	p.done = make(chan struct{})
	p.poll = pollInterval(cfg.BufferFrames, cfg.SampleRate)
	if cfg.Echo == 0 {
		cfg.Echo = 4 * time.Second
	}
	echo := 0
	if cfg.Echo > 0 {
		echo = int(int64(cfg.Echo) * int64(cfg.SampleRate) / int64(time.Second) * int64(cfg.Channels))
	}
	if p.rt, err = newRTPlayback(int(int64(cfg.Ring)*int64(cfg.SampleRate)/int64(time.Second)*int64(cfg.Channels)), echo, cfg.Channels); err != nil {
		return nil, Info{}, err
	}
	p.ctr = p.rt.counters()
	p.kick = p.rt.kick
	freeWhenUnreachable(p, &p.rt.inStream, p.rt.free)
	if cfg.Format.SampleRate != cfg.SampleRate {
		if p.rs, err = audio.NewResampler(cfg.Format.SampleRate, cfg.SampleRate, cfg.Channels, audio.Quality(cfg.Quality)); err != nil {
			return nil, Info{}, err
		}
	}
	return p, d, nil
}

// Format is the format Write accepts.
func (p *Playback) Format() audio.Format { return p.in }

// DeviceFormat is the format the device runs at (and the echo reference's format).
func (p *Playback) DeviceFormat() audio.Format { return p.dev }

// Device describes the device in use.
func (p *Playback) Device() Info { return p.info }

// BufferFrames is the device buffer (frames per callback): the granularity of Stop.
func (p *Playback) BufferFrames() int { return p.cfg.BufferFrames }

// Write implements audio.Sink: it converts p and queues it, blocking while the ring is full.
// If Stop is called meanwhile it returns ErrStopped (what was queued is dropped).
func (p *Playback) Write(ctx context.Context, s []float32) (int, error) {
	if p.closed.Load() {
		return 0, ErrClosed
	}
	if err := p.lostErr(); err != nil {
		return 0, err
	}
	if len(s)%p.in.Channels != 0 {
		return 0, fmt.Errorf("%w: %d samples is not a whole number of %d-channel frames", audio.ErrFormat, len(s), p.in.Channels)
	}
	gen := p.gen.Load()
	if gen != p.wgen && p.rs != nil {
		p.rs.Reset() // a Stop happened since the last Write: forget the old stream's tail
	}
	p.wgen = gen
	p.convert(s, false)
	if err := p.push(ctx, gen); err != nil {
		return 0, err
	}
	return len(s), nil
}

// convert maps channels and resamples into p.conv (device format).
func (p *Playback) convert(s []float32, flush bool) {
	p.mixed = p.mixed[:0]
	switch {
	case p.in.Channels == p.dev.Channels:
		p.mixed = append(p.mixed, s...)
	case p.dev.Channels == 1:
		p.mixed = audio.DownMix(p.mixed, s, p.in.Channels)
	default:
		p.mixed = audio.UpMix(p.mixed, s, p.dev.Channels)
	}
	p.conv = p.conv[:0]
	if p.rs == nil {
		p.conv = append(p.conv, p.mixed...)
		return
	}
	p.conv = p.rs.Process(p.conv, p.mixed)
	if flush {
		p.conv = p.rs.Flush(p.conv)
	}
}

func (p *Playback) push(ctx context.Context, gen uint64) error {
	buf := p.conv
	ch := p.dev.Channels
	ring := p.rt.ring
	for len(buf) > 0 {
		n := min(len(buf), ring.Free()/ch*ch)
		if n > 0 {
			ring.Write(buf[:n])
			buf = buf[n:]
			p.setStreaming(true) // from now on, running dry is an underflow
		}
		if p.gen.Load() != gen {
			p.setStreaming(false)
			// Stop raced with this write: make sure what we just queued is dropped too
			p.raisePoison(ring.Written())
			if p.rs != nil {
				p.rs.Reset()
			}
			return ErrStopped
		}
		if len(buf) == 0 {
			break
		}
		if err := p.lostErr(); err != nil {
			return err
		}
		if p.closed.Load() {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p.rt.space.arm()
		if ring.Free() >= min(len(buf), ch) { // room came before the flag was seen
			continue
		}
		if err := p.rt.space.sleep(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (p *Playback) raisePoison(pos uint64) {
	for {
		old := p.poison().Load()
		if pos <= old || p.poison().CompareAndSwap(old, pos) {
			return
		}
	}
}

// Stop drops everything queued. It takes effect at the next device callback, so at most one
// device buffer (plus the host's own output latency) of queued audio still sounds. A Write in
// progress returns ErrStopped; later Writes play normally. Safe from any goroutine.
func (p *Playback) Stop() {
	p.setStreaming(false)
	p.gen.Add(1)
	p.raisePoison(p.rt.ring.Written())
	p.rt.space.kick() // a Write or Drain waiting for the device returns now
}

// Drain flushes the resampler's tail, waits until everything queued has been handed to the
// device and then for the device's output latency.
func (p *Playback) Drain(ctx context.Context) error {
	gen := p.gen.Load()
	if p.rs != nil {
		p.convert(nil, true)
		if err := p.push(ctx, gen); err != nil {
			return err
		}
	}
	target := p.rt.ring.Written()
	p.setStreaming(false) // the end of the stream is coming: running dry now is expected
	for p.handed().Load() < target && p.gen.Load() == gen {
		if err := p.lostErr(); err != nil {
			return err
		}
		if p.closed.Load() {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p.rt.space.arm()
		if p.handed().Load() >= target {
			break
		}
		if err := p.rt.space.sleep(ctx); err != nil {
			return err
		}
	}
	if p.gen.Load() != gen {
		return ErrStopped
	}
	lat := p.Latency()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(lat):
	}
	return nil
}

// Latency is the output latency the host reports for the open stream: how long a sample
// handed to the device takes to be heard.
func (p *Playback) Latency() time.Duration { return p.pa.OutputLatency() }

// Queued is the audio waiting in the ring (not yet handed to the device).
func (p *Playback) Queued() time.Duration {
	return p.dev.Duration(p.rt.ring.Len())
}

// Played is the number of device frames the device has been handed since it opened
// (silence included): the echo reference's clock.
func (p *Playback) Played() uint64 { return p.ctr.frames.Load() }

// StartTime is the PortAudio stream time at which the first output frame reached the DAC
// (0 before the first callback); echo frame i played at StartTime + i/rate.
func (p *Playback) StartTime() time.Duration { return time.Duration(p.ctr.firstTime.Load() - 1) }

// Stats returns the counters.
func (p *Playback) Stats() Stats { return p.ctr.stats() }

// Events delivers Lost and Underflow events.
func (p *Playback) Events() <-chan Event { return p.events }

// EchoRef returns a Source of exactly what the device played, in the device format, frame for
// frame since the stream started (silence included), so that echo frame i played at
// StartTime + i/rate. Read it steadily: when its ring is full, frames are dropped (counted by
// EchoDropped) and alignment is lost. Nil when the echo reference is disabled.
func (p *Playback) EchoRef() audio.Source {
	if !p.rt.hasEcho() {
		return nil
	}
	return &echoSource{p: p}
}

// EchoDropped is the number of echo samples dropped because nobody read them.
func (p *Playback) EchoDropped() uint64 { return p.rt.echoDropped().Load() }

// Close stops the stream at once (queued audio is dropped; Drain first to play it out).
func (p *Playback) Close() error {
	p.closed.Store(true)
	p.rt.kick()
	return p.close()
}

type echoSource struct{ p *Playback }

func (e *echoSource) Format() audio.Format { return e.p.dev }

func (e *echoSource) Read(ctx context.Context, dst []float32) (int, error) {
	p := e.p
	ch := p.dev.Channels
	dst = dst[:len(dst)/ch*ch]
	ring, wake := p.rt.echo, p.rt.echoWake
	want := max(1, min(len(dst), p.cfg.batchSamples()))
	for {
		if n := ring.Read(dst); n > 0 {
			return n, nil
		}
		if p.closed.Load() {
			return 0, io.EOF
		}
		if err := p.lostErr(); err != nil {
			return 0, err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		wake.armFor(want)
		if ring.Len() >= want {
			continue
		}
		if err := wake.sleep(ctx); err != nil {
			return 0, err
		}
	}
}

var _ audio.Sink = (*Playback)(nil)
