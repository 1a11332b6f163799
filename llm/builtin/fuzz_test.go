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
		c, err := ReadModelConfig(dir)
		if err == nil && (c.Layers <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.Vocab <= 0) {
			t.Fatalf("accepted a config with non-positive sizes: %+v", c)
		}
	})
}
