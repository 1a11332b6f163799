package app

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// errReopening is a device error the device layer recovers from (device.LostError).
type errReopening struct{}

func (errReopening) Error() string   { return "input device lost; reopening" }
func (errReopening) Temporary() bool { return true }

// lossyMic fails once, like a resilient capture whose device was lost and reopened.
type lossyMic struct {
	mic
	failed atomic.Bool
	err    error
}

func (m *lossyMic) Read(ctx context.Context, p []float32) (int, error) {
	if m.failed.CompareAndSwap(false, true) {
		return 0, m.err
	}
	return m.mic.Read(ctx, p)
}

func TestMicrophoneLostAndBack(t *testing.T) {
	var lm *lossyMic
	r := newRig(t, Options{Mode: HandsFree}, fixed("Ten o'clock."), func(p *Parts) {
		lm = &lossyMic{mic: p.Ear.(mic), err: errReopening{}}
		p.Ear = lm
	})
	e := r.wait(t, "the loss reported", func(e Event) bool { return e.Kind == EvError })
	if !strings.Contains(e.Err.Error(), "microphone: ") || !strings.Contains(e.Err.Error(), "reopening") || PartOf(e.Err) != PartAudio {
		t.Errorf("error event %v (part %q)", e.Err, PartOf(e.Err))
	}
	// the device is back: the microphone carries on and a question is answered
	r.ears.texts = []string{"what time is it"}
	r.room.say(speech(time.Second, 0.05, 99))
	if ex := r.turnDone(t); ex.Answer != "Ten o'clock." {
		t.Fatalf("after the loss: %+v", ex)
	}
}

func TestMicrophoneGoneForGood(t *testing.T) {
	r := newRig(t, Options{Mode: HandsFree}, fixed("Ten o'clock."), func(p *Parts) {
		p.Ear = &lossyMic{mic: p.Ear.(mic), err: errors.New("device unplugged")}
	})
	e := r.wait(t, "the loss reported", func(e Event) bool { return e.Kind == EvError })
	if !strings.Contains(e.Err.Error(), "unplugged") || PartOf(e.Err) != PartAudio {
		t.Errorf("error event %v (part %q)", e.Err, PartOf(e.Err))
	}
	// a permanent error stops listening (and says so once); typed turns still work
	if _, err := r.a.SubmitText("what time is it"); err != nil {
		t.Fatal(err)
	}
	if ex := r.turnDone(t); ex.Answer != "Ten o'clock." {
		t.Fatalf("typed turn: %+v", ex)
	}
}
