package device_test

import (
	"context"
	"math"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/gpu/gputest"
)

// BenchmarkCaptureToVAD plays an utterance into the null sink, captures it and runs the VAD,
// and measures for the speech-start and speech-end events:
//   - pipeline_*_ms: from the deciding sample's delivery by the device callback to the event
//     reaching the caller (ring buffer, polling, resampling, VAD windowing and model): the
//     audio the callbacks had delivered beyond the deciding sample when the event came out;
//   - adc_*_ms: from the deciding sample's ADC time (PortAudio's time stamp) to the event,
//     which adds the host's own capture latency (large through PulseAudio's ALSA plug-in);
//   - *_rule_ms: the detector's decision rules (MinSpeech confirmation, MinSilence), which
//     come on top and are configuration, not delay.
func BenchmarkCaptureToVAD(b *testing.B) {
	model := gputest.RequireModel(b, "silero-vad-v5/silero_vad.onnx")
	pulse := audiotest.RequirePulse(b)
	speech := audiotest.RequireSpeech(b, "please turn on the kitchen lights", "en-us", 0)
	h, err := device.Open(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sc := device.StreamConfig{Device: pulse.Device, SampleRate: 48000, BufferFrames: 480, Latency: 20 * time.Millisecond}
	capt, err := h.OpenCapture(device.CaptureConfig{StreamConfig: sc, Format: audio.Mono16k})
	if err != nil {
		b.Fatal(err)
	}
	defer capt.Close()
	sc.Latency = 100 * time.Millisecond
	play, err := h.OpenPlayback(device.PlaybackConfig{StreamConfig: sc, Format: audio.Mono16k})
	if err != nil {
		b.Fatal(err)
	}
	defer play.Close()
	d, err := vad.New(model, vad.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	if err := capt.WaitRunning(ctx, 300*time.Millisecond); err != nil {
		b.Fatal(err)
	}
	if capt.StartTime() == 0 {
		b.Skip("the host API reports no ADC times")
	}
	var pos int64
	buf := make([]float32, 512)
	var startDelay, endDelay, startRule, endRule, startPipe, endPipe time.Duration
	devRate := int64(capt.DeviceFormat().SampleRate)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		if _, err := play.Write(ctx, speech.Data); err != nil {
			b.Fatal(err)
		}
		if _, err := play.Write(ctx, make([]float32, 16000)); err != nil { // a second of silence
			b.Fatal(err)
		}
		ended := false
		for !ended {
			k, err := capt.Read(ctx, buf)
			if err != nil {
				b.Fatal(err)
			}
			evs, err := d.Accept(ctx, buf[:k])
			if err != nil {
				b.Fatal(err)
			}
			pos += int64(k)
			for _, e := range evs {
				now := capt.Now()
				entered := capt.StartTime() + time.Duration(e.At)*time.Second/16000
				delivered := time.Duration(capt.Stats().Frames)*time.Second/time.Duration(devRate) - time.Duration(e.At)*time.Second/16000
				switch e.Type {
				case vad.SpeechStart:
					startDelay += now - entered
					startPipe += delivered
					startRule += time.Duration(e.At-e.Start) * time.Second / 16000
				case vad.SpeechEnd:
					endDelay += now - entered
					endPipe += delivered
					endRule += time.Duration(e.At-e.End) * time.Second / 16000
					ended = true
				}
			}
		}
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(per(startPipe), "pipeline_start_ms")
	b.ReportMetric(per(endPipe), "pipeline_end_ms")
	b.ReportMetric(per(startDelay), "adc_start_ms")
	b.ReportMetric(per(endDelay), "adc_end_ms")
	b.ReportMetric(per(startRule), "start_rule_ms")
	b.ReportMetric(per(endRule), "end_rule_ms")
	b.ReportMetric(float64(capt.Stats().Dropped), "dropped_frames")
}

// BenchmarkPlaybackUnderLoad plays 6 s of a made tone at the live path's latency (30 ms, 10 ms
// buffers) while goroutines keep every core busy allocating (so the garbage collector runs
// throughout), records the sink's monitor and counts the gaps the listener would hear:
// gaps_per_min is the number of 5 ms blocks inside the tone that came out silent, per minute
// of audio; host_xruns_per_min the under-runs PortAudio reported. The callback runs in C, so
// the Go scheduler and the collector cannot make it late.
func BenchmarkPlaybackUnderLoad(b *testing.B) {
	pulse := audiotest.RequirePulse(b)
	h, err := device.Open(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	const rate, secs = 48000, 6
	tone := make([]float32, rate*secs)
	for i := range tone {
		tone[i] = 0.3 * float32(math.Sin(2*math.Pi*440*float64(i)/rate))
	}
	var gaps, xruns float64
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		capt, err := h.OpenCapture(device.CaptureConfig{StreamConfig: device.StreamConfig{Device: pulse.Device, SampleRate: rate, Channels: 1, Latency: 100 * time.Millisecond}, Format: audio.Format{SampleRate: rate, Channels: 1}})
		if err != nil {
			b.Fatal(err)
		}
		play, err := h.OpenPlayback(device.PlaybackConfig{StreamConfig: device.StreamConfig{Device: pulse.Device, SampleRate: rate, Channels: 1, BufferFrames: rate / 100, Latency: 30 * time.Millisecond}, Format: audio.Format{SampleRate: rate, Channels: 1}, Echo: -1})
		if err != nil {
			b.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 2*runtime.GOMAXPROCS(0); w++ {
			wg.Add(1)
			go func() { // garbage, as synthesis and decoding make it
				defer wg.Done()
				var keep [][]byte
				for {
					select {
					case <-stop:
						return
					default:
					}
					keep = append(keep, make([]byte, 64<<10))
					if len(keep) > 64 {
						keep = keep[:0]
					}
				}
			}()
		}
		recorded := make(chan *audio.Buffer, 1)
		go func() {
			r, _ := audio.ReadAll(ctx, audio.LimitSource(capt, rate*(secs+2)), 0)
			recorded <- r
		}()
		capt.WaitRunning(ctx, 100*time.Millisecond)
		play.WaitRunning(ctx, 100*time.Millisecond)
		if _, err := play.Write(ctx, tone); err != nil {
			b.Fatal(err)
		}
		play.Drain(ctx)
		close(stop)
		wg.Wait()
		rec := <-recorded
		ps := play.Stats()
		play.Close()
		capt.Close()
		cancel()
		// the tone's span in the recording: from its first to its last loud block
		const blk = rate / 200
		var loud []bool
		for j := 0; j+blk <= len(rec.Data); j += blk {
			loud = append(loud, audio.RMS(rec.Data[j:j+blk]) > 0.05)
		}
		first, last := slices.Index(loud, true), len(loud)-1
		for last > first && !loud[last] {
			last--
		}
		silent := 0
		if first >= 0 {
			for _, l := range loud[first : last+1] {
				if !l {
					silent++
				}
			}
		}
		gaps += float64(silent) / secs * 60
		xruns += float64(ps.HostFlags+ps.Underflows) / secs * 60
	}
	b.ReportMetric(gaps/float64(b.N), "gaps_per_min")
	b.ReportMetric(xruns/float64(b.N), "host_xruns_per_min")
}

// BenchmarkCaptureIdle: the CPU of a microphone stream at rest, as the listening app keeps
// one (16 kHz mono read in 20 ms batches, 10 s), in percent of a core: this process's
// (%core), the PulseAudio server's (server-%core, which converts to the rate asked for) and
// both. Through PulseAudio's own API at 16 kHz (the default path), and as baselines in the
// same run through PortAudio and ALSA's PulseAudio plug-in, at the device's own rate (what
// the app did before: the server sends 48 kHz and this process resamples) and at 16 kHz.
func BenchmarkCaptureIdle(b *testing.B) {
	pulse := audiotest.RequirePulse(b)
	for _, c := range []struct {
		name, backend string
		rate          int
	}{{"pulse", "pulse", 0}, {"portaudio-device-rate", "portaudio", 0}, {"portaudio-16k", "portaudio", 16000}} {
		b.Run(c.name, func(b *testing.B) {
			b.Setenv("PARLEY_AUDIO_BACKEND", c.backend)
			h, err := device.Open(nil)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			var us, server float64
			for range b.N {
				u, s := captureIdleCPU(b, h, pulse, c.rate, 10*time.Second)
				us, server = us+u, server+s
			}
			n := float64(b.N)
			b.ReportMetric(us/n, "%core")
			b.ReportMetric(server/n, "server-%core")
			b.ReportMetric((us+server)/n, "total-%core")
		})
	}
}

func captureIdleCPU(b *testing.B, h *device.Host, pulse *audiotest.Pulse, rate int, d time.Duration) (float64, float64) {
	capt, err := h.OpenCapture(device.CaptureConfig{StreamConfig: device.StreamConfig{Device: pulse.Device, SampleRate: rate, Batch: 20 * time.Millisecond}, Format: audio.Mono16k})
	if err != nil {
		b.Fatal(err)
	}
	defer capt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	if err := capt.WaitRunning(ctx, 200*time.Millisecond); err != nil {
		b.Fatal(err)
	}
	buf := make([]float32, 320)
	c0, s0, t0 := processCPU(), pulse.CPU(), time.Now()
	for time.Since(t0) < d {
		if _, err := capt.Read(ctx, buf); err != nil {
			b.Fatal(err)
		}
	}
	wall := time.Since(t0).Seconds()
	return 100 * (processCPU() - c0).Seconds() / wall, 100 * (pulse.CPU() - s0).Seconds() / wall
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
