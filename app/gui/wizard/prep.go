package wizard

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/lang"
	"github.com/parley-voice/parley/voices/clone"

	"github.com/parley-voice/parley/app/gui/kit"
)

// slicePage is step 2: the recordings cut into 2–15 s clips at pauses (Silero VAD), each
// measured, and the ones that cannot be used set aside with the reason.
type slicePage struct {
	w        *Wizard
	prep     tune.Preparer // its Segmenter cuts the clips
	run      *widget.Button
	bar      *jobBar
	problems *problemList
	msg      *kit.Notice
	summary  *widget.Label
	onlyBad  *widget.Check
	clips    []clone.Clip
	all      []clone.Clip
	origins  map[string]string // source id → what the person calls it
	list     *widget.List
	box      fyne.CanvasObject
}

func newSlicePage(w *Wizard, prep tune.Preparer) *slicePage {
	p := &slicePage{w: w, prep: prep, origins: map[string]string{}}
	p.run = widget.NewButtonWithIcon("Cut into clips", theme.ContentCutIcon(), func() { p.slice() })
	p.run.Importance = widget.HighImportance
	p.bar = newJobBar()
	p.problems = newProblemList()
	p.msg = kit.NewNotice()
	p.summary = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	p.summary.Wrapping = fyne.TextWrapWord
	p.onlyBad = widget.NewCheck("Show only the clips set aside", func(bool) { p.filter() })
	p.list = widget.NewList(func() int { return len(p.clips) }, p.newRow, p.updateRow)
	top := container.NewVBox(container.NewHBox(p.run), p.bar.box, p.msg, p.problems.box, p.summary, p.onlyBad)
	p.box = pageFrame("2  Slice", "Parley finds the speech in each recording (Silero voice activity detection) and cuts it into clips of 2 to 15 seconds at the pauses. "+
		"It measures every clip and sets aside the ones a voice should not learn from: too short, clipped (too loud), too quiet, or too noisy (estimated signal-to-noise ratio), each with the reason.",
		top, p.list)
	return p
}

func (p *slicePage) view() fyne.CanvasObject { return p.box }

func (p *slicePage) refresh() {
	d := p.w.d
	s := d.Summary()
	if s.Unsliced > 0 {
		p.run.SetText(fmt.Sprintf("Cut %d new recording%s into clips", s.Unsliced, kit.Plural(s.Unsliced)))
		p.run.Enable()
	} else {
		p.run.SetText("All recordings are cut")
		p.run.Disable()
	}
	// recordings with no speech stay listed here (the slice step's problems are not stored)
	var silent []clone.Problem
	for _, src := range d.Sources {
		if !src.Sliced {
			continue
		}
		found := false
		for i := range d.Clips {
			if d.Clips[i].Source == src.ID {
				found = true
				break
			}
		}
		if !found {
			silent = append(silent, clone.Problem{File: src.Origin, Reason: "no speech found (silence, music or noise?); remove it in step 1"})
		}
	}
	p.problems.set(fmt.Sprintf("%d recording%s gave no clips:", len(silent), kit.Plural(len(silent))), silent)
	p.all = append(p.all[:0], d.Clips...)
	clear(p.origins)
	for _, src := range d.Sources {
		p.origins[src.ID] = sourceName(src)
	}
	if s.Clips == 0 {
		p.summary.SetText("")
	} else {
		p.summary.SetText(fmt.Sprintf("%d clips: %d usable (%s), %d set aside%s", s.Clips, s.Clips-rejectedCount(s),
			minutes(usableSeconds(p.all)/60), rejectedCount(s), s.RejectedText()))
	}
	p.filter()
}

// sourceName is how a recording is named for people: its file, or the start of its prompt.
func sourceName(s clone.Source) string {
	if s.Text != "" {
		r := []rune(s.Text)
		if len(r) > 24 {
			return "“" + strings.TrimSpace(string(r[:22])) + "…”"
		}
		return "“" + s.Text + "”"
	}
	return filepath.Base(s.Origin)
}

// usableSeconds is the length of the clips not set aside or dropped.
func usableSeconds(clips []clone.Clip) float64 {
	var secs float64
	for _, c := range clips {
		if c.Rejected == "" && !c.Dropped {
			secs += c.Seconds
		}
	}
	return secs
}

func (p *slicePage) filter() {
	p.clips = p.clips[:0]
	for _, c := range p.all {
		if !p.onlyBad.Checked || c.Rejected != "" {
			p.clips = append(p.clips, c)
		}
	}
	p.list.Refresh()
}

func (p *slicePage) slice() {
	p.msg.SetText("")
	p.w.job(p.bar, func(ctx context.Context, d *clone.Dataset, progress func(int, int, string)) error {
		seg, done, err := p.prep.Segmenter()
		if err != nil {
			return err
		}
		defer done()
		// the recordings without speech are listed from the dataset itself (refresh)
		_, err = d.Slice(ctx, seg, clone.SliceOptions{
			Progress: func(n, total int, src string) { progress(n, total, filepath.Base(src)) },
		})
		return err
	}, func(err error) {
		if err != nil {
			p.msg.SetText(sentence(err.Error()))
		}
	})
}

func (p *slicePage) newRow() fyne.CanvasObject {
	play := widget.NewButtonWithIcon("", theme.MediaPlayIcon(), nil)
	play.Importance = widget.LowImportance
	id := widget.NewLabel("")
	id.Truncation = fyne.TextTruncateEllipsis
	state := widget.NewLabel("")
	state.Truncation = fyne.TextTruncateEllipsis
	return container.NewBorder(nil, nil, play, nil, container.NewGridWithColumns(2, id, state))
}

func (p *slicePage) updateRow(i widget.ListItemID, o fyne.CanvasObject) {
	if i >= len(p.clips) {
		return
	}
	c := p.clips[i]
	row := o.(*fyne.Container)
	cols := row.Objects[0].(*fyne.Container)
	play := row.Objects[1].(*widget.Button)
	id := cols.Objects[0].(*widget.Label)
	state := cols.Objects[1].(*widget.Label)
	id.SetText(fmt.Sprintf("%s · %s · %.1f s · SNR %.0f dB · speech %.0f dBFS", c.ID, p.origins[c.Source], c.Seconds, c.SNR, c.SpeechDB))
	if c.Rejected != "" {
		state.SetText("set aside: " + c.Rejected)
		state.Importance = widget.WarningImportance
	} else {
		state.SetText("usable")
		state.Importance = widget.SuccessImportance
	}
	state.Refresh()
	play.OnTapped = func() { p.w.playClip(c.Path, p.msg.SetText) }
}

// labelPage is step 3: the recogniser (SenseVoice) transcribes every usable clip and says its
// language.
type labelPage struct {
	w     *Wizard
	prep  tune.Preparer // its Recogniser transcribes the clips
	run   *widget.Button
	force *widget.Check
	bar   *jobBar
	model *kit.Notice
	msg   *kit.Notice
	// recogniser is what the label step will use, found once (without loading it)
	recogniser string
	summary    *widget.Label
	clips      []clone.Clip
	list       *widget.List
	box        fyne.CanvasObject
}

func newLabelPage(w *Wizard, prep tune.Preparer) *labelPage {
	p := &labelPage{w: w, prep: prep}
	p.run = widget.NewButtonWithIcon("Transcribe", theme.DocumentCreateIcon(), func() { p.label() })
	p.run.Importance = widget.HighImportance
	p.force = widget.NewCheck("Also clips already transcribed (your own edits are kept)", func(bool) {
		if w.busy == nil && w.d != nil {
			p.refresh()
		}
	})
	p.bar = newJobBar()
	p.model = kit.NewNotice()
	p.msg = kit.NewNotice()
	p.summary = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	p.summary.Wrapping = fyne.TextWrapWord
	p.list = widget.NewList(func() int { return len(p.clips) }, p.newRow, p.updateRow)
	top := container.NewVBox(container.NewHBox(p.run), p.force, p.bar.box, p.model, p.msg, p.summary)
	p.box = pageFrame("3  Label", "The speech recogniser (SenseVoice) writes down what each clip says and in which language. "+
		"Clips whose language differs from the rest, with nothing recognised, or with sounds other than speech are flagged for the next step.",
		top, p.list)
	return p
}

func (p *labelPage) view() fyne.CanvasObject { return p.box }

func (p *labelPage) refresh() {
	d := p.w.d
	todo := p.todo(d)
	if todo > 0 {
		p.run.SetText(fmt.Sprintf("Transcribe %d clip%s", todo, kit.Plural(todo)))
		p.run.Enable()
	} else {
		p.run.SetText("All clips are transcribed")
		p.run.Disable()
	}
	if p.recogniser == "" {
		p.recogniser = "…"
		prep := p.prep
		go func() {
			id, demo, err := prep.RecogniserInfo(context.Background())
			p.w.host.Do(func() {
				if err != nil {
					p.recogniser = ""
					p.model.SetText(recogniserMissing)
					p.model.Importance = widget.WarningImportance
					p.model.Refresh()
					return
				}
				p.recogniser = id
				p.showModel(id, demo)
			})
		}()
	}
	p.clips = p.clips[:0]
	langs := map[string]int{}
	for _, c := range d.Clips {
		if c.Rejected == "" && !c.Dropped {
			p.clips = append(p.clips, c)
			if c.Lang != "" {
				langs[c.Lang]++
			}
		}
	}
	p.list.Refresh()
	s := d.Summary()
	var parts []string
	for l, n := range langs {
		parts = append(parts, fmt.Sprintf("%s %d", langName(l), n))
	}
	sort.Strings(parts)
	switch {
	case len(langs) == 0:
		p.summary.SetText("")
	default:
		txt := fmt.Sprintf("Languages heard: %s.", strings.Join(parts, ", "))
		if d.Lang != "" {
			txt += " You speak " + langName(d.Lang) + "."
		}
		if s.Warnings > 0 {
			txt += fmt.Sprintf(" %d clip%s to look at while proofreading.", s.Warnings, kit.Plural(s.Warnings))
		}
		p.summary.SetText(txt)
	}
}

// todo counts the clips a press of Transcribe would send to the recogniser.
func (p *labelPage) todo(d *clone.Dataset) int {
	n := 0
	for i := range d.Clips {
		c := &d.Clips[i]
		if c.Rejected != "" || c.Dropped {
			continue
		}
		if c.Text == "" || (p.force.Checked && !c.Edited) || (c.Edited && c.Lang == "") {
			n++
		}
	}
	return n
}

func (p *labelPage) label() {
	p.msg.SetText("")
	force := p.force.Checked
	p.w.job(p.bar, func(ctx context.Context, d *clone.Dataset, progress func(int, int, string)) error {
		r, err := p.prep.Recogniser(ctx)
		if err != nil {
			return err
		}
		defer r.Close()
		model, demo := r.Model, r.Demo
		p.w.host.Do(func() { p.showModel(model, demo) })
		return d.Label(ctx, r, clone.LabelOptions{Force: force, Progress: func(n, total int, clip string) { progress(n, total, "clip "+clip) }})
	}, func(err error) {
		if err != nil {
			msg := sentence(err.Error())
			if errors.Is(err, tune.ErrNoRecogniser) {
				msg = recogniserMissing
			}
			p.msg.SetText(msg)
			return
		}
		p.force.SetChecked(false)
	})
}

const recogniserMissing = "No speech recogniser is installed. Download SenseVoice-Small (sensevoice-small-int8) in Models, or type the transcripts yourself in the next step."

func (p *labelPage) showModel(id string, demo bool) {
	if demo {
		p.model.SetText("Recogniser: " + id + " — demo-grade, so expect to correct many transcripts. SenseVoice-Small (Models tab) transcribes far better.")
		p.model.Importance = widget.WarningImportance
	} else {
		p.model.SetText("Recogniser: " + id)
		p.model.Importance = widget.MediumImportance
	}
	p.model.Refresh()
}

func (p *labelPage) newRow() fyne.CanvasObject {
	id := widget.NewLabel("")
	lang := widget.NewLabel("")
	text := widget.NewLabel("")
	text.Truncation = fyne.TextTruncateEllipsis
	return container.NewBorder(nil, nil, container.NewHBox(id, lang), nil, text)
}

func (p *labelPage) updateRow(i widget.ListItemID, o fyne.CanvasObject) {
	if i >= len(p.clips) {
		return
	}
	c := p.clips[i]
	row := o.(*fyne.Container)
	text := row.Objects[0].(*widget.Label)
	left := row.Objects[1].(*fyne.Container)
	left.Objects[0].(*widget.Label).SetText(c.ID)
	left.Objects[1].(*widget.Label).SetText(langName(c.Lang))
	switch {
	case c.Warning != "":
		text.SetText(quoteOr(c.Text, "—") + "   ⚠ " + c.Warning)
		text.Importance = widget.WarningImportance
	case c.Text == "":
		text.SetText("not transcribed yet")
		text.Importance = widget.LowImportance
	default:
		text.SetText(quoteOr(c.Text, ""))
		text.Importance = widget.MediumImportance
	}
	text.Refresh()
}

func quoteOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return "“" + s + "”"
}

// langName names SenseVoice's language codes for people ("zh" → "Mandarin": lang.SpokenName);
// "—" for none, another code as it is.
func langName(code string) string {
	switch {
	case code == "":
		return "—"
	case lang.Known(code):
		return lang.SpokenName(code)
	}
	return code
}
