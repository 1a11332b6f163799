package chattts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
)

// tinyCopy copies the tiny export into a temporary directory, applying edit to config.json.
func tinyCopy(t *testing.T, edit func(map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(tinyDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == ConfigFile && edit != nil {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			edit(m)
			b, _ = json.Marshal(m)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBadExports: every problem with an export directory is one error that names the file and
// what is wrong — all missing files at once, all mismatched tensors of a graph at once.
func TestBadExports(t *testing.T) {
	gputest.RequireORT(t)
	open := func(dir string) error {
		e, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
		if err == nil {
			e.Close()
		}
		return err
	}
	expect := func(name string, err error, parts ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: loaded", name)
			return
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: error spans lines: %q", name, msg)
		}
		for _, p := range parts {
			if !strings.Contains(msg, p) {
				t.Errorf("%s: %q does not mention %q", name, msg, p)
			}
		}
	}
	dir := tinyCopy(t, nil)
	os.Remove(filepath.Join(dir, "vocos.onnx"))
	os.Remove(filepath.Join(dir, "spk_stat.bin"))
	expect("missing files", open(dir), "vocos.onnx", "spk_stat.bin", "missing")

	expect("no directory", open(filepath.Join(t.TempDir(), "nope")), "nope")

	// a config that does not match the graphs: hidden 16 → 24 (heads × head_dim fixed too)
	dir = tinyCopy(t, func(m map[string]any) {
		g := m["gpt"].(map[string]any)
		g["hidden"], g["head_dim"] = 24, 12
		m["speaker"].(map[string]any)["dim"] = 24
	})
	os.WriteFile(filepath.Join(dir, "spk_stat.bin"), make([]byte, 8*24), 0o644)
	expect("shape mismatch", open(dir), "gpt.onnx", "spk_emb", "hidden", "present_kv")

	dir = tinyCopy(t, func(m map[string]any) { m["format"] = "something-else"; m["version"] = 9 })
	expect("format", open(dir), ConfigFile, "format", "version 9")

	dir = tinyCopy(t, func(m map[string]any) { m["gpt"].(map[string]any)["num_text_tokens"] = 999 })
	expect("vocabulary size", open(dir), "tokenizer.json", "999")

	dir = tinyCopy(t, func(m map[string]any) { m["tokens"].(map[string]any)["[laugh]"] = 3 })
	expect("token ids", open(dir), "[laugh]")

	dir = tinyCopy(t, nil)
	os.WriteFile(filepath.Join(dir, "spk_stat.bin"), []byte{1, 2, 3}, 0o644)
	expect("spk_stat size", open(dir), "spk_stat.bin", "3 bytes")

	dir = tinyCopy(t, func(m map[string]any) { m["files"].(map[string]any)["gpt"] = "../../etc/passwd" })
	expect("path escape", open(dir), "files.gpt")

	dir = tinyCopy(t, nil)
	os.WriteFile(filepath.Join(dir, "decoder.onnx"), []byte("not onnx"), 0o644)
	expect("corrupt graph", open(dir), "decoder.onnx")

	filter := func(weights int, tries int) func(m map[string]any) {
		return func(m map[string]any) {
			m["speaker"].(map[string]any)["seed_filter"] = map[string]any{"weights": make([]float32, weights), "bias": 0.5, "tries": tries}
		}
	}
	dim := 16 // the tiny model's hidden size
	expect("seed filter size", open(tinyCopy(t, filter(dim+1, 4))), ConfigFile, "seed_filter", "17 weights")
	expect("seed filter tries", open(tinyCopy(t, filter(dim, 0))), ConfigFile, "seed_filter", "tries 0")
	expect("suggested seed 0", open(tinyCopy(t, func(m map[string]any) { m["speaker"].(map[string]any)["suggested_seeds"] = []int{4, 0} })),
		ConfigFile, "suggested_seeds", "seed 0")
	if e, err := New(tinyCopy(t, func(m map[string]any) { m["speaker"].(map[string]any)["suggested_seeds"] = []int{40, 2} }), Config{GPU: gpu.Options{Provider: "cpu"}}); err != nil {
		t.Fatalf("suggested seeds: %v", err)
	} else {
		if got := e.SuggestedSeeds(); !slices.Equal(got, []int64{40, 2}) {
			t.Errorf("suggested seeds %v", got)
		}
		if got := e.Capabilities().SuggestedSeeds; !slices.Equal(got, []int64{40, 2}) {
			t.Errorf("the capability report suggests %v, want [40 2]", got)
		}
		e.Close()
	}
	if e, err := New(tinyCopy(t, filter(dim, 4)), Config{GPU: gpu.Options{Provider: "cpu"}}); err != nil {
		t.Fatalf("a good seed filter: %v", err)
	} else {
		if e.stat.Filter == nil || e.stat.Filter.Tries != 4 {
			t.Errorf("the filter did not reach the speaker sampler: %+v", e.stat.Filter)
		}
		e.Close()
	}
}

func FuzzModelConfig(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(tinyDir, ConfigFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"format":"parley-chattts-onnx","version":1}`))
	f.Add([]byte(`{"gpt":{"hidden":-1,"heads":0}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseModelConfig("config.json", b)
		if err != nil {
			return
		}
		// an accepted config has usable numbers
		if c.GPT.Heads*c.GPT.HeadDim != c.GPT.Hidden || c.Audio.NFFT < 4 || c.Audio.Hop <= 0 || c.EOSCode >= c.GPT.NumAudioTokens {
			t.Fatalf("accepted %+v", c)
		}
		if _, err := NewISTFT(c.Audio.NFFT, c.Audio.Hop); err != nil {
			t.Fatalf("accepted audio settings the ISTFT refuses: %v", err)
		}
	})
}
