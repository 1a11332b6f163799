package builtin

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Sampling chooses the next token. Temperature 0 is greedy decoding. The processors run in
// Hugging Face's order: repetition penalty, temperature, top-k, top-p, min-p.
type Sampling struct {
	Temperature       float64 // 0: greedy
	TopK              int     // 0: off
	TopP              float64 // 0 or 1: off
	MinP              float64 // 0: off
	RepetitionPenalty float64 // 0 or 1: off; applies to every token of the sequence so far
	Seed              uint64
}

// sampler holds the RNG and scratch space of one generation.
type sampler struct {
	s     Sampling
	rng   *rand.Rand
	cands []cand
	seen  map[int]bool
}

type cand struct {
	id int
	l  float32
	p  float64
}

func newSampler(s Sampling, history []int) *sampler {
	sm := &sampler{s: s, rng: rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))}
	if s.RepetitionPenalty > 0 && s.RepetitionPenalty != 1 {
		sm.seen = map[int]bool{}
		for _, id := range history {
			sm.seen[id] = true
		}
	}
	return sm
}

// observe records a token for the repetition penalty.
func (sm *sampler) observe(id int) {
	if sm.seen != nil {
		sm.seen[id] = true
	}
}

// next picks a token from logits (which it may modify).
func (sm *sampler) next(logits []float32) int {
	if sm.seen != nil {
		p := float32(sm.s.RepetitionPenalty)
		for id := range sm.seen {
			if id >= 0 && id < len(logits) {
				if logits[id] > 0 {
					logits[id] /= p
				} else {
					logits[id] *= p
				}
			}
		}
	}
	if sm.s.Temperature <= 0 {
		return argmax(logits)
	}
	inv := float32(1 / sm.s.Temperature)
	best := logits[argmax(logits)] * inv
	// Tokens more than 30 nats below the best carry less than 1e-13 of the mass: leaving them
	// out keeps sorting cheap over a 150k vocabulary without changing any choice measurably.
	floor := best - 30
	c := sm.cands[:0]
	for id, l := range logits {
		if v := l * inv; v >= floor {
			c = append(c, cand{id: id, l: v})
		}
	}
	slices.SortFunc(c, func(a, b cand) int {
		if a.l != b.l {
			if a.l > b.l {
				return -1
			}
			return 1
		}
		return a.id - b.id
	})
	if k := sm.s.TopK; k > 0 && k < len(c) {
		c = c[:k]
	}
	var sum float64
	for i := range c {
		c[i].p = math.Exp(float64(c[i].l - best))
		sum += c[i].p
	}
	for i := range c {
		c[i].p /= sum
	}
	if p := sm.s.TopP; p > 0 && p < 1 {
		var acc float64
		for i := range c {
			acc += c[i].p
			if acc >= p {
				c = c[:i+1]
				break
			}
		}
	}
	if mp := sm.s.MinP; mp > 0 {
		limit := mp * c[0].p
		n := 1
		for n < len(c) && c[n].p >= limit {
			n++
		}
		c = c[:n]
	}
	sum = 0
	for _, x := range c {
		sum += x.p
	}
	r := sm.rng.Float64() * sum
	pick := c[len(c)-1].id
	for _, x := range c {
		r -= x.p
		if r < 0 {
			pick = x.id
			break
		}
	}
	sm.cands = c[:0]
	return pick
}

func argmax(x []float32) int {
	best, at := float32(math.Inf(-1)), 0
	for i, v := range x {
		if v > best {
			best, at = v, i
		}
	}
	return at
}
