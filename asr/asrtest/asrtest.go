// Package asrtest has helpers for tests and benchmarks of speech recognition: the
// SenseVoice-Small-sized random model that benchmarks measure.
package asrtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/parley-voice/parley/assets"
)

var small struct {
	sync.Once
	dir string
	err string
}

// SmallModel returns the directory of a SenseVoice-Small-sized model with random weights
// (sherpa-onnx layout, about 1 GB), exported by train/ on first use into
// $PARLEY_CACHE/bench/sensevoice-small-random and kept there (never committed). It skips the
// benchmark when the model cannot be made (no PyTorch).
func SmallModel(tb testing.TB) string {
	tb.Helper()
	small.Do(func() {
		dir := filepath.Join(assets.CacheDir(), "bench", "sensevoice-small-random")
		if exists(filepath.Join(dir, "tokens.txt")) && exists(filepath.Join(dir, "model.onnx")) {
			small.dir = dir
			return
		}
		cmd := exec.Command("/usr/bin/python3", "-m", "train.sensevoice.export", "--size", "small", "--random", "--out", dir)
		cmd.Dir = repoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			small.err = "cannot export the SenseVoice-Small-sized random model: " + err.Error() + ": " + string(lastLines(out, 3))
			return
		}
		small.dir = dir
	})
	if small.dir == "" {
		tb.Skip(small.err)
	}
	return small.dir
}

// repoRoot is the repository's root directory (this file is asr/asrtest/asrtest.go).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func exists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}
