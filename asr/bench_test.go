package asr

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/asr/asrtest"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
)

// Benchmarks. Run from the repository root:
//
//	go test -run XXX -bench . -benchtime 3x ./asr/
//
// BenchmarkPipeline reports, per model, the time of each stage for ~10 s of speech (read a
// 16 kHz WAV, resample 44.1 kHz stereo → 16 kHz mono, fbank, LFR+CMVN, ONNX run, decode),
// the real-time factor, and our own work as a percentage of the whole call (the ONNX run is
// the baseline, measured in the same run). BenchmarkFbank reports the frontend's speed as a
// multiple of real time on one core. The SenseVoice-Small-sized random model is exported
// by train/ on first use into $PARLEY_CACHE/bench/sensevoice-small-random (about 1 GB, never
// committed); the benchmark is skipped when it cannot be made.

// The machine these run on is shared, so wall-clock stage times swing with other people's
// load. Each stage's CPU time is measured too (our stages run on one locked OS thread:
// RUSAGE_THREAD; the ONNX run uses ONNX Runtime's threads: RUSAGE_SELF over the call) and the
// "-cpu" metrics are computed from those, which contention does not inflate.

const rusageThread = 1 // RUSAGE_THREAD (Linux)

func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchSpeech is ~10 s of speech: the golden clips repeated with short pauses.
func benchSpeech(b *testing.B) []float32 {
	var x []float32
	for len(x) < 10*SampleRate {
		x = append(x, loadCase(b, "speech_en")...)
		x = append(x, make([]float32, 3200)...)
		x = append(x, loadCase(b, "speech_fast")...)
		x = append(x, make([]float32, 3200)...)
	}
	return x[:10*SampleRate]
}

func BenchmarkPipeline(b *testing.B) {
	b.Run("tiny", func(b *testing.B) { benchPipeline(b, tinyDir) })
	b.Run("demo", func(b *testing.B) {
		if _, err := os.Stat(filepath.Join(demoDir, "model.onnx")); err != nil {
			b.Skipf("demo model not in this checkout: %v", err)
		}
		benchPipeline(b, demoDir)
	})
	b.Run("small-random", func(b *testing.B) { benchPipeline(b, asrtest.SmallModel(b)) })
}

func benchPipeline(b *testing.B, dir string) {
	gputest.RequireORT(b)
	r, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu"}})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	x := benchSpeech(b)
	dur := seconds(len(x))
	var wav bytes.Buffer
	if err := audio.WriteWAV(&wav, &audio.Buffer{Format: audio.Mono16k, Data: x}, audio.S16); err != nil {
		b.Fatal(err)
	}
	hi, err := audio.ResampleBuffer(&audio.Buffer{Format: audio.Mono16k, Data: x}, 44100)
	if err != nil {
		b.Fatal(err)
	}
	stereo := audio.UpMix(nil, hi.Data, 2)
	m := r.m
	w := <-r.slots
	defer func() { r.slots <- w }()
	ctx := context.Background()
	lang, norm, _ := r.queries(Options{})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var tRead, tResample, tFbank, tLFR, tRun, tDecode time.Duration
	var cOurs, cResample, cFbank, cRun time.Duration
	b.ResetTimer()
	for range b.N {
		c0, t0 := cpuTime(rusageThread), time.Now()
		buf, err := audio.ReadWAV(bytes.NewReader(wav.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		c1, t1 := cpuTime(rusageThread), time.Now()
		mono := audio.DownMix(nil, stereo, 2)
		if _, err := audio.Resample(mono, 44100, SampleRate, 1); err != nil {
			b.Fatal(err)
		}
		c2, t2 := cpuTime(rusageThread), time.Now()
		w.fbank = w.fb.Compute(w.fbank[:0], buf.Data)
		c3, t3 := cpuTime(rusageThread), time.Now()
		feats := lfrCMVN(nil, w.fbank, numMelBins, m.lfrM, m.lfrN, &m.cmvn)
		rows := len(feats) / (numMelBins * m.lfrM)
		c4, t4 := cpuTime(rusageThread), time.Now()
		p4 := cpuTime(syscall.RUSAGE_SELF)
		// The decode runs inside forward's callback (on ONNX Runtime's output memory); time
		// it there and subtract it from the run.
		var dec, decCPU time.Duration
		err = m.forward(ctx, [][]float32{feats}, []int{rows}, []int32{lang}, []int32{norm}, func(_ int, logits []float32, frames int) {
			d0, dc0 := time.Now(), cpuTime(rusageThread)
			w.ids, w.frames = greedyCTC(logits, frames, m.vocab, m.blank, -1, w.ids[:0], w.frames[:0])
			res := merge([]Segment{decodeSegment(m.tokens, w.ids, w.frames, 0, dur)}, dur)
			_ = res.Words()
			dec, decCPU = time.Since(d0), cpuTime(rusageThread)-dc0
		})
		if err != nil {
			b.Fatal(err)
		}
		t6, p6 := time.Now(), cpuTime(syscall.RUSAGE_SELF)
		t5 := t6.Add(-dec)
		tRead += t1.Sub(t0)
		tResample += t2.Sub(t1)
		tFbank += t3.Sub(t2)
		tLFR += t4.Sub(t3)
		tRun += t5.Sub(t4)
		tDecode += t6.Sub(t5)
		cOurs += (c1 - c0) + (c4 - c2) + decCPU
		cResample += c2 - c1
		cFbank += c3 - c2
		cRun += p6 - p4 - decCPU
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / n }
	b.ReportMetric(ms(tRead), "read-ms")
	b.ReportMetric(ms(tResample), "resample44k-ms")
	b.ReportMetric(ms(tFbank), "fbank-ms")
	b.ReportMetric(ms(tLFR), "lfr+cmvn-ms")
	b.ReportMetric(ms(tRun), "onnx-ms")
	b.ReportMetric(ms(tDecode), "decode-ms")
	ours := tRead + tFbank + tLFR + tDecode
	total := ours + tRun
	b.ReportMetric(total.Seconds()/n/dur, "RTF")
	b.ReportMetric(100*ours.Seconds()/total.Seconds(), "ours-%")
	b.ReportMetric(100*(ours+tResample).Seconds()/(total+tResample).Seconds(), "ours-with-resample-%")
	b.ReportMetric(dur*n/tFbank.Seconds(), "fbank-x-realtime")
	if cRun > 0 && cFbank > 0 {
		b.ReportMetric(ms(cOurs), "ours-cpu-ms")
		b.ReportMetric(ms(cRun), "onnx-cpu-ms")
		b.ReportMetric(100*cOurs.Seconds()/(cOurs+cRun).Seconds(), "ours-cpu-%")
		b.ReportMetric(100*(cOurs+cResample).Seconds()/(cOurs+cResample+cRun).Seconds(), "ours-with-resample-cpu-%")
		b.ReportMetric(dur*n/cFbank.Seconds(), "fbank-cpu-x-realtime")
	}
}

// BenchmarkFbank: the frontend alone (fbank, then fbank+LFR+CMVN) on one goroutine locked to
// one OS thread, as a multiple of real time by wall clock and by that thread's CPU time.
func BenchmarkFbank(b *testing.B) {
	x := benchSpeech(b)
	fb := newFbank(newFbankTables(), sampleScale)
	c := &cmvn{negMean: make([]float32, 560), invStd: make([]float32, 560)}
	for i := range c.invStd {
		c.invStd[i] = 1
	}
	dur := seconds(len(x))
	run := func(b *testing.B, lfr bool) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var out, feats []float32
		b.ReportAllocs()
		b.ResetTimer()
		c0 := cpuTime(rusageThread)
		for range b.N {
			out = fb.Compute(out[:0], x)
			if lfr {
				feats = lfrCMVN(feats[:0], out, numMelBins, 7, 6, c)
			}
		}
		cpu := cpuTime(rusageThread) - c0
		b.ReportMetric(dur*float64(b.N)/b.Elapsed().Seconds(), "x-realtime")
		if cpu > 0 {
			b.ReportMetric(dur*float64(b.N)/cpu.Seconds(), "cpu-x-realtime")
		}
	}
	b.Run("fbank", func(b *testing.B) { run(b, false) })
	b.Run("fbank+lfr+cmvn", func(b *testing.B) { run(b, true) })
}

// BenchmarkDecode: CTC decoding of the demo model's logits for 10 s of speech, greedy (the
// baseline, measured in the same run), the search before session 26 at width 32, and the lm.bin
// beam search at widths 8, 32 and 128 (the shipped lm.json's), as
// multiples of real time and as a ratio to greedy.
func BenchmarkDecode(b *testing.B) {
	if _, err := os.Stat(filepath.Join(demoDir, LMFile)); err != nil {
		b.Skipf("no %s beside the demo model: %v", LMFile, err)
	}
	gputest.RequireORT(b)
	r, err := New(demoDir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	m := r.m
	x := benchSpeech(b)
	dur := seconds(len(x))
	w := <-r.slots
	w.fbank = w.fb.Compute(w.fbank[:0], x)
	feats := lfrCMVN(nil, w.fbank, numMelBins, m.lfrM, m.lfrN, &m.cmvn)
	r.slots <- w
	lang, norm, _ := r.queries(Options{Language: "en"})
	var logits []float32
	var frames int
	err = m.forward(context.Background(), [][]float32{feats}, []int{len(feats) / (numMelBins * m.lfrM)},
		[]int32{lang}, []int32{norm}, func(_ int, l []float32, f int) { logits, frames = append([]float32(nil), l...), f })
	if err != nil {
		b.Fatal(err)
	}
	var greedy float64
	run := func(name string, decode func()) {
		b.Run(name, func(b *testing.B) {
			t0 := time.Now()
			for range b.N {
				decode()
			}
			per := time.Since(t0).Seconds() / float64(b.N)
			b.ReportMetric(dur/per, "x-realtime")
			if name == "greedy" {
				greedy = per
			} else if greedy > 0 {
				b.ReportMetric(per/greedy, "x-greedy-time")
			}
		})
	}
	var ids, fr []int32
	run("greedy", func() { ids, fr = greedyCTC(logits, frames, m.vocab, m.blank, -1, ids[:0], fr[:0]) })
	// the search as it was before session 26 (beamCTCRef, a test), at its width then
	plain := BeamOptions{Width: 32, Top: 8}.or(defaultBeam)
	run("plain-w32-top8", func() {
		ids, fr = beamCTCRef(logits, frames, m.vocab, numQueries, m.blank, m.isText, m.lm, nil, nil, plain, ids[:0], fr[:0])
	})
	type beamCase struct {
		width, top int
		oov        float64 // the model's own charge for unlisted words
	}
	cases := []beamCase{{8, 8, 0}, {32, 8, 0}, {128, 16, 0}}
	if m.lex != nil && m.beam.OOV > 0 {
		cases = append(cases, beamCase{128, 16, m.beam.OOV})
	}
	for _, c := range cases {
		o := BeamOptions{Width: c.width, Top: c.top, OOV: c.oov}.or(defaultBeam)
		name := fmt.Sprintf("beam-w%d-top%d", c.width, c.top)
		if c.oov > 0 {
			name += "-words"
		}
		run(name, func() {
			ids, fr = beamCTC(logits, frames, m.vocab, numQueries, m.blank, m.isText, m.lm, m.lex, o, ids[:0], fr[:0])
		})
	}
}
