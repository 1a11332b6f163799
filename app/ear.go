package app

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/audio"
)

// earRing holds the last 64 s of capture (and its echo reference) at 16 kHz.
const earRing = 1 << 20

// ear owns the capture: it reads the microphone, meters it, runs the wake word and the VAD,
// keeps the recent audio with its echo reference, and tells the loop about speech it believes
// is the user's (not Parley's own voice coming back through the speakers).
type ear struct {
	a   *Assistant
	mu  sync.Mutex
	cap []float32
	n   int64

	fresh    atomic.Bool   // the microphone (re)opened: what the VAD followed is gone
	delay    atomic.Int64  // the echo's delay (samples) as last measured with confidence; 0 unknown
	coupling atomic.Uint64 // float64 bits: capture/reference RMS of confident echo; 0 unknown // samples captured so far
}

func newEar(a *Assistant) *ear {
	return &ear{a: a, cap: make([]float32, earRing)}
}

func (e *ear) pos() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

// slice copies capture [start, end) (clamped to what is still held).
func (e *ear) slice(start, end int64) []float32 {
	c, _ := e.sliceFrom(start, end)
	return c
}

// sliceFrom is slice, with the capture index the copy really starts at.
func (e *ear) sliceFrom(start, end int64) ([]float32, int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	end = min(end, e.n)
	start = max(start, e.n-earRing+1, 0)
	if end <= start {
		return nil, start
	}
	out := make([]float32, end-start)
	for i := range out {
		out[i] = e.cap[(start+int64(i))&(earRing-1)]
	}
	return out, start
}

// refWindow returns the echo reference for capture [start, end).
func (e *ear) refWindow(start, end int64) []float32 {
	out := make([]float32, max(0, end-start))
	e.a.p.Echo.Reference(out, start)
	return out
}

// echoLead is how far the reference may trail the capture (the speaker's position is known
// only to a device buffer).
const echoLead = 100 * time.Millisecond

// verdict is the self-echo check's answer about a stretch of capture.
type verdict int

const (
	unsure verdict = iota // too quiet to tell, or Parley is speaking and its reference is late
	user                  // somebody else
	echo                  // Parley's own voice
)

// isEcho reports whether capture [start, end) is Parley's own voice.
func (e *ear) isEcho(start, end int64) bool { return e.judge(start, end) == echo }

// judge tells Parley's own voice from the user's: capture [start, end) is echo when the best
// delayed, scaled copy of the echo reference explains all but Options.EchoResidual of its
// energy.
func (e *ear) judge(start, end int64) verdict {
	const maxWin = SampleRate // judge at most the last second
	if end-start > maxWin {
		start = end - maxWin
	}
	c := e.slice(start, end)
	if len(c) < SampleRate/20 || audio.RMS(c) < 3e-3 { // under -50 dBFS: nobody is talking
		return unsure
	}
	if e.a.o.EchoResidual < 0 || e.a.p.Echo == nil {
		return user
	}
	// delays searched: the configured range, widened around the delay last measured (host
	// under-runs through PulseAudio add up to more delay than any device reports)
	dmin, dmax := -e.a.samples(echoLead), e.a.samples(e.a.o.EchoMaxDelay)
	if d := e.delay.Load(); d != 0 {
		dmin, dmax = min(dmin, d-e.a.samples(200*time.Millisecond)), max(dmax, d+e.a.samples(300*time.Millisecond))
	}
	r := e.refWindow(start-dmax, end-dmin)
	res, lag, ok := echoResidual(c, r, int(dmax-dmin))
	crms, rrms := audio.RMS(c), audio.RMS(r)
	if ok && res < 0.1 {
		e.delay.Store(dmax - int64(lag))
		if rrms > 0 { // how loud Parley's own voice comes back
			g := crms / rrms
			if old := math.Float64frombits(e.coupling.Load()); old > 0 {
				g = 0.8*old + 0.2*g
			}
			e.coupling.Store(math.Float64bits(g))
		}
	}
	// far quieter than Parley's own voice comes back: the tail of the echo or noise, not a
	// voice that could be heard over it
	quiet := false
	if g := math.Float64frombits(e.coupling.Load()); ok && g > 0 && crms < 0.25*g*rrms {
		quiet = true
	}
	e.a.log.Debug("echo check", "residual", res, "ok", ok, "delay_ms", (dmax-int64(lag))*1000/SampleRate,
		"capture_db", audio.DB(audio.RMS(c)), "ref_db", audio.DB(audio.RMS(r)), "from", start, "to", end)
	switch {
	case ok && res <= e.a.o.EchoResidual:
		return echo
	case !ok && e.a.State() == Speaking: // the reference may not have caught up yet
		return unsure
	case ok && res < grayResidual: // partly explained: a host glitch inside the window, or
		return unsure // the user over the echo; more audio decides
	case quiet:
		return unsure
	}
	return user
}

// grayResidual: residuals between Options.EchoResidual and this are judged again on more audio
// before a start is taken as the user's (a PulseAudio under-run inside a window spoils the fit).
const grayResidual = 0.9

// echoResidual fits capture c, block by block (50 ms), as g·r[lag+i] with each block's own
// best lag in [0, lags], and returns the fraction of c's energy the fits leave unexplained
// (Σ E_b(1 − ρ_b²) / Σ E_b, ρ_b the normalised cross-correlation) and the energy-weighted
// lag. Blocks get their own lag because a host under- or overrun shifts the rest of the echo.
// ok is false when the reference is silent (nothing played: it cannot be echo) or the
// capture is.
func echoResidual(c, r []float32, lags int) (res float64, lag int, ok bool) {
	if len(r) < len(c)+lags {
		lags = len(r) - len(c)
	}
	if lags < 0 || audio.RMS(r) < 1e-4 || audio.RMS(c) < 1e-5 {
		return 1, 0, false
	}
	const block = SampleRate / 20
	var total, unexplained, lagSum float64
	for off := 0; off < len(c); off += block {
		cb := c[off:min(off+block, len(c))]
		if len(cb) < block/2 && off > 0 { // a short tail joins the verdict of the blocks before
			break
		}
		var e float64
		for _, v := range cb {
			e += float64(v) * float64(v)
		}
		if e == 0 {
			continue
		}
		best, rho := searchLag(cb, r[off:off+len(cb)+lags], lags)
		total += e
		unexplained += e * (1 - rho*rho)
		lagSum += e * float64(best)
	}
	if total == 0 {
		return 1, 0, false
	}
	return unexplained / total, int(lagSum / total), true
}

// searchLag is bestLag over [0, lags], coarse at 4 kHz and then refined at 16 kHz.
func searchLag(c, r []float32, lags int) (int, float64) {
	const d = 4
	coarse, _ := bestLag(decimate(c, d), decimate(r, d), 0, lags/d)
	return bestLag(c, r, max(0, coarse*d-2*d), min(lags, coarse*d+2*d))
}

// hann is the periodic Hann window of length n at i: windows n/2 apart sum to 1.
func hann(i, n int) float64 { return 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n)) }

func decimate(x []float32, d int) []float32 {
	out := make([]float32, len(x)/d)
	for i := range out {
		var s float32
		for _, v := range x[i*d : i*d+d] {
			s += v
		}
		out[i] = s / float32(d)
	}
	return out
}

// bestLag returns the lag in [lo, hi] maximising the normalised correlation of c with
// r[lag:], and that correlation (≥ 0: an inverted copy is not an echo).
func bestLag(c, r []float32, lo, hi int) (int, float64) {
	n := len(c)
	hi = min(hi, len(r)-n)
	var ec float64
	for _, v := range c {
		ec += float64(v) * float64(v)
	}
	var er float64
	for _, v := range r[lo : lo+n] {
		er += float64(v) * float64(v)
	}
	best, bestRho := lo, 0.0
	for lag := lo; lag <= hi; lag++ {
		if lag > lo {
			a, b := float64(r[lag-1]), float64(r[lag+n-1])
			er += b*b - a*a
		}
		if er <= 1e-12 {
			continue
		}
		var dot float32
		rr := r[lag : lag+n]
		for i, v := range c {
			dot += v * rr[i]
		}
		rho := float64(dot) / math.Sqrt(ec*er)
		if rho > bestRho {
			best, bestRho = lag, rho
		}
	}
	return best, min(bestRho, 1)
}

// run is the capture goroutine.
func (e *ear) run(ctx context.Context) {
	defer e.a.wg.Done()
	a := e.a
	o := a.o
	wake := a.p.Wake
	buf := make([]float32, 512)
	var meter audio.Meter
	var (
		inSeg         bool
		segStart      int64
		segEcho       bool
		lastCheck     int64
		longSent      bool
		level         SpeechLevel // of the segment's speech, for its loud part
		voiced        int64
		echoNow       bool
		lastLoudCheck int64
		pending       bool  // speech started while Parley spoke and the check could not tell yet
		pendUntil     int64 // when a pending start is taken as the user's
		grayRun       int   // consecutive undecided re-checks of an echo segment
		lastLevel     = math.Inf(-1)
		lastLevelAt   int64 // capture index of the last level published
	)
	pendMax := a.samples(300 * time.Millisecond)
	window := a.samples(300 * time.Millisecond)
	recheck := a.samples(200 * time.Millisecond)
	minLong := a.samples(o.BargeInMin)
	maxUtt := a.samples(o.MaxUtterance)
	endAt := func(end int64) time.Time { // wall-clock instant of capture index end
		return time.Now().Add(-time.Duration(e.pos()-end) * time.Second / SampleRate)
	}
	for {
		n, err := a.p.Ear.Read(ctx, buf)
		if n > 0 && e.fresh.CompareAndSwap(true, false) {
			inSeg, pending, segEcho = false, false, false
			lastLevel = math.Inf(-1) // the first level of a reopened microphone shows at once
			if a.p.VAD != nil {
				a.p.VAD.Reset()
			}
			meter.Reset()
		}
		if n > 0 {
			block := buf[:n]
			if a.p.Echo != nil {
				a.p.Echo.Captured(n)
			}
			e.mu.Lock()
			for i := 0; i < n; i++ {
				e.cap[(e.n+int64(i))&(earRing-1)] = block[i]
			}
			e.n += int64(n)
			now := e.n
			e.mu.Unlock()

			meter.Add(block)
			if meter.Levels().Samples >= SampleRate/20 {
				// every 50 ms while speech is heard or Parley listens for a turn (the waveform
				// draws each level); at rest only what a meter can show (a change of 1 dB), and
				// twice a second that the microphone is live: each event wakes the UI
				l := meter.Levels().RMS
				if inSeg || a.State() != a.restState() || math.Abs(l-lastLevel) >= 1 || now-lastLevelAt >= SampleRate/2 {
					a.publish(Event{Kind: EvLevel, Level: l})
					lastLevel, lastLevelAt = l, now
				}
				meter.Reset()
			}
			if wake != nil {
				fired, werr := wake.Process(block)
				if werr != nil {
					a.toLoop(msgEarError{err: werr})
					wake = nil
				} else if fired && !(inSeg && segEcho) && !e.isEcho(now-window*3, now) {
					a.toLoop(msgWake{at: now})
				}
			}
			if a.p.VAD != nil {
				evs, verr := a.p.VAD.Process(block)
				if verr != nil {
					a.toLoop(msgEarError{err: verr})
					return
				}
				for _, ev := range evs {
					switch ev.Kind {
					case SpeechStart:
						inSeg, segStart, longSent = true, ev.Sample, false
						level, voiced, echoNow, lastLoudCheck = SpeechLevel{}, max(0, now-ev.Sample-int64(n)), false, now
						lastCheck = now
						pending, segEcho, grayRun = false, false, 0
						switch e.judge(now-window, now) {
						case echo:
							segEcho = true
							a.publish(Event{Kind: EvEchoRejected, Turn: a.turnID.Load()})
						case unsure: // decide within pendMax, as more capture and reference arrive
							pending, pendUntil = true, now+pendMax
						default:
							a.toLoop(msgSpeechStart{at: segStart})
						}
					case SpeechEnd:
						if inSeg && pending {
							pending = false
							if e.isEcho(segStart, ev.Sample) {
								segEcho = true
								a.publish(Event{Kind: EvEchoRejected, Turn: a.turnID.Load()})
							} else {
								a.toLoop(msgSpeechStart{at: segStart})
							}
						}
						if inSeg && !segEcho {
							a.toLoop(msgSpeechEnd{start: segStart, end: ev.Sample, when: endAt(ev.Sample), decided: time.Now()})
						}
						inSeg = false
					}
				}
				if inSeg && pending && now-lastCheck >= recheck/4 {
					lastCheck = now
					switch v := e.judge(now-window, now); {
					case v == echo:
						pending, segEcho = false, true
						a.publish(Event{Kind: EvEchoRejected, Turn: a.turnID.Load()})
					case v == user || now >= pendUntil:
						pending = false
						a.toLoop(msgSpeechStart{at: segStart})
					}
				}
				if inSeg && segEcho && now-lastCheck >= recheck {
					lastCheck = now
					switch e.judge(now-window, now) {
					case user: // the user started talking over the echo
						segEcho, grayRun, segStart = false, 0, now-window
						a.toLoop(msgSpeechStart{at: segStart})
					case unsure:
						if grayRun++; grayRun >= 2 { // twice in a row: somebody is talking over it
							segEcho, grayRun, segStart = false, 0, now-2*window
							a.toLoop(msgSpeechStart{at: segStart})
						}
					default:
						grayRun = 0
					}
				}
				if inSeg && !segEcho && !pending && !longSent {
					// count only the user's loud speech: not the VAD's hang-over, not Parley's echo
					if level.Loud(block) {
						if now-lastLoudCheck >= recheck/2 {
							lastLoudCheck = now
							echoNow = e.isEcho(now-recheck, now)
						}
						if !echoNow {
							voiced += int64(n)
						}
					}
					if voiced >= minLong {
						longSent = true
						a.toLoop(msgSpeechLong{at: segStart})
					}
				}
				if inSeg && !segEcho && !pending && now-segStart >= maxUtt {
					a.toLoop(msgSpeechEnd{start: segStart, end: now, when: time.Now(), decided: time.Now()})
					segEcho = true // ignore the rest of this segment
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// a lost device that is being reopened: this utterance ends with the loss
			// explained, and the microphone carries on once the device is back
			var tmp interface{ Temporary() bool }
			if errors.As(err, &tmp) && tmp.Temporary() {
				inSeg, pending, segEcho = false, false, false
				if a.p.VAD != nil {
					a.p.VAD.Reset() // the audio it was following is gone
				}
				a.toLoop(msgEarError{err: err})
				continue
			}
			if errors.Is(err, io.EOF) {
				err = errors.New("capture ended")
			}
			a.toLoop(msgEarError{err: err})
			return
		}
	}
}

// unecho takes Parley's own voice out of c, the capture from index start on, as far as a
// delayed, filtered copy of the echo reference explains it (cancelEcho), so that a question
// asked over Parley's answer (a barge-in) reaches the recogniser without the answer under it.
// It costs tens of milliseconds per second of audio when Parley was speaking (nothing when it
// was not), so turns call it on their own goroutine, not the loop's.
func (e *ear) unecho(c []float32, start int64) {
	if len(c) == 0 || e.a.o.EchoResidual < 0 || e.a.p.Echo == nil {
		return
	}
	end := start + int64(len(c))
	dmin, dmax := -e.a.samples(echoLead), e.a.samples(e.a.o.EchoMaxDelay)
	if d := e.delay.Load(); d != 0 {
		dmin, dmax = min(dmin, d-e.a.samples(200*time.Millisecond)), max(dmax, d+e.a.samples(300*time.Millisecond))
	}
	if !cancelEcho(c, e.refWindow(start-dmax, end-dmin), int(dmax-dmin)) {
		return
	}
	// back on the 16-bit grid the capture came on: what the canceller left under one step is
	// digital silence, as the microphone would have delivered it (the recogniser takes a
	// −90 dB residue of speech for something else than the silence it knows)
	for i, v := range c {
		c[i] = float32(math.Round(float64(v)*32768) / 32768)
	}
}

// cancelEcho subtracts from c, in place, the reference r at each frame's lag in [0, lags]
// (c[i] is aligned with r[i+lag]), scaled by one least-squares gain for the whole stretch:
// 50 ms Hann frames at 50 % overlap, added back smoothly so the cut leaves no clicks. The gain
// is fitted over the frames together because the path from speaker to microphone does not
// change within an utterance. Each frame searches its own lag (a host under-run shifts the
// echo); a frame fits surely (ρ ≥ 0.3) only where the echo is not drowned by the user's
// voice. When the sure frames agree on one path (echoPath), every frame off it — drowned, or
// a chance match of the user's voice with another part of the answer — takes the lag of the
// nearest frame on it, so the echo under the user's words is cancelled too. A single-tap
// canceller: exact for a digital loop-back, a partial one in a real room.
func cancelEcho(c, r []float32, lags int) (changed bool) {
	const frame, hop = SampleRate / 20, SampleRate / 40
	if len(r) < len(c)+lags {
		lags = len(r) - len(c)
	}
	if lags < 0 || len(c) < frame || audio.RMS(r) < 1e-4 {
		return false
	}
	type fit struct {
		lo, hi, off, lag int
		rho              float64
	}
	var fits []fit
	for off := -hop; off < len(c); off += hop {
		lo, hi := max(off, 0), min(off+frame, len(c))
		if hi-lo < hop/2 {
			continue
		}
		lag, rho := searchLag(c[lo:hi], r[lo:hi+lags], lags)
		fits = append(fits, fit{lo: lo, hi: hi, off: off, lag: lag, rho: rho})
	}
	// One echo path, seen where Parley's voice comes back almost alone (ρ ≥ 0.9: the user's
	// own words match other parts of the answer by chance up to ~0.85 when both are the same
	// voice saying the same word): fit it as a short filter over ±pathSpread around the delay,
	// which also takes the fractional delay and the colouring of resampling and speakers.
	var fir []float32
	var pathLags []int
	for _, f := range fits {
		if f.rho >= pathRho {
			pathLags = append(pathLags, f.lag)
		}
	}
	if med, ok := echoPath(pathLags); ok {
		var on [][2]int
		for _, f := range fits {
			if f.rho >= pathRho && abs(f.lag-med) <= pathSpread {
				on = append(on, [2]int{f.lo, f.hi})
			}
		}
		if w, ok := fitFilter(c, r, med-pathSpread, 2*pathSpread+1, on); ok {
			fir = make([]float32, len(c))
			base := med - pathSpread
			for i := range fir {
				var v float64
				for k, wk := range w {
					if j := i + base + k; j >= 0 && j < len(r) {
						v += wk * float64(r[j])
					}
				}
				fir[i] = float32(v)
			}
		}
	}
	// Each frame takes the path filter where it takes energy out (a frame off the path — the
	// echo jumped — would gain energy), else its own lag with one gain fitted over such
	// frames where they fit surely (ρ ≥ 0.3), else nothing.
	useFIR := make([]bool, len(fits))
	var dot, er float64
	for k, f := range fits {
		if fir != nil {
			var before, after float64
			for i := f.lo; i < f.hi; i++ {
				d := float64(c[i] - fir[i])
				before += float64(c[i]) * float64(c[i])
				after += d * d
			}
			if useFIR[k] = after < before; useFIR[k] {
				continue
			}
		}
		if f.rho >= 0.3 {
			for i := f.lo; i < f.hi; i++ {
				x := float64(r[i+f.lag])
				dot += float64(c[i]) * x
				er += x * x
			}
		}
	}
	g := 0.0
	if er > 1e-9 && dot > 0 {
		g = dot / er
	}
	est := make([]float32, len(c))
	for k, f := range fits {
		single := !useFIR[k] && f.rho >= 0.3 && g > 0
		if single { // like the filter, a frame's own fit must take energy out, never add it
			var before, after float64
			for i := f.lo; i < f.hi; i++ {
				d := float64(c[i]) - g*float64(r[i+f.lag])
				before += float64(c[i]) * float64(c[i])
				after += d * d
			}
			single = after < before
		}
		for i := f.lo; i < f.hi; i++ {
			w := float32(hann(i-f.off, frame))
			switch {
			case useFIR[k]:
				est[i] += w * fir[i]
			case single:
				est[i] += w * float32(g) * r[i+f.lag]
			}
		}
	}
	for i := range c {
		c[i] -= est[i]
	}
	suppressResidual(c, est)
	return true
}

// suppressResidual silences the 50 ms frames of the cleaned capture c that are only what the
// canceller left of Parley's voice: at least 20 dB under the echo it took out. Silenced, not
// attenuated: the demo recogniser takes even a −85 dB residue of voice before a question for
// something other than the silence it was trained on (it heard "what time is it" after one as
// "what w it"). A frame where the user speaks keeps its level and is left alone. The
// residual-echo suppressor of an acoustic echo canceller.
func suppressResidual(c, est []float32) {
	const frame, hop = SampleRate / 20, SampleRate / 40
	if len(c) < frame {
		return
	}
	gain := make([]float64, len(c))
	norm := make([]float64, len(c))
	for off := -hop; off < len(c); off += hop {
		lo, hi := max(off, 0), min(off+frame, len(c))
		var ec, ee float64
		for i := lo; i < hi; i++ {
			ec += float64(c[i]) * float64(c[i])
			ee += float64(est[i]) * float64(est[i])
		}
		g := 1.0
		if ee > 1e-7*float64(hi-lo) && ec < 0.01*ee { // echo above −70 dBFS, residue 20 dB under it
			g = 0
		}
		for i := lo; i < hi; i++ {
			w := hann(i-off, frame)
			gain[i] += w * g
			norm[i] += w
		}
	}
	for i := range c {
		if norm[i] > 0 {
			c[i] *= float32(gain[i] / norm[i])
		}
	}
}

// fitFilter fits c[i] ≈ Σ_k w[k]·r[i+base+k] by least squares over the sample ranges given
// (ridge-regularised normal equations); ok is false when they hold too little to fit. The
// ranges are merged first, and each merged span's correlation matrix is built from its first
// row by the sliding update R[a+1][b+1] = R[a][b] − x[lo+a]x[lo+b] + x[hi+a]x[hi+b]: N·taps
// work instead of N·taps².
func fitFilter(c, r []float32, base, taps int, ranges [][2]int) (w []float64, ok bool) {
	R := make([]float64, taps*taps)
	p := make([]float64, taps)
	n := 0
	x := func(i int) float64 { return float64(r[i]) }
	for _, sp := range mergeSpans(ranges, max(0, -base), min(len(c), len(r)-base-taps+1)) {
		lo, hi := sp[0], sp[1]
		n += hi - lo
		for a := range taps {
			var s float64
			for i := lo; i < hi; i++ {
				s += float64(c[i]) * x(i+base+a)
			}
			p[a] += s
		}
		// row 0 directly, rows 1… by sliding (per span: the update needs the span's own sums)
		prev := make([]float64, taps)
		for b := range taps {
			for i := lo; i < hi; i++ {
				prev[b] += x(i+base) * x(i+base+b)
			}
			R[b] += prev[b]
		}
		for a := 1; a < taps; a++ {
			cur := make([]float64, taps)
			for b := a; b < taps; b++ {
				cur[b] = prev[b-1] - x(lo+base+a-1)*x(lo+base+b-1)
				if j := hi + base; j+b-1 < len(r) {
					cur[b] += x(j+a-1) * x(j+b-1)
				}
				R[a*taps+b] += cur[b]
			}
			prev = cur
		}
	}
	if n < 4*taps {
		return nil, false
	}
	var tr float64
	for a := range taps {
		tr += R[a*taps+a]
		for b := 0; b < a; b++ {
			R[a*taps+b] = R[b*taps+a]
		}
	}
	if tr <= 0 {
		return nil, false
	}
	for a := range taps {
		R[a*taps+a] += 1e-4 * tr / float64(taps)
	}
	return solve(R, p, taps)
}

// mergeSpans sorts and merges sample ranges, clamped to [min, max).
func mergeSpans(ranges [][2]int, lo, hi int) [][2]int {
	var out [][2]int
	s := slices.Clone(ranges)
	slices.SortFunc(s, func(a, b [2]int) int { return a[0] - b[0] })
	for _, r := range s {
		r[0], r[1] = max(r[0], lo), min(r[1], hi)
		if r[1] <= r[0] {
			continue
		}
		if k := len(out) - 1; k >= 0 && r[0] <= out[k][1] {
			out[k][1] = max(out[k][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// solve solves the symmetric positive-definite system A·x = b (n×n, row-major) by Cholesky.
func solve(A, b []float64, n int) ([]float64, bool) {
	L := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			s := A[i*n+j]
			for k := range j {
				s -= L[i*n+k] * L[j*n+k]
			}
			if i == j {
				if s <= 0 {
					return nil, false
				}
				L[i*n+i] = math.Sqrt(s)
			} else {
				L[i*n+j] = s / L[j*n+j]
			}
		}
	}
	y := make([]float64, n)
	for i := range n {
		s := b[i]
		for k := range i {
			s -= L[i*n+k] * y[k]
		}
		y[i] = s / L[i*n+i]
	}
	x := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		s := y[i]
		for k := i + 1; k < n; k++ {
			s -= L[k*n+i] * x[k]
		}
		x[i] = s / L[i*n+i]
	}
	return x, true
}

// pathRho is the fit a frame needs to show the echo path.
const pathRho = 0.9

// pathSpread is how far (2 ms) a frame's lag may stray from the echo path and still be on it.
const pathSpread = SampleRate / 500

// echoPath returns the median of frame lags that describe one echo path: at least four, three
// in four of them within pathSpread of the median.
func echoPath(lags []int) (int, bool) {
	if len(lags) < 4 {
		return 0, false
	}
	s := slices.Clone(lags)
	slices.Sort(s)
	med := s[len(s)/2]
	near := 0
	for _, l := range s {
		if abs(l-med) <= pathSpread {
			near++
		}
	}
	return med, 4*near >= 3*len(s)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
