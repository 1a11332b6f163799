// Package speaker turns speech into a speaker embedding with a model in the ONNX signature of
// CAM++ as CosyVoice and 3D-Speaker ship it (campplus.onnx): 80-bin Kaldi fbank frames (Povey
// window, samples in [-1, 1], the utterance's mean over time removed) in, one embedding
// (192 values for CAM++) out. Embeddings of the same voice point the same way: compare them
// with Cosine. Parley uses it to score how close a cloned or fine-tuned voice is to the
// person's recordings and to pick the closest seed voice as a starting point.
package speaker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/audio/fbank"
	"github.com/parley-voice/parley/gpu"
)

// SampleRate is the only input rate; resample first.
const SampleRate = fbank.SampleRate

// MinSamples is the shortest input: half a second (50 frames) says little about a voice,
// and less says nothing.
const MinSamples = SampleRate / 2

// Long inputs are embedded in windows and averaged, so memory stays bounded for an hour of
// audio and no window is so short that it says nothing.
const (
	windowFrames = 1000 // 10 s
	maxFrames    = 2000 // embed at once up to 20 s
)

var (
	// ErrBadModel: the file is not a speaker encoder in the expected signature.
	ErrBadModel = errors.New("speaker: bad model")
	// ErrTooShort: less than MinSamples of audio.
	ErrTooShort = errors.New("speaker: audio too short")
	// ErrClosed: the encoder was closed.
	ErrClosed = errors.New("speaker: encoder closed")
)

// badModel is an error of the runtime's that means the file is not a usable model; its
// message already names the file.
type badModel struct{ err error }

func (b badModel) Error() string        { return "speaker: " + b.err.Error() }
func (b badModel) Is(target error) bool { return target == ErrBadModel }
func (b badModel) Unwrap() error        { return b.err }

// Config chooses how the model runs. The zero value runs on the CPU with one thread.
type Config struct {
	GPU gpu.Options
}

// Encoder computes speaker embeddings. It is safe for concurrent use.
type Encoder struct {
	path   string
	sess   *gpu.Session
	dim    int
	tables *fbank.Tables
	pool   sync.Pool // *fbank.Fbank
	mu     sync.RWMutex
	closed bool
}

// modelFiles are the names looked for in a model directory, in order.
var modelFiles = []string{"campplus.onnx", "model.onnx"}

// New loads the encoder from a model directory (campplus.onnx or model.onnx in it) or an
// .onnx file, and checks its signature: one float input (batch, frames, 80) and one float
// output (batch, dim).
func New(path string, cfg Config) (*Encoder, error) {
	file, err := findModel(path)
	if err != nil {
		return nil, err
	}
	if err := gpu.Init(); err != nil {
		return nil, err
	}
	opts := cfg.GPU
	if opts.Provider == "" {
		opts.Provider = gpu.ProviderCPU
	}
	if opts.IntraOpThreads == 0 {
		opts.IntraOpThreads = 1
	}
	sess, err := gpu.Open(file, nil, nil, opts)
	if err != nil {
		return nil, badModel{err}
	}
	dim, err := checkSignature(sess.Info)
	if err != nil {
		sess.Close()
		return nil, err
	}
	e := &Encoder{path: file, sess: sess, dim: dim, tables: fbank.NewTables(fbank.Povey)}
	e.pool.New = func() any { return fbank.New(e.tables, 1) }
	return e, nil
}

func findModel(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadModel, err)
	}
	if !st.IsDir() {
		return path, nil
	}
	for _, name := range modelFiles {
		f := filepath.Join(path, name)
		if _, err := os.Stat(f); err == nil {
			return f, nil
		}
	}
	return "", fmt.Errorf("%w: %s has none of %v", ErrBadModel, path, modelFiles)
}

func checkSignature(info *gpu.ModelInfo) (int, error) {
	if len(info.Inputs) != 1 || len(info.Outputs) != 1 {
		return 0, fmt.Errorf("%w: %s has %d inputs and %d outputs, want one of each (fbank in, embedding out)",
			ErrBadModel, info.Path, len(info.Inputs), len(info.Outputs))
	}
	in, out := info.Inputs[0], info.Outputs[0]
	if in.Type != "float32" || len(in.Shape) != 3 || (in.Shape[2] != fbank.NumBins && in.Shape[2] > 0) {
		return 0, fmt.Errorf("%w: %s: input %v, want float32 (batch, frames, %d)", ErrBadModel, info.Path, in, fbank.NumBins)
	}
	if out.Type != "float32" || len(out.Shape) != 2 {
		return 0, fmt.Errorf("%w: %s: output %v, want float32 (batch, dim)", ErrBadModel, info.Path, out)
	}
	dim := int(out.Shape[1])
	if dim <= 0 {
		if n, err := info.MetaInt("output_dim"); err == nil && n > 0 {
			dim = n
		} else {
			return 0, fmt.Errorf("%w: %s: output %v has no fixed size and no output_dim metadata", ErrBadModel, info.Path, out)
		}
	}
	return dim, nil
}

// Dim is the embedding's length.
func (e *Encoder) Dim() int { return e.dim }

// Path is the model file in use.
func (e *Encoder) Path() string { return e.path }

// Embed returns the speaker embedding of pcm (16 kHz mono, [-1, 1]). Inputs longer than 20 s
// are embedded in 10 s windows whose unit-length embeddings are averaged.
func (e *Encoder) Embed(ctx context.Context, pcm []float32) ([]float32, error) {
	if len(pcm) < MinSamples {
		return nil, fmt.Errorf("%w: %.2f s, need at least %.1f s", ErrTooShort, float64(len(pcm))/SampleRate, float64(MinSamples)/SampleRate)
	}
	for i, v := range pcm {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("speaker: sample %d is %v", i, v)
		}
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return nil, ErrClosed
	}
	fb := e.pool.Get().(*fbank.Fbank)
	feats := fb.Compute(nil, pcm)
	e.pool.Put(fb)
	frames := len(feats) / fbank.NumBins
	if frames <= maxFrames {
		return e.run(ctx, feats, frames)
	}
	sum := make([]float64, e.dim)
	for start := 0; start < frames; start += windowFrames {
		n := min(windowFrames, frames-start)
		if n < MinSamples/160 && start > 0 { // a short tail says less than its window; drop it
			break
		}
		emb, err := e.run(ctx, feats[start*fbank.NumBins:(start+n)*fbank.NumBins], n)
		if err != nil {
			return nil, err
		}
		norm := math.Sqrt(dot(emb, emb))
		for i, v := range emb {
			sum[i] += float64(v) / max(norm, 1e-12)
		}
	}
	out := make([]float32, e.dim)
	for i, v := range sum {
		out[i] = float32(v)
	}
	return out, nil
}

// run embeds frames x 80 features after removing their mean over time (modifies feats).
func (e *Encoder) run(ctx context.Context, feats []float32, frames int) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var mean [fbank.NumBins]float64
	for t := 0; t < frames; t++ {
		for b, v := range feats[t*fbank.NumBins : (t+1)*fbank.NumBins] {
			mean[b] += float64(v)
		}
	}
	for b := range mean {
		mean[b] /= float64(frames)
	}
	for t := 0; t < frames; t++ {
		row := feats[t*fbank.NumBins : (t+1)*fbank.NumBins]
		for b := range row {
			row[b] = float32(float64(row[b]) - mean[b])
		}
	}
	return e.runFeats(ctx, feats, frames)
}

// runFeats runs the model on prepared (mean-normalised) features.
func (e *Encoder) runFeats(ctx context.Context, feats []float32, frames int) ([]float32, error) {
	in, err := ort.NewTensor(ort.NewShape(1, int64(frames), fbank.NumBins), feats)
	if err != nil {
		return nil, fmt.Errorf("speaker: input tensor: %w", err)
	}
	defer in.Destroy()
	out, err := ort.NewEmptyTensor[float32](ort.NewShape(1, int64(e.dim)))
	if err != nil {
		return nil, fmt.Errorf("speaker: output tensor: %w", err)
	}
	defer out.Destroy()
	opts, release, err := gpu.RunOptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("speaker: %w", err)
	}
	defer release()
	if err := e.sess.RunWithOptions([]ort.Value{in}, []ort.Value{out}, opts); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("speaker: %s: %w", e.path, err)
	}
	return append([]float32(nil), out.GetData()...), nil
}

// Close releases the model. Embed calls in flight finish first.
func (e *Encoder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return e.sess.Close()
}

// Cosine is the cosine similarity of two embeddings: 1 for the same direction, about 0 for
// unrelated voices. It is 0 when either is all zeros or their lengths differ.
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	na, nb := dot(a, a), dot(b, b)
	if na == 0 || nb == 0 {
		return 0
	}
	return dot(a, b) / math.Sqrt(na*nb)
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}
