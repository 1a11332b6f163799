package espeak

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/control"
)

const benchText = `Good morning! It's 7:45 am on 2024-03-05, and the forecast says 18°C with a 30% chance of rain. [uv_break] ` +
	`Your meeting with Dr. Smith moved to 3:30 pm. [laugh] I also found $12.50 in savings on the 2 subscriptions you asked about. ` +
	`<break time="300ms"/> Shall I read the rest of your messages, or would you rather hear the news first?`

// BenchmarkSynthesize reports, per paragraph: real-time factor, time to first audio, and the
// share of our own work (control parsing, normalisation, sentence planning, silence trimming)
// and, separately, of resampling the result to 16 kHz, against the whole synthesis, all
// measured in the same run.
func BenchmarkSynthesize(b *testing.B) {
	e := newEngine(b)
	ctx := context.Background()
	var synth, first, own, rs time.Duration
	var audioDur time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		s, err := e.Synthesize(ctx, tts.Request{Text: benchText, Seed: 3})
		if err != nil {
			b.Fatal(err)
		}
		var all []float32
		for n := 0; ; n++ {
			c, err := s.Next(ctx)
			if err != nil {
				break
			}
			if n == 0 {
				first += time.Since(t0)
			}
			all = append(all, c.Samples...)
		}
		synth += time.Since(t0)
		audioDur += time.Duration(float64(len(all)) / float64(e.rate) * float64(time.Second))
		// our own work, redone on the same input and output
		t1 := time.Now()
		_ = tts.Prepare(tts.Request{Text: benchText, Speed: 1}, control.DefaultCalibration())
		_ = tts.Trim(all, e.rate, trimDB, trimMargin)
		own += time.Since(t1)
		// resampling to a 16 kHz sink, as tts.Resampled does it (audio's Kaiser sinc, low
		// quality = 80 dB rejection, plenty for speech)
		t2 := time.Now()
		r, err := audio.NewResampler(e.rate, 16000, 1, audio.QualityLow)
		if err != nil {
			b.Fatal(err)
		}
		_ = r.Process(nil, all)
		rs += time.Since(t2)
	}
	b.ReportMetric(synth.Seconds()/audioDur.Seconds(), "RTF")
	b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "ms-first-audio")
	b.ReportMetric(100*own.Seconds()/synth.Seconds(), "own-%")
	b.ReportMetric(100*rs.Seconds()/synth.Seconds(), "resample16k-%")
	b.ReportMetric(float64(own.Microseconds())/1000/float64(b.N), "own-ms")
	b.ReportMetric(float64(rs.Microseconds())/1000/audioDur.Seconds(), "resample-ms/audio-s")
}

// BenchmarkCancel measures how long a consumer waits for synthesis to stop after cancelling
// mid-sentence.
func BenchmarkCancel(b *testing.B) {
	e := newEngine(b)
	long := "this sentence is long and goes on and on and on, and then it goes on some more without stopping at all until it is cancelled by the listener"
	var wait time.Duration
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := e.Synthesize(ctx, tts.Request{Text: long})
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // let synthesis get going
		t0 := time.Now()
		cancel()
		s.Close() // returns once the producer has stopped
		wait += time.Since(t0)
	}
	b.ReportMetric(float64(wait.Microseconds())/float64(b.N)/1000, "ms-to-stop")
}
