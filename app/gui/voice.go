package gui

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"
)

// defaultVoiceLabel is the picker's entry for the engine's own default voice.
const defaultVoiceLabel = "Engine default"

// voicePanel picks and tunes the voice: library voice, seed (dice, lock), sampling sliders,
// control-token buttons over a preview text, Preview and Save as voice, and how the engine
// honours each control.
type voicePanel struct {
	u       *UI
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
	save    *widget.Button
	use     *widget.Button
	status  *widget.Label
	caps    *fyne.Container
	content fyne.CanvasObject

	list    []*voices.Voice
	engine  string
	rnd     func() int64
	cancel  context.CancelFunc
	loaded  bool
	OnPlay  func(tts.Request) // tests
	tokens  map[string]*widget.Button
	capsFor string
}

func newVoicePanel(u *UI) *voicePanel {
	p := &voicePanel{u: u, rnd: func() int64 { return rand.Int64N(1<<31-1) + 1 }, tokens: map[string]*widget.Button{}}
	p.engine = "espeak"
	if u.svc.Config != nil && u.svc.Config.TTS.Engine != "" {
		p.engine = u.svc.Config.TTS.Engine
	}
	p.picker = widget.NewSelect([]string{defaultVoiceLabel}, func(name string) { p.pick(name) })
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
	p.lock = widget.NewCheck("Lock", func(on bool) {
		if on {
			p.seed.Disable()
			p.dice.Disable()
		} else {
			p.seed.Enable()
			p.dice.Enable()
		}
	})
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
	for _, tok := range []string{"[laugh]", "[uv_break]", "[lbreak]"} {
		b := widget.NewButton(tok, func() { p.insert(tok) })
		p.tokens[tok] = b
		tokens.Add(b)
	}
	p.breakN = widget.NewSelect([]string{"0", "1", "2", "3", "4", "5", "6", "7"}, nil)
	p.breakN.SetSelected("4")
	bn := widget.NewButton("[break_N]", func() { p.insert("[break_" + p.breakN.Selected + "]") })
	p.tokens["[break_N]"] = bn
	tokens.Add(bn)
	tokens.Add(p.breakN)

	p.preview = widget.NewButtonWithIcon("Preview", theme.MediaPlayIcon(), func() { p.play() })
	p.preview.Importance = widget.HighImportance
	p.save = widget.NewButtonWithIcon("Save as voice…", theme.DocumentSaveIcon(), func() { p.saveDialog() })
	p.use = widget.NewButtonWithIcon("Use in conversation", theme.ConfirmIcon(), func() { p.useInConversation() })
	p.status = widget.NewLabel("")
	p.status.Importance = widget.LowImportance
	p.caps = container.NewGridWithColumns(2)

	seedRow := container.NewBorder(nil, nil, nil, container.NewHBox(p.dice, p.lock), p.seed)
	form := widget.NewForm(
		widget.NewFormItem("Voice", p.picker),
		widget.NewFormItem("Seed", seedRow),
		widget.NewFormItem("Temperature", container.NewBorder(nil, nil, nil, tempL, p.temp)),
		widget.NewFormItem("Top-p", container.NewBorder(nil, nil, nil, topPL, p.topP)),
		widget.NewFormItem("Top-k", container.NewBorder(nil, nil, nil, topKL, p.topK)),
		widget.NewFormItem("Speed", container.NewBorder(nil, nil, nil, speedL, p.speed)),
	)
	left := container.NewVBox(
		heading("Voice"),
		form,
		heading("Preview text"),
		tokens,
		p.text,
		container.NewHBox(p.preview, p.save, p.use, cloneClipButton(u)),
		p.status,
	)
	right := container.NewVBox(heading("What this engine does with each control"), p.caps)
	split := container.NewHSplit(container.NewPadded(left), container.NewPadded(right))
	split.Offset = 0.62
	p.content = container.NewVScroll(split)
	return p
}

// heading is a section title.
func heading(s string) fyne.CanvasObject {
	l := widget.NewLabelWithStyle(s, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	l.SizeName = theme.SizeNameSubHeadingText
	return l
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
			if err != nil {
				p.status.SetText("Voice library: " + err.Error())
			}
			p.setVoices(list)
			if cerr == nil {
				p.setCaps(caps)
			} else {
				p.status.SetText("Engine: " + cerr.Error())
			}
		})
	}()
}

func (p *voicePanel) setVoices(list []*voices.Voice) {
	p.list = list
	names := []string{defaultVoiceLabel}
	for _, v := range list {
		names = append(names, v.Name)
	}
	sel := p.picker.Selected
	p.picker.Options = names
	if sel == "" {
		sel = defaultVoiceLabel
		if c := p.u.svc.Config; c != nil && c.TTS.Voice != "" {
			sel = c.TTS.Voice
		}
	}
	p.picker.Selected = sel
	p.picker.Refresh()
}

// pick applies a library voice's seed and defaults.
func (p *voicePanel) pick(name string) {
	for _, v := range p.list {
		if v.Name != name {
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
		if v.Engine != "" && v.Engine != p.engine {
			p.engine = v.Engine
			p.refresh()
		}
	}
}

// roll draws a new seed unless the seed is locked.
func (p *voicePanel) roll() {
	if p.lock.Checked {
		return
	}
	p.seed.SetText(strconv.FormatInt(p.rnd(), 10))
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

// Request is the synthesis request the panel describes.
func (p *voicePanel) Request() tts.Request {
	r := tts.Request{
		Text:        p.text.Text,
		Temperature: round2(p.temp.Value),
		TopP:        round2(p.topP.Value),
		TopK:        int(p.topK.Value),
		Speed:       round2(p.speed.Value),
	}
	if name := p.picker.Selected; name != "" && name != defaultVoiceLabel {
		r.Voice = name
		for _, v := range p.list {
			if v.Name == name && v.Preset != "" {
				r.Voice = v.Preset
			}
		}
	}
	if s, err := strconv.ParseInt(strings.TrimSpace(p.seed.Text), 10, 64); err == nil {
		r.Seed, r.HasSeed = s, true
	}
	return r
}

func round2(x float64) float64 { return float64(int(x*100+0.5)) / 100 }

func (p *voicePanel) play() {
	req := p.Request()
	if p.OnPlay != nil {
		p.OnPlay(req)
	}
	if p.cancel != nil { // a second press stops the preview
		p.cancel()
		return
	}
	svc := p.u.svc.Voices
	if svc == nil {
		p.status.SetText("Preview needs the voice engine, which is not available here.")
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.preview.SetText("Stop")
	p.preview.SetIcon(theme.MediaStopIcon())
	p.status.SetText("Synthesizing…")
	engine := p.engine
	go func() {
		err := svc.Preview(ctx, engine, req)
		p.u.do(func() {
			p.cancel = nil
			cancel()
			p.preview.SetText("Preview")
			p.preview.SetIcon(theme.MediaPlayIcon())
			switch {
			case err == nil, errors.Is(err, context.Canceled):
				p.status.SetText("")
			default:
				p.status.SetText("Preview failed: " + err.Error())
			}
		})
	}()
}

func (p *voicePanel) saveDialog() {
	name := widget.NewEntry()
	name.SetPlaceHolder("my-voice")
	name.Validator = voices.ValidName
	dialog.ShowForm("Save as voice", "Save", "Cancel", []*widget.FormItem{widget.NewFormItem("Name", name)}, func(ok bool) {
		if ok {
			p.saveAs(name.Text)
		}
	}, p.u.win)
}

// saveAs stores the panel's settings as a library voice.
func (p *voicePanel) saveAs(name string) error {
	svc := p.u.svc.Voices
	if svc == nil {
		return ErrUnavailable
	}
	req := p.Request()
	kind := voices.KindPreset
	if req.HasSeed {
		kind = voices.KindSeed
	}
	v := voices.New(name, p.engine, kind)
	v.Preset = req.Voice
	if req.HasSeed {
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

// useInConversation makes the panel's voice and controls the assistant's (tts.* in the
// configuration, saved; the assistant restarts with them).
func (p *voicePanel) useInConversation() {
	base, save := p.u.svc.Config, p.u.svc.SaveConfig
	if base == nil || save == nil {
		p.status.SetText("Saving settings is not available here.")
		return
	}
	c := *base
	r := p.Request()
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
	{tts.CtlSpeed, "Speed"}, {tts.CtlLaugh, "[laugh]"}, {tts.CtlPause, "[uv_break] [lbreak] [break_N]"},
	{tts.CtlBreath, "[breath]"}, {tts.CtlEmphasis, "Emphasis"}, {tts.CtlStreaming, "Streaming"},
}

// setCaps shows native / emulated / ignored per control, and disables what is ignored.
func (p *voicePanel) setCaps(c tts.Capabilities) {
	p.capsFor = c.Engine
	if p.engine == "auto" { // tts.engine auto: voices saved here belong to the engine it chose
		p.engine = c.Engine
	}
	p.caps.RemoveAll()
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
		p.caps.Add(l)
		p.caps.Add(v)
	}
	p.caps.Refresh()
	p.content.Refresh()
}
