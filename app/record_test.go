package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRecordAudio: with RecordAudio the user's utterance (what was transcribed) and the
// answer as played reach History; typed turns carry no user audio.
func TestRecordAudio(t *testing.T) {
	r := newRig(t, Options{Mode: HandsFree, RecordAudio: true}, fixed("Ten o'clock."))
	r.ears.texts = []string{"what time is it"}
	r.room.say(speech(time.Second, 0.05, 99))
	ex := r.turnDone(t)
	if ex.Answer != "Ten o'clock." {
		t.Fatalf("exchange %+v", ex)
	}
	h := r.hist.all()
	if len(h) != 2 {
		t.Fatalf("history %+v", h)
	}
	heard := r.ears.heard[0]
	if u := h[0]; u.AudioRate != SampleRate || len(u.Audio) != len(heard) || len(u.Audio) == 0 || u.Audio[len(heard)/2] != heard[len(heard)/2] {
		t.Errorf("user audio: %d samples at %d Hz; want the %d transcribed at %d Hz", len(u.Audio), u.AudioRate, len(heard), SampleRate)
	}
	// the fake voice speaks 40 ms per character
	if a, want := h[1], len("Ten o'clock.")*40*SampleRate/1000; a.AudioRate != SampleRate || len(a.Audio) != want {
		t.Errorf("answer audio: %d samples at %d Hz; want %d at %d Hz", len(a.Audio), a.AudioRate, want, SampleRate)
	}
	if _, err := r.a.SubmitText("and now"); err != nil {
		t.Fatal(err)
	}
	r.turnDone(t)
	if h := r.hist.all(); len(h) != 4 || h[2].Audio != nil || len(h[3].Audio) == 0 {
		t.Errorf("typed turn: user audio %d samples (want none), answer %d", len(h[2].Audio), len(h[3].Audio))
	}
}

// TestRecordAudioInterrupted: an answer cut short keeps only the audio that was played.
func TestRecordAudioInterrupted(t *testing.T) {
	r := newRig(t, Options{RecordAudio: true}, fixed(long))
	if _, err := r.a.SubmitText("tell me a story"); err != nil {
		t.Fatal(err)
	}
	r.wait(t, "the second sentence", func(e Event) bool { return e.Kind == EvSentenceStarted && e.Sentence == 1 })
	if err := r.a.Cancel(); err != nil {
		t.Fatal(err)
	}
	ex := r.turnDone(t)
	if !ex.Interrupted {
		t.Fatalf("exchange %+v", ex)
	}
	h := r.hist.all()
	full := len(long) * 40 * SampleRate / 1000
	first := len("First sentence is here.") * 40 * SampleRate / 1000
	if len(h) != 2 || len(h[1].Audio) < first || len(h[1].Audio) >= full {
		t.Errorf("answer audio %d samples; want at least the first sentence (%d) and less than all (%d)", len(h[1].Audio), first, full)
	}
}

// failingAudio records the text and reports that the audio could not be saved.
type failingAudio struct{ memHistory }

func (h *failingAudio) AddTurns(ctx context.Context, ts ...TurnRecord) error {
	h.memHistory.AddTurns(ctx, ts...)
	return fmt.Errorf("%w: save /x/1.wav: no space left on device", ErrAudioNotSaved)
}

// TestAudioNotSavedIsReported: a History that could not save the audio is reported as an
// error event, and the loop goes on.
func TestAudioNotSavedIsReported(t *testing.T) {
	h := &failingAudio{}
	r := newRig(t, Options{RecordAudio: true}, fixed("Yes."), func(p *Parts) { p.History = h })
	for i := range 2 {
		if _, err := r.a.SubmitText("hello"); err != nil {
			t.Fatal(err)
		}
		ex := r.turnDone(t)
		if ex.Answer != "Yes." || ex.Err != nil {
			t.Fatalf("turn %d: %+v", i, ex)
		}
	}
	n := 0
	for _, e := range r.seen {
		if e.Kind == EvError {
			n++
			if !errors.Is(e.Err, ErrAudioNotSaved) || !strings.Contains(e.Err.Error(), "no space") || PartOf(e.Err) != PartHistory {
				t.Errorf("error event %v (part %q)", e.Err, PartOf(e.Err))
			}
		}
	}
	if n != 2 || len(h.all()) != 4 {
		t.Errorf("%d error events, %d records; want 2 and 4", n, len(h.all()))
	}
}
