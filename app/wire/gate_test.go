package wire_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/wire"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/audio/device"
)

// heardOnce is a transcriber that records how much audio it got and says one thing.
type heardOnce struct {
	mu      sync.Mutex
	samples []int
}

func (h *heardOnce) Transcribe(_ context.Context, pcm []float32, _ app.TranscribeOptions) (app.Transcript, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples = append(h.samples, len(pcm))
	return app.Transcript{Text: "what is two plus two", Lang: "en"}, nil
}

// TestPushToTalkDevicesRest: a push-to-talk assistant on real devices (a PulseAudio null
// sink) closes its capture stream at rest, and its output stream a moment later; a typed
// question opens both and the answer is played and heard on the sink; Talk opens the
// microphone and what was said reaches the recogniser.
func TestPushToTalkDevicesRest(t *testing.T) {
	pulse := audiotest.RequirePulse(t)
	cfg := config.Default()
	cfg.Audio.Input, cfg.Audio.Output = pulse.Device, pulse.Device
	cfg.Assistant.Mode = "push-to-talk"
	cfg.LLM.Backend = "skills"
	tr := &heardOnce{}
	a, err := wire.Build(context.Background(), cfg, wire.Options{NoHistory: true, NoDiscovery: true, Transcript: tr,
		Stream: func(dir device.Direction, sc *device.StreamConfig) {
			sc.SampleRate = pulse.Rate
			if dir == device.Output {
				sc.Channels = 2
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ev, unsub := a.Subscribe(1024)
	defer unsub()
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("timed out: %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	eventually("the microphone closes at rest", func() bool { return !a.Mic.IsOpen() })
	eventually("the speaker closes at rest", func() bool { return !a.Speaker.IsOpen() })
	rec := startRecorder(t, pulse.Device)
	await := func(what string, pred func(app.Event) bool) app.Event {
		t.Helper()
		timeout := time.After(60 * time.Second)
		for {
			select {
			case e := <-ev:
				if pred(e) {
					return e
				}
			case <-timeout:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	if _, err := a.SubmitText("what is six times seven"); err != nil {
		t.Fatal(err)
	}
	ex := await("the typed answer", func(e app.Event) bool { return e.Kind == app.EvTurnDone }).Exchange
	if ex.Err != nil || ex.Latency.FirstAudio.IsZero() {
		t.Fatalf("typed exchange %+v: no audio played", ex)
	}
	time.Sleep(300 * time.Millisecond)
	if played := rec.stop(); audio.DB(audio.RMS(played)) < -50 {
		t.Errorf("the sink heard nothing of the answer (%.0f dBFS)", audio.DB(audio.RMS(played)))
	}
	eventually("the microphone closes after the answer", func() bool { return !a.Mic.IsOpen() })
	eventually("the speaker closes after the answer", func() bool { return !a.Speaker.IsOpen() })

	talk := time.Now()
	if err := a.StartListening(); err != nil {
		t.Fatal(err)
	}
	await("a level from the opened microphone", func(e app.Event) bool { return e.Kind == app.EvLevel && e.Time.After(talk) })
	if !a.Mic.IsOpen() || !a.Speaker.IsOpen() {
		t.Errorf("while Talk is held: microphone open %v, speaker open %v", a.Mic.IsOpen(), a.Speaker.IsOpen())
	}
	time.Sleep(500 * time.Millisecond)
	if err := a.StopListening(); err != nil {
		t.Fatal(err)
	}
	ex = await("the spoken answer", func(e app.Event) bool { return e.Kind == app.EvTurnDone }).Exchange
	tr.mu.Lock()
	heard := tr.samples
	tr.mu.Unlock()
	if len(heard) != 1 || heard[0] < app.SampleRate/4 || ex.Answer == "" {
		t.Errorf("push-to-talk: the recogniser got %v samples, answer %q", heard, ex.Answer)
	}
	eventually("the microphone closes after the spoken answer", func() bool { return !a.Mic.IsOpen() })
}
