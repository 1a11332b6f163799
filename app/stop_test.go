package app

import (
	"context"
	"strings"
	"testing"
	"time"
)

// stopBrain answers "stop" with ErrStopSpeaking, as the skills' stop intent does through the
// wire adapter, and anything else with the given answer.
func stopBrain(ans string) func(string) (string, error) {
	return func(q string) (string, error) {
		if q == "stop" {
			return "", ErrStopSpeaking
		}
		return ans, nil
	}
}

// TestStopWhileSpeaking: "stop", typed or spoken (hands-free, barge-in on), while an answer
// plays stops the speaker at once, nothing more is said, the answer is recorded as
// interrupted at what was heard, and the stop itself ends silently with an EvStopped event.
func TestStopWhileSpeaking(t *testing.T) {
	for _, spoken := range []bool{false, true} {
		name := "typed"
		if spoken {
			name = "spoken"
		}
		t.Run(name, func(t *testing.T) {
			o := Options{}
			if spoken {
				o.Mode = HandsFree
			}
			r := newRig(t, o, stopBrain(long))
			if spoken {
				r.ears.texts = []string{"stop"}
				first := int64(len("First sentence is here.")) * 40 * SampleRate / 1000
				r.room.when(first+SampleRate/2, func(rm *room) {
					rm.user = append(rm.user, speech(600*time.Millisecond, 0.08, 77)...)
				})
			}
			if _, err := r.a.SubmitText("tell me a story"); err != nil {
				t.Fatal(err)
			}
			if !spoken {
				r.wait(t, "the second sentence playing", func(e Event) bool { return e.Kind == EvSentenceStarted && e.Sentence == 1 })
				if _, err := r.a.SubmitText("stop"); err != nil {
					t.Fatal(err)
				}
			}
			story := r.turnDone(t)
			if !story.Interrupted || !strings.HasPrefix(long, story.Answer) || story.Answer == long || story.Answer == "" {
				t.Fatalf("story exchange %+v: want interrupted with the part played", story)
			}
			if r.room.stopCount() == 0 {
				t.Error("the speaker was never stopped")
			}
			stop := r.turnDone(t)
			if !stop.Stopped || stop.Interrupted || stop.Answer != "" || stop.Err != nil || stop.Transcript.Text != "stop" {
				t.Errorf("stop exchange %+v: want stopped, silent, no error", stop)
			}
			if r.count(EvStopped) != 1 || r.count(EvError) != 0 {
				t.Errorf("events %s: want one stopped, no error", kinds(r.seen))
			}
			for _, s := range r.voice.texts() {
				if !strings.Contains(long, s) {
					t.Errorf("said %q in answer to stop; want silence", s)
				}
			}
			h := r.hist.all()
			if len(h) != 3 || h[1].Role != RoleAssistant || !h[1].Interrupted || h[1].Text != story.Answer ||
				h[2].Role != RoleUser || h[2].Text != "stop" {
				t.Errorf("history %+v: want the story, its played part (interrupted) and the user's stop", h)
			}
			waitState(t, r.a, r.a.restState())
		})
	}
}

// TestStopWhenNothingPlays: "stop" with nothing to stop is acknowledged silently.
func TestStopWhenNothingPlays(t *testing.T) {
	r := newRig(t, Options{}, stopBrain("never"))
	if _, err := r.a.SubmitText("stop"); err != nil {
		t.Fatal(err)
	}
	ex := r.turnDone(t)
	if !ex.Stopped || ex.Interrupted || ex.Answer != "" || ex.FullAnswer != "" || ex.Err != nil {
		t.Errorf("exchange %+v", ex)
	}
	if said := r.voice.texts(); len(said) != 0 {
		t.Errorf("said %q; want nothing", said)
	}
	if r.count(EvStopped) != 1 || r.count(EvError) != 0 || r.count(EvBargeIn) != 0 {
		t.Errorf("events %s: want one stopped, no error, no barge-in", kinds(r.seen))
	}
	if h := r.hist.all(); len(h) != 1 || h[0].Text != "stop" {
		t.Errorf("history %+v: want only the user's stop", h)
	}
	waitState(t, r.a, Idle)
}

// TestStopControlMidAnswer: a model that starts answering and then calls its stop control
// (the brain returns ErrStopSpeaking after streaming text) falls silent at once: the rest is
// neither generated nor synthesised, and what was played is kept as interrupted.
func TestStopControlMidAnswer(t *testing.T) {
	r := newRig(t, Options{}, nil)
	started := make(chan struct{})
	r.a.p.Brain = brainFunc(func(ctx context.Context, fn func(string) error) error {
		if err := fn("Okay, I will be quiet now. "); err != nil {
			return err
		}
		select {
		case <-started:
		case <-ctx.Done():
			return ctx.Err()
		}
		return ErrStopSpeaking
	})
	if _, err := r.a.SubmitText("please stop reading that"); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "the answer playing", func(e Event) bool { return e.Kind == EvSentenceStarted })
	close(started)
	ex := r.turnDone(t)
	if !ex.Stopped || !ex.Interrupted || ex.Err != nil {
		t.Fatalf("exchange %+v: want stopped and interrupted, no error", ex)
	}
	if !strings.HasPrefix("Okay, I will be quiet now.", ex.Answer) || ex.Answer == "Okay, I will be quiet now." {
		t.Errorf("played part %q: want a cut-off prefix of the sentence", ex.Answer)
	}
	if r.room.stopCount() == 0 {
		t.Error("the speaker was never stopped")
	}
	h := r.hist.all()
	if len(h) == 0 || h[0].Text != "please stop reading that" {
		t.Fatalf("history %+v", h)
	}
	if len(h) == 2 && (!h[1].Interrupted || h[1].Text != ex.Answer) {
		t.Errorf("assistant record %+v: want the played part, interrupted", h[1])
	}
}

type brainFunc func(ctx context.Context, fn func(string) error) error

func (b brainFunc) Answer(ctx context.Context, _ Transcript, _ []Message, fn func(string) error) error {
	return b(ctx, fn)
}

func waitState(t *testing.T, a *Assistant, want State) {
	t.Helper()
	for i := 0; a.State() != want; i++ {
		if i > 3000 {
			t.Fatalf("state %v, want %v", a.State(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stopMatching is the fake brain that also recognises stop requests (as wire's does).
type stopMatching struct{ *brain }

func (stopMatching) IsStop(text string) bool { return text == "stop" || text == "be quiet" }

// TestStopOverAnswerWithoutBargeIn: with barge-in off (or speech shorter than min-speech's
// minimum) talk over an answer goes on being ignored, but "stop" is still obeyed.
func TestStopOverAnswerWithoutBargeIn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   BargeIn
		heard  string
		speech time.Duration
		stop   bool
	}{
		{"off, stop", BargeInOff, "stop", 700 * time.Millisecond, true},
		{"off, other talk", BargeInOff, "nice weather today", 700 * time.Millisecond, false},
		{"min-speech, short stop", BargeInMinSpeech, "be quiet", 250 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Options{Mode: HandsFree, BargeIn: tc.mode, BargeInMin: 600 * time.Millisecond}, fixed(long),
				func(p *Parts) { p.Brain = stopMatching{p.Brain.(*brain)} })
			r.ears.texts = []string{tc.heard}
			first := int64(len("First sentence is here.")) * 40 * SampleRate / 1000
			r.room.when(first+SampleRate/2, func(rm *room) {
				rm.user = append(rm.user, speech(tc.speech, 0.08, 4321)...)
			})
			if _, err := r.a.SubmitText("tell me a story"); err != nil {
				t.Fatal(err)
			}
			ex := r.turnDone(t)
			if ex.Stopped != tc.stop || ex.Interrupted != tc.stop {
				t.Fatalf("heard %q: stopped=%v interrupted=%v, want %v (%s)", tc.heard, ex.Stopped, ex.Interrupted, tc.stop, kinds(r.seen))
			}
			if r.ears.calls() != 1 {
				t.Errorf("%d transcriptions, want the one of the talk over the answer", r.ears.calls())
			}
			if !tc.stop {
				if ex.Answer != long || r.room.stopCount() != 0 {
					t.Errorf("answer %q, speaker stops %d: want the whole answer", ex.Answer, r.room.stopCount())
				}
				return
			}
			if r.room.stopCount() == 0 || !strings.HasPrefix(long, ex.Answer) || ex.Answer == long {
				t.Errorf("answer %q, speaker stops %d: want it cut", ex.Answer, r.room.stopCount())
			}
			if r.count(EvStopped) != 1 {
				t.Errorf("events %s: want one stopped", kinds(r.seen))
			}
			if q := r.brain.questions(); len(q) != 1 {
				t.Errorf("the brain was asked %q; a stop over the answer is a command, not a question", q)
			}
		})
	}
}

// TestTypedFollowUpWaitsForTheAnswer: a message typed while an answer plays is queued (an
// EvQueued event says so) and answered after it, and the first answer is heard and kept whole;
// a typed "stop" still interrupts.
func TestTypedFollowUpWaitsForTheAnswer(t *testing.T) {
	r := newRig(t, Options{}, func(q string) (string, error) {
		if q == "12 times 7" {
			return "That's 84.", nil
		}
		if q == "stop" {
			return "", ErrStopSpeaking
		}
		return long, nil
	}, func(p *Parts) { p.Brain = stopMatching{p.Brain.(*brain)} })
	if _, err := r.a.SubmitText("tell me a story"); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "the second sentence playing", func(e Event) bool { return e.Kind == EvSentenceStarted && e.Sentence == 1 })
	id := make(chan int64, 1)
	go func() {
		n, err := r.a.SubmitText("12 times 7")
		if err != nil {
			t.Error(err)
		}
		id <- n
	}()
	r.wait(t, "the message queued", func(e Event) bool { return e.Kind == EvQueued && e.Text == "12 times 7" })
	story := r.turnDone(t)
	if story.Interrupted || story.Answer != long {
		t.Fatalf("the story was cut by a typed follow-up: %+v", story)
	}
	next := r.turnDone(t)
	if next.Transcript.Text != "12 times 7" || next.Answer != "That's 84." || next.Interrupted {
		t.Errorf("the follow-up: %+v", next)
	}
	if n := <-id; n != next.Turn || n != story.Turn+1 {
		t.Errorf("SubmitText returned turn %d; the follow-up was turn %d after %d", n, next.Turn, story.Turn)
	}
	h := r.hist.all()
	if len(h) != 4 || h[1].Text != long || h[1].Interrupted || h[3].Text != "That's 84." {
		t.Errorf("history %+v: want both exchanges whole", h)
	}

	// a typed stop is not queued: it stops the answer
	if _, err := r.a.SubmitText("tell me a story"); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "the second story playing", func(e Event) bool { return e.Kind == EvSentenceStarted && e.Sentence == 1 && e.Turn > next.Turn })
	if _, err := r.a.SubmitText("stop"); err != nil {
		t.Fatal(err)
	}
	if ex := r.turnDone(t); !ex.Interrupted {
		t.Errorf("a typed stop did not interrupt: %+v", ex)
	}
}
