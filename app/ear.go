package app

import (
	"context"
	"errors"
	"io"
	"math"
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
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.copyLocked(e.cap, start, end)
}

func (e *ear) copyLocked(ring []float32, start, end int64) []float32 {
	end = min(end, e.n)
	start = max(start, e.n-earRing+1, 0)
	if end <= start {
		return nil
	}
	out := make([]float32, end-start)
	for i := range out {
		out[i] = ring[(start+int64(i))&(earRing-1)]
	}
	return out
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
		rb := r[off : off+len(cb)+lags]
		// coarse search at 4 kHz, then refine at 16 kHz
		const d = 4
		best4, _ := bestLag(decimate(cb, d), decimate(rb, d), 0, lags/d)
		lo, hi := max(0, best4*d-2*d), min(lags, best4*d+2*d)
		best, rho := bestLag(cb, rb, lo, hi)
		total += e
		unexplained += e * (1 - rho*rho)
		lagSum += e * float64(best)
	}
	if total == 0 {
		return 1, 0, false
	}
	return unexplained / total, int(lagSum / total), true
}

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
		segPeak       float64
		voiced        int64
		echoNow       bool
		lastLoudCheck int64
		pending       bool  // speech started while Parley spoke and the check could not tell yet
		pendUntil     int64 // when a pending start is taken as the user's
		grayRun       int   // consecutive undecided re-checks of an echo segment
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
				a.publish(Event{Kind: EvLevel, Level: meter.Levels().RMS})
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
						segPeak, voiced, echoNow, lastLoudCheck = 0, max(0, now-ev.Sample-int64(n)), false, now
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
					rms := audio.RMS(block)
					segPeak = max(segPeak, rms)
					if rms > max(1e-3, segPeak*0.1) {
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
				inSeg = false
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

// unechoed returns capture [start, end) with Parley's own voice taken out as far as a delayed,
// scaled copy of the echo reference explains it (cancelEcho), so that a question asked over
// Parley's answer (a barge-in) reaches the recogniser without the answer under it.
func (e *ear) unechoed(start, end int64) []float32 {
	c := e.slice(start, end)
	if len(c) == 0 || e.a.o.EchoResidual < 0 || e.a.p.Echo == nil {
		return c
	}
	dmin, dmax := -e.a.samples(echoLead), e.a.samples(e.a.o.EchoMaxDelay)
	if d := e.delay.Load(); d != 0 {
		dmin, dmax = min(dmin, d-e.a.samples(200*time.Millisecond)), max(dmax, d+e.a.samples(300*time.Millisecond))
	}
	cancelEcho(c, e.refWindow(start-dmax, end-dmin), int(dmax-dmin))
	return c
}

// cancelEcho subtracts from c, in place, the reference r at each frame's best lag in
// [0, lags] (c[i] is aligned with r[i+lag]), scaled by one least-squares gain for the whole
// stretch: 50 ms Hann frames at 50 % overlap, each with its own lag (a host under-run shifts
// the echo) and added back smoothly so the cut leaves no clicks. The gain is fitted over all
// frames together because the path from speaker to microphone does not change within an
// utterance, and a per-frame gain picks up the user's voice where it happens to correlate.
// A single-tap canceller: exact for a digital loop-back, a partial one in a real room.
func cancelEcho(c, r []float32, lags int) {
	const frame, hop = SampleRate / 20, SampleRate / 40
	if len(r) < len(c)+lags {
		lags = len(r) - len(c)
	}
	if lags < 0 || len(c) < frame || audio.RMS(r) < 1e-4 {
		return
	}
	type fit struct {
		lo, hi, off, lag int
		sure             bool
	}
	var fits []fit
	var dot, er float64
	for off := -hop; off < len(c); off += hop {
		lo, hi := max(off, 0), min(off+frame, len(c))
		if hi-lo < hop/2 {
			continue
		}
		cb, rb := c[lo:hi], r[lo:hi+lags]
		const d = 4
		best4, _ := bestLag(decimate(cb, d), decimate(rb, d), 0, lags/d)
		lag, rho := bestLag(cb, rb, max(0, best4*d-2*d), min(lags, best4*d+2*d))
		fits = append(fits, fit{lo, hi, off, lag, rho >= 0.3})
		if !fits[len(fits)-1].sure { // the user's voice drowns the echo here, or there is none
			continue
		}
		for i, v := range cb {
			x := float64(rb[lag+i])
			dot += float64(v) * x
			er += x * x
		}
	}
	if er < 1e-9 || dot <= 0 {
		return
	}
	g := dot / er
	est := make([]float64, len(c))
	for _, f := range fits {
		if !f.sure {
			continue
		}
		for i := f.lo; i < f.hi; i++ {
			w := 0.5 - 0.5*math.Cos(2*math.Pi*float64(i-f.off)/frame) // periodic Hann: frames at hop sum to 1
			est[i] += w * g * float64(r[i+f.lag])
		}
	}
	for i := range c {
		c[i] -= float32(est[i])
	}
}
