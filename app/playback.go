package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/parley-voice/parley/audio"
)

// ErrSpeakerStalled is returned when the speaker stops playing what it was given.
var ErrSpeakerStalled = errors.New("app: speaker stopped playing")

// stallTimeout is how long playback may make no progress before the speaker counts as lost.
const stallTimeout = 3 * time.Second

// playLog sits in front of the Player: it keeps the write position on the Played timeline and
// a 16 kHz copy of what was written there, which is the echo reference when the device has no
// loop-back of its own.
type playLog struct {
	sp   Player
	rate int

	mu      sync.Mutex
	wpos    int64 // Played coordinate of the next sample written
	stopped bool
	ring    []float32 // 16 kHz, indexed by Played coordinate converted to 16 kHz
	head16  int64     // 16 kHz index of the next sample in ring
	rs      *audio.Resampler
	tmp     []float32
	cref    []float32 // the reference aligned with the capture (Captured)
	capN    int64     // capture samples seen
	last16  int64     // speaker position (16 kHz) at the previous Captured
}

const playRing = 1 << 19 // 32 s at 16 kHz

func newPlayLog(sp Player) *playLog {
	l := &playLog{sp: sp, rate: sp.SampleRate(), ring: make([]float32, playRing)}
	if l.rate != SampleRate && l.rate > 0 {
		l.rs, _ = audio.NewResampler(l.rate, SampleRate, 1, audio.QualityLow)
	}
	l.head16 = l.to16(sp.Played())
	l.wpos = sp.Played()
	return l
}

func (l *playLog) to16(p int64) int64 {
	if l.rate == SampleRate || l.rate <= 0 {
		return p
	}
	return p * SampleRate / int64(l.rate)
}

// stop silences the speaker now.
func (l *playLog) stop() {
	l.sp.Stop()
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

// sync realigns the write position after a stop discarded queued audio.
func (l *playLog) sync() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		return
	}
	l.sp.Stop() // anything written while the previous answer was winding down
	l.stopped = false
	l.wpos = l.sp.Played()
	l.head16 = l.to16(l.wpos)
	if l.rs != nil {
		l.rs.Reset()
	}
}

func (l *playLog) pos() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wpos
}

func (l *playLog) write(ctx context.Context, pcm []float32) error {
	l.mu.Lock()
	src := pcm
	if l.rs != nil {
		l.tmp = l.rs.Process(l.tmp[:0], pcm)
		src = l.tmp
	}
	for _, v := range src {
		l.ring[l.head16&(playRing-1)] = v
		l.head16++
	}
	l.mu.Unlock()
	err := l.sp.Write(ctx, pcm)
	l.mu.Lock()
	if err == nil {
		l.wpos += int64(len(pcm))
	}
	l.mu.Unlock()
	return err
}

// drain waits until the speaker has played everything written.
func (l *playLog) drain(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	last, lastMove := l.sp.Played(), time.Now()
	for {
		p := l.sp.Played()
		l.mu.Lock()
		w, stopped := l.wpos, l.stopped
		l.mu.Unlock()
		if p >= w || stopped {
			return nil
		}
		if p != last {
			last, lastMove = p, time.Now()
		} else if time.Since(lastMove) > stallTimeout {
			return fmt.Errorf("%w: no progress for %v with %d samples queued", ErrSpeakerStalled, stallTimeout, w-p)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Captured implements EchoReference: what the speaker played while these n samples were
// captured (the advance of its position) becomes the next n samples of a reference aligned
// with the capture — zeros first when it played less (it started or stalled mid-block), its
// last n samples when it played more (a burst). The acoustic delay is left to the echo
// check's delay search.
func (l *playLog) Captured(n int) {
	cur := l.to16(l.sp.Played())
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cref == nil {
		l.cref = make([]float32, earRing)
		l.last16 = cur
	}
	got := max(0, cur-l.last16)
	pad := int64(n) - got
	for i := int64(0); i < int64(n); i++ {
		var v float32
		if i >= pad {
			k := cur - int64(n) + i // play index
			if k >= 0 && k < l.head16 && k > l.head16-playRing {
				v = l.ring[k&(playRing-1)]
			}
		}
		l.cref[(l.capN+i)&(earRing-1)] = v
	}
	l.capN += int64(n)
	l.last16 = cur
}

// Reference implements EchoReference.
func (l *playLog) Reference(dst []float32, from int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range dst {
		k := from + int64(i)
		if k < 0 || k >= l.capN || k <= l.capN-earRing {
			dst[i] = 0
			continue
		}
		dst[i] = l.cref[k&(earRing-1)]
	}
}

// monitor follows the speaker's position and reports sentence starts and ends.
type monitor struct {
	quit chan struct{}
	done chan struct{}
}

func (a *Assistant) startMonitor(t *turn) *monitor {
	m := &monitor{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		started, finished := 0, 0
		check := func() {
			p := a.p.Speaker.Played()
			if s := t.stoppedAt.Load(); s >= 0 && p > s {
				p = s
			}
			t.mu.Lock()
			ss := append([]spoken(nil), t.sentences...)
			t.mu.Unlock()
			for started < len(ss) && p > ss[started].start {
				a.publish(Event{Kind: EvSentenceStarted, Turn: t.id, Sentence: started, Text: ss[started].text})
				started++
			}
			for finished < started && ss[finished].complete && p >= ss[finished].end {
				a.publish(Event{Kind: EvSentenceFinished, Turn: t.id, Sentence: finished, Text: ss[finished].text})
				finished++
			}
		}
		for {
			select {
			case <-m.quit:
				check()
				return
			case <-tick.C:
				check()
			}
		}
	}()
	return m
}

func (m *monitor) stop() {
	close(m.quit)
	<-m.done
}
