package wizard

import (
	"fmt"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/voices/clone"

	"github.com/parley-voice/parley/app/gui/kit"
)

// Proofread filters.
const (
	showUsable   = "Clips to train on"
	showWarnings = "Only clips with a warning"
	showDropped  = "Dropped clips"
)

// proofPage is step 4: a table of the clips — play, edit the text, drop, the warnings —
// and the total usable minutes. An edit is saved when the text box loses focus or on Enter.
type proofPage struct {
	w       *Wizard
	show    *widget.Select
	rest    *widget.Button // "The rest look right": confirms every clip not yet checked
	rows    []clone.Clip   // the clips shown (a copy)
	list    *widget.List
	entries []*commitEntry
	total   *widget.Label
	gauge   *widget.ProgressBar
	msg     *kit.Notice
	box     fyne.CanvasObject
}

func newProofPage(w *Wizard) *proofPage {
	p := &proofPage{w: w}
	p.show = widget.NewSelect([]string{showUsable, showWarnings, showDropped}, func(string) {
		if w.d != nil && w.busy == nil {
			p.commit()
			p.refresh()
		}
	})
	p.show.SetSelected(showUsable)
	p.list = widget.NewList(func() int { return len(p.rows) }, p.newRow, p.updateRow)
	p.total = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	p.total.Wrapping = fyne.TextWrapWord
	p.gauge = widget.NewProgressBar()
	p.msg = kit.NewNotice()
	p.rest = widget.NewButtonWithIcon("The rest look right", theme.ConfirmIcon(), p.confirmRest)
	top := container.NewVBox(container.NewHBox(widget.NewLabel("Show"), container.New(&kit.FixedWidth{W: 280}, p.show)),
		container.NewHBox(p.rest), p.msg)
	bottom := container.NewVBox(widget.NewSeparator(), p.total, p.gauge)
	p.box = pageFrame("4  Proofread", "Listen to the clips and correct what the recogniser got wrong: the text must say exactly what is spoken. "+
		"Drop a clip with a cough, a second voice or a slip you do not want copied. Edits are saved as you go.",
		top, container.NewBorder(nil, bottom, nil, nil, p.list))
	return p
}

func (p *proofPage) view() fyne.CanvasObject { return p.box }

func (p *proofPage) refresh() {
	d := p.w.d
	p.rows = p.rows[:0]
	for _, c := range d.Clips {
		if c.Rejected != "" {
			continue
		}
		switch p.show.Selected {
		case showUsable:
			if c.Dropped {
				continue
			}
		case showWarnings:
			if c.Dropped || c.Warning == "" {
				continue
			}
		case showDropped:
			if !c.Dropped {
				continue
			}
		}
		p.rows = append(p.rows, c)
	}
	p.list.Refresh()
	p.footer()
}

// footer shows the usable total against what the goal wants.
func (p *proofPage) footer() {
	s := p.w.d.Summary()
	want := minVoiceMinutes
	txt := fmt.Sprintf("%d usable clip%s, %s of speech.", s.Usable, kit.Plural(s.Usable), minutes(s.UsableMinutes))
	if p.w.goal == goalRecognition {
		want = 1
		txt += " The recogniser already learns from a few minutes; more helps."
	} else if s.UsableMinutes < want {
		txt += fmt.Sprintf(" A voice wants at least %.0f minutes (10–30 is better): record or import more in step 1.", want)
	} else {
		txt += " Enough to train a voice; more (up to 30 minutes) makes it closer."
	}
	if s.Unlabelled > 0 {
		txt += fmt.Sprintf(" %d clip%s without a transcript are left out.", s.Unlabelled, kit.Plural(s.Unlabelled))
	}
	if s.Warnings > 0 {
		txt += fmt.Sprintf(" %d with a warning.", s.Warnings)
	}
	if s.Unchecked > 0 {
		txt += fmt.Sprintf(" %d of %d not checked yet: listen to those you doubt, then \"The rest look right\".", s.Unchecked, s.Usable)
		p.rest.Enable()
	} else {
		p.rest.Disable()
	}
	p.total.SetText(txt)
	p.gauge.TextFormatter = func() string { return fmt.Sprintf("%.1f of %.0f minutes", s.UsableMinutes, want) }
	p.gauge.SetValue(min(1, s.UsableMinutes/want))
}

// confirmRest marks every clip not yet checked as right (after saving the pending edits).
func (p *proofPage) confirmRest() {
	d := p.w.d
	if d == nil || p.w.busy != nil {
		return
	}
	p.commit()
	n, err := d.ConfirmAll()
	if err != nil {
		p.msg.SetText("Could not save: " + err.Error())
		return
	}
	p.msg.SetText(fmt.Sprintf("%d clip%s marked as checked.", n, kit.Plural(n)))
	p.refresh()
	p.w.refreshSteps()
}

// commit saves the text boxes' pending edits.
func (p *proofPage) commit() {
	for _, e := range p.entries {
		e.commit()
	}
}

// setText saves a clip's transcript as the person wrote (or confirmed) it.
func (p *proofPage) setText(id, text string) {
	d := p.w.d
	if d == nil || p.w.busy != nil {
		return
	}
	if err := d.SetText(id, text); err != nil {
		p.msg.SetText("Could not save the text of " + id + ": " + err.Error())
		return
	}
	p.update(id)
}

func (p *proofPage) drop(id string, dropped bool) {
	d := p.w.d
	if d == nil || p.w.busy != nil {
		return
	}
	if err := d.Drop(id, dropped); err != nil {
		p.msg.SetText("Could not change " + id + ": " + err.Error())
		return
	}
	p.update(id)
}

// update copies a clip's new state into its row and the footer, and the stepper.
func (p *proofPage) update(id string) {
	c, err := p.w.d.Clip(id)
	if err != nil {
		return
	}
	for i := range p.rows {
		if p.rows[i].ID == id {
			p.rows[i] = *c
			p.list.RefreshItem(i)
		}
	}
	p.footer()
	p.w.refreshSteps()
}

func (p *proofPage) newRow() fyne.CanvasObject {
	play := widget.NewButtonWithIcon("", theme.MediaPlayIcon(), nil)
	play.Importance = widget.LowImportance
	e := newCommitEntry()
	p.entries = append(p.entries, e)
	info := widget.NewLabel("")
	info.SizeName = theme.SizeNameCaptionText
	info.Truncation = fyne.TextTruncateEllipsis
	ok := widget.NewButtonWithIcon("Looks right", theme.ConfirmIcon(), nil)
	drop := widget.NewButtonWithIcon("Drop", theme.DeleteIcon(), nil)
	return container.NewBorder(nil, nil, play, container.NewHBox(ok, drop), container.NewVBox(e, info))
}

func (p *proofPage) updateRow(i widget.ListItemID, o fyne.CanvasObject) {
	if i >= len(p.rows) {
		return
	}
	c := p.rows[i]
	row := o.(*fyne.Container)
	mid := row.Objects[0].(*fyne.Container)
	play := row.Objects[1].(*widget.Button)
	right := row.Objects[2].(*fyne.Container)
	e := mid.Objects[0].(*commitEntry)
	info := mid.Objects[1].(*widget.Label)
	ok := right.Objects[0].(*widget.Button)
	drop := right.Objects[1].(*widget.Button)

	id := c.ID
	e.bind(c.Text, func(text string) { p.setText(id, text) })
	e.SetPlaceHolder("no transcript: type what is said, or drop the clip")
	details := fmt.Sprintf("%s · %.1f s · %s · SNR %.0f dB", c.ID, c.Seconds, langName(c.Lang), c.SNR)
	if c.Edited {
		details += " · checked by you"
	}
	info.Importance = widget.MediumImportance
	if c.Warning != "" {
		details += "   ⚠ " + c.Warning
		info.Importance = widget.WarningImportance
	}
	info.SetText(details)
	info.Refresh()
	play.OnTapped = func() { p.w.playClip(c.Path, p.msg.SetText) }
	if c.Warning != "" && !c.Dropped {
		ok.Show()
		ok.OnTapped = func() {
			e.commit()
			cur, err := p.w.d.Clip(id)
			if err == nil {
				p.setText(id, cur.Text)
			}
		}
	} else {
		ok.Hide()
	}
	if c.Dropped {
		drop.SetText("Restore")
		drop.SetIcon(theme.ContentUndoIcon())
		drop.OnTapped = func() { p.drop(id, false) }
		e.Disable()
	} else {
		drop.SetText("Drop")
		drop.SetIcon(theme.DeleteIcon())
		drop.OnTapped = func() { e.commit(); p.drop(id, true) }
		e.Enable()
	}
}

// commitEntry is a text box that reports its text once the person is done with it: on
// Enter, or when it loses focus. A list that recycles it for another clip commits first.
type commitEntry struct {
	widget.Entry
	onCommit  func(string)
	committed string
}

func newCommitEntry() *commitEntry {
	e := &commitEntry{}
	e.ExtendBaseWidget(e)
	e.OnSubmitted = func(string) { e.commit() }
	return e
}

// FocusLost implements fyne.Focusable.
func (e *commitEntry) FocusLost() {
	e.Entry.FocusLost()
	e.commit()
}

func (e *commitEntry) commit() {
	if e.onCommit != nil && e.Text != e.committed {
		e.committed = e.Text
		e.onCommit(e.Text)
	}
}

// bind shows text for a (possibly other) item; what was typed for the last one is
// committed to it after the switch.
func (e *commitEntry) bind(text string, onCommit func(string)) {
	old, typed := e.onCommit, e.Text
	pending := old != nil && typed != e.committed
	e.onCommit = nil
	e.committed = text
	if e.Text != text {
		e.SetText(text)
	}
	e.onCommit = onCommit
	if pending {
		old(typed)
	}
}
