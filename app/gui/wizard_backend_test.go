package gui

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/audio"
)

// slowSource delivers 50 ms of a tone per read, like a microphone.
type slowSource struct{ n int }

func (s *slowSource) Format() audio.Format { return audio.Mono16k }
func (s *slowSource) Read(ctx context.Context, p []float32) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	k := min(len(p), 800)
	for i := range k {
		p[i] = 0.1
	}
	s.n += k
	return k, nil
}

// TestRecordFrom: a take lasts until it is stopped (what was heard is kept, no error) or
// reaches its limit, and reports levels as it goes.
func TestRecordFrom(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var levels int
	src := &slowSource{}
	pcm, err := recordFrom(ctx, src, time.Second, func(db float64) {
		levels++
		if levels == 5 {
			cancel()
		}
	})
	if err != nil || len(pcm) != 5*800 || levels != 5 {
		t.Errorf("stopped take: %d samples, %d levels, %v", len(pcm), levels, err)
	}
	pcm, err = recordFrom(context.Background(), &slowSource{}, 500*time.Millisecond, nil)
	if err != nil || len(pcm) != 8000 {
		t.Errorf("a take at its limit: %d samples, %v", len(pcm), err)
	}
}

// TestWizardHostHoldsTheMicrophone: the window stops a hands-free assistant listening while
// the wizard records (push-to-talk, muted) and lets it listen again after; a push-to-talk
// assistant is left alone. When the wizard holds and releases it is app/gui/wizard's
// TestWizardHoldsTheMicrophone.
func TestWizardHostHoldsTheMicrophone(t *testing.T) {
	var mu sync.Mutex
	var modes []app.Mode // SetMode runs off the UI goroutine
	u, _ := newTestUI(t, Services{SetMode: func(m app.Mode) error { mu.Lock(); modes = append(modes, m); mu.Unlock(); return nil }})
	got := func() []app.Mode { mu.Lock(); defer mu.Unlock(); return append([]app.Mode(nil), modes...) }
	u.mode = app.HandsFree
	u.Attach(newFakeAssistant(), nil)
	h := wizardHost{u}
	if !h.HoldMic() {
		t.Fatal("a hands-free assistant was not held")
	}
	waitFor(t, u, "the assistant muted", func() bool { return len(got()) == 1 })
	if m := got(); !u.muted || m[0] != app.PushToTalk || !u.talk.mic.Disabled() {
		t.Errorf("while held: muted=%v, modes %v", u.muted, m)
	}
	h.ReleaseMic()
	waitFor(t, u, "the assistant listening again", func() bool { return len(got()) == 2 })
	if m := got(); u.muted || m[1] != app.HandsFree {
		t.Errorf("after release: muted=%v, modes %v", u.muted, m)
	}
	u.mode = app.PushToTalk
	if h.HoldMic() || u.muted || len(got()) != 2 {
		t.Errorf("push-to-talk: held, muted=%v, modes %v", u.muted, got())
	}
}
