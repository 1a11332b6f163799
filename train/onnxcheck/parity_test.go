package onnxcheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
)

// Model directories made by train/ and committed to the repository.
var modelDirs = []string{
	"../../testdata/sensevoice/tiny",
	"../../assets/demo/sensevoice",
}

type refCase struct {
	Name        string    `json:"name"`
	XShape      []int64   `json:"x_shape"`
	X           []float64 `json:"x"`
	XLength     []int32   `json:"x_length"`
	Language    []int32   `json:"language"`
	TextNorm    []int32   `json:"text_norm"`
	LogitsShape []int64   `json:"logits_shape"`
	Logits      []float64 `json:"logits"`
}

type reference struct {
	Models           []string  `json:"models"`
	Tolerance        float64   `json:"tolerance"`
	Int8RelTolerance float64   `json:"int8_rel_tolerance"`
	Cases            []refCase `json:"cases"`
}

// referencePath finds the exporter's reference file: reference.json, or _reference.json in
// assets/demo (files starting with "_" are not embedded into the binary).
func referencePath(dir string) (string, bool) {
	for _, name := range []string{"reference.json", "_reference.json"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

func loadReference(t *testing.T, path string) reference {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read reference: %v", err)
	}
	var ref reference
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(ref.Cases) == 0 || len(ref.Models) == 0 || ref.Tolerance <= 0 {
		t.Fatalf("%s: no cases, models or tolerance", path)
	}
	return ref
}

func existingDirs(t *testing.T) []string {
	var out []string
	dirs := modelDirs
	if d := os.Getenv("PARLEY_SENSEVOICE_EXPORT"); d != "" { // an export to check before it is committed
		dirs = append(slices.Clip(dirs), d)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "model.onnx")); err == nil {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		t.Fatal("no SenseVoice test model found; run `make -C train test-models`")
	}
	return out
}

func readTokens(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	toks := map[string]int{}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		parts := strings.Split(sc.Text(), " ")
		if len(parts) != 2 {
			t.Fatalf("%s:%d: want 'piece id', got %q", path, n, sc.Text())
		}
		id, err := strconv.Atoi(parts[1])
		if err != nil || id != n-1 {
			t.Fatalf("%s:%d: id %q, want %d", path, n, parts[1], n-1)
		}
		toks[parts[0]] = id
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return toks
}

// TestMetadata checks that every exported model (fp32 and int8) has the sherpa-onnx
// SenseVoice signature and metadata, consistent with its tokens.txt.
func TestMetadata(t *testing.T) {
	gputest.RequireORT(t)
	wantInts := map[string]int{
		"lfr_window_size": 7, "lfr_window_shift": 6, "normalize_samples": 0,
		"lang_auto": 0, "lang_zh": 3, "lang_en": 4, "lang_yue": 7, "lang_ja": 11, "lang_ko": 12,
		"lang_nospeech": 13, "with_itn": 14, "without_itn": 15,
	}
	special := []string{"<unk>", "<s>", "</s>", "<|zh|>", "<|en|>", "<|yue|>", "<|ja|>", "<|ko|>",
		"<|nospeech|>", "<|HAPPY|>", "<|SAD|>", "<|ANGRY|>", "<|NEUTRAL|>", "<|FEARFUL|>",
		"<|DISGUSTED|>", "<|SURPRISED|>", "<|EMO_UNKNOWN|>", "<|Speech|>", "<|BGM|>",
		"<|Laughter|>", "<|Applause|>", "<|Cry|>", "<|Sneeze|>", "<|Breath|>", "<|Cough|>",
		"<|withitn|>", "<|woitn|>"}
	for _, dir := range existingDirs(t) {
		toks := readTokens(t, filepath.Join(dir, "tokens.txt"))
		for _, s := range special {
			if _, ok := toks[s]; !ok {
				t.Errorf("%s/tokens.txt lacks %s", dir, s)
			}
		}
		if toks["<unk>"] != 0 {
			t.Errorf("%s/tokens.txt: <unk> (the CTC blank) is %d, want 0", dir, toks["<unk>"])
		}
		for _, name := range []string{"model.onnx", "model.int8.onnx"} {
			path := filepath.Join(dir, name)
			if _, err := os.Stat(path); err != nil {
				continue
			}
			t.Run(filepath.Base(dir)+"/"+name, func(t *testing.T) {
				info, err := gpu.Inspect(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := info.RequireInputs("x", "x_length", "language", "text_norm"); err != nil {
					t.Fatal(err)
				}
				if err := info.RequireOutputs("logits"); err != nil {
					t.Fatal(err)
				}
				for name, typ := range map[string]string{"x": "float32", "x_length": "int32", "language": "int32", "text_norm": "int32", "logits": "float32"} {
					if err := info.RequireType(name, typ); err != nil {
						t.Error(err)
					}
				}
				if x, _ := info.Input("x"); len(x.Shape) != 3 || x.Shape[0] != -1 || x.Shape[1] != -1 || x.Shape[2] != 560 {
					t.Errorf("x shape %v, want [-1 -1 560]", x.Shape)
				}
				if v, _ := info.Meta("model_type"); v != "sense_voice_ctc" {
					t.Errorf("model_type = %q", v)
				}
				for k, want := range wantInts {
					got, err := info.MetaInt(k)
					if err != nil || got != want {
						t.Errorf("metadata %s = %d (%v), want %d", k, got, err, want)
					}
				}
				if vs, err := info.MetaInt("vocab_size"); err != nil || vs != len(toks) {
					t.Errorf("vocab_size = %d (%v), tokens.txt has %d", vs, err, len(toks))
				}
				for _, k := range []string{"neg_mean", "inv_stddev"} {
					fs, err := info.MetaFloats(k)
					if err != nil || len(fs) != 560 {
						t.Errorf("metadata %s: %d floats (%v), want 560", k, len(fs), err)
					}
					for i, f := range fs {
						if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
							t.Errorf("metadata %s[%d] = %v", k, i, f)
							break
						}
					}
				}
			})
		}
	}
}

func run(t *testing.T, s *gpu.Session, c refCase) ([]float32, []int64) {
	t.Helper()
	x := make([]float32, len(c.X))
	for i, v := range c.X {
		x[i] = float32(v) // exact: the exporter wrote float32 values
	}
	n := int64(len(c.XLength))
	xt, err := ort.NewTensor(ort.NewShape(c.XShape...), x)
	if err != nil {
		t.Fatal(err)
	}
	defer xt.Destroy()
	var ins []ort.Value
	ins = append(ins, xt)
	for _, v := range [][]int32{c.XLength, c.Language, c.TextNorm} {
		tt, err := ort.NewTensor(ort.NewShape(n), v)
		if err != nil {
			t.Fatal(err)
		}
		defer tt.Destroy()
		ins = append(ins, tt)
	}
	outs := []ort.Value{nil}
	if err := s.Run(ins, outs); err != nil {
		t.Fatalf("%s: run: %v", c.Name, err)
	}
	defer outs[0].Destroy()
	lt, ok := outs[0].(*ort.Tensor[float32])
	if !ok {
		t.Fatalf("%s: logits is %T, want float32 tensor", c.Name, outs[0])
	}
	return append([]float32(nil), lt.GetData()...), lt.GetShape()
}

// TestParity runs each model on the exporter's fixed inputs and compares the logits with
// PyTorch's over each input's real frames: within the recorded tolerance (1e-4) times
// max(1, largest |logit|) for fp32, and within a fraction of the largest |logit| for int8.
func TestParity(t *testing.T) {
	gputest.RequireORT(t)
	for _, dir := range existingDirs(t) {
		rp, ok := referencePath(dir)
		if !ok {
			t.Errorf("%s: no reference.json", dir)
			continue
		}
		ref := loadReference(t, rp)
		for _, name := range ref.Models {
			t.Run(filepath.Base(dir)+"/"+name, func(t *testing.T) {
				s, err := gpu.Open(filepath.Join(dir, name), []string{"x", "x_length", "language", "text_norm"},
					[]string{"logits"}, gpu.Options{Provider: "cpu", IntraOpThreads: 1})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				for _, c := range ref.Cases {
					got, shape := run(t, s, c)
					if fmt.Sprint(shape) != fmt.Sprint(c.LogitsShape) {
						t.Fatalf("%s: logits shape %v, want %v", c.Name, shape, c.LogitsShape)
					}
					if int64(shape[1]) != c.XShape[1]+4 {
						t.Errorf("%s: logits T %d, want x T + 4 = %d", c.Name, shape[1], c.XShape[1]+4)
					}
					rel := ref.Tolerance
					if strings.Contains(name, "int8") {
						rel = ref.Int8RelTolerance
					}
					worst, at, tol := compareRealFrames(c, got, rel)
					if !(worst <= tol) {
						t.Errorf("%s: max |onnx - torch| over real frames = %g at %d, want <= %g", c.Name, worst, at, tol)
					} else {
						t.Logf("%s: max |onnx - torch| over real frames = %.3g (tolerance %.3g)", c.Name, worst, tol)
					}
				}
			})
		}
	}
}

// compareRealFrames compares logits (N, T+4, V) only where they mean something: the 4 query
// positions and each input's x_length frames. Padded positions of a shorter input in a batch
// are left out: the model masks them, and what it writes there differs between runtimes
// (8e-4 on a fine-tuned model). The tolerance is relative: rel × max(1, largest |logit|) for
// fp32 (rel ≤ 1e-3), rel × largest |logit| for int8-sized bounds (rel > 1e-3).
func compareRealFrames(c refCase, got []float32, rel float64) (worst float64, at int, tol float64) {
	if len(got) != len(c.Logits) || len(c.LogitsShape) != 3 || int64(len(c.XLength)) != c.LogitsShape[0] {
		return math.Inf(1), 0, 0
	}
	n, tPlus, v := int(c.LogitsShape[0]), int(c.LogitsShape[1]), int(c.LogitsShape[2])
	real := func(i int) (int, int) { return i * tPlus * v, (i*tPlus + min(tPlus, int(c.XLength[i])+4)) * v }
	peak := 0.0
	for i := 0; i < n; i++ {
		lo, hi := real(i)
		for j := lo; j < hi; j++ {
			peak = math.Max(peak, math.Abs(c.Logits[j]))
			if d := math.Abs(float64(got[j]) - c.Logits[j]); d > worst || math.IsNaN(d) {
				worst, at = d, j
			}
		}
	}
	if rel > 1e-3 {
		return worst, at, rel * peak
	}
	return worst, at, rel * math.Max(1, peak)
}

// TestCompareRealFrames: padded positions never count, real ones always do, and the bound
// scales with the logits.
func TestCompareRealFrames(t *testing.T) {
	// 2 inputs, x lengths 3 and 1 → T+4 = 7 positions, 2 classes
	c := refCase{XLength: []int32{3, 1}, LogitsShape: []int64{2, 7, 2}}
	for i := 0; i < 2*7*2; i++ {
		c.Logits = append(c.Logits, float64(i%5)-2)
	}
	got := make([]float32, len(c.Logits))
	for i, v := range c.Logits {
		got[i] = float32(v)
	}
	padded := 1*7*2 + 6*2 // input 1, position 6 (past 1+4 real positions)
	got[padded] += 1e-3
	if worst, _, tol := compareRealFrames(c, got, 1e-4); worst != 0 || tol != 2e-4 {
		t.Errorf("padded difference counted: worst %g, tol %g", worst, tol)
	}
	real := 1*7*2 + 4*2 // input 1, position 4: real (the frame of x)
	got[real] += 3e-4
	if worst, at, tol := compareRealFrames(c, got, 1e-4); !(worst > tol) || at != real {
		t.Errorf("real difference missed: worst %g at %d, tol %g", worst, at, tol)
	}
	// larger logits, larger bound: 3e-4 passes when the largest |logit| is 20
	for i := range c.Logits {
		c.Logits[i] *= 10
		got[i] = float32(c.Logits[i])
	}
	got[real] += 3e-4
	if worst, _, tol := compareRealFrames(c, got, 1e-4); !(worst <= tol) {
		t.Errorf("relative bound: worst %g, tol %g", worst, tol)
	}
	if _, _, tol := compareRealFrames(c, got, 0.05); tol != 0.05*20 {
		t.Errorf("int8 bound %g, want %g", tol, 0.05*20)
	}
}
