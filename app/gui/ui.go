package gui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/llm"

	"github.com/parley-voice/parley/app/gui/kit"
	"github.com/parley-voice/parley/app/gui/wizard"
)

// UI is the app's window content and the state behind it. Its methods run on the Fyne
// goroutine (event handlers, or functions passed to fyne.Do).
type UI struct {
	app fyne.App
	win fyne.Window
	svc Services

	a     Assistant
	unsub func()
	gen   int // attachment generation: events from an older assistant are dropped
	state app.State
	mode  app.Mode
	muted bool
	// textOnly: the assistant has no voice or microphone (no audio devices); answers are
	// shown, and "no voice" is not repeated as an error on every bubble.
	textOnly bool
	// voiceName names the voice the running assistant speaks with ("" before one runs)
	voiceName string

	conv     *conversation
	talk     *talkBar
	voice    *voicePanel
	models   *modelsPanel
	settings *settingsPanel
	history  *historyPanel
	wizard   *wizard.Wizard
	banners  *fyne.Container
	newConv  *widget.Button
	convTab  *fyne.Container
	tabs     *container.AppTabs
	content  fyne.CanvasObject

	spaceDown bool
	dlg       dialog.Dialog // the dialog shown (Escape closes it)
	// levels tells the event pump whether capture levels are wanted: only while Parley
	// listens and the conversation is on screen. Other levels are dropped before they reach
	// the UI goroutine, so an idle window is never repainted for them.
	levels atomic.Bool
	// do runs fn on the UI goroutine: fyne.Do, or in tests a queue the test goroutine drains
	// (Fyne's test driver runs fyne.Do at once on the calling goroutine).
	do func(fn func())
	// OnEvent, when set, sees every event after the UI handled it (tests, benchmarks).
	OnEvent func(app.Event)
	// openURL opens a link or folder with the desktop; clipboard sets the clipboard (tests
	// replace both).
	openURL   func(*url.URL) error
	clipboard func(string)
}

// New builds the UI for a window. Call Attach when the assistant is ready.
func New(a fyne.App, w fyne.Window, svc Services) *UI {
	u := &UI{app: a, win: w, svc: svc, do: fyne.Do}
	u.openURL = a.OpenURL
	u.clipboard = func(s string) {
		if w != nil {
			w.Clipboard().SetContent(s)
		}
	}
	u.conv = newConversation()
	u.conv.acts = bubbleActions{copy: func(s string) { u.clipboard(s) }, replay: u.replay}
	u.talk = newTalkBar(u)
	u.banners = container.NewVBox()
	if svc.Config != nil {
		if m, err := app.ParseMode(svc.Config.Assistant.Mode); err == nil {
			u.mode = m
			u.talk.mode.SetSelectedIndex(int(m))
		}
	}
	u.voice = newVoicePanel(u)
	u.models = newModelsPanel(u)
	u.settings = newSettingsPanel(u)
	u.history = newHistoryPanel(u)
	u.wizard = wizard.New(wizardHost{u}, wizardRoles(svc))

	u.newConv = widget.NewButtonWithIcon("New conversation", theme.ContentAddIcon(), func() { u.newConversation() })
	u.newConv.Importance = widget.LowImportance
	top := container.NewVBox(container.NewBorder(nil, nil, nil, u.newConv), u.banners)
	u.convTab = container.NewBorder(top, container.NewPadded(u.talk.box), nil, nil, u.conv.body)
	u.tabs = container.NewAppTabs(
		container.NewTabItemWithIcon(tabConversation, theme.MailComposeIcon(), u.convTab),
		container.NewTabItemWithIcon(tabVoice, theme.VolumeUpIcon(), u.voice.content),
		container.NewTabItemWithIcon(tabModels, theme.DownloadIcon(), u.models.content),
		container.NewTabItemWithIcon(tabSettings, theme.SettingsIcon(), u.settings.content),
		container.NewTabItemWithIcon(tabHistory, theme.HistoryIcon(), u.history.content),
		container.NewTabItemWithIcon(wizard.Tab, fineTuneIcon, u.wizard.Content()),
	)
	u.tabs.SetTabLocation(container.TabLocationLeading)
	u.tabs.OnSelected = func(t *container.TabItem) {
		u.wizard.TabChanged(t.Text)
		u.updateLevels()
		u.models.shown(t.Text == tabModels)
		u.history.shown(t.Text == tabHistory)
		switch t.Text {
		case tabModels:
			u.models.refresh()
		case tabHistory:
			u.history.refresh()
		case tabVoice:
			u.voice.refresh()
		case wizard.Tab:
			u.wizard.Shown()
		}
	}
	u.content = u.tabs
	u.talk.setState(app.Idle, false)
	u.talk.state.SetText("Starting…")
	u.talk.mic.Disable()
	u.talk.mode.Disable()
	u.installKeys()
	return u
}

// Content is the window's content.
func (u *UI) Content() fyne.CanvasObject { return u.content }

// Attach connects the UI to a (new) assistant and shows notes about demo-grade or missing
// parts. It replaces the previous assistant's subscription.
func (u *UI) Attach(a Assistant, notes []app.Note) {
	if u.unsub != nil {
		u.unsub()
		u.unsub = nil
	}
	u.gen++
	u.conv.gen = u.gen
	u.a = a
	u.setListening(false)
	u.conv.setTextOnly(u.textOnly)
	u.setNotes(notes)
	if a == nil {
		return
	}
	if u.textOnly || u.muted {
		u.talk.mic.Disable()
	} else {
		u.talk.mic.Enable()
	}
	if u.textOnly {
		u.talk.mode.Disable()
	} else {
		u.talk.mode.Enable()
	}
	ch, unsub := a.Subscribe(1024)
	u.unsub = unsub
	u.setState(app.Idle)
	if u.mode == app.HandsFree {
		u.setState(app.Listening)
	}
	go u.pump(u.gen, ch)
}

// Detach drops the assistant (it is being rebuilt or closed).
func (u *UI) Detach(reason string) {
	if u.unsub != nil {
		u.unsub()
		u.unsub = nil
	}
	u.gen++
	u.a = nil
	u.setListening(false)
	u.talk.mic.Disable()
	u.talk.state.SetText(reason)
	u.updateLevels()
}

// pump moves events to the UI goroutine in batches, so a fast stream of deltas costs one
// hop per batch, not per event.
func (u *UI) pump(gen int, ch <-chan app.Event) {
	for ev := range ch {
		if ev.Kind == app.EvLevel && !u.levels.Load() {
			continue
		}
		batch := []app.Event{ev}
	more:
		for len(batch) < 512 {
			select {
			case e, ok := <-ch:
				if !ok {
					break more
				}
				if e.Kind == app.EvLevel && !u.levels.Load() {
					continue
				}
				batch = append(batch, e)
			default:
				break more
			}
		}
		u.do(func() {
			if gen != u.gen {
				return
			}
			for _, e := range batch {
				u.Handle(e)
			}
		})
	}
}

// Handle shows one assistant event.
func (u *UI) Handle(e app.Event) {
	switch e.Kind {
	case app.EvState:
		u.setState(e.State)
	case app.EvLevel:
		if u.levels.Load() {
			u.talk.meter.SetLevel(e.Level)
			u.talk.wave.add(e.Level)
			if !u.talk.live { // the microphone delivers: Talk really listens now
				u.talk.live = true
				u.talk.setState(u.state, u.muted)
			}
		}
	case app.EvSpeechStart:
		// the waveform shows only what the recogniser will hear: a push-to-talk utterance
		// (opened by Talk), or speech heard while Parley listens hands-free or after the wake
		// word; speech in push-to-talk at rest, or Parley's own voice, is not the user's turn
		if !u.levels.Load() {
			break
		}
		u.talk.setVAD(true)
		if !u.talk.listening { // a push-to-talk utterance started its waveform at Talk
			u.talk.wave.start()
		}
	case app.EvSpeechEnd:
		u.talk.setVAD(false)
		if !u.talk.listening {
			u.talk.wave.stop()
		}
	case app.EvWake:
		u.talk.state.SetText("Wake word heard")
	case app.EvQueued:
		// a message typed over an answer waits for it: say so, or it looks lost
		u.talk.state.SetText("Next: “" + ellipsize(e.Text, 40) + "” — after this answer (Stop to skip to it)")
	case app.EvPartial:
		u.conv.partial(e.Text)
	case app.EvTranscript:
		if e.Transcript != nil {
			u.conv.userTurn(e.Turn, *e.Transcript)
		}
	case app.EvDelta:
		u.conv.delta(e.Turn, e.Text)
	case app.EvError:
		if e.Err == nil || u.textOnly && errors.Is(e.Err, app.ErrNoVoice) {
			break
		}
		n := app.NoteOf(e.Err)
		u.conv.failed(e.Turn, n)
		u.showFix(n)
	case app.EvTurnDone:
		if ex := e.Exchange; ex != nil && u.textOnly && errors.Is(ex.Err, app.ErrNoVoice) {
			c := *ex
			c.Err = nil
			ex = &c
			u.conv.done(ex)
			break
		}
		u.conv.done(e.Exchange)
		if u.onTab(tabHistory) {
			u.history.check()
		}
		if fn := u.svc.TurnAudio; fn != nil && e.Exchange != nil {
			user, parley := fn(e.Turn) // the turn was recorded before it ended
			u.conv.setAudio(e.Turn, user, parley)
		}
	}
	if u.OnEvent != nil {
		u.OnEvent(e)
	}
}

func (u *UI) setState(s app.State) {
	u.state = s
	if s != app.Listening && u.talk.listening && s != app.Idle {
		u.setListening(false)
	}
	if s == app.Idle && u.talk.listening {
		u.setListening(false)
	}
	if s != app.Listening {
		u.talk.setVAD(false)
		u.talk.wave.stop()
	}
	if s == app.Idle || s == app.Speaking || s == app.Thinking {
		u.conv.endPartial() // the utterance was dropped (or its transcript is in)
	}
	u.talk.setState(s, u.muted)
	u.updateLevels()
}

// updateLevels decides whether capture levels are shown: while Parley listens (hands-free at
// rest, a push-to-talk utterance, after the wake word) and the conversation is on screen.
// In push-to-talk nothing is shown until Talk is pressed: the meter at rest would read as
// "listening". When levels stop, the meter falls to zero.
func (u *UI) updateLevels() {
	on := u.a != nil && !u.muted && (u.state == app.Listening || u.talk.listening) &&
		(u.tabs == nil || u.onTab(tabConversation))
	if u.levels.Swap(on) && !on {
		u.talk.meter.SetLevel(-100)
	}
}

// poll calls f on the UI goroutine every d until stop is called (on the UI goroutine, where
// a tick queued before stop no longer runs f). Its goroutine ends with stop: a panel shown
// and hidden many times leaves nothing behind.
func (u *UI) poll(d time.Duration, f func()) (stop func()) {
	t := time.NewTicker(d)
	done := make(chan struct{})
	go func() {
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				u.do(func() {
					select {
					case <-done:
					default:
						f()
					}
				})
			}
		}
	}()
	return sync.OnceFunc(func() { close(done) })
}

// newConversation starts over: the view is cleared, and the assistant forgets and stores
// the next turns as a new conversation.
func (u *UI) newConversation() {
	u.conv.clear()
	u.setListening(false)
	if fn := u.svc.NewConversation; fn != nil {
		go func() {
			if err := fn(); err != nil {
				u.do(func() { u.showFix(app.NoteOf(err)) })
			}
		}()
	}
	if u.win != nil {
		u.win.Canvas().Focus(u.talk.entry)
	}
}

// submit sends typed text as a turn (off the UI goroutine: the loop answers quickly, but
// the UI never waits on it).
func (u *UI) submit(text string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	a := u.a
	if a == nil {
		u.banner("Parley is still starting — try again in a moment.", nil, "", nil)
		return
	}
	u.talk.entry.SetText("")
	go func() {
		if _, err := a.SubmitText(text); err != nil {
			u.do(func() { u.banner("Could not send: "+err.Error(), nil, "", nil) })
		}
	}()
}

// toggleTalk is the microphone button: it opens a push-to-talk utterance, and closes it.
func (u *UI) toggleTalk() {
	if u.talk.listening {
		u.endTalk()
	} else {
		u.beginTalk()
	}
}

func (u *UI) beginTalk() {
	a := u.a
	if a == nil || u.talk.listening || u.muted {
		return
	}
	u.setListening(true)
	u.talk.wave.start()
	go func() {
		if err := a.StartListening(); err != nil {
			u.do(func() {
				u.setListening(false)
				u.showFix(app.NoteOf(err))
			})
		}
	}()
}

func (u *UI) endTalk() {
	a := u.a
	if a == nil || !u.talk.listening {
		return
	}
	u.setListening(false)
	u.talk.wave.stop()
	go func() {
		if err := a.StopListening(); err != nil {
			u.do(func() { u.showFix(app.NoteOf(err)) })
		}
	}()
}

// stopTalking interrupts Parley (or abandons listening).
func (u *UI) stopTalking() {
	a := u.a
	if a == nil {
		return
	}
	u.setListening(false)
	go a.Cancel()
}

func (u *UI) changeMode(m app.Mode) {
	if m == u.mode {
		return
	}
	u.mode = m
	if u.svc.Config != nil {
		u.svc.Config.Assistant.Mode = []string{"push-to-talk", "hands-free", "wake-word"}[m]
	}
	if u.svc.SetMode == nil {
		return
	}
	u.Detach("Switching to " + strings.ToLower(modeNames[m]) + "…")
	go func() {
		if err := u.svc.SetMode(m); err != nil {
			u.do(func() { u.showFix(app.NoteOf(err)) })
		}
	}()
}

// setMuted turns the microphone off (push-to-talk only) or back to the chosen mode.
func (u *UI) setMuted(on bool) {
	if on == u.muted {
		return
	}
	u.muted = on
	if on && u.talk.listening {
		u.endTalk()
	}
	if u.svc.SetMode != nil && u.mode != app.PushToTalk {
		m := u.mode
		if on {
			m = app.PushToTalk
		}
		go u.svc.SetMode(m)
	}
	if on || u.textOnly {
		u.talk.mic.Disable()
	} else {
		u.talk.mic.Enable()
	}
	u.talk.setState(u.state, u.muted)
}

// installKeys: holding the space bar talks (push-to-talk) when the text box is not focused;
// Escape stops Parley; Ctrl+L focuses the text box; Ctrl+N starts a new conversation;
// Alt+1…5 switch panels; Tab moves focus
// between controls (Fyne's own traversal).
func (u *UI) installKeys() {
	if u.win == nil {
		return
	}
	c := u.win.Canvas()
	if dc, ok := c.(desktop.Canvas); ok {
		dc.SetOnKeyDown(u.keyDown)
		dc.SetOnKeyUp(u.keyUp)
	}
	c.SetOnTypedKey(func(ev *fyne.KeyEvent) {
		if ev.Name == fyne.KeyEscape {
			u.escape()
		}
	})
	c.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyN, Modifier: fyne.KeyModifierShortcutDefault}, func(fyne.Shortcut) {
		u.showTab(tabConversation)
		u.newConversation()
	})
	c.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyL, Modifier: fyne.KeyModifierShortcutDefault}, func(fyne.Shortcut) {
		u.showTab(tabConversation)
		c.Focus(u.talk.entry)
	})
	// Alt+1…6 switch between the panels, by their place in the list (the one place a panel is
	// reached by number).
	for i, k := range []fyne.KeyName{fyne.Key1, fyne.Key2, fyne.Key3, fyne.Key4, fyne.Key5, fyne.Key6} {
		c.AddShortcut(&desktop.CustomShortcut{KeyName: k, Modifier: fyne.KeyModifierAlt}, func(fyne.Shortcut) {
			u.tabs.SelectIndex(i)
		})
	}
}

// keyDown starts push-to-talk when the space bar goes down outside the text boxes.
func (u *UI) keyDown(ev *fyne.KeyEvent) {
	if ev.Name == fyne.KeySpace && u.win.Canvas().Focused() == nil && !u.spaceDown && u.onTab(tabConversation) {
		u.spaceDown = true
		u.beginTalk()
	}
}

// keyUp ends the push-to-talk utterance when the space bar comes up.
func (u *UI) keyUp(ev *fyne.KeyEvent) {
	if ev.Name == fyne.KeySpace && u.spaceDown {
		u.spaceDown = false
		u.endTalk()
	}
}

// setNotes shows what is demo-grade or missing, each with its fix.
func (u *UI) setNotes(notes []app.Note) {
	u.banners.RemoveAll()
	for _, n := range notes {
		u.showFix(n)
	}
}

// showFix shows a problem with the button that fixes it: the part it is about decides the
// panel, its kind and model the action.
func (u *UI) showFix(n app.Note) {
	msg := friendlyError(n)
	banner := u.banner
	if n.Kind == app.NoteDemo || n.Kind == app.NoteMissing || n.Kind == app.NoteInfo || n.Kind == app.NoteFallback {
		banner = u.noteBanner // how Parley is set up: dismissed once is enough
	}
	switch {
	case n.Model != "" && (n.Kind == app.NoteDemo || n.Kind == app.NoteMissing) && u.svc.Models != nil:
		banner(msg, theme.DownloadIcon(), "Download "+n.Model, func() {
			u.showTab(tabModels)
			u.models.download(n.Model)
		})
	case n.Kind == app.NoteDemo || n.Kind == app.NoteMissing || n.Part == app.PartASR:
		banner(msg, theme.DownloadIcon(), "Get models", func() { u.showTab(tabModels) })
	case n.Part == app.PartBrain || isUnreachable(n.Err):
		banner(msg, theme.SettingsIcon(), "LLM settings", func() { u.showTab(tabSettings) })
	case n.Part == app.PartAudio:
		banner(msg, theme.SettingsIcon(), "Audio settings", func() { u.showTab(tabSettings) })
	case n.Part == app.PartVoice:
		banner(msg, theme.VolumeUpIcon(), "Voice", func() { u.showTab(tabVoice) })
	default:
		banner(msg, nil, "", nil)
	}
}

// The panels, by name: code opens a panel by its name, never by its place in the list.
const (
	tabConversation = "Conversation"
	tabVoice        = "Voice"
	tabModels       = "Models"
	tabSettings     = "Settings"
	tabHistory      = "History"
)

// showTab opens the panel named name.
func (u *UI) showTab(name string) {
	for _, t := range u.tabs.Items {
		if t.Text == name {
			u.tabs.Select(t)
			return
		}
	}
}

// onTab says whether the panel named name is the one shown.
func (u *UI) onTab(name string) bool {
	t := u.tabs.Selected()
	return t != nil && t.Text == name
}

// banner adds a dismissible message above the conversation (the same message once).
func (u *UI) banner(msg string, icon fyne.Resource, action string, fn func()) {
	u.addBanner(msg, icon, action, fn, false)
}

// noteBanner is a banner about how Parley is set up (a demo-grade model, an LLM not found):
// the same on every launch until something changes, so once dismissed it stays dismissed.
func (u *UI) noteBanner(msg string, icon fyne.Resource, action string, fn func()) {
	u.addBanner(msg, icon, action, fn, true)
}

// bannerKey is the preference that remembers a dismissed note banner.
func bannerKey(msg string) string {
	h := sha256.Sum256([]byte(msg))
	return "banner.dismissed." + hex.EncodeToString(h[:8])
}

func (u *UI) addBanner(msg string, icon fyne.Resource, action string, fn func(), remember bool) {
	if remember && u.svc.Prefs != nil {
		if _, dismissed := u.svc.Prefs.Pref(bannerKey(msg)); dismissed {
			return
		}
	}
	for _, o := range u.banners.Objects {
		if b, ok := o.(*fyne.Container); ok && len(b.Objects) > 1 {
			if l, ok := findLabel(b); ok && l.Text == msg {
				return
			}
		}
	}
	if len(u.banners.Objects) >= 3 {
		u.banners.Remove(u.banners.Objects[0])
	}
	l := widget.NewLabel(msg)
	l.Wrapping = fyne.TextWrapWord
	var item *fyne.Container
	close := widget.NewButtonWithIcon("", theme.CancelIcon(), func() {
		u.banners.Remove(item)
		u.relayout()
		if remember && u.svc.Prefs != nil {
			if err := u.svc.Prefs.SetPref(bannerKey(msg), "1"); err != nil {
				slog.Warn("the dismissed banner will come back", "err", err)
			}
		}
	})
	close.Importance = widget.LowImportance
	right := container.NewHBox()
	if fn != nil {
		b := widget.NewButtonWithIcon(action, icon, fn)
		right.Add(container.NewCenter(b))
	}
	right.Add(container.NewCenter(close))
	bg := kit.NewThemedRect(theme.ColorNameInputBackground, 8)
	warn := widget.NewIcon(theme.WarningIcon())
	item = container.NewPadded(container.NewStack(bg, container.NewBorder(nil, nil, warn, right, l)))
	u.banners.Add(item)
	u.relayout()
}

// relayout lays the conversation tab out again after its banners changed (wrapped text
// needs its width before it knows its height).
func (u *UI) relayout() {
	if u.convTab != nil {
		u.convTab.Refresh()
	}
}

func findLabel(c *fyne.Container) (*widget.Label, bool) {
	for _, o := range c.Objects {
		switch v := o.(type) {
		case *widget.Label:
			return v, true
		case *fyne.Container:
			if l, ok := findLabel(v); ok {
				return l, true
			}
		}
	}
	return nil, false
}

// friendlyError words notes and the loop's errors for people.
func friendlyError(n app.Note) string {
	msg := n.Message
	switch {
	case n.Part == app.PartASR && n.Kind == app.NoteDemo:
		return "Speech recognition runs on Parley's demo-grade model: fine for trying Parley out, not for real use. Download SenseVoice-Small for accurate transcripts."
	case n.Part == app.PartBrain && n.Kind == app.NoteFallback:
		return "Parley answers with its offline skills (time, timers, weather words, arithmetic). Connect a language model for open conversation."
	case errors.Is(n.Err, app.ErrNoVoice):
		return "Parley has no working voice or speaker here, so answers are shown as text only."
	case errors.Is(n.Err, app.ErrNoEar):
		return "No microphone is open. Choose an input device in Settings, or type instead."
	case isUnreachable(n.Err):
		return "The language model server is not answering (" + msg + "). Start it, or pick another in Settings."
	}
	if len(msg) > 0 {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	return msg
}

// isUnreachable says whether err is a server that could not be reached.
func isUnreachable(err error) bool {
	var dns *net.DNSError
	return errors.Is(err, llm.ErrUnreachable) || errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dns)
}

// replay plays a turn's kept audio file.
func (u *UI) replay(path string) {
	v := u.svc.Voices
	if v == nil {
		return
	}
	go func() {
		b, err := audio.ReadWAVFile(path)
		if errors.Is(err, audio.ErrRecovered) && b != nil {
			err = nil // a recording cut short (Parley stopped mid-turn): play what is there
		}
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			err = v.Play(ctx, b)
			cancel()
		}
		if err != nil {
			u.do(func() { u.banner("Could not replay: "+err.Error(), nil, "", nil) })
		}
	}()
}

// setListening shows whether a push-to-talk utterance is open.
func (u *UI) setListening(on bool) {
	if on && !u.talk.listening {
		u.talk.live = false // push-to-talk opens the microphone now; it takes a moment
	}
	u.talk.setListening(on)
	u.updateLevels()
}

// ellipsize keeps the first n runes of s, with "…" when it was longer.
func ellipsize(s string, n int) string {
	r := []rune(strings.TrimSpace(s))
	if len(r) <= n {
		return string(r)
	}
	return string(r[:n]) + "…"
}

// fineTuneIcon is the Fine-tune tab's icon: a microphone (your recordings) with a spark (the
// voice they make); themed like Fyne's own icons. Drawn for Parley.
var fineTuneIcon = theme.NewThemedResource(fyne.NewStaticResource("finetune.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">
<rect x="7" y="2" width="6" height="11" rx="3" fill="#000"/>
<path d="M4.5 10.5a5.5 5.5 0 0 0 11 0" fill="none" stroke="#000" stroke-width="1.8"/>
<rect x="9.1" y="16" width="1.8" height="4" fill="#000"/>
<rect x="6.5" y="19.5" width="7" height="1.8" fill="#000"/>
<path d="M19 3l.9 2.1L22 6l-2.1.9L19 9l-.9-2.1L16 6l2.1-.9z" fill="#000"/>
</svg>`)))
