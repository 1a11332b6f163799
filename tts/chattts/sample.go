package chattts

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ChatTTS's sampling defaults (ChatTTS core.py InferCodeParams / RefineTextParams).
const (
	DefaultCodeTemperature   = 0.3
	DefaultTextTemperature   = 0.7
	DefaultTopP              = 0.7
	DefaultTopK              = 20
	DefaultCodePenalty       = 1.05
	DefaultTextPenalty       = 1.0
	PenaltyWindow            = 16 // ChatTTS's repetition penalty looks at the last 16 tokens
	MinTokensToKeep          = 3  // top-P and top-K never keep fewer
	DefaultMaxNewCodeTokens  = 2048
	DefaultMaxNewTextTokens  = 384
	DefaultStreamBatchFrames = 24
)

// ErrSampling reports logits a token cannot be drawn from (NaN, or everything masked).
var ErrSampling = errors.New("chattts: cannot sample")

// SampleParams are ChatTTS's sampling settings for one decode: the logits processors and
// warpers of ChatTTS's gen_logits, applied in its order.
type SampleParams struct {
	// Temperature divides each stream's logits; one value per stream (ChatTTS takes a list
	// with one temperature per codebook), or one value for all. Zero or less means greedy.
	Temperature []float32
	TopP        float32 // nucleus mass to keep; ≤ 0 or ≥ 1 keeps all
	TopK        int     // tokens to keep; ≤ 0 keeps all
	// RepetitionPenalty divides positive and multiplies negative logits by penalty^count for
	// each token seen count times in the stream's last Window generated tokens; 1 (or 0) is off.
	RepetitionPenalty float32
	Window            int // 0 = PenaltyWindow
	MinKeep           int // 0 = MinTokensToKeep
	EOS               int // the end token, masked before MinNewTokens steps
	MinNewTokens      int
	Greedy            bool // argmax of the processed logits instead of a draw
}

// Validate checks the settings.
func (p SampleParams) Validate(vocab int) error {
	for _, t := range p.Temperature {
		if math.IsNaN(float64(t)) || math.IsInf(float64(t), 0) {
			return fmt.Errorf("chattts: temperature %g", t)
		}
	}
	if math.IsNaN(float64(p.TopP)) || math.IsNaN(float64(p.RepetitionPenalty)) || p.RepetitionPenalty < 0 {
		return fmt.Errorf("chattts: top-p %g / repetition penalty %g", p.TopP, p.RepetitionPenalty)
	}
	if p.EOS < 0 || p.EOS >= vocab {
		return fmt.Errorf("chattts: EOS %d outside the vocabulary of %d", p.EOS, vocab)
	}
	return nil
}

// Sampler draws tokens with ChatTTS's semantics, in ChatTTS's order:
//
//	logits /= temperature[stream]
//	repetition penalty over the stream's last 16 generated tokens
//	top-P (keep ≥ 3), then top-K (keep ≥ 3)
//	EOS → −∞ while step < MinNewTokens
//	softmax, one draw from the RNG (or argmax when greedy)
//
// Top-P and top-K are computed on the top-K candidates only (both keep a prefix of the tokens
// sorted by logit, so the result is the same as sorting the whole vocabulary, and a
// 21 178-token text step costs one pass instead of a sort). A Sampler is used by one decode
// at a time.
type Sampler struct {
	p    SampleParams
	rng  *RNG
	cand []int     // candidate token ids, best first
	prob []float64 // scratch: candidate weights
	seen map[int32]int
	hold int // HoldEOS
}

// NewSampler returns a sampler drawing from rng (which may be nil when p.Greedy).
func NewSampler(p SampleParams, rng *RNG) *Sampler {
	if p.Window <= 0 {
		p.Window = PenaltyWindow
	}
	if p.MinKeep <= 0 {
		p.MinKeep = MinTokensToKeep
	}
	if rng == nil {
		rng = NewRNG(0)
	}
	return &Sampler{p: p, rng: rng, seen: map[int32]int{}}
}

// Params returns the settings in use.
func (s *Sampler) Params() SampleParams { return s.p }

// HoldEOS masks the end token for the first n steps of the decodes that follow (a
// sentence's minimum length), besides the settings' MinNewTokens.
func (s *Sampler) HoldEOS(n int) { s.hold = n }

func (s *Sampler) temperature(stream int) float32 {
	switch len(s.p.Temperature) {
	case 0:
		return 1
	case 1:
		return s.p.Temperature[0]
	}
	return s.p.Temperature[stream%len(s.p.Temperature)]
}

// Process applies temperature and repetition penalty to one stream's logits (in place), then
// top-P/top-K and the EOS mask, as ChatTTS does before its softmax: the tokens that survive are
// returned (ChatTTS sets the others to −∞; here they are simply not candidates).
// history is the stream's generated tokens so far; step counts generated frames (0 first).
// It returns the kept candidates, best first (valid until the next call).
func (s *Sampler) Process(stream int, logits []float32, history []int32, step int) ([]int, error) {
	if len(logits) == 0 {
		return nil, fmt.Errorf("%w: no logits", ErrSampling)
	}
	if t := s.temperature(stream); t > 0 && t != 1 {
		for i := range logits {
			logits[i] /= t
		}
	}
	if pen := s.p.RepetitionPenalty; pen > 0 && pen != 1 && len(history) > 0 {
		win := history[max(0, len(history)-s.p.Window):]
		clear(s.seen)
		for _, tok := range win {
			s.seen[tok]++
		}
		for tok, n := range s.seen {
			if tok < 0 || int(tok) >= len(logits) {
				continue
			}
			// torch.pow(penalty, freq) in float32, then multiply/divide in float32
			alpha := float32(math.Pow(float64(pen), float64(n)))
			if l := logits[tok]; l < 0 {
				logits[tok] = l * alpha
			} else {
				logits[tok] = l / alpha
			}
		}
	}
	k := len(logits)
	if s.p.TopK > 0 {
		k = min(max(s.p.TopK, s.p.MinKeep), len(logits))
	}
	cand := s.topCandidates(logits, k)
	if len(cand) == 0 {
		return nil, fmt.Errorf("%w: logits are all NaN or −∞", ErrSampling)
	}
	if p := float64(s.p.TopP); p > 0 && p < 1 {
		// HF TopPLogitsWarper: sorted ascending, a token goes when the cumulative softmax up to
		// and including it is ≤ 1−p, i.e. when the mass ranked above it is ≥ p.
		z := softmaxNorm(logits, logits[cand[0]])
		top := float64(logits[cand[0]])
		above := 0.0
		keep := len(cand)
		for i, c := range cand {
			if i >= s.p.MinKeep && above >= p {
				keep = i
				break
			}
			above += math.Exp(float64(logits[c])-top) / z
		}
		cand = cand[:keep]
	}
	// everything outside cand is what ChatTTS's warpers set to −∞
	if (step < s.p.MinNewTokens || step < s.hold) && s.p.EOS < len(logits) {
		if i := slices.Index(cand, s.p.EOS); i >= 0 {
			cand = slices.Delete(cand, i, i+1)
		}
	}
	if len(cand) == 0 {
		return nil, fmt.Errorf("%w: every kept token is masked", ErrSampling)
	}
	s.cand = cand
	return cand, nil
}

// Sample processes one stream's logits (see Process) and picks the next token: the best
// candidate when greedy (torch.argmax: the lowest id among equal maxima), else one draw from
// the softmax of the kept logits.
func (s *Sampler) Sample(stream int, logits []float32, history []int32, step int) (int, error) {
	cand, err := s.Process(stream, logits, history, step)
	if err != nil {
		return 0, err
	}
	if s.p.Greedy || s.temperature(stream) <= 0 {
		return cand[0], nil
	}
	top := float64(logits[cand[0]])
	s.prob = s.prob[:0]
	var z float64
	for _, c := range cand {
		w := math.Exp(float64(logits[c]) - top)
		s.prob = append(s.prob, w)
		z += w
	}
	u := s.rng.Float64() * z
	acc := 0.0
	for i, w := range s.prob {
		acc += w
		if u < acc {
			return cand[i], nil
		}
	}
	return cand[len(cand)-1], nil
}

// Probabilities returns the distribution Sample draws from for these logits (for tests and
// tools): one probability per vocabulary entry.
func (s *Sampler) Probabilities(stream int, logits []float32, history []int32, step int) ([]float64, error) {
	cand, err := s.Process(stream, logits, history, step)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(logits))
	if s.p.Greedy || s.temperature(stream) <= 0 {
		out[cand[0]] = 1
		return out, nil
	}
	top := float64(logits[cand[0]])
	var z float64
	for _, c := range cand {
		out[c] = math.Exp(float64(logits[c]) - top)
		z += out[c]
	}
	for _, c := range cand {
		out[c] /= z
	}
	return out, nil
}

// topCandidates returns the ids of the k largest logits (and any tied with the k-th), best
// first, lower ids first among equals; NaN and −∞ are never candidates.
func (s *Sampler) topCandidates(logits []float32, k int) []int {
	c := s.cand[:0]
	better := func(a, b int) bool { // a ranks above b
		la, lb := logits[a], logits[b]
		return la > lb || (la == lb && a < b)
	}
	for i, l := range logits {
		if l != l || math.IsInf(float64(l), -1) {
			continue
		}
		if len(c) >= k && !better(i, c[len(c)-1]) {
			if l == logits[c[len(c)-1]] {
				c = append(c, i) // a tie with the last kept value stays (top-K keeps ties)
			}
			continue
		}
		// insert in order
		j := len(c)
		c = append(c, i)
		for j > 0 && better(i, c[j-1]) {
			c[j] = c[j-1]
			j--
		}
		c[j] = i
		// drop what falls below the k-th value (ties with it stay)
		if len(c) > k {
			kth := logits[c[k-1]]
			n := len(c)
			for n > k && logits[c[n-1]] < kth {
				n--
			}
			c = c[:n]
		}
	}
	s.cand = c
	return c
}

// softmaxNorm is Σ exp(l − top) over the logits (the softmax's denominator relative to the best
// logit, which contributes 1). Terms below e^−30 cannot move a top-P boundary (21 178 of them
// add < 2e−9) and are skipped, the rest use a float64 exp accurate to ~1e−15; NaN and −∞ add 0.
func softmaxNorm(logits []float32, top float32) float64 {
	floor := top - 30
	var z float64
	for _, l := range logits {
		if l > floor { // false for NaN and −∞
			z += fastExp(float64(l - top))
		}
	}
	return z
}

// fastExp is e^x for x in [−30, 0]: x = k·ln2 + r with |r| ≤ ln2/2, e^r by its Taylor series to
// r¹¹ (relative error < 1e−15), scaled by 2^k.
func fastExp(x float64) float64 {
	const ln2 = 0.6931471805599453
	k := math.Floor(x/ln2 + 0.5)
	r := x - k*ln2
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040+r*(1.0/40320+r*(1.0/362880+r*(1.0/3628800+r*(1.0/39916800)))))))))))
	return math.Ldexp(p, int(k))
}
