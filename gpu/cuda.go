package gpu

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// A CUDA provider library needs NVIDIA's libraries, which Parley cannot ship: these checks say
// which ones the dynamic loader will not find, and how to install them.

// MissingLib is a shared library a provider needs that the loader cannot find.
type MissingLib struct {
	Name    string `json:"name"`    // libcudart.so.13
	What    string `json:"what"`    // CUDA 13 runtime
	Package string `json:"package"` // the Debian package of NVIDIA's CUDA repository that has it
}

// ProviderNeeds lists the libraries a provider library loads: its ELF dependencies, and those
// ONNX Runtime's CUDA provider opens itself at run time (cuDNN).
func ProviderNeeds(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gpu: %s is not a shared library: %w", path, err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("gpu: %s: reading its dependencies: %w", path, err)
	}
	if strings.Contains(filepath.Base(path), "cuda") {
		libs = append(libs, "libcudnn.so.9") // opened with dlopen when a model needs it
	}
	return libs, nil
}

// MissingForProvider is ProviderNeeds less what the loader finds: the provider's own
// directory, LD_LIBRARY_PATH, the ldconfig cache and CUDA's usual install directories.
func MissingForProvider(path string) ([]MissingLib, error) {
	needs, err := ProviderNeeds(path)
	if err != nil {
		return nil, err
	}
	dirs := []string{filepath.Dir(path)}
	dirs = append(dirs, filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))...)
	cache := ldconfigCache()
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu",
		"/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")
	cudaMajor := ""
	for _, n := range needs {
		if v, ok := strings.CutPrefix(n, "libcudart.so."); ok {
			cudaMajor = v
		}
	}
	var missing []MissingLib
	for _, n := range needs {
		if cache[n] || foundIn(n, dirs) {
			continue
		}
		what, pkg := describeLib(n, cudaMajor)
		missing = append(missing, MissingLib{Name: n, What: what, Package: pkg})
	}
	return missing, nil
}

func foundIn(name string, dirs []string) bool {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return true
		}
	}
	return false
}

// InstallLine is the command that installs the missing libraries (from NVIDIA's CUDA
// repository, which Debian does not carry for CUDA 13), or "" when nothing is missing.
func InstallLine(missing []MissingLib) string {
	var pkgs []string
	for _, m := range missing {
		if m.Package != "" && !slices.Contains(pkgs, m.Package) {
			pkgs = append(pkgs, m.Package)
		}
	}
	if len(pkgs) == 0 {
		return ""
	}
	return "sudo apt install " + strings.Join(pkgs, " ") + "   (from NVIDIA's CUDA repository: https://developer.nvidia.com/cuda-downloads, Linux › x86_64 › Debian)"
}

// describeLib names a CUDA library and its package; cuda is the CUDA major version the provider
// was built for ("13").
func describeLib(name, cuda string) (what, pkg string) {
	base, ver, _ := strings.Cut(name, ".so")
	ver = strings.TrimPrefix(ver, ".")
	if cuda == "" {
		cuda = ver
	}
	switch base {
	case "libcuda":
		return "the NVIDIA driver", "nvidia-driver"
	case "libcudart":
		return "CUDA " + ver + " runtime", "cuda-cudart-" + ver + "-0"
	case "libcublas", "libcublasLt":
		return "cuBLAS (CUDA " + ver + ")", "libcublas-" + ver + "-0"
	case "libcurand":
		return "cuRAND (CUDA " + cuda + ")", "libcurand-" + cuda + "-0"
	case "libcufft":
		return "cuFFT (CUDA " + cuda + ")", "libcufft-" + cuda + "-0"
	case "libnvrtc":
		return "NVRTC (CUDA " + ver + ")", "cuda-nvrtc-" + ver + "-0"
	case "libcudnn":
		if cuda == ver { // the CUDA version is not known
			return "cuDNN " + ver, "libcudnn" + ver
		}
		return "cuDNN " + ver + " for CUDA " + cuda, "libcudnn" + ver + "-cuda-" + cuda
	}
	return name, ""
}

// ldconfigCache is the set of library names the loader's cache holds (`ldconfig -p`); empty
// when ldconfig cannot be run.
func ldconfigCache() map[string]bool {
	for _, p := range []string{"/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"} {
		out, err := exec.Command(p, "-p").Output()
		if err == nil {
			return parseLdconfig(out)
		}
	}
	return map[string]bool{}
}

// parseLdconfig reads `ldconfig -p` output: a header line, then one line per library,
// "\tlibcudart.so.13 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.13".
func parseLdconfig(out []byte) map[string]bool {
	libs := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, " ") {
			continue
		}
		name, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !strings.Contains(rest, "=>") || !strings.HasPrefix(name, "lib") {
			continue
		}
		if tag := archTag[runtime.GOARCH]; tag == "" || strings.Contains(rest, tag) { // not another ABI's copy
			libs[name] = true
		}
	}
	return libs
}

// archTag is how `ldconfig -p` marks this architecture's libraries.
var archTag = map[string]string{"amd64": "x86-64", "arm64": "AArch64"}

// ortVersion matches the version string ONNX Runtime's libraries embed ("1.29.0").
var ortVersion = regexp.MustCompile(`\x00(1\.[0-9]{2}\.[0-9]+)\x00`)

var providerVersions sync.Map // path + size + mtime → []string

// ProviderVersions returns the ONNX Runtime version strings a provider library embeds (a scan
// of the file, cached per file for the process): a provider built as another version than the
// core library is refused (PlanProvider).
func ProviderVersions(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", path, st.Size(), st.ModTime().UnixNano())
	if v, ok := providerVersions.Load(key); ok {
		return v.([]string), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vs, err := scanVersions(f)
	if err != nil {
		return nil, fmt.Errorf("gpu: reading %s: %w", path, err)
	}
	providerVersions.Store(key, vs)
	return vs, nil
}

// scanVersions finds the NUL-delimited ONNX Runtime version strings in r, reading it in blocks
// that overlap by more than the longest match.
func scanVersions(r io.Reader) ([]string, error) {
	const block, overlap = 1 << 20, 32
	buf := make([]byte, 0, block+overlap)
	var found []string
	chunk := make([]byte, block)
	for {
		n, err := io.ReadFull(r, chunk)
		buf = append(buf, chunk[:n]...)
		for _, m := range ortVersion.FindAllSubmatch(buf, -1) {
			if v := string(m[1]); !slices.Contains(found, v) {
				found = append(found, v)
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return found, nil
		}
		if err != nil {
			return found, err
		}
		keep := buf[max(0, len(buf)-overlap):]
		buf = append(buf[:0], keep...)
	}
}
