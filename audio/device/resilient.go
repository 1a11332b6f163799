package device

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/audio"
)

// ResilientCapture is a Capture that survives device loss (a USB headset unplugged, PulseAudio
// restarted, Bluetooth dropped): when its stream is lost it closes it and opens the device
// again, by name, falling back to the system default while the named device cannot be opened
// (see Recovery). It implements audio.Source in the format it was opened with.
//
// After a loss, the next Read returns a *LostError (errors.Is ErrReopening and ErrDeviceLost)
// once; later Reads block until the device is back (or ctx ends) and then deliver audio again.
// Audio from the outage is missing, not replaced by silence: the sample count falls behind
// the wall clock by the length of the outage.
type ResilientCapture struct {
	r   *reopener[*Capture]
	out audio.Format
}

// OpenResilientCapture opens a capture like OpenCapture (the first open fails the same way:
// a wrong device name is a configuration error, not a loss) and keeps it open.
func (h *Host) OpenResilientCapture(cfg CaptureConfig, rec Recovery) (*ResilientCapture, error) {
	gate := newPulseGate()
	gate.await(startWait, time.Sleep)
	first, err := h.OpenCapture(cfg)
	if err != nil {
		return nil, err
	}
	c := &ResilientCapture{out: first.Format()}
	c.r = newReopener(Input, cfg.Device, rec, func(spec string) (*Capture, error) {
		cc := cfg
		cc.Device = spec
		return h.OpenCapture(cc)
	}, h.log)
	c.r.rescan = pa.rescan
	c.r.ready = gate.check
	c.r.start(first)
	return c, nil
}

// Read implements audio.Source: it blocks until samples are available or ctx is done; it
// returns a *LostError once per loss and io.EOF after Close.
func (c *ResilientCapture) Read(ctx context.Context, p []float32) (int, error) {
	for {
		cur, wait, err := c.r.acquire()
		if errors.Is(err, ErrClosed) {
			return 0, io.EOF
		}
		if err != nil {
			return 0, err
		}
		if cur == nil {
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		n, err := cur.Read(ctx, p)
		if err == nil || ctx.Err() != nil {
			return n, err
		}
		if errors.Is(err, ErrDeviceLost) {
			c.r.lose(cur, err, false)
		} else if !errors.Is(err, io.EOF) { // EOF: cur was closed after a loss or by Close
			return n, err
		}
	}
}

// Format is the format Read delivers.
func (c *ResilientCapture) Format() audio.Format { return c.out }

// Device describes the device in use (the last one while reopening).
func (c *ResilientCapture) Device() Info {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.r.last.Device()
}

// Stats returns the current stream's counters (zero while reopening).
func (c *ResilientCapture) Stats() Stats { return c.r.health().Stream }

// Health returns the recovery record: state, losses, reopens, the last error.
func (c *ResilientCapture) Health() Health { return c.r.health() }

// Events delivers the streams' Overflow events, Lost (Err is a *LostError) and Reopened.
func (c *ResilientCapture) Events() <-chan Event { return c.r.events }

// Reopen retries at once while reopening, and moves a capture running on the fallback device
// back to the configured one (if that cannot be opened, it falls back again).
func (c *ResilientCapture) Reopen() { c.r.reopenNow(false) }

// WaitRunning waits until the current stream has handled d of audio (across reopens), or ctx
// ends.
func (c *ResilientCapture) WaitRunning(ctx context.Context, d time.Duration) error {
	return waitRunning(ctx, c.r, d, (*Capture).WaitRunning)
}

// Close stops reopening and closes the stream; a blocked Read returns io.EOF. If a reopen is
// in progress, Close waits for that one PortAudio open call.
func (c *ResilientCapture) Close() error { return c.r.close() }

func waitRunning[E endpoint](ctx context.Context, r *reopener[E], d time.Duration, wait func(E, context.Context, time.Duration) error) error {
	var zero E
	for {
		cur, changed, closed := r.current()
		if closed {
			return ErrClosed
		}
		if cur == zero {
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		err := wait(cur, ctx, d)
		if err == nil || !errors.Is(err, ErrDeviceLost) {
			return err
		}
		r.lose(cur, err, false)
	}
}

// ResilientPlayback is a Playback that survives device loss like ResilientCapture. It
// implements audio.Sink; Stop may be called from any goroutine.
//
// After a loss the next Write or Drain returns a *LostError once (what was queued on the lost
// stream is gone); later Writes block until the device is back (or ctx ends, or Stop is
// called: ErrStopped) and then play. The device is reopened at the first stream's rate and
// channel count, so DeviceFormat and the echo reference's format never change.
//
// Echo reference: EchoRef continues across reopens. It delivers the lost stream's frames to
// the end, then silence for the outage (measured from the last callback the watchdog saw to
// the reopen, to about a quarter second), then the new stream's frames: echo frame i still
// corresponds to Played() == i, and the reference stays roughly on the wall clock. The fixed
// delay between playback and capture that holds while streams run is not kept: after a
// reopen the echo canceller must find the delay again (the assistant's wire.Echo re-anchors
// when the offset moves by more than 100 ms; the loop's delay search does the rest).
type ResilientPlayback struct {
	r        *reopener[*Playback]
	in, dev  audio.Format
	buffer   int
	stopGen  atomic.Uint64
	segs     []echoSeg // guarded by r.mu: streams the echo reader has yet to finish
	segSeq   int       // guarded by r.mu: sequence number of segs[0]
	lastBase uint64    // guarded by r.mu: echo frame of r.last's frame 0
	beatOf   func(*Playback) time.Time
}

// echoSeg is one stream in the continuous echo reference.
type echoSeg struct {
	p   *Playback
	gap int // silent frames before it
}

// maxEchoSegs bounds the streams kept for a slow echo reader (each holds its echo ring).
const maxEchoSegs = 4

// OpenResilientPlayback opens a playback like OpenPlayback and keeps it open.
func (h *Host) OpenResilientPlayback(cfg PlaybackConfig, rec Recovery) (*ResilientPlayback, error) {
	gate := newPulseGate()
	gate.await(startWait, time.Sleep)
	first, err := h.OpenPlayback(cfg)
	if err != nil {
		return nil, err
	}
	p := &ResilientPlayback{in: first.Format(), dev: first.DeviceFormat(), buffer: first.BufferFrames(), beatOf: lastBeat}
	cfg.SampleRate, cfg.Channels = p.dev.SampleRate, p.dev.Channels
	p.r = newReopener(Output, cfg.Device, rec, func(spec string) (*Playback, error) {
		pc := cfg
		pc.Device = spec
		return h.OpenPlayback(pc)
	}, h.log)
	p.r.rescan = pa.rescan
	p.r.ready = gate.check
	p.r.onSwap = p.swapped
	if first.rt.hasEcho() {
		p.segs = []echoSeg{{p: first}}
	}
	p.r.start(first)
	return p, nil
}

func lastBeat(p *Playback) time.Time { return time.Unix(0, p.beat.Load()) }

// swapped places a new stream after prev on the echo/Played timeline. r.mu is held.
func (p *ResilientPlayback) swapped(prev, cur *Playback) {
	gap := 0
	if prev != nil {
		if d := p.r.now().Sub(p.beatOf(prev)); d > 0 {
			gap = int(int64(d) * int64(p.dev.SampleRate) / int64(time.Second))
		}
		p.lastBase += prev.Played() + uint64(gap)
	}
	if !cur.rt.hasEcho() {
		return
	}
	p.segs = append(p.segs, echoSeg{p: cur, gap: gap})
	if len(p.segs) > maxEchoSegs {
		drop := len(p.segs) - maxEchoSegs
		p.segs = append(p.segs[:0], p.segs[drop:]...)
		p.segSeq += drop
	}
}

// Write implements audio.Sink. It returns a *LostError once per loss, ErrStopped if Stop is
// called meanwhile, ErrClosed after Close.
func (p *ResilientPlayback) Write(ctx context.Context, s []float32) (int, error) {
	gen := p.stopGen.Load()
	for {
		cur, wait, err := p.r.acquire()
		if err != nil {
			return 0, err
		}
		if cur == nil {
			if p.stopGen.Load() != gen { // Stop came before this wait began
				return 0, ErrStopped
			}
			select {
			case <-wait:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			if p.stopGen.Load() != gen {
				return 0, ErrStopped
			}
			continue
		}
		n, err := cur.Write(ctx, s)
		if err == nil || ctx.Err() != nil {
			return n, err
		}
		if errors.Is(err, ErrDeviceLost) {
			p.r.lose(cur, err, false)
		} else if !errors.Is(err, ErrClosed) { // closed: after a loss or by Close
			return n, err
		}
	}
}

// Stop drops everything queued (see Playback.Stop); a Write waiting for a reopen returns
// ErrStopped.
func (p *ResilientPlayback) Stop() {
	p.stopGen.Add(1)
	p.r.mu.Lock()
	cur := p.r.cur
	p.r.bump()
	p.r.mu.Unlock()
	if cur != nil {
		cur.Stop()
	}
}

// Drain waits until what was written has played (see Playback.Drain). While reopening there
// is nothing to drain; a loss is reported as by Write.
func (p *ResilientPlayback) Drain(ctx context.Context) error {
	for {
		cur, _, err := p.r.acquire()
		if err != nil || cur == nil {
			return err
		}
		err = cur.Drain(ctx)
		if err == nil || ctx.Err() != nil || !errors.Is(err, ErrDeviceLost) {
			return err
		}
		p.r.lose(cur, err, false)
	}
}

// Format is the format Write accepts.
func (p *ResilientPlayback) Format() audio.Format { return p.in }

// DeviceFormat is the device format (the echo reference's), the same for every reopen.
func (p *ResilientPlayback) DeviceFormat() audio.Format { return p.dev }

// BufferFrames is the first stream's device buffer (the granularity of Stop).
func (p *ResilientPlayback) BufferFrames() int { return p.buffer }

// Queued is the audio waiting in the current stream's ring (0 while reopening).
func (p *ResilientPlayback) Queued() time.Duration {
	cur, _, _ := p.r.current()
	if cur == nil {
		return 0
	}
	return cur.Queued()
}

// Latency is the current stream's output latency as the host reports it (0 while reopening).
func (p *ResilientPlayback) Latency() time.Duration {
	cur, _, _ := p.r.current()
	if cur == nil {
		return 0
	}
	return cur.Latency()
}

// Played is the number of device frames played since the first stream opened, counting each
// outage as silence: the echo reference's clock.
func (p *ResilientPlayback) Played() uint64 {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	return p.lastBase + p.r.last.Played()
}

// Device describes the device in use (the last one while reopening).
func (p *ResilientPlayback) Device() Info {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	return p.r.last.Device()
}

// Stats returns the current stream's counters (zero while reopening).
func (p *ResilientPlayback) Stats() Stats { return p.r.health().Stream }

// Health returns the recovery record.
func (p *ResilientPlayback) Health() Health { return p.r.health() }

// Events delivers Underflow, Lost (Err is a *LostError) and Reopened events.
func (p *ResilientPlayback) Events() <-chan Event { return p.r.events }

// Reopen retries at once while reopening, and moves a playback running on the fallback device
// back to the configured one.
func (p *ResilientPlayback) Reopen() { p.r.reopenNow(false) }

// WaitRunning waits until the current stream has handled d of audio, or ctx ends.
func (p *ResilientPlayback) WaitRunning(ctx context.Context, d time.Duration) error {
	return waitRunning(ctx, p.r, d, (*Playback).WaitRunning)
}

// Close stops reopening and closes the stream (queued audio is dropped).
func (p *ResilientPlayback) Close() error { return p.r.close() }

// EchoRef returns the echo reference, continuous across reopens (see ResilientPlayback), in
// DeviceFormat; nil when disabled. Use one reader, and read steadily.
func (p *ResilientPlayback) EchoRef() audio.Source {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if len(p.segs) == 0 {
		return nil
	}
	return &resilientEcho{p: p, seq: p.segSeq}
}

type resilientEcho struct {
	p   *ResilientPlayback
	seq int          // the segment being read
	src audio.Source // its echo source; nil until started
	gap int          // silent frames still to deliver before src
}

func (e *resilientEcho) Format() audio.Format { return e.p.dev }

func (e *resilientEcho) Read(ctx context.Context, dst []float32) (int, error) {
	ch := e.p.dev.Channels
	dst = dst[:len(dst)/ch*ch]
	for {
		if e.gap > 0 && len(dst) > 0 {
			n := min(len(dst)/ch, e.gap) * ch
			clear(dst[:n])
			e.gap -= n / ch
			return n, nil
		}
		if e.src == nil {
			r := e.p.r
			r.mu.Lock()
			if e.seq < e.p.segSeq { // a slow reader lost segments: skip to the oldest kept
				e.seq = e.p.segSeq
			}
			i := e.seq - e.p.segSeq
			closed, wait := r.closed, r.changed
			var seg echoSeg
			if i < len(e.p.segs) {
				seg = e.p.segs[i]
				e.p.segs = e.p.segs[i:] // finished segments are no longer needed
				e.p.segSeq = e.seq
			}
			r.mu.Unlock()
			if seg.p == nil {
				if closed {
					return 0, io.EOF
				}
				select {
				case <-wait:
					continue
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
			e.src, e.gap = seg.p.EchoRef(), seg.gap
			continue
		}
		n, err := e.src.Read(ctx, dst)
		if n > 0 || err == nil || ctx.Err() != nil {
			return n, err
		}
		// this stream ended (lost or closed) and its echo is drained: on to the next
		e.src = nil
		e.seq++
	}
}

var (
	_ audio.Source = (*ResilientCapture)(nil)
	_ audio.Sink   = (*ResilientPlayback)(nil)
)
