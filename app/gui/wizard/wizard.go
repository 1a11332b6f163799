// Package wizard is the desktop app's fine-tune wizard (its Fine-tune tab): seven steps from
// a person's recordings to a voice (or a recogniser) that knows them. Each step is a page; the
// stepper on the left shows which are done, and a step that cannot start yet says why on its
// page. Long steps (import, slice, label) run as jobs off the UI goroutine with a progress bar
// and Cancel; the dataset on disk keeps every finished piece, so a cancelled or crashed step
// resumes where it stopped. Each page works through the app/tune roles it uses (Roles), and
// the window around it is the Host's (app/gui).
package wizard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/voices/clone"

	"github.com/parley-voice/parley/app/gui/kit"
)

// Tab is the name of the wizard's tab in the main window.
const Tab = "Fine-tune"

// Wizard steps.
const (
	stepCollect = iota
	stepSlice
	stepLabel
	stepProof
	stepTrain
	stepEval
	stepInstall
	numSteps
)

var stepNames = [numSteps]string{"Collect", "Slice", "Label", "Proofread", "Train", "Evaluate", "Install"}

// Goals: what the dataset is for.
const (
	goalVoice       = tune.GoalVoice       // fine-tune a voice that sounds like the person
	goalRecognition = tune.GoalRecognition // fine-tune the recogniser on the person's speech
)

var goalLabels = map[string]string{goalVoice: "Clone my voice", goalRecognition: "Improve recognition of my voice"}

// minVoiceMinutes is the usable speech a voice fine-tune wants (the recogniser is helped by less).
const minVoiceMinutes = tune.MinVoiceMinutes

// Wizard is the wizard's widgets and their state. Its methods run on the UI goroutine.
type Wizard struct {
	host   Host
	prep   tune.Preparer // nil: the wizard is not in this build
	cloner tune.Cloner

	d    *clone.Dataset // the open dataset; nil when none
	goal string
	step int
	// busy is the running job's cancel: while a job runs the dataset belongs to it, and
	// nothing on the UI goroutine reads or changes it.
	busy    context.CancelFunc
	playing context.CancelFunc // the clip being played
	playSeq int                // counts playbacks, so a late end clears only its own
	heldMic bool               // the wizard muted the assistant while it records

	picker   *widget.Select
	newBtn   *widget.Button
	delBtn   *widget.Button
	goalSel  *widget.Select
	stepBtns [numSteps]*widget.Button
	back     *widget.Button
	next     *widget.Button
	pageBox  *fyne.Container
	empty    fyne.CanvasObject
	note     *kit.Notice // a message about the dataset as a whole
	content  fyne.CanvasObject

	collect *collectPage
	slice   *slicePage
	label   *labelPage
	proof   *proofPage
	train   *trainPage
	eval    *evalPage
	install *installPage
}

// New builds the wizard over the host's window and app/tune's roles, and reopens the dataset
// last open.
func New(host Host, r Roles) *Wizard {
	w := &Wizard{host: host, prep: r.Preparer, cloner: r.Cloner, goal: goalVoice}
	w.picker = widget.NewSelect(nil, func(name string) { w.openNamed(name) })
	w.picker.PlaceHolder = "(no dataset)"
	w.newBtn = widget.NewButtonWithIcon("New…", theme.ContentAddIcon(), func() { w.newDialog(w.goal) })
	w.delBtn = widget.NewButtonWithIcon("", theme.DeleteIcon(), func() { w.confirmDelete() })
	w.goalSel = widget.NewSelect([]string{goalLabels[goalVoice], goalLabels[goalRecognition]}, func(s string) {
		for g, l := range goalLabels {
			if l == s && g != w.goal {
				w.setGoal(g)
			}
		}
	})
	w.goalSel.SetSelected(goalLabels[w.goal])
	w.note = kit.NewNotice()
	w.note.Importance = widget.WarningImportance

	steps := container.NewVBox()
	for i := range numSteps {
		b := widget.NewButtonWithIcon(fmt.Sprintf("%d  %s", i+1, stepNames[i]), theme.RadioButtonIcon(), func() { w.show(i) })
		b.Alignment = widget.ButtonAlignLeading
		w.stepBtns[i] = b
		steps.Add(b)
	}
	w.back = widget.NewButtonWithIcon("Back", theme.NavigateBackIcon(), func() { w.show(w.step - 1) })
	w.next = widget.NewButtonWithIcon("Next", theme.NavigateNextIcon(), func() { w.show(w.step + 1) })
	w.next.IconPlacement = widget.ButtonIconTrailingText

	w.collect = newCollectPage(w, r.Preparer)
	w.slice = newSlicePage(w, r.Preparer)
	w.label = newLabelPage(w, r.Preparer)
	w.proof = newProofPage(w)
	w.train = newTrainPage(w, r.Readiness, r.Jobs, r.Cloner)
	w.eval = newEvalPage(w, r.Jobs, r.Evaluator)
	w.install = newInstallPage(w, r.Jobs, r.Installer)
	w.pageBox = container.NewStack()

	start := widget.NewButtonWithIcon(goalLabels[goalVoice]+"…", theme.MediaRecordIcon(), func() { w.newDialog(goalVoice) })
	start.Importance = widget.HighImportance
	improve := widget.NewButtonWithIcon(goalLabels[goalRecognition]+"…", theme.ComputerIcon(), func() { w.newDialog(goalRecognition) })
	intro := widget.NewLabel("Teach Parley your voice. You read sentences aloud (or bring recordings), Parley cuts them into clips, " +
		"transcribes them, and you check the transcripts. From those clips Parley fine-tunes a voice that sounds like you, " +
		"or its speech recognition, so it understands you better. A few minutes of clear speech is enough to start; " +
		"everything stays on this computer.")
	intro.Wrapping = fyne.TextWrapWord
	w.empty = container.NewVBox(kit.Heading("Fine-tune"), intro, container.NewHBox(start), container.NewHBox(improve))

	// the goal's select is as wide as its longest choice when there is room, and shrinks
	// (truncating) on a narrow window
	header := container.NewBorder(nil, nil, widget.NewLabel("Dataset"), container.NewHBox(w.newBtn, w.delBtn),
		container.NewGridWithColumns(2, w.picker, w.goalSel))
	nav := container.NewBorder(nil, nil, w.back, w.next)
	left := container.NewVBox(steps)
	body := container.NewBorder(nil, nav, nil, nil, w.pageBox)
	main := container.NewBorder(container.NewVBox(header, w.note, widget.NewSeparator()), nil,
		container.NewHBox(left, widget.NewSeparator()), nil, body)
	w.content = container.NewPadded(main)

	if w.prep == nil {
		w.pageBox.Add(container.NewVBox(kit.Heading("Fine-tune"), widget.NewLabel("The fine-tune wizard is not available in this build.")))
		w.picker.Disable()
		w.newBtn.Disable()
		w.setStepsEnabled(false)
		return w
	}
	w.loadList()
	if last := host.Preferences().String("wizard.dataset"); last != "" {
		w.openNamed(last)
	}
	w.refresh()
	return w
}

// Content is the wizard's tab.
func (w *Wizard) Content() fyne.CanvasObject { return w.content }

// Shown reads the datasets again when the tab is opened (the command line may have changed them).
func (w *Wizard) Shown() {
	if w.prep == nil || w.busy != nil {
		return
	}
	w.loadList()
	if w.d != nil {
		if d, err := clone.Open(w.d.Dir()); err == nil {
			w.d = d
		} else {
			w.d = nil
			w.picker.ClearSelected()
			w.setNote("The dataset could not be read again: " + err.Error())
		}
	}
	w.refresh()
}

// Quit stops what the wizard runs when the app closes.
func (w *Wizard) Quit() {
	if w.busy != nil {
		w.busy()
	}
	w.stopPlaying()
	w.train.close()
}

// TabChanged is told which tab the window shows now.
func (w *Wizard) TabChanged(tab string) {
	if tab != Tab {
		w.releaseMic()
	}
}

// holdMic stops the assistant listening while the wizard records: hands-free (or waiting
// for the wake word) it would hear the sentences read for the wizard, answer them, and its
// answers would end up in the takes. The assistant listens again when the person leaves
// the recording page.
func (w *Wizard) holdMic() {
	if w.heldMic {
		return
	}
	w.heldMic = w.host.HoldMic()
}

func (w *Wizard) releaseMic() {
	if w.heldMic {
		w.heldMic = false
		w.host.ReleaseMic()
	}
}

// prefs keys are per dataset name.
func (w *Wizard) pref(key string) string {
	if w.d == nil {
		return ""
	}
	return "wizard." + key + "." + w.d.Name
}

// loadList fills the dataset picker from the datasets folder.
func (w *Wizard) loadList() {
	entries, err := os.ReadDir(w.prep.Dir())
	var names []string
	if err == nil {
		for _, e := range entries {
			if e.IsDir() {
				if _, err := os.Stat(filepath.Join(w.prep.Dir(), e.Name(), "dataset.json")); err == nil {
					names = append(names, e.Name())
				}
			}
		}
	}
	sort.Strings(names)
	w.picker.Options = names
	w.picker.Refresh()
}

// openNamed opens a dataset of the datasets folder.
func (w *Wizard) openNamed(name string) {
	if w.busy != nil || name == "" || (w.d != nil && w.d.Name == name) {
		return
	}
	d, err := clone.Open(filepath.Join(w.prep.Dir(), name))
	if err != nil {
		w.setNote("Could not open the dataset " + name + ": " + err.Error())
		w.picker.ClearSelected()
		return
	}
	w.setDataset(d)
}

func (w *Wizard) setDataset(d *clone.Dataset) {
	w.stopPlaying()
	w.d = d
	w.setNote("")
	w.host.Preferences().SetString("wizard.dataset", d.Name)
	w.goal = goalVoice
	if g := w.host.Preferences().String(w.pref("goal")); g != "" {
		w.goal = g
	}
	w.goalSel.Selected = goalLabels[w.goal]
	w.goalSel.Refresh()
	w.picker.Selected = d.Name
	w.picker.Refresh()
	w.collect.datasetChanged()
	w.step = -1
	w.show(w.firstOpenStep())
}

func (w *Wizard) setGoal(g string) {
	w.goal = g
	if w.d != nil {
		w.host.Preferences().SetString(w.pref("goal"), g)
	}
	w.refresh()
}

// newDialog asks for a name (and the goal) and creates a dataset.
func (w *Wizard) newDialog(goal string) {
	name := widget.NewEntry()
	name.SetPlaceHolder("my voice")
	name.Validator = clone.ValidName
	goalSel := widget.NewRadioGroup([]string{goalLabels[goalVoice], goalLabels[goalRecognition]}, nil)
	goalSel.SetSelected(goalLabels[goal])
	dialog.ShowForm("New dataset", "Create", "Cancel", []*widget.FormItem{
		widget.NewFormItem("Name", name),
		widget.NewFormItem("For", goalSel),
	}, func(ok bool) {
		if !ok {
			return
		}
		g := goalVoice
		if goalSel.Selected == goalLabels[goalRecognition] {
			g = goalRecognition
		}
		w.create(name.Text, g)
	}, w.host.Window())
}

// create makes a dataset and opens it.
func (w *Wizard) create(name, goal string) error {
	if w.busy != nil {
		return errBusy
	}
	name = strings.TrimSpace(name)
	d, err := clone.Create(filepath.Join(w.prep.Dir(), name), name)
	if err != nil {
		w.setNote("Could not create the dataset: " + err.Error())
		return err
	}
	w.host.Preferences().SetString("wizard.goal."+name, goal)
	w.loadList()
	w.setDataset(d)
	return nil
}

var errBusy = errors.New("a step is still running")

func (w *Wizard) confirmDelete() {
	if w.d == nil || w.busy != nil {
		return
	}
	s := w.d.Summary()
	dialog.ShowConfirm("Delete dataset", fmt.Sprintf("Delete the dataset %s: its %d recordings, %d clips and their transcripts? This cannot be undone.",
		w.d.Name, s.Sources, s.Clips), func(ok bool) {
		if ok {
			w.deleteDataset()
		}
	}, w.host.Window())
}

// deleteDataset removes the open dataset from disk (a training job's own files stay with the job).
func (w *Wizard) deleteDataset() error {
	if w.d == nil || w.busy != nil {
		return errBusy
	}
	if w.train.run && w.train.runKey == w.train.keyNow() {
		w.setNote("This dataset is training: cancel the job first (step 5).")
		return errBusy
	}
	w.proof.commit()
	w.stopPlaying()
	dir := w.d.Dir()
	if _, err := clone.Open(dir); err != nil { // never remove a folder that is not a dataset
		w.setNote("Could not delete: " + err.Error())
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		w.setNote("Could not delete the dataset: " + err.Error())
		return err
	}
	w.host.Preferences().RemoveValue("wizard.dataset")
	w.d = nil
	w.picker.ClearSelected()
	w.loadList()
	w.refresh()
	return nil
}

// setNote shows (or hides, for "") a message about the dataset as a whole.
func (w *Wizard) setNote(msg string) { w.note.SetText(msg) }

// stepState says whether a step is done, and why it cannot start yet ("" when it can).
func (w *Wizard) stepState(i int) (done bool, locked string) {
	if w.d == nil {
		return false, "Create or open a dataset first."
	}
	s := w.d.Summary()
	candidates := s.Clips - s.Dropped - rejectedCount(s)
	switch i {
	case stepCollect:
		return s.Sources > 0, ""
	case stepSlice:
		if s.Sources == 0 {
			return false, "Record or import some speech first (step 1)."
		}
		return s.Unsliced == 0, ""
	case stepLabel:
		if s.Clips == 0 {
			if s.Unsliced > 0 {
				return false, "Cut the recordings into clips first (step 2)."
			}
			return false, "The recordings gave no clips: record or import more speech (step 1)."
		}
		if candidates == 0 {
			return false, "No clip is usable: every clip was set aside or dropped. Step 2 says why; record or import more speech."
		}
		return unheard(w.d) == 0, ""
	case stepProof:
		if candidates == 0 {
			_, why := w.stepState(stepLabel)
			if why == "" {
				why = "No clip to proofread yet."
			}
			return false, why
		}
		// done once the person has checked every clip's text, not when the recogniser has written it
		return s.Usable > 0 && unheard(w.d) == 0 && s.Unchecked == 0, ""
	case stepTrain:
		return w.train.state()
	case stepEval:
		return w.eval.state()
	case stepInstall:
		return w.install.state()
	}
	return false, ""
}

func rejectedCount(s clone.Summary) int {
	n := 0
	for _, k := range s.Rejected {
		n += k
	}
	return n
}

// unheard counts the clips the recogniser has still to transcribe.
func unheard(d *clone.Dataset) int {
	n := 0
	for i := range d.Clips {
		c := &d.Clips[i]
		if c.Rejected == "" && !c.Dropped && c.Text == "" && c.Warning == "" {
			n++
		}
	}
	return n
}

// firstOpenStep is where a reopened dataset continues: the first step not done.
func (w *Wizard) firstOpenStep() int {
	for i := range numSteps {
		done, locked := w.stepState(i)
		if i == stepProof && !done && locked == "" && w.d.Summary().Usable > 0 && unheard(w.d) == 0 {
			continue // texts left unchecked do not hold training up (as before the tick asked for them)
		}
		if !done || locked != "" {
			return i
		}
	}
	return stepInstall
}

// show switches to a step's page.
func (w *Wizard) show(i int) {
	if i < 0 || i >= numSteps || w.busy != nil {
		return
	}
	if w.step == stepProof && i != stepProof {
		w.proof.commit()
	}
	if i != stepCollect {
		w.releaseMic()
	}
	w.stopPlaying()
	w.step = i
	w.refresh()
}

// page returns a step's page.
func (w *Wizard) page(i int) wizPage {
	switch i {
	case stepCollect:
		return w.collect
	case stepSlice:
		return w.slice
	case stepLabel:
		return w.label
	case stepProof:
		return w.proof
	case stepTrain:
		return w.train
	case stepEval:
		return w.eval
	}
	return w.install
}

// wizPage is one step's page.
type wizPage interface {
	view() fyne.CanvasObject
	refresh() // read the dataset again (only while no job runs)
}

// refresh redraws the stepper and the page shown.
func (w *Wizard) refresh() {
	if w.prep == nil {
		return
	}
	if w.d == nil {
		w.pageBox.Objects = []fyne.CanvasObject{w.empty}
		w.pageBox.Refresh()
		w.setStepsEnabled(false)
		w.back.Hide()
		w.next.Hide()
		return
	}
	p := w.page(w.step)
	if w.busy == nil {
		p.refresh()
	}
	if len(w.pageBox.Objects) != 1 || w.pageBox.Objects[0] != p.view() {
		w.pageBox.Objects = []fyne.CanvasObject{p.view()}
		w.pageBox.Refresh()
	}
	w.refreshSteps()
}

// refreshSteps redraws the stepper and the Back and Next buttons.
func (w *Wizard) refreshSteps() {
	w.back.Show()
	w.next.Show()
	for i, b := range w.stepBtns {
		done, locked := w.stepState(i)
		icon := theme.RadioButtonIcon()
		imp := widget.MediumImportance
		switch {
		case done && locked == "":
			icon = theme.ConfirmIcon()
		case locked != "":
			imp = widget.LowImportance
		}
		if i == w.step {
			imp = widget.HighImportance
			if !done {
				icon = theme.NavigateNextIcon()
			}
		}
		b.SetIcon(icon)
		b.Importance = imp
		b.Refresh()
	}
	w.setStepsEnabled(w.busy == nil)
	done, _ := w.stepState(w.step)
	_, nextLocked := w.stepState(w.step + 1)
	if w.step > 0 && w.busy == nil {
		w.back.Enable()
	} else {
		w.back.Disable()
	}
	if w.step+1 < numSteps && nextLocked == "" && w.busy == nil {
		w.next.Enable()
	} else {
		w.next.Disable()
	}
	w.next.Importance = widget.MediumImportance
	if done {
		w.next.Importance = widget.HighImportance
	}
	if w.step+1 < numSteps {
		w.next.SetText("Next: " + stepNames[w.step+1])
	} else {
		w.next.SetText("Next")
	}
}

func (w *Wizard) setStepsEnabled(on bool) {
	for _, b := range w.stepBtns {
		if on {
			b.Enable()
		} else {
			b.Disable()
		}
	}
	if on {
		w.picker.Enable()
		w.newBtn.Enable()
		w.goalSel.Enable()
		w.delBtn.Enable()
	} else if w.prep != nil && w.busy != nil {
		w.picker.Disable()
		w.newBtn.Disable()
		w.goalSel.Disable()
		w.delBtn.Disable()
	}
	if w.d == nil {
		w.delBtn.Disable()
	}
}

// job runs a long step off the UI goroutine. The dataset belongs to fn until it returns;
// progress reports reach bar on the UI goroutine, and bar's Cancel stops the job (what was
// finished is kept: every step saves as it goes). done runs on the UI goroutine.
func (w *Wizard) job(bar *jobBar, fn func(ctx context.Context, d *clone.Dataset, progress func(done, total int, item string)) error, done func(err error)) bool {
	if w.busy != nil || w.d == nil {
		return false
	}
	w.stopPlaying()
	ctx, cancel := context.WithCancel(context.Background())
	w.busy = cancel
	bar.start(cancel)
	w.refresh()
	d := w.d
	go func() {
		err := fn(ctx, d, func(n, total int, item string) {
			w.host.Do(func() { bar.set(n, total, item) })
		})
		w.host.Do(func() {
			cancel()
			w.busy = nil
			bar.stop()
			if errors.Is(err, context.Canceled) {
				err = errCancelled
			}
			done(err)
			w.refresh()
		})
	}()
	return true
}

var errCancelled = errors.New("stopped; what was finished is kept")

// playClip plays a dataset file (a clip or a recording); playing again, or another one, stops it.
func (w *Wizard) playClip(rel string, status func(string)) {
	if w.playing != nil {
		w.stopPlaying()
		return
	}
	if w.d == nil || w.busy != nil {
		return
	}
	pcm, err := w.d.ReadClip(rel)
	if err != nil {
		status("Cannot play: " + err.Error())
		return
	}
	ctx, done := w.startPlaying()
	host := w.host
	go func() {
		err := host.Play(ctx, pcm)
		w.host.Do(func() {
			done()
			if err != nil && !errors.Is(err, context.Canceled) {
				status("Cannot play: " + err.Error())
			}
		})
	}()
}

// startPlaying marks a clip as playing; done (on the UI goroutine) ends it. A playback that
// was stopped and followed by another must not end the newer one when it finishes late.
func (w *Wizard) startPlaying() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	w.playing, w.playSeq = cancel, w.playSeq+1
	seq := w.playSeq
	return ctx, func() {
		cancel()
		if w.playSeq == seq {
			w.playing = nil
		}
	}
}

func (w *Wizard) stopPlaying() {
	if w.playing != nil {
		w.playing()
		w.playing = nil
	}
}

// jobBar is a step's progress: what is being done, a bar, and Cancel.
type jobBar struct {
	label  *widget.Label
	bar    *widget.ProgressBar
	cancel *widget.Button
	stopFn context.CancelFunc
	box    *fyne.Container
}

func newJobBar() *jobBar {
	j := &jobBar{label: widget.NewLabel(""), bar: widget.NewProgressBar()}
	j.label.Truncation = fyne.TextTruncateEllipsis
	j.cancel = widget.NewButtonWithIcon("Cancel", theme.CancelIcon(), func() {
		if j.stopFn != nil {
			j.stopFn()
			j.label.SetText("Stopping…")
		}
	})
	j.box = container.NewVBox(j.label, container.NewBorder(nil, nil, nil, j.cancel, j.bar))
	j.box.Hide()
	return j
}

func (j *jobBar) start(cancel context.CancelFunc) {
	j.stopFn = cancel
	j.bar.SetValue(0)
	j.label.SetText("Starting…")
	j.box.Show()
}

func (j *jobBar) set(done, total int, item string) {
	if total > 0 {
		j.bar.SetValue(float64(done) / float64(total))
	}
	j.label.SetText(fmt.Sprintf("%d of %d: %s", done+1, total, item))
}

func (j *jobBar) stop() {
	j.stopFn = nil
	j.box.Hide()
}

// problemList shows what a step could not use, each with its reason.
type problemList struct {
	title *widget.Label
	body  *widget.Label
	box   *fyne.Container
}

func newProblemList() *problemList {
	p := &problemList{title: widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), body: widget.NewLabel("")}
	p.title.Importance = widget.WarningImportance
	p.body.Wrapping = fyne.TextWrapWord
	p.box = container.NewVBox(p.title, p.body)
	p.box.Hide()
	return p
}

// maxProblemLines keeps the list readable: a folder of junk files gives one line each.
const maxProblemLines = 12

func (p *problemList) set(title string, problems []clone.Problem) {
	if len(problems) == 0 {
		p.box.Hide()
		return
	}
	var lines []string
	for i, pr := range problems {
		if i == maxProblemLines {
			lines = append(lines, fmt.Sprintf("… and %d more", len(problems)-i))
			break
		}
		lines = append(lines, "• "+filepath.Base(pr.File)+": "+pr.Reason)
	}
	p.title.SetText(title)
	p.body.SetText(strings.Join(lines, "\n"))
	p.box.Show()
}

// pageFrame is a step's page: title, what the step does, its controls (top) and a list
// (body) that takes the rest of the height. The head scrolls when it would need more than
// maxHead, and the body scrolls when it needs more than what is left, so no page makes the
// window taller (a Fyne window grows to its content's minimum and never shrinks back: the
// Train step's clone panel and loss plot once took it to 886 px).
func pageFrame(title, intro string, top fyne.CanvasObject, body fyne.CanvasObject) fyne.CanvasObject {
	l := widget.NewLabel(intro)
	l.Wrapping = fyne.TextWrapWord
	head := container.NewVBox(kit.Heading(title), l)
	if top != nil {
		head.Add(top)
	}
	if body == nil {
		return container.NewVScroll(head)
	}
	return container.NewBorder(upTo(maxHead, head), nil, nil, nil, container.NewVScroll(body))
}

// maxHead is the most height a page's head takes before it scrolls.
const maxHead = 420

// upTo shows o at its own height up to max, scrolling beyond.
func upTo(max float32, o fyne.CanvasObject) fyne.CanvasObject {
	return container.New(&cappedHeight{max: max, content: o}, container.NewVScroll(o))
}

type cappedHeight struct {
	max     float32
	content fyne.CanvasObject
}

func (l *cappedHeight) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	for _, o := range objs {
		o.Move(fyne.NewPos(0, 0))
		o.Resize(size)
	}
}

func (l *cappedHeight) MinSize([]fyne.CanvasObject) fyne.Size {
	m := l.content.MinSize()
	return fyne.NewSize(m.Width, min(m.Height, l.max))
}

// minutes formats a duration in minutes for people.
func minutes(m float64) string {
	if m < 1 {
		return fmt.Sprintf("%.0f s", m*60)
	}
	return fmt.Sprintf("%.1f min", m)
}
