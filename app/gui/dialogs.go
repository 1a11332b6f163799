package gui

import (
	"bytes"
	"io"

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

// saveDialog asks where to save a file (suggesting name) and writes there, in the
// background, what render produces for the chosen file's name (see writeFile).
func (u *UI) saveDialog(name string, status *widget.Label, done, failed string, render func(dst io.Writer, name string) error) {
	d := dialog.NewFileSave(func(w fyne.URIWriteCloser, err error) {
		if err != nil || w == nil {
			return
		}
		go u.writeFile(w, status, done, failed, render)
	}, u.win)
	d.SetFileName(name)
	u.showDialog(d)
}

// writeFile writes what render produces to w and closes it, then says on status
// "done PATH" or "failed: ERROR". The content is rendered in full before the first byte is
// written: a render that fails writes nothing.
func (u *UI) writeFile(w fyne.URIWriteCloser, status *widget.Label, done, failed string, render func(dst io.Writer, name string) error) {
	var buf bytes.Buffer
	err := render(&buf, w.URI().Name())
	if err == nil {
		_, err = w.Write(buf.Bytes())
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	u.do(func() {
		if err != nil {
			status.SetText(failed + ": " + err.Error())
		} else {
			status.SetText(done + " " + w.URI().Path())
		}
	})
}
