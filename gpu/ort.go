// Package gpu owns the inference runtime: the one ONNX Runtime environment of the process
// (library discovery and a version gate), NVIDIA device discovery through NVML, and the
// session options every engine uses, with an execution-provider choice that falls back to
// the CPU with a logged reason.
package gpu

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	ort "github.com/yalue/onnxruntime_go"
)

// The binding (onnxruntime_go v1.35.0) asks the library for this C API version; libraries
// older than ONNX Runtime 1.29 do not have it.
const (
	requiredAPI = 29
	minVersion  = "1.29.0"
	// PinnedVersion is the library build/setup.sh installs.
	PinnedVersion = "1.30.0"
)

// ErrNoLibrary means no ONNX Runtime shared library was found.
var ErrNoLibrary = errors.New("ONNX Runtime library not found")

// ErrVersion means the library found is too old for the binding.
var ErrVersion = errors.New("ONNX Runtime library version mismatch")

// The process-wide ONNX Runtime environment: the one piece of package-level state Parley
// allows, because ONNX Runtime itself allows one environment per process.
var env struct {
	once    sync.Once
	err     error
	path    string
	version string
	loads   atomic.Int64           // sessions created (Loads)
	chosen  atomic.Pointer[string] // runtime.ort_library from the configuration (UseLibrary)
}

// UseLibrary makes path (the configuration's runtime.ort_library) the library Init loads
// unless $PARLEY_ORT_LIB names one; "" means no choice. It matters before the first Init
// only, and may be called from any goroutine (app/factory calls it for every engine).
func UseLibrary(path string) {
	if path == "" {
		env.chosen.Store(nil)
		return
	}
	env.chosen.Store(&path)
}

// Loads reports how many model sessions this process has created: each engine loads each of
// its models once, and tests hold it to that.
func Loads() int64 { return env.loads.Load() }

// LibraryCandidates lists where Init looks for libonnxruntime, in order: $PARLEY_ORT_LIB or
// the configured library (UseLibrary), else the private copy a package ships (PrivateLibDir, then /usr/lib/parley), the set-up cache,
// then system paths. The private copy comes first because it is the build Parley was packaged
// and tested with; a system library of another version is the last resort.
func LibraryCandidates() []string {
	if p := os.Getenv("PARLEY_ORT_LIB"); p != "" {
		return []string{p} // an explicit choice is never second-guessed
	}
	if p := env.chosen.Load(); p != nil {
		return []string{*p}
	}
	var c []string
	seen := map[string]bool{}
	add := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			c = append(c, p)
		}
	}
	if d := PrivateLibDir(); d != "" {
		add(filepath.Join(d, "libonnxruntime.so.1"))
	}
	add(filepath.Join(packageLibDir, "libonnxruntime.so.1"))
	add(filepath.Join(cacheDir(), "ort", PinnedVersion, "libonnxruntime.so.1"))
	for _, d := range []string{"/usr/local/lib", "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"} {
		add(filepath.Join(d, "libonnxruntime.so.1"))
		add(filepath.Join(d, "libonnxruntime.so"))
	}
	return c
}

// packageLibDir is where the Debian package installs its private libraries.
const packageLibDir = "/usr/lib/parley"

// PrivateLibDir is the private library directory of the installation the running program
// belongs to: lib/parley beside the bin directory that holds the executable (/usr/bin/parley
// → /usr/lib/parley, /usr/local/bin/parley from the tarball → /usr/local/lib/parley). It is
// "" when the executable is not in a directory named bin.
func PrivateLibDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return privateLibDir(exe)
}

func privateLibDir(exe string) string {
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	bin := filepath.Dir(exe)
	if filepath.Base(bin) != "bin" {
		return ""
	}
	return filepath.Join(filepath.Dir(bin), "lib", "parley")
}

// remedy says how to get a usable library, in the terms of how this Parley was installed:
// a package reinstalls, a source checkout runs its set-up, anything else points
// PARLEY_ORT_LIB at a library.
func remedy(exe string) string {
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	if d := privateLibDir(exe); d != "" {
		root := filepath.Dir(filepath.Dir(d))
		if _, err := os.Stat(filepath.Join(root, "build", "setup.sh")); err == nil {
			return fmt.Sprintf("run `make setup` in %s to fetch the pinned build %s, or set PARLEY_ORT_LIB", root, PinnedVersion)
		}
		if _, err := os.Stat(d); err == nil || strings.HasPrefix(exe, "/usr/") || strings.HasPrefix(exe, "/opt/") {
			return fmt.Sprintf("the copy Parley's package ships in %s is missing or damaged: reinstall the package (Debian/Ubuntu: sudo apt install --reinstall parley), or set PARLEY_ORT_LIB", d)
		}
	}
	return fmt.Sprintf("install Parley's package (it ships ONNX Runtime %s), or set PARLEY_ORT_LIB to libonnxruntime.so.1 of ONNX Runtime %s or newer", PinnedVersion, minVersion)
}

func exeRemedy() string {
	exe, err := os.Executable()
	if err != nil {
		return remedy("")
	}
	return remedy(exe)
}

// cacheDir mirrors assets.CacheDir; gpu is a leaf package and must not import assets.
func cacheDir() string {
	if d := os.Getenv("PARLEY_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "parley")
	}
	h, err := os.UserHomeDir()
	if err != nil {
		h = os.TempDir()
	}
	return filepath.Join(h, ".cache", "parley")
}

// Init loads ONNX Runtime once per process. It is safe to call from many goroutines; every
// call returns the first call's result.
func Init() error {
	env.once.Do(func() { env.err = initEnv() })
	return env.err
}

func initEnv() error {
	if tuneMalloc() == 0 {
		slog.Debug("malloc: mmap threshold not set")
	}
	path, err := findLibrary()
	if err != nil {
		return err
	}
	version, err := CheckLibrary(path)
	if err != nil {
		return err
	}
	// Parley is private. ONNX Runtime 1.29+ on Linux queues usage events (model file names and
	// metadata, the program's path) for upload to Microsoft in ~/.cache/Microsoft, which also
	// cost every start a SQLite write; only this variable, set before the environment is
	// created, turns that off completely. An explicit setting by the user is kept.
	if _, set := os.LookupEnv("ORT_DISABLE_TELEMETRY"); !set {
		os.Setenv("ORT_DISABLE_TELEMETRY", "1")
	}
	ort.SetSharedLibraryPath(path)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return fmt.Errorf("initialise ONNX Runtime %s from %s: %w", version, path, err)
	}
	if err := ort.DisableTelemetry(); err != nil {
		slog.Debug("onnx runtime telemetry", "err", err)
	}
	env.path, env.version = path, version
	slog.Debug("onnx runtime loaded", "path", path, "version", version)
	return nil
}

func findLibrary() (string, error) {
	cands := LibraryCandidates()
	for _, p := range cands {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if len(cands) == 1 {
		return "", fmt.Errorf("%w: PARLEY_ORT_LIB=%s does not exist", ErrNoLibrary, cands[0])
	}
	return "", fmt.Errorf("%w (looked in %s); %s", ErrNoLibrary, strings.Join(shortList(cands), ", "), exeRemedy())
}

// shortList is the candidates a message names: Parley's own places, not every system path.
func shortList(cands []string) []string {
	var out []string
	for _, c := range cands {
		if strings.Contains(c, "parley") {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return cands[:min(2, len(cands))]
	}
	return append(out, "system library paths")
}

// CheckLibrary loads the library at path and checks that the binding can use it, returning
// its version. It does not initialise the environment.
func CheckLibrary(path string) (string, error) {
	version, hasAPI, err := probeLibrary(path, requiredAPI)
	if err != nil {
		return "", fmt.Errorf("%w: cannot load %s: %v", ErrNoLibrary, path, err)
	}
	return version, checkVersion(path, version, hasAPI)
}

// checkVersion turns an API mismatch into a one-line explanation.
func checkVersion(path, version string, hasAPI bool) error {
	if hasAPI && versionAtLeast(version, minVersion) {
		return nil
	}
	return fmt.Errorf("%w: %s is ONNX Runtime %s, but Parley needs %s or newer (C API %d); %s",
		ErrVersion, path, version, minVersion, requiredAPI, exeRemedy())
}

// versionAtLeast compares dotted versions numerically; pre-release suffixes are ignored.
func versionAtLeast(have, want string) bool {
	hp, wp := versionParts(have), versionParts(want)
	for i := 0; i < 3; i++ {
		if hp[i] != wp[i] {
			return hp[i] > wp[i]
		}
	}
	return true
}

func versionParts(v string) [3]int {
	var out [3]int
	v, _, _ = strings.Cut(v, "-")
	for i, p := range strings.SplitN(v, ".", 3) {
		n, err := strconv.Atoi(strings.TrimFunc(p, func(r rune) bool { return r < '0' || r > '9' }))
		if err != nil {
			return [3]int{-1, -1, -1}
		}
		out[i] = n
	}
	return out
}

// LibraryPath is the path of the loaded library ("" before a successful Init).
func LibraryPath() string { return env.path }

// Version is the loaded library's version ("" before a successful Init).
func Version() string { return env.version }
