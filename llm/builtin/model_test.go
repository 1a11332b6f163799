package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/llm/internal/peer"
)

var update = flag.Bool("update", false, "rewrite testdata/peer_greedy.json from transformers.js")

// tinyDir is the committed Qwen3-shaped random model (make -C train test-models).
var tinyDir = filepath.Join("..", "..", "testdata", "llm", "qwen3-tiny")

var tinyVariants = []string{"fp32", "fp16", "int8", "q4", "q4f16"}

// parityModels are the committed random models (Qwen3, and the Qwen2 and Llama layouts that
// share the signature) with the variants each was exported in.
var parityModels = []struct {
	name     string
	variants []string
}{
	{"qwen3-tiny", tinyVariants},
	{"qwen2-tiny", []string{"fp32", "q4"}},
	{"llama-tiny", []string{"fp32", "q4"}},
}

func openModel(t testing.TB, name, variant string) *Model {
	t.Helper()
	needORT(t)
	m, err := OpenModel(filepath.Join(filepath.Dir(tinyDir), name), Config{Variant: variant, GPU: gpu.Options{IntraOpThreads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func needORT(t testing.TB) {
	t.Helper()
	if err := gpu.Init(); err != nil {
		t.Skipf("ONNX Runtime unavailable: %v", err)
	}
}

func openTiny(t testing.TB, variant string) *Model {
	t.Helper()
	needORT(t)
	m, err := OpenModel(tinyDir, Config{Variant: variant, GPU: gpu.Options{IntraOpThreads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// parityPrompts are the prompts both implementations continue greedily.
func parityPrompts() [][]int {
	rng := rand.New(rand.NewPCG(7, 7))
	long := make([]int, 200)
	for i := range long {
		long[i] = rng.IntN(500)
	}
	return [][]int{{10, 20, 30, 40, 50}, {504, 1, 2, 3}, {42}, long}
}

const parityNew = 24

type peerResult struct {
	Dtype   string    `json:"dtype"`
	Outputs [][]int   `json:"outputs"`
	Seconds []float64 `json:"seconds"`
}

func greedy(t testing.TB, m *Model, prompt []int, n int) []int {
	t.Helper()
	seq, err := m.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	var out []int
	_, err = seq.Generate(context.Background(), prompt, GenOptions{MaxTokens: n, MinTokens: n}, func(id int) error {
		out = append(out, id)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runPeer(t testing.TB, variant string, prompts [][]int, n, threads int) peerResult {
	t.Helper()
	abs, _ := filepath.Abs(filepath.Dir(tinyDir))
	return runPeerOn(t, abs, filepath.Base(tinyDir), variant, prompts, n, threads)
}

// runPeerOn generates greedily with transformers.js from the model models/name.
func runPeerOn(t testing.TB, models, name, variant string, prompts [][]int, n, threads int) peerResult {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("testdata", "peer_generate.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(prompts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := peer.Node(ctx, string(script), in, models, name, variant, fmt.Sprint(n), fmt.Sprint(threads))
	if errors.Is(err, peer.ErrAbsent) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var r peerResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("peer output %q: %v", out, err)
	}
	return r
}

// TestGreedyGolden: every model and variant continues the prompts with exactly the tokens
// transformers.js chose (committed; regenerate with go test ./llm/builtin -run TestGreedyPeer -update).
func TestGreedyGolden(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "peer_greedy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string][][]int
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	for _, pm := range parityModels {
		for _, v := range pm.variants {
			key := pm.name + "/" + v
			t.Run(key, func(t *testing.T) {
				want, ok := golden[key]
				if !ok {
					t.Fatalf("no golden for %s", key)
				}
				m := openModel(t, pm.name, v)
				for i, p := range parityPrompts() {
					if got := greedy(t, m, p, parityNew); !slices.Equal(got, want[i]) {
						t.Errorf("prompt %d: got %v\nwant %v (transformers.js)", i, got, want[i])
					}
				}
			})
		}
	}
}

// TestGreedyPeer runs transformers.js now (when set-up installed it) and compares.
func TestGreedyPeer(t *testing.T) {
	needORT(t)
	golden := map[string][][]int{}
	abs, _ := filepath.Abs(filepath.Dir(tinyDir))
	for _, pm := range parityModels {
		for _, v := range pm.variants {
			r := runPeerOn(t, abs, pm.name, v, parityPrompts(), parityNew, 1)
			golden[pm.name+"/"+v] = r.Outputs
			m := openModel(t, pm.name, v)
			for i, p := range parityPrompts() {
				if got := greedy(t, m, p, parityNew); !slices.Equal(got, r.Outputs[i]) {
					t.Errorf("%s/%s prompt %d: got %v\nwant %v (transformers.js)", pm.name, v, i, got, r.Outputs[i])
				}
			}
		}
	}
	if *update {
		data, _ := json.MarshalIndent(golden, "", " ")
		if err := os.WriteFile(filepath.Join("testdata", "peer_greedy.json"), append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
