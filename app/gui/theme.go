package gui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// Colour names of Parley's own surfaces; the theme maps them for light and dark variants.
const (
	colUserBubble   fyne.ThemeColorName = "parley.userBubble"
	colUserText     fyne.ThemeColorName = "parley.userText"
	colParleyBubble fyne.ThemeColorName = "parley.parleyBubble"
	colBadge        fyne.ThemeColorName = "parley.badge"
	colTranscribe   fyne.ThemeColorName = "parley.transcribe"
	colThink        fyne.ThemeColorName = "parley.think"
	colAudio        fyne.ThemeColorName = "parley.audio"
	colMeter        fyne.ThemeColorName = "parley.meter"
	colMeterTrack   fyne.ThemeColorName = "parley.meterTrack"
	colVADOn        fyne.ThemeColorName = "parley.vadOn"
	colWave         fyne.ThemeColorName = "parley.wave"
)

// parleyTheme is Fyne's default theme (which follows the system's light or dark preference)
// with Parley's accent colour and the colours of bubbles, badges and meters.
type parleyTheme struct{ fyne.Theme }

func newTheme() fyne.Theme { return parleyTheme{theme.DefaultTheme()} }

var (
	accent     = color.NRGBA{R: 0x4f, G: 0x5b, B: 0xd5, A: 0xff} // indigo
	accentDark = color.NRGBA{R: 0x7c, G: 0x86, B: 0xf0, A: 0xff}
)

func (t parleyTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	dark := v != theme.VariantLight
	pick := func(light, darkc color.NRGBA) color.Color {
		if dark {
			return darkc
		}
		return light
	}
	switch n {
	case theme.ColorNamePrimary, theme.ColorNameFocus:
		if n == theme.ColorNameFocus {
			c := accent
			c.A = 0x60
			return c
		}
		return pick(accent, accentDark)
	case theme.ColorNameSelection:
		return pick(color.NRGBA{R: 0x4f, G: 0x5b, B: 0xd5, A: 0x30}, color.NRGBA{R: 0x7c, G: 0x86, B: 0xf0, A: 0x40})
	case colUserBubble:
		return pick(accent, color.NRGBA{R: 0x45, G: 0x4f, B: 0xb8, A: 0xff})
	case colUserText:
		return color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xff}
	case colParleyBubble:
		return pick(color.NRGBA{R: 0xee, G: 0xf0, B: 0xf5, A: 0xff}, color.NRGBA{R: 0x2c, G: 0x2f, B: 0x38, A: 0xff})
	case colBadge:
		return pick(color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0x38}, color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0x28})
	case colTranscribe:
		return color.NRGBA{R: 0x26, G: 0xa6, B: 0x9a, A: 0xff}
	case colThink:
		return color.NRGBA{R: 0xf5, G: 0x9e, B: 0x0b, A: 0xff}
	case colAudio:
		return color.NRGBA{R: 0x8b, G: 0x5c, B: 0xf6, A: 0xff}
	case colMeter:
		return color.NRGBA{R: 0x22, G: 0xc5, B: 0x5e, A: 0xff}
	case colMeterTrack:
		return pick(color.NRGBA{R: 0xdd, G: 0xe1, B: 0xe8, A: 0xff}, color.NRGBA{R: 0x3a, G: 0x3e, B: 0x48, A: 0xff})
	case colVADOn:
		return color.NRGBA{R: 0x22, G: 0xc5, B: 0x5e, A: 0xff}
	case colWave:
		return pick(color.NRGBA{R: 0x4f, G: 0x5b, B: 0xd5, A: 0xb0}, color.NRGBA{R: 0x7c, G: 0x86, B: 0xf0, A: 0xc0})
	}
	return t.Theme.Color(n, v)
}

func (t parleyTheme) Size(n fyne.ThemeSizeName) float32 {
	switch n {
	case theme.SizeNameInputRadius, theme.SizeNameSelectionRadius:
		return 6
	}
	return t.Theme.Size(n)
}

// themeColor is a colour of the running app's theme.
func themeColor(n fyne.ThemeColorName) color.Color { return theme.Color(n) }

// themedRect is a rounded rectangle filled with a theme colour; it follows light/dark
// switches because widgets are refreshed when the theme changes.
type themedRect struct {
	widget.BaseWidget
	name   fyne.ThemeColorName
	radius float32
	rect   *canvas.Rectangle
	min    fyne.Size
}

func newThemedRect(name fyne.ThemeColorName, radius float32) *themedRect {
	r := &themedRect{name: name, radius: radius, rect: canvas.NewRectangle(color.Transparent)}
	r.rect.CornerRadius = radius
	r.ExtendBaseWidget(r)
	return r
}

// setColor changes the colour name and repaints.
func (r *themedRect) setColor(name fyne.ThemeColorName) {
	if r.name == name {
		return
	}
	r.name = name
	r.Refresh()
}

func (r *themedRect) CreateRenderer() fyne.WidgetRenderer {
	r.rect.FillColor = theme.Color(r.name)
	return &themedRectRenderer{r: r}
}

type themedRectRenderer struct{ r *themedRect }

func (t *themedRectRenderer) Layout(s fyne.Size)           { t.r.rect.Resize(s) }
func (t *themedRectRenderer) MinSize() fyne.Size           { return t.r.min }
func (t *themedRectRenderer) Objects() []fyne.CanvasObject { return []fyne.CanvasObject{t.r.rect} }
func (t *themedRectRenderer) Destroy()                     {}
func (t *themedRectRenderer) Refresh() {
	t.r.rect.FillColor = theme.Color(t.r.name)
	t.r.rect.CornerRadius = t.r.radius
	t.r.rect.Refresh()
}
