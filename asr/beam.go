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
	"sort"
	"strings"
)

// BeamOptions tune the language-model beam search (train/sensevoice/beam.py is its reference).
// A zero field takes the language model's own weights (its sidecar, LMWeightsPath), else the
// default below; BeamZero in Alpha or Beta is an explicit zero.
type BeamOptions struct {
	Width int     // prefixes kept per frame (default 32)
	Alpha float64 // language-model weight (default 0.4)
	Beta  float64 // bonus per token, against the model's preference for short output (default 2)
	Top   int     // tokens tried per frame (default 8)
	Prune float64 // log probability below which a token is not tried (default -10)
}

// BeamZero in BeamOptions.Alpha or Beta asks for a zero weight (no language model, no bonus)
// where a zero field would inherit.
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
)

// Validate refuses weights no beam search can use: NaN or infinite, or outside the ranges
// above. A zero field passes (it means "inherit": the sidecar's, else the default's).
func (o BeamOptions) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"alpha", o.Alpha}, {"beta", o.Beta}, {"prune", o.Prune}} {
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
// "prune": -10}; every field optional, no others).
type lmWeights struct {
	Alpha *float64 `json:"alpha"`
	Beta  *float64 `json:"beta"`
	Width *int     `json:"width"`
	Top   *int     `json:"top"`
	Prune *float64 `json:"prune"`
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
	if err := o.Validate(); err != nil {
		return d, err
	}
	return o, nil
}

// loadLMWeights reads the sidecar of the language model at lm over the defaults; no sidecar
// is the defaults.
func loadLMWeights(lm string) (BeamOptions, error) {
	path := LMWeightsPath(lm)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return defaultBeam, nil
	}
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

type beamEntry struct {
	ids    []int32 // the prefix
	frames []int32 // the frame each token was first emitted at
	pb     float64 // log p of the prefix ending in blank
	pnb    float64 // ending in its last token
	lm     float64 // alpha·log P_LM + beta per token, summed
}

func (e *beamEntry) total() float64 { return logAdd(e.pb, e.pnb) }

func beamKey(ids []int32) string {
	b := make([]byte, 2*len(ids))
	for i, id := range ids {
		b[2*i], b[2*i+1] = byte(id>>8), byte(id)
	}
	return string(b)
}

// beamCTC is CTC prefix beam search with lm over frames [start, t) of v logits (row-major);
// only tokens isText marks (pieces of words, not tags or specials) are emitted. It returns the best prefix's
// ids and their frame indices, appended to ids and frames. o is used as it is (no defaults).
func beamCTC(logits []float32, t, v, start, blank int, isText []bool, lm *ngramLM, o BeamOptions, ids, frames []int32) ([]int32, []int32) {
	if v <= 0 || t <= start || len(logits) < t*v {
		return ids, frames
	}
	ctx0 := make([]int32, lm.order-1)
	for i := range ctx0 {
		ctx0[i] = lmBOS
	}
	beams := []*beamEntry{{pb: 0, pnb: negInf}}
	lp := make([]float64, v)
	order := make([]int, v)
	ctxBuf := make([]int32, 0, 64)
	for f := start; f < t; f++ {
		row := logits[f*v : (f+1)*v]
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
			order[i] = i
		}
		sort.Slice(order, func(a, b int) bool {
			return lp[order[a]] > lp[order[b]] || lp[order[a]] == lp[order[b]] && order[a] < order[b]
		})
		cand := order[:min(o.Top, v)]
		next := map[string]*beamEntry{}
		get := func(p []int32, fr []int32, lms float64) *beamEntry {
			k := beamKey(p)
			e, ok := next[k]
			if !ok {
				e = &beamEntry{ids: p, frames: fr, pb: negInf, pnb: negInf, lm: lms}
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
			return sa > sb || sa == sb && beamKey(beams[a].ids) < beamKey(beams[b].ids)
		})
		if len(beams) > o.Width {
			beams = beams[:o.Width]
		}
	}
	var best *beamEntry
	bestScore := math.Inf(-1)
	for _, b := range beams {
		ctxBuf = append(append(ctxBuf[:0], ctx0...), b.ids...)
		s := b.total() + b.lm + o.Alpha*float64(lm.logp(ctxBuf, lmEOS))
		if s > bestScore {
			best, bestScore = b, s
		}
	}
	if best == nil {
		return ids, frames
	}
	return append(ids, best.ids...), append(frames, best.frames...)
}

// numQueries is how many output frames the model's prompt (language, emotion, event, ITN)
// takes before the speech frames.
const numQueries = 4
