package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModelsCommand(t *testing.T) {
	dir := isolate(t)
	models := filepath.Join(dir, "models")
	t.Setenv("PARLEY_MODELS", models)
	t.Setenv("PARLEY_CACHE", filepath.Join(dir, "cache"))
	// A registry override adds a small model whose files a local directory holds.
	payload := []byte("tiny onnx payload")
	sum := sha256.Sum256(payload)
	manifest := filepath.Join(dir, "models.toml")
	os.WriteFile(manifest, []byte(`version = 1
[[model]]
id = "tiny-asr"
kind = "asr"
description = "test model"
licence = "MIT"
  [[model.file]]
  path = "model.onnx"
  urls = ["https://127.0.0.1:1/unreachable/model.onnx"]
  sha256 = "`+hex.EncodeToString(sum[:])+`"
`), 0o644)
	t.Setenv("PARLEY_MODELS_MANIFEST", manifest)
	src := filepath.Join(dir, "src", "tiny")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "model.onnx"), payload, 0o644)

	steps := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"models", "list"}, 0, "tiny-asr", ""},
		{[]string{"models", "path", "tiny-asr"}, 1, "", "parley models pull tiny-asr"},
		{[]string{"models", "path", "tiny-asx"}, 1, "", `did you mean "tiny-asr"`},
		{[]string{"models", "pull", "kokoro-83m"}, 1, "", `did you mean "kokoro-82m"`},
		{[]string{"models", "import", "-model", "tiny-asr", filepath.Join(dir, "src")}, 0, "tiny-asr: imported into " + filepath.Join(models, "tiny-asr"), ""},
		{[]string{"models", "verify", "tiny-asr"}, 0, "tiny-asr: installed (sha256 of every file)", ""},
		{[]string{"models", "path", "tiny-asr"}, 0, filepath.Join(models, "tiny-asr") + "\n", ""},
		{[]string{"models", "rm", "tiny-asr"}, 0, "tiny-asr: removed", ""},
		{[]string{"models", "rm", "tiny-asr"}, 1, "", "not installed"},
		{[]string{"models", "frobnicate"}, 2, "", "unknown models command"},
		{[]string{"models"}, 2, "", "parley models list"},
	}
	for _, s := range steps {
		code, out, errOut := runCLI(t, s.args...)
		if code != s.code || !strings.Contains(out, s.stdout) || !strings.Contains(errOut, s.stderr) {
			t.Errorf("parley %s: code %d (want %d)\nstdout: %s\nstderr: %s\nwant stdout ⊇ %q, stderr ⊇ %q",
				strings.Join(s.args, " "), code, s.code, out, errOut, s.stdout, s.stderr)
		}
	}

	// list -json says which models are in use and marks the demo-grade ones.
	code, out, errOut := runCLI(t, "models", "list", "-json")
	if code != 0 {
		t.Fatalf("list -json: %d %s", code, errOut)
	}
	var sts []struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Demo  bool   `json:"demo"`
		InUse bool   `json:"in_use"`
	}
	if err := json.Unmarshal([]byte(out), &sts); err != nil {
		t.Fatalf("list -json output: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, s := range sts {
		seen[s.ID] = true
		if s.ID == "silero-vad-v5" && !s.InUse {
			t.Error("silero-vad-v5 is always in use")
		}
		if s.ID == "sensevoice-demo" && !s.Demo {
			t.Error("sensevoice-demo must be marked demo-grade")
		}
	}
	for _, id := range []string{"sensevoice-small-int8", "kokoro-82m", "openwakeword", "tiny-asr"} {
		if !seen[id] {
			t.Errorf("list -json lacks %s", id)
		}
	}
}
