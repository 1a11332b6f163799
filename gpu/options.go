package gpu

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// Options chooses how an engine's sessions run. The zero value means: automatic provider,
// one intra-op thread per physical core, one inter-op thread, full graph optimisation.
type Options struct {
	Provider       string // "auto" (or "") | "cpu" | "cuda" | "cuda:N" | "tensorrt" | "tensorrt:N"
	IntraOpThreads int    // 0 = DefaultIntraOpThreads (physical cores less one)
	InterOpThreads int    // 0 = 1
	// Optimization is "all" (default), "extended", "basic" or "none".
	Optimization string
}

// Provider kinds.
const (
	ProviderAuto     = "auto"
	ProviderCPU      = "cpu"
	ProviderCUDA     = "cuda"
	ProviderTensorRT = "tensorrt"
)

// ProviderSpec is a parsed provider choice.
type ProviderSpec struct {
	Kind   string
	Device int
}

func (p ProviderSpec) String() string {
	if p.Kind == ProviderCUDA || p.Kind == ProviderTensorRT {
		return fmt.Sprintf("%s:%d", p.Kind, p.Device)
	}
	return p.Kind
}

// ParseProvider parses "auto | cpu | cuda[:N] | tensorrt[:N]".
func ParseProvider(s string) (ProviderSpec, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return ProviderSpec{Kind: ProviderAuto}, nil
	}
	kind, dev, hasDev := strings.Cut(s, ":")
	switch kind {
	case ProviderAuto, ProviderCPU:
		if hasDev {
			return ProviderSpec{}, fmt.Errorf("provider %q: %s takes no device index", s, kind)
		}
		return ProviderSpec{Kind: kind}, nil
	case ProviderCUDA, ProviderTensorRT:
		p := ProviderSpec{Kind: kind}
		if hasDev {
			n, err := strconv.Atoi(dev)
			if err != nil || n < 0 {
				return ProviderSpec{}, fmt.Errorf("provider %q: device index must be a number ≥ 0", s)
			}
			p.Device = n
		}
		return p, nil
	}
	return ProviderSpec{}, fmt.Errorf("provider %q: want auto, cpu, cuda, cuda:N, tensorrt or tensorrt:N", s)
}

// Plan is the provider a session will try, or the reason it runs on the CPU instead.
type Plan struct {
	Want     ProviderSpec
	Use      ProviderSpec
	Fallback string // why Use differs from Want; empty when it does not
}

// providerLibrary is the plug-in library ONNX Runtime loads for a GPU provider; it must sit
// next to libonnxruntime.
func providerLibrary(kind string) string {
	if kind == ProviderTensorRT {
		return "libonnxruntime_providers_tensorrt.so"
	}
	return "libonnxruntime_providers_cuda.so"
}

// PlanProvider decides, without touching the GPU, which provider a session should use: the
// requested one when its provider library, the NVIDIA driver and the device are all there,
// else the CPU with the reason. "auto" picks CUDA when it could work and the CPU otherwise.
func PlanProvider(spec ProviderSpec, libPath string, gpus GPUReport) Plan {
	p := Plan{Want: spec, Use: spec}
	cpu := func(reason string) Plan {
		p.Use = ProviderSpec{Kind: ProviderCPU}
		p.Fallback = reason
		return p
	}
	switch spec.Kind {
	case ProviderCPU:
		return p
	case ProviderAuto:
		want := ProviderSpec{Kind: ProviderCUDA}
		q := PlanProvider(want, libPath, gpus)
		q.Want = spec
		if q.Use.Kind == ProviderCPU {
			q.Fallback = "" // the CPU is a normal answer for auto, not a fallback
		}
		return q
	}
	if len(gpus.Devices) == 0 {
		reason := gpus.Reason
		if reason == "" {
			reason = "no NVIDIA GPU"
		}
		return cpu(reason)
	}
	if spec.Device >= len(gpus.Devices) {
		return cpu(fmt.Sprintf("GPU %d requested but only %d found", spec.Device, len(gpus.Devices)))
	}
	lib := filepath.Join(filepath.Dir(libPath), providerLibrary(spec.Kind))
	if _, err := os.Stat(lib); err != nil {
		return cpu(fmt.Sprintf("this ONNX Runtime build has no %s provider (%s not found; `parley doctor --gpu` installs one)", spec.Kind, lib))
	}
	if core := Version(); core != "" && libPath == LibraryPath() {
		if why := versionMismatch(lib, libPath, core); why != "" {
			return cpu(why)
		}
	}
	if missing := missingOnce(lib); len(missing) > 0 {
		names := make([]string, len(missing))
		for i, m := range missing {
			names[i] = m.Name + " (" + m.What + ")"
		}
		return cpu(fmt.Sprintf("the %s provider needs %s, which the loader does not find; %s", spec.Kind, strings.Join(names, ", "), InstallLine(missing)))
	}
	return p
}

// versionMismatch says why provider lib cannot serve the core library libPath of version core
// (it embeds another ONNX Runtime version), or "" when it can or its version is unknown.
func versionMismatch(lib, libPath, core string) string {
	vs, err := ProviderVersions(lib)
	if err != nil || len(vs) == 0 || slices.Contains(vs, core) {
		return ""
	}
	return fmt.Sprintf("%s is ONNX Runtime %s but the core library %s is %s: a provider only works with its own version (`parley doctor --gpu` installs a matched pair)",
		lib, vs[0], libPath, core)
}

var missingCache sync.Map // provider path → []MissingLib

// missingOnce is MissingForProvider, asked once per provider library and process.
func missingOnce(lib string) []MissingLib {
	if v, ok := missingCache.Load(lib); ok {
		return v.([]MissingLib)
	}
	m, err := MissingForProvider(lib)
	if err != nil {
		m = nil // not an ELF library (a test's stand-in): the session's own error will say
	}
	missingCache.Store(lib, m)
	return m
}

// AvailableProviders lists the execution providers this ONNX Runtime build can offer:
// always CPU, plus CUDA and TensorRT when their provider libraries sit beside it.
func AvailableProviders() []string {
	out := []string{"CPUExecutionProvider"}
	if env.path == "" {
		return out
	}
	dir := filepath.Dir(env.path)
	for _, k := range []string{ProviderCUDA, ProviderTensorRT} {
		if _, err := os.Stat(filepath.Join(dir, providerLibrary(k))); err == nil {
			out = append(out, map[string]string{ProviderCUDA: "CUDAExecutionProvider", ProviderTensorRT: "TensorrtExecutionProvider"}[k])
		}
	}
	return out
}

// newSessionOptions builds ONNX Runtime session options for a plan.
func newSessionOptions(o Options, use ProviderSpec) (*ort.SessionOptions, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	fail := func(err error) (*ort.SessionOptions, error) {
		so.Destroy()
		return nil, err
	}
	intra := o.IntraOpThreads
	if intra <= 0 {
		intra = DefaultIntraOpThreads()
	}
	inter := o.InterOpThreads
	if inter <= 0 {
		inter = 1
	}
	if err := so.SetIntraOpNumThreads(intra); err != nil {
		return fail(fmt.Errorf("intra-op threads %d: %w", intra, err))
	}
	if err := so.SetInterOpNumThreads(inter); err != nil {
		return fail(fmt.Errorf("inter-op threads %d: %w", inter, err))
	}
	level, err := optimizationLevel(o.Optimization)
	if err != nil {
		return fail(err)
	}
	if err := so.SetGraphOptimizationLevel(level); err != nil {
		return fail(fmt.Errorf("graph optimisation: %w", err))
	}
	switch use.Kind {
	case ProviderCUDA:
		cuda, err := ort.NewCUDAProviderOptions()
		if err != nil {
			return fail(fmt.Errorf("CUDA provider options: %w", err))
		}
		defer cuda.Destroy()
		if err := cuda.Update(map[string]string{"device_id": strconv.Itoa(use.Device)}); err != nil {
			return fail(fmt.Errorf("CUDA provider options: %w", err))
		}
		if err := so.AppendExecutionProviderCUDA(cuda); err != nil {
			return fail(fmt.Errorf("CUDA provider: %w", err))
		}
	case ProviderTensorRT:
		trt, err := ort.NewTensorRTProviderOptions()
		if err != nil {
			return fail(fmt.Errorf("TensorRT provider options: %w", err))
		}
		defer trt.Destroy()
		if err := trt.Update(map[string]string{"device_id": strconv.Itoa(use.Device)}); err != nil {
			return fail(fmt.Errorf("TensorRT provider options: %w", err))
		}
		if err := so.AppendExecutionProviderTensorRT(trt); err != nil {
			return fail(fmt.Errorf("TensorRT provider: %w", err))
		}
	}
	return so, nil
}

func optimizationLevel(s string) (ort.GraphOptimizationLevel, error) {
	switch strings.ToLower(s) {
	case "", "all":
		return ort.GraphOptimizationLevelEnableAll, nil
	case "extended":
		return ort.GraphOptimizationLevelEnableExtended, nil
	case "basic":
		return ort.GraphOptimizationLevelEnableBasic, nil
	case "none", "disable":
		return ort.GraphOptimizationLevelDisableAll, nil
	}
	return 0, fmt.Errorf("graph optimisation %q: want all, extended, basic or none", s)
}

// DefaultIntraOpThreads is the intra-op thread count of a session that names none: the physical
// cores less one, at least one. The one left is for what runs beside inference in an assistant
// (audio callbacks, VAD, the UI): ONNX Runtime's pool spins its threads between operators and
// would take it. The cost is small where it matters most: the official-size ChatTTS GPT in int8
// went from 9.8 to 8.3 ms per code frame with a second thread on an idle 2-core machine
// (BenchmarkPrecision), and fp32 from 28.2 to 23.0.
func DefaultIntraOpThreads() int { return max(1, PhysicalCores()-1) }

// PhysicalCores counts physical CPU cores from /proc/cpuinfo (hyper-threads share a core and
// slow each other down in GEMM-heavy inference), falling back to the logical count.
func PhysicalCores() int {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.NumCPU()
	}
	defer f.Close()
	cores := map[string]bool{}
	var phys string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "physical id":
			phys = strings.TrimSpace(v)
		case "core id":
			cores[phys+"/"+strings.TrimSpace(v)] = true
		}
	}
	n := len(cores)
	if n == 0 || n > runtime.NumCPU() {
		return runtime.NumCPU()
	}
	return n
}

func logFallback(path string, p Plan) {
	if p.Fallback != "" {
		slog.Warn("execution provider unavailable, using CPU", "model", path, "wanted", p.Want.String(), "reason", p.Fallback)
	}
}
