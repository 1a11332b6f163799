package asr

// greedyCTC is greedy CTC search over t frames of v logits (row-major): per frame the argmax
// (the first maximum on ties, as std::max_element), repeats collapsed, blank dropped. Each
// kept token's frame index is recorded. ban ≥ 0 excludes that id from the argmax (FunASR's
// ban_emo_unk). ids and frames are appended to and returned.
func greedyCTC(logits []float32, t, v, blank, ban int, ids, frames []int32) ([]int32, []int32) {
	if v <= 0 || t <= 0 || len(logits) < t*v {
		return ids, frames
	}
	prev := -1
	for f := range t {
		row := logits[f*v : (f+1)*v]
		best := 0
		if ban == 0 && v > 1 {
			best = 1
		}
		bv := row[best]
		for i := best + 1; i < v; i++ {
			if row[i] > bv && i != ban {
				best, bv = i, row[i]
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
