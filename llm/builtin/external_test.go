package builtin

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/parley-voice/parley/gpu"
)

func TestExternalDataFound(t *testing.T) {
	for file, want := range map[string][]string{"model.onnx": {"model.onnx_data"}, "model_q4.onnx": nil} {
		info, err := gpu.Inspect(filepath.Join(tinyDir, "onnx", file))
		if err != nil || len(info.ExternalData) != len(want) || len(want) > 0 && info.ExternalData[0] != want[0] {
			t.Errorf("external data of %s: %v %v, want %v", file, info.ExternalData, err, want)
		}
	}
	// a missing one is named
	dir := t.TempDir()
	onnx := filepath.Join(dir, "model.onnx")
	b, _ := os.ReadFile(filepath.Join(tinyDir, "onnx", "model.onnx"))
	os.WriteFile(onnx, b, 0o644)
	info, err := gpu.Inspect(onnx)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkExternalData(info); err == nil || !strings.Contains(err.Error(), "model.onnx_data, which is missing") {
		t.Errorf("missing external data: %v", err)
	}
}

// Opening a model whose weights are inside the .onnx file (onnx-community's q4 files are
// hundreds of MB) reads its description with seeks, not the whole file into memory: here a
// 64 MB initializer, appended to the tiny q4 model, must not pass through Go's heap.
func TestOpenReadsNoWeights(t *testing.T) {
	if err := gpu.Init(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(tinyDir, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	model, err := os.ReadFile(filepath.Join(tinyDir, "onnx", "model_q4.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	// A second graph field merges into the first (protobuf): an unused uint8 initializer.
	const size = 64 << 20
	field := func(b []byte, num int, payload []byte) []byte {
		b = binary.AppendUvarint(b, uint64(num<<3|2))
		b = binary.AppendUvarint(b, uint64(len(payload)))
		return append(b, payload...)
	}
	var tensor []byte
	tensor = binary.AppendUvarint(tensor, 1<<3) // dims
	tensor = binary.AppendUvarint(tensor, size)
	tensor = binary.AppendUvarint(tensor, 2<<3) // data_type
	tensor = binary.AppendUvarint(tensor, 2)    // UINT8
	tensor = field(tensor, 8, []byte("parley_test_padding"))
	tensor = field(tensor, 9, make([]byte, size)) // raw_data
	model = field(model, 7, field(nil, 5, tensor))
	os.MkdirAll(filepath.Join(dir, "onnx"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "onnx", "model_q4.onnx"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	model, tensor = nil, nil
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := OpenModel(dir, Config{Variant: "q4", GPU: gpu.Options{IntraOpThreads: 1}})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/2 {
		t.Errorf("opening a model with a 64 MB initializer allocated %d MB in Go", alloc>>20)
	}
}
