package builtin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"time"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/llm/tokenizer"
)

// Config configures New and OpenModel. The zero value picks the variant automatically and
// runs on the CPU with one thread per physical core.
type Config struct {
	Variant string      // "auto" (default), a variant name (q4, int8, fp32, fp16, …) or an .onnx file name
	GPU     gpu.Options // session options; zero: auto provider, gpu.DefaultIntraOpThreads
	Context int         // context window in tokens; 0: min(max_position_embeddings, 4096)
	Log     *slog.Logger
}

// Model is an opened decoder with its tokenizer and chat template.
type Model struct {
	Dir         string
	File        string // the ONNX file in use
	ModelConfig ModelConfig
	Tokenizer   *tokenizer.Tokenizer
	Template    string
	Specials    map[string]string // bos_token, eos_token strings for the template
	Context     int
	Provider    string

	sess   *gpu.Session
	lay    layout
	kvSize int // bytes per KV element (4 or 2)
	eos    map[int]bool
	log    *slog.Logger
}

// OpenModel loads a model directory in the onnx-community layout (New wraps it in a backend).
func OpenModel(dir string, o Config) (*Model, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := ReadModelConfig(dir)
	if err != nil {
		return nil, err
	}
	tok, tmpl, specials, err := loadTokenizer(dir)
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() > cfg.Vocab {
		return nil, fmt.Errorf("%w: tokenizer.json has %d tokens but config.json vocab_size is %d", ErrModel, tok.VocabSize(), cfg.Vocab)
	}
	path, err := findModel(dir, o.Variant)
	if err != nil {
		return nil, err
	}
	info, err := gpu.Inspect(path)
	if err != nil {
		return nil, err
	}
	if err := checkExternalData(info); err != nil {
		return nil, err
	}
	lay, err := checkLayout(info, cfg)
	if err != nil {
		return nil, err
	}
	sess, err := gpu.OpenInfo(info, lay.inputs, lay.outputs, o.GPU)
	if err != nil {
		return nil, err
	}
	ctxLen := o.Context
	if ctxLen <= 0 {
		ctxLen = 4096
		if cfg.MaxPos > 0 {
			ctxLen = min(ctxLen, cfg.MaxPos)
		}
	}
	m := &Model{Dir: dir, File: path, ModelConfig: cfg, Tokenizer: tok, Template: tmpl, Specials: specials, Context: ctxLen,
		Provider: sess.Provider, sess: sess, lay: lay, kvSize: 4, eos: map[int]bool{}, log: log}
	if lay.kvType == "float16" {
		m.kvSize = 2
	}
	for _, id := range cfg.EOS {
		m.eos[id] = true
	}
	log.Info("builtin llm loaded", "model", filepath.Base(dir), "file", filepath.Base(path), "layers", cfg.Layers,
		"kv", lay.kvType, "provider", sess.Provider, "context", ctxLen)
	return m, nil
}

// Close releases the session.
func (m *Model) Close() error { return m.sess.Close() }

// IsEOS reports whether id ends an answer.
func (m *Model) IsEOS(id int) bool { return m.eos[id] }

// Sequence is one conversation's KV cache: the tokens fed so far and their keys and values.
// Present outputs are written by ONNX Runtime straight into the cache's spare buffer (no copy
// through Go), which then becomes the next step's past. Not safe for concurrent use.
type Sequence struct {
	m      *Model
	tokens []int // tokens whose keys and values are cached
	bufs   [2][][]byte
	cur    int // bufs[cur] holds the cache
	cap    int // tokens each buffer holds
	logits []byte
	f32    []float32 // float16 logits converted
	ones   []int64
	ro     *ort.RunOptions
	// runTime adds up the time spent inside ONNX Runtime's Run (for Stats.Model).
	runTime time.Duration
}

// NewSequence returns an empty cache.
func (m *Model) NewSequence() (*Sequence, error) {
	ro, err := ort.NewRunOptions()
	if err != nil {
		return nil, fmt.Errorf("builtin: run options: %w", err)
	}
	return &Sequence{m: m, ro: ro}, nil
}

// Close frees the cache.
func (s *Sequence) Close() {
	if s.ro != nil {
		s.ro.Destroy()
		s.ro = nil
	}
	s.bufs = [2][][]byte{}
	s.tokens = nil
}

// Tokens returns the cached tokens.
func (s *Sequence) Tokens() []int { return s.tokens }

// Len is the number of cached tokens.
func (s *Sequence) Len() int { return len(s.tokens) }

func (s *Sequence) layerBytes(tokens int) int {
	return s.m.ModelConfig.KVHeads * tokens * s.m.ModelConfig.HeadDim * s.m.kvSize
}

// ensure grows both buffers to hold n tokens, keeping the cache.
func (s *Sequence) ensure(n int) {
	if n <= s.cap && s.bufs[0] != nil {
		return
	}
	c := max(n, 2*s.cap, 64)
	c = min(c, max(s.m.Context, n))
	for b := range 2 {
		old := s.bufs[b]
		s.bufs[b] = make([][]byte, 2*s.m.ModelConfig.Layers)
		for i := range s.bufs[b] {
			buf := make([]byte, max(s.layerBytes(c), 8))
			if b == s.cur && old != nil {
				copy(buf, old[i][:s.layerBytes(len(s.tokens))])
			}
			s.bufs[b][i] = buf
		}
	}
	s.cap = c
}

// Truncate drops cached tokens after the first n (to reuse a shared prefix). The layout is
// [heads, tokens, dim], so each head's rows move up to close the gap.
func (s *Sequence) Truncate(n int) {
	if n >= len(s.tokens) {
		return
	}
	if n < 0 {
		n = 0
	}
	old := len(s.tokens)
	row := s.m.ModelConfig.HeadDim * s.m.kvSize
	for _, buf := range s.bufs[s.cur] {
		for h := 1; h < s.m.ModelConfig.KVHeads; h++ {
			copy(buf[h*n*row:(h*n+n)*row], buf[h*old*row:(h*old+n)*row])
		}
	}
	s.tokens = s.tokens[:n]
}

// ErrContext means the sequence would exceed the model's context window.
var ErrContext = errors.New("builtin: context window full")

// Feed runs the model over ids after the cached tokens and returns the logits of the last one
// (valid until the next Feed). Cancelling ctx stops ONNX Runtime inside the step.
func (s *Sequence) Feed(ctx context.Context, ids []int) ([]float32, error) {
	if len(ids) == 0 {
		return nil, errors.New("builtin: nothing to feed")
	}
	past := len(s.tokens)
	total := past + len(ids)
	if total > s.m.Context {
		return nil, fmt.Errorf("%w: %d tokens, window %d", ErrContext, total, s.m.Context)
	}
	for _, id := range ids {
		if id < 0 || id >= s.m.ModelConfig.Vocab {
			return nil, fmt.Errorf("builtin: token id %d outside the vocabulary (%d)", id, s.m.ModelConfig.Vocab)
		}
	}
	s.ensure(total)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := s.m.ModelConfig
	n := len(ids)
	var vals []ort.Value
	defer func() {
		for _, v := range vals {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	add := func(v ort.Value, err error) error {
		if err != nil {
			return fmt.Errorf("builtin: tensor: %w", err)
		}
		vals = append(vals, v)
		return nil
	}
	in := make([]int64, 2*n)
	for i, id := range ids {
		in[i] = int64(id)
		in[n+i] = int64(past + i)
	}
	if len(s.ones) < total {
		s.ones = make([]int64, max(total, 2*len(s.ones)))
		for i := range s.ones {
			s.ones[i] = 1
		}
	}
	if err := add(ort.NewTensor(ort.NewShape(1, int64(n)), in[:n])); err != nil {
		return nil, err
	}
	if err := add(ort.NewTensor(ort.NewShape(1, int64(total)), s.ones[:total])); err != nil {
		return nil, err
	}
	if s.m.lay.hasPos {
		if err := add(ort.NewTensor(ort.NewShape(1, int64(n)), in[n:])); err != nil {
			return nil, err
		}
	}
	dt := ort.TensorElementDataType(ort.TensorElementDataTypeFloat)
	if s.m.kvSize == 2 {
		dt = ort.TensorElementDataTypeFloat16
	}
	kvShape := func(t int) ort.Shape { return ort.NewShape(1, int64(cfg.KVHeads), int64(t), int64(cfg.HeadDim)) }
	for _, buf := range s.bufs[s.cur] {
		// A zero-length past still needs a non-empty backing slice.
		if err := add(ort.NewCustomDataTensor(kvShape(past), buf[:max(s.layerBytes(past), 8)], dt)); err != nil {
			return nil, err
		}
	}
	inputs := vals
	vals = nil
	defer func() {
		for _, v := range inputs {
			v.Destroy()
		}
	}()
	lsize := 4
	ldt := ort.TensorElementDataType(ort.TensorElementDataTypeFloat)
	if s.m.lay.logitsType == "float16" {
		lsize, ldt = 2, ort.TensorElementDataTypeFloat16
	}
	if need := n * cfg.Vocab * lsize; len(s.logits) < need {
		s.logits = make([]byte, need)
	}
	if err := add(ort.NewCustomDataTensor(ort.NewShape(1, int64(n), int64(cfg.Vocab)), s.logits[:n*cfg.Vocab*lsize], ldt)); err != nil {
		return nil, err
	}
	next := 1 - s.cur
	for _, buf := range s.bufs[next] {
		if err := add(ort.NewCustomDataTensor(kvShape(total), buf[:s.layerBytes(total)], dt)); err != nil {
			return nil, err
		}
	}
	stop := context.AfterFunc(ctx, func() { s.ro.Terminate() })
	t0 := time.Now()
	err := s.m.sess.RunWithOptions(inputs, vals, s.ro)
	s.runTime += time.Since(t0)
	if !stop() {
		// ctx ended during the run: the flag is set; clear it for the next step.
		s.ro.UnsetTerminate()
		if err == nil {
			err = ctx.Err()
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("builtin: %s: %w", filepath.Base(s.m.File), err)
	}
	s.cur = next
	s.tokens = append(s.tokens, ids...)
	last := s.logits[(n-1)*cfg.Vocab*lsize : n*cfg.Vocab*lsize]
	if lsize == 4 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&last[0])), cfg.Vocab), nil
	}
	s.f32 = halfToFloat(s.f32, last, cfg.Vocab)
	return s.f32, nil
}

// halfToFloat converts n little-endian IEEE float16 values into dst.
func halfToFloat(dst []float32, b []byte, n int) []float32 {
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	for i := range n {
		dst[i] = f16(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
	}
	return dst
}

func f16(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h & 0x3ff)
	switch {
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		e := uint32(127 - 15 + 1)
		for frac&0x400 == 0 {
			frac <<= 1
			e--
		}
		frac &= 0x3ff
		return math.Float32frombits(sign | e<<23 | frac<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}
