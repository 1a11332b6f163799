package device

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
)

// deviceless halves: the real-time state and the Go side, without a stream, so the C
// callback can be driven by the test.
func testCapture(t *testing.T, f audio.Format, samples int) *Capture {
	t.Helper()
	rt, err := newRTCapture(samples, f.Channels)
	if err != nil {
		t.Fatal(err)
	}
	c := &Capture{rt: rt}
	c.dev, c.ctr, c.kick, c.done = f, rt.counters(), rt.wake.kick, make(chan struct{})
	t.Cleanup(rt.free)
	return c
}

func testPlayback(t *testing.T, f audio.Format, samples, echo int) *Playback {
	t.Helper()
	rt, err := newRTPlayback(samples, echo, f.Channels)
	if err != nil {
		t.Fatal(err)
	}
	p := &Playback{rt: rt, in: f}
	p.dev, p.ctr, p.kick, p.done = f, rt.counters(), rt.kick, make(chan struct{})
	t.Cleanup(rt.free)
	return p
}

// The real-time callbacks run in C and must not allocate in Go either (the test drives them
// through their Go wrappers). A ring that fills up drops whole frames and counts them.
func TestCallbacksDoNotAllocate(t *testing.T) {
	f := audio.Format{SampleRate: 48000, Channels: 2}
	c := testCapture(t, f, 4800)
	ring := c.rt.ring
	in := make([]float32, 960)
	if n := testing.AllocsPerRun(200, func() {
		c.rt.callback(in, 0, 0)
		ring.Discard(ring.Len() / 2) // keep it from filling up, then overflowing
	}); n != 0 {
		t.Errorf("capture callback allocates %.1f times per call", n)
	}
	for i := 0; i < 10; i++ { // nobody reads: the ring fills up
		c.rt.callback(in, 0, 0)
	}
	if s := c.Stats(); s.Overflows == 0 || s.Dropped == 0 || ring.Len()%2 != 0 {
		t.Errorf("a ring that fills up: %+v, %d samples queued (must stay whole frames)", s, ring.Len())
	}

	p := testPlayback(t, f, 4800, 4800)
	out := make([]float32, 960)
	src := make([]float32, 700)
	if n := testing.AllocsPerRun(200, func() {
		p.rt.ring.Write(src)
		p.rt.callback(out, 0, 0)
		p.rt.echo.Discard(p.rt.echo.Len())
	}); n != 0 {
		t.Errorf("playback callback allocates %.1f times per call", n)
	}
	// a stop drops queued audio at the next callback
	p.rt.ring.Write(make([]float32, 2000))
	for i := range src {
		src[i] = 1
	}
	p.rt.ring.Write(src)
	p.Stop()
	p.rt.callback(out, 0, 0)
	for _, v := range out {
		if v != 0 {
			t.Fatal("audio queued before Stop was played after it")
		}
	}
	if p.rt.ring.Len() != 0 {
		t.Errorf("%d samples still queued after Stop", p.rt.ring.Len())
	}
}

// The rings in C memory keep order across the wrap-around and never give more than was put in.
func TestRTRingWraps(t *testing.T) {
	c := testCapture(t, audio.Format{SampleRate: 16000, Channels: 1}, 100) // rounded up to 128
	ring := c.rt.ring
	if ring.Cap() != 128 {
		t.Fatalf("cap %d, want 128", ring.Cap())
	}
	next, want := float32(0), float32(0)
	buf := make([]float32, 37)
	for round := 0; round < 50; round++ {
		in := make([]float32, 45)
		for i := range in {
			in[i] = next
			next++
		}
		c.rt.callback(in, 0, 0)
		for ring.Len() > 0 {
			n := ring.Read(buf)
			for _, v := range buf[:n] {
				if v != want {
					t.Fatalf("round %d: read %v, want %v", round, v, want)
				}
				want++
			}
		}
	}
	if ring.Written() != ring.Consumed() || ring.Written() != 50*45 {
		t.Errorf("written %d, consumed %d, want %d each", ring.Written(), ring.Consumed(), 50*45)
	}
}

// A Read waiting on an empty ring wakes when the callback delivers (not on a timer), and
// returns at once when the capture closes or its context ends.
func TestCaptureReadWakesOnAudio(t *testing.T) {
	c := testCapture(t, audio.Format{SampleRate: 16000, Channels: 1}, 1600)
	src := &ringSource{c: c}
	got := make(chan time.Time, 1)
	go func() {
		buf := make([]float32, 160)
		if n, err := src.Read(context.Background(), buf); n != 160 || err != nil {
			t.Errorf("read %d, %v", n, err)
		}
		got <- time.Now()
	}()
	time.Sleep(30 * time.Millisecond) // the reader is asleep by now
	sent := time.Now()
	c.rt.callback(make([]float32, 160), 0, 0)
	select {
	case at := <-got:
		if d := at.Sub(sent); d > maxSleep/2 {
			t.Errorf("the reader woke %v after the audio came (its safety timer is %v)", d, maxSleep)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reader never woke")
	}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := src.Read(ctx, make([]float32, 160))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled read: %v", err)
	}

	go func() {
		_, err := src.Read(context.Background(), make([]float32, 160))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.closed.Store(true)
	c.rt.wake.kick()
	if err := <-errc; !errors.Is(err, io.EOF) {
		t.Errorf("read after close: %v", err)
	}
}

// A Write that finds the ring full waits for the callback to make room, then finishes; Stop
// releases it with ErrStopped.
func TestPlaybackWriteWaitsForRoom(t *testing.T) {
	f := audio.Format{SampleRate: 16000, Channels: 1}
	p := testPlayback(t, f, 256, 0)
	done := make(chan error, 1)
	go func() {
		_, err := p.Write(context.Background(), make([]float32, 600))
		done <- err
	}()
	out := make([]float32, 160)
	for i := 0; i < 20; i++ {
		time.Sleep(5 * time.Millisecond)
		p.rt.callback(out, 0, 0)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			if got := p.handed().Load() + uint64(p.rt.ring.Len()); got != 600 {
				t.Errorf("handed and queued %d samples, want 600", got)
			}
			goto stop
		default:
		}
	}
	t.Fatal("the write never finished while the callback made room")
stop:
	p.rt.ring.Write(make([]float32, 256)) // full again
	go func() {
		_, err := p.Write(context.Background(), make([]float32, 300))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	p.Stop()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStopped) {
			t.Errorf("write across Stop: %v, want ErrStopped", err)
		}
	case <-time.After(maxSleep * 3):
		t.Error("Stop did not release a waiting write")
	}
}

// With StreamConfig.Batch, a waiting reader sleeps until that much audio has gathered (fewer
// wake-ups at rest), not until the first callback.
func TestCaptureReadWaitsForItsBatch(t *testing.T) {
	c := testCapture(t, audio.Format{SampleRate: 16000, Channels: 1}, 1600)
	c.cfg = StreamConfig{SampleRate: 16000, Channels: 1, BufferFrames: 160, Batch: 30 * time.Millisecond}
	src := &ringSource{c: c}
	got := make(chan int, 1)
	go func() {
		n, err := src.Read(context.Background(), make([]float32, 1024))
		if err != nil {
			t.Error(err)
		}
		got <- n
	}()
	time.Sleep(20 * time.Millisecond)
	c.rt.callback(make([]float32, 160), 0, 0) // one buffer: not yet
	select {
	case n := <-got:
		t.Fatalf("the reader woke with %d samples, before its 480", n)
	case <-time.After(maxSleep / 4):
	}
	c.rt.callback(make([]float32, 320), 0, 0)
	select {
	case n := <-got:
		if n < 480 {
			t.Errorf("woke with %d samples, want the batch of 480", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reader never woke")
	}
}
