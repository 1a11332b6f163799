package app

import (
	"context"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// room simulates a room with a speaker and a microphone, in room time (16 kHz samples) that
// advances as the microphone is read. The speaker plays its queue one sample per room sample;
// the microphone hears the user's scheduled speech plus the speaker's output, delayed and
// attenuated (the echo).
type room struct {
	mu        sync.Mutex
	t         int64
	queue     []float32
	played    int64
	stops     int
	playedSig []float32 // what the speaker emitted at each room instant
	echoGain  float32
	echoDelay int
	user      []float32 // user speech still to be heard
	triggers  []trigger
	pace      time.Duration // wall time per 20 ms block
	maxQueue  int
	space     chan struct{}
	noise     *rand.Rand
}

type trigger struct {
	played int64 // fire when the speaker has played this many samples
	fn     func(r *room)
}

func newRoom() *room {
	return &room{pace: 5 * time.Millisecond, maxQueue: SampleRate / 2, space: make(chan struct{}, 1),
		noise: rand.New(rand.NewPCG(1, 2))}
}

// say schedules the user's speech to start now (after any speech already scheduled).
func (r *room) say(pcm []float32) {
	r.mu.Lock()
	r.user = append(r.user, pcm...)
	r.mu.Unlock()
}

// when runs fn (with the room locked) once the speaker has played n samples in total.
func (r *room) when(n int64, fn func(r *room)) {
	r.mu.Lock()
	r.triggers = append(r.triggers, trigger{n, fn})
	r.mu.Unlock()
}

func (r *room) now() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.t
}

func (r *room) stopCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stops
}

// mic is the room's microphone.
type mic struct{ r *room }

func (m mic) Read(ctx context.Context, p []float32) (int, error) {
	r := m.r
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(r.pace):
	}
	n := min(len(p), 320)
	r.mu.Lock()
	for i := 0; i < n; i++ {
		var s float32
		if len(r.queue) > 0 {
			s = r.queue[0]
			r.queue = r.queue[1:]
			r.played++
		}
		r.playedSig = append(r.playedSig, s)
		var v float32
		if k := int(r.t) - r.echoDelay; k >= 0 && r.echoGain != 0 {
			v = r.echoGain * r.playedSig[k]
		}
		if len(r.user) > 0 {
			v += r.user[0]
			r.user = r.user[1:]
		}
		v += float32(r.noise.NormFloat64() * 1e-4)
		p[i] = v
		r.t++
	}
	kept := r.triggers[:0]
	var fire []trigger
	for _, tr := range r.triggers {
		if r.played >= tr.played {
			fire = append(fire, tr)
		} else {
			kept = append(kept, tr)
		}
	}
	r.triggers = kept
	for _, tr := range fire {
		tr.fn(r)
	}
	r.mu.Unlock()
	select {
	case r.space <- struct{}{}:
	default:
	}
	return n, nil
}

// speaker is the room's loudspeaker (16 kHz).
type speaker struct{ r *room }

func (s speaker) SampleRate() int { return SampleRate }

func (s speaker) Write(ctx context.Context, p []float32) error {
	r := s.r
	for len(p) > 0 {
		r.mu.Lock()
		room := r.maxQueue - len(r.queue)
		if room > 0 {
			k := min(room, len(p))
			r.queue = append(r.queue, p[:k]...)
			p = p[k:]
			r.mu.Unlock()
			continue
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.space:
		}
	}
	return nil
}

func (s speaker) Played() int64 {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.r.played
}

func (s speaker) Stop() {
	s.r.mu.Lock()
	s.r.queue = nil
	s.r.stops++
	s.r.mu.Unlock()
}

// speech is a stand-in for a voice: noise shaped by a slow envelope, reproducible from seed.
func speech(d time.Duration, rms float64, seed uint64) []float32 {
	n := int(d * SampleRate / time.Second)
	rng := rand.New(rand.NewPCG(seed, seed+7))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64() * rms)
	}
	return out
}

func seedOf(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// voice speaks each character for perChar, as noise seeded by the text.
type voice struct {
	rate    int
	perChar time.Duration
	err     error
	mu      sync.Mutex
	said    []string
}

func (v *voice) SampleRate() int {
	if v.rate == 0 {
		return SampleRate
	}
	return v.rate
}

func (v *voice) Synthesize(ctx context.Context, text string, fn func([]float32) error) error {
	v.mu.Lock()
	v.said = append(v.said, text)
	err := v.err
	v.mu.Unlock()
	if err != nil {
		return err
	}
	pc := v.perChar
	if pc == 0 {
		pc = 40 * time.Millisecond
	}
	pcm := speech(time.Duration(len(text))*pc, 0.1, seedOf(text))
	if v.SampleRate() != SampleRate {
		pcm = speech(time.Duration(len(text))*pc*time.Duration(v.SampleRate())/SampleRate, 0.1, seedOf(text))
	}
	for len(pcm) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := min(1600, len(pcm))
		if err := fn(pcm[:k]); err != nil {
			return err
		}
		pcm = pcm[k:]
	}
	return nil
}

func (v *voice) texts() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.said...)
}

// brain answers from a function of the question, streaming word by word.
type brain struct {
	answer func(q string) (string, error)
	mu     sync.Mutex
	asked  []string
	hist   [][]Message
}

func (b *brain) Answer(ctx context.Context, in Transcript, hist []Message, fn func(string) error) error {
	b.mu.Lock()
	b.asked = append(b.asked, in.Text)
	b.hist = append(b.hist, hist)
	b.mu.Unlock()
	ans, err := b.answer(in.Text)
	if err != nil {
		return err
	}
	for i, w := range strings.SplitAfter(ans, " ") {
		_ = i
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(w); err != nil {
			return err
		}
	}
	return nil
}

func (b *brain) questions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.asked...)
}

// ears transcribes utterances from a queue of texts; it fails with err when set.
type ears struct {
	mu    sync.Mutex
	texts []string
	err   error
	heard [][]float32
}

func (e *ears) Transcribe(ctx context.Context, pcm []float32, _ TranscribeOptions) (Transcript, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.heard = append(e.heard, pcm)
	if e.err != nil {
		return Transcript{}, e.err
	}
	if len(e.texts) == 0 {
		return Transcript{Text: "unexpected"}, nil
	}
	t := e.texts[0]
	e.texts = e.texts[1:]
	return Transcript{Text: t, Lang: "en", Emotion: "NEUTRAL", Event: "Speech"}, nil
}

func (e *ears) calls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.heard)
}

type memHistory struct {
	mu   sync.Mutex
	recs []TurnRecord
}

func (h *memHistory) AddTurns(ctx context.Context, ts ...TurnRecord) error {
	h.mu.Lock()
	h.recs = append(h.recs, ts...)
	h.mu.Unlock()
	return nil
}

func (h *memHistory) all() []TurnRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]TurnRecord(nil), h.recs...)
}

// rig is a full assistant on fakes.
type rig struct {
	room  *room
	ears  *ears
	brain *brain
	voice *voice
	hist  *memHistory
	a     *Assistant
	ev    <-chan Event
	unsub func()
	seen  []Event
}

func newRig(t *testing.T, o Options, answer func(string) (string, error), mods ...func(*Parts)) *rig {
	t.Helper()
	r := &rig{room: newRoom(), ears: &ears{}, brain: &brain{answer: answer}, voice: &voice{}, hist: &memHistory{}}
	p := Parts{Ear: mic{r.room}, VAD: &EnergyVAD{}, Transcriber: r.ears, Brain: r.brain,
		Voice: r.voice, Speaker: speaker{r.room}, History: r.hist}
	for _, m := range mods {
		m(&p)
	}
	a, err := New(p, o)
	if err != nil {
		t.Fatal(err)
	}
	r.a = a
	r.ev, r.unsub = a.Subscribe(64)
	t.Cleanup(func() { a.Close() })
	return r
}

var errTimeout = errors.New("no such event within the test's patience")

// wait reads events until pred matches (returning it) or a generous deadline passes (the
// deadline only guards against hangs; nothing is asserted about time).
func (r *rig) wait(t *testing.T, what string, pred func(Event) bool) Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-r.ev:
			if !ok {
				t.Fatalf("waiting for %s: event stream closed", what)
			}
			r.seen = append(r.seen, e)
			if pred(e) {
				return e
			}
		case <-deadline:
			t.Fatalf("waiting for %s: %v (saw %s)", what, errTimeout, kinds(r.seen))
		}
	}
}

func (r *rig) turnDone(t *testing.T) *Exchange {
	t.Helper()
	return r.wait(t, "turn done", func(e Event) bool { return e.Kind == EvTurnDone }).Exchange
}

func (r *rig) count(k EventKind) int {
	n := 0
	for _, e := range r.seen {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func kinds(es []Event) string {
	var b strings.Builder
	for _, e := range es {
		if e.Kind == EvLevel {
			continue
		}
		b.WriteString(string(e.Kind))
		if e.Kind == EvState {
			b.WriteString("=" + e.State.String())
		}
		b.WriteString(" ")
	}
	return b.String()
}

func fixed(ans string) func(string) (string, error) {
	return func(string) (string, error) { return ans, nil }
}
