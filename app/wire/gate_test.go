package wire_test

import (
	"context"
	"math"
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
// pulseAssistant builds an assistant in mode on a PulseAudio null sink (its microphone the
// sink's monitor), with the offline skills and tr as its ear, and subscribes to its events.
func pulseAssistant(t *testing.T, mode string, tr app.Transcriber) (*audiotest.Pulse, *wire.Assistant, <-chan app.Event) {
	t.Helper()
	pulse := audiotest.RequirePulse(t)
	cfg := config.Default()
	cfg.Audio.Input, cfg.Audio.Output = pulse.Device, pulse.Device
	cfg.Assistant.Mode = mode
	cfg.LLM.Backend = "skills"
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
	t.Cleanup(func() { a.Close() })
	ev, unsub := a.Subscribe(1024)
	t.Cleanup(unsub)
	return pulse, a, ev
}

// eventually waits up to 15 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPushToTalkDevicesRest(t *testing.T) {
	tr := &heardOnce{}
	pulse, a, ev := pulseAssistant(t, "push-to-talk", tr)
	eventually(t, "the microphone closes at rest", func() bool { return !a.Mic.IsOpen() })
	eventually(t, "the speaker closes at rest", func() bool { return !a.Speaker.IsOpen() })
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
	eventually(t, "the microphone closes after the answer", func() bool { return !a.Mic.IsOpen() })
	eventually(t, "the speaker closes after the answer", func() bool { return !a.Speaker.IsOpen() })

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
	eventually(t, "the microphone closes after the spoken answer", func() bool { return !a.Mic.IsOpen() })
}

// TestHandsFreeSpeakerRests: listening hands-free, the microphone stays open but the output
// stream closes once it has had nothing to play for a while (it costs about a percent of a
// core playing silence); an answer opens it again and is heard on the sink, whole, without
// Parley taking its own voice for the user's; then it rests again.
func TestHandsFreeSpeakerRests(t *testing.T) {
	pulse, a, ev := pulseAssistant(t, "hands-free", &heardOnce{})
	eventually(t, "the speaker closes at rest", func() bool { return !a.Speaker.IsOpen() })
	if !a.Mic.IsOpen() {
		t.Fatal("the microphone closed in hands-free mode")
	}
	// a preview at rest plays on a deep-buffered stream; the answer after it on a live one
	tone := &audio.Buffer{Format: audio.Mono16k, Data: make([]float32, app.SampleRate/2)}
	for i := range tone.Data {
		tone.Data[i] = 0.2 * float32(math.Sin(float64(i)*0.2))
	}
	if err := a.PlayAside(context.Background(), tone); err != nil {
		t.Fatal(err)
	}
	if l := a.Speaker.Latency(); l < 150*time.Millisecond {
		t.Errorf("a preview played at rest on a stream of %v latency, want the deep buffer", l)
	}
	t.Logf("preview stream latency %v", a.Speaker.Latency())
	rec := startRecorder(t, pulse.Device)
	if _, err := a.SubmitText("what is six times seven"); err != nil {
		t.Fatal(err)
	}
	var ex *app.Exchange
	turns := 0
	for timeout := time.After(60 * time.Second); turns == 0; {
		select {
		case e := <-ev:
			if e.Kind == app.EvTurnDone {
				ex, turns = e.Exchange, turns+1
			}
		case <-timeout:
			t.Fatal("timed out waiting for the answer")
		}
	}
	if ex.Err != nil || ex.Latency.FirstAudio.IsZero() || ex.Interrupted {
		t.Fatalf("exchange %+v: want the answer played whole", ex)
	}
	t.Logf("answer stream latency %v", a.Speaker.Latency())
	if l := a.Speaker.Latency(); l == 0 || l >= 150*time.Millisecond {
		t.Errorf("the answer played on a stream of %v latency, want the live one", l)
	}
	time.Sleep(300 * time.Millisecond)
	if played := rec.stop(); audio.DB(audio.RMS(played)) < -50 {
		t.Errorf("the sink heard nothing of the answer (%.0f dBFS)", audio.DB(audio.RMS(played)))
	}
	eventually(t, "the speaker closes after the answer", func() bool { return !a.Speaker.IsOpen() })
	for {
		select {
		case e := <-ev:
			if e.Kind == app.EvTurnDone || e.Kind == app.EvSpeechStart {
				t.Errorf("after the answer: %v (Parley heard itself)", e.Kind)
			}
			continue
		default:
		}
		break
	}
}
