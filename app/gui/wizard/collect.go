package wizard

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/voices/clone"

	"github.com/parley-voice/parley/app/gui/kit"
)

// maxTake bounds one guided recording: a prompt reads in seconds, so a minute means the
// person walked away.
const maxTake = 60 * time.Second

var promptLangLabels = map[string]string{"en": "English", "zh": "中文"}

// collectPage is step 1: guided recording (a sentence to read, a live level meter, retake)
// and import of files, folders or one long recording.
type collectPage struct {
	w    *Wizard
	prep tune.Preparer // imports decode through it

	lang     *widget.Select
	prompts  []string
	idx      int
	counter  *widget.Label
	sentence *widget.Label
	meter    *kit.LevelMeter
	clock    *widget.Label
	record   *widget.Button
	playTake *widget.Button
	prev     *widget.Button
	skip     *widget.Button
	status   *kit.Notice

	addFiles  *widget.Button
	addFolder *widget.Button
	bar       *jobBar
	problems  *problemList
	importMsg *kit.Notice

	sources []clone.Source // what the list shows (a copy, read while no job runs)
	clips   map[string]int // clips per source
	list    *widget.List
	summary *widget.Label
	box     fyne.CanvasObject

	recording context.CancelFunc
	started   time.Time
	shownSec  int
}

func newCollectPage(w *Wizard, prep tune.Preparer) *collectPage {
	p := &collectPage{w: w, prep: prep, clips: map[string]int{}}
	var langs []string
	for _, l := range clone.PromptLanguages() {
		langs = append(langs, promptLangLabels[l])
	}
	p.lang = widget.NewSelect(langs, func(s string) { p.setLang(s) })
	p.counter = widget.NewLabel("")
	p.sentence = widget.NewLabel("")
	p.sentence.Wrapping = fyne.TextWrapWord
	p.sentence.SizeName = theme.SizeNameSubHeadingText
	p.sentence.TextStyle = fyne.TextStyle{Bold: true}
	p.meter = kit.NewLevelMeter()
	p.clock = widget.NewLabel("0:00")
	p.record = widget.NewButtonWithIcon("Record", theme.MediaRecordIcon(), func() { p.toggleRecord() })
	p.record.Importance = widget.HighImportance
	p.playTake = widget.NewButtonWithIcon("Play take", theme.MediaPlayIcon(), func() { p.play() })
	p.prev = widget.NewButtonWithIcon("", theme.NavigateBackIcon(), func() { p.move(-1) })
	p.skip = widget.NewButtonWithIcon("Next sentence", theme.NavigateNextIcon(), func() { p.move(1) })
	p.skip.IconPlacement = widget.ButtonIconTrailingText
	p.status = kit.NewNotice()

	card := kit.NewThemedRect(theme.ColorNameInputBackground, 8)
	sentenceCard := container.NewStack(card, container.NewPadded(container.NewPadded(p.sentence)))
	meterRow := container.NewBorder(nil, nil, widget.NewIcon(theme.MediaRecordIcon()), p.clock, container.NewPadded(p.meter))
	recordBox := container.NewVBox(
		container.NewBorder(nil, nil, nil, p.lang, p.counter),
		sentenceCard,
		meterRow,
		container.NewHBox(p.record, p.playTake, kit.LayoutSpacer(12), p.prev, p.skip),
		p.status,
	)

	p.addFiles = widget.NewButtonWithIcon("Add a file…", theme.FileAudioIcon(), func() { p.fileDialog() })
	p.addFolder = widget.NewButtonWithIcon("Add a folder…", theme.FolderOpenIcon(), func() { p.folderDialog() })
	p.bar = newJobBar()
	p.problems = newProblemList()
	p.importMsg = kit.NewNotice()
	hint := widget.NewLabel("Recordings you already have: one long recording or many short ones, WAV or any format ffmpeg reads. " +
		"You can also drop files on the window.")
	hint.Wrapping = fyne.TextWrapWord
	importBox := container.NewVBox(hint, container.NewHBox(p.addFiles, p.addFolder), p.bar.box, p.importMsg, p.problems.box)

	p.list = widget.NewList(func() int { return len(p.sources) }, p.newRow, p.updateRow)
	p.summary = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})

	// side by side on a wide window, one above the other on a narrow one
	cols := container.New(&kit.Columns{Wide: 740, Split: 0.55},
		container.NewVBox(kit.Heading("Read sentences aloud"), recordBox),
		container.NewVBox(kit.Heading("Import recordings"), importBox))
	p.box = pageFrame("1  Collect", "Speak in your normal voice, in a quiet room, about a hand's width further from the microphone than feels natural. "+
		"Read each sentence the way you would say it to a friend; a take can be redone any time. Ctrl+R records and stops, Ctrl+→ goes to the next sentence.",
		cols, container.NewBorder(container.NewVBox(widget.NewSeparator(), p.summary), nil, nil, nil, p.list))
	if w.host.Window() != nil {
		w.host.Window().SetOnDropped(func(_ fyne.Position, uris []fyne.URI) { p.dropped(uris) })
		// Ctrl+R records and stops, Ctrl+→ and Ctrl+← move between sentences (on this page)
		c := w.host.Window().Canvas()
		key := func(k fyne.KeyName, fn func()) {
			c.AddShortcut(&desktop.CustomShortcut{KeyName: k, Modifier: fyne.KeyModifierShortcutDefault}, func(fyne.Shortcut) {
				if p.onScreen() {
					fn()
				}
			})
		}
		key(fyne.KeyR, func() {
			if !p.record.Disabled() {
				p.toggleRecord()
			}
		})
		key(fyne.KeyRight, func() { p.move(1) })
		key(fyne.KeyLeft, func() { p.move(-1) })
	}
	return p
}

func (p *collectPage) view() fyne.CanvasObject { return p.box }

// onScreen says whether the collect page is the one shown.
func (p *collectPage) onScreen() bool {
	return p.w.d != nil && p.w.step == stepCollect && p.w.host.OnScreen()
}

// datasetChanged picks the dataset's prompt language and its first unread sentence.
func (p *collectPage) datasetChanged() {
	lang := p.w.host.Preferences().String(p.w.pref("lang"))
	if lang == "" {
		lang = "en"
		if p.w.d != nil && p.w.d.Lang == "zh" {
			lang = "zh"
		}
	}
	p.prompts = clone.Prompts(lang)
	p.lang.Selected = promptLangLabels[lang]
	p.lang.Refresh()
	p.idx = 0
	if p.w.d != nil {
		for i, done := range p.w.d.Recorded(p.prompts) {
			if !done {
				p.idx = i
				break
			}
		}
	}
	p.status.SetText("")
	p.importMsg.SetText("")
	p.problems.set("", nil)
}

func (p *collectPage) setLang(label string) {
	for l, s := range promptLangLabels {
		if s == label && p.w.d != nil {
			if p.w.host.Preferences().String(p.w.pref("lang")) == l && len(p.prompts) > 0 {
				return
			}
			p.w.host.Preferences().SetString(p.w.pref("lang"), l)
			p.datasetChanged()
			p.refresh()
		}
	}
}

func (p *collectPage) refresh() {
	d := p.w.d
	if d == nil {
		return
	}
	if len(p.prompts) == 0 {
		p.datasetChanged()
	}
	rec := d.Recorded(p.prompts)
	n := 0
	for _, r := range rec {
		if r {
			n++
		}
	}
	p.counter.SetText(fmt.Sprintf("Sentence %d of %d · %d recorded", p.idx+1, len(p.prompts), n))
	p.sentence.SetText(p.prompts[p.idx])
	p.setButtons()

	p.sources = append(p.sources[:0], d.Sources...)
	clear(p.clips)
	for _, c := range d.Clips {
		p.clips[c.Source]++
	}
	p.list.Refresh()
	var secs float64
	for _, s := range p.sources {
		secs += s.Seconds
	}
	switch len(p.sources) {
	case 0:
		p.summary.SetText("Nothing recorded yet.")
	case 1:
		p.summary.SetText(fmt.Sprintf("1 recording, %s of audio", minutes(secs/60)))
	default:
		p.summary.SetText(fmt.Sprintf("%d recordings, %s of audio", len(p.sources), minutes(secs/60)))
	}
}

// setButtons enables what can be done now.
func (p *collectPage) setButtons() {
	d := p.w.d
	idle := p.w.busy == nil
	has := d != nil && len(p.prompts) > 0 && d.PromptSource(p.prompts[p.idx]) != ""
	switch {
	case p.recording != nil:
		p.record.SetText("Stop")
		p.record.SetIcon(theme.MediaStopIcon())
		p.record.Enable()
	case has:
		p.record.SetText("Retake")
		p.record.SetIcon(theme.MediaReplayIcon())
	default:
		p.record.SetText("Record")
		p.record.SetIcon(theme.MediaRecordIcon())
	}
	enable := func(b *widget.Button, on bool) {
		if on {
			b.Enable()
		} else {
			b.Disable()
		}
	}
	if p.recording == nil {
		enable(p.record, idle && d != nil)
	}
	enable(p.playTake, idle && has)
	enable(p.prev, idle && p.idx > 0)
	enable(p.skip, idle && p.idx+1 < len(p.prompts))
	enable(p.addFiles, idle && d != nil)
	enable(p.addFolder, idle && d != nil)
}

func (p *collectPage) move(delta int) {
	if p.recording != nil || p.w.busy != nil || len(p.prompts) == 0 {
		return
	}
	p.idx = max(0, min(len(p.prompts)-1, p.idx+delta))
	p.status.SetText("")
	p.refresh()
}

// toggleRecord starts a take, or stops the one being recorded.
func (p *collectPage) toggleRecord() {
	if p.recording != nil {
		p.recording()
		return
	}
	w := p.w
	if w.busy != nil || w.d == nil {
		return
	}
	w.stopPlaying()
	w.holdMic()
	ctx, cancel := context.WithCancel(context.Background())
	p.recording = cancel
	w.busy = cancel
	prompt := p.prompts[p.idx]
	p.started = time.Now()
	p.shownSec = -1
	p.tick()
	p.status.SetText("Recording… read the sentence, then press Stop.")
	w.refresh()
	p.setButtons()
	host := w.host
	go func() {
		pcm, err := host.Record(ctx, maxTake, func(db float64) {
			w.host.Do(func() {
				if p.recording != nil {
					p.meter.SetLevel(db)
					p.tick()
				}
			})
		})
		w.host.Do(func() {
			cancel()
			p.recording = nil
			w.busy = nil
			p.meter.SetLevel(-100)
			p.keep(prompt, pcm, err)
			w.refresh()
		})
	}()
}

// tick shows the take's length, repainting once a second.
func (p *collectPage) tick() {
	s := int(time.Since(p.started).Seconds())
	if s != p.shownSec {
		p.shownSec = s
		p.clock.SetText(fmt.Sprintf("%d:%02d", s/60, s%60))
	}
}

// keep checks a finished take and adds it to the dataset, replacing the prompt's last take.
func (p *collectPage) keep(prompt string, pcm []float32, err error) {
	if err != nil {
		p.status.SetText("Recording failed: " + err.Error() + ". Check the microphone in Settings.")
		return
	}
	src, warn, err := p.w.d.AddTake(pcm, prompt)
	switch {
	case errors.Is(err, clone.ErrBadTake):
		p.status.SetText(strings.TrimPrefix(err.Error(), clone.ErrBadTake.Error()+": "))
		return
	case err != nil && src.ID == "":
		p.status.SetText("Could not save the take: " + err.Error())
		return
	case err != nil:
		p.status.SetText(sentence(err.Error()))
		return
	}
	msg := fmt.Sprintf("Saved the take (%.1f s).", src.Seconds)
	if warn != "" {
		msg += " " + warn
	} else if p.idx+1 < len(p.prompts) {
		msg += " On to the next sentence, or Retake."
	}
	p.status.SetText(msg)
}

func (p *collectPage) play() {
	if p.w.d == nil {
		return
	}
	id := p.w.d.PromptSource(p.prompts[p.idx])
	for _, s := range p.w.d.Sources {
		if s.ID == id {
			p.w.playClip(s.Path, p.status.SetText)
		}
	}
}

// fileDialog picks one recording to import.
func (p *collectPage) fileDialog() {
	fd := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil || r == nil {
			return
		}
		path := r.URI().Path()
		r.Close()
		p.importPaths([]string{path})
	}, p.w.host.Window())
	fd.SetFilter(storage.NewExtensionFileFilter([]string{".wav", ".mp3", ".flac", ".ogg", ".opus", ".m4a", ".aac", ".webm", ".wma", ".aiff", ".aif"}))
	fd.Show()
}

func (p *collectPage) folderDialog() {
	dialog.ShowFolderOpen(func(l fyne.ListableURI, err error) {
		if err != nil || l == nil {
			return
		}
		p.importPaths([]string{l.Path()})
	}, p.w.host.Window())
}

// dropped imports files dropped on the window while this page is shown.
func (p *collectPage) dropped(uris []fyne.URI) {
	w := p.w
	if w.d == nil || w.busy != nil || !w.host.OnScreen() {
		return
	}
	if w.step != stepCollect {
		w.show(stepCollect)
	}
	var paths []string
	for _, u := range uris {
		if u.Scheme() == "file" {
			paths = append(paths, u.Path())
		}
	}
	p.importPaths(paths)
}

// importPaths imports files and folders as a job.
func (p *collectPage) importPaths(paths []string) {
	if len(paths) == 0 {
		return
	}
	p.importMsg.SetText("")
	p.problems.set("", nil)
	var added []clone.Source
	var problems []clone.Problem
	p.w.job(p.bar, func(ctx context.Context, d *clone.Dataset, progress func(int, int, string)) error {
		var err error
		added, problems, err = d.Import(ctx, paths, p.prep.Open, clone.ImportOptions{
			Progress: func(done, total int, file string) { progress(done, total, filepath.Base(file)) },
		})
		return err
	}, func(err error) {
		var secs float64
		for _, s := range added {
			secs += s.Seconds
		}
		msg := fmt.Sprintf("Imported %d recording%s (%s).", len(added), kit.Plural(len(added)), minutes(secs/60))
		if err != nil {
			msg += " " + sentence(err.Error())
		} else if len(added) == 0 {
			msg = "Nothing was imported."
		}
		p.importMsg.SetText(msg)
		p.problems.set(fmt.Sprintf("Skipped %d file%s:", len(problems), kit.Plural(len(problems))), problems)
	})
}

// sentence words an error for a status line (tune.Sentence).
func sentence(msg string) string { return tune.Sentence(msg) }

func (p *collectPage) newRow() fyne.CanvasObject {
	play := widget.NewButtonWithIcon("", theme.MediaPlayIcon(), nil)
	play.Importance = widget.LowImportance
	rm := widget.NewButtonWithIcon("", theme.DeleteIcon(), nil)
	rm.Importance = widget.LowImportance
	name := widget.NewLabel("")
	name.Truncation = fyne.TextTruncateEllipsis
	info := widget.NewLabel("")
	info.Importance = widget.LowImportance
	return container.NewBorder(nil, nil, play, container.NewHBox(info, rm), name)
}

func (p *collectPage) updateRow(i widget.ListItemID, o fyne.CanvasObject) {
	if i >= len(p.sources) {
		return
	}
	s := p.sources[i]
	c := o.(*fyne.Container)
	name := c.Objects[0].(*widget.Label)
	play := c.Objects[1].(*widget.Button)
	right := c.Objects[2].(*fyne.Container)
	info := right.Objects[0].(*widget.Label)
	rm := right.Objects[1].(*widget.Button)
	title := filepath.Base(s.Origin)
	if s.Text != "" {
		title = "“" + s.Text + "”"
	}
	name.SetText(title)
	state := "not cut yet"
	if s.Sliced {
		state = fmt.Sprintf("%d clip%s", p.clips[s.ID], kit.Plural(p.clips[s.ID]))
		if p.clips[s.ID] == 0 {
			state = "no speech found"
		}
	}
	info.SetText(fmt.Sprintf("%.1f s · %s", s.Seconds, state))
	play.OnTapped = func() { p.w.playClip(s.Path, p.status.SetText) }
	rm.OnTapped = func() { p.confirmRemove(s) }
}

func (p *collectPage) confirmRemove(s clone.Source) {
	msg := "Remove this recording"
	if p.clips[s.ID] > 0 {
		msg += fmt.Sprintf(" and its %d clip%s (with their transcripts)", p.clips[s.ID], kit.Plural(p.clips[s.ID]))
	}
	dialog.ShowConfirm("Remove recording", msg+"?", func(ok bool) {
		if ok {
			p.remove(s.ID)
		}
	}, p.w.host.Window())
}

func (p *collectPage) remove(id string) {
	if p.w.busy != nil || p.w.d == nil {
		return
	}
	if err := p.w.d.Remove(id); err != nil {
		p.importMsg.SetText("Could not remove it: " + err.Error())
	}
	p.w.refresh()
}
