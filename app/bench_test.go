package app

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// instantPlayer plays everything the moment it is written (no device time), so a turn's
// timings hold only the pipeline and the fakes' known costs.
type instantPlayer struct {
	mu sync.Mutex
	n  int64
}

func (p *instantPlayer) SampleRate() int { return SampleRate }
func (p *instantPlayer) Write(ctx context.Context, pcm []float32) error {
	p.mu.Lock()
	p.n += int64(len(pcm))
	p.mu.Unlock()
	return ctx.Err()
}
func (p *instantPlayer) Played() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}
func (p *instantPlayer) Stop() {}

// costBrain streams answer word by word after think (time to first token), then perToken per
// further word: a model of known cost.
type costBrain struct {
	answer          string
	think, perToken time.Duration
}

func (b costBrain) Answer(ctx context.Context, _ Transcript, _ []Message, fn func(string) error) error {
	sleep(b.think)
	for i, w := range strings.SplitAfter(b.answer, " ") {
		if i > 0 {
			sleep(b.perToken)
		}
		if err := fn(w); err != nil {
			return err
		}
	}
	return nil
}

// costVoice takes perSentence before streaming one second of audio per sentence in 100 ms
// chunks.
type costVoice struct{ perSentence time.Duration }

func (v costVoice) SampleRate() int { return SampleRate }
func (v costVoice) Synthesize(ctx context.Context, text string, fn func([]float32) error) error {
	sleep(v.perSentence)
	pcm := make([]float32, SampleRate/10)
	for range 10 {
		if err := fn(pcm); err != nil {
			return err
		}
	}
	return nil
}

// sleep waits d precisely (spinning the last part), so known costs are known.
func sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	end := time.Now().Add(d)
	if d > 2*time.Millisecond {
		time.Sleep(d - time.Millisecond)
	}
	for time.Now().Before(end) {
	}
}

const benchAnswer = "It is half past seven in the morning. The weather looks fine. Anything else?"

// BenchmarkTextTurnOverhead runs typed turns through the whole loop with a brain and a voice
// of known cost and an instant speaker, and compares the time to the first audio with the
// same fakes called directly in sequence (the baseline, measured in the same run): the
// difference is what the loop itself adds (target < 30 ms).
func BenchmarkTextTurnOverhead(b *testing.B) {
	for _, c := range []struct {
		name         string
		think, token time.Duration
		voice        time.Duration
	}{{"zero-cost", 0, 0, 0}, {"model-like", 20 * time.Millisecond, 2 * time.Millisecond, 30 * time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			br := costBrain{answer: benchAnswer, think: c.think, perToken: c.token}
			vo := costVoice{perSentence: c.voice}
			// baseline: the same work with no loop around it, measured between the loop's turns
			baseline := func() time.Duration {
				t0 := time.Now()
				ch := &simpleChunker{}
				var first string
				br.Answer(context.Background(), Transcript{}, nil, func(d string) error {
					if ss := ch.Push(d); len(ss) > 0 && first == "" {
						first = ss[0]
						return context.Canceled
					}
					return nil
				})
				vo.Synthesize(context.Background(), first, func([]float32) error { return context.Canceled })
				return time.Since(t0)
			}
			var base time.Duration
			a, err := New(Parts{Brain: br, Voice: vo, Speaker: &instantPlayer{}}, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			ev, unsub := a.Subscribe(256)
			defer unsub()
			var firstAudio, turn time.Duration
			b.ResetTimer()
			for range b.N {
				base += baseline()
				t0 := time.Now()
				if _, err := a.SubmitText("what time is it"); err != nil {
					b.Fatal(err)
				}
				for e := range ev {
					if e.Kind == EvTurnDone {
						firstAudio += e.Exchange.Latency.FirstAudio.Sub(e.Exchange.Latency.SpeechEnd)
						turn += time.Since(t0)
						break
					}
				}
			}
			b.StopTimer()
			fa := firstAudio / time.Duration(b.N)
			base /= time.Duration(b.N)
			b.ReportMetric(float64(fa.Microseconds())/1000, "first_audio_ms")
			b.ReportMetric(float64(base.Microseconds())/1000, "baseline_ms")
			b.ReportMetric(float64((fa-base).Microseconds())/1000, "overhead_ms")
			b.ReportMetric(float64((turn/time.Duration(b.N)).Microseconds())/1000, "turn_ms")
		})
	}
}

// fastMic plays a looped script of speech and silence at many times real time.
type fastMic struct {
	script []float32
	pos    int
}

func (m *fastMic) Read(ctx context.Context, p []float32) (int, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(500 * time.Microsecond): // 20 ms blocks at 40× real time
	}
	n := min(len(p), 320)
	for i := range n {
		p[i] = m.script[m.pos]
		m.pos = (m.pos + 1) % len(m.script)
	}
	return n, nil
}

// BenchmarkVoiceTurnOverhead runs spoken turns (energy VAD, zero-cost transcriber, brain and
// voice, instant speaker) and reports the time from the VAD's endpoint to the first audio out:
// everything the pipeline adds between hearing the end of a question and answering, with
// neither model compute nor the VAD's hang-over in it.
func BenchmarkVoiceTurnOverhead(b *testing.B) {
	script := append(make([]float32, SampleRate/2), speech(time.Second, 0.05, 1)...)
	script = append(script, make([]float32, 2*SampleRate)...)
	a, err := New(Parts{Ear: &fastMic{script: script}, VAD: &EnergyVAD{}, Transcriber: zeroEars{},
		Brain: costBrain{answer: benchAnswer}, Voice: costVoice{}, Speaker: &instantPlayer{}},
		Options{Mode: HandsFree, EchoResidual: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	ev, unsub := a.Subscribe(1024)
	defer unsub()
	var over time.Duration
	b.ResetTimer()
	for range b.N {
		for e := range ev {
			if e.Kind == EvTurnDone {
				d, _ := e.Exchange.Latency.Overhead(0)
				over += d
				break
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((over/time.Duration(b.N)).Microseconds())/1000, "endpoint_to_audio_ms")
}

type zeroEars struct{}

func (zeroEars) Transcribe(context.Context, []float32, TranscribeOptions) (Transcript, error) {
	return Transcript{Text: "what time is it"}, nil
}

// BenchmarkEchoCheck is the cost of one self-echo check (300 ms of capture against 500 ms of
// delays), against the 300 ms of audio it judges.
func BenchmarkEchoCheck(b *testing.B) {
	ref := speech(time.Second, 0.1, 1)
	c := make([]float32, SampleRate*3/10)
	copy(c, ref[3000:])
	lags := SampleRate / 2
	b.ResetTimer()
	for range b.N {
		echoResidual(c, ref[:len(c)+lags], lags)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/300, "ms_per_audio_s")
}

// trigVAD reports speech when told to, and when it did.
type trigVAD struct {
	fire    atomic.Bool
	firedAt atomic.Int64
	pos     int64
}

func (v *trigVAD) Process(p []float32) ([]VADEvent, error) {
	v.pos += int64(len(p))
	if v.fire.CompareAndSwap(true, false) {
		v.firedAt.Store(time.Now().UnixNano())
		return []VADEvent{{Kind: SpeechStart, Sample: v.pos - int64(len(p))}}, nil
	}
	return nil, nil
}
func (v *trigVAD) Reset() {}

// stuckPlayer takes a little audio and never plays it; Stop notes when it came.
type stuckPlayer struct {
	mu      sync.Mutex
	n       int
	stopped chan int64
}

func (p *stuckPlayer) SampleRate() int { return SampleRate }
func (p *stuckPlayer) Write(ctx context.Context, pcm []float32) error {
	p.mu.Lock()
	p.n += len(pcm)
	full := p.n > SampleRate
	p.mu.Unlock()
	if full {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}
func (p *stuckPlayer) Played() int64 { return 0 }
func (p *stuckPlayer) Stop() {
	p.mu.Lock()
	p.n = 0
	p.mu.Unlock()
	select {
	case p.stopped <- time.Now().UnixNano():
	default:
	}
}

// BenchmarkBargeInStop is the time from the VAD reporting the user's speech (while Parley
// speaks) to the loop's call of Player.Stop; the device then falls silent within one buffer.
func BenchmarkBargeInStop(b *testing.B) {
	v := &trigVAD{}
	pl := &stuckPlayer{stopped: make(chan int64, 1)}
	mic := &fastMic{script: speech(time.Second, 0.05, 3)}
	a, err := New(Parts{Ear: mic, VAD: v, Brain: costBrain{answer: benchAnswer}, Voice: costVoice{}, Speaker: pl},
		Options{Mode: HandsFree, EchoResidual: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	ev, unsub := a.Subscribe(1024)
	defer unsub()
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		if _, err := a.SubmitText("tell me"); err != nil {
			b.Fatal(err)
		}
		for e := range ev {
			if e.Kind == EvState && e.State == Speaking {
				break
			}
		}
		select {
		case <-pl.stopped: // a stale stop from the previous turn's start
		default:
		}
		v.fire.Store(true)
		stop := <-pl.stopped
		total += time.Duration(stop - v.firedAt.Load())
		for e := range ev {
			if e.Kind == EvTurnDone {
				break
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((total / time.Duration(b.N)).Microseconds()), "vad_to_stop_us")
}

// BenchmarkCancelEcho is the echo canceller on a 2 s barge-in utterance (Parley alone for a
// second, then the user over it) with the default delay search (−100…600 ms): the time it
// adds before a barge-in question reaches the recogniser, and that time over the audio's.
func BenchmarkCancelEcho(b *testing.B) {
	const n, lags, delay = 2 * SampleRate, 7 * SampleRate / 10, 1994
	user := voiceLike(n, 1)
	ref := voiceLike(n+lags, 2)
	orig := make([]float32, n)
	for i := range orig {
		orig[i] = 0.5 * ref[i+delay]
		if i >= n/2 {
			orig[i] += user[i]
		}
	}
	c := make([]float32, n)
	b.ResetTimer()
	for range b.N {
		copy(c, orig)
		cancelEcho(c, ref, lags)
	}
	per := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(per*1000, "ms/utterance")
	b.ReportMetric(per/(float64(n)/SampleRate), "s_per_audio_s")
}
