package device

import (
	"testing"

	"github.com/gordonklaus/portaudio"
	"github.com/parley-voice/parley/audio"
)

// The real-time callbacks must not allocate (an allocation can take a lock or trigger GC
// work on the audio thread). They are exercised here without a device.
func TestCallbacksDoNotAllocate(t *testing.T) {
	f := audio.Format{SampleRate: 48000, Channels: 2}
	c := &Capture{ring: audio.NewRing(4800)}
	c.dev = f
	in := make([]float32, 960)
	ti := portaudio.StreamCallbackTimeInfo{}
	if n := testing.AllocsPerRun(200, func() {
		c.callback(in, ti, 0)
		c.ring.Discard(c.ring.Len() / 2) // keep it from filling up, then overflowing
	}); n != 0 {
		t.Errorf("capture callback allocates %.1f times per call", n)
	}
	for i := 0; i < 10; i++ { // nobody reads: the ring fills up
		c.callback(in, ti, 0)
	}
	if s := c.Stats(); s.Overflows == 0 || s.Dropped == 0 || c.ring.Len()%2 != 0 {
		t.Errorf("a ring that fills up: %+v, %d samples queued (must stay whole frames)", s, c.ring.Len())
	}

	p := &Playback{ring: audio.NewRing(4800), echo: audio.NewRing(4800), in: audio.Mono16k}
	p.dev = f
	out := make([]float32, 960)
	src := make([]float32, 700)
	if n := testing.AllocsPerRun(200, func() {
		p.ring.Write(src)
		p.callback(out, ti, 0)
		p.echo.Discard(p.echo.Len())
	}); n != 0 {
		t.Errorf("playback callback allocates %.1f times per call", n)
	}
	// a stop drops queued audio at the next callback
	p.ring.Write(make([]float32, 2000))
	for i := range src {
		src[i] = 1
	}
	p.ring.Write(src)
	p.Stop()
	p.callback(out, ti, 0)
	for _, v := range out {
		if v != 0 {
			t.Fatal("audio queued before Stop was played after it")
		}
	}
	if p.ring.Len() != 0 {
		t.Errorf("%d samples still queued after Stop", p.ring.Len())
	}
}
