package asr

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

type refEntry struct {
	ids    []int32 // the prefix
	frames []int32 // the frame each token was first emitted at
	pb     float64 // log p of the prefix ending in blank
	pnb    float64 // ending in its last token
	lm     float64 // alpha·log P_LM + beta per token, summed
}

func (e *refEntry) total() float64 { return logAdd(e.pb, e.pnb) }

func refKey(ids []int32) string {
	b := make([]byte, 2*len(ids))
	for i, id := range ids {
		b[2*i], b[2*i+1] = byte(id>>8), byte(id)
	}
	return string(b)
}

// beamCTCRef is session 25's beam search, kept as the reference the faster one must match
// exactly (ids and frames): CTC prefix beam search with lm over frames [start, t) of v logits (row-major);
// only tokens isText marks (pieces of words, not tags or specials) are emitted. It returns the best prefix's
// ids and their frame indices, appended to ids and frames. o is used as it is (no defaults). The
// row's log-softmax is the search's own (logSoftmax), the same arithmetic it did inline. With
// words (and o.OOV) a word of the tokens' text (text: a leading space begins one) that words
// lacks costs o.OOV when the next begins or the prefix ends, found by spelling the prefix out.
func beamCTCRef(logits []float32, t, v, start, blank int, isText []bool, lm *ngramLM, text []string, words map[string]bool, o BeamOptions, ids, frames []int32) ([]int32, []int32) {
	if v <= 0 || t <= start || len(logits) < t*v {
		return ids, frames
	}
	ctx0 := make([]int32, lm.order-1)
	for i := range ctx0 {
		ctx0[i] = lmBOS
	}
	beams := []*refEntry{{pb: 0, pnb: negInf}}
	lp := make([]float64, v)
	order := make([]int, v)
	ctxBuf := make([]int32, 0, 64)
	// unlisted is the charge for ending the last word of p
	unlisted := func(p []int32) float64 {
		if words == nil || o.OOV <= 0 {
			return 0
		}
		var sb strings.Builder
		for _, id := range p {
			sb.WriteString(text[id])
		}
		w := sb.String()
		w = strings.Map(refWordRune, w[strings.LastIndexByte(w, ' ')+1:])
		if w == "" || words[w] {
			return 0
		}
		return o.OOV
	}
	for f := start; f < t; f++ {
		logSoftmax(lp, logits[f*v:(f+1)*v])
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool {
			return lp[order[a]] > lp[order[b]] || lp[order[a]] == lp[order[b]] && order[a] < order[b]
		})
		cand := order[:min(o.Top, v)]
		next := map[string]*refEntry{}
		get := func(p []int32, fr []int32, lms float64) *refEntry {
			k := refKey(p)
			e, ok := next[k]
			if !ok {
				e = &refEntry{ids: p, frames: fr, pb: negInf, pnb: negInf, lm: lms}
				next[k] = e
			}
			return e
		}
		for _, b := range beams {
			tot := b.total()
			for _, c := range cand {
				l := lp[c]
				if c == blank {
					e := get(b.ids, b.frames, b.lm)
					e.pb = logAdd(e.pb, tot+l)
					continue
				}
				if l < o.Prune || c >= len(isText) || !isText[c] {
					continue
				}
				last := int32(-1)
				if n := len(b.ids); n > 0 {
					last = b.ids[n-1]
				}
				ctxBuf = append(append(ctxBuf[:0], ctx0...), b.ids...)
				add := o.Alpha*float64(lm.logp(ctxBuf, int32(c))) + o.Beta
				if words != nil && strings.HasPrefix(text[c], " ") {
					add -= unlisted(b.ids)
				}
				np := append(slices.Clip(b.ids), int32(c))
				nf := append(slices.Clip(b.frames), int32(f))
				e := get(np, nf, b.lm+add)
				if int32(c) == last {
					e.pnb = logAdd(e.pnb, b.pb+l) // a repeat needs a blank between
					s := get(b.ids, b.frames, b.lm)
					s.pnb = logAdd(s.pnb, b.pnb+l)
				} else {
					e.pnb = logAdd(e.pnb, tot+l)
				}
			}
		}
		beams = beams[:0]
		for _, e := range next {
			beams = append(beams, e)
		}
		sort.Slice(beams, func(a, b int) bool {
			sa, sb := beams[a].total()+beams[a].lm, beams[b].total()+beams[b].lm
			return sa > sb || sa == sb && refKey(beams[a].ids) < refKey(beams[b].ids)
		})
		if len(beams) > o.Width {
			beams = beams[:o.Width]
		}
	}
	var best *refEntry
	bestScore := math.Inf(-1)
	for _, b := range beams {
		ctxBuf = append(append(ctxBuf[:0], ctx0...), b.ids...)
		s := b.total() + b.lm + o.Alpha*float64(lm.logp(ctxBuf, lmEOS)) - unlisted(b.ids)
		if s > bestScore {
			best, bestScore = b, s
		}
	}
	if best == nil {
		return ids, frames
	}
	return append(ids, best.ids...), append(frames, best.frames...)
}

// refWordRune is how a word is compared: ASCII letters in lower case, ASCII punctuation but the
// apostrophe left out (-1), everything else as it is.
func refWordRune(r rune) rune {
	switch {
	case r >= 0x80 || r == '\'' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9':
		return r
	case 'A' <= r && r <= 'Z':
		return r + 'a' - 'A'
	}
	return -1
}

// randomLM is a back-off n-gram model over vocab tokens with random probabilities: enough
// for the search to weigh prefixes differently, with gaps that make it back off.
func randomLM(rng *rand.Rand, vocab, order int) *ngramLM {
	lm := &ngramLM{order: order, vocab: vocab, shift: lmIDBits(vocab)}
	for k := 1; k <= order; k++ {
		probs, backs := map[uint64]float32{}, map[uint64]float32{}
		g := make([]int32, k)
		for range 40 * vocab / k {
			for j := range g {
				g[j] = int32(rng.IntN(vocab))
			}
			probs[lm.key(g)] = -float32(rng.ExpFloat64() * 3)
			if rng.IntN(2) == 0 {
				backs[lm.key(g)] = -float32(rng.Float64())
			}
		}
		lm.prob, lm.back = append(lm.prob, probs), append(lm.back, backs)
	}
	lm.floor = -12
	return lm
}

// peakyLogits imitates an acoustic model: most frames a confident blank, then a token held
// for a few frames (repeats, and the same token again after a blank), some frames undecided,
// on a grid of 0.25 so that exact ties happen.
func peakyLogits(rng *rand.Rand, t, v int) []float32 {
	x := make([]float32, t*v)
	hot := 0
	for f := range t {
		row := x[f*v : (f+1)*v]
		for i := range row {
			row[i] = float32(math.Round(rng.NormFloat64()*4)) / 4
		}
		switch r := rng.IntN(10); {
		case r < 5:
			hot = 0
		case r < 8:
			hot = 1 + rng.IntN(v-1)
		}
		row[hot] += float32(2 + rng.IntN(8))
		if rng.IntN(4) == 0 { // a close second
			row[1+rng.IntN(v-1)] = row[hot] - float32(rng.IntN(3))/4
		}
	}
	return x
}

// The search with its arena of shared prefixes decodes exactly as the plain one did: the same
// ids and the same frames, over random LMs, widths, candidate counts, weights and vocabularies.
func TestBeamMatchesPlainSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 29))
	for n := range 300 {
		beamAgainstPlain(t, rng, n)
	}
}

// With prefix hashes narrowed to 2 bits nearly every lookup collides: the search still finds
// each prefix among the beams by its tokens.
func TestBeamMatchesPlainSearchOnCollisions(t *testing.T) {
	defer func(m uint64) { beamHashMask = m }(beamHashMask)
	beamHashMask = 3
	rng := rand.New(rand.NewPCG(11, 13))
	for n := range 120 {
		beamAgainstPlain(t, rng, n)
	}
}

// A search with no room (width or tokens per frame 0, which BeamOptions.or fills in before any
// real search) decodes nothing rather than failing.
func TestBeamWithoutRoom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	logits := peakyLogits(rng, 20, 12)
	isText := make([]bool, 12)
	for i := 3; i < 12; i++ {
		isText[i] = true
	}
	lm := randomLM(rng, 12, 3)
	for _, o := range []BeamOptions{{Width: 0, Top: 8}, {Width: 8, Top: 0}} {
		o.Alpha, o.Beta, o.Prune = 0.5, 1, -10
		ids, frames := beamCTC(logits, 20, 12, 0, 0, isText, lm, nil, o, []int32{7}, []int32{0})
		if !slices.Equal(ids, []int32{7}) || !slices.Equal(frames, []int32{0}) {
			t.Errorf("%+v: %v %v, want the input untouched", o, ids, frames)
		}
	}
}

// FuzzBeamMatchesPlainSearch: the same over seeds the fuzzer picks.
func FuzzBeamMatchesPlainSearch(f *testing.F) {
	f.Add(uint64(1), uint64(2), 0)
	f.Add(uint64(3), uint64(4), 3)
	f.Fuzz(func(t *testing.T, a, b uint64, n int) {
		beamAgainstPlain(t, rand.New(rand.NewPCG(a, b)), n&0xffff)
	})
}

// beamAgainstPlain decodes case n (its vocabulary size, every third without an LM weight)
// with both searches and fails unless ids and frames agree.
func beamAgainstPlain(t *testing.T, rng *rand.Rand, n int) {
	t.Helper()
	v := []int{6, 12, 40, 300}[n%4]
	lm := randomLM(rng, v, 1+rng.IntN(min(5, lmOrderFits(v)))) // unigrams up to 5-grams
	blank := 0
	if rng.IntN(3) == 0 {
		blank = v - 1
	}
	isText := make([]bool, v)
	for i := 1; i < v; i++ {
		isText[i] = i%17 != 5 && i != blank && i != 2 // a few tokens that are not text
	}
	frames := 1 + rng.IntN(60)
	logits := peakyLogits(rng, frames, v)
	o := BeamOptions{Width: 1 + rng.IntN(48), Top: 1 + rng.IntN(12), Alpha: rng.Float64() * 2,
		Beta: rng.Float64()*4 - 1, Prune: -1 - rng.Float64()*12}
	if n%3 == 0 { // acoustics alone: equal logits give prefixes of exactly equal score
		o.Alpha = 0
	}
	start := rng.IntN(3)
	// every other case with a word list: tokens spell one or two letters of "abc", some of them
	// beginning a word (some a lone space), and the list holds a third of the short words
	var text []string
	var words map[string]bool
	var lex *lexicon
	if n%2 == 1 {
		text = make([]string, v)
		for i := range text {
			w := []byte{"abcAB"[rng.IntN(5)]}
			if rng.IntN(2) == 0 {
				w = append(w, "abc"[rng.IntN(3)])
			}
			switch rng.IntN(12) { // punctuation, which words are compared without, and a letter outside ASCII
			case 0:
				w = append(w, '.')
			case 1:
				w = append([]byte("É"), w...)
			}
			if rng.IntN(10) == 0 {
				w = nil
			}
			if rng.IntN(3) == 0 {
				w = append([]byte{' '}, w...)
			}
			text[i] = string(w)
		}
		words = map[string]bool{}
		var hs []uint64
		var grow func(w string)
		grow = func(w string) {
			if w != "" && rng.IntN(3) == 0 {
				words[w] = true
				hs = append(hs, wordHash(wordHashEmpty, []byte(w)))
			}
			if len(w) < 5 {
				for _, c := range "abc" {
					grow(w + string(c))
				}
			}
		}
		grow("")
		slices.Sort(hs)
		lex = newLexicon(slices.Compact(hs), text)
		o.OOV = rng.Float64() * 6
	}
	pre := []int32{99}
	wantIDs, wantFrames := beamCTCRef(logits, frames, v, start, blank, isText, lm, text, words, o, slices.Clone(pre), slices.Clone(pre))
	gotIDs, gotFrames := beamCTC(logits, frames, v, start, blank, isText, lm, lex, o, slices.Clone(pre), slices.Clone(pre))
	if !slices.Equal(gotIDs, wantIDs) || !slices.Equal(gotFrames, wantFrames) {
		t.Fatalf("case %d (v %d, t %d, %+v):\n got ids %v frames %v\nwant ids %v frames %v",
			n, v, frames, o, gotIDs, gotFrames, wantIDs, wantFrames)
	}
}
