package chattts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/gpu"
)

// ErrRun wraps ONNX Runtime failures.
var ErrRun = errors.New("chattts: inference failed")

// ErrMaxLength reports a decode that reached its maximum length before the end token.
var ErrMaxLength = errors.New("chattts: stopped at the maximum length before the end token")

// mode is what a decode generates: speech codes (the infer pass) or text (the refine pass).
type mode int

const (
	modeCode mode = iota
	modeText
)

// decodeOptions configure one GPT decode.
type decodeOptions struct {
	mode    mode
	sampler *Sampler
	maxNew  int
	spk     []float32 // the speaker vector for [spk_emb] positions (nil: zeros)
	// prefix are audio frames (frames × num_vq codes) placed after the text prompt, as
	// ChatTTS places a speaker sample's codes (spk_smp); generation continues after them and
	// they do not count for the repetition penalty.
	prefix []int32
	// frames is called after each accepted frame with the count so far and (code mode) the
	// hidden states so far (valid during the call); an error stops the decode.
	frames func(n int, hiddens []float32) error
	// timing, when not nil, accumulates the time spent inside ONNX Runtime (for benchmarks).
	timing *decodeTiming
	// guide, with weight in (0, 1), runs a second sequence beside the prompt (a clone's:
	// sample text, text and the sample's frames) that has the text alone: every frame is
	// drawn from weight·(prompted logits) + (1−weight)·(guide logits) and fed to both, and
	// the hidden states (the voice the decoder hears) are the prompted sequence's. A small
	// GPT carried on from a voice it never heard skips and slurs words; the guide keeps it on
	// the text while the prompted sequence keeps the voice.
	guide       []int
	guideWeight float32
}

type decodeTiming struct {
	Steps                       int
	ORT, Sample, Tensors, Total time.Duration
}

// decodeResult is a finished decode.
type decodeResult struct {
	Codes   []int32   // code mode: frames × num_vq, row-major
	Text    []int     // text mode: generated ids (without the end token)
	Hiddens []float32 // code mode: frames × hidden, the hidden state that produced each frame
	Frames  int
	EOS     bool // ended on the end token (false: the maximum length)
}

// kvBuffer is one growable backing store for the KV cache tensor (layers, 2, 1, heads, T, hd):
// the cache goes in and comes out of every step, so two of them (per sequence) alternate as past and present
// and ONNX Runtime writes the present straight into Go memory (an output ONNX Runtime
// allocated itself would be copied out by the binding: the whole cache, every step).
// Buffers grow by doubling (from room for the prompt and 128 frames) and are kept by the engine
// for the next decode up to maxKeptKV bytes each, so a decode neither zeroes megabytes every
// few steps nor pins the cache of the longest utterance it ever spoke.
type kvBuffer struct{ data []float32 }

const (
	maxKeptKV  = 64 << 20
	maxKeptKVs = 4
)

func (b *kvBuffer) tensor(shape ort.Shape, perPos, hint int) (*ort.Tensor[float32], error) {
	n := int(shape.FlattenedSize())
	if cap(b.data) < n {
		c := max(n, 2*cap(b.data), hint*perPos)
		b.data = make([]float32, n, c)
	}
	return ort.NewTensor(shape, b.data[:n])
}

func (e *Engine) getKV() *kvBuffer {
	e.kvMu.Lock()
	defer e.kvMu.Unlock()
	if n := len(e.kvFree); n > 0 {
		b := e.kvFree[n-1]
		e.kvFree = e.kvFree[:n-1]
		return b
	}
	return new(kvBuffer)
}

func (e *Engine) putKV(b *kvBuffer) {
	e.kvMu.Lock()
	defer e.kvMu.Unlock()
	if cap(b.data)*4 <= maxKeptKV && len(e.kvFree) < maxKeptKVs {
		e.kvFree = append(e.kvFree, b)
	}
}

// decode runs ChatTTS's GPT.generate for one prompt (batch 1): a prefill over the prompt ids,
// then one KV-cached step per frame, sampling every stream with o.sampler until a stream draws
// the end token or o.maxNew frames. With o.guide a second sequence runs beside it (see
// decodeOptions.guide); o.timing then counts both sequences' graph runs in its times, and
// frames in its steps.
func (e *Engine) decode(ctx context.Context, prompt []int, o decodeOptions) (*decodeResult, error) {
	g := e.mc.GPT
	Q, H, A := g.NumVQ, g.Hidden, g.NumAudioTokens
	if len(prompt) == 0 {
		return nil, fmt.Errorf("%w: empty prompt", ErrRun)
	}
	if len(o.prefix)%Q != 0 {
		return nil, fmt.Errorf("%w: %d prefix codes are not whole frames of %d", ErrRun, len(o.prefix), Q)
	}
	for _, c := range o.prefix {
		if c < 0 || int(c) >= A {
			return nil, fmt.Errorf("%w: prefix code %d outside 0..%d", ErrRun, c, A-1)
		}
	}
	guided := len(o.guide) > 0 && o.guideWeight > 0 && o.guideWeight < 1 && o.mode == modeCode
	nPrompt := len(prompt) + len(o.prefix)/Q
	if guided {
		nPrompt = max(nPrompt, len(o.guide))
	}
	maxNew := min(o.maxNew, g.MaxPositions-nPrompt)
	if maxNew < 1 {
		return nil, fmt.Errorf("%w: a prompt of %d positions leaves no room in %d", ErrRun, nPrompt, g.MaxPositions)
	}
	ctx, release, err := e.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	eos := e.mc.EOSCode
	if o.mode == modeText {
		eos = e.mc.EOSText
	}
	start := time.Now()

	spk := make([]float32, H)
	copy(spk, o.spk)
	tSpk, err := ort.NewTensor(ort.NewShape(1, int64(H)), spk)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer tSpk.Destroy()
	opts, done, err := gpu.RunOptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer done()

	prompted, err := e.newGPTSeq(prompt, o.prefix, maxNew)
	if err != nil {
		return nil, err
	}
	defer prompted.close()
	seqs := []*gptSeq{prompted}
	var mixed []float32
	if guided {
		gs, err := e.newGPTSeq(o.guide, nil, maxNew)
		if err != nil {
			return nil, err
		}
		defer gs.close()
		seqs = append(seqs, gs)
		mixed = make([]float32, Q*A)
	}

	res := &decodeResult{}
	if o.mode == modeCode {
		res.Codes = make([]int32, 0, 64*Q)
		res.Hiddens = make([]float32, 0, 64*H)
	}
	hist := make([][]int32, Q) // per stream generated tokens (the repetition penalty's input)
	next := make([]int32, Q)
	for step := 0; ; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, s := range seqs {
			if err := e.runGPT(ctx, s, tSpk, opts, o.timing); err != nil {
				return nil, err
			}
		}
		lCode, lText, hid := prompted.lCode, prompted.lText, prompted.hid
		if guided {
			w := o.guideWeight
			for i, x := range prompted.lCode {
				mixed[i] = w*x + (1-w)*seqs[1].lCode[i]
			}
			lCode = mixed
		}

		// sample the next frame
		tS := time.Now()
		done := false
		if o.mode == modeCode {
			for q := 0; q < Q; q++ {
				if code, ok := e.mc.neutral(q); ok {
					next[q] = code
					continue
				}
				tok, err := o.sampler.Sample(q, lCode[q*A:(q+1)*A], hist[q], step)
				if err != nil {
					return nil, err
				}
				next[q] = int32(tok)
				done = done || tok == eos
			}
		} else {
			tok, err := o.sampler.Sample(0, lText, hist[0], step)
			if err != nil {
				return nil, err
			}
			next[0] = int32(tok)
			done = tok == eos
		}
		if o.timing != nil {
			o.timing.Sample += time.Since(tS)
		}
		if done {
			res.EOS = true
			break
		}
		if o.mode == modeCode {
			res.Codes = append(res.Codes, next...)
			res.Hiddens = append(res.Hiddens, hid...)
			for q := 0; q < Q; q++ {
				hist[q] = append(hist[q], next[q])
			}
		} else {
			res.Text = append(res.Text, int(next[0]))
			hist[0] = append(hist[0], next[0])
		}
		res.Frames++
		if o.frames != nil {
			if err := o.frames(res.Frames, res.Hiddens); err != nil {
				return nil, err
			}
		}
		if res.Frames >= maxNew {
			break
		}
		for _, s := range seqs {
			s.feed(next, o.mode == modeText)
		}
	}
	if o.timing != nil {
		o.timing.Steps += res.Frames + 1
		o.timing.Total += time.Since(start)
	}
	return res, nil
}

// gptSeq is one sequence's state in a decode: the step inputs (sized for the prefill and
// reused, first element, by the steps), its KV cache and the last step's outputs.
type gptSeq struct {
	ids                      []int64
	mask                     []bool
	pos                      []int64
	ones                     []int64
	seq                      int // positions the next run feeds
	total                    int // positions in the cache
	kv                       [2]*kvBuffer
	cur                      int // kv[cur] holds the past
	hint                     int
	lText, lCode, hid        []float32
	outText, outCode, outHid *ort.Tensor[float32]
	e                        *Engine
}

// newGPTSeq lays out a prompt (text positions) and prefix frames (audio positions, text_mask
// false) for a decode of up to maxNew frames.
func (e *Engine) newGPTSeq(prompt []int, prefix []int32, maxNew int) (*gptSeq, error) {
	g := e.mc.GPT
	Q := g.NumVQ
	S := len(prompt) + len(prefix)/Q
	s := &gptSeq{e: e, ids: make([]int64, S*Q), mask: make([]bool, S), pos: make([]int64, S), seq: S,
		ones: make([]int64, S+maxNew), hint: S + min(maxNew, 128)}
	for i, id := range prompt {
		for q := 0; q < Q; q++ {
			s.ids[i*Q+q] = int64(id)
		}
		s.mask[i] = true
	}
	for i, c := range prefix {
		s.ids[len(prompt)*Q+i] = int64(c)
	}
	for i := range s.pos {
		s.pos[i] = int64(i)
	}
	for i := range s.ones {
		s.ones[i] = 1
	}
	s.lText = make([]float32, g.NumTextTokens)
	s.lCode = make([]float32, Q*g.NumAudioTokens)
	s.hid = make([]float32, g.Hidden)
	var err error
	if s.outText, err = ort.NewTensor(ort.NewShape(1, int64(g.NumTextTokens)), s.lText); err == nil {
		if s.outCode, err = ort.NewTensor(ort.NewShape(1, int64(Q), int64(g.NumAudioTokens)), s.lCode); err == nil {
			s.outHid, err = ort.NewTensor(ort.NewShape(1, int64(g.Hidden)), s.hid)
		}
	}
	s.kv = [2]*kvBuffer{e.getKV(), e.getKV()}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	return s, nil
}

func (s *gptSeq) close() {
	for _, t := range []*ort.Tensor[float32]{s.outText, s.outCode, s.outHid} {
		if t != nil {
			t.Destroy()
		}
	}
	s.e.putKV(s.kv[0])
	s.e.putKV(s.kv[1])
}

// feed makes the next run one step with the frame (code mode) or token (text mode) drawn.
func (s *gptSeq) feed(next []int32, text bool) {
	for q := range s.e.mc.GPT.NumVQ {
		if text {
			s.ids[q] = int64(next[0])
		} else {
			s.ids[q] = int64(next[q])
		}
	}
	s.mask[0] = text
	s.pos[0] = int64(s.total)
	s.seq = 1
}

// runGPT runs the graph over s's next positions (the prefill, then one step), leaving the
// logits and hidden state in s.
func (e *Engine) runGPT(ctx context.Context, s *gptSeq, tSpk *ort.Tensor[float32], opts *ort.RunOptions, timing *decodeTiming) error {
	g := e.mc.GPT
	Q, L, heads, hd := g.NumVQ, g.Layers, g.Heads, g.HeadDim
	perPos := L * 2 * heads * hd
	kvShape := func(t int) ort.Shape { return ort.NewShape(int64(L), 2, 1, int64(heads), int64(t), int64(hd)) }
	seq := s.seq
	tT := time.Now()
	var r runTensors
	defer r.destroy()
	ids := addTensor(&r, ort.NewShape(1, int64(seq), int64(Q)), s.ids[:seq*Q])
	mask := addTensor(&r, ort.NewShape(1, int64(seq)), s.mask[:seq])
	attn := addTensor(&r, ort.NewShape(1, int64(s.total+seq)), s.ones[:s.total+seq])
	pos := addTensor(&r, ort.NewShape(1, int64(seq)), s.pos[:seq])
	past := r.add(s.kv[s.cur].tensor(kvShape(s.total), perPos, s.hint))
	present := r.add(s.kv[1-s.cur].tensor(kvShape(s.total+seq), perPos, s.hint))
	if r.err != nil {
		return fmt.Errorf("%w: %v", ErrRun, r.err)
	}
	t0 := time.Now()
	if timing != nil {
		timing.Tensors += t0.Sub(tT)
	}
	err := e.gpt.RunWithOptions([]ort.Value{ids, mask, tSpk, attn, pos, past},
		[]ort.Value{s.outText, s.outCode, s.outHid, present}, opts)
	if timing != nil {
		timing.ORT += time.Since(t0)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrRun, e.files["gpt"], err)
	}
	s.cur = 1 - s.cur
	s.total += seq
	return nil
}

// runTensors holds the tensors made for one graph run (destroyed after it) and the first
// error making them; once it has an error, adding does nothing.
type runTensors struct {
	held []ort.Value
	err  error
}

func (r *runTensors) add(t *ort.Tensor[float32], err error) ort.Value {
	if err != nil {
		r.err = cmp.Or(r.err, err)
		return nil
	}
	r.held = append(r.held, t) // made even after an earlier error: destroyed all the same
	return t
}

func (r *runTensors) destroy() {
	for _, v := range r.held {
		v.Destroy()
	}
}

// addTensor makes a tensor over data for r's run (nil after an earlier error).
func addTensor[T ort.TensorData](r *runTensors, shape ort.Shape, data []T) ort.Value {
	if r.err != nil {
		return nil
	}
	t, err := ort.NewTensor(shape, data)
	if err != nil {
		r.err = err
		return nil
	}
	r.held = append(r.held, t)
	return t
}
