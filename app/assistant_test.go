package app

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestTextTurn(t *testing.T) {
	r := newRig(t, Options{}, fixed("It is ten past nine. Have a good evening!"))
	id, err := r.a.SubmitText("what time is it")
	if err != nil {
		t.Fatal(err)
	}
	ex := r.turnDone(t)
	if ex.Turn != id {
		t.Errorf("turn %d, want %d", ex.Turn, id)
	}
	if ex.Interrupted || ex.Err != nil {
		t.Fatalf("exchange %+v", ex)
	}
	if want := "It is ten past nine. Have a good evening!"; ex.Answer != want || ex.FullAnswer != want {
		t.Errorf("answer %q / %q, want %q", ex.Answer, ex.FullAnswer, want)
	}
	if got := r.voice.texts(); len(got) != 2 || got[0] != "It is ten past nine." || got[1] != "Have a good evening!" {
		t.Errorf("synthesised %q", got)
	}
	l := ex.Latency
	for _, h := range []struct {
		name string
		a, b time.Time
	}{{"transcript", l.SpeechEnd, l.Transcript}, {"first token", l.Transcript, l.FirstToken},
		{"first sentence", l.FirstToken, l.FirstSentence}, {"first audio", l.FirstSentence, l.FirstAudio}} {
		if h.b.IsZero() || h.b.Before(h.a) {
			t.Errorf("latency %s: %v before %v", h.name, h.b, h.a)
		}
	}
	if !strings.Contains(l.String(), "first audio") {
		t.Errorf("latency line %q", l.String())
	}
	if got := r.count(EvSentenceFinished); got != 2 {
		t.Errorf("%d sentence_finished events, want 2 (%s)", got, kinds(r.seen))
	}
	var states []string
	for _, e := range r.seen {
		if e.Kind == EvState {
			states = append(states, e.State.String())
		}
	}
	if got := strings.Join(states, ","); got != "speaking,idle" && got != "thinking,speaking,idle" {
		t.Errorf("states %s", got)
	}
	h := r.hist.all()
	if len(h) != 2 || h[0].Role != RoleUser || h[0].Text != "what time is it" || h[1].Role != RoleAssistant || h[1].Interrupted {
		t.Errorf("history %+v", h)
	}
}

func TestVoiceTurnHandsFree(t *testing.T) {
	r := newRig(t, Options{Mode: HandsFree}, fixed("Ten o'clock."))
	r.ears.texts = []string{"what time is it"}
	r.room.say(speech(time.Second, 0.05, 99))
	ex := r.turnDone(t)
	if ex.Transcript.Text != "what time is it" || ex.Transcript.Lang != "en" || ex.Answer != "Ten o'clock." {
		t.Fatalf("exchange %+v", ex)
	}
	heard := r.ears.heard[0]
	// the utterance: one second of speech plus pre-roll, give or take a VAD frame
	if d := time.Duration(len(heard)) * time.Second / SampleRate; d < time.Second || d > 1300*time.Millisecond {
		t.Errorf("transcribed %v of audio, want about 1.2 s", d)
	}
	if ex.Latency.SpeechEnd.IsZero() || ex.Latency.FirstAudio.Before(ex.Latency.SpeechEnd) {
		t.Errorf("latency %+v", ex.Latency)
	}
	if r.a.State() != Listening {
		t.Errorf("state %v after the turn, want listening", r.a.State())
	}
}

func TestPushToTalk(t *testing.T) {
	r := newRig(t, Options{}, fixed("Yes."))
	r.ears.texts = []string{"hello"}
	if err := r.a.StartListening(); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "listening", func(e Event) bool { return e.Kind == EvState && e.State == Listening })
	start := r.room.now()
	r.room.say(speech(500*time.Millisecond, 0.05, 5))
	for r.room.now() < start+SampleRate { // let the room hear it
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.a.StopListening(); err != nil {
		t.Fatal(err)
	}
	ex := r.turnDone(t)
	if ex.Transcript.Text != "hello" || ex.Answer != "Yes." {
		t.Fatalf("exchange %+v", ex)
	}
	if d := len(r.ears.heard[0]); d < SampleRate {
		t.Errorf("push-to-talk audio %d samples, want ≥ %d", d, SampleRate)
	}
}

const long = "First sentence is here. Second sentence comes now. Third one is rather long as well. The last sentence ends it."

func TestBargeIn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      BargeIn
		speech    time.Duration
		interrupt bool
	}{
		{"on", BargeInOn, 800 * time.Millisecond, true},
		{"off", BargeInOff, 800 * time.Millisecond, false},
		{"min-speech long", BargeInMinSpeech, 800 * time.Millisecond, true},
		{"min-speech cough", BargeInMinSpeech, 120 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Options{Mode: HandsFree, BargeIn: tc.mode, BargeInMin: 400 * time.Millisecond}, func(q string) (string, error) {
				if q == "stop" {
					return "Okay.", nil
				}
				return long, nil
			})
			r.ears.texts = []string{"stop"}
			// interrupt in the middle of the second sentence
			first := int64(len("First sentence is here.")) * 40 * SampleRate / 1000
			r.room.when(first+SampleRate/2, func(rm *room) {
				rm.user = append(rm.user, speech(tc.speech, 0.08, 1234)...)
			})
			if _, err := r.a.SubmitText("tell me a story"); err != nil {
				t.Fatal(err)
			}
			ex := r.turnDone(t)
			if ex.Interrupted != tc.interrupt {
				t.Fatalf("interrupted=%v, want %v: %+v (%s)", ex.Interrupted, tc.interrupt, ex, kinds(r.seen))
			}
			if !tc.interrupt {
				if ex.Answer != long {
					t.Errorf("answer %q", ex.Answer)
				}
				if r.room.stopCount() != 0 {
					t.Errorf("speaker stopped %d times", r.room.stopCount())
				}
				return
			}
			if !strings.HasPrefix(long, ex.Answer) || !strings.HasPrefix(ex.Answer, "First sentence is here. Second") || ex.Answer == long {
				t.Errorf("played part %q: want the first sentence and part of the second", ex.Answer)
			}
			if ex.FullAnswer != long && !strings.HasPrefix(long, ex.FullAnswer) {
				t.Errorf("full answer %q", ex.FullAnswer)
			}
			if r.room.stopCount() == 0 {
				t.Error("speaker never stopped")
			}
			// the interruption becomes the next question, and the brain sees the truncated answer
			ex2 := r.turnDone(t)
			if ex2.Transcript.Text != "stop" || ex2.Answer != "Okay." || ex2.Interrupted {
				t.Errorf("second exchange %+v", ex2)
			}
			hist := r.brain.hist[1]
			if len(hist) != 2 || hist[1].Text != ex.Answer {
				t.Errorf("brain context %+v, want the played part %q", hist, ex.Answer)
			}
			recs := r.hist.all()
			if len(recs) != 4 || !recs[1].Interrupted || recs[1].Text != ex.Answer || recs[3].Interrupted {
				t.Errorf("history %+v", recs)
			}
		})
	}
}

// TestSelfEcho plays a long answer whose echo comes back into the microphone: it must start no
// turn and interrupt nothing. With echo rejection disabled the same room does barge in, which
// shows the test can tell.
func TestSelfEcho(t *testing.T) {
	for _, tc := range []struct {
		name     string
		residual float64
		wantEcho bool
	}{{"rejected", 0, true}, {"control without rejection", -1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Options{Mode: HandsFree, EchoResidual: tc.residual}, fixed(long))
			r.room.echoGain, r.room.echoDelay = 0.5, 37*SampleRate/1000
			r.ears.texts = []string{"tell me a story"}
			r.room.say(speech(time.Second, 0.05, 99))
			ex := r.turnDone(t)
			if !tc.wantEcho {
				if !ex.Interrupted {
					t.Fatalf("without echo rejection the echo should have barged in: %+v", ex)
				}
				return
			}
			if ex.Interrupted || ex.Answer != long {
				t.Fatalf("echo interrupted the answer: %+v (%s)", ex, kinds(r.seen))
			}
			// let the echo's tail and the VAD hang-over pass
			end := r.room.now() + SampleRate
			for r.room.now() < end {
				time.Sleep(5 * time.Millisecond)
			}
			if n := r.ears.calls(); n != 1 {
				t.Errorf("transcriber called %d times, want 1 (echo started a turn)", n)
			}
			r.drain()
			if r.count(EvEchoRejected) == 0 {
				t.Errorf("no echo_rejected event (%s)", kinds(r.seen))
			}
			if r.count(EvBargeIn) != 0 || r.count(EvTurnDone) != 1 {
				t.Errorf("events %s", kinds(r.seen))
			}
		})
	}
}

// drain takes the events already waiting: until 50 ms pass without one that is not a level
// update (levels keep coming while the microphone is open), or 2 s in all.
func (r *rig) drain() {
	quiet := time.NewTimer(50 * time.Millisecond)
	defer quiet.Stop()
	limit := time.After(2 * time.Second)
	for {
		select {
		case e, ok := <-r.ev:
			if !ok {
				return
			}
			if e.Kind != EvLevel {
				r.seen = append(r.seen, e)
				quiet.Reset(50 * time.Millisecond)
			}
		case <-quiet.C:
			return
		case <-limit:
			return
		}
	}
}

func TestSelfEchoWithUserDoubleTalk(t *testing.T) {
	// the user talks over Parley's echo: that is a barge-in, not an echo
	r := newRig(t, Options{Mode: HandsFree}, fixed(long))
	r.room.echoGain, r.room.echoDelay = 0.5, 37*SampleRate/1000
	r.ears.texts = []string{"tell me a story", "stop"}
	r.room.when(SampleRate*2, func(rm *room) { rm.user = append(rm.user, speech(time.Second, 0.08, 4321)...) })
	r.room.say(speech(time.Second, 0.05, 99))
	ex := r.turnDone(t)
	if !ex.Interrupted {
		t.Fatalf("double talk did not interrupt: %+v (%s)", ex, kinds(r.seen))
	}
	if ex2 := r.turnDone(t); ex2.Transcript.Text != "stop" {
		t.Errorf("second exchange %+v", ex2)
	}
}

func TestErrorRecovery(t *testing.T) {
	errDown := errors.New("connection refused")
	for _, tc := range []struct {
		name   string
		setup  func(r *rig)
		spoken string // the start of the explanation spoken
		part   Part   // the part the error is about (faces route by it)
	}{
		{"asr model missing", func(r *rig) { r.ears.err = errors.New("model.onnx: no such file") }, "Sorry, I could not understand", PartASR},
		{"llm down", func(r *rig) {
			r.brain.answer = func(string) (string, error) { return "", errDown }
		}, "Sorry, I cannot think", PartBrain},
		{"voice broken", func(r *rig) { r.voice.err = errors.New("espeak: no voice") }, "", PartVoice},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Options{Mode: HandsFree}, fixed("Fine."))
			r.ears.texts = []string{"how are you", "again"}
			tc.setup(r)
			r.room.say(speech(600*time.Millisecond, 0.05, 1))
			ex := r.turnDone(t)
			if ex.Err == nil {
				t.Fatalf("no error in %+v", ex)
			}
			if n := NoteOf(ex.Err); n.Part != tc.part || n.Kind != NoteFailed || !errors.Is(n.Err, ex.Err) {
				t.Errorf("error %v is noted as %+v, want part %q", ex.Err, n, tc.part)
			}
			if r.count(EvError) == 0 {
				t.Error("no error event")
			}
			said := r.voice.texts()
			if tc.spoken != "" && (len(said) == 0 || !strings.HasPrefix(said[len(said)-1], tc.spoken)) {
				t.Errorf("spoke %q, want an explanation starting %q", said, tc.spoken)
			}
			// the loop is still usable once the fault is gone
			r.ears.mu.Lock()
			r.ears.err = nil
			r.ears.mu.Unlock()
			r.brain.answer = fixed("Fine.")
			r.voice.mu.Lock()
			r.voice.err = nil
			r.voice.mu.Unlock()
			if st := r.a.State(); st != Listening {
				t.Errorf("state %v after the failed turn, want listening", st)
			}
			r.room.say(speech(600*time.Millisecond, 0.05, 2))
			ex = r.turnDone(t)
			if ex.Err != nil || ex.Answer != "Fine." {
				t.Errorf("after recovery: %+v", ex)
			}
		})
	}
}

func TestWakeWord(t *testing.T) {
	w := &wakeFake{armed: make(chan struct{}, 1)}
	r := newRig(t, Options{Mode: WakeWord, WakeListen: time.Minute}, fixed("Hello."), func(p *Parts) { p.Wake = w })
	r.ears.texts = []string{"hi"}
	// speech without the wake word is ignored
	r.room.say(speech(500*time.Millisecond, 0.05, 3))
	r.wait(t, "speech end", func(e Event) bool { return e.Kind == EvSpeechEnd })
	if r.ears.calls() != 0 || r.a.State() != Idle {
		t.Fatalf("speech without the wake word started a turn")
	}
	w.fire()
	r.wait(t, "listening", func(e Event) bool { return e.Kind == EvState && e.State == Listening })
	r.room.say(speech(500*time.Millisecond, 0.05, 4))
	ex := r.turnDone(t)
	if ex.Transcript.Text != "hi" || ex.Answer != "Hello." {
		t.Errorf("exchange %+v", ex)
	}
	if st := r.a.State(); st != Idle {
		t.Errorf("state %v after the turn, want idle", st)
	}
}

type wakeFake struct{ armed chan struct{} }

func (w *wakeFake) fire() { w.armed <- struct{}{} }
func (w *wakeFake) Process([]float32) (bool, error) {
	select {
	case <-w.armed:
		return true, nil
	default:
		return false, nil
	}
}
func (w *wakeFake) Reset() {}

func TestCancelLeaksNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		r := newRig(t, Options{Mode: HandsFree}, fixed(long))
		r.ears.texts = []string{"a", "b", "c"}
		for i := 0; i < 3; i++ {
			if _, err := r.a.SubmitText("story"); err != nil {
				t.Fatal(err)
			}
			r.wait(t, "speaking", func(e Event) bool { return e.Kind == EvSentenceStarted })
		}
		r.a.Cancel()
		r.room.say(speech(600*time.Millisecond, 0.05, 7))
		r.wait(t, "speech start", func(e Event) bool { return e.Kind == EvSpeechStart })
		if _, err := r.a.SubmitText("story"); err != nil {
			t.Fatal(err)
		}
		r.a.Close() // mid-turn
		if _, err := r.a.SubmitText("late"); !errors.Is(err, ErrClosed) {
			t.Errorf("after close: %v, want ErrClosed", err)
		}
	}()
	var after int
	for i := 0; i < 200; i++ {
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
		if after = runtime.NumGoroutine(); after <= before {
			return
		}
	}
	buf := make([]byte, 1<<16)
	n := runtime.Stack(buf, true)
	t.Errorf("%d goroutines before, %d after close:\n%s", before, after, buf[:n])
}

func TestSubscriberNeverBlocksLoop(t *testing.T) {
	r := newRig(t, Options{}, fixed("One. Two. Three."))
	slow, unsub := r.a.Subscribe(0) // never read until the end
	defer unsub()
	for i := 0; i < 3; i++ {
		if _, err := r.a.SubmitText("count"); err != nil {
			t.Fatal(err)
		}
		r.turnDone(t)
	}
	levels, done := 0, 0
	for {
		select {
		case e := <-slow:
			switch e.Kind {
			case EvLevel:
				levels++
			case EvTurnDone:
				done++
			}
			if done == 3 {
				if levels > 1 {
					t.Errorf("%d level events queued for a stalled subscriber, want them coalesced to 1", levels)
				}
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("slow subscriber got %d turn_done events, want 3", done)
		}
	}
}

func TestCutAt(t *testing.T) {
	for _, tc := range []struct {
		text string
		frac float64
		want string
	}{
		{"one two three four", 0, ""},
		{"one two three four", 0.5, "one two"},
		{"one two three four", 0.99, "one two three four"},
		{"one two three four", 1, "one two three four"},
		{"今天天气很好", 0.5, "今天天"},
		{"", 0.5, ""},
	} {
		if got := cutAt(tc.text, tc.frac); got != tc.want {
			t.Errorf("cutAt(%q, %g) = %q, want %q", tc.text, tc.frac, got, tc.want)
		}
	}
}

func TestEchoResidual(t *testing.T) {
	ref := speech(time.Second, 0.1, 1)
	delayed := func(x []float32, d int, g float32) []float32 {
		out := make([]float32, len(x))
		for i := d; i < len(x); i++ {
			out[i] = g * x[i-d]
		}
		return out
	}
	user := speech(time.Second, 0.1, 2)
	mix := delayed(ref, 800, 0.5)
	for i := range mix {
		mix[i] += user[i]
	}
	for _, tc := range []struct {
		name    string
		capture []float32
		ref     []float32
		echo    bool
	}{
		{"delayed copy", delayed(ref, 800, 0.3), ref, true},
		{"no delay", ref, ref, true},
		{"someone else", user, ref, false},
		{"double talk", mix, ref, false},
		{"nothing played", user, make([]float32, len(ref)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.capture[SampleRate/4 : SampleRate*3/4]
			r := tc.ref[SampleRate/4-2000 : SampleRate*3/4]
			res, _, ok := echoResidual(c, r, 2000)
			if got := ok && res <= 0.35; got != tc.echo {
				t.Errorf("residual %.3f ok=%v: echo=%v, want %v", res, ok, got, tc.echo)
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, s := range []string{"push-to-talk", "hands-free", "wake-word"} {
		m, err := ParseMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMode("always"); !errors.Is(err, ErrConfig) {
		t.Errorf("ParseMode(always): %v", err)
	}
	for s, want := range map[string]BargeIn{"on": BargeInOn, "off": BargeInOff, "min-speech": BargeInMinSpeech} {
		if b, err := ParseBargeIn(s); err != nil || b != want {
			t.Errorf("ParseBargeIn(%q) = %v, %v", s, b, err)
		}
	}
	if _, err := ParseBargeIn("sometimes"); !errors.Is(err, ErrConfig) {
		t.Errorf("ParseBargeIn(sometimes): %v", err)
	}
}

func TestSayWaitsForTheTurnInFlight(t *testing.T) {
	r := newRig(t, Options{}, fixed("It is ten. Goodbye."))
	if _, err := r.a.SubmitText("what time is it"); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "speaking", func(e Event) bool { return e.Kind == EvSentenceStarted })
	if err := r.a.Say("Your timer is done."); err != nil {
		t.Fatal(err)
	}
	first := r.turnDone(t)
	second := r.turnDone(t)
	if first.Interrupted || first.Answer != "It is ten. Goodbye." {
		t.Errorf("the announcement interrupted the answer: %+v", first)
	}
	if second.Answer != "Your timer is done." || second.Transcript.Text != "" {
		t.Errorf("announcement %+v", second)
	}
	if q := r.brain.questions(); len(q) != 1 {
		t.Errorf("the brain was asked %q; announcements must not reach it", q)
	}
	h := r.hist.all()
	if len(h) != 3 || h[2].Role != RoleAssistant || h[2].Text != "Your timer is done." {
		t.Errorf("history %+v", h)
	}
}

// TestLevelsAtRestAreSparse: listening hands-free to silence, the level reaches the UI only
// twice a second (each event wakes the UI); while somebody speaks, every 50 ms.
func TestLevelsAtRestAreSparse(t *testing.T) {
	r := newRig(t, Options{Mode: HandsFree}, fixed("Yes."))
	r.ears.texts = []string{"hello"}
	start := r.room.now()
	for r.room.now() < start+2*SampleRate {
		time.Sleep(5 * time.Millisecond)
	}
	r.drainAll()
	if n := r.count(EvLevel); n < 2 || n > 6 {
		t.Errorf("%d level events in 2 s of silence, want about 4", n)
	}
	before := r.count(EvLevel)
	r.room.say(speech(time.Second, 0.05, 3))
	r.turnDone(t)
	if n := r.count(EvLevel) - before; n < 15 {
		t.Errorf("%d level events over a second of speech and its turn, want one per 50 ms", n)
	}
}
