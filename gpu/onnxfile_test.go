package gpu

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
)

// onnxFiles lists the repository's committed models and the set-up third-party ones (Silero,
// openWakeWord): the formats Parley loads.
func onnxFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "out" || d.Name() == "node_modules") && p != root {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".onnx") {
			files = append(files, p)
		}
		return nil
	})
	models := os.Getenv("PARLEY_MODELS")
	if models == "" {
		if h, err := os.UserHomeDir(); err == nil {
			models = filepath.Join(h, ".local", "share", "parley", "models")
		}
	}
	for _, sub := range []string{"silero-vad-v5", "openwakeword"} {
		m, _ := filepath.Glob(filepath.Join(models, sub, "*.onnx"))
		files = append(files, m...)
	}
	return files
}

// ortModelInfo asks ONNX Runtime (a full temporary session) what readModelInfo reads from
// the file: the reference the file reader is held to.
func ortModelInfo(path string) (*ModelInfo, error) {
	so, err := newSessionOptions(Options{IntraOpThreads: 1, Optimization: "none"}, ProviderSpec{Kind: ProviderCPU})
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	ins, outs, err := ort.GetInputOutputInfoWithOptions(path, so)
	if err != nil {
		return nil, err
	}
	info := &ModelInfo{Path: path, Metadata: map[string]string{}}
	for _, in := range ins {
		info.Inputs = append(info.Inputs, tensorInfo(in))
	}
	for _, out := range outs {
		info.Outputs = append(info.Outputs, tensorInfo(out))
	}
	md, err := ort.GetModelMetadataWithOptions(path, so)
	if err != nil {
		return nil, err
	}
	defer md.Destroy()
	keys, err := md.GetCustomMetadataMapKeys()
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if v, ok, err := md.LookupCustomMetadataMap(k); err == nil && ok {
			info.Metadata[k] = v
		}
	}
	return info, nil
}

func tensorInfo(in ort.InputOutputInfo) TensorInfo {
	t := TensorInfo{Name: in.Name, Type: elementType(in.DataType)}
	if in.OrtValueType != ort.ONNXTypeTensor {
		t.Type = in.OrtValueType.String()
	}
	t.Shape = append([]int64{}, in.Dimensions...)
	return t
}

// sameOrLessSpecific: the same outputs, except that a dimension the file leaves symbolic (-1)
// may be one ONNX Runtime's shape inference fills in (ChatTTS's logits_code: [-1 -1 -1] in
// the file, [-1 4 626] inferred). Engines must not rely on inferred output dimensions.
func sameOrLessSpecific(got, want []TensorInfo) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Type != w.Type || len(g.Shape) != len(w.Shape) {
			return false
		}
		for j := range g.Shape {
			if g.Shape[j] != w.Shape[j] && g.Shape[j] != -1 {
				return false
			}
		}
	}
	return true
}

// The file reader says what ONNX Runtime says, for every model Parley ships or sets up.
func TestReadModelInfoMatchesRuntime(t *testing.T) {
	if err := Init(); err != nil {
		t.Skipf("ONNX Runtime unavailable: %v", err)
	}
	files := onnxFiles(t)
	if len(files) < 8 {
		t.Fatalf("found only %d models: %v", len(files), files)
	}
	for _, f := range files {
		want, werr := ortModelInfo(f)
		got, gerr := readModelInfo(f)
		if werr != nil {
			// ONNX Runtime rejects it; the reader may still read it (the session then fails).
			continue
		}
		if gerr != nil {
			t.Errorf("%s: %v (ONNX Runtime reads it)", f, gerr)
			continue
		}
		norm := func(ts []TensorInfo) []TensorInfo {
			for i := range ts {
				if ts[i].Shape == nil {
					ts[i].Shape = []int64{}
				}
			}
			return ts
		}
		if !reflect.DeepEqual(norm(got.Inputs), norm(want.Inputs)) {
			t.Errorf("%s: inputs\n got %v\nwant %v", f, got.Inputs, want.Inputs)
		}
		if !sameOrLessSpecific(norm(got.Outputs), norm(want.Outputs)) {
			t.Errorf("%s: outputs\n got %v\nwant %v", f, got.Outputs, want.Outputs)
		}
		if !reflect.DeepEqual(got.Metadata, want.Metadata) {
			t.Errorf("%s: metadata\n got %v\nwant %v", f, got.Metadata, want.Metadata)
		}
	}
}

func TestReadModelInfoDamaged(t *testing.T) {
	data, err := os.ReadFile("testdata/scale.onnx")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, len(data) / 3, len(data) / 2, len(data) - 1} {
		_, err := parseModelInfo(bytes.NewReader(data[:n]), int64(n), "x.onnx")
		if err == nil {
			t.Errorf("%d of %d bytes: no error", n, len(data))
		}
	}
	if _, err := parseModelInfo(bytes.NewReader(data), int64(len(data)), "x.onnx"); err != nil {
		t.Fatal(err)
	}
	// A weight's length that runs past the end of the file is caught without reading it.
	big := append([]byte{}, data...)
	big = append(big, 0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f) // field 7 (graph), 4 GiB long
	if _, err := parseModelInfo(bytes.NewReader(big), int64(len(big)), "x.onnx"); !errors.Is(err, errTruncated) {
		t.Errorf("oversized field: %v", err)
	}
}

func FuzzParseModelInfo(f *testing.F) {
	for _, p := range []string{"testdata/scale.onnx", "../asr/testdata/bad/wrong-type/model.onnx", "../asr/testdata/bad/no-meta/model.onnx"} {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
			f.Add(data[:len(data)/2])
		}
	}
	f.Add([]byte("definitely not protobuf \x00\x01\x02"))
	f.Add([]byte{0x3a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := parseModelInfo(bytes.NewReader(data), int64(len(data)), "fuzz.onnx")
		if err == nil && info == nil {
			t.Fatal("no info and no error")
		}
	})
}

// The graph as read is whole: every operator's input is a graph input, a constant or an
// earlier operator's output (ONNX keeps nodes in topological order), and every constant has
// an element type.
func TestReadGraphIsWhole(t *testing.T) {
	for _, f := range onnxFiles(t) {
		info, err := readModelInfo(f)
		if err != nil {
			continue // TestReadModelInfoMatchesRuntime reports what matters
		}
		if len(info.Nodes) == 0 {
			t.Errorf("%s: no nodes", f)
			continue
		}
		known := map[string]bool{"": true}
		for _, in := range info.Inputs {
			known[in.Name] = true
		}
		for name, init := range info.Initializers {
			known[name] = true
			if init.Type == "" || init.Type == "undefined" {
				t.Errorf("%s: constant %s has no element type", f, name)
			}
		}
	nodes:
		for i, nd := range info.Nodes {
			if nd.Op == "" {
				t.Errorf("%s: node %d has no operator", f, i)
			}
			for _, in := range nd.Inputs {
				if !known[in] {
					t.Errorf("%s: node %d (%s) reads %q, which nothing before it makes", f, i, nd.Op, in)
					break nodes
				}
			}
			for _, out := range nd.Outputs {
				known[out] = true
			}
		}
	}
}

func TestQuantizedMatMuls(t *testing.T) {
	read := func(p string) *ModelInfo {
		info, err := readModelInfo(p)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	if n, err := read("../testdata/sensevoice/tiny/model.onnx").QuantizedMatMuls(); n != 0 || err != nil {
		t.Errorf("float model: %d quantized MatMuls, %v", n, err)
	}
	q := read("../testdata/sensevoice/tiny/model.int8.onnx")
	n, err := q.QuantizedMatMuls()
	if err != nil || n == 0 {
		t.Fatalf("int8 model: %d quantized MatMuls, %v", n, err)
	}
	var weight string
	for _, nd := range q.Nodes {
		if nd.Op == "MatMulInteger" {
			weight = nd.Inputs[1]
			break
		}
	}
	scale := strings.TrimSuffix(weight, "_quantized") + "_scale"
	w := q.Initializers[weight]
	damage := map[string]func(m map[string]TensorInfo){
		"missing": func(m map[string]TensorInfo) { delete(m, scale) },
		"misshaped": func(m map[string]TensorInfo) {
			m[scale] = TensorInfo{Name: scale, Type: "float32", Shape: []int64{w.Shape[1] + 1}}
		},
		"not float": func(m map[string]TensorInfo) { m[scale] = TensorInfo{Name: scale, Type: "float16", Shape: []int64{}} },
		"float weight": func(m map[string]TensorInfo) {
			m[weight] = TensorInfo{Name: weight, Type: "float32", Shape: w.Shape}
		},
	}
	for name, fn := range damage {
		m := maps.Clone(q.Initializers)
		fn(m)
		bad := *q
		bad.Initializers = m
		_, err := bad.QuantizedMatMuls()
		if !errors.Is(err, ErrBadModel) {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if want := map[bool]string{true: weight, false: scale}[name == "float weight"]; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v does not name %s", name, err, want)
		}
	}
}
