package chattts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/espeak"
)

// officialDir is the official-size random export the benchmarks run on (never committed):
//
//	make -C train chattts-official        # → /tmp/parley-chattts-official
func officialDir(b *testing.B) string {
	d := os.Getenv("PARLEY_CHATTTS_OFFICIAL")
	if d == "" {
		d = "/tmp/parley-chattts-official"
	}
	if _, err := os.Stat(d + "/config.json"); err != nil {
		b.Skipf("no official-size ChatTTS export in %s (make -C train chattts-official, or set PARLEY_CHATTTS_OFFICIAL)", d)
	}
	return d
}

const benchFrames = 48

// benchDecode runs the code pass for benchFrames frames (EOS masked, so random weights run the
// full length) and reports the loop's own time per step against the time inside ONNX Runtime.
func benchDecode(b *testing.B, dir string, threads int) {
	gputest.RequireORT(b)
	e, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: threads}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	prompt := e.codePrompt(e.tok.Encode("what time is it? it is a quarter past ten in the morning."), 5, true, nil)
	spk := e.stat.Sample(1)
	var tm decodeTiming
	b.ResetTimer()
	for b.Loop() {
		p := e.codeParams(tts.Request{})
		p.MinNewTokens = benchFrames
		s := NewSampler(p, NewRNG(1))
		if _, err := e.decode(context.Background(), prompt, decodeOptions{mode: modeCode, sampler: s, maxNew: benchFrames,
			spk: spk, timing: &tm}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	step := tm.Total / time.Duration(max(1, b.N*benchFrames))
	over := float64(tm.Total-tm.ORT) / float64(tm.Total)
	b.ReportMetric(float64(step.Microseconds())/1000, "ms/frame")
	b.ReportMetric(1e6/float64(max(1, step.Microseconds())), "frames/s")
	b.ReportMetric(100*over, "%outside-ORT")
	steps := float64(b.N * (benchFrames + 1))
	b.ReportMetric(float64(tm.Total-tm.ORT)/steps/1000, "µs-outside/step")
	b.ReportMetric(float64(tm.Sample)/steps/1000, "µs-sample/step")
	b.ReportMetric(float64(tm.Tensors)/steps/1000, "µs-tensors/step")
}

// BenchmarkDecodeOverhead: the per-frame loop overhead outside ONNX Runtime as a share of the
// step on the official-size random export (target < 3 %), with 1 thread and all threads.
func BenchmarkDecodeOverhead(b *testing.B) {
	dir := officialDir(b)
	for _, th := range []int{1, gpu.PhysicalCores()} {
		b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) { benchDecode(b, dir, th) })
	}
}

// BenchmarkDecodeTiny is the same loop on the tiny export (what CI can run).
func BenchmarkDecodeTiny(b *testing.B) { benchDecode(b, tinyDir, 1) }

// BenchmarkSampler: one code frame's sampling (4 streams × 626 logits, ChatTTS defaults and a
// 16-frame history) and one refine step (21 178 text logits).
func BenchmarkSampler(b *testing.B) {
	for _, c := range []struct {
		name           string
		streams, vocab int
	}{{"code-4x626", 4, 626}, {"text-21178", 1, 21178}} {
		b.Run(c.name, func(b *testing.B) {
			r := NewRNG(9)
			src := make([]float32, c.streams*c.vocab)
			for i := range src {
				src[i] = float32(r.Normal() * 3)
			}
			hist := make([]int32, 40)
			for i := range hist {
				hist[i] = int32(r.Uint64() % uint64(c.vocab))
			}
			s := NewSampler(SampleParams{Temperature: []float32{0.3}, TopP: 0.7, TopK: 20, RepetitionPenalty: 1.05, EOS: c.vocab - 1}, NewRNG(1))
			buf := make([]float32, len(src))
			b.ReportAllocs()
			for b.Loop() {
				copy(buf, src)
				for q := 0; q < c.streams; q++ {
					if _, err := s.Sample(q, buf[q*c.vocab:(q+1)*c.vocab], hist, 5); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkVsPyTorch: Go's code pass per frame against the PyTorch module the export came from
// (train/tts/chattts_decode_bench.py, same prompt, frames, sampling and threads, run in the same
// benchmark), on the official-size export (and the tiny one). Reports go/torch (< 1: Go faster).
func BenchmarkVsPyTorch(b *testing.B) {
	dirs := map[string]string{"tiny": tinyDir}
	if d := os.Getenv("PARLEY_CHATTTS_OFFICIAL"); d != "" {
		dirs["official"] = d
	} else if _, err := os.Stat("/tmp/parley-chattts-official/config.json"); err == nil {
		dirs["official"] = "/tmp/parley-chattts-official"
	}
	for _, size := range []string{"tiny", "official"} {
		dir, ok := dirs[size]
		if !ok {
			continue
		}
		b.Run(size, func(b *testing.B) {
			gputest.RequireORT(b)
			e, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			prompt := benchPrompt(e)
			pyMS := torchMSPerFrame(b, dir, prompt, 1)
			b.ResetTimer()
			goMS := bestMSPerFrame(b, e, prompt)
			b.ReportMetric(goMS, "go-ms/frame")
			b.ReportMetric(pyMS, "torch-ms/frame")
			b.ReportMetric(goMS/pyMS, "go/torch")
		})
	}
}

func benchPrompt(e *Engine) []int {
	return e.codePrompt(e.tok.Encode("what time is it? it is a quarter past ten in the morning."), 5, true, nil)
}

// torchMSPerFrame is PyTorch's fp32 time per code frame for the same prompt and frame count
// (train/tts/chattts_decode_bench.py), the baseline of the Go loop's figures; it skips the
// benchmark where /usr/bin/python3 has no torch.
func torchMSPerFrame(b *testing.B, dir string, prompt []int, threads int) float64 {
	b.Helper()
	ids := make([]string, len(prompt))
	for i, id := range prompt {
		ids[i] = fmt.Sprint(id)
	}
	dir, err := filepath.Abs(dir) // the script runs from the repository root
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "train/tts/chattts_decode_bench.py", "--model", dir,
		"--prompt", strings.Join(ids, ","), "--frames", fmt.Sprint(benchFrames), "--threads", fmt.Sprint(threads))
	cmd.Dir = "../.."
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Skipf("PyTorch baseline unavailable (/usr/bin/python3 with torch): %v: %s", err, tail(stderr.String(), 1200))
	}
	var py struct {
		MS float64 `json:"ms_per_frame"`
	}
	if err := json.Unmarshal(out, &py); err != nil {
		b.Fatalf("baseline output %q: %v", out, err)
	}
	return py.MS
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// bestMSPerFrame is the fastest of the benchmark loop's code passes of benchFrames frames.
func bestMSPerFrame(b *testing.B, e *Engine, prompt []int) float64 {
	spk := e.stat.Sample(1)
	best := time.Duration(math.MaxInt64)
	for b.Loop() {
		p := e.codeParams(tts.Request{})
		p.MinNewTokens = benchFrames
		t0 := time.Now()
		if _, err := e.decode(context.Background(), prompt, decodeOptions{mode: modeCode,
			sampler: NewSampler(p, NewRNG(1)), maxNew: benchFrames, spk: spk}); err != nil {
			b.Fatal(err)
		}
		best = min(best, time.Since(t0))
	}
	return float64(best.Microseconds()) / 1000 / benchFrames
}

// procStatusMB is a field of /proc/self/status (VmRSS, VmHWM) in MB.
func procStatusMB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			var kb float64
			fmt.Sscan(f[1], &kb)
			return kb / 1024
		}
	}
	return 0
}

// TestResidentHelper is run by residentMB in a fresh copy of the test binary: it loads an
// export at a precision, decodes once and prints its resident memory. Skipped otherwise.
func TestResidentHelper(t *testing.T) {
	dir, prec := os.Getenv("PARLEY_RSS_DIR"), os.Getenv("PARLEY_RSS_PRECISION")
	if dir == "" {
		t.Skip("run by BenchmarkPrecision")
	}
	e, err := New(dir, Config{Precision: prec, GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := e.codeParams(tts.Request{})
	if _, err := e.decode(context.Background(), benchPrompt(e), decodeOptions{mode: modeCode,
		sampler: NewSampler(p, NewRNG(1)), maxNew: 8, spk: e.stat.Sample(1)}); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("RSS_MB %.1f %.1f\n", procStatusMB("VmRSS"), procStatusMB("VmHWM"))
}

// residentMB is the resident memory (now, and at its peak) of a fresh process that loaded the
// export at prec and decoded a few frames: memory one engine in a process frees stays counted
// in that process, so the figure comes from a process of its own.
func residentMB(b *testing.B, dir, prec string) (rss, peak float64) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestResidentHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PARLEY_RSS_DIR="+dir, "PARLEY_RSS_PRECISION="+prec)
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("resident-memory helper: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if _, err := fmt.Sscanf(line, "RSS_MB %f %f", &rss, &peak); err == nil {
			return rss, peak
		}
	}
	b.Fatalf("resident-memory helper printed %q", out)
	return 0, 0
}

// BenchmarkPrecision (issue 35): the official-size GPT's time per code frame at fp32 and int8,
// on 1 thread and on all cores, as a ratio to PyTorch fp32 on 1 thread in the same run; the
// first audio of a sentence (Synthesize to its first chunk); and the resident memory of a
// process that loaded it. Goals: int8 ≤ 15 ms/frame on one thread, first audio ≤ 300 ms on 2 cores.
func BenchmarkPrecision(b *testing.B) {
	dir := officialDir(b)
	if _, err := os.Stat(filepath.Join(dir, "gpt.int8.onnx")); err != nil {
		b.Skipf("%s has no int8 GPT: python3 -m train.chattts.quantize %s (make bench does)", dir, dir)
	}
	gputest.RequireORT(b)
	var pyMS float64
	for _, th := range []int{1, gpu.PhysicalCores()} {
		for _, prec := range []string{PrecisionFP32, PrecisionInt8} {
			b.Run(fmt.Sprintf("%s/threads=%d", prec, th), func(b *testing.B) {
				e, err := New(dir, Config{Precision: prec, GPU: gpu.Options{Provider: "cpu", IntraOpThreads: th}})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				if got := e.Capabilities().Precision; got != prec {
					b.Fatalf("asked for %s, runs %s", prec, got)
				}
				prompt := benchPrompt(e)
				if pyMS == 0 {
					pyMS = torchMSPerFrame(b, dir, prompt, 1)
				}
				ms := bestMSPerFrame(b, e, prompt)
				b.StopTimer()
				first := firstAudio(b, e)
				b.ReportMetric(ms, "ms/frame")
				b.ReportMetric(pyMS, "torch-fp32-ms/frame")
				b.ReportMetric(ms/pyMS, "x-torch-fp32")
				b.ReportMetric(float64(first.Milliseconds()), "ms-first-audio")
				if th == 1 {
					rss, peak := residentMB(b, dir, prec)
					b.ReportMetric(rss, "MB-resident")
					b.ReportMetric(peak, "MB-peak")
				}
			})
		}
	}
}

// firstAudio is the best of three times from Synthesize to a sentence's first audio chunk.
func firstAudio(b *testing.B, e *Engine) time.Duration {
	best := time.Duration(math.MaxInt64)
	for range 3 {
		t0 := time.Now()
		st, err := e.Synthesize(context.Background(), tts.Request{Text: "It is a quarter past ten, and the kitchen lights are on.", Seed: 3, HasSeed: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Next(context.Background()); err != nil {
			b.Fatal(err)
		}
		best = min(best, time.Since(t0))
		st.Close()
	}
	return best
}

// streamVsOneShot decodes frames hidden states (frames × hidden) once whole and once the way
// streaming does, and returns the largest sample difference relative to the one-shot RMS and
// the decode time of each.
func streamVsOneShot(b testing.TB, e *Engine, hid []float32, frames int) (rel float64, one, streamed time.Duration) {
	ist, _ := NewISTFT(e.mc.Audio.NFFT, e.mc.Audio.Hop)
	ctx := context.Background()
	t0 := time.Now()
	a, err := e.vocode(ctx, hid, frames, ist, nil)
	if err != nil {
		b.Fatal(err)
	}
	one = time.Since(t0)
	st := e.newStreamer(ist)
	var s []float32
	t0 = time.Now()
	for n := 1; n <= frames; n++ {
		pcm, ok, err := st.at(ctx, hid, n)
		if err != nil {
			b.Fatal(err)
		}
		if ok {
			s = append(s, pcm...)
		}
	}
	pcm, err := st.end(ctx, hid, frames)
	if err != nil {
		b.Fatal(err)
	}
	streamed = time.Since(t0)
	s = append(s, pcm...)
	if len(s) != len(a) {
		b.Fatalf("streamed %d samples, one-shot %d", len(s), len(a))
	}
	maxD, rms := joinError(a, s)
	return maxD / rms, one, streamed
}

// BenchmarkStreamingJoins: how far streamed audio is from one-shot decoding of the same frames
// on the official-size decoder and Vocos (random weights with layer scales of trained
// magnitude, train/tts/chattts_joins_model.py; random hidden states), for the default
// context/lookahead and neighbours, and what the re-decoding costs against one-shot decoding.
func BenchmarkStreamingJoins(b *testing.B) {
	dir := os.Getenv("PARLEY_CHATTTS_JOINS")
	if dir == "" {
		dir = "/tmp/parley-chattts-joins"
	}
	if _, err := os.Stat(dir + "/decoder.onnx"); err != nil {
		b.Skipf("no joins model in %s (train/tts/chattts_joins_model.py makes it from the official-size export; PARLEY_CHATTTS_JOINS overrides)", dir)
	}
	gputest.RequireORT(b)
	const frames = 144 // 3 s
	for _, c := range []struct{ ctx, look int }{{-1, -1}, {8, 4}, {24, 8}, {24, 12}, {24, 24}} {
		b.Run(fmt.Sprintf("context=%d/lookahead=%d", max(c.ctx, 0), max(c.look, 1)), func(b *testing.B) {
			e, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu"}, ContextFrames: c.ctx, LookaheadFrames: c.look})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			r := NewRNG(3)
			hid := make([]float32, frames*e.mc.GPT.Hidden)
			for i := range hid {
				hid[i] = float32(r.Normal())
			}
			var rel float64
			var one, st time.Duration
			for b.Loop() {
				rel, one, st = streamVsOneShot(b, e, hid, frames)
			}
			b.ReportMetric(rel, "maxdiff/rms")
			b.ReportMetric(st.Seconds()/one.Seconds(), "decode-cost-x")
		})
	}
}

// demoDir is Parley's demo voice in the source tree (train/chattts; assets/demo/chattts);
// PARLEY_CHATTTS_DEMO points the benchmark at another export.
func demoDir() string {
	if d := os.Getenv("PARLEY_CHATTTS_DEMO"); d != "" {
		return d
	}
	return "../../assets/demo/chattts"
}

// BenchmarkDemoVoice: Parley's demo voice on one CPU core, a 10-word sentence, streamed: time
// to the first chunk and the real-time factor (targets: ≤ 300 ms, ≤ 0.5), with espeak-ng's on
// the same sentence in the same run as the baseline.
func BenchmarkDemoVoice(b *testing.B) {
	dir := demoDir()
	if _, err := os.Stat(dir + "/config.json"); err != nil {
		b.Skipf("no demo voice in %s yet", dir)
	}
	gputest.RequireORT(b)
	e, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	req := tts.Request{Text: "It is a quarter past ten and the kitchen light is on.", Seed: 1}
	var first, total time.Duration
	var samples int
	for b.Loop() {
		t0 := time.Now()
		st, err := e.Synthesize(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		samples = 0
		for {
			c, err := st.Next(context.Background())
			if err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				b.Fatal(err)
			}
			if samples == 0 {
				first = time.Since(t0)
			}
			samples += len(c.Samples)
		}
		total = time.Since(t0)
	}
	audioSec := float64(samples) / float64(e.SampleRate())
	b.ReportMetric(float64(first.Milliseconds()), "ms-first-audio")
	b.ReportMetric(total.Seconds()/audioSec, "RTF")
	es, err := espeak.New(espeak.Config{})
	if err != nil {
		return
	}
	t0 := time.Now()
	if st, err := es.Synthesize(context.Background(), req); err == nil {
		if buf, err := tts.ReadAll(context.Background(), st); err == nil {
			b.ReportMetric(time.Since(t0).Seconds()/buf.Duration().Seconds(), "espeak-RTF")
		}
	}
}

// BenchmarkDemoClone: the demo voice speaking as a zero-shot clone (a 3 s sample, encoded by
// its DVAE encoder) on one CPU core: the real-time factor with the model's sample weight (two
// sequences per frame, decodeOptions.guide), with the sample alone (weight 1) and without a
// sample, each in the same run, and the guided clone's over the plain voice's.
func BenchmarkDemoClone(b *testing.B) {
	dir := demoDir()
	if _, err := os.Stat(dir + "/config.json"); err != nil {
		b.Skipf("no demo voice in %s yet", dir)
	}
	gputest.RequireORT(b)
	opts := gpu.Options{Provider: "cpu", IntraOpThreads: 1}
	guided, err := New(dir, Config{GPU: opts})
	if err != nil {
		b.Fatal(err)
	}
	defer guided.Close()
	alone, err := New(dir, Config{GPU: opts, SampleWeight: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer alone.Close()
	ctx := context.Background()
	text, codes := demoPrompt(b, guided, dir, opts)
	smp := &SpeakerSample{Text: text, Codes: codes}
	req := tts.Request{Text: "It is a quarter past ten and the kitchen light is on.", Seed: 1}
	rtf := func(e *Engine, s *SpeakerSample) float64 {
		t0 := time.Now()
		st, err := e.SynthesizeWithSample(ctx, req, s)
		if err != nil {
			b.Fatal(err)
		}
		buf, err := tts.ReadAll(ctx, st)
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(t0).Seconds() / buf.Duration().Seconds()
	}
	var g, a, p float64
	n := 0
	for b.Loop() {
		g += rtf(guided, smp)
		a += rtf(alone, smp)
		p += rtf(guided, nil)
		n++
	}
	b.ReportMetric(g/float64(n), "RTF-clone")
	b.ReportMetric(a/float64(n), "RTF-sample-alone")
	b.ReportMetric(p/float64(n), "RTF-no-sample")
	b.ReportMetric(g/p, "clone/plain")
}

// BenchmarkDemoNativeSpeed: whether the demo voice's own [speed_N] tokens set the tempo, on 8
// seeds × 3 assistant sentences at fp32 and int8: the share of cases where speed 0.6 / 1 / 1.4
// ([speed_1]/[speed_5]/[speed_9]) give durations that fall in order and ≥ 1.4× apart at the
// ends, and the mean ratio of the ends. The export's "speed" says whether the engine uses the
// tokens ("native") or time-scales the audio; this is the figure that decides it.
func BenchmarkDemoNativeSpeed(b *testing.B) {
	src := demoDir()
	if _, err := os.Stat(filepath.Join(src, "config.json")); err != nil {
		b.Skipf("no demo voice in %s", src)
	}
	gputest.RequireORT(b)
	dir := b.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		b.Fatal(err)
	}
	for _, ent := range ents {
		data, err := os.ReadFile(filepath.Join(src, ent.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if ent.Name() == ConfigFile {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
			m["speed"] = "native"
			data, _ = json.Marshal(m)
		}
		if err := os.WriteFile(filepath.Join(dir, ent.Name()), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	texts := []string{"Good evening, how can I help you tonight?", "The train to the city leaves at eight fifteen.",
		"I have added milk and bread to your shopping list."}
	for _, prec := range []string{PrecisionFP32, PrecisionInt8} {
		b.Run(prec, func(b *testing.B) {
			e, err := New(dir, Config{Precision: prec, GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
			if err != nil {
				b.Skip(err) // int8 on a CPU that does not run it
			}
			defer e.Close()
			var ok, n int
			var ratios float64
			for b.Loop() {
				ok, n, ratios = 0, 0, 0
				for seed := int64(1); seed <= 8; seed++ {
					for _, text := range texts {
						d := map[float64]float64{}
						for _, sp := range []float64{0.6, 1, 1.4} {
							s, err := e.Synthesize(context.Background(), tts.Request{Text: text, Seed: seed, HasSeed: true, Speed: sp})
							if err != nil {
								b.Fatal(err)
							}
							pcm, err := tts.ReadAll(context.Background(), s)
							if err != nil {
								b.Fatal(err)
							}
							d[sp] = pcm.Duration().Seconds()
						}
						n++
						ratios += d[0.6] / d[1.4]
						if d[0.6] > d[1] && d[1] > d[1.4] && d[0.6]/d[1.4] >= 1.4 {
							ok++
						}
					}
				}
			}
			b.ReportMetric(100*float64(ok)/float64(n), "%speed-acts")
			b.ReportMetric(ratios/float64(n), "mean-slow/fast")
		})
	}
}

// demoPrompt is a clone prompt made from the demo voice itself: a sentence said by seed 3 and
// encoded by the bundle's DVAE encoder; it returns the sentence and the codes.
func demoPrompt(tb testing.TB, e *Engine, dir string, opts gpu.Options) (string, []int32) {
	tb.Helper()
	ctx := context.Background()
	text := "Remind me to take out the trash at five fifty."
	st, err := e.Synthesize(ctx, tts.Request{Text: text, Seed: 3, HasSeed: true})
	if err != nil {
		tb.Fatal(err)
	}
	clip, err := tts.ReadAll(ctx, st)
	if err != nil {
		tb.Fatal(err)
	}
	enc, err := NewSampleEncoder(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer enc.Close()
	codes, err := enc.Encode(ctx, clip.Data, clip.Format.SampleRate)
	if err != nil {
		tb.Fatal(err)
	}
	return text, codes
}
