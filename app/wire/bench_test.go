package wire_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/factory/roles"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/llm/brain"
	"github.com/parley-voice/parley/llm/skills"
	"github.com/parley-voice/parley/tts/espeak"
)

// realtimeMic plays a looped script at real time (20 ms blocks), like a microphone.
type realtimeMic struct {
	script []float32
	pos    int
	next   time.Time
}

func (m *realtimeMic) Read(ctx context.Context, p []float32) (int, error) {
	if m.next.IsZero() {
		m.next = time.Now()
	}
	m.next = m.next.Add(20 * time.Millisecond)
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(time.Until(m.next)):
	}
	n := min(len(p), 320)
	for i := range n {
		p[i] = m.script[m.pos]
		m.pos = (m.pos + 1) % len(m.script)
	}
	return n, nil
}

// nullSpeaker plays instantly: first audio out is when the first samples reach the device.
type nullSpeaker struct {
	mu   sync.Mutex
	n    int64
	rate int
}

func (s *nullSpeaker) SampleRate() int { return s.rate }
func (s *nullSpeaker) Write(ctx context.Context, p []float32) error {
	s.mu.Lock()
	s.n += int64(len(p))
	s.mu.Unlock()
	return ctx.Err()
}
func (s *nullSpeaker) Played() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}
func (s *nullSpeaker) Stop() {}

type fixedEars struct{}

func (fixedEars) Transcribe(context.Context, []float32, app.TranscribeOptions) (app.Transcript, error) {
	return app.Transcript{Text: "what time is it", Lang: "en"}, nil
}

// BenchmarkDemoEndOfSpeechToFirstAudio measures, per spoken "what time is it", the time from
// the end of speech to the first audio out with the demo stack on the CPU: Silero VAD (its
// 400 ms of silence is the endpoint), the offline skills brain and espeak-ng, on a real-time
// microphone and a speaker that plays instantly. Speech recognition is the model named by
// PARLEY_E2E_ASR (a directory or id), else the demo model in assets/demo/sensevoice (its
// transcript is mostly wrong, so the brain answers with its offline fallback sentence; the
// compute is real), else a fixed transcript at zero cost.
func BenchmarkDemoEndOfSpeechToFirstAudio(b *testing.B) {
	gputest.RequireORT(b)
	gputest.RequireModel(b, "silero-vad-v5/silero_vad.onnx")
	q, err := audiotest.Speak(context.Background(), "what time is it", "en-us", 0)
	if err != nil {
		b.Skip("espeak-ng:", err)
	}
	script := append(make([]float32, app.SampleRate/2), q.Data...)
	script = append(script, make([]float32, 2*app.SampleRate)...)

	d, err := vad.New("", vad.Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	e, err := espeak.New(espeak.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	sk, err := skills.New(skills.Options{})
	if err != nil {
		b.Fatal(err)
	}
	br, err := brain.New(brain.Config{Skills: sk, LocalFirst: true})
	if err != nil {
		b.Fatal(err)
	}
	var tr app.Transcriber = fixedEars{}
	m := os.Getenv("PARLEY_E2E_ASR")
	if _, err := os.Stat(demoASR); err == nil && m == "" {
		m = demoASR
	}
	if m != "" {
		cfg := config.Default()
		cfg.Runtime.Provider = "cpu"
		r, _, err := factory.New(cfg, nil).Recognizer(context.Background(), m, asr.Config{Options: asr.Options{Language: "auto", ITN: true}})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		tr = roles.Transcriber{R: r}
	}
	rate := e.Capabilities().SampleRate
	a, err := app.New(app.Parts{Ear: &realtimeMic{script: script}, VAD: factory.SileroVAD{D: d}, Transcriber: tr,
		Brain: roles.Brain{B: br}, Voice: &roles.Voice{E: e, Rate: rate}, Speaker: &nullSpeaker{rate: rate}},
		app.Options{Mode: app.HandsFree, EchoResidual: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	ev, unsub := a.Subscribe(1024)
	defer unsub()
	var sum app.Latency
	var hops [5]time.Duration
	b.ResetTimer()
	for range b.N {
		for e := range ev {
			if e.Kind != app.EvTurnDone {
				continue
			}
			l := e.Exchange.Latency
			sum = l
			for i, t := range []time.Time{l.Endpoint, l.Transcript, l.FirstToken, l.FirstSentence, l.FirstAudio} {
				h, _ := l.Hop(t)
				hops[i] += h
			}
			break
		}
	}
	b.StopTimer()
	b.Logf("last turn: %s", sum)
	for i, name := range []string{"endpoint_ms", "transcript_ms", "first_token_ms", "first_sentence_ms", "first_audio_ms"} {
		b.ReportMetric(float64((hops[i]/time.Duration(b.N)).Microseconds())/1000, name)
	}
	over := hops[4] - hops[0] // pipeline + models after the endpoint
	b.ReportMetric(float64((over/time.Duration(b.N)).Microseconds())/1000, "after_endpoint_ms")
}
