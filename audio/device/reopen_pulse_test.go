package device_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/audio/device"
)

// recorder reads a capture steadily, counting the losses it is told about and keeping what
// arrived since the last one.
type recorder struct {
	mu    sync.Mutex
	lost  int
	other error
	after []float32 // audio since the last *LostError
	done  chan struct{}
}

func record(ctx context.Context, src audio.Source) *recorder {
	r := &recorder{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]float32, 4800)
		for {
			n, err := src.Read(ctx, buf)
			r.mu.Lock()
			r.after = append(r.after, buf[:n]...)
			switch {
			case err == nil:
			case errors.Is(err, device.ErrReopening):
				r.lost++
				r.after = r.after[:0]
			case ctx.Err() != nil:
				r.mu.Unlock()
				return
			default:
				r.other = err
				r.mu.Unlock()
				return
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.after)
}

// waitFor polls cond until it holds or ctx ends (a hang guard; nothing is timed).
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestReopenAfterPulseRestart kills the PulseAudio server under a running resilient capture
// and playback and starts it again: the reader is told once, both streams reopen, and a sweep
// played through the reopened playback is found, nearly unchanged, in the reopened capture
// and in the echo reference.
func TestReopenAfterPulseRestart(t *testing.T) {
	pulse, h := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	f48 := audio.Format{SampleRate: 48000, Channels: 1}
	sc := device.StreamConfig{Device: pulse.Device, SampleRate: 48000, Channels: 1, Latency: 100 * time.Millisecond, LossTimeout: time.Second}
	rec := device.Recovery{MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
	capt, err := h.OpenResilientCapture(device.CaptureConfig{StreamConfig: sc, Format: f48}, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer capt.Close()
	psc := sc
	psc.Channels = 2
	play, err := h.OpenResilientPlayback(device.PlaybackConfig{StreamConfig: psc, Format: f48}, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer play.Close()
	for _, s := range []interface {
		WaitRunning(context.Context, time.Duration) error
	}{capt, play} {
		// past start-up (200 ms), so that the loss timeout, not the start timeout, applies
		if err := s.WaitRunning(ctx, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	r := record(rctx, capt)
	echo := audio.NewBufferSink(audio.Format{SampleRate: 48000, Channels: 2})
	echoDone := make(chan struct{})
	go func() { defer close(echoDone); audio.Copy(rctx, echo, play.EchoRef()) }()

	pulse.Kill()
	waitFor(ctx, t, "both losses", func() bool {
		return capt.Health().Losses >= 1 && play.Health().Losses >= 1
	})
	if err := pulse.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "both reopens", func() bool {
		c, p := capt.Health(), play.Health()
		return c.State == device.StateRunning && c.Reopens >= 1 && p.State == device.StateRunning && p.Reopens >= 1
	})
	for _, s := range []interface {
		WaitRunning(context.Context, time.Duration) error
	}{capt, play} {
		if err := s.WaitRunning(ctx, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []interface{ Health() device.Health }{capt, play} {
		js, _ := json.Marshal(s.Health())
		t.Logf("health: %s", js)
	}

	sweep, _ := audio.ReadAll(ctx, audio.Sweep(f48, 48000, 200, 4000, 0.5), 0)
	_, err = play.Write(ctx, sweep.Data)
	if errors.Is(err, device.ErrReopening) { // the loss, reported once
		var le *device.LostError
		if !errors.As(err, &le) || le.Dir != device.Output {
			t.Errorf("Write after the loss: %v", err)
		}
		_, err = play.Write(ctx, sweep.Data)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := play.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	n := r.len()
	waitFor(ctx, t, "half a second more capture", func() bool { return r.len() >= n+24000 })
	rcancel()
	<-r.done
	<-echoDone

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.other != nil {
		t.Errorf("capture Read failed: %v", r.other)
	}
	if r.lost < 1 {
		t.Errorf("the reader was never told of the loss")
	}
	m := audiotest.Find(r.after, sweep.Data)
	t.Logf("sweep in the reopened capture: lag %d, corr %.4f, SNR %.1f dB (%d losses reported)", m.Lag, m.Corr, m.SNR, r.lost)
	if m.Corr < 0.9 {
		t.Errorf("the sweep played after the restart is not in the capture: %+v", m)
	}
	mono := audio.DownMix(nil, echo.Data, 2)
	em := audiotest.Find(mono, sweep.Data)
	t.Logf("sweep in the echo reference: lag %d of %d frames, corr %.4f, SNR %.1f dB; Played %d", em.Lag, len(mono), em.Corr, em.SNR, play.Played())
	if em.Corr < 0.99 {
		t.Errorf("the sweep is not in the echo reference: %+v", em)
	}
	if em.Lag+len(sweep.Data) > int(play.Played()) || int(play.Played())-len(mono) > 48000 {
		t.Errorf("echo reference (%d frames, sweep at %d) and Played (%d) disagree", len(mono), em.Lag, play.Played())
	}
	for _, hl := range []device.Health{capt.Health(), play.Health()} {
		if hl.Losses < 1 || hl.Reopens < 1 || hl.LastError == "" || hl.Device != pulse.Device {
			t.Errorf("health: %+v", hl)
		}
	}
}
