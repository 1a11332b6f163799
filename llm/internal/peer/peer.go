// Package peer runs the npm reference implementations (build/peers, installed by
// build/setup.sh into the cache) that the llm packages' tests and benchmarks compare against.
package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/parley-voice/parley/assets"
)

// ErrAbsent means the peers are not installed; its message says how to install them.
var ErrAbsent = errors.New("npm test peers not installed")

// Dir is the installed peers' directory (holding node_modules). $PARLEY_PEERS overrides.
func Dir() (string, error) {
	dir := os.Getenv("PARLEY_PEERS")
	if dir == "" {
		dir = filepath.Join(assets.CacheDir(), "peers", "current") // where build/setup.sh peers installs them
	}
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		return "", fmt.Errorf("%w in %s (run `build/setup.sh peers`)", ErrAbsent, dir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("%w: node is not on PATH", ErrAbsent)
	}
	return dir, nil
}

// Node runs an ES module script with the peers importable, feeding stdin and returning
// stdout; args reach the script as process.argv[2:].
func Node(ctx context.Context, script string, stdin []byte, args ...string) ([]byte, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	// A script file inside the peers directory resolves its imports from node_modules there.
	f, err := os.CreateTemp(dir, ".script-*.mjs")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "node", append([]string{f.Name()}, args...)...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("node: %w: %s", err, tail(errb.String(), 2000))
	}
	return out.Bytes(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
