package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"
)

// releaseDelay is how long after a model load the memory its loading freed goes back to the
// kernel.
const releaseDelay = 3 * time.Second

// ErrBadModel is wrapped by every model validation error.
var ErrBadModel = errors.New("bad model")

// TensorInfo describes one model input or output.
type TensorInfo struct {
	Name  string
	Type  string  // element type: "float32", "int64", "int32", …
	Shape []int64 // -1 for a dynamic dimension
}

func (t TensorInfo) String() string { return fmt.Sprintf("%s %s%v", t.Name, t.Type, t.Shape) }

// ModelInfo is what a model file declares: its inputs, outputs and custom metadata.
type ModelInfo struct {
	Path     string
	Inputs   []TensorInfo
	Outputs  []TensorInfo
	Metadata map[string]string
	// ExternalData are the files, relative to the model's directory, that its initializers
	// keep their weights in (each named once, in the order first met); nil when all weights
	// are in the file.
	ExternalData []string
	// Initializers are the graph's constant tensors by name, with their element type and
	// dimensions (the data itself is not read).
	Initializers map[string]TensorInfo
	// Nodes are the graph's operators in file order (not those of subgraphs or functions).
	Nodes []Node
}

// Node is one operator of a graph.
type Node struct {
	Op      string
	Domain  string // "" = the ONNX domain
	Inputs  []string
	Outputs []string
}

// Inspect reads a model's inputs, outputs and custom metadata from the file itself. It needs
// no ONNX Runtime and builds no session, so engines can validate a model before they load it,
// and load it once (OpenInfo). Shapes are as the file declares them: an output dimension
// left symbolic is -1 even where ONNX Runtime's shape inference could work it out.
func Inspect(path string) (*ModelInfo, error) {
	info, err := readModelInfo(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a readable ONNX model: %w", ErrBadModel, path, err)
	}
	return info, nil
}

func elementType(t ort.TensorElementDataType) string {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return "float32"
	case ort.TensorElementDataTypeDouble:
		return "float64"
	case ort.TensorElementDataTypeFloat16:
		return "float16"
	case ort.TensorElementDataTypeInt64:
		return "int64"
	case ort.TensorElementDataTypeInt32:
		return "int32"
	case ort.TensorElementDataTypeInt16:
		return "int16"
	case ort.TensorElementDataTypeInt8:
		return "int8"
	case ort.TensorElementDataTypeUint8:
		return "uint8"
	case ort.TensorElementDataTypeBool:
		return "bool"
	case ort.TensorElementDataTypeString:
		return "string"
	}
	return strings.ToLower(t.String())
}

// Input returns the named input.
func (m *ModelInfo) Input(name string) (TensorInfo, bool) { return find(m.Inputs, name) }

// Output returns the named output.
func (m *ModelInfo) Output(name string) (TensorInfo, bool) { return find(m.Outputs, name) }

func find(ts []TensorInfo, name string) (TensorInfo, bool) {
	i := slices.IndexFunc(ts, func(t TensorInfo) bool { return t.Name == name })
	if i < 0 {
		return TensorInfo{}, false
	}
	return ts[i], true
}

// RequireInputs fails, naming the file, unless the model has every named input.
func (m *ModelInfo) RequireInputs(names ...string) error { return m.require("input", m.Inputs, names) }

// RequireOutputs fails, naming the file, unless the model has every named output.
func (m *ModelInfo) RequireOutputs(names ...string) error {
	return m.require("output", m.Outputs, names)
}

func (m *ModelInfo) require(what string, have []TensorInfo, names []string) error {
	var missing []string
	for _, n := range names {
		if _, ok := find(have, n); !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var got []string
	for _, t := range have {
		got = append(got, t.String())
	}
	return fmt.Errorf("%w: %s has no %s %s (it has: %s)", ErrBadModel, m.Path, what,
		strings.Join(missing, ", "), strings.Join(got, "; "))
}

// RequireType fails unless the named input or output has the element type want.
func (m *ModelInfo) RequireType(name, want string) error {
	t, ok := m.Input(name)
	if !ok {
		t, ok = m.Output(name)
	}
	if !ok {
		return fmt.Errorf("%w: %s has no tensor %s", ErrBadModel, m.Path, name)
	}
	if t.Type != want {
		return fmt.Errorf("%w: %s: %s is %s, want %s", ErrBadModel, m.Path, name, t.Type, want)
	}
	return nil
}

// Meta returns a custom metadata value.
func (m *ModelInfo) Meta(key string) (string, bool) {
	v, ok := m.Metadata[key]
	return v, ok
}

// MetaInt returns a custom metadata value as an integer.
func (m *ModelInfo) MetaInt(key string) (int, error) {
	v, ok := m.Metadata[key]
	if !ok {
		return 0, fmt.Errorf("%w: %s: metadata %q missing", ErrBadModel, m.Path, key)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%w: %s: metadata %q = %q is not an integer", ErrBadModel, m.Path, key, v)
	}
	return n, nil
}

// MetaFloats returns a comma-separated custom metadata value as floats.
func (m *ModelInfo) MetaFloats(key string) ([]float32, error) {
	v, ok := m.Metadata[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s: metadata %q missing", ErrBadModel, m.Path, key)
	}
	parts := strings.Split(strings.TrimSpace(v), ",")
	out := make([]float32, 0, len(parts))
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: metadata %q item %d (%q) is not a number", ErrBadModel, m.Path, key, i, p)
		}
		out = append(out, float32(f))
	}
	return out, nil
}

// Session is an open model. Run it through the embedded DynamicAdvancedSession; it is safe
// for concurrent Run calls, as ONNX Runtime sessions are.
type Session struct {
	*ort.DynamicAdvancedSession
	Info     *ModelInfo
	Provider string // the provider actually in use, e.g. "cpu" or "cuda:0"
	once     sync.Once
}

// Open loads a model for inference. inputs and outputs name the tensors the caller will
// bind, in order; nil means all of the model's, in the model's order. The model must declare
// every name. A GPU provider that cannot be used falls back to the CPU with a logged reason.
func Open(path string, inputs, outputs []string, opts Options) (*Session, error) {
	info, err := Inspect(path)
	if err != nil {
		return nil, err
	}
	return OpenInfo(info, inputs, outputs, opts)
}

// OpenInfo is Open for a model already inspected: the file's declarations are not read again,
// and the model is loaded once, into the session.
func OpenInfo(info *ModelInfo, inputs, outputs []string, opts Options) (*Session, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	path := info.Path
	if inputs == nil {
		inputs = names(info.Inputs)
	}
	if outputs == nil {
		outputs = names(info.Outputs)
	}
	if err := info.RequireInputs(inputs...); err != nil {
		return nil, err
	}
	if err := info.RequireOutputs(outputs...); err != nil {
		return nil, err
	}
	spec, err := ParseProvider(opts.Provider)
	if err != nil {
		return nil, err
	}
	var gpus GPUReport
	if spec.Kind != ProviderCPU {
		gpus, _ = DiscoverGPUs() // failures already say "no GPU" in Reason
	}
	plan := PlanProvider(spec, env.path, gpus)
	logFallback(path, plan)
	sess, err := openWith(path, inputs, outputs, opts, plan.Use)
	if err != nil && plan.Use.Kind != ProviderCPU {
		plan.Fallback = err.Error()
		plan.Use = ProviderSpec{Kind: ProviderCPU}
		logFallback(path, plan)
		sess, err = openWith(path, inputs, outputs, opts, plan.Use)
	}
	if err != nil {
		return nil, err
	}
	// Later and in the background: a one-shot command (a short transcription) is done by
	// then and pays nothing; a long-running process gets the memory back.
	time.AfterFunc(releaseDelay, releaseFreed)
	return &Session{DynamicAdvancedSession: sess, Info: info, Provider: plan.Use.String()}, nil
}

func openWith(path string, inputs, outputs []string, opts Options, use ProviderSpec) (*ort.DynamicAdvancedSession, error) {
	var sess *ort.DynamicAdvancedSession
	create := func() error {
		so, err := newSessionOptions(opts, use)
		if err != nil {
			return err
		}
		defer so.Destroy()
		sess, err = ort.NewDynamicAdvancedSession(path, inputs, outputs, so)
		if err == nil {
			env.loads.Add(1)
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBadModel, path, err)
		}
		return nil
	}
	if use.Kind == ProviderCPU {
		return sess, create()
	}
	// GPU provider libraries may replace Go's signal handlers while they initialise.
	_, err := withGoSignals(create)
	return sess, err
}

func names(ts []TensorInfo) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// Close releases the session. It is safe to call more than once.
func (s *Session) Close() error {
	var err error
	s.once.Do(func() { err = s.DynamicAdvancedSession.Destroy() })
	return err
}

// QuantizedMatMuls checks a graph's dynamically quantized MatMuls, laid out as ONNX Runtime's
// quantize_dynamic and Parley's exporters (train/onnxquant.py) write them: the weight of each
// MatMulInteger (its second input) is an 8-bit initializer "W_quantized" of two dimensions
// [K, N], and its scale "W_scale" a float32 initializer of one value or N (one per output
// column). It returns how many there are; an error names the first tensor that is missing or
// misshaped, so a damaged export is refused at load instead of speaking noise.
func (m *ModelInfo) QuantizedMatMuls() (int, error) {
	n := 0
	for _, nd := range m.Nodes {
		if nd.Op != "MatMulInteger" || (nd.Domain != "" && nd.Domain != "ai.onnx") {
			continue
		}
		n++
		if len(nd.Inputs) < 2 {
			return n, fmt.Errorf("%w: %s: a MatMulInteger has %d inputs", ErrBadModel, m.Path, len(nd.Inputs))
		}
		wn := nd.Inputs[1]
		w, ok := m.Initializers[wn]
		if !ok || !strings.HasSuffix(wn, "_quantized") {
			return n, fmt.Errorf("%w: %s: quantized weight %q is not a constant named W_quantized", ErrBadModel, m.Path, wn)
		}
		if (w.Type != "int8" && w.Type != "uint8") || len(w.Shape) != 2 || w.Shape[0] < 1 || w.Shape[1] < 1 {
			return n, fmt.Errorf("%w: %s: quantized weight %s is %s%v (want int8 or uint8 [K N])", ErrBadModel, m.Path, wn, w.Type, w.Shape)
		}
		sn := strings.TrimSuffix(wn, "_quantized") + "_scale"
		s, ok := m.Initializers[sn]
		if !ok {
			return n, fmt.Errorf("%w: %s: the scale %s of quantized weight %s is missing", ErrBadModel, m.Path, sn, wn)
		}
		perTensor := len(s.Shape) == 0 || (len(s.Shape) == 1 && s.Shape[0] == 1)
		if s.Type != "float32" || !(perTensor || (len(s.Shape) == 1 && s.Shape[0] == w.Shape[1])) {
			return n, fmt.Errorf("%w: %s: the scale %s is %s%v (want float32 [1] or [%d] for weight %s%v)",
				ErrBadModel, m.Path, sn, s.Type, s.Shape, w.Shape[1], wn, w.Shape)
		}
	}
	return n, nil
}

// PlanFor is the provider sessions opened with opts will try (OpenInfo's plan), for callers
// that pick a model variant by provider before opening it.
func PlanFor(opts Options) (Plan, error) {
	if err := Init(); err != nil {
		return Plan{}, err
	}
	spec, err := ParseProvider(opts.Provider)
	if err != nil {
		return Plan{}, err
	}
	var gpus GPUReport
	if spec.Kind != ProviderCPU {
		gpus, _ = DiscoverGPUs()
	}
	return PlanProvider(spec, env.path, gpus), nil
}
