package asr

import (
	"context"
	"log/slog"
	"math"
	"sort"

	"github.com/parley-voice/parley/audio/vad"
)

// Long audio is cut into pieces of at most maxSegment samples at pauses. With the Silero VAD
// (audio/vad), a pause is a run of windows whose speech probability stays under
// vadPauseProb; without it (no model installed, or Config.VAD = "none"), pauses are found
// from short-time energy in 10 ms frames. Either way the longest pause in the last two
// thirds of the window wins and its middle is the cut; with no pause, the quietest 50 ms
// in that range.
//
// Quiet (energy) means: within 8 dB of the window's quietest 5 % of frames, never under
// −60 dBFS, and at least 10 dB under the median frame.

const (
	energyFrame    = 160    // 10 ms
	silenceFloor   = 1e-6   // −60 dBFS mean square
	silentRMS      = 5.6e-4 // −65 dBFS: a piece this quiet overall is not sent to the model …
	silentPeak     = 3.2e-3 // … unless some sample reaches −50 dBFS
	minQuietFrames = 5      // a quiet run must last 50 ms to count as a pause
)

// findCut returns where to end a piece that starts at x[0] when x is longer than the piece
// length the model decodes best (len(x) > soft): a sample index in (0, max(soft, hard)].
// The longest pause in the last two thirds of the first soft samples wins; without one, the
// first pause after them (up to hard samples: a sentence is better whole than cut inside a
// word); without one either, the quietest 50 ms in the last two thirds of the soft window.
func findCut(x []float32, soft, hard int) int {
	hard = max(hard, soft)
	if len(x) <= soft {
		return len(x)
	}
	ns, nh := soft/energyFrame, min(len(x), hard)/energyFrame
	if ns < 3 {
		return soft
	}
	e, sorted := frameEnergies(x, nh)
	// Quiet = within 8 dB of the quietest 5 %, never under −60 dBFS, and always at least
	// 10 dB under the median so that steady noise is not taken for a pause.
	thr := math.Max(sorted[len(sorted)/20]*6.3, silenceFloor)
	thr = math.Min(thr, sorted[len(sorted)/2]/10)
	quiet := func(k int) bool { return e[k] < thr }
	if k, n := longestRun(quiet, ns/3, ns); n >= minQuietFrames {
		return (k + n/2) * energyFrame
	}
	if k, n := firstRun(quiet, ns/3, ns, nh, minQuietFrames); n > 0 {
		return (k + n/2) * energyFrame
	}
	// No pause: the quietest 50 ms window.
	lo := ns / 3
	best, bestE := ns-1, math.Inf(1)
	for k := lo; k+5 <= ns; k++ {
		var s float64
		for _, v := range e[k : k+5] {
			s += v
		}
		if s < bestE {
			best, bestE = k+2, s
		}
	}
	if best <= 0 {
		return soft
	}
	return best * energyFrame
}

// eachRun calls visit with the start and length of each maximal run of frames in [lo, hi)
// where in(k) holds, in order, until visit returns false.
func eachRun(in func(int) bool, lo, hi int, visit func(start, n int) bool) {
	for k := lo; k < hi; {
		if !in(k) {
			k++
			continue
		}
		j := k
		for j < hi && in(j) {
			j++
		}
		if !visit(k, j-k) {
			return
		}
		k = j
	}
}

// longestRun is the longest run of frames in [lo, hi) where in(k) holds (of equal runs the
// first, unless a later one reaches hi: it may go on past the window): its start and length,
// length 0 when there is none.
func longestRun(in func(int) bool, lo, hi int) (start, n int) {
	start = -1
	eachRun(in, lo, hi, func(k, m int) bool {
		if m > n || (m == n && k+m == hi) {
			start, n = k, m
		}
		return true
	})
	return start, n
}

// firstRun is the first run of at least minLen frames where in(k) holds that reaches into
// [lo, hi): one that began before lo (not before floor) counts whole, one cut off at hi counts
// as far as it goes. Its start and length; length 0 when there is none.
func firstRun(in func(int) bool, floor, lo, hi, minLen int) (start, n int) {
	for lo > floor && lo < hi && in(lo) && in(lo-1) {
		lo--
	}
	start = -1
	eachRun(in, lo, hi, func(k, m int) bool {
		if m >= minLen {
			start, n = k, m
			return false
		}
		return true
	})
	return start, n
}

func meanSquare(x []float32) float64 {
	if len(x) == 0 {
		return 0
	}
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return s / float64(len(x))
}

// isSilent reports whether a piece holds nothing worth sending to the model: digital
// silence, a constant offset, a steady hiss below −65 dBFS with no sample further than
// −50 dBFS from the piece's mean (the frontend removes each frame's mean, so DC carries
// nothing), or a steadier hiss up to −45 dBFS (isSteadyHiss). A piece that quiet with sound
// in it all the same (hasQuietSound) is sent: the model hears speech far under the corpus's
// levels (at −70 dBFS as at full level), and a user with a faint microphone should get words,
// not nothing.
func isSilent(x []float32) bool {
	if isQuiet(x) {
		return !hasQuietSound(x)
	}
	return isSteadyHiss(x)
}

// A hiss louder than isQuiet's (room tone at −60 dBFS, an idle microphone's noise) is silent
// too when nothing in it stands out from it: no soundRun of soundWindow frames hissDynamic
// over its quietest 5 %, which speech has even at a poor signal-to-noise ratio. Sent to the
// model, such a piece came back as words ("stop", "he"): a long recording's pauses cut into
// pieces of their own, the held-out person with 1.5–3 s of −60 dBFS room tone around each
// sentence decoded at 39 % WER against 31 % without it.
const (
	hissRMS     = 5.6e-3 // −45 dBFS: louder is not taken for a pause, however steady
	hissDynamic = 3.98   // 6 dB
)

// The level is that of the frames that are not digital silence, each frame's mean removed: a
// DC offset carries nothing, and a word after a noise gate's zeros is as loud as it is.
// A piece under 100 ms (or 50 ms of signal) is too short to tell a pause from a short sound
// and is sent, as before.
func isSteadyHiss(x []float32) bool {
	e, live, ok := liveEnergies(x)
	if !ok {
		return false
	}
	var sum float64
	for _, v := range live {
		sum += v
	}
	return math.Sqrt(sum/float64(len(live))) < hissRMS && !soundOver(e, live, hissDynamic, 0)
}

// Sound in a quiet piece: soundRun of soundWindow consecutive 10 ms frames over −80 dBFS and
// 15 dB over the quietest 5 % of the frames that are not digital silence, each frame's mean
// removed as the frontend does. A steady hiss (also after digital silence, as from a noise
// gate), dither, a DC offset or a step in it, and lone clicks have no such run; the model
// heard words in each of them ("he", "the position").
const (
	quietSoundFloor = 1e-8  // −80 dBFS mean square
	digitalSilence  = 1e-12 // a frame's variance at or under this is no signal at all
)

func hasQuietSound(x []float32) bool {
	e, live, ok := liveEnergies(x)
	return ok && soundOver(e, live, minDynamic, quietSoundFloor)
}

// liveEnergies returns the variance of each of x's 10 ms frames (its mean removed, as the
// frontend does) and, apart, those of the frames that are not digital silence; ok is false
// for a piece too short to tell a pause from a short sound (under 2 soundWindows of frames,
// or under one of signal).
func liveEnergies(x []float32) (e, live []float64, ok bool) {
	e = make([]float64, len(x)/energyFrame)
	for k := range e {
		e[k] = variance(x[k*energyFrame : (k+1)*energyFrame])
		if e[k] > digitalSilence {
			live = append(live, e[k])
		}
	}
	return e, live, len(e) >= 2*soundWindow && len(live) >= soundWindow
}

// soundOver reports whether liveEnergies' frames have a run (soundRun of soundWindow) dynamic
// times over the quietest 5 % of the live frames and over floor (live is sorted in place).
func soundOver(e, live []float64, dynamic, floor float64) bool {
	sort.Float64s(live)
	thr := math.Max(live[len(live)/20]*dynamic, floor)
	for k := 0; k+soundWindow <= len(e); k++ {
		if loudRun(e, k, thr) {
			return true
		}
	}
	return false
}

// loudRun reports whether soundRun of the soundWindow frames from e[k] are at or over thr:
// sound, not a click.
func loudRun(e []float64, k int, thr float64) bool {
	n := 0
	for _, v := range e[k:min(k+soundWindow, len(e))] {
		if v >= thr {
			n++
		}
	}
	return n >= soundRun
}

// variance is x's mean square about its own mean.
func variance(x []float32) float64 {
	var mean float64
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	var s float64
	for _, v := range x {
		d := float64(v) - mean
		s += d * d
	}
	return s / float64(len(x))
}

func isQuiet(x []float32) bool {
	if len(x) == 0 {
		return true
	}
	var mean float64
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	var peak, ss float64
	for _, v := range x {
		d := math.Abs(float64(v) - mean)
		peak = math.Max(peak, d)
		ss += d * d
	}
	return peak < silentPeak && math.Sqrt(ss/float64(len(x))) < silentRMS
}

// Quiet at the ends of a piece. The model learnt from utterances with well under a second of
// silence around them; a recording that starts or ends with seconds of room tone makes it
// hear words there and garbles the speech beside it (3 s of digital silence before "set the
// volume to five" decodes "seven"). So each piece keeps at most keepQuiet of the
// quiet before its first and after its last sound, found from 10 ms frame energies: a
// frame is sound when it is 10 dB over the piece's quietest 5 % of frames (and over
// −60 dBFS), and sound starts where 3 of 5 frames are. A piece without 15 dB between its
// quiet and its loud frames (steady noise) is left whole. The segments' Start and End are
// then those of what was kept.
const (
	keepQuiet      = SampleRate // 1 s: more than the corpus has around an utterance
	soundOverFloor = 10.0       // 10 dB
	minDynamic     = 31.6       // 15 dB between the quietest 5 % of frames and the loud ones
	soundRun       = 3          // loud frames …
	soundWindow    = 5          // … among this many consecutive ones: sound, not a click
)

// soundSpan returns the part of x to keep: [start, end) with at most keepQuiet of quiet on
// either side of its sound.
func soundSpan(x []float32) (start, end int) {
	if len(x) <= 2*keepQuiet {
		return 0, len(x)
	}
	nf := len(x) / energyFrame
	e, sorted := frameEnergies(x, nf)
	floor := math.Max(sorted[nf/20], silenceFloor/10)
	// the loudest soundRun-th frame: a piece with one short word in it still has that many
	if sorted[nf-soundRun] < floor*minDynamic {
		return 0, len(x)
	}
	thr := math.Max(floor*soundOverFloor, silenceFloor)
	first, last := -1, -1
	for k := 0; k < nf; k++ {
		if loudRun(e, k, thr) {
			first = k
			for e[first] < thr { // its first loud frame
				first++
			}
			break
		}
	}
	for k := nf - 1; k >= 0; k-- {
		if loudRun(e, max(0, k-soundWindow+1), thr) && e[k] >= thr {
			last = k
			break
		}
	}
	if first < 0 || last < first {
		return 0, len(x)
	}
	return max(0, first*energyFrame-keepQuiet), min(len(x), (last+1)*energyFrame+keepQuiet)
}

// frameEnergies returns the mean square of each of x's first nf frames, and the same sorted.
func frameEnergies(x []float32, nf int) (e, sorted []float64) {
	e = make([]float64, nf)
	for k := range e {
		e[k] = meanSquare(x[k*energyFrame : (k+1)*energyFrame])
	}
	sorted = append([]float64(nil), e...)
	sort.Float64s(sorted)
	return e, sorted
}

// VAD pause detection.
const (
	vadPauseProb    = 0.35 // under this a window is not speech (Silero's usual negative threshold)
	vadMinPauseWins = 3    // a pause lasts at least 3 windows (96 ms)
)

// cutter finds cut points in a stream that it is fed from a window-aligned start. With a VAD
// model it keeps one speech probability per VAD window of the audio not yet cut off; all
// its cuts are whole windows, so the next piece starts aligned too.
type cutter struct {
	vad    *vad.Model // nil: energy only
	win    int
	probs  []float32 // per window from the start of the current buffer
	fed    int       // samples of the current buffer already given to the VAD
	log    *slog.Logger
	failed bool
}

// feed gives the VAD the whole windows of buf it has not seen yet.
func (c *cutter) feed(ctx context.Context, buf []float32) {
	if c.vad == nil || c.failed {
		return
	}
	for c.fed+c.win <= len(buf) {
		if ctx.Err() != nil {
			return
		}
		p, err := c.vad.Prob(buf[c.fed : c.fed+c.win])
		if err != nil {
			c.failed = true
			c.log.Warn("asr: VAD failed; cutting long audio by energy", "err", err)
			return
		}
		c.probs = append(c.probs, p)
		c.fed += c.win
	}
}

// cut returns where to end the piece at the start of buf (len(buf) > soft): (0, max(soft,
// hard)], chosen as findCut chooses, with the VAD's pauses when there is a VAD.
func (c *cutter) cut(buf []float32, soft, hard int) int {
	if c.vad == nil || c.failed {
		return findCut(buf, soft, hard)
	}
	ks := min(len(c.probs), soft/c.win)
	kh := min(len(c.probs), max(soft, hard)/c.win)
	pause := func(k int) bool { return c.probs[k] < vadPauseProb }
	if k, n := longestRun(pause, ks/3, ks); n >= vadMinPauseWins {
		return (k + n/2) * c.win
	}
	if k, n := firstRun(pause, ks/3, ks, kh, vadMinPauseWins); n > 0 {
		return (k + n/2) * c.win
	}
	// No pause the VAD believes in: the quietest spot in the soft window, on a window boundary.
	n := findCut(buf, soft, soft) / c.win * c.win
	if n <= 0 {
		n = c.win
	}
	return n
}

// advance drops the first n samples (a cut) from the buffer's bookkeeping.
func (c *cutter) advance(n int) {
	if c.vad == nil || c.failed {
		return
	}
	k := n / c.win
	if k > len(c.probs) {
		k = len(c.probs)
	}
	c.probs = c.probs[:copy(c.probs, c.probs[k:])]
	c.fed = max(0, c.fed-n)
}
