package gpu

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeORT builds a shared library that exports OrtGetApiBase like ONNX Runtime does, reporting
// the given version and providing the C API only up to maxAPI.
func fakeORT(t *testing.T, version string, maxAPI int) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not available")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "fake.c")
	code := `
static int api_table;
static const void* get_api(unsigned int v) { return v <= MAXAPI ? (const void*)&api_table : 0; }
static const char* get_version(void) { return VERSION; }
static struct { const void* (*a)(unsigned int); const char* (*b)(void); } base = { get_api, get_version };
const void* OrtGetApiBase(void) { return &base; }
`
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "libonnxruntime.so.1")
	cmd := exec.Command("gcc", "-shared", "-fPIC", "-o", lib, src,
		"-DVERSION=\""+version+"\"", "-DMAXAPI="+strconv.Itoa(maxAPI))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return lib
}

func TestCheckLibraryVersionGate(t *testing.T) {
	tests := []struct {
		name    string
		version string
		maxAPI  int
		wantErr error
	}{
		{"pinned", "1.30.0", 30, nil},
		{"minimum", "1.29.0", 29, nil},
		{"too old", "1.17.1", 17, ErrVersion},
		{"new version string but old API", "1.29.0", 28, ErrVersion},
		{"prerelease of a new version", "1.31.0-dev", 31, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lib := fakeORT(t, tc.version, tc.maxAPI)
			got, err := CheckLibrary(lib)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("CheckLibrary: err = %v, want %v", err, tc.wantErr)
			}
			if got != tc.version {
				t.Errorf("version = %q, want %q", got, tc.version)
			}
			if err != nil {
				msg := err.Error()
				for _, want := range []string{lib, tc.version, minVersion, "PARLEY_ORT_LIB"} {
					if !strings.Contains(msg, want) {
						t.Errorf("error %q does not mention %q", msg, want)
					}
				}
				if strings.Contains(msg, "\n") {
					t.Errorf("error should be one line: %q", msg)
				}
			}
		})
	}
}

func TestCheckLibraryNotORT(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "libonnxruntime.so.1")
	if err := os.WriteFile(garbage, []byte("this is not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{garbage, filepath.Join(dir, "missing.so"), "libc.so.6"} {
		_, err := CheckLibrary(path)
		if !errors.Is(err, ErrNoLibrary) {
			t.Errorf("CheckLibrary(%s) = %v, want ErrNoLibrary", path, err)
		}
		if err != nil && !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name %s", err, path)
		}
	}
}

func TestLibraryCandidates(t *testing.T) {
	t.Setenv("PARLEY_ORT_LIB", "/opt/ort/libonnxruntime.so")
	if got := LibraryCandidates(); len(got) != 1 || got[0] != "/opt/ort/libonnxruntime.so" {
		t.Errorf("explicit PARLEY_ORT_LIB: candidates = %v", got)
	}
	t.Setenv("PARLEY_ORT_LIB", "")
	t.Setenv("PARLEY_CACHE", "/tmp/pc")
	got := LibraryCandidates()
	if want := "/tmp/pc/ort/" + PinnedVersion + "/libonnxruntime.so.1"; got[0] != want {
		t.Errorf("first candidate = %s, want the set-up cache %s", got[0], want)
	}
	t.Setenv("PARLEY_ORT_LIB", filepath.Join(t.TempDir(), "nope.so"))
	if _, err := findLibrary(); !errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), "nope.so") {
		t.Errorf("findLibrary with a missing PARLEY_ORT_LIB = %v", err)
	}
}

func TestVersionAtLeast(t *testing.T) {
	tests := []struct {
		have, want string
		ok         bool
	}{
		{"1.30.0", "1.29.0", true},
		{"1.29.0", "1.29.0", true},
		{"1.28.9", "1.29.0", false},
		{"2.0.0", "1.29.0", true},
		{"1.100.0", "1.29.0", true},
		{"garbage", "1.29.0", false},
		{"1.29", "1.29.0", true},
	}
	for _, tc := range tests {
		if got := versionAtLeast(tc.have, tc.want); got != tc.ok {
			t.Errorf("versionAtLeast(%q, %q) = %v, want %v", tc.have, tc.want, got, tc.ok)
		}
	}
}

// ONNX Runtime's own usage telemetry (model names and metadata queued for upload under
// ~/.cache/Microsoft) stays off: a process that loads and runs a model leaves nothing there.
func TestNoRuntimeTelemetry(t *testing.T) {
	if os.Getenv("PARLEY_TELEMETRY_CHILD") == "1" {
		if err := Init(); err != nil {
			t.Skip(err)
		}
		s, err := Open("testdata/scale.onnx", nil, nil, Options{Provider: ProviderCPU, IntraOpThreads: 1})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		return
	}
	if err := Init(); err != nil {
		t.Skipf("ONNX Runtime unavailable: %v", err)
	}
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestNoRuntimeTelemetry$", "-test.v")
	vars := []string{"PARLEY_TELEMETRY_CHILD=1", "HOME=" + home, "XDG_CACHE_HOME=", "PARLEY_ORT_LIB=" + env.path}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "HOME" && k != "XDG_CACHE_HOME" && k != "PARLEY_ORT_LIB" && k != "ORT_DISABLE_TELEMETRY" {
			vars = append(vars, kv)
		}
	}
	cmd.Env = vars
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var left []string
	filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("ONNX Runtime wrote %v", left)
	}
}
