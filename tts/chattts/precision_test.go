package chattts

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// tinyInt8 is the tiny export with its int8 GPT (testdata/chattts/tiny-int8: written by
// `python3 -m train.chattts.quantize testdata/chattts/tiny --out testdata/chattts/tiny-int8/gpt.int8.onnx`).
func tinyInt8(t *testing.T, gptInt8 string) string {
	t.Helper()
	dir := tinyCopy(t, func(m map[string]any) { m["files"].(map[string]any)[Int8File] = "gpt.int8.onnx" })
	b, err := os.ReadFile(gptInt8)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gpt.int8.onnx"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const tinyInt8GPT = "../../testdata/chattts/tiny-int8/gpt.int8.onnx"

func canInt8(t *testing.T) {
	if ok, why := int8CPU(7); !ok {
		t.Skipf("int8 not run here: %s", why)
	}
}

// The int8 GPT is what auto picks on a CPU, and it follows the fp32 GPT closely (not exactly:
// the weights are rounded to 7 bits): the same first frame, nearly the same hidden state.
func TestInt8FollowsFP32(t *testing.T) {
	canInt8(t)
	ref := readTinyRef(t)
	dir := tinyInt8(t, tinyInt8GPT)
	run := func(precision string) (*Engine, *decodeResult) {
		e := tinyEngineIn(t, dir, func(c *Config) { c.Precision = precision })
		s := NewSampler(SampleParams{Greedy: true, Temperature: []float32{1}, RepetitionPenalty: 1, EOS: e.mc.EOSCode}, nil)
		res, err := e.decode(context.Background(), ref.Greedy.PromptIDs, decodeOptions{mode: modeCode, sampler: s,
			maxNew: ref.Greedy.MaxNew, spk: ref.Speaker})
		if err != nil {
			t.Fatal(err)
		}
		return e, res
	}
	e32, r32 := run(PrecisionFP32)
	e8, r8 := run(PrecisionAuto)
	if p := e32.Capabilities().Precision; p != PrecisionFP32 {
		t.Errorf("fp32 engine reports %q", p)
	}
	if p := e8.Capabilities().Precision; p != PrecisionInt8 {
		t.Fatalf("auto on this CPU runs %q, want int8", p)
	}
	want := frames(r32.Codes, e32.mc.GPT.NumVQ)
	for i, f := range want { // fp32 is PyTorch's (TestGreedyMatchesPyTorch); the baseline here
		if !slices.Equal(f, ref.Greedy.Codes[i]) {
			t.Fatalf("fp32 frame %d differs from PyTorch", i)
		}
	}
	got := frames(r8.Codes, e8.mc.GPT.NumVQ)
	if len(got) == 0 || !slices.Equal(got[0], want[0]) {
		t.Fatalf("first frame %v, fp32 %v", got[:min(1, len(got))], want[0])
	}
	H := e8.mc.GPT.Hidden
	var num, den float64
	for j := range H { // the first frame's hidden state: the same prompt, no earlier choice differs
		d := float64(r8.Hiddens[j] - r32.Hiddens[j])
		num += d * d
		den += float64(r32.Hiddens[j]) * float64(r32.Hiddens[j])
	}
	// Later frames are not compared: random weights leave near-ties between codes, and one
	// flipped tie sends a greedy sequence elsewhere (the demo voice's trained weights are
	// measured by train.chattts.precision_eval instead).
	rel := math.Sqrt(num / den)
	t.Logf("int8: first hidden state %.4f relative RMS from fp32", rel)
	if rel > 0.01 {
		t.Errorf("first hidden state %.4f relative RMS from fp32 (want ≤ 0.01)", rel)
	}
}

func TestPrecisionChoice(t *testing.T) {
	canInt8(t)
	// no int8 GPT: auto and fp32 run fp32; int8 is an error that says how to get one
	for _, p := range []string{"", PrecisionAuto, PrecisionFP32} {
		if got := tinyEngine(t, func(c *Config) { c.Precision = p }).Capabilities().Precision; got != PrecisionFP32 {
			t.Errorf("precision %q without an int8 GPT: %q", p, got)
		}
	}
	gputestNew := func(dir string, c Config) error {
		e, err := New(dir, c)
		if err == nil {
			e.Close()
		}
		return err
	}
	base := tinyEngine(t).cfg
	c := base
	c.Precision = PrecisionInt8
	if err := gputestNew(tinyDir, c); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "files."+Int8File) {
		t.Errorf("int8 without an int8 GPT: %v", err)
	}
	c.Precision = "fp16"
	if err := gputestNew(tinyDir, c); err == nil || !strings.Contains(err.Error(), "fp16") {
		t.Errorf("unknown precision: %v", err)
	}
	// files.gpt_int8 naming a graph that is not quantized, or a file that is not there
	c = base
	c.Precision = PrecisionAuto
	if err := gputestNew(tinyInt8(t, filepath.Join(tinyDir, "gpt.onnx")), c); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "no quantized MatMul") {
		t.Errorf("an fp32 graph as the int8 GPT: %v", err)
	}
	if err := gputestNew(tinyCopy(t, func(m map[string]any) { m["files"].(map[string]any)[Int8File] = "gpt.int8.onnx" }), c); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "gpt.int8.onnx") {
		t.Errorf("a missing int8 GPT: %v", err)
	}
}

func TestInt8CPU(t *testing.T) {
	for _, c := range []struct {
		arch string
		x86  x86Features
		bits int
		ok   bool
	}{
		{"amd64", x86Features{}, 7, false},
		{"amd64", x86Features{avx2: true}, 7, true},
		{"amd64", x86Features{avx2: true}, 8, false},
		{"amd64", x86Features{avx2: true, vnni: true}, 8, true},
		{"arm64", x86Features{}, 8, true},
		{"riscv64", x86Features{}, 7, false},
	} {
		ok, why := int8CPUFor(c.arch, c.x86, c.bits)
		if ok != c.ok || (!ok && why == "") {
			t.Errorf("%s %+v %d bits: %v %q, want %v", c.arch, c.x86, c.bits, ok, why, c.ok)
		}
	}
	if cpu.X86.HasAVX2 {
		if ok, _ := int8CPU(7); !ok {
			t.Error("this AVX2 CPU is refused 7-bit int8")
		}
	}
}
