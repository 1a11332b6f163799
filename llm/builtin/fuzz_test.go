package builtin

import (
	"os"
	"path/filepath"
	"testing"
)

// config.json and generation_config.json come from downloads: never a panic.
func FuzzReadConfig(f *testing.F) {
	cfg, _ := os.ReadFile(filepath.Join(tinyDir, "config.json"))
	gen, _ := os.ReadFile(filepath.Join(tinyDir, "generation_config.json"))
	f.Add(cfg, gen)
	f.Add([]byte(`{"num_hidden_layers":1,"num_attention_heads":2,"hidden_size":8,"vocab_size":4,"eos_token_id":[1,2]}`), []byte(`{"eos_token_id":"x"}`))
	f.Add([]byte(`{}`), []byte(`null`))
	f.Fuzz(func(t *testing.T, cfg, gen []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
		os.WriteFile(filepath.Join(dir, "generation_config.json"), gen, 0o644)
		c, err := ReadConfig(dir)
		if err == nil && (c.Layers <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.Vocab <= 0) {
			t.Fatalf("accepted a config with non-positive sizes: %+v", c)
		}
	})
}

// The external-data scan reads any bytes without panicking and finds the real reference.
func FuzzExternalData(f *testing.F) {
	model, _ := os.ReadFile(filepath.Join(tinyDir, "onnx", "model.onnx"))
	f.Add(model[:min(len(model), 4096)])
	f.Add([]byte("\x0a\x08location\x12\x05x.bin"))
	f.Add([]byte("\x0a\x08location\x12\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "m.onnx")
		os.WriteFile(p, data, 0o644)
		_, _ = externalData(p)
	})
}

func TestExternalDataFound(t *testing.T) {
	files, err := externalData(filepath.Join(tinyDir, "onnx", "model.onnx"))
	if err != nil || len(files) != 1 || files[0] != "model.onnx_data" {
		t.Errorf("external data of the tiny model: %v %v", files, err)
	}
	files, err = externalData(filepath.Join(tinyDir, "onnx", "model_q4.onnx"))
	if err != nil || len(files) != 0 {
		t.Errorf("q4 has no external data: %v %v", files, err)
	}
}
