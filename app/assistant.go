package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is how a turn starts.
type Mode int

// Modes.
const (
	PushToTalk Mode = iota // StartListening / StopListening
	HandsFree              // the VAD's endpoint ends each utterance
	WakeWord               // the wake word opens a hands-free utterance
)

// ParseMode reads config's assistant.mode.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "push-to-talk", "ptt":
		return PushToTalk, nil
	case "hands-free", "handsfree", "vad":
		return HandsFree, nil
	case "wake-word", "wake":
		return WakeWord, nil
	}
	return 0, fmt.Errorf("%w: assistant.mode %q (want push-to-talk, hands-free or wake-word)", ErrConfig, s)
}

func (m Mode) String() string {
	switch m {
	case HandsFree:
		return "hands-free"
	case WakeWord:
		return "wake-word"
	}
	return "push-to-talk"
}

// BargeIn says whether the user's speech interrupts Parley.
type BargeIn int

// Barge-in policies.
const (
	BargeInOn        BargeIn = iota // any speech interrupts
	BargeInOff                      // Parley finishes its answer
	BargeInMinSpeech                // speech longer than Options.BargeInMin interrupts
)

// ParseBargeIn reads config's assistant.barge_in.
func ParseBargeIn(s string) (BargeIn, error) {
	switch s {
	case "", "on":
		return BargeInOn, nil
	case "off":
		return BargeInOff, nil
	case "min-speech":
		return BargeInMinSpeech, nil
	}
	return 0, fmt.Errorf("%w: assistant.barge_in %q (want off, on or min-speech)", ErrConfig, s)
}

// Options tune the loop. The zero value is usable (push-to-talk, barge-in on).
type Options struct {
	Mode       Mode
	BargeIn    BargeIn
	BargeInMin time.Duration // for BargeInMinSpeech; default 300 ms

	PreRoll      time.Duration // audio kept before the VAD's speech start; default 400 ms: Silero finds a soft onset ("what") up to ~300 ms late
	PostRoll     time.Duration // audio kept after the VAD's speech end; default 150 ms
	MaxUtterance time.Duration // an utterance is cut here; default 30 s
	WakeListen   time.Duration // after the wake word, how long to wait for speech; default 8 s

	// EchoResidual is the self-echo threshold: a capture whose energy is explained by the
	// played signal (best delayed, scaled copy) up to this residual fraction is Parley's own
	// voice. 0 = default 0.35; negative disables echo rejection.
	EchoResidual float64
	// EchoMaxDelay bounds the speaker → microphone delay searched; default 600 ms (the
	// search also follows the delay it last measured).
	EchoMaxDelay time.Duration

	// Partials, when positive, transcribes the utterance being heard this often and
	// publishes what the recogniser makes of it so far (EvPartial): a live transcript while
	// the user speaks. Each pass transcribes the utterance from its start (SenseVoice is not
	// a streaming model), one at a time, up to maxPartial of audio.
	Partials time.Duration

	// MicOnDemand, in push-to-talk with a Capture that is a MicGate, keeps the microphone
	// closed except while Talk is held or an exchange is in flight (so speech can still
	// interrupt an answer): an idle push-to-talk assistant records nothing and costs nothing.
	MicOnDemand bool

	HistoryTurns int // exchanges of context given to the brain; default 16
	// RecordAudio gives History each turn's audio (TurnRecord.Audio): the user's utterance
	// and the part of the answer that was played.
	RecordAudio bool
	Log         *slog.Logger
}

func (o *Options) defaults() {
	if o.BargeInMin <= 0 {
		o.BargeInMin = 300 * time.Millisecond
	}
	if o.PreRoll <= 0 {
		o.PreRoll = 400 * time.Millisecond
	}
	if o.PostRoll <= 0 {
		o.PostRoll = 150 * time.Millisecond
	}
	if o.MaxUtterance <= 0 {
		o.MaxUtterance = 30 * time.Second
	}
	if o.WakeListen <= 0 {
		o.WakeListen = 8 * time.Second
	}
	if o.EchoResidual == 0 {
		o.EchoResidual = 0.35
	}
	if o.EchoMaxDelay <= 0 {
		o.EchoMaxDelay = 600 * time.Millisecond
	}
	if o.HistoryTurns <= 0 {
		o.HistoryTurns = 16
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Parts are the engines the loop joins. Brain and Voice+Speaker are needed for answers; Ear
// and VAD for hands-free; Wake for the wake word. Missing parts make the turns that need them
// fail with a clear error, and the rest keeps working (a text-only assistant has no Ear).
type Parts struct {
	Ear         Capture
	VAD         VAD
	Wake        WakeDetector
	Echo        EchoReference // optional: built from Speaker's position when nil
	Transcriber Transcriber
	Brain       Brain
	Chunker     func() Chunker // a fresh chunker per answer; default: a simple sentence splitter
	Voice       Synthesizer
	Speaker     Player
	History     History // optional
}

// Assistant is the running turn loop. Create it with New; it runs until Close.
type Assistant struct {
	p   Parts
	o   Options
	log *slog.Logger
	bus bus

	in     chan any // everything the loop reacts to
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	state  atomic.Int32 // State, written by the loop only
	turnID atomic.Int64

	ear  *ear     // nil without Ear
	play *playLog // what went to the speaker, for the echo reference and truncation

	histMu sync.Mutex
	hist   []Message

	// loop-owned
	cur         *turn     // the exchange in flight
	last        *turn     // the latest exchange started (its done channel orders the next)
	utterStart  int64     // capture index where the current utterance started; -1 none
	pttStart    int64     // capture index of StartListening; -1 none
	pendBarge   bool      // BargeInMinSpeech: speech started during a turn, waiting for length
	overStart   int64     // capture index of speech over an answer that did not barge in; -1 none
	pendSay     []string  // announcements waiting for the exchange in flight
	pendText    []cmdText // typed messages waiting for the exchange in flight
	wakeTimer   *time.Timer
	wakeGen     int
	partialBusy bool    // a partial transcription is running
	uttGen      int     // counts utterances opened, so a late partial is dropped
	gate        MicGate // Options.MicOnDemand's gate; nil: the microphone stays open
	micOpen     bool
	micFrom     int64 // capture index where the microphone last opened: no pre-roll before it
}

// New checks the parts and starts the loop.
func New(p Parts, o Options) (*Assistant, error) {
	o.defaults()
	if o.Mode != PushToTalk && (p.Ear == nil || p.VAD == nil) {
		return nil, fmt.Errorf("%w: %s mode needs a capture device and a VAD", ErrConfig, o.Mode)
	}
	if o.Mode == WakeWord && p.Wake == nil {
		return nil, fmt.Errorf("%w: wake-word mode needs a wake word detector", ErrConfig)
	}
	if p.Chunker == nil {
		p.Chunker = NewSimpleChunker
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Assistant{p: p, o: o, log: o.Log, in: make(chan any, 256), ctx: ctx, cancel: cancel,
		utterStart: -1, pttStart: -1, overStart: -1}
	if p.Speaker != nil {
		a.play = newPlayLog(p.Speaker)
		if p.Echo == nil {
			a.p.Echo = a.play
		}
	}
	if p.Ear != nil {
		a.ear = newEar(a)
		if g, ok := p.Ear.(MicGate); ok && o.MicOnDemand && o.Mode == PushToTalk {
			a.gate, a.micOpen = g, true
			a.gateMic()
		}
	}
	a.state.Store(int32(a.restState()))
	a.wg.Add(1)
	go a.loop()
	if a.ear != nil {
		a.wg.Add(1)
		go a.ear.run(ctx)
	}
	return a, nil
}

// Close stops the loop, cancelling any turn in flight, and closes every subscription.
func (a *Assistant) Close() error {
	a.cancel()
	a.wg.Wait()
	a.bus.close()
	return nil
}

// Subscribe returns a channel of events and a function that ends the subscription. The loop
// never waits for a subscriber: level events are coalesced and, past a large backlog, other
// events are dropped. The first subscriber also gets the events published before it subscribed
// (a microphone that failed at start-up; levels excepted, at most 64). The channel is closed
// when the subscription or the assistant ends.
func (a *Assistant) Subscribe(buf int) (<-chan Event, func()) { return a.bus.subscribe(buf) }

// State is the loop's state now.
func (a *Assistant) State() State { return State(a.state.Load()) }

// Mode is the loop's mode.
func (a *Assistant) Mode() Mode { return a.o.Mode }

// commands sent to the loop
type (
	cmdStartListening struct{}
	cmdStopListening  struct{}
	cmdText           struct {
		text  string
		reply chan int64
	}
	cmdCancel struct{}
	cmdSay    struct{ text string }
)

func (a *Assistant) send(m any) error {
	select {
	case a.in <- m:
		return nil
	case <-a.ctx.Done():
		return ErrClosed
	}
}

// StartListening opens the microphone for a push-to-talk utterance (in any mode). Speaking
// over an answer interrupts it.
func (a *Assistant) StartListening() error {
	if a.ear == nil {
		return ErrNoEar
	}
	return a.send(cmdStartListening{})
}

// StopListening ends the push-to-talk utterance and starts the turn.
func (a *Assistant) StopListening() error {
	if a.ear == nil {
		return ErrNoEar
	}
	return a.send(cmdStopListening{})
}

// Cancel stops whatever the loop is doing (listening, thinking or speaking) and returns it to
// rest. An answer cut short is recorded as interrupted.
func (a *Assistant) Cancel() error { return a.send(cmdCancel{}) }

// SubmitText starts a typed turn: the text goes straight to thinking and speaking. A message
// typed while an answer is in flight waits for it to end (an EvQueued event says so; Cancel
// ends the answer sooner) instead of throwing the answer away: a typed follow-up is not an
// interruption. A request to stop (the brain's StopMatcher decides; without one, any text)
// interrupts the answer, as speech does. It returns the new turn's number once the turn
// starts.
func (a *Assistant) SubmitText(text string) (int64, error) {
	reply := make(chan int64, 1)
	if err := a.send(cmdText{text: text, reply: reply}); err != nil {
		return 0, err
	}
	select {
	case id := <-reply:
		return id, nil
	case <-a.ctx.Done():
		return 0, ErrClosed
	}
}

// Say speaks text as Parley's own announcement (a timer going off, a notice), without the
// brain. It waits for an exchange in flight to finish rather than interrupting it; the
// announcement is recorded as an assistant turn and can itself be interrupted.
func (a *Assistant) Say(text string) error {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return a.send(cmdSay{text: text})
}

// History returns the conversation so far as given to the brain (answers as played).
func (a *Assistant) History() []Message {
	a.histMu.Lock()
	defer a.histMu.Unlock()
	return append([]Message(nil), a.hist...)
}

func (a *Assistant) restState() State {
	if a.o.Mode == HandsFree {
		return Listening
	}
	return Idle
}

func (a *Assistant) publish(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.State = a.State()
	a.bus.publish(e)
}

func (a *Assistant) setState(s State) {
	if State(a.state.Swap(int32(s))) != s {
		a.publish(Event{Kind: EvState, Turn: a.turnID.Load()})
	}
}

// ear → loop messages
type (
	msgSpeechStart struct{ at int64 }
	msgSpeechLong  struct{ at int64 }
	msgSpeechEnd   struct {
		start, end int64
		when       time.Time // the speech ended
		decided    time.Time // the VAD said so
	}
	msgWake        struct{ at int64 }
	msgEarError    struct{ err error }
	msgWakeTimeout struct{ gen int }
	// turn → loop
	msgTurnState struct {
		t *turn
		s State
	}
	msgTurnDone struct {
		t  *turn
		ex *Exchange
	}
	msgStopHeard struct {
		t    *turn
		text string
	}
)

func (a *Assistant) loop() {
	defer a.wg.Done()
	var partials <-chan time.Time
	if a.o.Partials > 0 && a.ear != nil && a.p.Transcriber != nil {
		t := time.NewTicker(a.o.Partials)
		defer t.Stop()
		partials = t.C
	}
	for {
		select {
		case <-partials:
			a.partial()
		case <-a.ctx.Done():
			if a.cur != nil {
				a.interrupt(a.cur)
			}
			if a.last != nil {
				<-a.last.done
			}
			if a.wakeTimer != nil {
				a.wakeTimer.Stop()
			}
			return
		case m := <-a.in:
			a.handle(m)
			a.gateMic()
		}
	}
}

func (a *Assistant) handle(m any) {
	switch m := m.(type) {
	case msgPartial:
		a.partialBusy = false
		if _, open := a.utterance(); open && m.gen == a.uttGen && m.text != "" {
			a.publish(Event{Kind: EvPartial, Turn: a.turnID.Load(), Text: m.text})
		}
	case cmdStartListening:
		if a.cur != nil {
			a.bargeIn("push-to-talk")
		}
		a.uttGen++
		a.pttStart = a.ear.pos()
		a.utterStart = -1
		a.setState(Listening)
	case cmdStopListening:
		if a.pttStart < 0 {
			return
		}
		start := max(0, a.micFrom, a.pttStart-a.samples(a.o.PreRoll)/4)
		end := a.ear.pos()
		a.pttStart = -1
		now := time.Now()
		a.startVoiceTurn(start, end, now, now)
	case cmdText:
		if a.cur != nil {
			sm, ok := a.p.Brain.(StopMatcher)
			if ok && !sm.IsStop(strings.TrimSpace(m.text)) {
				a.pendText = append(a.pendText, m)
				a.publish(Event{Kind: EvQueued, Turn: a.turnID.Load(), Text: m.text})
				return
			}
			// "stop" (or a brain that cannot tell): the message interrupts, as speech would
			a.bargeIn("text")
		}
		a.startText(m)
	case cmdSay:
		if a.cur != nil || a.pttStart >= 0 || a.utterStart >= 0 {
			a.pendSay = append(a.pendSay, m.text)
			return
		}
		a.announce(m.text)
	case cmdCancel:
		if a.cur != nil {
			a.bargeIn("cancel")
		}
		a.pttStart, a.utterStart, a.pendBarge = -1, -1, false
		a.setState(a.restState())
	case msgSpeechStart:
		a.publish(Event{Kind: EvSpeechStart, Turn: a.turnID.Load()})
		if a.cur != nil {
			switch a.o.BargeIn {
			case BargeInOn:
				a.bargeIn("speech")
			case BargeInMinSpeech:
				a.pendBarge = true
				a.overStart = m.at
				return
			default:
				a.overStart = m.at
				return
			}
		}
		if a.pttStart >= 0 {
			return
		}
		if a.State() == Listening && a.o.Mode != PushToTalk {
			a.uttGen++
			a.utterStart = m.at
		}
	case msgSpeechLong:
		if a.pendBarge && a.cur != nil {
			a.pendBarge, a.overStart = false, -1
			a.bargeIn("speech")
			if a.State() == Listening && a.o.Mode != PushToTalk {
				a.uttGen++
				a.utterStart = m.at
			}
		}
	case msgSpeechEnd:
		a.publish(Event{Kind: EvSpeechEnd, Turn: a.turnID.Load()})
		a.pendBarge = false
		if a.cur != nil && a.overStart >= 0 {
			a.checkStop(a.cur, a.overStart, m.end)
		}
		a.overStart = -1
		if a.pttStart >= 0 || a.utterStart < 0 || a.cur != nil {
			return
		}
		start := max(a.utterStart, m.start) - a.samples(a.o.PreRoll)
		a.utterStart = -1
		a.startVoiceTurn(max(0, start), min(m.end+a.samples(a.o.PostRoll), a.ear.pos()), m.when, m.decided)
	case msgWake:
		a.publish(Event{Kind: EvWake, Turn: a.turnID.Load()})
		if a.o.Mode != WakeWord {
			return
		}
		if a.cur != nil {
			if a.o.BargeIn == BargeInOff {
				return
			}
			a.bargeIn("wake word")
		}
		a.setState(Listening)
		a.wakeGen++
		gen := a.wakeGen
		if a.wakeTimer != nil {
			a.wakeTimer.Stop()
		}
		a.wakeTimer = time.AfterFunc(a.o.WakeListen, func() { a.send(msgWakeTimeout{gen}) })
	case msgWakeTimeout:
		if m.gen == a.wakeGen && a.State() == Listening && a.utterStart < 0 && a.pttStart < 0 && a.cur == nil {
			a.setState(Idle)
		}
	case msgEarError:
		a.publish(Event{Kind: EvError, Turn: a.turnID.Load(), Err: &StageError{"microphone", PartAudio, m.err}})
		a.log.Error("microphone", "err", m.err)
		a.pendBarge, a.overStart = false, -1 // the speech they belonged to is gone
		if a.pttStart >= 0 || a.utterStart >= 0 {
			a.pttStart, a.utterStart = -1, -1
			if a.cur == nil {
				a.setState(a.restState())
			}
		}
	case msgTurnState:
		if m.t == a.cur {
			a.setState(m.s)
		}
	case msgStopHeard:
		if m.t == a.cur {
			m.t.stopped.Store(true)
			a.publish(Event{Kind: EvStopped, Turn: m.t.id, Text: m.text})
			a.bargeIn("stop")
		}
	case msgTurnDone:
		if m.t == a.cur {
			a.cur = nil
			if a.pttStart < 0 && a.utterStart < 0 {
				a.setState(a.restState())
			}
		}
		a.publish(Event{Kind: EvTurnDone, Turn: m.t.id, Exchange: m.ex})
		if a.cur == nil && len(a.pendText) > 0 {
			next := a.pendText[0]
			a.pendText = a.pendText[1:]
			a.startText(next)
			return
		}
		if a.cur == nil && a.pttStart < 0 && a.utterStart < 0 && len(a.pendSay) > 0 {
			text := a.pendSay[0]
			a.pendSay = a.pendSay[1:]
			a.announce(text)
		}
	}
}

// maxPartial bounds the audio a partial transcription takes: past it the live transcript
// stops growing (the final transcript has it all).
const maxPartial = 20 * time.Second

// msgPartial is a partial transcription's result.
type msgPartial struct {
	gen  int
	text string
}

// utterance is the capture span of the utterance being heard (ok false when none is open).
func (a *Assistant) utterance() (start int64, ok bool) {
	switch {
	case a.pttStart >= 0:
		return max(0, a.micFrom, a.pttStart-a.samples(a.o.PreRoll)/4), true
	case a.utterStart >= 0 && a.cur == nil:
		return max(0, a.utterStart-a.samples(a.o.PreRoll)), true
	}
	return 0, false
}

// partial transcribes the utterance so far, off the loop (Options.Partials).
func (a *Assistant) partial() {
	start, ok := a.utterance()
	if !ok || a.partialBusy {
		return
	}
	end := a.ear.pos()
	if end-start < a.samples(400*time.Millisecond) || end-start > a.samples(maxPartial) {
		return
	}
	pcm := a.ear.slice(start, end)
	a.partialBusy = true
	gen := a.uttGen
	go func() {
		tr, err := a.p.Transcriber.Transcribe(a.ctx, pcm, TranscribeOptions{})
		text := ""
		if err == nil {
			text = strings.TrimSpace(tr.Text)
		}
		a.toLoop(msgPartial{gen: gen, text: text})
	}()
}

// gateMic opens the microphone (Options.MicOnDemand) while Talk is held or an exchange is in
// flight, and closes it otherwise. The capture before an opening is stale: the pre-roll stops
// there, and the VAD starts afresh.
func (a *Assistant) gateMic() {
	if a.gate == nil {
		return
	}
	want := a.pttStart >= 0 || a.cur != nil
	if want == a.micOpen {
		return
	}
	a.micOpen = want
	if want {
		a.micFrom = a.ear.pos()
		a.ear.fresh.Store(true)
	}
	a.log.Debug("microphone", "open", want)
	a.gate.SetOpen(want)
}

func (a *Assistant) samples(d time.Duration) int64 { return int64(d) * SampleRate / int64(time.Second) }

// maxStopCommand bounds speech over an answer that is checked for a stop request: a command
// to stop is short, and longer talk is not worth a transcription while Parley speaks.
const maxStopCommand = 3 * time.Second

// checkStop transcribes speech heard over answer t that did not barge in and stops t when it
// was a request to stop (a StopMatcher brain decides). Parley's own voice is not checked.
func (a *Assistant) checkStop(t *turn, start, end int64) {
	sm, ok := a.p.Brain.(StopMatcher)
	if !ok || a.p.Transcriber == nil {
		return
	}
	start = max(0, start-a.samples(a.o.PreRoll))
	end = min(end+a.samples(a.o.PostRoll), a.ear.pos())
	if end-start > a.samples(maxStopCommand) {
		return
	}
	pcm, from := a.ear.sliceFrom(start, end)
	if len(pcm) == 0 || a.ear.isEcho(start, end) {
		return
	}
	go func() {
		a.ear.unecho(pcm, from) // heard without Parley's voice under it
		tr, err := a.p.Transcriber.Transcribe(t.ctx, pcm, TranscribeOptions{})
		if err != nil || !sm.IsStop(strings.TrimSpace(tr.Text)) {
			return
		}
		a.toLoop(msgStopHeard{t, strings.TrimSpace(tr.Text)})
	}()
}

// bargeIn stops the exchange in flight: playback first (so the device falls silent within
// one buffer), then generation and synthesis.
func (a *Assistant) bargeIn(why string) {
	t := a.cur
	a.publish(Event{Kind: EvBargeIn, Turn: t.id, Text: why})
	a.log.Info("barge-in", "turn", t.id, "by", why)
	a.interrupt(t)
	a.cur = nil
	a.setState(a.restState())
}

func (a *Assistant) interrupt(t *turn) {
	if a.play != nil {
		a.play.stop()
		t.stoppedAt.Store(a.p.Speaker.Played())
	}
	t.interrupted.Store(true)
	t.cancel()
}

// startText starts a typed turn now (an utterance being recorded is dropped: the user typed).
func (a *Assistant) startText(m cmdText) {
	a.pttStart, a.utterStart = -1, -1
	t := a.newTurn()
	m.reply <- t.id
	t.transcript = Transcript{Text: m.text}
	a.launch(t)
}

func (a *Assistant) newTurn() *turn {
	id := a.turnID.Add(1)
	ctx, cancel := context.WithCancel(a.ctx)
	t := &turn{id: id, ctx: ctx, cancel: cancel, done: make(chan struct{}), prev: a.last}
	t.stoppedAt.Store(-1)
	a.last = t
	a.cur = t
	return t
}

func (a *Assistant) startVoiceTurn(start, end int64, speechEnd, endpoint time.Time) {
	pcm, from := a.ear.sliceFrom(start, end)
	if len(pcm) == 0 {
		a.setState(a.restState())
		return
	}
	if a.ear.isEcho(start, end) {
		a.publish(Event{Kind: EvEchoRejected, Turn: a.turnID.Load()})
		a.setState(a.restState())
		return
	}
	t := a.newTurn()
	t.audio, t.audioFrom = pcm, from
	t.lat.SpeechEnd, t.lat.Endpoint = speechEnd, endpoint
	t.start = speechEnd.Add(-time.Duration(len(pcm)) * time.Second / SampleRate)
	a.launch(t)
}

func (a *Assistant) announce(text string) {
	t := a.newTurn()
	t.say = text
	a.launch(t)
}

func (a *Assistant) launch(t *turn) {
	if t.audio != nil {
		a.setState(Transcribing)
	} else {
		a.setState(Thinking)
	}
	go a.runTurn(t)
}
