package builtin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu"
)

// bigModel is the Qwen3-0.6B-shaped random model (fp32, ~3 GB): made on first use with the
// project's exporter into the cache (never committed), or skipped with the reason.
func bigModel(b *testing.B) string {
	b.Helper()
	if err := gpu.Init(); err != nil {
		b.Skipf("ONNX Runtime unavailable: %v", err)
	}
	dir := os.Getenv("PARLEY_BENCH_LLM")
	if dir == "" {
		dir = filepath.Join(assets.CacheDir(), "bench", "qwen3-0.6b-random")
	}
	if _, err := os.Stat(filepath.Join(dir, "onnx", "model.onnx_data")); err == nil {
		return dir
	}
	tok := filepath.Join(assets.ModelsDir(), "qwen3-tokenizer")
	if _, err := os.Stat(filepath.Join(tok, "tokenizer.json")); err != nil {
		b.Skipf("no Qwen3 tokenizer for the 0.6B-shaped model (%v); run make setup", err)
	}
	b.Logf("exporting the Qwen3-0.6B-shaped random model to %s (a few minutes)…", dir)
	cmd := exec.Command("/usr/bin/python3", "-m", "train.llm.export", "--size", "0.6b", "--seed", "20", "--external",
		"--variants", "fp32", "--tokenizer-from", tok, "--out", dir)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		b.Skipf("cannot export the 0.6B-shaped model (needs /usr/bin/python3 with torch and onnx): %v\n%s", err, out)
	}
	return dir
}

func benchPrompt(n int) []int {
	rng := rand.New(rand.NewPCG(200, 1))
	p := make([]int, n)
	for i := range p {
		p[i] = rng.IntN(150000)
	}
	return p
}

// BenchmarkLoopOverhead: the generation loop's own time per token (tensor set-up, sampling,
// bookkeeping) against the time inside ONNX Runtime's Run, on the 0.6B-shaped model, with one
// thread and with all physical cores. Reported: overhead-% = (loop − ORT) / ORT.
func BenchmarkLoopOverhead(b *testing.B) {
	dir := bigModel(b)
	for _, threads := range []int{1, gpu.PhysicalCores()} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			m, err := OpenModel(dir, Config{Variant: "fp32", GPU: gpu.Options{Provider: "cpu", IntraOpThreads: threads}})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			prompt := benchPrompt(16)
			const n = 16
			var loop, ort time.Duration
			for b.Loop() {
				seq, err := m.NewSequence()
				if err != nil {
					b.Fatal(err)
				}
				// Sampling as chat uses it (Qwen3's defaults), not just argmax.
				st, err := seq.Generate(context.Background(), prompt, GenOptions{MaxTokens: n, MinTokens: n,
					Sampling: Sampling{Temperature: 0.6, TopK: 20, TopP: 0.95, Seed: 1}}, func(int) error { return nil })
				seq.Close()
				if err != nil {
					b.Fatal(err)
				}
				loop += st.Decode
				ort += st.DecodeModel
			}
			b.ReportMetric(float64(loop-ort)/float64(ort)*100, "overhead-%")
			b.ReportMetric(float64(ort.Microseconds())/float64(b.N*(n-1)), "ort-µs/token")
			b.ReportMetric(float64((loop-ort).Microseconds())/float64(b.N*(n-1)), "loop-µs/token")
		})
	}
}

// BenchmarkVsTransformersJS runs transformers.js (npm @huggingface/transformers on
// onnxruntime-node 1.30.0, the same library build) and Parley on the same 0.6B-shaped model
// and 200-token prompt, greedy, one thread each: the tokens must be identical; reported are
// both tokens/s (generate call, prefill included) and Parley's ratio to the peer.
func BenchmarkVsTransformersJS(b *testing.B) {
	dir := bigModel(b)
	const n = 16
	prompt := benchPrompt(200)
	peerRes := runPeerOn(b, filepath.Dir(dir), filepath.Base(dir), "fp32", [][]int{prompt, prompt}, n, 1)
	m, err := OpenModel(dir, Config{Variant: "fp32", GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	var ours time.Duration
	for b.Loop() {
		seq, _ := m.NewSequence()
		var got []int
		t0 := time.Now()
		_, err := seq.Generate(context.Background(), prompt, GenOptions{MaxTokens: n, MinTokens: n}, func(id int) error {
			got = append(got, id)
			return nil
		})
		ours += time.Since(t0)
		seq.Close()
		if err != nil {
			b.Fatal(err)
		}
		if !slices.Equal(got, peerRes.Outputs[0]) {
			b.Fatalf("greedy tokens differ:\n parley %v\n peer   %v", got, peerRes.Outputs[0])
		}
	}
	peerSec := peerRes.Seconds[1] // the second call: after the peer's warm-up
	oursTPS := float64(n*b.N) / ours.Seconds()
	peerTPS := float64(n) / peerSec
	b.ReportMetric(oursTPS, "parley-tok/s")
	b.ReportMetric(peerTPS, "transformersjs-tok/s")
	b.ReportMetric(oursTPS/peerTPS, "ratio")
}

// BenchmarkFirstToken: time to the first token for a 200-token prompt with an empty cache,
// and for the same conversation one turn later (200 cached tokens + 20 new).
func BenchmarkFirstToken(b *testing.B) {
	dir := bigModel(b)
	m, err := OpenModel(dir, Config{Variant: "fp32", GPU: gpu.Options{Provider: "cpu"}})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	prompt := benchPrompt(220)
	var cold, warm time.Duration
	for b.Loop() {
		seq, _ := m.NewSequence()
		st, err := seq.Generate(context.Background(), prompt[:200], GenOptions{MaxTokens: 1}, func(int) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		cold += st.FirstToken
		st, err = seq.Generate(context.Background(), prompt, GenOptions{MaxTokens: 1}, func(int) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		if st.Reused != 200 {
			b.Fatalf("reused %d, want 200", st.Reused)
		}
		warm += st.FirstToken
		seq.Close()
	}
	b.ReportMetric(float64(cold.Milliseconds())/float64(b.N), "cold-ms")
	b.ReportMetric(float64(warm.Milliseconds())/float64(b.N), "cached-ms")
	b.ReportMetric(float64(cold)/float64(warm), "speedup")
}
