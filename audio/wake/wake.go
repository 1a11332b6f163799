// Package wake spots wake words with openWakeWord: a melspectrogram model, Google's
// speech_embedding model and a small classifier per wake word, run on 16 kHz audio in 80 ms
// steps with the reference implementation's buffering.
//
// Pipeline (as openWakeWord's AudioFeatures and Model.predict): audio is taken in chunks of
// 1280 samples scaled to the int16 range; each chunk's mel frames are computed from the chunk
// plus the 480 samples before it and transformed as x/10 + 2 into a 32-band buffer (primed with
// 76 frames of ones); each chunk adds one 96-dimensional embedding of the last 76 mel frames to a
// feature buffer (primed with the embeddings of 4 s of low-level noise); each wake model scores
// its last N embeddings (16 for most). The first five scores of a stream are zero, as in the
// reference. A detection is a score at or above the threshold, for Patience consecutive
// chunks, outside the refractory period of the previous detection of the same label.
package wake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu"
)

// Errors.
var (
	ErrBadModel = errors.New("wake: bad model")
	ErrNoModel  = errors.New("wake: no such wake-word model")
)

const (
	// Rate is the sample rate the models take.
	Rate = 16000
	// Chunk is the step: 80 ms.
	Chunk       = 1280
	melContext  = 480 // samples before a chunk that its mel frames see
	melBands    = 32
	embWindow   = 76 // mel frames per embedding
	embDim      = 96
	melMax      = 970 // mel frames kept (10 s)
	featMax     = 120 // embeddings kept (~10 s)
	warmupZeros = 5   // first scores of a stream reported as zero
)

// DefaultDir is the openWakeWord directory under the models directory.
func DefaultDir() string { return filepath.Join(assets.ModelsDir(), "openwakeword") }

// Config configures a Detector. Zero fields take the defaults shown.
type Config struct {
	Models     []string      // wake models by name ("hey_jarvis", "hey_jarvis_v0.1") or path: ["hey_jarvis"]
	Threshold  float32       // score that detects: 0.5
	Patience   int           // consecutive chunks at or above the threshold: 1
	Refractory time.Duration // after a detection, the same label is quiet this long: 2 s
	// Quiet is the RMS under which a chunk counts as silent. Once the raw audio, mel and
	// embedding windows and every classifier's input have seen nothing but such chunks, the
	// models' outputs no longer change (exactly so for digital silence), so further silent
	// chunks repeat them instead of running the models: a silent room costs no inference.
	// Default 0.001 (−60 dBFS); negative: every chunk runs the models.
	Quiet float32
	GPU   gpu.Options // session options; empty Provider = CPU, one thread
}

// Detection is one wake-word hit.
type Detection struct {
	Model string        `json:"model"` // model name, e.g. "hey_jarvis_v0.1"
	Label string        `json:"label"` // class label (the model name for single-output models)
	Score float32       `json:"score"`
	At    int64         `json:"sample_16k"` // stream position (16 kHz samples) of the end of the chunk that fired
	Time  time.Duration `json:"-"`
	Sec   float64       `json:"time_s"`
}

// wakeModel is one classifier.
type wakeModel struct {
	name   string
	sess   *gpu.Session
	frames int      // embeddings it takes
	labels []string // per output column; "" = ignored (background)
	in     *ort.Tensor[float32]
	out    *ort.Tensor[float32]
	// per label: recent scores, last detection
	hist     [][]float32
	lastFire []int64
	count    int
}

// Detector runs openWakeWord on a stream. Not safe for concurrent use.
type Detector struct {
	dir    string // the models' directory
	cfg    Config
	mel    *gpu.Session
	emb    *gpu.Session
	models []*wakeModel

	embIn  *ort.Tensor[float32] // (1, 76, 32, 1)
	embOut *ort.Tensor[float32] // (1, 1, 1, 96)

	pending []float32 // scaled samples not yet a whole chunk
	raw     []float32 // the last melContext+Chunk scaled samples
	mels    [][melBands]float32
	feats   [][embDim]float32
	primed  [][embDim]float32 // the initial feature buffer, for Reset
	pos     int64
	scores  map[string]float32

	quietRun int // consecutive chunks under Config.Quiet
	steady   int // quietRun from which the models' outputs no longer change
	lastMels int // mel frames the last melspectrogram run gave
}

// resolve finds a wake model file by name or path.
func resolve(dir, name string) (string, error) {
	if strings.ContainsRune(name, os.PathSeparator) || strings.HasSuffix(name, ".onnx") {
		if _, err := os.Stat(name); err == nil {
			return name, nil
		}
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		return "", fmt.Errorf("%w: %s", ErrNoModel, name)
	}
	for _, cand := range []string{name + ".onnx", name + "_v0.1.onnx"} {
		p := filepath.Join(dir, cand)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	avail, _ := Available(dir)
	return "", fmt.Errorf("%w: %q in %s (have %s)", ErrNoModel, name, dir, strings.Join(avail, ", "))
}

// Available lists the wake models in dir (every .onnx but the two feature models).
func Available(dir string) ([]string, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".onnx") && n != "melspectrogram.onnx" && n != "embedding_model.onnx" {
			out = append(out, strings.TrimSuffix(n, ".onnx"))
		}
	}
	sort.Strings(out)
	return out, nil
}

// New loads the feature models and the wake models from dir (melspectrogram.onnx,
// embedding_model.onnx and the wake models; "" = DefaultDir()).
func New(dir string, cfg Config) (*Detector, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	if len(cfg.Models) == 0 {
		cfg.Models = []string{"hey_jarvis"}
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = 0.5
	}
	if cfg.Threshold < 0 || cfg.Threshold >= 1 {
		return nil, fmt.Errorf("wake: threshold %.2f: want 0 < t < 1", cfg.Threshold)
	}
	if cfg.Patience == 0 {
		cfg.Patience = 1
	}
	if cfg.Patience < 0 || cfg.Patience > 20 {
		return nil, fmt.Errorf("wake: patience %d: want 1..20", cfg.Patience)
	}
	if cfg.Refractory == 0 {
		cfg.Refractory = 2 * time.Second
	}
	if cfg.Quiet == 0 {
		cfg.Quiet = 1e-3
	}
	if cfg.GPU.Provider == "" {
		cfg.GPU.Provider = gpu.ProviderCPU
	}
	if cfg.GPU.IntraOpThreads == 0 {
		cfg.GPU.IntraOpThreads = 1
	}
	if err := gpu.Init(); err != nil {
		return nil, err
	}
	d := &Detector{dir: dir, cfg: cfg, scores: map[string]float32{}}
	if err := d.open(); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.prime(); err != nil {
		d.Close()
		return nil, err
	}
	// silent chunks until nothing the models see changes: the raw audio window, the mel
	// frames of one embedding (8 per chunk), the embeddings of the widest classifier, and one
	// more chunk to be sure
	d.steady = (melContext+Chunk+Chunk-1)/Chunk + (embWindow+7)/8 + 1
	for _, m := range d.models {
		d.steady = max(d.steady, (melContext+Chunk+Chunk-1)/Chunk+(embWindow+7)/8+m.frames+1)
	}
	d.Reset()
	return d, nil
}

func (d *Detector) open() error {
	melPath := filepath.Join(d.dir, "melspectrogram.onnx")
	embPath := filepath.Join(d.dir, "embedding_model.onnx")
	melInfo, err := checkShapes(melPath, "input", 2, "output", 4)
	if err != nil {
		return err
	}
	embInfo, err := checkShapes(embPath, "input_1", 4, "conv2d_19", 4)
	if err != nil {
		return err
	}
	if d.mel, err = gpu.OpenInfo(melInfo, []string{"input"}, []string{"output"}, d.cfg.GPU); err != nil {
		return fmt.Errorf("wake: %w", err)
	}
	if d.emb, err = gpu.OpenInfo(embInfo, []string{"input_1"}, []string{"conv2d_19"}, d.cfg.GPU); err != nil {
		return fmt.Errorf("wake: %w", err)
	}
	if d.embIn, err = ort.NewEmptyTensor[float32](ort.NewShape(1, embWindow, melBands, 1)); err != nil {
		return err
	}
	if d.embOut, err = ort.NewEmptyTensor[float32](ort.NewShape(1, 1, 1, embDim)); err != nil {
		return err
	}
	for _, name := range d.cfg.Models {
		path, err := resolve(d.dir, name)
		if err != nil {
			return err
		}
		m, err := openWakeModel(path, d.cfg.GPU)
		if err != nil {
			return err
		}
		d.models = append(d.models, m)
	}
	return nil
}

func checkShapes(path, in string, inRank int, out string, outRank int) (*gpu.ModelInfo, error) {
	info, err := gpu.Inspect(path)
	if err != nil {
		return nil, fmt.Errorf("wake: %w", err)
	}
	ti, ok := info.Input(in)
	to, ok2 := info.Output(out)
	if !ok || !ok2 || len(ti.Shape) != inRank || len(to.Shape) != outRank || ti.Type != "float32" {
		return nil, fmt.Errorf("%w: %s: want input %q of rank %d and output %q of rank %d (openWakeWord), have %v → %v",
			ErrBadModel, path, in, inRank, out, outRank, info.Inputs, info.Outputs)
	}
	return info, nil
}

func openWakeModel(path string, opts gpu.Options) (*wakeModel, error) {
	info, err := gpu.Inspect(path)
	if err != nil {
		return nil, fmt.Errorf("wake: %w", err)
	}
	if len(info.Inputs) != 1 || len(info.Outputs) != 1 {
		return nil, fmt.Errorf("%w: %s has %d inputs and %d outputs, want 1 and 1 (an openWakeWord classifier)", ErrBadModel, path, len(info.Inputs), len(info.Outputs))
	}
	in, out := info.Inputs[0], info.Outputs[0]
	if len(in.Shape) != 3 || in.Shape[2] != embDim || in.Shape[1] < 1 || in.Shape[1] > featMax || len(out.Shape) != 2 || out.Shape[1] < 1 || out.Shape[1] > 64 {
		return nil, fmt.Errorf("%w: %s: input %v, output %v; want [1 N 96] → [1 C] (an openWakeWord classifier)", ErrBadModel, path, in, out)
	}
	name := strings.TrimSuffix(filepath.Base(path), ".onnx")
	m := &wakeModel{name: name, frames: int(in.Shape[1])}
	classes := int(out.Shape[1])
	m.labels = make([]string, classes)
	if classes == 1 {
		m.labels[0] = name
	} else {
		// multi-class models (timer) name their classes in the output's name, as JSON
		var names map[string]string
		if err := json.Unmarshal([]byte(out.Name), &names); err != nil {
			return nil, fmt.Errorf("%w: %s: %d classes but no class names in output %q", ErrBadModel, path, classes, out.Name)
		}
		for k, v := range names {
			var i int
			if _, err := fmt.Sscan(k, &i); err == nil && i >= 0 && i < classes {
				m.labels[i] = v
			}
		}
	}
	if m.sess, err = gpu.OpenInfo(info, []string{in.Name}, []string{out.Name}, opts); err != nil {
		return nil, fmt.Errorf("wake: %w", err)
	}
	if m.in, err = ort.NewEmptyTensor[float32](ort.NewShape(1, int64(m.frames), embDim)); err != nil {
		return nil, err
	}
	if m.out, err = ort.NewEmptyTensor[float32](ort.NewShape(1, int64(classes))); err != nil {
		return nil, err
	}
	m.hist = make([][]float32, classes)
	m.lastFire = make([]int64, classes)
	return m, nil
}

// prime computes the initial feature buffer from 4 s of noise, as the reference does.
func (d *Detector) prime() error {
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]float32, 4*Rate)
	for i := range noise {
		noise[i] = float32(rng.IntN(2000) - 1000)
	}
	mels, err := d.melspec(noise)
	if err != nil {
		return err
	}
	for i := 0; i+embWindow <= len(mels); i += 8 {
		e, err := d.embed(mels[i : i+embWindow])
		if err != nil {
			return err
		}
		d.primed = append(d.primed, e)
	}
	need := 0
	for _, m := range d.models {
		need = max(need, m.frames)
	}
	if len(d.primed) < need {
		return fmt.Errorf("%w: a model wants %d embeddings, more than the %d of the primed buffer", ErrBadModel, need, len(d.primed))
	}
	return nil
}

// Reset starts a new stream.
func (d *Detector) Reset() {
	d.pending = d.pending[:0]
	d.quietRun, d.lastMels = 0, 0
	d.raw = d.raw[:0]
	d.mels = d.mels[:0]
	for i := 0; i < embWindow; i++ {
		var ones [melBands]float32
		for j := range ones {
			ones[j] = 1
		}
		d.mels = append(d.mels, ones)
	}
	d.feats = append(d.feats[:0], d.primed...)
	d.pos = 0
	for _, m := range d.models {
		m.count = 0
		for i := range m.hist {
			m.hist[i] = m.hist[i][:0]
			m.lastFire[i] = -1 << 62
		}
	}
	clear(d.scores)
}

// Models lists the loaded wake models.
func (d *Detector) Models() []string {
	var out []string
	for _, m := range d.models {
		out = append(out, m.name)
	}
	return out
}

// Scores returns the last score of every label.
func (d *Detector) Scores() map[string]float32 { return d.scores }

// Position is the number of samples consumed.
func (d *Detector) Position() int64 { return d.pos + int64(len(d.pending)) }

// Accept feeds 16 kHz mono samples in [-1, 1] and returns the detections they cause.
func (d *Detector) Accept(ctx context.Context, samples []float32) ([]Detection, error) {
	var dets []Detection
	for len(samples) > 0 {
		if err := ctx.Err(); err != nil {
			return dets, err
		}
		n := min(Chunk-len(d.pending), len(samples))
		for _, v := range samples[:n] {
			d.pending = append(d.pending, v*32768)
		}
		samples = samples[n:]
		if len(d.pending) < Chunk {
			break
		}
		var err error
		dets, err = d.step(dets)
		if err != nil {
			return dets, err
		}
		d.pending = d.pending[:0]
	}
	return dets, nil
}

// step processes one 80 ms chunk held in d.pending.
func (d *Detector) step(dets []Detection) ([]Detection, error) {
	if d.cfg.Quiet > 0 && audio.RMS(d.pending) < float64(d.cfg.Quiet)*32768 {
		d.quietRun++
	} else {
		d.quietRun = 0
	}
	d.raw = append(d.raw, d.pending...)
	if len(d.raw) > melContext+Chunk {
		d.raw = d.raw[len(d.raw)-melContext-Chunk:]
	}
	if d.quietRun > d.steady && d.repeat() {
		return dets, nil
	}
	mels, err := d.melspec(d.raw)
	if err != nil {
		return dets, err
	}
	d.lastMels = len(mels)
	d.mels = append(d.mels, mels...)
	if len(d.mels) > melMax {
		d.mels = d.mels[len(d.mels)-melMax:]
	}
	e, err := d.embed(d.mels[len(d.mels)-embWindow:])
	if err != nil {
		return dets, err
	}
	d.feats = append(d.feats, e)
	if len(d.feats) > featMax {
		d.feats = d.feats[len(d.feats)-featMax:]
	}
	d.pos += Chunk
	for _, m := range d.models {
		in := m.in.GetData()
		for i, f := range d.feats[len(d.feats)-m.frames:] {
			copy(in[i*embDim:], f[:])
		}
		if err := m.sess.Run([]ort.Value{m.in}, []ort.Value{m.out}); err != nil {
			return dets, fmt.Errorf("wake: running %s: %w", m.name, err)
		}
		out := m.out.GetData()
		m.count++
		for c, label := range m.labels {
			if label == "" {
				continue
			}
			s := out[c]
			if m.count <= warmupZeros {
				s = 0
			}
			d.scores[label] = s
			m.hist[c] = append(m.hist[c], s)
			if len(m.hist[c]) > 30 {
				m.hist[c] = m.hist[c][1:]
			}
			if s < d.cfg.Threshold || d.pos-m.lastFire[c] < int64(d.cfg.Refractory)*Rate/int64(time.Second) {
				continue
			}
			h := m.hist[c]
			if len(h) < d.cfg.Patience {
				continue
			}
			ok := true
			for _, v := range h[len(h)-d.cfg.Patience:] {
				ok = ok && v >= d.cfg.Threshold
			}
			if !ok {
				continue
			}
			m.lastFire[c] = d.pos
			t := time.Duration(d.pos) * time.Second / Rate
			dets = append(dets, Detection{Model: m.name, Label: label, Score: s, At: d.pos, Time: t, Sec: t.Seconds()})
		}
	}
	return dets, nil
}

// repeat advances one silent chunk in the steady state of silence: the last chunk's mel
// frames, embedding and scores again, without running a model. It declines (false) while a
// score is at the threshold, so a detection is always the models' own.
func (d *Detector) repeat() bool {
	if d.lastMels == 0 || len(d.feats) == 0 {
		return false
	}
	for _, s := range d.scores {
		if s >= d.cfg.Threshold {
			return false
		}
	}
	for _, m := range d.models {
		if m.count <= warmupZeros {
			return false
		}
	}
	n := len(d.mels)
	for i := n - d.lastMels; i < n; i++ {
		d.mels = append(d.mels, d.mels[i])
	}
	if len(d.mels) > melMax {
		d.mels = d.mels[len(d.mels)-melMax:]
	}
	d.feats = append(d.feats, d.feats[len(d.feats)-1])
	if len(d.feats) > featMax {
		d.feats = d.feats[len(d.feats)-featMax:]
	}
	d.pos += Chunk
	for _, m := range d.models {
		m.count++
		for c, label := range m.labels {
			if label == "" {
				continue
			}
			m.hist[c] = append(m.hist[c], d.scores[label])
			if len(m.hist[c]) > 30 {
				m.hist[c] = m.hist[c][1:]
			}
		}
	}
	return true
}

// melspec runs the melspectrogram model on int16-scaled samples and returns its frames,
// transformed as x/10 + 2.
func (d *Detector) melspec(x []float32) ([][melBands]float32, error) {
	in, err := ort.NewTensor(ort.NewShape(1, int64(len(x))), x)
	if err != nil {
		return nil, err
	}
	defer in.Destroy()
	outs := []ort.Value{nil}
	if err := d.mel.Run([]ort.Value{in}, outs); err != nil {
		return nil, fmt.Errorf("wake: melspectrogram: %w", err)
	}
	defer outs[0].Destroy()
	t, ok := outs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, fmt.Errorf("%w: melspectrogram output is not float32", ErrBadModel)
	}
	data := t.GetData()
	if len(data)%melBands != 0 {
		return nil, fmt.Errorf("%w: melspectrogram output shape %v", ErrBadModel, t.GetShape())
	}
	frames := make([][melBands]float32, len(data)/melBands)
	for i := range frames {
		for j := 0; j < melBands; j++ {
			frames[i][j] = data[i*melBands+j]/10 + 2
		}
	}
	return frames, nil
}

func (d *Detector) embed(mels [][melBands]float32) ([embDim]float32, error) {
	var e [embDim]float32
	in := d.embIn.GetData()
	for i, f := range mels {
		copy(in[i*melBands:], f[:])
	}
	if err := d.emb.Run([]ort.Value{d.embIn}, []ort.Value{d.embOut}); err != nil {
		return e, fmt.Errorf("wake: embedding: %w", err)
	}
	copy(e[:], d.embOut.GetData())
	return e, nil
}

// Flush pads a partial chunk with silence and processes it.
func (d *Detector) Flush(ctx context.Context) ([]Detection, error) {
	if len(d.pending) == 0 {
		return nil, nil
	}
	return d.Accept(ctx, make([]float32, Chunk-len(d.pending)))
}

// Process runs a whole source (converted to 16 kHz mono) from a fresh state, with one second
// of silence before and after as the reference's predict_clip does, and returns the
// detections and the per-chunk scores of every label.
func (d *Detector) Process(ctx context.Context, src audio.Source) ([]Detection, map[string][]float32, error) {
	src, err := audio.Convert(src, audio.Mono16k, audio.QualityHigh)
	if err != nil {
		return nil, nil, err
	}
	d.Reset()
	scores := map[string][]float32{}
	var dets []Detection
	feed := func(x []float32) error {
		for len(x) > 0 {
			n := min(len(x), Chunk-len(d.pending))
			got, err := d.Accept(ctx, x[:n])
			x = x[n:]
			dets = append(dets, got...)
			if err != nil {
				return err
			}
			if len(d.pending) == 0 {
				for k, v := range d.scores {
					scores[k] = append(scores[k], v)
				}
			}
		}
		return nil
	}
	silence := make([]float32, Rate)
	if err := feed(silence); err != nil {
		return dets, scores, err
	}
	buf := make([]float32, 4*Chunk)
	for {
		n, rerr := src.Read(ctx, buf)
		if err := feed(buf[:n]); err != nil {
			return dets, scores, err
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return dets, scores, rerr
		}
	}
	if err := feed(silence); err != nil {
		return dets, scores, err
	}
	return dets, scores, nil
}

// Close releases the sessions.
func (d *Detector) Close() error {
	for _, m := range d.models {
		if m.in != nil {
			m.in.Destroy()
		}
		if m.out != nil {
			m.out.Destroy()
		}
		if m.sess != nil {
			m.sess.Close()
		}
	}
	if d.embIn != nil {
		d.embIn.Destroy()
	}
	if d.embOut != nil {
		d.embOut.Destroy()
	}
	if d.mel != nil {
		d.mel.Close()
	}
	if d.emb != nil {
		d.emb.Close()
	}
	return nil
}
