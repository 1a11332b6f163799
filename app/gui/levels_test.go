package gui

import (
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"

	"github.com/parley-voice/parley/app/gui/kit"
)

// pumped counts the events that reach the UI goroutine through the real subscription pump.
func pumped(u *UI) (levels *int, all *int) {
	var l, a int
	u.OnEvent = func(e app.Event) {
		a++
		if e.Kind == app.EvLevel {
			l++
		}
	}
	return &l, &a
}

// settle sends a marker event after what was sent and waits until it arrives, so everything
// before it has been through the pump.
func settle(t *testing.T, u *UI, f *fakeAssistant, all *int) {
	t.Helper()
	before := *all
	f.ch <- app.Event{Kind: app.EvEchoRejected}
	waitFor(t, u, "the pump", func() bool { return *all > before })
}

// TestPushToTalkAtRestShowsNoLevels: in push-to-talk at rest the capture levels never reach
// the UI goroutine (no repaint for them) and the meter stays at zero; Talk shows them (after
// "Opening mic…" until the first one); on another panel they stop again.
func TestPushToTalkAtRestShowsNoLevels(t *testing.T) {
	u, _ := newTestUI(t, Services{Config: config.Default()})
	f := newFakeAssistant()
	u.Attach(f, nil)
	levels, all := pumped(u)
	for range 20 {
		f.ch <- app.Event{Kind: app.EvLevel, Level: -20}
	}
	f.ch <- app.Event{Kind: app.EvSpeechStart}
	settle(t, u, f, all)
	if *levels != 0 || u.talk.meter.Fraction() != 0 {
		t.Errorf("at rest: %d level events reached the UI, meter at %v", *levels, u.talk.meter.Fraction())
	}
	if u.talk.wave.recording || u.talk.vad.FillColor == kit.ThemeColor(colVADOn) {
		t.Error("speech heard in push-to-talk at rest shows as the user's")
	}

	test.Tap(u.talk.mic)
	u.Handle(app.Event{Kind: app.EvState, State: app.Listening})
	if got := u.talk.state.Text; got != "Opening mic…" {
		t.Errorf("Talk before the microphone delivers: status %q", got)
	}
	f.ch <- app.Event{Kind: app.EvLevel, Level: -30}
	settle(t, u, f, all)
	if *levels == 0 || u.talk.meter.Fraction() != 0.5 {
		t.Errorf("while talking: %d levels, meter %v, want 0.5", *levels, u.talk.meter.Fraction())
	}
	if got := u.talk.state.Text; got != "Listening…" {
		t.Errorf("status %q once the microphone delivers", got)
	}

	u.showTab(tabSettings) // Settings: the meter is not on screen
	if u.talk.meter.Fraction() != 0 {
		t.Error("the meter kept its level off screen")
	}
	n := *levels
	for range 10 {
		f.ch <- app.Event{Kind: app.EvLevel, Level: -10}
	}
	settle(t, u, f, all)
	if *levels != n {
		t.Errorf("%d levels reached the UI while another panel was shown", *levels-n)
	}
	u.showTab(tabConversation)
	f.ch <- app.Event{Kind: app.EvLevel, Level: -10}
	settle(t, u, f, all)
	if *levels != n+1 {
		t.Error("levels did not come back with the conversation")
	}
}

// TestMeterRepaintsOnlyOnChange: a level that does not move the bar by a step does not
// refresh it.
func TestMeterRepaintsOnlyOnChange(t *testing.T) {
	test.NewTempApp(t).Settings().SetTheme(newTheme())
	m := kit.NewLevelMeter()
	m.SetLevel(-30)
	f := m.Fraction()
	m.SetLevel(-30.4)
	if m.Fraction() != f {
		t.Errorf("-30.4 dBFS moved the meter from %v to %v", f, m.Fraction())
	}
	m.SetLevel(-25)
	if m.Fraction() == f {
		t.Error("-25 dBFS did not move the meter")
	}
}

// TestBubblesSurviveRebuild: a rebuilt assistant numbers its turns from 1 again; its answers
// get new bubbles and never overwrite the earlier ones.
func TestBubblesSurviveRebuild(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	exchange := func(f *fakeAssistant, q, a string) {
		tr := app.Transcript{Text: q}
		f.ch <- app.Event{Kind: app.EvTranscript, Turn: 1, Transcript: &tr}
		f.ch <- app.Event{Kind: app.EvDelta, Turn: 1, Text: a}
		f.ch <- app.Event{Kind: app.EvTurnDone, Turn: 1, Exchange: &app.Exchange{Turn: 1, Transcript: tr, Answer: a, FullAnswer: a}}
	}
	f1 := newFakeAssistant()
	u.Attach(f1, nil)
	exchange(f1, "two plus two", "That's 4.")
	waitFor(t, u, "the first answer", func() bool { return u.conv.count() == 2 })
	first := u.conv.parleyAt(1)

	u.Detach("Restarting…") // Settings → Save, or a mode switch
	f2 := newFakeAssistant()
	u.Attach(f2, nil)
	exchange(f2, "ten times three", "That's 30.")
	waitFor(t, u, "the second answer", func() bool { return u.conv.count() == 4 })
	if first.raw != "That's 4." {
		t.Errorf("the first answer now reads %q", first.raw)
	}
	var shown []string
	for _, m := range []map[turnKey]*bubble{u.conv.users, u.conv.parley} {
		for _, b := range m {
			shown = append(shown, b.raw)
		}
	}
	got := map[string]bool{}
	for _, s := range shown {
		got[s] = true
	}
	for _, w := range []string{"two plus two", "That's 4.", "ten times three", "That's 30."} {
		if !got[w] {
			t.Errorf("%q is not shown (bubbles: %q)", w, shown)
		}
	}
}

// TestNewConversation clears the view and asks the assistant to start over.
func TestNewConversation(t *testing.T) {
	asked := make(chan struct{}, 1)
	u, _ := newTestUI(t, Services{NewConversation: func() error { asked <- struct{}{}; return nil }})
	f := newFakeAssistant()
	u.Attach(f, nil)
	u.Handle(app.Event{Kind: app.EvDelta, Turn: 1, Text: "Hello."})
	test.Tap(u.newConv)
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the assistant was not asked to start a new conversation")
	}
	if u.conv.count() != 0 || u.conv.empty.Visible() == false {
		t.Errorf("%d bubbles after New conversation, empty state shown %v", u.conv.count(), u.conv.empty.Visible())
	}
	u.Handle(app.Event{Kind: app.EvDelta, Turn: 2, Text: "Fresh."})
	if u.conv.count() != 1 {
		t.Errorf("%d bubbles, want the new answer's", u.conv.count())
	}
}

// TestLiveTranscript: partial transcripts show in a provisional bubble while the user
// speaks; the final transcript takes its place; a dropped utterance takes it away.
func TestLiveTranscript(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	u.Attach(newFakeAssistant(), nil)
	u.Handle(app.Event{Kind: app.EvState, State: app.Listening})
	u.Handle(app.Event{Kind: app.EvPartial, Text: "what time"})
	u.Handle(app.Event{Kind: app.EvPartial, Text: "what time is it"})
	if u.conv.count() != 1 || u.conv.live == nil || u.conv.live.raw != "what time is it …" {
		t.Fatalf("%d bubbles, live %v", u.conv.count(), u.conv.live)
	}
	tr := app.Transcript{Text: "What time is it?"}
	u.Handle(app.Event{Kind: app.EvTranscript, Turn: 1, Transcript: &tr})
	if u.conv.count() != 1 || u.conv.live != nil || u.conv.userAt(1).raw != "What time is it?" {
		t.Errorf("after the transcript: %d bubbles, live %v", u.conv.count(), u.conv.live)
	}
	u.Handle(app.Event{Kind: app.EvState, State: app.Listening})
	u.Handle(app.Event{Kind: app.EvPartial, Text: "never mind"})
	u.Handle(app.Event{Kind: app.EvState, State: app.Idle}) // cancelled
	if u.conv.count() != 1 || u.conv.live != nil {
		t.Errorf("a dropped utterance left %d bubbles", u.conv.count())
	}
}

// TestWaveformShowsWhatTheRecogniserHears: the "what you say" waveform records a
// push-to-talk utterance from Talk to Done, and hands-free speech while Parley listens; not
// speech heard in push-to-talk at rest, nor anything while Parley speaks (its own voice, a
// preview), when levels do not reach it at all.
func TestWaveformShowsWhatTheRecogniserHears(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	f := newFakeAssistant()
	u.Attach(f, nil)
	feed := func(n int) {
		for range n {
			u.Handle(app.Event{Kind: app.EvLevel, Level: -20})
		}
	}
	// push-to-talk at rest: speech is not the user's turn
	u.Handle(app.Event{Kind: app.EvSpeechStart})
	feed(5)
	u.Handle(app.Event{Kind: app.EvSpeechEnd})
	if n := len(u.talk.wave.levels); n != 0 || u.talk.wave.recording {
		t.Errorf("push-to-talk at rest: %d levels in the waveform", n)
	}
	// Talk … Done: the whole utterance, speech start or not
	u.beginTalk()
	u.Handle(app.Event{Kind: app.EvState, State: app.Listening})
	feed(3)
	u.Handle(app.Event{Kind: app.EvSpeechStart})
	feed(4)
	u.endTalk()
	u.Handle(app.Event{Kind: app.EvState, State: app.Transcribing})
	feed(2)
	if n := len(u.talk.wave.levels); n != 7 {
		t.Errorf("push-to-talk utterance: %d levels, want the 7 between Talk and Done", n)
	}
	// Parley speaking: no levels reach the waveform
	u.Handle(app.Event{Kind: app.EvState, State: app.Speaking})
	u.Handle(app.Event{Kind: app.EvSpeechStart})
	feed(4)
	if n := len(u.talk.wave.levels); n != 7 || u.talk.wave.recording {
		t.Errorf("while Parley speaks the waveform took %d levels", n-7)
	}
	// hands-free, listening: the utterance from speech start to end
	u.mode = app.HandsFree
	u.Handle(app.Event{Kind: app.EvState, State: app.Listening})
	feed(2) // room noise before the utterance
	u.Handle(app.Event{Kind: app.EvSpeechStart})
	feed(5)
	u.Handle(app.Event{Kind: app.EvSpeechEnd})
	feed(3)
	if n := len(u.talk.wave.levels); n != 5 {
		t.Errorf("hands-free utterance: %d levels, want its 5", n)
	}
}
