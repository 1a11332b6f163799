package gui

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/store"
)

// TestWindowFitsNarrowScreens: every panel fits a window about 700 px wide (it needed 1003).
func TestWindowFitsNarrowScreens(t *testing.T) {
	u, _ := newTestUI(t, Services{Config: config.Default(), Voices: &fakeVoices{}})
	if w := u.Content().MinSize().Width; w > 700 {
		for _, it := range u.tabs.Items {
			t.Logf("%s needs %.0f px", it.Text, it.Content.MinSize().Width)
		}
		t.Errorf("the window needs %.0f px, want ≤ 700", w)
	}
}

// TestStatusKeepsItsWidth: the level meter does not move when the status text changes.
func TestStatusKeepsItsWidth(t *testing.T) {
	u, w := newTestUI(t, Services{})
	u.Attach(newFakeAssistant(), nil)
	pos := func() float32 {
		w.Content().Refresh()
		return fyne.CurrentApp().Driver().AbsolutePositionForObject(u.talk.meter).X
	}
	x := pos()
	for _, s := range append(statusTexts(), "Switching to wake word…", "Speaking…") {
		u.talk.state.SetText(s)
		if got := pos(); got != x {
			t.Errorf("status %q moved the meter from x=%.0f to %.0f", s, x, got)
		}
	}
}

// TestStartingIsShown: until the assistant is attached the status says so, and Talk waits.
func TestStartingIsShown(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	if u.talk.state.Text != "Starting…" || !u.talk.mic.Disabled() {
		t.Errorf("before the assistant: status %q, Talk disabled %v", u.talk.state.Text, u.talk.mic.Disabled())
	}
	u.Attach(newFakeAssistant(), nil)
	if u.talk.state.Text != "Ready" || u.talk.mic.Disabled() {
		t.Errorf("attached: status %q, Talk disabled %v", u.talk.state.Text, u.talk.mic.Disabled())
	}
}

// TestTextOnlyHint: a text-only assistant does not tell people to hold the space bar.
func TestTextOnlyHint(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	u.textOnly = true
	u.Attach(newFakeAssistant(), nil)
	if strings.Contains(strings.ToLower(u.conv.hint.Text), "space bar") {
		t.Errorf("text-only hint: %q", u.conv.hint.Text)
	}
	if !u.talk.mic.Disabled() {
		t.Error("Talk is enabled without a microphone")
	}
	u.textOnly = false
	u.Attach(newFakeAssistant(), nil)
	if !strings.Contains(u.conv.hint.Text, "space bar") {
		t.Errorf("voice hint: %q", u.conv.hint.Text)
	}
}

// TestSettingsFieldsAligned: the fields of every Settings section start at one x.
func TestSettingsFieldsAligned(t *testing.T) {
	u, w := newTestUI(t, Services{Config: config.Default()})
	u.showTab(tabSettings)
	w.Content().Refresh()
	d := fyne.CurrentApp().Driver()
	x := float32(-1)
	for i, sec := range u.settings.sections {
		for j := 1; j < len(sec.Objects); j += 2 {
			got := d.AbsolutePositionForObject(sec.Objects[j]).X
			if x < 0 {
				x = got
			} else if got != x {
				t.Errorf("section %d, field %d starts at x=%.0f, the first at %.0f", i, j/2, got, x)
			}
		}
	}
}

type countingHistory struct{ fakeHistory }

func (h *countingHistory) Conversations(context.Context, int) ([]store.Conversation, error) {
	return []store.Conversation{{ID: 7, Title: "Kitchen timer", Turns: 4, Exchanges: 2}}, nil
}

// TestHistoryCountsExchanges: two questions and their answers are "2 exchanges", and the
// reading pane says what to do before a conversation is picked.
func TestHistoryCountsExchanges(t *testing.T) {
	u, _ := newTestUI(t, Services{History: &countingHistory{}})
	p := u.history
	p.refresh()
	waitFor(t, u, "the list", func() bool { return len(p.results.Objects) == 1 })
	if got := buttonText(p.results.Objects[0]); !strings.Contains(got, "2 exchanges") || strings.Contains(got, "turns") {
		t.Errorf("list entry %q, want 2 exchanges", got)
	}
	if pane := strings.Join(texts(p.view), " "); !strings.Contains(pane, "Pick a conversation") {
		t.Errorf("reading pane before a pick: %q", pane)
	}
}

func buttonText(o fyne.CanvasObject) string {
	if b, ok := o.(*widget.Button); ok {
		return b.Text
	}
	return ""
}

// TestLogFolderAndDiagnostics: Settings opens the log folder and copies doctor's report.
func TestLogFolderAndDiagnostics(t *testing.T) {
	dir := t.TempDir()
	report := `{"version":"dev","problems":[]}`
	u, _ := newTestUI(t, Services{Config: config.Default(), LogDir: dir,
		Diagnostics: func(context.Context) ([]byte, error) { return []byte(report), nil }})
	var opened *url.URL
	u.openURL = func(l *url.URL) error { opened = l; return nil }
	var clip string
	u.clipboard = func(s string) { clip = s }
	test.Tap(u.settings.logs)
	if opened == nil || opened.Scheme != "file" || opened.Path != dir {
		t.Errorf("Open log folder opened %v, want file://%s", opened, dir)
	}
	test.Tap(u.settings.diag)
	waitFor(t, u, "the diagnostics", func() bool { return clip != "" })
	if clip != report || !strings.Contains(u.settings.status.Text, "copied") {
		t.Errorf("clipboard %q, status %q", clip, u.settings.status.Text)
	}
	u.svc.Diagnostics = func(context.Context) ([]byte, error) { return nil, errors.New("no ORT") }
	test.Tap(u.settings.diag)
	waitFor(t, u, "the failure", func() bool { return strings.Contains(u.settings.status.Text, "no ORT") })
}

// TestSettingsSetUpGPU: Settings → Set up GPU runs doctor --gpu's set-up, shows what it is
// fetching on the status line and its report under the button; a GPU that cannot run yet says
// so, and a failed set-up names the error.
func TestSettingsSetUpGPU(t *testing.T) {
	report := "ONNX Runtime 1.29.0 with its CUDA provider: installed in /x\nInstall them: sudo apt install libcudnn9-cuda-13"
	release := make(chan struct{})
	u, _ := newTestUI(t, Services{Config: config.Default(),
		SetUpGPU: func(ctx context.Context, progress func(string, int64, int64)) (string, error) {
			progress("libonnxruntime_providers_cuda.so", 100e6, 229e6)
			<-release
			return report, errors.New("GPU inference needs 1 more NVIDIA library")
		}})
	test.Tap(u.settings.gpuBtn)
	waitFor(t, u, "the progress", func() bool { return strings.Contains(u.settings.status.Text, "100 MB of 229 MB") })
	if !u.settings.gpuBtn.Disabled() {
		t.Error("the button stays enabled while the set-up runs")
	}
	close(release)
	waitFor(t, u, "the report", func() bool { return strings.Contains(u.settings.gpuReport.Text, "sudo apt install libcudnn9-cuda-13") })
	if !strings.Contains(u.settings.status.Text, "cannot run yet") || u.settings.gpuBtn.Disabled() {
		t.Errorf("status %q, button disabled %v", u.settings.status.Text, u.settings.gpuBtn.Disabled())
	}
	u.svc.SetUpGPU = func(context.Context, func(string, int64, int64)) (string, error) {
		return "", errors.New("npm registry unreachable")
	}
	test.Tap(u.settings.gpuBtn)
	waitFor(t, u, "the failure", func() bool { return strings.Contains(u.settings.status.Text, "npm registry unreachable") })
}

// TestBubbleTimeCopyReplay: bubbles show when they were said, copy their text, and offer
// replay of the turn's kept audio.
func TestBubbleTimeCopyReplay(t *testing.T) {
	fv := &fakeVoices{}
	dir := t.TempDir()
	wav := writeTestWAV(t, dir)
	u, _ := newTestUI(t, Services{Voices: fv, TurnAudio: func(turn int64) (string, string) { return wav, "" }})
	var clip string
	u.clipboard = func(s string) { clip = s }
	u.Attach(newFakeAssistant(), nil)
	tr := app.Transcript{Text: "what time is it"}
	u.Handle(app.Event{Kind: app.EvTranscript, Turn: 1, Transcript: &tr})
	u.Handle(app.Event{Kind: app.EvDelta, Turn: 1, Text: "It's noon."})
	u.Handle(app.Event{Kind: app.EvTurnDone, Turn: 1, Exchange: &app.Exchange{Turn: 1, Transcript: tr, Answer: "It's noon.", FullAnswer: "It's noon."}})
	user, parley := u.conv.userAt(1), u.conv.parleyAt(1)
	if want := time.Now().Format("15:04"); user.at.Text != want && user.at.Text == "" {
		t.Errorf("user bubble time %q", user.at.Text)
	}
	test.Tap(parley.copyB)
	if clip != "It's noon." {
		t.Errorf("copied %q", clip)
	}
	if !user.replayB.Visible() || parley.replayB.Visible() {
		t.Fatalf("replay shown: user %v, Parley %v (only the user's audio was kept)", user.replayB.Visible(), parley.replayB.Visible())
	}
	test.Tap(user.replayB)
	waitFor(t, u, "the replay", func() bool { _, plays := fv.counts(); return plays == 1 })
}

func writeTestWAV(t *testing.T, dir string) string {
	t.Helper()
	p := dir + "/turn.wav"
	b := &audio.Buffer{Format: audio.Format{SampleRate: 16000, Channels: 1}, Data: make([]float32, 1600)}
	if err := audio.WriteWAVFile(p, b, audio.S16); err != nil {
		t.Fatal(err)
	}
	return p
}
