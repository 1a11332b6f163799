package kit

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// ThemedRect is a rounded rectangle filled with a theme colour; it follows light/dark
// switches because widgets are refreshed when the theme changes.
type ThemedRect struct {
	widget.BaseWidget
	name   fyne.ThemeColorName
	radius float32
	rect   *canvas.Rectangle
	min    fyne.Size
}

func NewThemedRect(name fyne.ThemeColorName, radius float32) *ThemedRect {
	r := &ThemedRect{name: name, radius: radius, rect: canvas.NewRectangle(color.Transparent)}
	r.rect.CornerRadius = radius
	r.ExtendBaseWidget(r)
	return r
}

// SetColor changes the colour name and repaints.
func (r *ThemedRect) SetColor(name fyne.ThemeColorName) {
	if r.name == name {
		return
	}
	r.name = name
	r.Refresh()
}

func (r *ThemedRect) CreateRenderer() fyne.WidgetRenderer {
	r.rect.FillColor = theme.Color(r.name)
	return &themedRectRenderer{r: r}
}

type themedRectRenderer struct{ r *ThemedRect }

func (t *themedRectRenderer) Layout(s fyne.Size)           { t.r.rect.Resize(s) }
func (t *themedRectRenderer) MinSize() fyne.Size           { return t.r.min }
func (t *themedRectRenderer) Objects() []fyne.CanvasObject { return []fyne.CanvasObject{t.r.rect} }
func (t *themedRectRenderer) Destroy()                     {}
func (t *themedRectRenderer) Refresh() {
	t.r.rect.FillColor = theme.Color(t.r.name)
	t.r.rect.CornerRadius = t.r.radius
	t.r.rect.Refresh()
}

// LevelMeter shows the capture level (dBFS) as a bar.
type LevelMeter struct {
	widget.BaseWidget
	track, fill *ThemedRect
	frac        float32
}

func NewLevelMeter() *LevelMeter {
	m := &LevelMeter{track: NewThemedRect(ColMeterTrack, 3), fill: NewThemedRect(ColMeter, 3)}
	m.ExtendBaseWidget(m)
	return m
}

// meterSteps is the meter's resolution: a level that does not move the bar by a step does
// not repaint the window.
const meterSteps = 30

// SetLevel maps -60…0 dBFS onto the bar.
func (m *LevelMeter) SetLevel(db float64) {
	f := float32((db + 60) / 60)
	f = max(0, min(1, f))
	f = float32(int(f*meterSteps+0.5)) / meterSteps
	if f == m.frac {
		return
	}
	m.frac = f
	m.Refresh()
}

// Fraction is how much of the bar is filled (0…1).
func (m *LevelMeter) Fraction() float32 { return m.frac }

func (m *LevelMeter) CreateRenderer() fyne.WidgetRenderer {
	return &meterRenderer{m: m}
}

type meterRenderer struct{ m *LevelMeter }

func (r *meterRenderer) Layout(s fyne.Size) {
	r.m.track.Resize(s)
	r.m.fill.Resize(fyne.NewSize(s.Width*r.m.frac, s.Height))
}
func (r *meterRenderer) MinSize() fyne.Size { return fyne.NewSize(90, 8) }
func (r *meterRenderer) Refresh() {
	r.Layout(r.m.Size())
	r.m.track.Refresh()
	r.m.fill.Refresh()
}
func (r *meterRenderer) Objects() []fyne.CanvasObject {
	return []fyne.CanvasObject{r.m.track, r.m.fill}
}
func (r *meterRenderer) Destroy() {}

// FixedWidth gives its objects one fixed width, W (and their own height).
type FixedWidth struct{ W float32 }

func (l *FixedWidth) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	for _, o := range objs {
		o.Resize(fyne.NewSize(l.W, size.Height))
		o.Move(fyne.NewPos(0, 0))
	}
}

func (l *FixedWidth) MinSize(objs []fyne.CanvasObject) fyne.Size {
	h := float32(0)
	for _, o := range objs {
		h = max(h, o.MinSize().Height)
	}
	return fyne.NewSize(l.W, h)
}

// LayoutSpacer is an empty gap w wide.
func LayoutSpacer(w float32) fyne.CanvasObject {
	r := canvas.NewRectangle(color.Transparent)
	r.SetMinSize(fyne.NewSize(w, 1))
	return r
}

// Columns lays out two objects side by side (the first taking Split of the width) when the
// width allows Wide, else one above the other; its minimum width is the wider object's, so
// the panel never forces the window wider.
type Columns struct {
	Wide  float32
	Split float32
}

func (l *Columns) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	if len(objs) != 2 {
		return
	}
	a, b := objs[0], objs[1]
	pad := theme.Padding() * 4
	if size.Width >= l.Wide {
		wa := (size.Width - pad) * l.Split
		a.Move(fyne.NewPos(0, 0))
		a.Resize(fyne.NewSize(wa, a.MinSize().Height))
		b.Move(fyne.NewPos(wa+pad, 0))
		b.Resize(fyne.NewSize(size.Width-wa-pad, b.MinSize().Height))
		return
	}
	a.Move(fyne.NewPos(0, 0))
	a.Resize(fyne.NewSize(size.Width, a.MinSize().Height))
	b.Move(fyne.NewPos(0, a.MinSize().Height+pad))
	b.Resize(fyne.NewSize(size.Width, b.MinSize().Height))
}

func (l *Columns) MinSize(objs []fyne.CanvasObject) fyne.Size {
	if len(objs) != 2 {
		return fyne.Size{}
	}
	a, b := objs[0].MinSize(), objs[1].MinSize()
	// the height of the stacked form: the scroll around it takes what is not needed
	return fyne.NewSize(max(a.Width, b.Width), a.Height+b.Height+theme.Padding()*4)
}

// Notice is a wrapped message that takes no room while it is empty.
type Notice struct{ widget.Label }

func NewNotice() *Notice {
	n := &Notice{}
	n.Wrapping = fyne.TextWrapWord
	n.ExtendBaseWidget(n)
	n.Hide()
	return n
}

// SetText shows the message, or hides the note for "".
func (n *Notice) SetText(s string) {
	n.Label.SetText(s)
	if s == "" {
		n.Hide()
	} else {
		n.Show()
	}
}
