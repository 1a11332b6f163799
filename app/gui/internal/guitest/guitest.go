// Package guitest holds what the desktop app's tests and its wizard's tests both use to read
// a Fyne widget tree. Only tests import it.
package guitest

import (
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/gui/kit"
)

// Walk calls fn on o and on everything drawn under it: a container's objects and a widget's
// renderer's objects, depth first.
func Walk(o fyne.CanvasObject, fn func(fyne.CanvasObject)) {
	fn(o)
	switch v := o.(type) {
	case *fyne.Container:
		for _, ch := range v.Objects {
			Walk(ch, fn)
		}
	case fyne.Widget:
		for _, ch := range test.WidgetRenderer(v).Objects() {
			Walk(ch, fn)
		}
	}
}

// Shown is what o shows (visible labels, notices and buttons, "[text]" for a button), one per
// line, everything drawn under it included.
func Shown(o fyne.CanvasObject) string {
	var b strings.Builder
	Walk(o, func(o fyne.CanvasObject) {
		switch v := o.(type) {
		case *widget.Label:
			if v.Visible() {
				b.WriteString(v.Text + "\n")
			}
		case *kit.Notice:
			if v.Visible() {
				b.WriteString(v.Text + "\n")
			}
		case *widget.Button:
			if v.Visible() {
				b.WriteString("[" + v.Text + "]\n")
			}
		}
	})
	return b.String()
}
