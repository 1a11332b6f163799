package kokoro

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A voice pack that is a FIFO (or a device) reports size 0; reading it must stop at the limit
// instead of running the process out of memory.
func TestReadLimitedStopsOnEndlessFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "endless.bin")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		chunk := make([]byte, 1<<20)
		for i := int64(0); i <= MaxPackBytes/int64(len(chunk))+2; i++ {
			if _, err := f.Write(chunk); err != nil {
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() {
		_, err := readLimited(p)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrVoice) {
			t.Fatalf("readLimited(endless FIFO) = %v, want ErrVoice", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("readLimited did not stop")
	}
}
