package asr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
)

// LMFile is the optional token language model beside a model's tokens.txt
// (train/sensevoice/lm.py): with it the recogniser decodes with a CTC prefix beam search that
// prefers piece sequences that spell words (beam.go), instead of greedy CTC. The search's
// weights tuned for it sit beside it in lm.json (LMWeightsPath).
const LMFile = "lm.bin"

// ErrLM wraps every problem with a language model file.
var ErrLM = errors.New("asr: bad language model")

const (
	lmMagic    = "PARLEYLM"
	lmMaxOrder = 8 // ids are packed into a uint64 key, bits.Len(vocab-1) bits each: 8 orders up to 256 tokens, 7 up to 512, 4 up to 65536
	lmBOS      = 1 // <s> and </s> in tokens.txt
	lmEOS      = 2
	lmMaxLog10 = 1000 // the largest |log10 p| or |log10 back-off| a model may hold (ARPA's "never" is -99)
)

// ngramLM is a back-off n-gram model over token ids; log probabilities are natural logs.
type ngramLM struct {
	order int
	vocab int
	shift uint                 // bits per id in a key
	prob  []map[uint64]float32 // per order k-1: packed k ids -> log p
	back  []map[uint64]float32 // per order k-1: packed k ids (a context) -> log back-off
	floor float32              // log p of a token no unigram covers
}

// lmIDBits is how many bits a key gives each id of a vocabulary of vocab tokens.
func lmIDBits(vocab int) uint { return uint(max(1, bits.Len(uint(max(0, vocab-1))))) }

// lmOrderFits is the highest order whose keys fit 64 bits for vocab tokens (at most lmMaxOrder).
func lmOrderFits(vocab int) int { return min(lmMaxOrder, 64/int(lmIDBits(vocab))) }

// key packs ids (each below the vocabulary size) into one uint64; n-grams of different
// lengths live in different maps, so no length is needed.
func (lm *ngramLM) key(ids []int32) uint64 {
	var k uint64
	for _, id := range ids {
		k = k<<lm.shift | uint64(uint16(id))
	}
	return k
}

// loadLM reads and checks a language model for a vocabulary of vocab tokens.
func loadLM(path string, vocab int) (*ngramLM, error) {
	if err := regularFile(path); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLM, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLM, err)
	}
	lm, err := parseLM(b, vocab)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrLM, path, err)
	}
	return lm, nil
}

// regularFile refuses a path that is not a regular file (a pipe or a device would block a
// read, or never end it), naming it; its callers wrap the error.
func regularFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	return nil
}

func parseLM(b []byte, vocab int) (*ngramLM, error) {
	if len(b) < 20 || string(b[:8]) != lmMagic {
		return nil, errors.New("not a Parley language model (no PARLEYLM header)")
	}
	ver, order, v := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:]), binary.LittleEndian.Uint32(b[16:])
	switch {
	case ver != 1:
		return nil, fmt.Errorf("version %d (this Parley reads 1)", ver)
	case vocab <= lmEOS || vocab > 1<<16:
		return nil, fmt.Errorf("vocabulary of %d tokens (want 3..65536: <s> and </s> are 1 and 2)", vocab)
	case int(v) != vocab:
		return nil, fmt.Errorf("made for %d tokens, the model has %d", v, vocab)
	case order < 1 || int(order) > lmOrderFits(vocab):
		return nil, fmt.Errorf("order %d (want 1..%d for %d tokens)", order, lmOrderFits(vocab), vocab)
	}
	lm := &ngramLM{order: int(order), vocab: vocab, shift: lmIDBits(vocab), floor: float32(math.Inf(1))}
	off := 20
	ids := make([]int32, order)
	for k := 1; k <= int(order); k++ {
		if off+4 > len(b) {
			return nil, fmt.Errorf("order %d: truncated", k)
		}
		n := int(binary.LittleEndian.Uint32(b[off:]))
		off += 4
		rec := 2*k + 8
		if n < 0 || n > (len(b)-off)/rec {
			return nil, fmt.Errorf("order %d: %d n-grams do not fit the file", k, n)
		}
		probs, backs := make(map[uint64]float32, n), make(map[uint64]float32, n)
		for range n {
			for j := range k {
				ids[j] = int32(binary.LittleEndian.Uint16(b[off+2*j:]))
				if int(ids[j]) >= vocab {
					return nil, fmt.Errorf("order %d: token %d outside the vocabulary of %d", k, ids[j], vocab)
				}
			}
			p := math.Float32frombits(binary.LittleEndian.Uint32(b[off+2*k:]))
			bo := math.Float32frombits(binary.LittleEndian.Uint32(b[off+2*k+4:]))
			// bounded so that no sum of them reaches the beam search's -1e30 ("impossible")
			if !(p <= 0 && p >= -lmMaxLog10) || !(math.Abs(float64(bo)) <= lmMaxLog10) {
				return nil, fmt.Errorf("order %d: n-gram %v has log10 p %g, back-off %g", k, ids[:k], p, bo)
			}
			key := lm.key(ids[:k])
			probs[key] = p * math.Ln10
			if bo != 0 {
				backs[key] = bo * math.Ln10
			}
			if k == 1 {
				lm.floor = min(lm.floor, p*math.Ln10)
			}
			off += rec
		}
		lm.prob = append(lm.prob, probs)
		lm.back = append(lm.back, backs)
	}
	if off != len(b) {
		return nil, fmt.Errorf("%d bytes after the last n-gram", len(b)-off)
	}
	if len(lm.prob[0]) == 0 {
		return nil, errors.New("no unigrams")
	}
	return lm, nil
}

// logp is log P(w | ctx), using the last order-1 ids of ctx, backing off through contexts
// the model does not have.
func (lm *ngramLM) logp(ctx []int32, w int32) float32 {
	if n := lm.order - 1; len(ctx) > n {
		ctx = ctx[len(ctx)-n:]
	}
	var back float32
	var buf [lmMaxOrder]int32
	for {
		g := append(append(buf[:0], ctx...), w)
		if p, ok := lm.prob[len(g)-1][lm.key(g)]; ok {
			return back + p
		}
		if len(ctx) == 0 {
			return back + lm.floor
		}
		back += lm.back[len(ctx)-1][lm.key(ctx)]
		ctx = ctx[1:]
	}
}
