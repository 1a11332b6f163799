package gui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"

	"github.com/parley-voice/parley/app/gui/kit"
)

// defaultVoiceLabel is the picker's entry for the engine's own default voice.
const defaultVoiceLabel = "Engine default"

// voicePanel picks and tunes the voice: the engine, a library voice or one of the engine's
// own, seed (dice, lock), sampling sliders, control-token buttons over a preview text,
// Preview / Replay / Save WAV…, Save as voice, and how the engine honours each control.
// Everything engine-specific comes from the engine's capability report (tts.Capabilities):
// its voices, and which controls it ignores (those are disabled, the reason on hover).
type voicePanel struct {
	u       *UI
	engineS *widget.Select
	picker  *widget.Select
	seed    *widget.Entry
	dice    *widget.Button
	lock    *widget.Check
	temp    *widget.Slider
	topP    *widget.Slider
	topK    *widget.Slider
	speed   *widget.Slider
	text    *widget.Entry
	breakN  *widget.Select
	preview *widget.Button
	replay  *widget.Button
	saveWAV *widget.Button
	save    *widget.Button
	use     *widget.Button
	status  *widget.Label
	caps    *fyne.Container
	content fyne.CanvasObject

	capsTitle *widget.Label
	engineErr bool // the status line says why the engine could not open

	list    []*voices.Voice
	choices map[string]voiceChoice // picker label → what it picks
	engine  string
	rnd     func() int64
	// suggested are the engine's suggested seeds the dice has not rolled yet (tts.Capabilities)
	suggested []int64
	cancel    context.CancelFunc
	last      *audio.Buffer     // the last preview, for Replay and Save WAV…
	OnPlay    func(tts.Request) // tests
	tokens    map[string]*widget.Button
	hints     map[tts.Control][]*hint
	capsFor   string
	capsModel string        // the model capsFor reported, whose suggested seeds the dice rolls
	dlg       dialog.Dialog // the open save dialog
}

// voiceChoice is one entry of the voice picker.
type voiceChoice struct {
	name  string // library voice or engine voice; "" = engine default
	saved bool   // a library voice
}

func newVoicePanel(u *UI) *voicePanel {
	p := &voicePanel{u: u, rnd: func() int64 { return rand.Int64N(1<<31-1) + 1 }, tokens: map[string]*widget.Button{},
		hints: map[tts.Control][]*hint{}, choices: map[string]voiceChoice{defaultVoiceLabel: {}}}
	p.engine = "auto"
	if u.svc.Config != nil && u.svc.Config.TTS.Engine != "" {
		p.engine = u.svc.Config.TTS.Engine
	}
	engines := []string{p.engine}
	if u.svc.Voices != nil {
		engines = u.svc.Voices.Engines()
	}
	p.engineS = widget.NewSelect(engines, nil)
	p.engineS.Selected = p.engine
	p.engineS.OnChanged = func(e string) {
		if e != p.engine {
			p.engine = e
			p.picker.SetSelected(defaultVoiceLabel)
			p.refresh()
		}
	}
	p.picker = widget.NewSelect([]string{defaultVoiceLabel}, func(label string) { p.pick(label) })
	p.seed = widget.NewEntry()
	p.seed.SetPlaceHolder("no seed")
	p.seed.Validator = func(s string) error {
		if s == "" {
			return nil
		}
		_, err := strconv.ParseInt(s, 10, 64)
		return err
	}
	p.dice = widget.NewButtonWithIcon("", theme.ViewRefreshIcon(), func() { p.roll() })
	p.lock = widget.NewCheck("Lock", func(on bool) { p.applySeedState() })
	val := func(s *widget.Slider, format string) *widget.Label {
		l := widget.NewLabel(fmt.Sprintf(format, s.Value))
		prev := s.OnChanged
		s.OnChanged = func(v float64) {
			l.SetText(fmt.Sprintf(format, v))
			if prev != nil {
				prev(v)
			}
		}
		return l
	}
	p.temp = widget.NewSlider(0.05, 1.5)
	p.temp.Step, p.temp.Value = 0.05, 0.3
	p.topP = widget.NewSlider(0.05, 1)
	p.topP.Step, p.topP.Value = 0.05, 0.7
	p.topK = widget.NewSlider(1, 50)
	p.topK.Step, p.topK.Value = 1, 20
	p.speed = widget.NewSlider(0.5, 2)
	p.speed.Step, p.speed.Value = 0.05, 1
	if c := u.svc.Config; c != nil {
		setIf := func(s *widget.Slider, v float64) {
			if v > 0 {
				s.Value = max(s.Min, min(s.Max, v))
			}
		}
		setIf(p.temp, c.TTS.Temperature)
		setIf(p.topP, c.TTS.TopP)
		setIf(p.topK, float64(c.TTS.TopK))
		setIf(p.speed, c.TTS.Speed)
		if c.TTS.Seed != 0 {
			p.seed.SetText(strconv.FormatInt(c.TTS.Seed, 10))
		}
	}
	tempL, topPL, topKL, speedL := val(p.temp, "%.2f"), val(p.topP, "%.2f"), val(p.topK, "%.0f"), val(p.speed, "%.2f×")

	p.text = widget.NewMultiLineEntry()
	p.text.Wrapping = fyne.TextWrapWord
	p.text.SetText(voices.Preview("en"))
	p.text.SetMinRowsVisible(4)
	tokens := container.NewHBox()
	for _, tok := range []struct {
		text string
		ctl  tts.Control
	}{{"[laugh]", tts.CtlLaugh}, {"[uv_break]", tts.CtlPause}, {"[lbreak]", tts.CtlPause}} {
		b := widget.NewButton(tok.text, func() { p.insert(tok.text) })
		p.tokens[tok.text] = b
		tokens.Add(p.hinted(tok.ctl, b))
	}
	p.breakN = widget.NewSelect([]string{"0", "1", "2", "3", "4", "5", "6", "7"}, nil)
	p.breakN.SetSelected("4")
	bn := widget.NewButton("[break_N]", func() { p.insert("[break_" + p.breakN.Selected + "]") })
	p.tokens["[break_N]"] = bn
	tokens.Add(p.hinted(tts.CtlPause, bn))
	tokens.Add(p.breakN)

	p.preview = widget.NewButtonWithIcon("Preview", theme.MediaPlayIcon(), func() { p.play() })
	p.preview.Importance = widget.HighImportance
	p.replay = widget.NewButtonWithIcon("Replay", theme.MediaReplayIcon(), func() { p.playLast() })
	p.saveWAV = widget.NewButtonWithIcon("Save WAV…", theme.DownloadIcon(), func() { p.saveWAVDialog() })
	p.replay.Disable()
	p.saveWAV.Disable()
	p.save = widget.NewButtonWithIcon("Save as voice…", theme.DocumentSaveIcon(), func() { p.saveDialog() })
	p.use = widget.NewButtonWithIcon("Use in conversation", theme.ConfirmIcon(), func() { p.useInConversation() })
	p.status = widget.NewLabel("")
	p.status.Importance = widget.LowImportance
	p.status.Wrapping = fyne.TextWrapWord
	p.caps = container.NewVBox()

	seedRow := container.NewBorder(nil, nil, nil, container.NewHBox(p.dice, p.lock), p.seed)
	slider := func(ctl tts.Control, s *widget.Slider, v *widget.Label) fyne.CanvasObject {
		return p.hinted(ctl, container.NewBorder(nil, nil, nil, v, s))
	}
	form := widget.NewForm(
		widget.NewFormItem("Engine", p.engineS),
		widget.NewFormItem("Voice", p.picker),
		widget.NewFormItem("Seed", p.hinted(tts.CtlSeed, seedRow)),
		widget.NewFormItem("Temperature", slider(tts.CtlTemperature, p.temp, tempL)),
		widget.NewFormItem("Top-p", slider(tts.CtlTopP, p.topP, topPL)),
		widget.NewFormItem("Top-k", slider(tts.CtlTopK, p.topK, topKL)),
		widget.NewFormItem("Speed", slider(tts.CtlSpeed, p.speed, speedL)),
	)
	left := container.NewVBox(
		kit.Heading("Voice"),
		form,
		kit.Heading("Preview text"),
		container.NewHScroll(tokens),
		p.text,
		container.NewGridWithColumns(3, p.preview, p.replay, p.saveWAV),
		container.NewGridWithColumns(2, p.save, p.use),
		cloneClipButton(u),
		p.status,
	)
	p.capsTitle = widget.NewLabelWithStyle("What the engine does", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	p.capsTitle.SizeName = theme.SizeNameSubHeadingText
	right := container.NewVBox(p.capsTitle, p.caps)
	// two columns when the window is wide, one below the other when it is not
	p.content = container.NewVScroll(container.NewPadded(container.New(&kit.Columns{Wide: 820, Split: 0.6},
		left, right)))
	return p
}

// hinted puts a hint over a control governed by ctl, shown when the engine ignores ctl.
func (p *voicePanel) hinted(ctl tts.Control, o fyne.CanvasObject) fyne.CanvasObject {
	h := newHint(func(f func()) { p.u.do(f) }) // through u.do as it is when the hint fires
	p.hints[ctl] = append(p.hints[ctl], h)
	return h.overlay(o)
}

// refresh loads the voice list and the engine's capabilities (off the UI goroutine).
func (p *voicePanel) refresh() {
	svc := p.u.svc.Voices
	if svc == nil {
		p.status.SetText("The voice library is not available in this build.")
		return
	}
	engine := p.engine
	go func() {
		list, err := svc.List()
		caps, cerr := svc.Capabilities(engine)
		p.u.do(func() {
			if engine != p.engine {
				return // the engine changed meanwhile; its own refresh follows
			}
			if err != nil {
				p.status.SetText("Voice library: " + err.Error())
			}
			if cerr != nil {
				p.status.SetText("Engine " + engine + ": " + cerr.Error())
				caps = tts.Capabilities{}
			} else if p.engineErr {
				p.status.SetText("") // the last engine's error is not this one's
			}
			p.engineErr = cerr != nil
			p.setVoices(list, caps)
			p.setCaps(caps)
			if cerr != nil {
				// not the last engine's table under the last engine's name
				p.capsTitle.SetText(engine + " is not available")
			}
		})
	}()
}

// sameEngine says whether a voice made for engine a runs on engine b.
func sameEngine(a, b string) bool { return normEngine(a) == normEngine(b) }

// normEngine is the name library voices use for an engine ("espeak-ng" is "espeak").
func normEngine(e string) string {
	e = strings.ToLower(e)
	if e == "espeak-ng" || e == "" {
		return "espeak"
	}
	return e
}

// setVoices fills the picker: the engine default, the library's voices for this engine,
// then the engine's own voices from its capability report.
func (p *voicePanel) setVoices(list []*voices.Voice, caps tts.Capabilities) {
	p.list = list
	engine := p.engine
	if caps.Engine != "" {
		engine = caps.Engine // "auto" is the engine it chose
	}
	labels := []string{defaultVoiceLabel}
	p.choices = map[string]voiceChoice{defaultVoiceLabel: {}}
	for _, v := range list {
		if !sameEngine(v.Engine, engine) {
			continue
		}
		l := v.Name + " (saved)"
		labels = append(labels, l)
		p.choices[l] = voiceChoice{name: v.Name, saved: true}
	}
	own := append([]string(nil), caps.Voices...)
	sort.Strings(own)
	for _, v := range own {
		if _, dup := p.choices[v]; !dup {
			labels = append(labels, v)
			p.choices[v] = voiceChoice{name: v}
		}
	}
	sel := p.picker.Selected
	if _, ok := p.choices[sel]; !ok {
		sel = defaultVoiceLabel
		if c := p.u.svc.Config; c != nil && c.TTS.Voice != "" && sameEngine(c.TTS.Engine, engine) {
			for l, ch := range p.choices {
				if ch.name == c.TTS.Voice {
					sel = l
				}
			}
		}
	}
	p.picker.Options = labels
	p.picker.Selected = sel
	p.picker.Refresh()
}

// pick applies a library voice's seed and defaults.
func (p *voicePanel) pick(label string) {
	ch := p.choices[label]
	if !ch.saved {
		return
	}
	for _, v := range p.list {
		if v.Name != ch.name {
			continue
		}
		if v.Seed != nil && !p.lock.Checked {
			p.seed.SetText(strconv.FormatInt(*v.Seed, 10))
		}
		d := v.Defaults
		set := func(s *widget.Slider, x float64) {
			if x > 0 {
				s.SetValue(x)
			}
		}
		set(p.temp, d.Temperature)
		set(p.topP, d.TopP)
		set(p.topK, float64(d.TopK))
		set(p.speed, d.Speed)
	}
}

// roll draws a seed unless it is locked: the engine's suggested seeds first, in a random order
// (each sounds like a voice; a random seed may whisper), then any seed.
func (p *voicePanel) roll() {
	if p.lock.Checked {
		return
	}
	if cur, err := strconv.ParseInt(p.seed.Text, 10, 64); err == nil {
		p.suggested = slices.DeleteFunc(p.suggested, func(s int64) bool { return s == cur }) // a roll changes the seed
	}
	if n := len(p.suggested); n > 0 {
		i := int(p.rnd() % int64(n))
		s := p.suggested[i]
		p.suggested = slices.Delete(p.suggested, i, i+1)
		p.seed.SetText(strconv.FormatInt(s, 10))
		return
	}
	p.seed.SetText(strconv.FormatInt(p.rnd(), 10))
}

// applySeedState enables the seed controls unless locked or ignored by the engine.
func (p *voicePanel) applySeedState() {
	if p.lock.Checked || p.ignored(tts.CtlSeed) {
		p.seed.Disable()
		p.dice.Disable()
	} else {
		p.seed.Enable()
		p.dice.Enable()
	}
	if p.ignored(tts.CtlSeed) {
		p.lock.Disable()
	} else {
		p.lock.Enable()
	}
}

// ignored says whether the engine shown ignores ctl (false before its report arrived).
func (p *voicePanel) ignored(ctl tts.Control) bool {
	h := p.hints[ctl]
	return len(h) > 0 && h[0].text != ""
}

// insert types a control token at the preview text's cursor (replacing a selection).
func (p *voicePanel) insert(tok string) {
	for _, r := range tok {
		p.text.TypedRune(r)
	}
	if c := fyne.CurrentApp().Driver().CanvasForObject(p.text); c != nil {
		c.Focus(p.text)
	}
}

// Request is the synthesis request the panel describes. A library voice goes by its name
// (the service applies it); an engine voice by the engine's name for it.
func (p *voicePanel) Request() tts.Request {
	r := tts.Request{
		Text:        p.text.Text,
		Temperature: round2(p.temp.Value),
		TopP:        round2(p.topP.Value),
		TopK:        int(p.topK.Value),
		Speed:       round2(p.speed.Value),
	}
	if ch, ok := p.choices[p.picker.Selected]; ok {
		r.Voice = ch.name
	} else if s := p.picker.Selected; s != "" && s != defaultVoiceLabel {
		r.Voice = s
	}
	if s, err := strconv.ParseInt(strings.TrimSpace(p.seed.Text), 10, 64); err == nil && !p.ignored(tts.CtlSeed) {
		r.Seed, r.HasSeed = s, true
	}
	return r
}

func round2(x float64) float64 { return float64(int(x*100+0.5)) / 100 }

// play synthesizes the panel's request and plays it; a second press stops it.
func (p *voicePanel) play() {
	req := p.Request()
	if p.OnPlay != nil {
		p.OnPlay(req)
	}
	if p.cancel != nil {
		p.cancel()
		return
	}
	svc := p.u.svc.Voices
	if svc == nil {
		p.status.SetText("Preview needs the voice engine, which is not available here.")
		return
	}
	ctx := p.busy()
	p.status.SetText("Synthesizing…")
	engine := p.engine
	go func() {
		b, err := svc.Synthesize(ctx, engine, req)
		p.u.do(func() {
			if err != nil {
				p.done(err, nil)
				return
			}
			p.last = b
			p.replay.Enable()
			p.saveWAV.Enable()
			p.status.SetText(fmt.Sprintf("Playing %s…", clipText(b)))
			go func() {
				err := svc.Play(ctx, b)
				p.u.do(func() { p.done(err, b) })
			}()
		})
	}()
}

// playLast plays the last preview again, without synthesizing it again.
func (p *voicePanel) playLast() {
	svc, b := p.u.svc.Voices, p.last
	if svc == nil || b == nil {
		return
	}
	if p.cancel != nil {
		p.cancel()
		return
	}
	ctx := p.busy()
	p.status.SetText(fmt.Sprintf("Playing %s…", clipText(b)))
	go func() {
		err := svc.Play(ctx, b)
		p.u.do(func() { p.done(err, b) })
	}()
}

// busy turns Preview into Stop and returns the context a press of Stop cancels.
func (p *voicePanel) busy() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.preview.SetText("Stop")
	p.preview.SetIcon(theme.MediaStopIcon())
	p.replay.Disable()
	return ctx
}

// done ends a preview: Preview again, and what happened.
func (p *voicePanel) done(err error, b *audio.Buffer) {
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
	p.preview.SetText("Preview")
	p.preview.SetIcon(theme.MediaPlayIcon())
	if p.last != nil {
		p.replay.Enable()
	}
	switch {
	case errors.Is(err, context.Canceled):
		p.status.SetText("Stopped.")
	case err != nil:
		p.status.SetText("Preview failed: " + err.Error())
	default:
		p.status.SetText(fmt.Sprintf("Played %s. Replay it, or keep it with Save WAV….", clipText(b)))
	}
}

// clipText describes a preview: "2.4 s at 24 kHz".
func clipText(b *audio.Buffer) string {
	if b == nil || b.SampleRate <= 0 {
		return "the preview"
	}
	return fmt.Sprintf("%.1f s at %g kHz", float64(b.Frames())/float64(b.SampleRate), float64(b.SampleRate)/1000)
}

// saveWAVDialog writes the last preview to a WAV file the user picks.
func (p *voicePanel) saveWAVDialog() {
	b := p.last
	if b == nil {
		return
	}
	name := "parley-preview"
	if v := p.Request().Voice; v != "" {
		name += "-" + v
	}
	p.u.saveDialog(name+".wav", p.status, "Saved", "Could not save the WAV", func(dst io.Writer, _ string) error {
		return audio.WriteWAV(dst, b, audio.S16)
	})
}

// saveDialog asks for a name and saves the panel's settings as a library voice. The name
// is filled in (Save is enabled at once); Enter saves, Escape closes.
func (p *voicePanel) saveDialog() {
	name := newEscEntry()
	name.SetText(p.suggestName())
	name.Validator = voices.ValidName
	var d *dialog.FormDialog
	d = dialog.NewForm("Save as voice", "Save", "Cancel", []*widget.FormItem{
		{Text: "Name", Widget: name, HintText: "a-z, 0-9, '-', '_', '.'"},
	}, func(ok bool) {
		p.dlg = nil
		if ok {
			p.saveAs(name.Text)
		}
	}, p.u.win)
	name.onEscape = d.Hide
	name.OnSubmitted = func(string) { d.Submit() }
	d.Resize(fyne.NewSize(380, d.MinSize().Height))
	p.dlg = d
	p.u.showDialog(d)
	if p.u.win != nil {
		p.u.win.Canvas().Focus(name)
	}
}

// suggestName proposes a library name that is not taken: from the seed or the voice picked.
func (p *voicePanel) suggestName() string {
	r := p.Request()
	base := "my-voice"
	switch {
	case r.HasSeed:
		base = "seed-" + strconv.FormatInt(r.Seed, 10)
	case r.Voice != "":
		base = strings.ToLower(r.Voice)
	}
	if voices.ValidName(base) != nil {
		base = "my-voice"
	}
	taken := map[string]bool{}
	for _, v := range p.list {
		taken[v.Name] = true
	}
	name := base
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name
}

// saveAs stores the panel's settings as a library voice.
func (p *voicePanel) saveAs(name string) error {
	svc := p.u.svc.Voices
	if svc == nil {
		return ErrUnavailable
	}
	req := p.Request()
	engine := normEngine(p.engineName())
	var v *voices.Voice
	if ch := p.choices[p.picker.Selected]; ch.saved {
		for _, lv := range p.list { // a copy of the library voice with the panel's controls
			if lv.Name == ch.name {
				c := *lv
				v = &c
				v.Name = name
			}
		}
	}
	if v == nil {
		kind := voices.KindPreset
		if req.HasSeed {
			kind = voices.KindSeed
		}
		v = voices.New(name, engine, kind)
		v.Preset = req.Voice
		if req.HasSeed {
			s := req.Seed
			v.Seed = &s
		}
	} else if req.HasSeed && v.Kind == voices.KindSeed {
		s := req.Seed
		v.Seed = &s
	}
	v.Defaults = voices.Defaults{Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK, Speed: req.Speed}
	err := svc.Save(v)
	if err != nil {
		p.status.SetText("Could not save: " + err.Error())
		return err
	}
	p.status.SetText("Saved voice " + name)
	p.refresh()
	return nil
}

// engineName is the engine the panel's voice runs on: the one "auto" chose, once known.
func (p *voicePanel) engineName() string {
	if p.engine == "auto" && p.capsFor != "" {
		return p.capsFor
	}
	return p.engine
}

// useInConversation makes the panel's engine, voice and controls the assistant's (tts.* in
// the configuration, saved; the assistant restarts with them).
func (p *voicePanel) useInConversation() {
	base, save := p.u.svc.Config, p.u.svc.SaveConfig
	if base == nil || save == nil {
		p.status.SetText("Saving settings is not available here.")
		return
	}
	c := *base
	r := p.Request()
	c.TTS.Engine = p.engine
	c.TTS.Voice, c.TTS.Seed = r.Voice, 0
	if r.HasSeed {
		c.TTS.Seed = r.Seed
	}
	c.TTS.Temperature, c.TTS.TopP, c.TTS.TopK, c.TTS.Speed = r.Temperature, r.TopP, r.TopK, r.Speed
	p.status.SetText("Applying…")
	go func() {
		err := save(&c)
		p.u.do(func() {
			if err != nil {
				p.status.SetText("Could not apply: " + err.Error())
				return
			}
			*base = c
			p.status.SetText("Parley now speaks with this voice.")
		})
	}()
}

// capRows are the controls the panel shows, with the widget each one governs.
var capRows = []struct {
	ctl   tts.Control
	label string
}{
	{tts.CtlSeed, "Seed"}, {tts.CtlTemperature, "Temperature"}, {tts.CtlTopP, "Top-p"}, {tts.CtlTopK, "Top-k"},
	{tts.CtlSpeed, "Speed"}, {tts.CtlLaugh, "[laugh]"}, {tts.CtlPause, "Pauses"},
	{tts.CtlBreath, "[breath]"}, {tts.CtlEmphasis, "Emphasis"}, {tts.CtlStreaming, "Streaming"},
}

// ignoredWhy says why a control does nothing on an engine, for its hint.
func ignoredWhy(engine string, ctl tts.Control) string {
	what := map[tts.Control]string{
		tts.CtlSeed:        "it has no random speaker for a seed to pick",
		tts.CtlTemperature: "it does not sample its speech",
		tts.CtlTopP:        "it does not sample its speech",
		tts.CtlTopK:        "it does not sample its speech",
		tts.CtlSpeed:       "it speaks at its own pace",
		tts.CtlLaugh:       "it cannot laugh",
		tts.CtlPause:       "it ignores pause tokens",
	}[ctl]
	if what == "" {
		what = "it does not support this"
	}
	return fmt.Sprintf("%s ignores this: %s.", engine, what)
}

// setCaps shows native / emulated / ignored per control, and disables the controls the
// engine ignores, with the reason on hover.
func (p *voicePanel) setCaps(c tts.Capabilities) {
	if c.Engine != p.capsFor || c.Model != p.capsModel {
		p.suggested = slices.Clone(c.SuggestedSeeds)
	}
	p.capsFor, p.capsModel = c.Engine, c.Model
	if c.Engine != "" {
		p.capsTitle.SetText("What " + c.Engine + " does")
	}
	p.caps.RemoveAll()
	known := c.Controls != nil
	for _, r := range capRows {
		s := c.Support(r.ctl)
		l := widget.NewLabel(r.label)
		v := widget.NewLabelWithStyle(s.String(), fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
		switch s {
		case tts.Native:
			v.Importance = widget.SuccessImportance
		case tts.Emulated:
			v.Importance = widget.WarningImportance
			if note := c.Notes[r.ctl]; note != "" {
				v.SetText("emulated — " + note)
				v.Wrapping = fyne.TextWrapWord
			}
		default:
			v.Importance = widget.LowImportance
		}
		if known {
			p.caps.Add(container.NewBorder(nil, nil, container.New(&kit.FixedWidth{W: 130}, l), nil, v))
		}
	}
	for ctl, hs := range p.hints {
		why := ""
		if known && c.Support(ctl) == tts.Ignored {
			why = ignoredWhy(c.Engine, ctl)
		}
		for _, h := range hs {
			h.set(why)
		}
	}
	enable := func(on bool, ws ...fyne.Disableable) {
		for _, w := range ws {
			if on {
				w.Enable()
			} else {
				w.Disable()
			}
		}
	}
	enable(!p.ignored(tts.CtlTemperature), p.temp)
	enable(!p.ignored(tts.CtlTopP), p.topP)
	enable(!p.ignored(tts.CtlTopK), p.topK)
	enable(!p.ignored(tts.CtlSpeed), p.speed)
	enable(!p.ignored(tts.CtlLaugh), p.tokens["[laugh]"])
	enable(!p.ignored(tts.CtlPause), p.tokens["[uv_break]"], p.tokens["[lbreak]"], p.tokens["[break_N]"], p.breakN)
	p.applySeedState()
	p.caps.Refresh()
	p.content.Refresh()
}
