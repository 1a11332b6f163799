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
	UseLibrary("/etc/configured/libonnxruntime.so.1")
	if got := LibraryCandidates(); len(got) != 1 || got[0] != "/opt/ort/libonnxruntime.so" {
		t.Errorf("PARLEY_ORT_LIB and runtime.ort_library: candidates = %v, want the environment's", got)
	}
	t.Setenv("PARLEY_ORT_LIB", "")
	if got := LibraryCandidates(); len(got) != 1 || got[0] != "/etc/configured/libonnxruntime.so.1" {
		t.Errorf("runtime.ort_library: candidates = %v", got)
	}
	UseLibrary("")
	t.Setenv("PARLEY_CACHE", "/tmp/pc")
	got := LibraryCandidates()
	pos := map[string]int{}
	for i, c := range got {
		if _, dup := pos[c]; dup {
			t.Errorf("candidate %s listed twice: %v", c, got)
		}
		pos[c] = i
	}
	pkg, okPkg := pos["/usr/lib/parley/libonnxruntime.so.1"]
	cache, okCache := pos["/tmp/pc/ort/"+PinnedVersion+"/libonnxruntime.so.1"]
	sys, okSys := pos["/usr/lib/libonnxruntime.so.1"]
	if !okPkg || !okCache || !okSys || !(pkg < cache && cache < sys) {
		t.Errorf("candidates %v: want the package's private copy, then the set-up cache, then system paths", got)
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

func TestPrivateLibDir(t *testing.T) {
	tmp := t.TempDir()
	os.MkdirAll(filepath.Join(tmp, "opt", "bin"), 0o755)
	real := filepath.Join(tmp, "opt", "bin", "parley")
	os.WriteFile(real, nil, 0o755)
	link := filepath.Join(tmp, "parley-link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ exe, want string }{
		{"/usr/bin/parley", "/usr/lib/parley"},
		{"/usr/local/bin/parley", "/usr/local/lib/parley"},
		{"/home/u/.local/bin/parley", "/home/u/.local/lib/parley"},
		{link, filepath.Join(tmp, "opt", "lib", "parley")}, // a symlink is followed to the install
		{"/tmp/go-build1/b001/exe/parley", ""},
		{"/home/u/parley", ""},
	}
	for _, tc := range tests {
		if got := privateLibDir(tc.exe); got != tc.want {
			t.Errorf("privateLibDir(%s) = %q, want %q", tc.exe, got, tc.want)
		}
	}
}

// The remedy for a missing library fits how Parley was installed: no package user is told
// to run make.
func TestRemedyFitsInstall(t *testing.T) {
	src := t.TempDir() // a source checkout with bin/parley built in it
	os.MkdirAll(filepath.Join(src, "build"), 0o755)
	os.MkdirAll(filepath.Join(src, "bin"), 0o755)
	os.WriteFile(filepath.Join(src, "build", "setup.sh"), nil, 0o755)
	pkg := t.TempDir() // an unpacked package: bin/parley and lib/parley
	os.MkdirAll(filepath.Join(pkg, "bin"), 0o755)
	os.MkdirAll(filepath.Join(pkg, "lib", "parley"), 0o755)
	tests := []struct {
		name, exe string
		want      []string
		not       string
	}{
		{"source checkout", filepath.Join(src, "bin", "parley"), []string{"make setup", src}, "apt"},
		{"Debian package", "/usr/bin/parley", []string{"reinstall", "/usr/lib/parley", "PARLEY_ORT_LIB"}, "make"},
		{"unpacked tarball", filepath.Join(pkg, "bin", "parley"), []string{"reinstall", filepath.Join(pkg, "lib", "parley")}, "make"},
		{"go install", "/home/u/go/bin/parley", []string{"PARLEY_ORT_LIB", PinnedVersion}, "make"},
		{"go run", "/tmp/go-build1/b001/exe/parley", []string{"PARLEY_ORT_LIB"}, "make"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := remedy(tc.exe)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("remedy(%s) = %q, lacks %q", tc.exe, got, w)
				}
			}
			if strings.Contains(got, tc.not) {
				t.Errorf("remedy(%s) = %q mentions %q", tc.exe, got, tc.not)
			}
		})
	}
}
