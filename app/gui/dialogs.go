package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"
)

// escEntry is an entry that hands Escape to onEscape (a dialog's Hide): a focused entry
// takes every key, so the window's own Escape handler never sees it.
type escEntry struct {
	widget.Entry
	onEscape func()
}

func newEscEntry() *escEntry {
	e := &escEntry{}
	e.ExtendBaseWidget(e)
	return e
}

// TypedKey implements fyne.Focusable.
func (e *escEntry) TypedKey(k *fyne.KeyEvent) {
	if k.Name == fyne.KeyEscape && e.onEscape != nil {
		e.onEscape()
		return
	}
	e.Entry.TypedKey(k)
}

// showDialog shows d and remembers it, so that Escape closes it when nothing in it has the
// focus.
func (u *UI) showDialog(d dialog.Dialog) {
	u.dlg = d
	d.SetOnClosed(func() {
		if u.dlg == d {
			u.dlg = nil
		}
	})
	d.Show()
}

// escape closes the open dialog, or else stops Parley.
func (u *UI) escape() {
	if d := u.dlg; d != nil {
		u.dlg = nil
		d.Hide()
		return
	}
	u.stopTalking()
}
