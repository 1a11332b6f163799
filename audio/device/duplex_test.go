package device_test

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/audio/device"
)

// TestDuplexEchoLocked plays two utterances a couple of seconds apart through a duplex
// stream and finds each in the capture: the delay between the echo reference and the
// recording is the same for both (sample-locked) unless the host reported an xrun in between
// (then PortAudio re-synchronises by up to a buffer), and the recording matches the reference.
func TestDuplexEchoLocked(t *testing.T) {
	pulse, h := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f48 := audio.Format{SampleRate: 48000, Channels: 1}
	sc := device.StreamConfig{Device: pulse.Device, SampleRate: 48000, BufferFrames: 480, Latency: 100 * time.Millisecond}
	d, err := h.OpenDuplex(device.DuplexConfig{
		Input:  device.CaptureConfig{StreamConfig: device.StreamConfig{Device: pulse.Device, Channels: 1, Latency: sc.Latency}, Format: f48},
		Output: device.PlaybackConfig{StreamConfig: sc, Format: audio.Mono16k},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Capture.WaitRunning(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// collect both sides from the start of the stream
	echo := audio.NewBufferSink(d.Playback.DeviceFormat())
	rec := audio.NewBufferSink(f48)
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() { audio.Copy(rctx, echo, d.Playback.EchoRef()); done <- struct{}{} }()
	go func() { audio.Copy(rctx, rec, d.Capture); done <- struct{}{} }()

	a := audiotest.RequireSpeech(t, "first we say this", "en-us", 0)
	b := audiotest.RequireSpeech(t, "and a while later we say that", "en+f3", 0)
	for _, u := range []*audio.Buffer{a, b} {
		if _, err := d.Playback.Write(ctx, u.Data); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Playback.Write(ctx, make([]float32, 24000)); err != nil { // 1.5 s of silence
			t.Fatal(err)
		}
	}
	if err := d.Playback.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	rcancel()
	<-done
	<-done

	ref := audio.DownMix(nil, echo.Data, d.Playback.DeviceFormat().Channels)
	// the two utterances in the echo reference, then each one in the recording
	var lags []int
	for _, seg := range splitBursts(ref, 0.005, 48000/2) {
		m := audio.Align(rec.Data, ref[seg[0]:seg[1]])
		t.Logf("utterance at echo frame %d: found in the capture at %d (delay %d frames = %.1f ms), corr %.4f, SNR %.1f dB",
			seg[0], m.Lag, m.Lag-seg[0], float64(m.Lag-seg[0])/48, m.Corr, m.SNR)
		// judge 50 ms blocks: an xrun on a loaded machine spoils only the blocks it touches
		blocks := audiotest.BlockSNR(rec.Data, ref[seg[0]:seg[1]], m.Lag, 2400, 960)
		good := 0
		for _, s := range blocks {
			if s >= 40 {
				good++
			}
		}
		if m.Corr < 0.9 || good < len(blocks)*8/10 {
			t.Errorf("utterance at %d not found cleanly: %+v, %d/%d good blocks", seg[0], m, good, len(blocks))
		}
		lags = append(lags, m.Lag-seg[0])
	}
	if len(lags) != 2 {
		t.Fatalf("found %d utterances in the echo reference, want 2", len(lags))
	}
	cs, ps := d.Capture.Stats(), d.Playback.Stats()
	t.Logf("host xrun flags: capture %d, playback %d; overflows %d, underflows %d", cs.HostFlags, ps.HostFlags, cs.Overflows, ps.Underflows)
	switch {
	case cs.HostFlags+ps.HostFlags+cs.Overflows+ps.Underflows == 0 && lags[0] != lags[1]:
		t.Errorf("echo delay changed from %d to %d frames between utterances without an xrun (a duplex stream is sample-locked)", lags[0], lags[1])
	case lags[0]-lags[1] > 480 || lags[1]-lags[0] > 480:
		// PortAudio re-synchronises the two directions after an xrun, by about a buffer
		t.Errorf("echo delay changed from %d to %d frames, more than a 10 ms buffer", lags[0], lags[1])
	}
}

// splitBursts returns the [start, end) ranges of x where |x| exceeds thresh, merging gaps
// shorter than minGap.
func splitBursts(x []float32, thresh float32, minGap int) [][2]int {
	var out [][2]int
	start, last := -1, -minGap-1
	for i, v := range x {
		if v > thresh || v < -thresh {
			if start < 0 || i-last > minGap {
				if start >= 0 {
					out = append(out, [2]int{start, last + 1})
				}
				start = i
			}
			last = i
		}
	}
	if start >= 0 {
		out = append(out, [2]int{start, last + 1})
	}
	return out
}
