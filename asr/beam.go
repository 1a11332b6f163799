package asr

import (
	"math"
	"slices"
	"sort"
)

// BeamOptions tune the language-model beam search (train/sensevoice/beam.py is its reference).
type BeamOptions struct {
	Width int     // prefixes kept per frame (default 32)
	Alpha float64 // language-model weight (default 0.4)
	Beta  float64 // bonus per token, against the model's preference for short output (default 2)
	Top   int     // tokens tried per frame (default 8)
	Prune float64 // log probability below which a token is not tried (default -10)
}

func (o BeamOptions) withDefaults() BeamOptions {
	if o.Width <= 0 {
		o.Width = 32
	}
	if o.Alpha == 0 {
		o.Alpha = 0.4
	}
	if o.Beta == 0 {
		o.Beta = 2
	}
	if o.Top <= 0 {
		o.Top = 8
	}
	if o.Prune == 0 {
		o.Prune = -10
	}
	return o
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
// ids and their frame indices, appended to ids and frames.
func beamCTC(logits []float32, t, v, start, blank int, isText []bool, lm *ngramLM, o BeamOptions, ids, frames []int32) ([]int32, []int32) {
	o = o.withDefaults()
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
