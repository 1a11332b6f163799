package asr

// Low frame rate stacking (LFR) as FunASR does it: with window m and shift n, T input frames
// give ceil(T/n) output frames; output frame i stacks input frames clamp(n·i − (m−1)/2 + j,
// 0, T−1) for j = 0..m−1 (the first frame repeated (m−1)/2 times on the left, the last frame
// repeated on the right as needed).

// LFRFrames is the number of LFR frames for t input frames with shift n: ceil(t/n).
func LFRFrames(t, n int) int {
	if t <= 0 || n <= 0 {
		return 0
	}
	return (t + n - 1) / n
}

// LFRIndex is the input frame that row i, slot j of the LFR output copies.
func LFRIndex(i, j, t, m, n int) int {
	k := n*i - (m-1)/2 + j
	if k < 0 {
		return 0
	}
	if k > t-1 {
		return t - 1
	}
	return k
}

// cmvn holds per-dimension (x + negMean) * invStd over the stacked LFR vector.
type cmvn struct {
	negMean []float32
	invStd  []float32
}

// lfrCMVN stacks fbank frames (t × dim, row-major) into LFR frames with window m and shift n
// and applies CMVN in the same pass, appending ceil(t/n) × m·dim values to dst. A nil cmvn
// stacks only. It allocates only when dst must grow.
func lfrCMVN(dst []float32, feats []float32, dim, m, n int, c *cmvn) []float32 {
	if dim <= 0 {
		return dst
	}
	t := len(feats) / dim
	out := LFRFrames(t, n)
	od := m * dim
	base := len(dst)
	dst = grow(dst, out*od)
	for i := range out {
		row := dst[base+i*od : base+(i+1)*od]
		for j := range m {
			src := feats[LFRIndex(i, j, t, m, n)*dim:][:dim]
			seg := row[j*dim : (j+1)*dim]
			if c == nil {
				copy(seg, src)
				continue
			}
			nm := c.negMean[j*dim : (j+1)*dim]
			is := c.invStd[j*dim : (j+1)*dim]
			for d, v := range src {
				seg[d] = (v + nm[d]) * is[d]
			}
		}
	}
	return dst
}
