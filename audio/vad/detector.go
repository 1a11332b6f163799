package vad

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu"
)

// Config tunes detection. Zero fields take the defaults shown.
type Config struct {
	SampleRate int           // 16000 (default) or 8000; input must be mono at this rate
	Threshold  float32       // probability that starts speech: 0.5
	NegThresh  float32       // probability below which speech may end (hysteresis): Threshold − 0.15
	Confirm    float32       // mean probability over the first MinSpeech that confirms a start: Threshold + 0.1
	MinSpeech  time.Duration // speech shorter than this is ignored (and SpeechStart waits for it): 250 ms
	MinSilence time.Duration // silence that ends an utterance: 400 ms
	// LookBack bounds how far a confirmed start moves back, window by window, over the
	// windows just before the first one above Threshold whose probability is at least
	// OnsetThresh: Silero's probability rises slowly on a soft onset ("the", "fine", a quiet
	// talker) and crosses Threshold hundreds of ms into the word. Default 500 ms; negative:
	// one window at most.
	LookBack    time.Duration
	OnsetThresh float32       // default 0.1
	PreRoll     time.Duration // audio kept before the detected start in an utterance's samples: 300 ms
	HangOver    time.Duration // audio kept after the detected end: 150 ms
	MaxSpeech   time.Duration // an utterance is cut (Forced) at this length: 30 s
	// Quiet is the RMS under which a window is silence without asking the model, so that a
	// silent room costs no inference; the model starts afresh on the next window above it.
	// Default 0.001 (−60 dBFS, far under any voice the recogniser could use); negative:
	// every window goes to the model.
	Quiet float32
	GPU   gpu.Options // session options; empty Provider = CPU, one thread
}

func (c *Config) fill() error {
	if c.SampleRate == 0 {
		c.SampleRate = 16000
	}
	if c.Threshold == 0 {
		c.Threshold = 0.5
	}
	if c.NegThresh == 0 {
		c.NegThresh = max(c.Threshold-0.15, 0.01)
	}
	if c.Confirm == 0 {
		c.Confirm = min(c.Threshold+0.1, 0.99)
	}
	if c.OnsetThresh == 0 {
		c.OnsetThresh = 0.1
	}
	if c.Quiet == 0 {
		c.Quiet = 1e-3
	}
	if c.LookBack == 0 {
		c.LookBack = 500 * time.Millisecond
	}
	if c.Threshold <= 0 || c.Threshold >= 1 || c.NegThresh > c.Threshold {
		return fmt.Errorf("vad: thresholds %.2f/%.2f: want 0 < neg ≤ threshold < 1", c.NegThresh, c.Threshold)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.MinSpeech, 250*time.Millisecond)
	def(&c.MinSilence, 400*time.Millisecond)
	def(&c.PreRoll, 300*time.Millisecond)
	def(&c.HangOver, 150*time.Millisecond)
	def(&c.MaxSpeech, 30*time.Second)
	if c.OnsetThresh < 0 || c.OnsetThresh > c.Threshold {
		return fmt.Errorf("vad: onset threshold %.2f: want 0 ≤ onset ≤ threshold %.2f", c.OnsetThresh, c.Threshold)
	}
	if c.MinSpeech < 0 || c.MinSilence < 0 || c.PreRoll < 0 || c.HangOver < 0 || c.MaxSpeech < time.Second {
		return fmt.Errorf("vad: durations must be ≥ 0 and MaxSpeech ≥ 1 s (got %+v)", *c)
	}
	return nil
}

// EventType is SpeechStart or SpeechEnd.
type EventType int

const (
	SpeechStart EventType = iota + 1
	SpeechEnd
)

func (t EventType) String() string {
	switch t {
	case SpeechStart:
		return "speech_start"
	case SpeechEnd:
		return "speech_end"
	}
	return "unknown"
}

// Event is a change of speech state. Positions count samples from the start of the stream
// (since the last Reset).
type Event struct {
	Type EventType
	// Start and End bound the detected speech (End only on SpeechEnd), to the model's window
	// (32 ms at 16 kHz).
	Start, End int64
	// AudioStart and AudioEnd bound Samples: the speech with pre-roll and hang-over.
	AudioStart, AudioEnd int64
	Samples              []float32 // SpeechEnd only: the utterance, [AudioStart, AudioEnd)
	Forced               bool      // SpeechEnd only: cut at MaxSpeech (speech goes on)
	At                   int64     // the stream position when the event was decided
}

// Detector is a streaming voice-activity detector over one Model. Feed it audio with Accept;
// it returns events as they are decided. Not safe for concurrent use.
type Detector struct {
	cfg   Config
	m     *Model
	owned bool
	pool  *ModelPool  // when set, m is borrowed for each Accept
	st    streamState // the stream's Model state between borrows (pooled)
	rate  int
	win   int

	minSpeech, minSilence, preRoll, hang, maxSpeech int64
	lookBack                                        int   // windows
	candGap                                         int64 // a dip a candidate survives

	recent []float32 // probabilities of the last lookBack windows outside speech, newest last
	quiet  bool      // the last window was under Config.Quiet (the model did not hear it)

	pending []float32 // samples not yet a whole window
	pos     int64     // stream position of the end of the last whole window processed

	hist      []float32 // audio kept from histStart (bounded while idle)
	histStart int64

	state      int   // 0 idle, 1 candidate, 2 speech
	candFrom   int64 // first window of the candidate above Threshold
	dipFrom    int64 // start of a dip below NegThresh inside a candidate; -1: none
	speechFrom int64 // the onset: candFrom moved back over the rising windows before it
	audioFrom  int64
	silentFrom int64   // -1 when not in a possible silence
	lastVoice  int64   // end of the last window at or above Confirm
	candSum    float64 // sum of the candidate's window probabilities
	candN      int
	lastEnd    int64 // AudioEnd of the last utterance (pre-roll never reaches before it)
	prob       float32
}

const (
	idle = iota
	candidate
	speaking
)

// New opens the Silero model file model ("" = DefaultModel()) and returns a Detector. Close
// it when done.
func New(model string, cfg Config) (*Detector, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	m, err := OpenModel(model, cfg.SampleRate, cfg.GPU)
	if err != nil {
		return nil, err
	}
	d := newDetector(cfg, m)
	d.owned = true
	return d, nil
}

// NewWithModel returns a Detector over an open Model (which it does not close).
func NewWithModel(cfg Config, m *Model) (*Detector, error) {
	cfg.SampleRate = m.Rate()
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return newDetector(cfg, m), nil
}

func newDetector(cfg Config, m *Model) *Detector {
	return newDetectorWin(cfg, m, nil, m.Window())
}

func newDetectorWin(cfg Config, m *Model, pool *ModelPool, win int) *Detector {
	r := int64(cfg.SampleRate)
	ms := func(d time.Duration) int64 { return int64(d) * r / int64(time.Second) }
	d := &Detector{cfg: cfg, m: m, pool: pool, rate: cfg.SampleRate, win: win,
		minSpeech: ms(cfg.MinSpeech), minSilence: ms(cfg.MinSilence), preRoll: ms(cfg.PreRoll),
		hang: ms(cfg.HangOver), maxSpeech: ms(cfg.MaxSpeech)}
	d.candGap = d.minSilence / 2
	d.lookBack = 1
	if cfg.LookBack > 0 {
		d.lookBack = max(1, int(ms(cfg.LookBack)/int64(d.win)))
	}
	d.Reset()
	return d
}

// Config returns the effective configuration.
func (d *Detector) Config() Config { return d.cfg }

// Format is the audio format Accept takes.
func (d *Detector) Format() audio.Format { return audio.Format{SampleRate: d.rate, Channels: 1} }

// Reset starts a new stream (positions restart at 0).
func (d *Detector) Reset() {
	if d.pool != nil {
		d.st.state, d.st.ctx = d.st.state[:0], d.st.ctx[:0]
	} else {
		d.m.Reset()
	}
	d.pending = d.pending[:0]
	d.hist = d.hist[:0]
	d.pos, d.histStart, d.lastEnd = 0, 0, 0
	d.state, d.silentFrom, d.dipFrom, d.prob = idle, -1, -1, 0
	d.recent = d.recent[:0]
	d.quiet = false
}

// InSpeech reports whether an utterance is open (after SpeechStart, before SpeechEnd).
func (d *Detector) InSpeech() bool { return d.state == speaking }

// Prob is the speech probability of the last window.
func (d *Detector) Prob() float32 { return d.prob }

// Position is the number of samples consumed so far.
func (d *Detector) Position() int64 { return d.pos + int64(len(d.pending)) }

// Accept feeds mono samples at the detector's rate and returns the events they decide.
func (d *Detector) Accept(ctx context.Context, samples []float32) ([]Event, error) {
	if d.pool != nil && len(d.pending)+len(samples) >= d.win {
		m, err := d.pool.get(ctx)
		if err != nil {
			return nil, err
		}
		m.loadStream(&d.st)
		d.m = m
		defer func() {
			m.saveStream(&d.st)
			d.m = nil
			d.pool.put(m)
		}()
	}
	var evs []Event
	for len(samples) > 0 {
		if err := ctx.Err(); err != nil {
			return evs, err
		}
		var win []float32
		if len(d.pending) == 0 && len(samples) >= d.win {
			win, samples = samples[:d.win], samples[d.win:]
		} else {
			n := min(d.win-len(d.pending), len(samples))
			d.pending = append(d.pending, samples[:n]...)
			samples = samples[n:]
			if len(d.pending) < d.win {
				break
			}
			win = d.pending
		}
		var p float32
		if d.cfg.Quiet > 0 && audio.RMS(win) < float64(d.cfg.Quiet) {
			d.quiet = true
		} else {
			if d.quiet { // what the model last heard is gone: start as on a fresh stream
				d.m.Reset()
				d.quiet = false
			}
			var err error
			if p, err = d.m.Prob(win); err != nil {
				return evs, err
			}
		}
		d.hist = append(d.hist, win...)
		d.pending = d.pending[:0]
		evs = d.step(p, evs)
	}
	return evs, nil
}

// step advances the state machine by one window whose probability is p.
func (d *Detector) step(p float32, evs []Event) []Event {
	d.prob = p
	start := d.pos
	d.pos += int64(d.win)
	switch d.state {
	case idle:
		if p >= d.cfg.Threshold {
			d.state, d.candFrom, d.dipFrom = candidate, start, -1
			d.speechFrom = d.onset(start)
			d.candSum, d.candN = float64(p), 1
			evs = d.confirm(evs)
		}
	case candidate:
		// A short first word ("the", "few") can end before MinSpeech, and the probability
		// dips in the pause before the next one: the candidate survives a dip up to half of
		// MinSilence, so the start stays at the first word instead of moving to the second.
		if p >= d.cfg.Threshold || (p >= d.cfg.NegThresh && d.dipFrom < 0) {
			d.dipFrom = -1
			d.candSum += float64(p)
			d.candN++
			evs = d.confirm(evs)
		} else {
			if d.dipFrom < 0 {
				d.dipFrom = start
			}
			if d.pos-d.dipFrom > d.candGap {
				d.state = idle
			}
		}
	case speaking:
		switch {
		case p >= d.cfg.Threshold:
			d.silentFrom = -1
			if p >= d.cfg.Confirm {
				d.lastVoice = d.pos // only confident windows move the end: noise hovers near the threshold
			}
		case p < d.cfg.NegThresh && d.silentFrom < 0:
			d.silentFrom = start
		}
		if d.silentFrom >= 0 && d.pos-d.silentFrom >= d.minSilence {
			// the speech ended with the last confident window, not where the probability
			// finally sank below NegThresh (in noise it decays slowly)
			evs = append(evs, d.end(d.speechEnd(), false))
		} else if d.pos-d.speechFrom >= d.maxSpeech {
			evs = append(evs, d.end(d.pos, true))
			// speech goes on: a new utterance starts right here
			d.state, d.speechFrom, d.audioFrom, d.silentFrom, d.lastVoice = speaking, d.pos, d.pos, -1, d.pos
			evs = append(evs, Event{Type: SpeechStart, Start: d.pos, AudioStart: d.pos, At: d.pos})
		}
	}
	if d.state != speaking {
		if len(d.recent) == d.lookBack {
			copy(d.recent, d.recent[1:])
			d.recent = d.recent[:d.lookBack-1]
		}
		d.recent = append(d.recent, p)
	} else {
		d.recent = d.recent[:0]
	}
	d.trim()
	return evs
}

// onset moves a start at window start back over the windows before it whose probability is
// at least OnsetThresh (the model reacts late, and on a soft onset its probability rises
// over several windows), at most LookBack, never into the previous utterance.
func (d *Detector) onset(start int64) int64 {
	from := start
	for k := len(d.recent) - 1; k >= 0; k-- {
		w := start - int64(len(d.recent)-k)*int64(d.win)
		if d.recent[k] < d.cfg.OnsetThresh || w < d.lastEnd || w < d.histStart {
			break
		}
		from = w
	}
	return from
}

// speechEnd is where the open utterance's speech ended: the model's probability stays high
// for about a window after the voice stops, so one window before the end of the last
// confident window (but never before the utterance's minimum length).
func (d *Detector) speechEnd() int64 {
	end := min(d.lastVoice, d.silentFrom) - int64(d.win)
	return max(end, d.speechFrom+d.minSpeech)
}

// confirm turns a candidate into speech once it has lasted MinSpeech.
func (d *Detector) confirm(evs []Event) []Event {
	if int64(d.candN*d.win) < max(d.minSpeech, 1) {
		return evs
	}
	if d.candSum/float64(d.candN) < float64(d.cfg.Confirm) {
		// hovering between the thresholds (babble, music): not confident enough to start
		d.state = idle
		return evs
	}
	d.state, d.silentFrom, d.lastVoice = speaking, -1, d.pos
	d.audioFrom = max(d.speechFrom-d.preRoll, d.lastEnd, d.histStart)
	return append(evs, Event{Type: SpeechStart, Start: d.speechFrom, AudioStart: d.audioFrom, At: d.pos})
}

// end closes the utterance whose speech ends at speechEnd.
func (d *Detector) end(speechEnd int64, forced bool) Event {
	audioEnd := min(speechEnd+d.hang, d.pos)
	if forced {
		audioEnd = speechEnd
	}
	ev := Event{Type: SpeechEnd, Start: d.speechFrom, End: speechEnd, AudioStart: d.audioFrom, AudioEnd: audioEnd, Forced: forced, At: d.pos}
	ev.Samples = append([]float32(nil), d.hist[d.audioFrom-d.histStart:audioEnd-d.histStart]...)
	d.lastEnd = audioEnd
	d.state, d.silentFrom = idle, -1
	return ev
}

// trim bounds the history while no utterance is open.
func (d *Detector) trim() {
	if d.state == speaking {
		return
	}
	keep := d.preRoll + d.minSpeech + int64((2+d.lookBack)*d.win)
	if d.state == candidate {
		keep += d.pos - d.speechFrom
	}
	if drop := int64(len(d.hist)) - keep; drop > int64(4*d.win) {
		n := copy(d.hist, d.hist[drop:])
		d.hist = d.hist[:n]
		d.histStart += drop
	}
}

// Flush ends the stream: a partial window is padded with zeros and an open utterance is
// closed at the end of the audio.
func (d *Detector) Flush(ctx context.Context) ([]Event, error) {
	var evs []Event
	if n := len(d.pending); n > 0 {
		var err error
		evs, err = d.Accept(ctx, make([]float32, d.win-n))
		if err != nil {
			return evs, err
		}
	}
	if d.state == speaking {
		end := d.pos
		if d.silentFrom >= 0 {
			end = d.speechEnd()
		}
		evs = append(evs, d.end(end, false))
	}
	return evs, nil
}

// Close releases the model if the Detector opened it.
func (d *Detector) Close() error {
	if d.owned {
		return d.m.Close()
	}
	return nil
}

// Segment is one utterance found offline.
type Segment struct {
	Start      int64   `json:"start"` // samples at the detector's rate
	End        int64   `json:"end"`
	StartSec   float64 `json:"start_s"`
	EndSec     float64 `json:"end_s"`
	AudioStart float64 `json:"audio_start_s"` // with pre-roll
	AudioEnd   float64 `json:"audio_end_s"`   // with hang-over
	Forced     bool    `json:"forced,omitempty"`
}

// Segments runs the detector over a whole source (converted to mono at the detector's rate)
// and returns the utterances. The detector is Reset first.
func (d *Detector) Segments(ctx context.Context, src audio.Source) ([]Segment, error) {
	src, err := audio.Convert(src, d.Format(), audio.QualityHigh)
	if err != nil {
		return nil, err
	}
	d.Reset()
	var segs []Segment
	add := func(evs []Event) {
		for _, e := range evs {
			if e.Type == SpeechEnd {
				r := float64(d.rate)
				segs = append(segs, Segment{Start: e.Start, End: e.End, StartSec: float64(e.Start) / r, EndSec: float64(e.End) / r,
					AudioStart: float64(e.AudioStart) / r, AudioEnd: float64(e.AudioEnd) / r, Forced: e.Forced})
			}
		}
	}
	buf := make([]float32, 8*d.win)
	for {
		n, rerr := src.Read(ctx, buf)
		if n > 0 {
			evs, err := d.Accept(ctx, buf[:n])
			add(evs)
			if err != nil {
				return segs, err
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return segs, rerr
		}
	}
	evs, err := d.Flush(ctx)
	add(evs)
	return segs, err
}
