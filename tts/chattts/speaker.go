package chattts

import (
	"errors"
	"fmt"
	"math"

	"github.com/parley-voice/parley/voices"
)

// ErrSpeaker reports a speaker vector that does not fit the model.
var ErrSpeaker = errors.New("chattts: bad speaker")

// SpkStat is ChatTTS's speaker distribution: a per-dimension standard deviation and mean
// (the spk_stat tensor, std first, then mean).
type SpkStat struct {
	Std, Mean []float32
	// Filter (nil: none) refuses draws the model renders badly; see Sample.
	Filter *SeedFilter
}

// SeedFilter is a linear score over a speaker vector (L2-normalised first, as the model sees
// it): w·v̂ + bias. A seed's draw that scores below 0 is refused and the seed's RNG draws again,
// up to Tries draws; if none passes, the best-scoring one is kept. A seed whose first draw
// passes keeps the speaker it had without the filter. It is fitted on measured seed speakers
// (train/chattts/seed_filter.py): the demo voice whispers for about a fifth of its seeds.
type SeedFilter struct {
	Weights []float32 `json:"weights"`
	Bias    float64   `json:"bias"`
	Tries   int       `json:"tries"`
	// What the score predicts and how it was fitted, for people reading config.json.
	About string `json:"about,omitempty"`
}

// MaxSuggestedSeeds bounds a model's speaker.suggested_seeds.
const MaxSuggestedSeeds = 256

// MaxFilterTries bounds SeedFilter.Tries: each try is a draw of the speaker vector.
const MaxFilterTries = 64

func (f *SeedFilter) check(dim int) error {
	if len(f.Weights) != dim {
		return fmt.Errorf("%d weights for %d speaker dimensions", len(f.Weights), dim)
	}
	if f.Tries < 1 || f.Tries > MaxFilterTries {
		return fmt.Errorf("tries %d (want 1..%d)", f.Tries, MaxFilterTries)
	}
	if math.IsNaN(f.Bias) || math.IsInf(f.Bias, 0) {
		return fmt.Errorf("bias %g", f.Bias)
	}
	for i, w := range f.Weights {
		if math.IsNaN(float64(w)) || math.IsInf(float64(w), 0) {
			return fmt.Errorf("weight %d is %g", i, w)
		}
	}
	return nil
}

// Score is the filter's score of a speaker vector (≥ 0 passes); a vector of another size than
// the weights scores −Inf.
func (f *SeedFilter) Score(v []float32) float64 {
	if len(v) != len(f.Weights) {
		return math.Inf(-1)
	}
	n := Normalize(v)
	s := f.Bias
	for i, w := range f.Weights {
		s += float64(w) * float64(n[i])
	}
	return s
}

// NewSpkStat splits spk_stat (2·dim values: std then mean, as ChatTTS's chunk(2)).
func NewSpkStat(v []float32) (SpkStat, error) {
	if len(v) == 0 || len(v)%2 != 0 {
		return SpkStat{}, fmt.Errorf("%w: spk_stat has %d values (want 2 × dim)", ErrSpeaker, len(v))
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return SpkStat{}, fmt.Errorf("%w: spk_stat value %d is %g", ErrSpeaker, i, x)
		}
	}
	d := len(v) / 2
	return SpkStat{Std: v[:d:d], Mean: v[d:]}, nil
}

// Dim is the speaker embedding size.
func (s SpkStat) Dim() int { return len(s.Std) }

// Sample is ChatTTS's sample_random_speaker for a seed: randn(dim)·std + mean, drawn from the
// engine's RNG and kept at float16 precision as ChatTTS does (and as its speaker strings
// store it), so a seed, its frozen embedding and its speaker string are the same voice. With a
// Filter, a refused draw is followed by the next from the same RNG (see SeedFilter).
func (s SpkStat) Sample(seed int64) []float32 {
	r := NewRNG(uint64(seed))
	draw := func() []float32 {
		out := make([]float32, s.Dim())
		for i := range out {
			out[i] = voices.RoundHalf(float32(r.Normal())*s.Std[i] + s.Mean[i])
		}
		return out
	}
	v := draw()
	if s.Filter == nil {
		return v
	}
	best, bestScore := v, s.Filter.Score(v)
	for try := 1; try < s.Filter.Tries && bestScore < 0; try++ {
		v = draw()
		if score := s.Filter.Score(v); score > bestScore {
			best, bestScore = v, score
		}
	}
	return best
}

// Normalize returns v / max(‖v‖₂, 1e-12), as ChatTTS's Speaker.apply (F.normalize) does before
// the vector replaces the [spk_emb] token's embedding.
func Normalize(v []float32) []float32 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	n := math.Max(math.Sqrt(ss), 1e-12)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

// Mix interpolates speaker vectors with weights (normalised to sum 1), as `voices mix` does
// for ChatTTS voices; the result is used like any embedding (L2-normalised at use).
func Mix(vs [][]float32, weights []float64) ([]float32, error) {
	if len(vs) == 0 || len(vs) != len(weights) {
		return nil, fmt.Errorf("%w: %d vectors and %d weights", ErrSpeaker, len(vs), len(weights))
	}
	var sum float64
	for _, w := range weights {
		if math.IsNaN(w) || w < 0 {
			return nil, fmt.Errorf("%w: weight %g", ErrSpeaker, w)
		}
		sum += w
	}
	if sum == 0 {
		return nil, fmt.Errorf("%w: weights sum to 0", ErrSpeaker)
	}
	out := make([]float32, len(vs[0]))
	acc := make([]float64, len(vs[0]))
	for i, v := range vs {
		if len(v) != len(out) {
			return nil, fmt.Errorf("%w: vector %d has %d values, the first %d", ErrSpeaker, i, len(v), len(out))
		}
		for j, x := range v {
			acc[j] += weights[i] / sum * float64(x)
		}
	}
	for j := range out {
		out[j] = float32(acc[j])
	}
	return out, nil
}
