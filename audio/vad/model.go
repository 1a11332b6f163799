// Package vad finds speech in audio with Silero VAD v5 (ONNX Runtime): a streaming Detector
// that turns audio into speech-start and speech-end events with sample-accurate boundaries,
// and an offline Segments for whole recordings.
package vad

import (
	"errors"
	"fmt"
	"path/filepath"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu"
)

// Errors.
var (
	ErrBadModel = errors.New("vad: bad model")
	ErrRate     = errors.New("vad: unsupported sample rate")
	ErrClosed   = errors.New("vad: model pool closed")
)

// DefaultModel is the Silero VAD v5 file under the models directory.
func DefaultModel() string {
	return filepath.Join(assets.ModelsDir(), "silero-vad-v5", "silero_vad.onnx")
}

// Window is the number of new samples per model call at rate (512 at 16 kHz, 256 at 8 kHz).
func Window(rate int) int {
	if rate == 8000 {
		return 256
	}
	return 512
}

// context is the number of previous samples Silero v5 expects in front of each window.
func contextLen(rate int) int {
	if rate == 8000 {
		return 32
	}
	return 64
}

// Model is one Silero VAD v5 stream: it carries the recurrent state and the 64-sample
// context from window to window. Not safe for concurrent use; open one per stream.
type Model struct {
	sess   *gpu.Session
	rate   int
	win    int
	ctxLen int
	input  *ort.Tensor[float32] // (1, ctx+win): context then the new window
	state  *ort.Tensor[float32] // (2, 1, 128)
	sr     *ort.Scalar[int64]
	out    *ort.Tensor[float32] // (1, 1)
	stateN *ort.Tensor[float32] // (2, 1, 128)
	ins    []ort.Value
	outs   []ort.Value
}

// OpenModel loads the model at path (DefaultModel() if empty) for rate 16000 or 8000. opts
// with an empty Provider runs on the CPU with one thread (the model is tiny; more threads
// only cost).
func OpenModel(path string, rate int, opts gpu.Options) (*Model, error) {
	if rate != 16000 && rate != 8000 {
		return nil, fmt.Errorf("%w: %d Hz (Silero VAD takes 16000 or 8000)", ErrRate, rate)
	}
	if path == "" {
		path = DefaultModel()
	}
	if err := gpu.Init(); err != nil {
		return nil, err
	}
	info, err := gpu.Inspect(path)
	if err != nil {
		return nil, fmt.Errorf("vad: %w", err)
	}
	if err := checkModel(info); err != nil {
		return nil, err
	}
	if opts.Provider == "" {
		opts.Provider = gpu.ProviderCPU
	}
	if opts.IntraOpThreads == 0 {
		opts.IntraOpThreads = 1
	}
	sess, err := gpu.OpenInfo(info, []string{"input", "state", "sr"}, []string{"output", "stateN"}, opts)
	if err != nil {
		return nil, fmt.Errorf("vad: %w", err)
	}
	m := &Model{sess: sess, rate: rate, win: Window(rate), ctxLen: contextLen(rate)}
	if err := m.alloc(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func checkModel(info *gpu.ModelInfo) error {
	want := []struct {
		name, typ string
		rank      int
		in        bool
	}{
		{"input", "float32", 2, true}, {"state", "float32", 3, true}, {"sr", "int64", 0, true},
		{"output", "float32", 2, false}, {"stateN", "float32", 3, false},
	}
	for _, w := range want {
		var t gpu.TensorInfo
		var ok bool
		if w.in {
			t, ok = info.Input(w.name)
		} else {
			t, ok = info.Output(w.name)
		}
		if !ok {
			return fmt.Errorf("%w: %s has no tensor %q (want Silero VAD v5: input, state, sr → output, stateN; have %v → %v)",
				ErrBadModel, info.Path, w.name, info.Inputs, info.Outputs)
		}
		if t.Type != w.typ || len(t.Shape) != w.rank {
			return fmt.Errorf("%w: %s: tensor %q is %s%v, want %s of rank %d (Silero VAD v5)", ErrBadModel, info.Path, w.name, t.Type, t.Shape, w.typ, w.rank)
		}
	}
	if s, _ := info.Input("state"); s.Shape[0] != 2 || s.Shape[2] != 128 {
		return fmt.Errorf("%w: %s: state is %v, want [2 N 128] (Silero VAD v5; v4 models have h and c)", ErrBadModel, info.Path, s.Shape)
	}
	return nil
}

func (m *Model) alloc() error {
	var err error
	if m.input, err = ort.NewEmptyTensor[float32](ort.NewShape(1, int64(m.ctxLen+m.win))); err != nil {
		return err
	}
	if m.state, err = ort.NewEmptyTensor[float32](ort.NewShape(2, 1, 128)); err != nil {
		return err
	}
	if m.sr, err = ort.NewScalar(int64(m.rate)); err != nil {
		return err
	}
	if m.out, err = ort.NewEmptyTensor[float32](ort.NewShape(1, 1)); err != nil {
		return err
	}
	if m.stateN, err = ort.NewEmptyTensor[float32](ort.NewShape(2, 1, 128)); err != nil {
		return err
	}
	m.ins = []ort.Value{m.input, m.state, m.sr}
	m.outs = []ort.Value{m.out, m.stateN}
	return nil
}

// Rate is the sample rate the model runs at.
func (m *Model) Rate() int { return m.rate }

// Window is the number of samples Prob takes.
func (m *Model) Window() int { return m.win }

// Prob returns the speech probability of the next window (exactly Window() samples) and
// advances the state.
func (m *Model) Prob(window []float32) (float32, error) {
	if len(window) != m.win {
		return 0, fmt.Errorf("vad: window of %d samples, want %d at %d Hz", len(window), m.win, m.rate)
	}
	in := m.input.GetData()
	copy(in[m.ctxLen:], window)
	if err := m.sess.Run(m.ins, m.outs); err != nil {
		return 0, fmt.Errorf("vad: running model: %w", err)
	}
	copy(m.state.GetData(), m.stateN.GetData())
	copy(in[:m.ctxLen], in[len(in)-m.ctxLen:]) // the context for the next window
	return m.out.GetData()[0], nil
}

// Reset clears the state and context (a new stream).
func (m *Model) Reset() {
	clear(m.input.GetData())
	clear(m.state.GetData())
}

// Close releases the session and tensors.
func (m *Model) Close() error {
	for _, v := range []interface{ Destroy() error }{m.input, m.state, m.out, m.stateN} {
		if v != nil && !isNil(v) {
			v.Destroy()
		}
	}
	if m.sr != nil {
		m.sr.Destroy()
	}
	if m.sess != nil {
		return m.sess.Close()
	}
	return nil
}

func isNil(v interface{ Destroy() error }) bool {
	switch t := v.(type) {
	case *ort.Tensor[float32]:
		return t == nil
	}
	return false
}
