// Package gputest has test helpers for code that needs ONNX Runtime or set-up models.
package gputest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu"
)

// inCI is true under CI, where `make test` has run set-up, so a missing library or model is a
// failure rather than a reason to skip.
func inCI() bool { return os.Getenv("CI") != "" }

func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if inCI() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format+" (run `make setup`)", args...)
}

// RequireORT initialises ONNX Runtime or skips the test (fails it under CI).
func RequireORT(t testing.TB) {
	t.Helper()
	if err := gpu.Init(); err != nil {
		missing(t, "ONNX Runtime unavailable: %v", err)
	}
}

// RequireModel returns the path of a set-up model file, relative to the models dir (for
// example "silero-vad-v5/silero_vad.onnx"), after RequireORT.
func RequireModel(t testing.TB, rel string) string {
	t.Helper()
	RequireORT(t)
	p := filepath.Join(assets.ModelsDir(), rel)
	if _, err := os.Stat(p); err != nil {
		missing(t, "model file %s unavailable: %v", p, err)
	}
	return p
}
