package chattts

import (
	"math"
	"slices"
	"testing"

	"github.com/parley-voice/parley/voices"
)

func testStat(dim int) SpkStat {
	v := make([]float32, 2*dim)
	for i := 0; i < dim; i++ {
		v[i] = 0.5 + 0.001*float32(i) // std
		v[dim+i] = float32(i%7) * 0.1 // mean
	}
	s, err := NewSpkStat(v)
	if err != nil {
		panic(err)
	}
	return s
}

func TestSpeakerSample(t *testing.T) {
	st := testStat(768)
	a, b, c := st.Sample(7), st.Sample(7), st.Sample(8)
	if len(a) != 768 {
		t.Fatalf("%d values", len(a))
	}
	same, diff := true, false
	for i := range a {
		same = same && a[i] == b[i]
		diff = diff || a[i] != c[i]
		if voices.RoundHalf(a[i]) != a[i] {
			t.Fatalf("value %d (%g) is not a float16 value", i, a[i])
		}
	}
	if !same || !diff {
		t.Fatalf("seed 7 twice equal: %v; seeds 7 and 8 differ: %v", same, diff)
	}
	// randn·std + mean: standardised values are standard normal
	var sum, sq float64
	for i, x := range a {
		z := (float64(x) - float64(st.Mean[i])) / float64(st.Std[i])
		sum += z
		sq += z * z
	}
	n := float64(len(a))
	if m, v := sum/n, sq/n-(sum/n)*(sum/n); math.Abs(m) > 0.15 || math.Abs(v-1) > 0.2 {
		t.Fatalf("standardised sample: mean %.3f variance %.3f", m, v)
	}
}

// TestSeedFilter: a seed whose first draw passes the filter keeps its unfiltered speaker; one
// whose first draw fails gets a later draw of its own RNG that passes; where no draw passes the
// best one is kept; the same seed always gives the same vector.
func TestSeedFilter(t *testing.T) {
	plain := testStat(64)
	w := make([]float32, 64)
	w[3] = 1 // passes where the normalised vector's dimension 3 is above 0.05
	filtered := plain
	filtered.Filter = &SeedFilter{Weights: w, Bias: -0.05, Tries: 16}
	kept, moved := 0, 0
	for seed := int64(1); seed <= 200; seed++ {
		first, got := plain.Sample(seed), filtered.Sample(seed)
		if filtered.Filter.Score(first) >= 0 {
			if !slices.Equal(first, got) {
				t.Fatalf("seed %d passes unfiltered but its speaker changed", seed)
			}
			kept++
			continue
		}
		moved++
		if filtered.Filter.Score(got) < 0 {
			t.Fatalf("seed %d: a refused draw kept (score %.3f)", seed, filtered.Filter.Score(got))
		}
		if !slices.Equal(got, filtered.Sample(seed)) {
			t.Fatalf("seed %d: two samples differ", seed)
		}
		// the replacement is the first of the seed's own later draws that passes
		var passing []float32
		for _, v := range seedDraws(plain, seed, 16) {
			if passing == nil && filtered.Filter.Score(v) >= 0 {
				passing = v
			}
		}
		if !slices.Equal(got, passing) {
			t.Fatalf("seed %d: the replacement is not its first passing draw", seed)
		}
	}
	if kept == 0 || moved == 0 {
		t.Fatalf("kept %d, moved %d: the test's filter should do both", kept, moved)
	}
	// nothing passes: the best of the tries
	filtered.Filter = &SeedFilter{Weights: w, Bias: -10, Tries: 5}
	got := filtered.Sample(9)
	bestScore := math.Inf(-1)
	for _, v := range seedDraws(plain, 9, 5) {
		bestScore = math.Max(bestScore, filtered.Filter.Score(v))
	}
	if s := filtered.Filter.Score(got); s != bestScore {
		t.Fatalf("no draw passes: kept a draw scoring %.4f, the best of 5 scores %.4f", s, bestScore)
	}
	if s := filtered.Filter.Score(make([]float32, 3)); !math.IsInf(s, -1) {
		t.Fatalf("a vector of the wrong size scores %g", s)
	}
}

// seedDraws are a seed's first n speaker draws from s, unfiltered (what SpkStat.Sample draws
// one after another), written out here so the test does not lean on Sample's own loop.
func seedDraws(s SpkStat, seed int64, n int) [][]float32 {
	r := NewRNG(uint64(seed))
	out := make([][]float32, n)
	for k := range out {
		out[k] = make([]float32, s.Dim())
		for i := range out[k] {
			out[k][i] = voices.RoundHalf(float32(r.Normal())*s.Std[i] + s.Mean[i])
		}
	}
	return out
}

// TestSpeakerStringRoundTrip: a seed's vector written as a ChatTTS speaker string and read
// back is bit-identical (the sample is already at float16 precision), so the string drives
// the same voice; its normalised form too.
func TestSpeakerStringRoundTrip(t *testing.T) {
	v := testStat(768).Sample(42)
	s, err := voices.EncodeChatTTSSpeaker(v)
	if err != nil {
		t.Fatal(err)
	}
	back, err := voices.DecodeAnySpeaker(s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v {
		if back[i] != v[i] {
			t.Fatalf("value %d: %g → %g", i, v[i], back[i])
		}
	}
	n1, n2 := Normalize(v), Normalize(back)
	for i := range n1 {
		if n1[i] != n2[i] {
			t.Fatal("normalised vectors differ")
		}
	}
}

func TestNormalize(t *testing.T) {
	n := Normalize([]float32{3, 4})
	if math.Abs(float64(n[0])-0.6) > 1e-7 || math.Abs(float64(n[1])-0.8) > 1e-7 {
		t.Fatalf("%v", n)
	}
	z := Normalize([]float32{0, 0})
	if z[0] != 0 || z[1] != 0 {
		t.Fatalf("zero vector → %v", z)
	}
}

func TestMix(t *testing.T) {
	m, err := Mix([][]float32{{1, 0}, {0, 1}}, []float64{3, 1})
	if err != nil || m[0] != 0.75 || m[1] != 0.25 {
		t.Fatalf("%v %v", m, err)
	}
	for _, c := range []struct {
		vs [][]float32
		w  []float64
	}{{nil, nil}, {[][]float32{{1}}, []float64{0}}, {[][]float32{{1}, {1, 2}}, []float64{1, 1}}, {[][]float32{{1}}, []float64{math.NaN()}}} {
		if _, err := Mix(c.vs, c.w); err == nil {
			t.Errorf("Mix(%v, %v) accepted", c.vs, c.w)
		}
	}
	if _, err := NewSpkStat([]float32{1, 2, 3}); err == nil {
		t.Error("odd spk_stat accepted")
	}
}
