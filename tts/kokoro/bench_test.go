package kokoro

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/control"
)

const benchText = `Good morning! It's 7:45 am on 2024-03-05, and the forecast says 18°C with a 30% chance of rain. [uv_break] ` +
	`Your meeting with Dr. Smith moved to 3:30 pm. I also found $12.50 in savings on the 2 subscriptions you asked about. ` +
	`Shall I read the rest of your messages, or would you rather hear the news first?`

// benchDir is the real Kokoro model when installed (PARLEY_KOKORO_DIR or the models dir),
// else the tiny test model — whose timings say nothing about Kokoro's speed, only about our
// own overhead per call.
func benchDir(b *testing.B) string {
	for _, d := range []string{os.Getenv("PARLEY_KOKORO_DIR"), filepath.Join(assets.ModelsDir(), "kokoro-82m"), filepath.Join(assets.ModelsDir(), "kokoro-82m-fp32")} {
		if d == "" {
			continue
		}
		if _, err := LoadVocab(d); err == nil {
			b.Logf("benchmarking the model in %s", d)
			return d
		}
	}
	b.Log("real Kokoro not installed: benchmarking the tiny random-weight test model (RTF is meaningless)")
	return "testdata"
}

// BenchmarkSynthesize reports real-time factor, time to first audio, and our own work
// (control parsing, normalisation, espeak-ng phonemes, tokenising, resampling to 16 kHz) as a
// share of the whole synthesis, measured in the same run.
func BenchmarkSynthesize(b *testing.B) {
	e := testEngine(b, benchDir(b))
	ctx := context.Background()
	var synth, first, own, rs time.Duration
	var audioDur time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		s, err := e.Synthesize(ctx, tts.Request{Text: benchText})
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
		audioDur += time.Duration(float64(len(all)) / SampleRate * float64(time.Second))
		t1 := time.Now()
		plan := tts.Prepare(tts.Request{Text: benchText, Speed: 1}, control.DefaultCalibration())
		for _, st := range plan.Sentences {
			for _, seg := range st.Segments {
				if seg.Kind == control.Text {
					ph, err := Phonemize(seg.Text, "en-us")
					if err != nil {
						b.Fatal(err)
					}
					for _, c := range Chunks(ph, MaxTokens) {
						e.vocab.Tokenize(c)
					}
				}
			}
		}
		own += time.Since(t1)
		t2 := time.Now()
		r, _ := audio.NewResampler(SampleRate, 16000, 1, audio.QualityLow)
		r.Process(nil, all)
		rs += time.Since(t2)
	}
	b.ReportMetric(synth.Seconds()/audioDur.Seconds(), "RTF")
	b.ReportMetric(float64(first.Milliseconds())/float64(b.N), "ms-first-audio")
	b.ReportMetric(100*own.Seconds()/synth.Seconds(), "own-%")
	b.ReportMetric(100*rs.Seconds()/synth.Seconds(), "resample16k-%")
	b.ReportMetric(float64(own.Microseconds())/1000/float64(b.N), "own-ms")
	b.ReportMetric(float64(rs.Microseconds())/1000/audioDur.Seconds(), "resample-ms/audio-s")
}
