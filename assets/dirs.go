// Package assets knows where Parley's models live, which models exist (the registry), and how
// to fetch, verify and install them.
package assets

import (
	"os"
	"path/filepath"
)

// ModelsDir is the directory that holds installed models: $PARLEY_MODELS, else
// $XDG_DATA_HOME/parley/models, else ~/.local/share/parley/models.
func ModelsDir() string {
	if d := os.Getenv("PARLEY_MODELS"); d != "" {
		return d
	}
	return filepath.Join(dataHome(), "parley", "models")
}

// CacheDir holds downloads and the ONNX Runtime library: $PARLEY_CACHE, else
// $XDG_CACHE_HOME/parley, else ~/.cache/parley.
func CacheDir() string {
	if d := os.Getenv("PARLEY_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "parley")
	}
	return filepath.Join(homeDir(), ".cache", "parley")
}

// DataDir holds Parley's own data (history database, voices): $XDG_DATA_HOME/parley.
func DataDir() string { return filepath.Join(dataHome(), "parley") }

func dataHome() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return d
	}
	return filepath.Join(homeDir(), ".local", "share")
}

func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	return os.TempDir()
}
