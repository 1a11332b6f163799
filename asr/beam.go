package asr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// BeamOptions tune the language-model beam search (train/sensevoice/beam.py is its reference).
// A zero field takes the language model's own weights (its sidecar, LMWeightsPath), else the
// default below; BeamZero in Alpha, Beta or OOV is an explicit zero.
type BeamOptions struct {
	Width int     // prefixes kept per frame (default 32)
	Alpha float64 // language-model weight (default 0.4)
	Beta  float64 // bonus per token, against the model's preference for short output (default 2)
	Top   int     // tokens tried per frame (default 8)
	Prune float64 // log probability below which a token is not tried (default -10)
	// OOV is charged for each word the LM's word list (LexiconPath) does not hold (default 0:
	// none; it needs a list). Go's alone: beam.py has no word list, beamCTCRef is its reference.
	OOV float64
}

// BeamZero in BeamOptions.Alpha, Beta or OOV asks for a zero weight (no language model, no
// bonus, no charge) where a zero field would inherit.
const BeamZero = math.SmallestNonzeroFloat64

// defaultBeam is the beam search's weights for a language model without a sidecar.
var defaultBeam = BeamOptions{Width: 32, Alpha: 0.4, Beta: 2, Top: 8, Prune: -10}

// or fills o's zero fields from d (BeamZero becomes 0: the result is used as it is).
func (o BeamOptions) or(d BeamOptions) BeamOptions {
	if o.Width <= 0 {
		o.Width = d.Width
	}
	switch o.Alpha {
	case 0:
		o.Alpha = d.Alpha
	case BeamZero:
		o.Alpha = 0
	}
	switch o.Beta {
	case 0:
		o.Beta = d.Beta
	case BeamZero:
		o.Beta = 0
	}
	if o.Top <= 0 {
		o.Top = d.Top
	}
	if o.Prune == 0 {
		o.Prune = d.Prune
	}
	switch o.OOV {
	case 0:
		o.OOV = d.OOV
	case BeamZero:
		o.OOV = 0
	}
	return o
}

// The ranges beam weights must fall in, wherever they come from (Config.Beam, a sidecar,
// the command line): beyond them a search is useless or numerically meaningless.
const (
	MaxBeamAlpha = 20.0
	MaxBeamBeta  = 50.0
	MaxBeamWidth = 4096
	MaxBeamTop   = 4096
	MinBeamPrune = -1000.0
	MaxBeamOOV   = 100.0
)

// Validate refuses weights no beam search can use: NaN or infinite, or outside the ranges
// above. A zero field passes (it means "inherit": the sidecar's, else the default's).
func (o BeamOptions) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"alpha", o.Alpha}, {"beta", o.Beta}, {"prune", o.Prune}, {"oov", o.OOV}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("beam %s %v: not a finite number", f.name, f.v)
		}
	}
	switch {
	case o.Alpha < 0 || o.Alpha > MaxBeamAlpha:
		return fmt.Errorf("beam alpha %v outside 0..%v", o.Alpha, MaxBeamAlpha)
	case math.Abs(o.Beta) > MaxBeamBeta:
		return fmt.Errorf("beam beta %v outside %v..%v", o.Beta, -MaxBeamBeta, MaxBeamBeta)
	case o.Width < 0 || o.Width > MaxBeamWidth:
		return fmt.Errorf("beam width %d outside 0..%d (0 inherits)", o.Width, MaxBeamWidth)
	case o.Top < 0 || o.Top > MaxBeamTop:
		return fmt.Errorf("beam top %d outside 0..%d (0 inherits)", o.Top, MaxBeamTop)
	case o.Prune > 0 || o.Prune < MinBeamPrune:
		return fmt.Errorf("beam prune %v outside %v..0 (a log probability)", o.Prune, MinBeamPrune)
	case o.OOV < 0 || o.OOV > MaxBeamOOV:
		return fmt.Errorf("beam oov %v outside 0..%v (a cost per unlisted word)", o.OOV, MaxBeamOOV)
	}
	return nil
}

// LMWeightsPath is the sidecar holding the beam search's weights tuned for the language model
// at lm: the same path with its extension replaced by ".json" (lm.bin → lm.json,
// o5.bin → o5.json).
func LMWeightsPath(lm string) string {
	return strings.TrimSuffix(lm, filepath.Ext(lm)) + ".json"
}

// lmWeights is a sidecar's JSON ({"alpha": 0.5, "beta": 2.5, "width": 32, "top": 8,
// "prune": -10, "oov": 3}; every field optional, no others).
type lmWeights struct {
	Alpha *float64 `json:"alpha"`
	Beta  *float64 `json:"beta"`
	Width *int     `json:"width"`
	Top   *int     `json:"top"`
	Prune *float64 `json:"prune"`
	OOV   *float64 `json:"oov"`
}

// parseLMWeights reads a sidecar over d: the fields it has replace d's (a zero among them
// too: {"beta": 0} is no bonus, not the default).
func parseLMWeights(b []byte, d BeamOptions) (BeamOptions, error) {
	var w lmWeights
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return d, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return d, errors.New("more after the JSON object")
	}
	o := d
	if w.Alpha != nil {
		o.Alpha = *w.Alpha
	}
	if w.Beta != nil {
		o.Beta = *w.Beta
	}
	if w.Width != nil {
		if *w.Width < 1 { // zero inherits in BeamOptions; a sidecar has nothing to inherit from
			return d, fmt.Errorf("beam width %d outside 1..%d", *w.Width, MaxBeamWidth)
		}
		o.Width = *w.Width
	}
	if w.Top != nil {
		if *w.Top < 1 {
			return d, fmt.Errorf("beam top %d outside 1..%d", *w.Top, MaxBeamTop)
		}
		o.Top = *w.Top
	}
	if w.Prune != nil {
		o.Prune = *w.Prune
	}
	if w.OOV != nil {
		o.OOV = *w.OOV
	}
	if err := o.Validate(); err != nil {
		return d, err
	}
	return o, nil
}

// loadLMWeights reads the sidecar of the language model at lm over the defaults; no sidecar
// is the defaults.
func loadLMWeights(lm string) (BeamOptions, error) {
	path := LMWeightsPath(lm)
	if err := regularFile(path); errors.Is(err, fs.ErrNotExist) {
		return defaultBeam, nil
	} else if err != nil {
		return defaultBeam, fmt.Errorf("%w: %w", ErrLM, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return defaultBeam, fmt.Errorf("%w: %w", ErrLM, err)
	}
	o, err := parseLMWeights(b, defaultBeam)
	if err != nil {
		return defaultBeam, fmt.Errorf("%w: %s: %w", ErrLM, path, err)
	}
	return o, nil
}

const negInf = -1e30

func logAdd(a, b float64) float64 {
	if a < b {
		a, b = b, a
	}
	if b <= negInf {
		return a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// logSoftmax writes the log probabilities of a row of logits into lp (len(row) long).
func logSoftmax(lp []float64, row []float32) {
	mx := float64(row[0])
	for _, x := range row {
		mx = max(mx, float64(x))
	}
	var sum float64
	for _, x := range row {
		sum += math.Exp(float64(x) - mx)
	}
	lse := mx + math.Log(sum)
	for i, x := range row {
		lp[i] = float64(x) - lse
	}
}

// beamNode is one token of a prefix in a search's arena: prefixes share their beginnings, so
// extending one is O(1) instead of a copy.
type beamNode struct {
	parent int32  // the node of the prefix without this token; -1 at the root
	tok    int32  // the token (unused at the root)
	frame  int32  // the frame it was first emitted at
	n      int32  // the prefix's length
	hash   uint64 // of the prefix's tokens, to find a prefix among the beams
	word   uint64 // of the text of its last word so far (wordHash), with a word list
}

// beamEntry is a prefix under consideration: its node and scores.
type beamEntry struct {
	node  int32
	pb    float64 // log p of the prefix ending in blank
	pnb   float64 // ending in its last token
	lm    float64 // alpha·log P_LM + beta per token, summed
	score float64 // total() + lm, for ranking
}

func (e *beamEntry) total() float64 { return logAdd(e.pb, e.pnb) }

// beamHashMask narrows prefix hashes; a test narrows it to force collisions.
var beamHashMask = ^uint64(0)

// beamHash is the hash of a prefix hashed h followed by tok (FNV-1a over tokens).
func beamHash(h uint64, tok int32) uint64 {
	return (h ^ uint64(uint32(tok)+1)) * 0x100000001b3 & beamHashMask
}

// beamSearch holds one search's arena and scratch, reused from frame to frame.
type beamSearch struct {
	nodes   []beamNode
	byHash  map[uint64]int32 // a beam's prefix hash -> its index in beams
	chain   []int32          // the next beam index with the same hash, -1 at the end
	stay    []int32          // beam i's own prefix in next (-1 until touched)
	beams   []beamEntry
	next    []beamEntry
	lp      []float64
	scores  []float64
	cand    []int
	ctx     []int32
	a, b    []int32 // prefixes materialised to break exact ties
	lm      *ngramLM
	lmCache map[uint64]float32 // an n-gram (context and token, packed as the LM packs them) -> log p
	lex     *lexicon           // nil: no word is charged
	oov     float64
}

// logp is the LM's log P(tok | the prefix at node), remembered: the same contexts come back
// frame after frame, and a back-off through the orders costs up to 2·order lookups.
func (s *beamSearch) logp(node int32, tok int32) float32 {
	c := s.context(node)
	k := s.lm.key(c)<<s.lm.shift | uint64(uint16(tok))
	if p, ok := s.lmCache[k]; ok {
		return p
	}
	p := s.lm.logp(c, tok)
	s.lmCache[k] = p
	return p
}

func (s *beamSearch) extend(parent int32, tok int32, frame int32) int32 {
	p := &s.nodes[parent]
	word := p.word
	if s.lex != nil {
		if s.lex.startsWord[tok] {
			word = wordHashEmpty
		}
		word = wordHash(word, s.lex.text[tok])
	}
	s.nodes = append(s.nodes, beamNode{parent: parent, tok: tok, frame: frame, n: p.n + 1,
		hash: beamHash(p.hash, tok), word: word})
	return int32(len(s.nodes) - 1)
}

// unlisted is the charge for ending the word of the prefix at node: the OOV cost when the
// word list lacks it, else (or with no word, or no list) 0.
func (s *beamSearch) unlisted(node int32) float64 {
	if s.lex == nil || s.nodes[node].word == wordHashEmpty || s.lex.has(s.nodes[node].word) {
		return 0
	}
	return s.oov
}

// context fills s.ctx with the LM context of the prefix at node: its last order-1 tokens,
// <s> before the beginning.
func (s *beamSearch) context(node int32) []int32 {
	c := s.ctx // lm.order-1 long: the context the LM reads
	for i := len(c) - 1; i >= 0; i-- {
		if nd := &s.nodes[node]; nd.n > 0 {
			c[i] = nd.tok
			node = nd.parent
		} else {
			c[i] = lmBOS
		}
	}
	return c
}

// sameAfter reports whether the prefix at node y is the prefix at x followed by tok.
func (s *beamSearch) sameAfter(y, x int32, tok int32) bool {
	ny := &s.nodes[y]
	if ny.n != s.nodes[x].n+1 || ny.tok != tok {
		return false
	}
	for y = ny.parent; y != x; y, x = s.nodes[y].parent, s.nodes[x].parent {
		if s.nodes[y].tok != s.nodes[x].tok { // same lengths: both reach the root together
			return false
		}
	}
	return true
}

// ids materialises the prefix at node into dst (reused).
func (s *beamSearch) ids(dst []int32, node int32) []int32 {
	n := int(s.nodes[node].n)
	dst = slices.Grow(dst[:0], n)[:n]
	for i := n - 1; i >= 0; i-- {
		dst[i] = s.nodes[node].tok
		node = s.nodes[node].parent
	}
	return dst
}

// topTokens puts the k most likely tokens of lp into s.cand, most likely first, the lower id
// first among equals (as a stable sort of all of them would).
func (s *beamSearch) topTokens(lp []float64, k int) []int {
	c := s.cand[:0]
	for i, x := range lp {
		if len(c) == k && x <= lp[c[k-1]] {
			continue
		}
		j := len(c)
		if j < k {
			c = append(c, i)
		} else {
			j--
		}
		for ; j > 0 && x > lp[c[j-1]]; j-- {
			c[j] = c[j-1]
		}
		c[j] = i
	}
	s.cand = c
	return c
}

// beamCTC is CTC prefix beam search with lm over frames [start, t) of v logits (row-major);
// only tokens isText marks (pieces of words, not tags or specials) are emitted. With lex and
// o.OOV a word lex lacks costs o.OOV when the next begins or the prefix ends. It returns the best prefix's
// ids and their frame indices, appended to ids and frames. o is used as it is (no defaults).
// Its reference is train/sensevoice/beam.py; beamCTCRef (a test) is the plain form it must
// match exactly: prefixes are nodes of a shared arena and found among the beams by hash, so a
// frame costs no copies and no allocations beyond new prefixes.
func beamCTC(logits []float32, t, v, start, blank int, isText []bool, lm *ngramLM, lex *lexicon, o BeamOptions, ids, frames []int32) ([]int32, []int32) {
	if v <= 0 || t <= start || len(logits) < t*v || o.Width < 1 || o.Top < 1 {
		return ids, frames
	}
	s := &beamSearch{
		nodes:   make([]beamNode, 1, 1024),
		byHash:  make(map[uint64]int32, 2*o.Width),
		lp:      make([]float64, v),
		cand:    make([]int, 0, o.Top),
		ctx:     make([]int32, lm.order-1),
		lm:      lm,
		lmCache: make(map[uint64]float32, 1024),
	}
	if lex != nil && o.OOV > 0 && len(lex.startsWord) >= v {
		s.lex, s.oov = lex, o.OOV
	}
	s.nodes[0] = beamNode{parent: -1, hash: 14695981039346656037 & beamHashMask, word: wordHashEmpty}
	s.beams = append(s.beams, beamEntry{node: 0, pb: 0, pnb: negInf})
	lp := s.lp
	for f := start; f < t; f++ {
		logSoftmax(lp, logits[f*v:(f+1)*v])
		cand := s.topTokens(lp, min(o.Top, v))

		// index this frame's beams by prefix, so an extension that spells another beam's
		// prefix joins it
		clear(s.byHash)
		s.chain = s.chain[:0]
		s.stay = s.stay[:0]
		for i, b := range s.beams {
			h := s.nodes[b.node].hash
			prev, ok := s.byHash[h]
			if !ok {
				prev = -1
			}
			s.chain = append(s.chain, prev)
			s.byHash[h] = int32(i)
			s.stay = append(s.stay, -1)
		}
		s.next = s.next[:0]
		// stayOf is beam j's own prefix in next, created by the first to reach it: node and
		// lm are the creator's (the lm of one prefix is the same whoever computes it; its
		// frames are not).
		stayOf := func(j int, node int32, lms float64) int32 {
			if s.stay[j] < 0 {
				s.next = append(s.next, beamEntry{node: node, pb: negInf, pnb: negInf, lm: lms})
				s.stay[j] = int32(len(s.next) - 1)
			}
			return s.stay[j]
		}
		for i := range s.beams {
			b := s.beams[i]
			tot := b.total()
			bn := &s.nodes[b.node]
			last := int32(-1)
			if bn.n > 0 {
				last = bn.tok
			}
			bHash := bn.hash
			for _, c := range cand {
				l := lp[c]
				if c == blank {
					e := stayOf(i, b.node, b.lm)
					s.next[e].pb = logAdd(s.next[e].pb, tot+l)
					continue
				}
				if l < o.Prune || c >= len(isText) || !isText[c] {
					continue
				}
				tok := int32(c)
				// is b+c a prefix already among the beams?
				j := int32(-1)
				if k, ok := s.byHash[beamHash(bHash, tok)]; ok {
					for ; k >= 0; k = s.chain[k] {
						if s.sameAfter(s.beams[k].node, b.node, tok) {
							j = k
							break
						}
					}
				}
				var e int32
				if j >= 0 && s.stay[j] >= 0 {
					e = s.stay[j]
				} else {
					add := o.Alpha*float64(s.logp(b.node, tok)) + o.Beta
					if s.lex != nil && s.lex.startsWord[tok] {
						add -= s.unlisted(b.node)
					}
					node := s.extend(b.node, tok, int32(f))
					if j >= 0 {
						e = stayOf(int(j), node, b.lm+add)
					} else {
						s.next = append(s.next, beamEntry{node: node, pb: negInf, pnb: negInf, lm: b.lm + add})
						e = int32(len(s.next) - 1)
					}
				}
				if tok == last {
					s.next[e].pnb = logAdd(s.next[e].pnb, b.pb+l) // a repeat needs a blank between
					st := stayOf(i, b.node, b.lm)
					s.next[st].pnb = logAdd(s.next[st].pnb, b.pnb+l)
				} else {
					s.next[e].pnb = logAdd(s.next[e].pnb, tot+l)
				}
			}
		}
		// Rank them. A prefix no path reaches any more (a repeat with no blank before it:
		// log p -1e30) ranks below every live one and ties with the other dead ones on score,
		// so the ties are broken by prefix, which costs; they are ranked only when the beam
		// has room for them.
		live := 0
		for k := range s.next {
			e := &s.next[k]
			tot := e.total()
			e.score = tot + e.lm
			if tot > negInf {
				s.next[live], s.next[k] = s.next[k], s.next[live]
				live++
			}
		}
		if live > o.Width {
			s.keepBest(live, o.Width)
			slices.SortFunc(s.next[:o.Width], s.rank)
		} else {
			slices.SortFunc(s.next[:live], s.rank)
			slices.SortFunc(s.next[live:], s.rank)
		}
		s.beams, s.next = s.next, s.beams
		if len(s.beams) > o.Width {
			s.beams = s.beams[:o.Width]
		}
	}
	best := -1
	bestScore := math.Inf(-1)
	for k := range s.beams {
		b := &s.beams[k]
		sc := b.total() + b.lm + o.Alpha*float64(s.logp(b.node, lmEOS)) - s.unlisted(b.node)
		if sc > bestScore {
			best, bestScore = k, sc
		}
	}
	if best < 0 {
		return ids, frames
	}
	node := s.beams[best].node
	n := int(s.nodes[node].n)
	ids, frames = slices.Grow(ids, n), slices.Grow(frames, n)
	at := len(ids)
	ids, frames = ids[:at+n], frames[:at+n]
	for i := at + n - 1; i >= at; i-- {
		ids[i], frames[i] = s.nodes[node].tok, s.nodes[node].frame
		node = s.nodes[node].parent
	}
	return ids, frames
}

// keepBest moves the width best of the first live entries of next (by rank) to its front, in no
// particular order, leaving the others after them: a selection on score, then rank among the
// entries tied at the cut.
func (s *beamSearch) keepBest(live, width int) {
	sc := s.scores[:0]
	for _, e := range s.next[:live] {
		sc = append(sc, e.score)
	}
	s.scores = sc
	cut := nthLargest(sc, width-1) // the width-th best score
	in := 0
	for k := range s.next[:live] { // strictly above the cut: kept
		if s.next[k].score > cut {
			s.next[in], s.next[k] = s.next[k], s.next[in]
			in++
		}
	}
	tied := in
	for k := in; k < live; k++ { // at the cut: kept by rank while room is left
		if s.next[k].score == cut {
			s.next[tied], s.next[k] = s.next[k], s.next[tied]
			tied++
		}
	}
	if tied > width {
		slices.SortFunc(s.next[in:tied], s.rank)
	}
}

// nthLargest is the value that would be at index n (0-based) of x sorted descending; it
// reorders x. Quickselect with a median-of-three pivot.
func nthLargest(x []float64, n int) float64 {
	lo, hi := 0, len(x)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		a, b, c := x[lo], x[mid], x[hi]
		p := max(min(a, b), min(max(a, b), c)) // the median of three
		i, j := lo, hi
		for i <= j {
			for x[i] > p {
				i++
			}
			for x[j] < p {
				j--
			}
			if i <= j {
				x[i], x[j] = x[j], x[i]
				i++
				j--
			}
		}
		switch {
		case n <= j:
			hi = j
		case n >= i:
			lo = i
		default:
			return x[n]
		}
	}
	return x[n]
}

// rank orders entries best first; exact ties go to the lower prefix (its ids compared in
// order, a prefix before its extensions), so the order never depends on how they were made.
func (s *beamSearch) rank(x, y beamEntry) int {
	switch {
	case x.score > y.score:
		return -1
	case x.score < y.score:
		return 1
	case x.node == y.node:
		return 0
	}
	s.a, s.b = s.ids(s.a, x.node), s.ids(s.b, y.node)
	return slices.Compare(s.a, s.b)
}

// numQueries is how many output frames the model's prompt (language, emotion, event, ITN)
// takes before the speech frames.
const numQueries = 4
