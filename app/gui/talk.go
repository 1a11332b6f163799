package gui

import (
	"image/color"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app"

	"github.com/parley-voice/parley/app/gui/kit"
)

// modeNames are the microphone modes as the selector shows them, in app.Mode order.
var modeNames = []string{"Push to talk", "Hands-free", "Wake word"}

// talkBar is the strip under the conversation: the waveform of the last utterance, the
// microphone with its mode, the level meter and VAD light, the state, stop, and the text box.
type talkBar struct {
	mic       *widget.Button
	mode      *widget.Select
	stop      *widget.Button
	entry     *widget.Entry
	send      *widget.Button
	meter     *kit.LevelMeter
	vad       *canvas.Circle
	state     *widget.Label
	stateDot  *canvas.Circle
	wave      *waveform
	listening bool // push-to-talk utterance open
	live      bool // levels arrived since Talk: the microphone is open
	box       fyne.CanvasObject
}

func newTalkBar(u *UI) *talkBar {
	t := &talkBar{}
	t.mic = widget.NewButtonWithIcon("Talk", micIcon(), func() { u.toggleTalk() })
	t.mic.Importance = widget.HighImportance
	t.mode = widget.NewSelect(modeNames, nil)
	t.mode.SetSelectedIndex(0)
	t.mode.OnChanged = func(string) { u.changeMode(app.Mode(t.mode.SelectedIndex())) }
	t.stop = widget.NewButtonWithIcon("Stop", theme.MediaStopIcon(), func() { u.stopTalking() })
	t.stop.Importance = widget.DangerImportance
	t.stop.Disable()
	t.entry = widget.NewEntry()
	t.entry.SetPlaceHolder("Type a message and press Enter…")
	t.entry.OnSubmitted = func(s string) { u.submit(s) }
	t.send = widget.NewButtonWithIcon("", theme.MailSendIcon(), func() { u.submit(t.entry.Text) })
	t.send.Importance = widget.HighImportance
	t.meter = kit.NewLevelMeter()
	t.vad = canvas.NewCircle(kit.ThemeColor(colMeterTrack))
	t.stateDot = canvas.NewCircle(theme.Color(theme.ColorNameDisabled))
	t.state = widget.NewLabelWithStyle("Starting…", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	t.state.Truncation = fyne.TextTruncateEllipsis
	t.wave = newWaveform()

	dot := container.NewGridWrap(fyne.NewSize(10, 10), t.vad)
	sdot := container.NewGridWrap(fyne.NewSize(10, 10), t.stateDot)
	// the status keeps one width whatever it says, so the meter beside it never moves
	state := container.New(&kit.FixedWidth{W: statusWidth()}, t.state)
	status := container.NewHBox(container.NewCenter(sdot), state, container.NewCenter(t.meter), container.NewCenter(dot))
	controls := container.NewHBox(t.mic, t.mode, t.stop)
	top := container.NewBorder(nil, nil, status, controls)
	input := container.NewBorder(nil, nil, nil, t.send, t.entry)
	t.box = container.NewVBox(widget.NewSeparator(), top, t.wave, input)
	return t
}

// statusTexts are every text the status shows (states, mode switches, start-up), for its
// fixed width.
func statusTexts() []string {
	out := []string{"Starting…", "Restarting…", "Not running", "Microphone muted", "Wake word heard", "Opening mic…"}
	for _, s := range stateText {
		out = append(out, s)
	}
	for _, m := range modeNames {
		out = append(out, "Switching to "+strings.ToLower(m)+"…")
	}
	return out
}

// statusWidth is the width of the widest status text (capped: longer ones are truncated).
func statusWidth() float32 {
	w := float32(0)
	for _, s := range statusTexts() {
		w = max(w, fyne.MeasureText(s, theme.TextSize(), fyne.TextStyle{Bold: true}).Width)
	}
	return min(w, 150) + 2*theme.InnerPadding()
}

var stateText = map[app.State]string{
	app.Idle:         "Ready",
	app.Listening:    "Listening…",
	app.Transcribing: "Transcribing…",
	app.Thinking:     "Thinking…",
	app.Speaking:     "Speaking…",
}

func (t *talkBar) setState(s app.State, muted bool) {
	txt := stateText[s]
	col := theme.Color(theme.ColorNameDisabled)
	switch s {
	case app.Listening:
		col = kit.ThemeColor(colVADOn)
	case app.Transcribing:
		col = kit.ThemeColor(colTranscribe)
	case app.Thinking:
		col = kit.ThemeColor(colThink)
	case app.Speaking:
		col = kit.ThemeColor(colAudio)
	}
	if s == app.Listening && t.listening && !t.live {
		txt = "Opening mic…"
	}
	if muted && (s == app.Idle || s == app.Listening) {
		txt, col = "Microphone muted", theme.Color(theme.ColorNameError)
	}
	t.state.Text = txt
	t.state.Refresh()
	t.stateDot.FillColor = col
	t.stateDot.Refresh()
	if s == app.Idle || (s == app.Listening && !t.listening) {
		t.stop.Disable()
	} else {
		t.stop.Enable()
	}
}

func (t *talkBar) setListening(on bool) {
	t.listening = on
	if on {
		t.mic.SetText("Done")
		t.mic.SetIcon(micOffIcon())
		t.mic.Importance = widget.DangerImportance
	} else {
		t.mic.SetText("Talk")
		t.mic.SetIcon(micIcon())
		t.mic.Importance = widget.HighImportance
	}
	t.mic.Refresh()
}

func (t *talkBar) setVAD(on bool) {
	if on {
		t.vad.FillColor = kit.ThemeColor(colVADOn)
	} else {
		t.vad.FillColor = kit.ThemeColor(colMeterTrack)
	}
	t.vad.Refresh()
}

// waveform draws the level envelope of the last utterance (the loop reports levels, not
// samples, so this is the utterance's loudness over time).
type waveform struct {
	widget.BaseWidget
	levels    []float64 // dBFS, the utterance being heard or the last one
	recording bool
	label     *canvas.Text
}

const maxWave = 400

func newWaveform() *waveform {
	w := &waveform{label: canvas.NewText("", theme.Color(theme.ColorNamePlaceHolder))}
	w.label.TextSize = theme.CaptionTextSize()
	w.ExtendBaseWidget(w)
	return w
}

func (w *waveform) start() {
	w.levels = w.levels[:0]
	w.recording = true
	w.Refresh()
}

func (w *waveform) stop() { w.recording = false }

func (w *waveform) add(db float64) {
	if !w.recording {
		return
	}
	if len(w.levels) >= maxWave {
		copy(w.levels, w.levels[1:])
		w.levels = w.levels[:maxWave-1]
	}
	w.levels = append(w.levels, db)
	w.Refresh()
}

func (w *waveform) CreateRenderer() fyne.WidgetRenderer { return &waveRenderer{w: w} }

// waveRenderer keeps its bars between frames: a new level moves and resizes them, it does
// not allocate.
type waveRenderer struct {
	w     *waveform
	bars  []*canvas.Rectangle
	objs  []fyne.CanvasObject
	shown int
	size  fyne.Size
}

func (r *waveRenderer) Layout(s fyne.Size) { r.size = s; r.build() }
func (r *waveRenderer) MinSize() fyne.Size { return fyne.NewSize(120, 28) }
func (r *waveRenderer) Refresh()           { r.build(); canvas.Refresh(r.w) }
func (r *waveRenderer) Destroy()           {}
func (r *waveRenderer) Objects() []fyne.CanvasObject {
	return r.objs
}

const waveStep = 4

func (r *waveRenderer) build() {
	s := r.size
	lv := r.w.levels
	n := int(s.Width / waveStep)
	for len(r.bars) < n {
		b := canvas.NewRectangle(color.Transparent)
		b.CornerRadius = 1
		r.bars = append(r.bars, b)
	}
	r.objs = r.objs[:0]
	r.w.label.Color = theme.Color(theme.ColorNamePlaceHolder)
	if len(lv) == 0 {
		r.w.label.Text = "the waveform of what you say appears here"
		r.w.label.Move(fyne.NewPos(8, (s.Height-r.w.label.MinSize().Height)/2))
		r.w.label.Resize(r.w.label.MinSize())
		r.objs = append(r.objs, r.w.label)
		return
	}
	col := kit.ThemeColor(colWave)
	r.shown = min(n, len(lv))
	for i := 0; i < r.shown; i++ {
		// the newest levels on the right when there are more than fit
		v := lv[max(0, len(lv)-n)+i]
		f := float32((v + 60) / 60)
		f = max(0.04, min(1, f))
		h := f * s.Height
		b := r.bars[i]
		b.FillColor = col
		b.Resize(fyne.NewSize(waveStep-1.5, h))
		b.Move(fyne.NewPos(float32(i)*waveStep, (s.Height-h)/2))
		r.objs = append(r.objs, b)
	}
}
