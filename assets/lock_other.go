//go:build !unix

package assets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

type fileLock struct{ path string }

// lockFile on systems without flock: an O_EXCL lock file (a crashed process leaves it behind;
// remove it by hand).
func lockFile(ctx context.Context, path string, waiting func()) (*fileLock, error) {
	told := false
	for {
		f, err := os.OpenFile(path+".excl", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			return &fileLock{path: path + ".excl"}, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("lock file: %w", err)
		}
		if !told && waiting != nil {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *fileLock) unlock() { os.Remove(l.path) }

// processAlive cannot tell here; staging directories are kept (remove them by hand).
func processAlive(pid int) bool { return true }
