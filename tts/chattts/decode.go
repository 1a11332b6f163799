package chattts

import (
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
// the cache goes in and comes out of every step, so two of them alternate as past and present
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
// the end token or o.maxNew frames.
func (e *Engine) decode(ctx context.Context, prompt []int, o decodeOptions) (*decodeResult, error) {
	g := e.mc.GPT
	Q, H, L, heads, hd := g.NumVQ, g.Hidden, g.Layers, g.Heads, g.HeadDim
	A, V := g.NumAudioTokens, g.NumTextTokens
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
	nPrompt := len(prompt) + len(o.prefix)/Q
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

	// tensors that keep their shape from step to step
	spk := make([]float32, H)
	copy(spk, o.spk)
	tSpk, err := ort.NewTensor(ort.NewShape(1, int64(H)), spk)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer tSpk.Destroy()
	lText := make([]float32, V)
	lCode := make([]float32, Q*A)
	hid := make([]float32, H)
	outText, err := ort.NewTensor(ort.NewShape(1, int64(V)), lText)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer outText.Destroy()
	outCode, err := ort.NewTensor(ort.NewShape(1, int64(Q), int64(A)), lCode)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer outCode.Destroy()
	outHid, err := ort.NewTensor(ort.NewShape(1, int64(H)), hid)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer outHid.Destroy()
	opts, done, err := gpu.RunOptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer done()

	// per-call inputs; ids/mask/positions sized for the prefill, reused (first element) by steps
	S := nPrompt
	ids := make([]int64, S*Q)
	mask := make([]bool, S)
	pos := make([]int64, S)
	for i, id := range prompt {
		for q := 0; q < Q; q++ {
			ids[i*Q+q] = int64(id)
		}
		mask[i] = true
	}
	for i, c := range o.prefix { // audio positions: text_mask false
		ids[len(prompt)*Q+i] = int64(c)
	}
	for i := range pos {
		pos[i] = int64(i)
	}
	ones := make([]int64, S+maxNew)
	for i := range ones {
		ones[i] = 1
	}
	kv := [2]*kvBuffer{e.getKV(), e.getKV()}
	defer e.putKV(kv[0])
	defer e.putKV(kv[1])
	perPos := L * 2 * heads * hd
	hint := S + min(maxNew, 128)
	cur := 0 // kv[cur] holds the past
	kvShape := func(t int) ort.Shape { return ort.NewShape(int64(L), 2, 1, int64(heads), int64(t), int64(hd)) }

	res := &decodeResult{}
	if o.mode == modeCode {
		res.Codes = make([]int32, 0, 64*Q)
		res.Hiddens = make([]float32, 0, 64*H)
	}
	hist := make([][]int32, Q) // per stream generated tokens (the repetition penalty's input)
	next := make([]int32, Q)
	total := 0 // positions in the cache
	for step := 0; ; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		seq := S
		if step > 0 {
			seq = 1
		}
		tT := time.Now()
		tIDs, err := ort.NewTensor(ort.NewShape(1, int64(seq), int64(Q)), ids[:seq*Q])
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrRun, err)
		}
		tMask, err := ort.NewTensor(ort.NewShape(1, int64(seq)), mask[:seq])
		if err != nil {
			tIDs.Destroy()
			return nil, fmt.Errorf("%w: %v", ErrRun, err)
		}
		tAttn, err := ort.NewTensor(ort.NewShape(1, int64(total+seq)), ones[:total+seq])
		if err != nil {
			tIDs.Destroy()
			tMask.Destroy()
			return nil, fmt.Errorf("%w: %v", ErrRun, err)
		}
		tPos, err := ort.NewTensor(ort.NewShape(1, int64(seq)), pos[:seq])
		if err != nil {
			tIDs.Destroy()
			tMask.Destroy()
			tAttn.Destroy()
			return nil, fmt.Errorf("%w: %v", ErrRun, err)
		}
		past, err := kv[cur].tensor(kvShape(total), perPos, hint)
		if err == nil {
			var present *ort.Tensor[float32]
			present, err = kv[1-cur].tensor(kvShape(total+seq), perPos, hint)
			if err == nil {
				t0 := time.Now()
				if o.timing != nil {
					o.timing.Tensors += t0.Sub(tT)
				}
				err = e.gpt.RunWithOptions([]ort.Value{tIDs, tMask, tSpk, tAttn, tPos, past},
					[]ort.Value{outText, outCode, outHid, present}, opts)
				if o.timing != nil {
					o.timing.ORT += time.Since(t0)
				}
				present.Destroy()
			}
			past.Destroy()
		}
		tIDs.Destroy()
		tMask.Destroy()
		tAttn.Destroy()
		tPos.Destroy()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrRun, e.files["gpt"], err)
		}
		cur = 1 - cur
		total += seq

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
		// the next step's inputs
		for q := 0; q < Q; q++ {
			if o.mode == modeCode {
				ids[q] = int64(next[q])
			} else {
				ids[q] = int64(next[0])
			}
		}
		mask[0] = o.mode == modeText
		pos[0] = int64(total)
	}
	if o.timing != nil {
		o.timing.Steps += res.Frames + 1
		o.timing.Total += time.Since(start)
	}
	return res, nil
}
