package app

import (
	"sync"
	"time"
)

// State is where the turn loop is.
type State int

// States of the loop.
const (
	Idle State = iota
	Listening
	Transcribing
	Thinking
	Speaking
)

func (s State) String() string {
	switch s {
	case Idle:
		return "idle"
	case Listening:
		return "listening"
	case Transcribing:
		return "transcribing"
	case Thinking:
		return "thinking"
	case Speaking:
		return "speaking"
	}
	return "unknown"
}

// MarshalText makes states print as words in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// EventKind names an event.
type EventKind string

// Event kinds.
const (
	EvState            EventKind = "state"             // State
	EvLevel            EventKind = "level"             // Level (capture RMS dBFS); coalesced
	EvSpeechStart      EventKind = "speech_start"      // the VAD heard speech
	EvSpeechEnd        EventKind = "speech_end"        // the VAD's endpoint
	EvWake             EventKind = "wake"              // the wake word
	EvEchoRejected     EventKind = "echo_rejected"     // a capture was Parley's own voice
	EvPartial          EventKind = "partial"           // Text: what the recogniser makes of the utterance so far (Options.Partials)
	EvTranscript       EventKind = "transcript"        // Transcript
	EvDelta            EventKind = "delta"             // Text: a piece of the answer
	EvSentenceStarted  EventKind = "sentence_started"  // Sentence, Text: playback began
	EvSentenceFinished EventKind = "sentence_finished" // Sentence, Text: playback ended
	EvBargeIn          EventKind = "barge_in"          // the user interrupted
	EvStopped          EventKind = "stopped"           // the user asked Parley to stop speaking (Text: what stopped it)
	EvError            EventKind = "error"             // Err: what went wrong (the loop goes on); PartOf(Err) is the part
	EvTurnDone         EventKind = "turn_done"         // Turn: the whole exchange
	EvQueued           EventKind = "queued"            // Text: a typed message waiting for the answer in flight to end
)

// Event is one thing the faces may show.
type Event struct {
	Kind       EventKind   `json:"kind"`
	Time       time.Time   `json:"time"`
	Turn       int64       `json:"turn,omitempty"`
	State      State       `json:"state"`
	Level      float64     `json:"level,omitempty"`
	Transcript *Transcript `json:"transcript,omitempty"`
	Text       string      `json:"text,omitempty"`
	Sentence   int         `json:"sentence,omitempty"`
	Err        error       `json:"-"` // EvError: errors.Is finds the sentinels (ErrNoVoice…), PartOf the part
	Exchange   *Exchange   `json:"exchange,omitempty"`
}

// Exchange is a finished turn: what was heard, what was said and how long each hop took.
type Exchange struct {
	Turn        int64      `json:"turn"`
	Transcript  Transcript `json:"transcript"`
	Answer      string     `json:"answer"` // what was actually played (all of it when not interrupted)
	FullAnswer  string     `json:"full_answer"`
	Interrupted bool       `json:"interrupted"`
	Stopped     bool       `json:"stopped,omitempty"` // the user asked Parley to stop speaking
	Err         error      `json:"-"`                 // why the exchange failed; nil = it did not
	Latency     Latency    `json:"latency"`
	Start, End  time.Time  `json:"-"`
}

// maxQueued bounds what one slow subscriber may hold before events are dropped.
const maxQueued = 4096

// maxEarly bounds the events kept for the first subscriber: the loop and the microphone start
// in New, before anyone can subscribe, and a device that fails at once must still be reported.
const maxEarly = 64

// bus fans events out to subscribers without ever blocking the publisher: each subscriber has
// its own queue and goroutine; level events are coalesced (only the newest waits), other events
// queue up to maxQueued and are then dropped (counted).
type bus struct {
	mu     sync.Mutex
	subs   map[*sub]struct{}
	closed bool
	hadSub bool    // someone has subscribed; early is no longer kept
	early  []Event // non-level events published before the first subscription
}

type sub struct {
	ch      chan Event
	mu      sync.Mutex
	q       []Event
	level   *Event
	dropped int
	wake    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func (b *bus) subscribe(buf int) (<-chan Event, func()) {
	if buf < 0 {
		buf = 0
	}
	s := &sub{ch: make(chan Event, buf), wake: make(chan struct{}, 1), done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		close(s.ch)
		return s.ch, func() {}
	}
	if b.subs == nil {
		b.subs = map[*sub]struct{}{}
	}
	if !b.hadSub {
		b.hadSub = true
		s.q, b.early = b.early, nil
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	go s.run()
	return s.ch, func() {
		b.mu.Lock()
		delete(b.subs, s)
		b.mu.Unlock()
		s.stop()
	}
}

func (s *sub) stop() { s.once.Do(func() { close(s.done) }) }

func (s *sub) run() {
	defer close(s.ch)
	for {
		s.mu.Lock()
		var e Event
		have := false
		if len(s.q) > 0 {
			e, have = s.q[0], true
			s.q[0] = Event{}
			s.q = s.q[1:]
		} else if s.level != nil {
			e, have = *s.level, true
			s.level = nil
		}
		s.mu.Unlock()
		if !have {
			select {
			case <-s.wake:
				continue
			case <-s.done:
				return
			}
		}
		select {
		case s.ch <- e:
		case <-s.done:
			return
		}
	}
}

func (s *sub) put(e Event) {
	s.mu.Lock()
	if e.Kind == EvLevel {
		s.level = &e
	} else if len(s.q) < maxQueued {
		s.q = append(s.q, e)
	} else {
		s.dropped++
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (b *bus) publish(e Event) {
	b.mu.Lock()
	if !b.hadSub && !b.closed && e.Kind != EvLevel && len(b.early) < maxEarly {
		b.early = append(b.early, e)
	}
	for s := range b.subs {
		s.put(e)
	}
	b.mu.Unlock()
}

func (b *bus) close() {
	b.mu.Lock()
	b.closed = true
	subs := b.subs
	b.subs = nil
	b.mu.Unlock()
	for s := range subs {
		s.stop()
	}
}
