package device

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
)

// These tests drive the reopen logic with streams that have no PortAudio behind them: the test
// plays the device (calling the callbacks), the opener (answering each open) and the clock
// (firing backoff timers). Nothing depends on timing.

func fakeStream(s *stream, name string) {
	s.info = Info{Name: name}
	s.cfg = StreamConfig{SampleRate: 16000, Channels: 1, BufferFrames: 160}
	s.dev = audio.Mono16k
	s.events = make(chan Event, 16)
	s.done = make(chan struct{})
	s.poll = time.Millisecond
	s.shared = true // no PortAudio stream to stop
}

func fakeCapture(t *testing.T, name string) *Capture {
	rt, err := newRTCapture(16000, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := &Capture{rt: rt}
	fakeStream(&c.stream, name)
	c.ctr, c.kick = rt.counters(), rt.wake.kick
	freeWhenUnreachable(c, &rt.inStream, rt.free)
	if c.conv, err = audio.Convert(&ringSource{c: c}, audio.Mono16k, audio.QualityHigh); err != nil {
		t.Fatal(err)
	}
	return c
}

func fakePlayback(name string) *Playback {
	rt, err := newRTPlayback(16000, 16000, 1)
	if err != nil {
		panic(err) // out of memory in a test
	}
	p := &Playback{in: audio.Mono16k, rt: rt}
	fakeStream(&p.stream, name)
	p.ctr, p.kick = rt.counters(), rt.kick
	freeWhenUnreachable(p, &rt.inStream, rt.free)
	return p
}

func lostErr(name string) error { return fmt.Errorf("%w: %q: test", ErrDeviceLost, name) }

// kill makes s lost as the watchdog would.
func kill(s *stream) {
	err := lostErr(s.info.Name)
	s.lost.Store(&err)
	if s.kick != nil {
		s.kick()
	}
	s.emit(Event{Kind: Lost, Err: err})
}

// opener answers the reopener's open calls from the test.
type opener[E any] struct {
	calls   chan string
	answers chan answer[E]
	stop    chan struct{} // closed at the end of the test: opens fail at once
}

type answer[E any] struct {
	s   E
	err error
}

// release unblocks the supervisor for good (so that a failed test can still Close).
func release(o interface{ release() }, c *clock) {
	o.release()
	close(c.stop)
}

func (o *opener[E]) release() { close(o.stop) }

func newOpener[E any](t *testing.T) *opener[E] {
	o := &opener[E]{calls: make(chan string), answers: make(chan answer[E]), stop: make(chan struct{})}
	return o
}

func (o *opener[E]) open(spec string) (E, error) {
	var zero E
	select {
	case o.calls <- spec:
	case <-o.stop:
		return zero, ErrClosed
	}
	select {
	case a := <-o.answers:
		return a.s, a.err
	case <-o.stop:
		return zero, ErrClosed
	}
}

// expect waits for an open of spec and answers it.
func (o *opener[E]) expect(t *testing.T, spec string, s E, err error) {
	t.Helper()
	select {
	case got := <-o.calls:
		if got != spec {
			t.Fatalf("opened %q, want %q", got, spec)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a timing assertion
		t.Fatalf("no open of %q", spec)
	}
	o.answers <- answer[E]{s, err}
}

// clock is the backoff timer: every wait is reported and fired by the test.
type clock struct {
	waits chan time.Duration
	fire  chan time.Time
	now   time.Time
	stop  chan struct{}
}

func newClock(t *testing.T) *clock {
	c := &clock{waits: make(chan time.Duration), fire: make(chan time.Time), now: time.Unix(1000, 0), stop: make(chan struct{})}
	return c
}

func (c *clock) after(d time.Duration) <-chan time.Time {
	select {
	case c.waits <- d:
	case <-c.stop:
	}
	return c.fire
}

func (c *clock) expect(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case got := <-c.waits:
		if got != d {
			t.Fatalf("backoff %v, want %v", got, d)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no backoff wait of %v", d)
	}
}

func feed(c *Capture, v float32, n int) {
	in := make([]float32, n)
	for i := range in {
		in[i] = v
	}
	c.rt.callback(in, 0, 0)
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		rec  Recovery
		want []time.Duration
	}{
		{Recovery{}, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}},
		{Recovery{MinBackoff: time.Second, MaxBackoff: 3 * time.Second}, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}},
		{Recovery{MinBackoff: time.Second, MaxBackoff: time.Millisecond}, []time.Duration{time.Millisecond}},
	}
	for _, tt := range tests {
		for i, want := range tt.want {
			if got := tt.rec.backoff(i); got != want {
				t.Errorf("%+v attempt %d: %v, want %v", tt.rec, i, got, want)
			}
		}
	}
	if got := (Recovery{}).backoff(1000); got != 5*time.Second {
		t.Errorf("attempt 1000: %v (overflow?)", got)
	}
}

// TestResilientCaptureReopens: a lost capture is reported once, the configured device is
// retried (with a rescan), the default tried, the waits double up to the cap, and Read delivers
// the new stream's audio; a Reopen later moves it from the fallback back to the named device.
func TestResilientCaptureReopens(t *testing.T) {
	ctx := context.Background()
	op, clk := newOpener[*Capture](t), newClock(t)
	c1 := fakeCapture(t, "usb")
	rc := &ResilientCapture{out: audio.Mono16k}
	rc.r = newReopener(Input, "usb", Recovery{MinBackoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}, op.open, nil)
	rc.r.after, rc.r.now = clk.after, func() time.Time { return clk.now }
	rescans := 0
	rc.r.rescan = func() (bool, error) { rescans++; return rescans%2 == 1, nil } // every other one "something else is open"
	rc.r.start(c1)
	t.Cleanup(func() { release(op, clk); rc.Close() })

	buf := make([]float32, 1000)
	feed(c1, 0.25, 160)
	if n, err := rc.Read(ctx, buf); err != nil || n != 160 || buf[0] != 0.25 {
		t.Fatalf("Read = %d, %v, %v", n, err, buf[0])
	}
	kill(&c1.stream)
	_, err := rc.Read(ctx, buf)
	var le *LostError
	if !errors.As(err, &le) || !errors.Is(err, ErrReopening) || !errors.Is(err, ErrDeviceLost) || !le.Temporary() || le.Device != "usb" || le.Dir != Input {
		t.Fatalf("Read after loss = %v, want a *LostError for input usb", err)
	}
	got := make(chan error, 1)
	go func() { // blocks until the device is back
		n, err := rc.Read(ctx, buf)
		if err == nil && (n != 320 || buf[0] != 0.5) {
			err = fmt.Errorf("read %d samples of %v, want 320 of 0.5", n, buf[0])
		}
		got <- err
	}()
	// attempt 1: usb fails, rescan done, usb again fails, default fails → 100 ms
	op.expect(t, "usb", nil, ErrNoDevice)
	op.expect(t, "usb", nil, ErrNoDevice)
	op.expect(t, "", nil, errors.New("no default"))
	clk.expect(t, 100*time.Millisecond)
	if h := rc.Health(); h.State != StateReopening || h.Losses != 1 || h.Failures != 1 || h.Rescans != 1 || h.Reopens != 0 {
		t.Errorf("health while reopening: %+v", h)
	}
	clk.fire <- clk.now
	// attempt 2: rescan refused (something open) → no second usb try
	op.expect(t, "usb", nil, ErrNoDevice)
	op.expect(t, "", nil, errors.New("no default"))
	clk.expect(t, 200*time.Millisecond)
	clk.fire <- clk.now
	op.expect(t, "usb", nil, ErrNoDevice)
	op.expect(t, "usb", nil, ErrNoDevice)
	op.expect(t, "", nil, errors.New("no default"))
	clk.expect(t, 300*time.Millisecond) // capped
	clk.fire <- clk.now
	// attempt 4: the default device opens
	c2 := fakeCapture(t, "builtin")
	feed(c2, 0.5, 320)
	op.expect(t, "usb", nil, ErrNoDevice)
	op.expect(t, "", c2, nil)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if !c1.closed.Load() {
		t.Error("the lost stream was not closed")
	}
	h := rc.Health()
	if h.State != StateRunning || !h.Fallback || h.Device != "builtin" || h.Reopens != 1 || h.Failures != 3 || h.Losses != 1 {
		t.Errorf("health after reopen: %+v", h)
	}
	// events: Lost (with the LostError), then Reopened
	for _, want := range []EventKind{Lost, Reopened} {
		ev := <-rc.Events()
		if ev.Kind != want {
			t.Errorf("event %v, want %v", ev.Kind, want)
		}
		if want == Lost && !errors.As(ev.Err, &le) {
			t.Errorf("Lost event error %v is not a *LostError", ev.Err)
		}
	}

	// the named device is back: Reopen moves there, without an error for the reader
	rc.Reopen()
	c3 := fakeCapture(t, "usb")
	feed(c3, 0.75, 160)
	op.expect(t, "usb", c3, nil)
	if n, err := rc.Read(ctx, buf); err != nil || n != 160 || buf[0] != 0.75 {
		t.Fatalf("Read after Reopen = %d, %v, %v", n, err, buf[0])
	}
	if h := rc.Health(); h.Fallback || h.Device != "usb" || h.Reopens != 2 || h.Losses != 1 {
		t.Errorf("health after Reopen: %+v", h)
	}
	if !c2.closed.Load() {
		t.Error("the fallback stream was not closed")
	}
}

// TestResilientCaptureCancelAndClose: a Read blocked while reopening stops at its context;
// Close during a backoff wait returns and ends blocked Reads with io.EOF; a stream that opens
// but never runs counts as a failure, not as a second loss.
func TestResilientCaptureCancelAndClose(t *testing.T) {
	op, clk := newOpener[*Capture](t), newClock(t)
	c1 := fakeCapture(t, "mic")
	rc := &ResilientCapture{out: audio.Mono16k}
	rc.r = newReopener(Input, "mic", Recovery{NoFallback: true}, op.open, nil)
	rc.r.after = clk.after
	rc.r.start(c1)
	t.Cleanup(func() { release(op, clk); rc.Close() })
	buf := make([]float32, 100)
	feed(c1, 0.1, 10) // it ran
	rc.Read(context.Background(), buf)
	kill(&c1.stream)
	if _, err := rc.Read(context.Background(), buf); !errors.Is(err, ErrReopening) {
		t.Fatalf("Read = %v, want ErrReopening", err)
	}
	// a stream that opens but dies before its first callback
	c2 := fakeCapture(t, "mic")
	op.expect(t, "mic", c2, nil)
	kill(&c2.stream)
	op.expect(t, "mic", nil, ErrNoDevice) // no fallback: only "mic"
	clk.expect(t, 100*time.Millisecond)
	if h := rc.Health(); h.Losses != 1 || h.Failures != 2 || h.Reopens != 1 {
		t.Errorf("health: %+v (want 1 loss, 2 failures: the dead-on-arrival stream and the failed open)", h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { _, err := rc.Read(ctx, buf); res <- err }()
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Read = %v", err)
	}
	go func() { _, err := rc.Read(context.Background(), buf); res <- err }()
	if err := rc.Close(); err != nil { // the supervisor is in its backoff wait
		t.Error(err)
	}
	if err := <-res; err != io.EOF {
		t.Errorf("Read blocked across Close = %v, want io.EOF", err)
	}
	if h := rc.Health(); h.State != StateClosed {
		t.Errorf("state after Close: %s", h.State)
	}
}

// TestResilientPlaybackEcho: Write reports a loss once, waits for the reopen, and plays on the
// new stream; the echo reference holds the old stream's frames, the outage as silence, then
// the new stream's, and Played counts the same way. Stop ends a Write waiting for a reopen.
func TestResilientPlaybackEcho(t *testing.T) {
	ctx := context.Background()
	op, clk := newOpener[*Playback](t), newClock(t)
	p1 := fakePlayback("spk")
	rp := &ResilientPlayback{in: audio.Mono16k, dev: audio.Mono16k, buffer: 160,
		beatOf: func(*Playback) time.Time { return clk.now.Add(-250 * time.Millisecond) }} // the outage: 250 ms = 4000 frames
	rp.r = newReopener(Output, "spk", Recovery{NoFallback: true}, op.open, nil)
	rp.r.after, rp.r.now = clk.after, func() time.Time { return clk.now }
	rp.r.onSwap = rp.swapped
	rp.segs = []echoSeg{{p: p1}}
	rp.r.start(p1)
	t.Cleanup(func() { release(op, clk); rp.Close() })
	echo := rp.EchoRef()

	out := make([]float32, 160)
	play := func(p *Playback, v float32) {
		t.Helper()
		s := make([]float32, 160)
		for i := range s {
			s[i] = v
		}
		if _, err := rp.Write(ctx, s); err != nil {
			t.Fatal(err)
		}
		p.rt.callback(out, 0, 0)
	}
	play(p1, 0.5)
	kill(&p1.stream)
	var le *LostError
	if _, err := rp.Write(ctx, out); !errors.As(err, &le) || le.Dir != Output {
		t.Fatalf("Write after loss = %v, want a *LostError", err)
	}
	stopped := make(chan error, 1)
	go func() { _, err := rp.Write(ctx, out); stopped <- err }()
	op.expect(t, "spk", nil, ErrNoDevice)
	clk.expect(t, 100*time.Millisecond)
	for done := false; !done; { // Stop until the writer (which may not be waiting yet) sees one
		rp.Stop()
		select {
		case err := <-stopped:
			if !errors.Is(err, ErrStopped) {
				t.Errorf("Write waiting for a reopen, then Stop: %v, want ErrStopped", err)
			}
			done = true
		case <-time.After(time.Millisecond):
		}
	}
	clk.fire <- clk.now
	p2 := fakePlayback("spk")
	op.expect(t, "spk", p2, nil)
	if err := rp.WaitRunning(ctx, 0); err != nil {
		t.Fatal(err)
	}
	play(p2, 0.25)

	if got, want := rp.Played(), uint64(160+4000+160); got != want {
		t.Errorf("Played = %d, want %d (160 + 4000 silent + 160)", got, want)
	}
	// the echo: 160 × 0.5, 4000 × 0, 160 × 0.25
	rec, err := audio.ReadAll(ctx, audio.LimitSource(echo, 160+4000+160), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := func(i int) float32 {
		switch {
		case i < 160:
			return 0.5
		case i < 4160:
			return 0
		}
		return 0.25
	}
	if len(rec.Data) != 4320 {
		t.Fatalf("echo has %d frames, want 4320", len(rec.Data))
	}
	for i, v := range rec.Data {
		if v != want(i) {
			t.Fatalf("echo frame %d = %v, want %v", i, v, want(i))
		}
	}
}
