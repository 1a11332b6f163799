package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/parley-voice/parley/voices"
)

// TestReadEmbeddingBounded: --embedding may name something whose size Stat cannot tell (a
// FIFO, /dev/zero, a process substitution); reading it must stop at the limit, not read until
// memory runs out.
func TestReadEmbeddingBounded(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "emb.bin")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		chunk := make([]byte, 1<<20)
		for i := 0; i < 2*voices.MaxFileBytes>>20+1; i++ { // more than the limit, then EOF
			if _, err := f.Write(chunk); err != nil {
				return
			}
		}
	}()
	_, err := readEmbedding(fifo)
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("readEmbedding(FIFO of %d bytes) = %v, want a too-large error", 2*voices.MaxFileBytes, err)
	}
}
