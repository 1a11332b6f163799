package assets

import (
	"os"
	"path/filepath"
)

// CUDARuntime is the registry id of ONNX Runtime with its CUDA provider (`parley doctor --gpu`).
const CUDARuntime = "onnxruntime-cuda"

// RuntimeLibrary is the core library of the installed CUDA runtime (CUDARuntime) under
// modelsDir, or "" when it is not installed whole (every file there at its pinned size): the
// library Parley loads when the configuration names none, so that a machine set up for the
// GPU uses it. A runtime cannot change inside a running process: it is used from the next start.
func RuntimeLibrary(reg *Registry, modelsDir string) string {
	if reg == nil {
		return ""
	}
	m, err := reg.Lookup(CUDARuntime)
	if err != nil || m.Kind != KindRuntime {
		return ""
	}
	dir := filepath.Join(modelsDir, filepath.FromSlash(m.Dir))
	core := ""
	for _, f := range m.Files {
		st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil || f.Size > 0 && st.Size() != f.Size {
			return ""
		}
		if filepath.Base(f.Path) == "libonnxruntime.so.1" {
			core = filepath.Join(dir, filepath.FromSlash(f.Path))
		}
	}
	return core
}
