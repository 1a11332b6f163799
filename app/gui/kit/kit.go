// Package kit holds the small Fyne widgets, layouts and words that the desktop app
// (app/gui) and its fine-tune wizard (app/gui/wizard) both draw with. The theme that gives
// the colour names below their colours is app/gui's.
package kit

import (
	"image/color"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// Colour names the widgets here draw with; app/gui's theme maps them for light and dark.
const (
	ColMeter      fyne.ThemeColorName = "parley.meter"
	ColMeterTrack fyne.ThemeColorName = "parley.meterTrack"
	ColWave       fyne.ThemeColorName = "parley.wave"
)

// ThemeColor is a colour of the running app's theme.
func ThemeColor(n fyne.ThemeColorName) color.Color { return theme.Color(n) }

// Heading is a section title.
func Heading(s string) fyne.CanvasObject {
	l := widget.NewLabelWithStyle(s, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	l.SizeName = theme.SizeNameSubHeadingText
	return l
}

// OrDefault is s, or def when s is blank.
func OrDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// Plural is the "s" of n things ("" for one).
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
