package asr

import "math"

// greedyCTC is greedy CTC search over t frames of v logits (row-major): per frame the argmax
// (the first maximum on ties, as std::max_element), repeats collapsed, blank dropped. Each
// kept token's frame index is recorded. ban ≥ 0 excludes that id from the argmax (FunASR's
// ban_emo_unk; the row is modified during the call and restored). ids and frames are
// appended to and returned.
func greedyCTC(logits []float32, t, v, blank, ban int, ids, frames []int32) ([]int32, []int32) {
	if v <= 0 || t <= 0 || len(logits) < t*v {
		return ids, frames
	}
	prev := -1
	for f := range t {
		row := logits[f*v : (f+1)*v]
		var saved float32
		if ban >= 0 && ban < v {
			// Take the banned id out of the race; restored below.
			saved, row[ban] = row[ban], float32(math.Inf(-1))
		}
		best, bv := 0, row[0]
		for i, x := range row[1:] {
			if x > bv {
				best, bv = i+1, x
			}
		}
		if ban >= 0 && ban < v {
			row[ban] = saved
			if ban == best { // every other logit is NaN or -Inf
				best = (ban + 1) % v
			}
		}
		if best != blank && best != prev {
			ids = append(ids, int32(best))
			frames = append(frames, int32(f))
		}
		prev = best
	}
	return ids, frames
}
