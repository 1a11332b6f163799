package gui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/lang"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"

	"github.com/parley-voice/parley/app/gui/kit"
)

// fakeAssistant is a scripted assistant: the test pushes events into its stream and reads
// what the UI asked of it.
type fakeAssistant struct {
	ch      chan app.Event
	mu      sync.Mutex
	texts   []string
	starts  int
	stops   int
	cancels int
	turn    int64
}

func newFakeAssistant() *fakeAssistant { return &fakeAssistant{ch: make(chan app.Event, 1024)} }

func (f *fakeAssistant) Subscribe(int) (<-chan app.Event, func()) { return f.ch, func() {} }
func (f *fakeAssistant) SubmitText(s string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.texts = append(f.texts, s)
	f.turn++
	return f.turn, nil
}
func (f *fakeAssistant) StartListening() error { f.mu.Lock(); f.starts++; f.mu.Unlock(); return nil }
func (f *fakeAssistant) StopListening() error  { f.mu.Lock(); f.stops++; f.mu.Unlock(); return nil }
func (f *fakeAssistant) Cancel() error         { f.mu.Lock(); f.cancels++; f.mu.Unlock(); return nil }

func (f *fakeAssistant) counts() (starts, stops, cancels int, texts []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts, f.stops, f.cancels, append([]string(nil), f.texts...)
}

// queues holds each test UI's callback queue (see UI.do).
var queues sync.Map // *UI → chan func()

// drain runs the UI callbacks queued by background goroutines, on the test goroutine, so the
// UI stays single-threaded as it is under the real driver.
func drain(u *UI) {
	q, ok := queues.Load(u)
	if !ok {
		return
	}
	for {
		select {
		case fn := <-q.(chan func()):
			fn()
		default:
			return
		}
	}
}

// waitFor runs queued UI callbacks until cond holds; the bound only keeps a broken UI from
// hanging the test.
func waitFor(t *testing.T, u *UI, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		drain(u)
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func newTestUI(t testing.TB, svc Services) (*UI, fyne.Window) {
	t.Helper()
	a := test.NewTempApp(t)
	a.Settings().SetTheme(newTheme())
	w := a.NewWindow("Parley")
	u := New(a, w, svc)
	q := make(chan func(), 1<<16)
	u.do = func(fn func()) { q <- fn }
	queues.Store(u, q)
	t.Cleanup(func() { queues.Delete(u) })
	w.SetContent(u.Content())
	w.Resize(fyne.NewSize(1000, 700))
	return u, w
}

func TestMicTapStartsAndStopsListening(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	f := newFakeAssistant()
	u.Attach(f, nil)
	test.Tap(u.talk.mic)
	waitFor(t, u, "StartListening", func() bool { s, _, _, _ := f.counts(); return s == 1 })
	if u.talk.mic.Text != "Done" {
		t.Errorf("mic button while listening says %q, want Done", u.talk.mic.Text)
	}
	test.Tap(u.talk.mic)
	waitFor(t, u, "StopListening", func() bool { _, s, _, _ := f.counts(); return s == 1 })
	if u.talk.mic.Text != "Talk" {
		t.Errorf("mic button after listening says %q, want Talk", u.talk.mic.Text)
	}
	// Stop interrupts Parley while it speaks.
	u.Handle(app.Event{Kind: app.EvState, State: app.Speaking})
	if u.talk.stop.Disabled() {
		t.Fatal("stop is disabled while Parley speaks")
	}
	test.Tap(u.talk.stop)
	waitFor(t, u, "Cancel", func() bool { _, _, c, _ := f.counts(); return c == 1 })
}

func TestTypedMessageStreamsBubbles(t *testing.T) {
	u, w := newTestUI(t, Services{})
	f := newFakeAssistant()
	u.Attach(f, nil)
	test.Type(u.talk.entry, "what time is it")
	u.talk.entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	waitFor(t, u, "SubmitText", func() bool { _, _, _, tx := f.counts(); return len(tx) == 1 })
	if _, _, _, tx := f.counts(); tx[0] != "what time is it" {
		t.Fatalf("submitted %q", tx[0])
	}
	if u.talk.entry.Text != "" {
		t.Errorf("the text box kept %q after sending", u.talk.entry.Text)
	}

	// The scripted stream goes through the real subscription pump.
	t0 := time.Now()
	tr := app.Transcript{Text: "what time is it", Lang: "en", Emotion: "HAPPY", Event: "Laughter"}
	f.ch <- app.Event{Kind: app.EvState, State: app.Thinking}
	f.ch <- app.Event{Kind: app.EvTranscript, Turn: 1, Transcript: &tr}
	f.ch <- app.Event{Kind: app.EvDelta, Turn: 1, Text: "It's "}
	waitFor(t, u, "the first delta", func() bool { b := u.conv.parleyAt(1); return b != nil && b.raw == "It's " })
	if got := u.talk.state.Text; got != "Thinking…" {
		t.Errorf("state shows %q, want Thinking…", got)
	}
	user := u.conv.userAt(1)
	if user == nil {
		t.Fatal("no user bubble")
	}
	var badges []string
	for _, o := range user.badges.Objects {
		badges = append(badges, texts(o)...)
	}
	if want := []string{"English", "☺ happy", "laughter"}; strings.Join(badges, "|") != strings.Join(want, "|") {
		t.Errorf("badges %q, want %q", badges, want)
	}
	f.ch <- app.Event{Kind: app.EvDelta, Turn: 1, Text: "7:05 "}
	f.ch <- app.Event{Kind: app.EvDelta, Turn: 1, Text: "AM."}
	ex := &app.Exchange{Turn: 1, Transcript: tr, Answer: "It's 7:05 AM.", FullAnswer: "It's 7:05 AM.", Start: t0,
		Latency: app.Latency{SpeechEnd: t0, Transcript: t0.Add(120 * time.Millisecond), FirstToken: t0.Add(400 * time.Millisecond), FirstAudio: t0.Add(650 * time.Millisecond)}}
	f.ch <- app.Event{Kind: app.EvTurnDone, Turn: 1, Exchange: ex}
	waitFor(t, u, "the turn's latency bar", func() bool { return u.conv.parleyAt(1).latency.Visible() })
	b := u.conv.parleyAt(1)
	if b.raw != "It's 7:05 AM." {
		t.Errorf("Parley's bubble shows %q", b.raw)
	}
	if u.conv.count() != 2 {
		t.Errorf("%d bubbles, want 2", u.conv.count())
	}
	cap := strings.Join(texts(b.latency), " ")
	for _, want := range []string{"transcribe 120 ms", "think 280 ms", "first audio 250 ms"} {
		if !strings.Contains(cap, want) {
			t.Errorf("latency caption %q lacks %q", cap, want)
		}
	}
	if b.marks.Visible() {
		t.Error("an answer that was not cut off is marked")
	}
	if img := w.Canvas().Capture(); img.Bounds().Empty() {
		t.Error("the window does not render")
	}
}

func TestInterruptedAnswerIsMarked(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	u.Attach(newFakeAssistant(), nil)
	u.Handle(app.Event{Kind: app.EvDelta, Turn: 3, Text: "Once upon a time there was a very long story"})
	u.Handle(app.Event{Kind: app.EvBargeIn, Turn: 3})
	u.Handle(app.Event{Kind: app.EvTurnDone, Turn: 3, Exchange: &app.Exchange{Turn: 3, Answer: "Once upon a time",
		FullAnswer: "Once upon a time there was a very long story", Interrupted: true}})
	b := u.conv.parleyAt(3)
	if b.raw != "Once upon a time" {
		t.Errorf("interrupted bubble shows %q, want only what was spoken", b.raw)
	}
	if !b.marks.Visible() || !strings.Contains(strings.ToLower(strings.Join(texts(b.marks), " ")), "interrupted") {
		t.Error("no interrupted mark")
	}
}

func TestLevelsVADAndWaveform(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	u.Attach(newFakeAssistant(), nil)
	u.Handle(app.Event{Kind: app.EvState, State: app.Listening})
	u.Handle(app.Event{Kind: app.EvSpeechStart})
	for _, db := range []float64{-50, -20, -10, -30} {
		u.Handle(app.Event{Kind: app.EvLevel, Level: db})
	}
	if got := u.talk.meter.Fraction(); got != 0.5 {
		t.Errorf("meter at -30 dBFS shows %v, want 0.5", got)
	}
	if u.talk.vad.FillColor != kit.ThemeColor(colVADOn) {
		t.Error("VAD light is off during speech")
	}
	u.Handle(app.Event{Kind: app.EvSpeechEnd})
	u.Handle(app.Event{Kind: app.EvLevel, Level: -60}) // after the utterance: not in its waveform
	if n := len(u.talk.wave.levels); n != 4 {
		t.Errorf("waveform holds %d levels, want the utterance's 4", n)
	}
	if u.talk.vad.FillColor == kit.ThemeColor(colVADOn) {
		t.Error("VAD light still on after speech end")
	}
}

func TestNotesOfferTheFix(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	u.Attach(newFakeAssistant(), []app.Note{demoASRNote(), skillsNote(t)})
	if n := len(u.banners.Objects); n != 2 {
		t.Fatalf("%d banners, want 2", n)
	}
	var buttons []*widget.Button
	collect(u.banners, func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok && b.Text != "" {
			buttons = append(buttons, b)
		}
	})
	if len(buttons) != 2 || buttons[0].Text != "Get models" || buttons[1].Text != "LLM settings" {
		t.Fatalf("fix buttons %v", buttons)
	}
	test.Tap(buttons[0])
	if u.tabs.Selected().Text != "Models" {
		t.Errorf("Get models opened %q", u.tabs.Selected().Text)
	}
	test.Tap(buttons[1])
	if u.tabs.Selected().Text != "Settings" {
		t.Errorf("LLM settings opened %q", u.tabs.Selected().Text)
	}
	// a dead LLM mid-conversation: the error is shown on the turn and as a banner with the fix
	down := fmt.Errorf("%w: 127.0.0.1:11434: dial tcp: connect: %w", llm.ErrUnreachable, syscall.ECONNREFUSED)
	u.Handle(app.Event{Kind: app.EvError, Turn: 1, Err: &app.StageError{Stage: "think", Part: app.PartBrain, Err: down}})
	if b := u.conv.parleyAt(1); b == nil || !strings.Contains(strings.Join(texts(b.marks), " "), "not answering") {
		t.Error("the dead LLM is not explained on the turn")
	}
}

func TestSeedDiceAndLock(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	p := u.voice
	seeds := []int64{42, 77, 99}
	p.rnd = func() int64 { s := seeds[0]; seeds = seeds[1:]; return s }
	test.Tap(p.dice)
	if r := p.Request(); !r.HasSeed || r.Seed != 42 {
		t.Fatalf("after the dice: seed %v (set %v), want 42", r.Seed, r.HasSeed)
	}
	test.Tap(p.dice)
	if r := p.Request(); r.Seed != 77 {
		t.Fatalf("second roll: %d, want 77", r.Seed)
	}
	test.Tap(p.lock)
	if !p.dice.Disabled() || !p.seed.Disabled() {
		t.Error("lock leaves the dice or the seed editable")
	}
	p.roll() // a roll that reaches a locked seed changes nothing
	if r := p.Request(); r.Seed != 77 {
		t.Errorf("locked seed changed to %d", r.Seed)
	}
	test.Tap(p.lock)
	test.Tap(p.dice)
	if r := p.Request(); r.Seed != 99 {
		t.Errorf("unlocked roll: %d, want 99", r.Seed)
	}
	p.seed.SetText("")
	if r := p.Request(); r.HasSeed {
		t.Error("an empty seed field still sends a seed")
	}
}

// The dice goes through the engine's suggested seeds first (each once, in a random order),
// then rolls any seed; another engine's report starts its own suggestions.
func TestSeedDiceRollsSuggestedSeedsFirst(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	p := u.voice
	draws := []int64{4, 4, 7, 1234, 5678}
	p.rnd = func() int64 { s := draws[0]; draws = draws[1:]; return s }
	p.setCaps(tts.Capabilities{Engine: "chattts", SuggestedSeeds: []int64{113, 150, 269}})
	var got []int64
	for range 4 {
		test.Tap(p.dice)
		got = append(got, p.Request().Seed)
	}
	// 4 % 3 = 1 → 150; 4 % 2 = 0 → 113; 7 % 1 → 269; then rnd's own value
	if want := []int64{150, 113, 269, 1234}; !slices.Equal(got, want) {
		t.Fatalf("rolls %v, want %v", got, want)
	}
	p.setCaps(tts.Capabilities{Engine: "chattts", SuggestedSeeds: []int64{113, 150, 269}})
	test.Tap(p.dice) // the same engine's report again does not start over
	if s := p.Request().Seed; s != 5678 {
		t.Errorf("roll after the same report: %d, want 5678", s)
	}
	p.setCaps(tts.Capabilities{Engine: "kokoro", SuggestedSeeds: []int64{9}})
	draws = []int64{3}
	test.Tap(p.dice)
	if s := p.Request().Seed; s != 9 {
		t.Errorf("another engine's suggestion: %d, want 9", s)
	}
	// another model of the same engine brings its own; the seed in the field is not rolled again
	p.setCaps(tts.Capabilities{Engine: "kokoro", Model: "other", SuggestedSeeds: []int64{9, 12}})
	draws = []int64{0}
	test.Tap(p.dice)
	if s := p.Request().Seed; s != 12 {
		t.Errorf("roll with the current seed among the suggestions: %d, want 12", s)
	}
}

func TestSlidersChangeTheRequest(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	p := u.voice
	tests := []struct {
		name   string
		slider *widget.Slider
		value  float64
		get    func(tts.Request) float64
	}{
		{"temperature", p.temp, 0.8, func(r tts.Request) float64 { return r.Temperature }},
		{"top-p", p.topP, 0.45, func(r tts.Request) float64 { return r.TopP }},
		{"top-k", p.topK, 35, func(r tts.Request) float64 { return float64(r.TopK) }},
		{"speed", p.speed, 1.25, func(r tts.Request) float64 { return r.Speed }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.get(p.Request())
			tc.slider.SetValue(tc.value)
			if got := tc.get(p.Request()); got != tc.value || got == before {
				t.Errorf("request %s = %v after setting %v (was %v)", tc.name, got, tc.value, before)
			}
		})
	}
	var played []tts.Request
	p.OnPlay = func(r tts.Request) { played = append(played, r) }
	test.Tap(p.preview)
	if len(played) != 1 || played[0].Temperature != 0.8 || played[0].TopK != 35 || played[0].Speed != 1.25 {
		t.Errorf("Preview sent %+v", played)
	}
}

func TestTokenButtonsInsertAtCursor(t *testing.T) {
	u, w := newTestUI(t, Services{})
	p := u.voice
	tests := []struct {
		token  string
		breakN string
		text   string
		row    int
		col    int
		want   string
	}{
		{"[laugh]", "", "Hello world", 0, 5, "Hello[laugh] world"},
		{"[uv_break]", "", "Hello world", 0, 0, "[uv_break]Hello world"},
		{"[lbreak]", "", "one\ntwo", 1, 3, "one\ntwo[lbreak]"},
		{"[break_N]", "2", "a b", 0, 1, "a[break_2] b"},
	}
	for _, tc := range tests {
		t.Run(tc.token, func(t *testing.T) {
			w.Canvas().Focus(p.text)
			p.text.SetText(tc.text)
			p.text.CursorRow, p.text.CursorColumn = tc.row, tc.col
			p.text.Refresh()
			if tc.breakN != "" {
				p.breakN.SetSelected(tc.breakN)
			}
			test.Tap(p.tokens[tc.token])
			if p.text.Text != tc.want {
				t.Errorf("after %s: %q, want %q", tc.token, p.text.Text, tc.want)
			}
		})
	}
}

// fakeModels serves one missing model whose download reports half its bytes and then waits
// to be cancelled.
type fakeModels struct {
	mu        sync.Mutex
	pulled    chan struct{}
	partial   bool
	completes bool // Pull installs the model instead of waiting to be cancelled
	installed bool
}

func (f *fakeModels) status() assets.ModelStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := assets.ModelStatus{ID: "sensevoice-small-int8", Kind: "asr", Description: "SenseVoice-Small (int8)", State: assets.StateMissing, Total: 100,
		Downloadable: true}
	if f.partial {
		st.State, st.Bytes = assets.StatePartial, 50
	}
	if f.installed {
		st.State, st.Bytes = assets.StateInstalled, 100
	}
	return st
}

func (f *fakeModels) List(context.Context) ([]assets.ModelStatus, error) {
	return []assets.ModelStatus{f.status()}, nil
}

func (f *fakeModels) Pull(ctx context.Context, id string, progress func(assets.Event)) error {
	progress(assets.Event{Model: id, File: "model.int8.onnx", Phase: "download", Done: 50, Total: 100, Rate: 25})
	f.mu.Lock()
	f.partial = true
	done := f.completes
	f.installed = done
	f.mu.Unlock()
	close(f.pulled)
	if done {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (f *fakeModels) Verify(context.Context, string) (assets.ModelStatus, error) {
	return f.status(), nil
}
func (f *fakeModels) Remove(context.Context, string) error { return nil }

func TestDownloadProgressCancelResume(t *testing.T) {
	fm := &fakeModels{pulled: make(chan struct{})}
	u, _ := newTestUI(t, Services{Models: fm})
	p := u.models
	p.refresh()
	waitFor(t, u, "the model list", func() bool { return p.rows["sensevoice-small-int8"] != nil })
	r := p.rows["sensevoice-small-int8"]
	if r.get.Text != "Download" || !r.get.Visible() {
		t.Fatalf("missing model offers %q (visible %v)", r.get.Text, r.get.Visible())
	}
	test.Tap(r.get)
	waitFor(t, u, "the download", func() bool {
		select {
		case <-fm.pulled:
			return true
		default:
			return false
		}
	})
	waitFor(t, u, "progress", func() bool { return r.progress.Value == 0.5 })
	if !r.progress.Visible() || !r.cancel.Visible() || r.get.Visible() {
		t.Error("during a download the bar and Cancel should show, Download not")
	}
	if !strings.Contains(r.detail.Text, "50 B of 100 B") {
		t.Errorf("progress text %q", r.detail.Text)
	}
	test.Tap(r.cancel)
	waitFor(t, u, "the paused state", func() bool { return r.get.Visible() })
	if r.get.Text != "Resume" {
		t.Errorf("after cancel the button says %q, want Resume", r.get.Text)
	}
	if !strings.Contains(r.state.Text, "partial") {
		t.Errorf("state %q", r.state.Text)
	}
}

func TestSettingsSave(t *testing.T) {
	cfg := config.Default()
	var saved *config.Config
	u, _ := newTestUI(t, Services{Config: cfg, SaveConfig: func(c *config.Config) error { saved = c; return nil }})
	s := u.settings
	s.language.SetSelected("ja")
	s.bargeIn.SetSelected("off")
	s.url.SetText("http://127.0.0.1:8080")
	s.retention.SetText("30")
	s.Save()
	waitFor(t, u, "save", func() bool { return strings.HasPrefix(s.status.Text, "Saved") })
	if saved == nil || saved.Assistant.Language != "ja" || saved.Assistant.BargeIn != "off" || saved.LLM.URL != "http://127.0.0.1:8080" || saved.Store.RetentionDays != 30 {
		t.Fatalf("saved %+v", saved)
	}
	s.retention.SetText("forever")
	saved = nil
	s.Save()
	if saved != nil || !strings.Contains(s.status.Text, "retention") {
		t.Errorf("a bad retention was saved (status %q)", s.status.Text)
	}
}

type fakeHistory struct{ deleted []int64 }

func (h *fakeHistory) Conversations(context.Context, int) ([]store.Conversation, error) {
	return []store.Conversation{{ID: 7, Title: "Kitchen timer", Turns: 2}}, nil
}
func (h *fakeHistory) Search(_ context.Context, q string, _ int) ([]store.Hit, error) {
	return []store.Hit{{ConversationID: 7, Title: "Kitchen timer", Role: store.RoleUser, Snippet: "set a timer for pasta", Highlights: [][2]int{{6, 11}}}}, nil
}
func (h *fakeHistory) Turns(context.Context, int64) ([]store.Turn, error) {
	return []store.Turn{{Role: store.RoleUser, Text: "set a timer for pasta", Language: "en"}, {Role: store.RoleAssistant, Text: "Timer set for 9 minutes."}}, nil
}
func (h *fakeHistory) Export(_ context.Context, w io.Writer, id int64, _ store.Format) error {
	_, err := io.WriteString(w, "# Kitchen timer\n")
	return err
}
func (h *fakeHistory) Delete(_ context.Context, id int64) error {
	h.deleted = append(h.deleted, id)
	return nil
}

func TestHistorySearchAndOpen(t *testing.T) {
	h := &fakeHistory{}
	u, _ := newTestUI(t, Services{History: h})
	p := u.history
	p.search.SetText("timer")
	p.refresh()
	waitFor(t, u, "hits", func() bool { return len(p.results.Objects) == 1 })
	hit := p.results.Objects[0].(*widget.Button)
	if !strings.Contains(hit.Text, "«timer»") {
		t.Errorf("hit %q does not highlight the match", hit.Text)
	}
	test.Tap(hit)
	waitFor(t, u, "the conversation", func() bool { return len(p.view.Objects) == 1 })
	if p.title.Text != "Kitchen timer" || p.export.Disabled() || p.del.Disabled() {
		t.Errorf("opened %q, export disabled %v", p.title.Text, p.export.Disabled())
	}
}

type fakeVoices struct {
	mu     sync.Mutex
	saved  []*voices.Voice
	synths []tts.Request
	plays  int
	caps   map[string]tts.Capabilities
	broken map[string]error // engines that cannot open
}

func (f *fakeVoices) List() ([]*voices.Voice, error) {
	s := int64(1234)
	v := voices.New("warm", "espeak", voices.KindSeed)
	v.Seed = &s
	v.Defaults.Speed = 0.9
	return []*voices.Voice{v}, nil
}
func (f *fakeVoices) Save(v *voices.Voice) error { f.saved = append(f.saved, v); return nil }
func (f *fakeVoices) Engines() []string          { return []string{"auto", "espeak", "kokoro", "chattts"} }
func (f *fakeVoices) Capabilities(engine string) (tts.Capabilities, error) {
	if err := f.broken[engine]; err != nil {
		return tts.Capabilities{}, err
	}
	if c, ok := f.caps[engine]; ok {
		return c, nil
	}
	return tts.Capabilities{Engine: "espeak", Controls: map[tts.Control]tts.Support{tts.CtlSeed: tts.Emulated, tts.CtlSpeed: tts.Native}}, nil
}
func (f *fakeVoices) Synthesize(_ context.Context, _ string, r tts.Request) (*audio.Buffer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synths = append(f.synths, r)
	return &audio.Buffer{Format: audio.Format{SampleRate: 24000, Channels: 1}, Data: make([]float32, 36000)}, nil
}
func (f *fakeVoices) Play(context.Context, *audio.Buffer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plays++
	return nil
}
func (f *fakeVoices) counts() (synths, plays int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.synths), f.plays
}

func TestVoicePanelLibraryCapabilitiesSave(t *testing.T) {
	fv := &fakeVoices{}
	u, _ := newTestUI(t, Services{Voices: fv})
	p := u.voice
	p.refresh()
	waitFor(t, u, "capabilities", func() bool { return len(p.caps.Objects) > 0 })
	got := map[string]string{}
	for _, row := range p.caps.Objects {
		if t := texts(row); len(t) == 2 {
			got[t[1]] = t[0]
		}
	}
	if got["Speed"] != "native" || got["Seed"] != "emulated" || got["Temperature"] != "ignored" {
		t.Errorf("capabilities shown %v", got)
	}
	p.picker.SetSelected("warm (saved)")
	if r := p.Request(); r.Seed != 1234 || r.Speed != 0.9 || r.Voice != "warm" {
		t.Errorf("picking a voice gave %+v", r)
	}
	if err := p.saveAs("mine"); err != nil {
		t.Fatal(err)
	}
	if len(fv.saved) != 1 || *fv.saved[0].Seed != 1234 || fv.saved[0].Kind != voices.KindSeed || fv.saved[0].Defaults.Speed != 0.9 {
		t.Errorf("saved %+v", fv.saved)
	}
}

func TestFriendlyErrorAndBadges(t *testing.T) {
	tests := []struct {
		in   app.Transcript
		want string
	}{
		{app.Transcript{Lang: "zh", Emotion: "SAD", Event: "BGM"}, "Mandarin|sad|♪ music"},
		{app.Transcript{Lang: "nospeech", Emotion: "EMO_UNKNOWN", Event: "Speech"}, ""},
		{app.Transcript{Lang: "yue"}, "Cantonese"},
	}
	for _, tc := range tests {
		if got := strings.Join(tagBadges(tc.in), "|"); got != tc.want {
			t.Errorf("badges of %+v = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := friendlyError(app.NoteOf(app.ErrNoVoice)); !strings.Contains(got, "text only") {
		t.Errorf("friendlyError = %q", got)
	}
}

// The names the conversation's badge shows for the codes SenseVoice reports (any case, none
// for no speech); a code SenseVoice does not have stays as it is. The fine-tune wizard's own
// names are app/gui/wizard's TestLanguageNames.
func TestLanguageNames(t *testing.T) {
	for _, c := range []struct{ code, badge string }{
		{"en", "English"}, {"zh", "Mandarin"}, {"yue", "Cantonese"},
		{"ja", "Japanese"}, {"ko", "Korean"}, {"EN", "English"}, {"Yue", "Cantonese"},
		{"", ""}, {"nospeech", ""}, {"AUTO", ""}, {"de", "de"}, {"xx", "xx"},
	} {
		if got := languageName(c.code); got != c.badge {
			t.Errorf("languageName(%q) = %q, want %q", c.code, got, c.badge)
		}
	}
	// the settings menu offers SenseVoice's languages, English first
	have, want := slices.Sorted(slices.Values(languages)), append([]string{"auto"}, lang.Codes()...)
	if slices.Sort(want); !slices.Equal(have, want) {
		t.Errorf("settings offer %q, want the languages %q", languages, want)
	}
}

// texts collects the strings shown under o.
func texts(o fyne.CanvasObject) []string {
	var out []string
	collect(o, func(o fyne.CanvasObject) {
		switch v := o.(type) {
		case *widget.Label:
			out = append(out, v.Text)
		case *canvasText:
			out = append(out, v.Text)
		}
	})
	return out
}

func collect(o fyne.CanvasObject, fn func(fyne.CanvasObject)) {
	fn(o)
	if c, ok := o.(*fyne.Container); ok {
		for _, ch := range c.Objects {
			collect(ch, fn)
		}
	}
}

type canvasText = canvas.Text

func TestKeyboard(t *testing.T) {
	u, w := newTestUI(t, Services{})
	f := newFakeAssistant()
	u.Attach(f, nil)
	c := w.Canvas()
	c.(interface {
		TypedShortcut(fyne.Shortcut)
	}).TypedShortcut(&desktop.CustomShortcut{KeyName: fyne.Key3, Modifier: fyne.KeyModifierAlt})
	if got := u.tabs.Selected().Text; got != "Models" {
		t.Errorf("Alt+3 opened %q", got)
	}
	c.(interface {
		TypedShortcut(fyne.Shortcut)
	}).TypedShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyL, Modifier: fyne.KeyModifierShortcutDefault})
	if !u.onTab(tabConversation) || c.Focused() != u.talk.entry {
		t.Error("Ctrl+L does not focus the text box on the conversation")
	}
	c.Unfocus()
	// holding space talks, releasing it ends the utterance (the GL canvas calls these)
	u.keyDown(&fyne.KeyEvent{Name: fyne.KeySpace})
	u.keyDown(&fyne.KeyEvent{Name: fyne.KeySpace}) // key repeat while held
	waitFor(t, u, "StartListening on space", func() bool { s, _, _, _ := f.counts(); return s == 1 })
	u.keyUp(&fyne.KeyEvent{Name: fyne.KeySpace})
	waitFor(t, u, "StopListening on release", func() bool { _, s, _, _ := f.counts(); return s == 1 })
	if s, _, _, _ := f.counts(); s != 1 {
		t.Errorf("holding space started %d utterances, want 1", s)
	}
	// space typed into the text box is just a space
	c.Focus(u.talk.entry)
	u.keyDown(&fyne.KeyEvent{Name: fyne.KeySpace})
	u.keyUp(&fyne.KeyEvent{Name: fyne.KeySpace})
	c.Unfocus()
	c.OnTypedKey()(&fyne.KeyEvent{Name: fyne.KeyEscape})
	waitFor(t, u, "Cancel on Escape", func() bool { _, _, n, _ := f.counts(); return n == 1 })
	if s, _, _, _ := f.counts(); s != 1 {
		t.Errorf("space in the text box started listening (%d starts)", s)
	}
}

func TestUseVoiceInConversation(t *testing.T) {
	cfg := config.Default()
	saved := make(chan *config.Config, 1)
	u, _ := newTestUI(t, Services{Config: cfg, SaveConfig: func(c *config.Config) error { saved <- c; return nil }})
	p := u.voice
	p.seed.SetText("4242")
	p.speed.SetValue(1.3)
	test.Tap(p.use)
	var c *config.Config
	select {
	case c = <-saved:
	case <-time.After(10 * time.Second):
		t.Fatal("the configuration was not saved")
	}
	if c.TTS.Seed != 4242 || c.TTS.Speed != 1.3 {
		t.Errorf("saved tts %+v", c.TTS)
	}
}

func TestBannerDownloadsTheSuggestedModel(t *testing.T) {
	fm := &fakeModels{pulled: make(chan struct{})}
	u, _ := newTestUI(t, Services{Models: fm})
	u.Attach(newFakeAssistant(), []app.Note{demoASRNote()})
	var fix *widget.Button
	collect(u.banners, func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok && strings.HasPrefix(b.Text, "Download") {
			fix = b
		}
	})
	if fix == nil || fix.Text != "Download sensevoice-small-int8" {
		t.Fatalf("fix button %v", fix)
	}
	test.Tap(fix)
	waitFor(t, u, "the banner's download", func() bool {
		select {
		case <-fm.pulled:
			return true
		default:
			return false
		}
	})
	if u.tabs.Selected().Text != "Models" {
		t.Errorf("download shown on %q", u.tabs.Selected().Text)
	}
	r := u.models.rows["sensevoice-small-int8"]
	waitFor(t, u, "cancel", func() bool { return r.cancel.Visible() })
	test.Tap(r.cancel)
	waitFor(t, u, "paused", func() bool { return r.get.Visible() })
}

// A model downloaded from the banner's offer is used at once: the assistant is rebuilt.
func TestInstalledModelIsUsedWithoutRestart(t *testing.T) {
	fm := &fakeModels{pulled: make(chan struct{}), completes: true}
	reloads := make(chan struct{}, 4)
	u, _ := newTestUI(t, Services{Models: fm, Reload: func() { reloads <- struct{}{} }})
	u.Attach(newFakeAssistant(), []app.Note{demoASRNote()})
	var fix *widget.Button
	collect(u.banners, func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok && strings.HasPrefix(b.Text, "Download") {
			fix = b
		}
	})
	if fix == nil {
		t.Fatal("no download offered for the demo recogniser")
	}
	test.Tap(fix)
	waitFor(t, u, "the rebuild after the install", func() bool {
		select {
		case <-reloads:
			return true
		default:
			return false
		}
	})
	if r := u.models.rows["sensevoice-small-int8"]; !strings.HasPrefix(r.detail.Text, "Installed") {
		t.Errorf("row says %q", r.detail.Text)
	}
}

// demoASRNote is the note the assistant gives about the demo-grade recogniser.
func demoASRNote() app.Note {
	return *factory.ASRNote(factory.Model{ID: "sensevoice-demo", Demo: true}, nil)
}

// skillsNote is the note the assistant gives when the offline skills answer.
func skillsNote(t *testing.T) app.Note {
	t.Helper()
	cfg := config.Default()
	cfg.LLM.Backend = "skills"
	_, notes, err := factory.New(cfg, nil).LLM(context.Background())
	if err != nil || len(notes) != 1 {
		t.Fatalf("skills notes %+v, %v", notes, err)
	}
	return notes[0]
}

// Banners route by a note's part and kind, so rewording a message changes no button.
func TestBannersIgnoreTheWording(t *testing.T) {
	fm := &fakeModels{pulled: make(chan struct{})}
	u, _ := newTestUI(t, Services{Models: fm})
	u.Attach(newFakeAssistant(), []app.Note{
		{Part: app.PartASR, Kind: app.NoteDemo, Model: "sensevoice-small-int8", Message: "Erkennung: Demomodell"},
		{Part: app.PartBrain, Kind: app.NoteFallback, Message: "Gehirn: nur Fertigkeiten"},
		{Part: app.PartAudio, Kind: app.NoteUnavailable, Message: "kein Gerät"},
		{Part: app.PartVoice, Kind: app.NoteUnavailable, Message: "keine Stimme"},
	})
	var buttons []string
	collect(u.banners, func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok && b.Text != "" {
			buttons = append(buttons, b.Text)
		}
	})
	// three banners at most: the oldest gave way
	if want := []string{"LLM settings", "Audio settings", "Voice"}; strings.Join(buttons, "|") != strings.Join(want, "|") {
		t.Errorf("buttons %q, want %q", buttons, want)
	}
	u.setNotes([]app.Note{{Part: app.PartASR, Kind: app.NoteDemo, Model: "sensevoice-small-int8", Message: "Erkennung: Demomodell"}})
	buttons = nil
	collect(u.banners, func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok && b.Text != "" {
			buttons = append(buttons, b.Text)
		}
	})
	if len(buttons) != 1 || buttons[0] != "Download sensevoice-small-int8" {
		t.Errorf("buttons %q", buttons)
	}
}

func TestQueuedMessageIsAnnounced(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	u.Attach(newFakeAssistant(), nil)
	u.Handle(app.Event{Kind: app.EvQueued, Text: "12 times 7"})
	if got := u.talk.state.Text; !strings.Contains(got, "12 times 7") || !strings.Contains(got, "after this answer") {
		t.Errorf("talk bar says %q for a queued message", got)
	}
	long := strings.Repeat("very long message ", 10)
	u.Handle(app.Event{Kind: app.EvQueued, Text: long})
	if got := u.talk.state.Text; len([]rune(got)) > 100 || !strings.Contains(got, "…") {
		t.Errorf("a long queued message is shown as %q", got)
	}
}

// TestHistorySearchesAsYouType: typing runs the search after a pause, without Enter, and the
// counts are singular when there is one.
func TestHistorySearchesAsYouType(t *testing.T) {
	h := &fakeHistory{}
	u, _ := newTestUI(t, Services{History: h})
	p := u.history
	test.Type(p.search, "timer")
	waitFor(t, u, "hits without Enter", func() bool { return len(p.results.Objects) == 1 && p.status.Text == "1 match" })
	p.search.SetText("")
	waitFor(t, u, "the list back", func() bool {
		return strings.HasSuffix(p.status.Text, "conversation") || strings.HasSuffix(p.status.Text, "conversations")
	})
	if n := len(p.last); (n == 1) != (p.status.Text == "1 conversation") {
		t.Errorf("%d conversations shown as %q", n, p.status.Text)
	}
}

type memPrefs struct {
	mu sync.Mutex
	m  map[string]string
}

func (p *memPrefs) Pref(k string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[k]
	return v, ok
}
func (p *memPrefs) SetPref(k, v string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]string{}
	}
	p.m[k] = v
	return nil
}

// TestDismissedNoteBannerStaysDismissed: a set-up note (a demo-grade model) dismissed once does
// not come back on the next launch; an error banner does.
func TestDismissedNoteBannerStaysDismissed(t *testing.T) {
	prefs := &memPrefs{}
	demo := app.Note{Part: app.PartASR, Kind: app.NoteDemo, Message: "speech recognition: demo-grade model"}
	failed := app.Note{Part: app.PartAudio, Kind: app.NoteFailed, Message: "the microphone failed"}
	u, _ := newTestUI(t, Services{Prefs: prefs})
	u.showFix(demo)
	u.showFix(failed)
	if len(u.banners.Objects) != 2 {
		t.Fatalf("%d banners, want 2", len(u.banners.Objects))
	}
	for len(u.banners.Objects) > 0 { // dismiss both
		b := u.banners.Objects[0].(*fyne.Container)
		test.Tap(findCloseButton(t, b))
	}
	// the next launch
	u2, _ := newTestUI(t, Services{Prefs: prefs})
	u2.showFix(demo)
	u2.showFix(failed)
	if len(u2.banners.Objects) != 1 {
		t.Fatalf("%d banners on the next launch, want only the error's", len(u2.banners.Objects))
	}
	if l, _ := findLabel(u2.banners.Objects[0].(*fyne.Container)); l == nil || !strings.Contains(l.Text, "microphone") {
		t.Errorf("the banner that came back: %v", l)
	}
}

// findCloseButton is a banner's dismiss button (the last button in it).
func findCloseButton(t *testing.T, c *fyne.Container) *widget.Button {
	t.Helper()
	var last *widget.Button
	var walk func(o fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		switch v := o.(type) {
		case *widget.Button:
			last = v
		case *fyne.Container:
			for _, c := range v.Objects {
				walk(c)
			}
		}
	}
	walk(c)
	if last == nil {
		t.Fatal("a banner without a dismiss button")
	}
	return last
}

// importOnly lists a model that has no download (the official ChatTTS: import alone) and a
// tokenizer, next to nothing else.
type importOnly struct{ fakeModels }

func (f *importOnly) List(context.Context) ([]assets.ModelStatus, error) {
	return []assets.ModelStatus{
		{ID: "chattts", Kind: "tts", Description: "There is no ONNX download: export it, then import", State: assets.StateMissing},
		{ID: "qwen3-tokenizer", Kind: "tokenizer", Description: "Qwen3 tokenizer", State: assets.StateInstalled, Downloadable: true},
	}, nil
}

// TestModelsWithoutDownload: a model that can only be imported offers no Download button, and
// a tokenizer is not offered as a language model in Start here.
func TestModelsWithoutDownload(t *testing.T) {
	u, _ := newTestUI(t, Services{Models: &importOnly{}})
	p := u.models
	p.refresh()
	waitFor(t, u, "the model list", func() bool { return p.rows["chattts"] != nil })
	if p.rows["chattts"].get.Visible() {
		t.Error("chattts (import only) offers Download")
	}
	for _, o := range p.start.Objects {
		if c, ok := o.(*fyne.Container); ok {
			if l, ok := findLabel(c); ok && strings.Contains(l.Text, "Qwen3 tokenizer") {
				t.Errorf("the tokenizer is offered as a language model: %q", l.Text)
			}
		}
	}
}

// failingModels is a missing recogniser whose download fails at once.
type failingModels struct{ fakeModels }

func (f *failingModels) Pull(context.Context, string, func(assets.Event)) error {
	return errors.New("no route to host huggingface.co")
}

// TestDownloadErrorShowsWhereItWasAsked: a download started from Start here that fails says
// so under that button, not only in the model's row far below.
func TestDownloadErrorShowsWhereItWasAsked(t *testing.T) {
	u, _ := newTestUI(t, Services{Models: &failingModels{}})
	p := u.models
	p.refresh()
	waitFor(t, u, "the model list", func() bool { return p.rows["sensevoice-small-int8"] != nil })
	p.pull("sensevoice-small-int8")
	waitFor(t, u, "the error under Start here's button", func() bool {
		for _, o := range p.start.Objects {
			if l, ok := o.(*widget.Label); ok && strings.Contains(l.Text, "no route to host") {
				return true
			}
		}
		return false
	})
}
