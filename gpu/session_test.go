package gpu_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
)

const scaleModel = "testdata/scale.onnx"

func TestInspect(t *testing.T) {
	gputest.RequireORT(t)
	info, err := gpu.Inspect(scaleModel)
	if err != nil {
		t.Fatal(err)
	}
	x, ok := info.Input("x")
	if !ok || x.Type != "float32" || len(x.Shape) != 2 || x.Shape[0] != -1 || x.Shape[1] != 3 {
		t.Errorf("input x = %+v, %v", x, ok)
	}
	if ids, ok := info.Input("ids"); !ok || ids.Type != "int64" {
		t.Errorf("input ids = %+v, %v", ids, ok)
	}
	if err := info.RequireInputs("x", "ids"); err != nil {
		t.Error(err)
	}
	if err := info.RequireOutputs("y", "ids_out"); err != nil {
		t.Error(err)
	}
	err = info.RequireInputs("x", "speech_lengths")
	if !errors.Is(err, gpu.ErrBadModel) || !strings.Contains(err.Error(), scaleModel) || !strings.Contains(err.Error(), "speech_lengths") {
		t.Errorf("missing input error = %v", err)
	}
	if err := info.RequireType("ids", "int32"); !errors.Is(err, gpu.ErrBadModel) {
		t.Errorf("RequireType(ids, int32) = %v", err)
	}
	if v, ok := info.Meta("model_type"); !ok || v != "parley_test" {
		t.Errorf("model_type = %q, %v", v, ok)
	}
	if n, err := info.MetaInt("vocab_size"); err != nil || n != 42 {
		t.Errorf("vocab_size = %d, %v", n, err)
	}
	if _, err := info.MetaInt("bad_int"); err == nil || !strings.Contains(err.Error(), "bad_int") {
		t.Errorf("MetaInt(bad_int) = %v", err)
	}
	if _, err := info.MetaInt("absent"); !errors.Is(err, gpu.ErrBadModel) {
		t.Errorf("MetaInt(absent) = %v", err)
	}
	fs, err := info.MetaFloats("scales")
	if err != nil || len(fs) != 3 || fs[0] != 1.5 || fs[1] != -2 || fs[2] != float32(0.3) {
		t.Errorf("scales = %v, %v", fs, err)
	}
}

func TestInspectBadFiles(t *testing.T) {
	gputest.RequireORT(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(garbage, []byte("definitely not protobuf \x00\x01\x02"), 0o644); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.onnx")
	data, err := os.ReadFile(scaleModel)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(truncated, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{garbage, truncated, filepath.Join(dir, "absent.onnx")} {
		_, err := gpu.Inspect(p)
		if !errors.Is(err, gpu.ErrBadModel) || !strings.Contains(err.Error(), p) {
			t.Errorf("Inspect(%s) = %v, want ErrBadModel naming the file", p, err)
		}
	}
}

func TestOpenRun(t *testing.T) {
	gputest.RequireORT(t)
	for _, provider := range []string{"cpu", "auto", "cuda", "cuda:3", "tensorrt"} {
		t.Run(provider, func(t *testing.T) {
			s, err := gpu.Open(scaleModel, []string{"x", "ids"}, []string{"y", "ids_out"}, gpu.Options{Provider: provider, IntraOpThreads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			gpus, _ := gpu.DiscoverGPUs()
			if len(gpus.Devices) == 0 && s.Provider != "cpu" {
				t.Errorf("no GPU here, yet provider = %s", s.Provider)
			}
			x, err := ort.NewTensor(ort.NewShape(2, 3), []float32{1, 2, 3, 4, 5, 6})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Destroy()
			ids, err := ort.NewTensor(ort.NewShape(2), []int64{7, 9})
			if err != nil {
				t.Fatal(err)
			}
			defer ids.Destroy()
			outs := []ort.Value{nil, nil}
			if err := s.Run([]ort.Value{x, ids}, outs); err != nil {
				t.Fatal(err)
			}
			defer outs[0].Destroy()
			defer outs[1].Destroy()
			y := outs[0].(*ort.Tensor[float32]).GetData()
			want := []float32{2.5, 3, 9, 8.5, 9, 15}
			for i := range want {
				if y[i] != want[i] {
					t.Fatalf("y = %v, want %v", y, want)
				}
			}
			if got := outs[1].(*ort.Tensor[int64]).GetData(); got[0] != 7 || got[1] != 9 {
				t.Errorf("ids_out = %v", got)
			}
			if err := s.Close(); err != nil {
				t.Error(err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

func TestOpenValidates(t *testing.T) {
	gputest.RequireORT(t)
	if _, err := gpu.Open(scaleModel, []string{"x", "missing"}, nil, gpu.Options{}); !errors.Is(err, gpu.ErrBadModel) {
		t.Errorf("Open with a missing input = %v", err)
	}
	if _, err := gpu.Open(scaleModel, nil, nil, gpu.Options{Provider: "vulkan"}); err == nil || !strings.Contains(err.Error(), "vulkan") {
		t.Errorf("Open with a bad provider = %v", err)
	}
	if _, err := gpu.Open(scaleModel, nil, nil, gpu.Options{Optimization: "max"}); err == nil {
		t.Error("Open with a bad optimisation level succeeded")
	}
}

func TestDiscoverGPUsNeverFails(t *testing.T) {
	rep, err := gpu.DiscoverGPUs()
	if err != nil && !errors.Is(err, gpu.ErrNVML) {
		t.Fatalf("DiscoverGPUs: %v", err)
	}
	if len(rep.Devices) == 0 && rep.Reason == "" {
		t.Error("no devices and no reason")
	}
	for _, d := range rep.Devices {
		if d.Name == "" || d.MemoryTotal == 0 {
			t.Errorf("device %+v lacks a name or memory", d)
		}
	}
	t.Logf("GPU discovery: %+v", rep)
}
