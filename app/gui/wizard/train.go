package wizard

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"math"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/voices/clone"

	"github.com/parley-voice/parley/app/gui/kit"
)

// notInBuild is why a goal's steps 5–7 cannot run in this build.
const notInBuild = "Fine-tuning is not in this build of Parley yet: the training, evaluation and install jobs are still being built. " +
	"Your dataset is kept as it is; when Parley is updated, this step starts from it."

// trainPage is step 5: the job, its readiness checks, progress with the time left, the loss
// plot, Cancel, and Resume for a job that stopped.
type trainPage struct {
	w      *Wizard
	ready  tune.Readiness // nil (or jobs nil): not in this build
	jobs   tune.Jobs
	needs  *widget.Label
	checks *kit.Notice
	why    *kit.Notice
	start  *widget.Button
	cancel *widget.Button
	resume *widget.Button
	bar    *widget.ProgressBar
	prep   *widget.ProgressBarInfinite // moves while the job prepares (no steps to count yet)
	began  time.Time                   // when this run started
	status *kit.Notice
	plot   *lossPlot
	quick  *quickClone
	// what (the voice goal) chooses a speaker vector or the whole model; its default follows
	// the base model until the person picks one
	what       *widget.RadioGroup
	whatPicked bool
	box        fyne.CanvasObject

	// for the current dataset and goal
	key      string    // dataset dir + goal the fields below belong to
	loaded   bool      // Latest was asked
	job      *tune.Job // newest job (nil: none)
	checked  string    // Check's description ("" until known)
	checkEr  error
	base     string
	baseDemo bool
	baseEr   error

	// the job running in this process (any dataset)
	run      bool
	runKey   string
	finished chan struct{} // closed when the running job's goroutine is done
	stop     context.CancelFunc
	mu       sync.Mutex
	live     tune.Progress // newest progress from the job's goroutine
	// prepDone of prepTotal seed speakers searched before the voice job exists
	prepDone, prepTotal int
	pending             bool // a repaint is queued
}

func newTrainPage(w *Wizard, ready tune.Readiness, jobs tune.Jobs, cloner tune.Cloner) *trainPage {
	p := &trainPage{w: w, ready: ready, jobs: jobs}
	p.needs = widget.NewLabel("")
	p.needs.Wrapping = fyne.TextWrapWord
	p.checks = kit.NewNotice()
	p.why = kit.NewNotice()
	p.why.Importance = widget.WarningImportance
	p.start = widget.NewButtonWithIcon("Start training", theme.MediaPlayIcon(), func() { p.begin(false) })
	p.start.Importance = widget.HighImportance
	p.resume = widget.NewButtonWithIcon("Resume", theme.MediaPlayIcon(), func() { p.begin(true) })
	p.resume.Importance = widget.HighImportance
	p.cancel = widget.NewButtonWithIcon("Cancel", theme.CancelIcon(), func() { p.cancelRun() })
	p.bar = widget.NewProgressBar()
	p.prep = widget.NewProgressBarInfinite()
	p.prep.Stop()
	p.prep.Hide()
	p.status = kit.NewNotice()
	p.plot = newLossPlot()
	p.quick = newQuickClone(w, cloner)
	p.what = widget.NewRadioGroup([]string{whatWhole, whatSpeaker}, func(string) { p.whatPicked = true })
	p.what.Required = true
	p.what.Hide()
	intro := "Parley fine-tunes the installed model on your clips as a job: a progress bar with the time left, a live loss plot and Cancel; " +
		"if Parley closes while it trains, it resumes from its last checkpoint. Python and PyTorch are checked first; " +
		"with more than one GPU (or enough cores) it trains on several at once. A part of your clips is held out to test the result."
	p.box = pageFrame("5  Train", intro,
		container.NewVBox(p.needs, p.checks, p.what, p.why, container.NewHBox(p.start, p.resume, p.cancel), p.bar, p.prep, p.status),
		container.NewBorder(p.quick.box, nil, nil, nil, p.plot))
	return p
}

func (p *trainPage) view() fyne.CanvasObject { return p.box }

func (p *trainPage) keyNow() string {
	if p.w.d == nil {
		return ""
	}
	return p.w.d.Dir() + "\x00" + p.w.goal
}

// running says whether the job shown is the one running in this process.
func (p *trainPage) running() bool { return p.run && p.runKey == p.key }

// blocked says why this build cannot train for the goal ("" when it can).
func (p *trainPage) blocked() string {
	if p.ready == nil || p.jobs == nil {
		return notInBuild
	}
	if err := p.ready.Supports(p.w.goal); err != nil {
		return sentence(err.Error())
	}
	return ""
}

// state: done once the dataset's job finished.
func (p *trainPage) state() (bool, string) {
	w := p.w
	if w.d == nil {
		return false, "Create or open a dataset first."
	}
	if why := p.blocked(); why != "" {
		return false, why
	}
	p.sync()
	if p.job != nil && p.job.Status == store.JobDone {
		return true, ""
	}
	if w.d.Summary().Usable == 0 {
		return false, "There is no usable clip to train on yet: finish steps 1–4."
	}
	return false, ""
}

// sync forgets what belonged to another dataset or goal, and looks the job up once.
func (p *trainPage) sync() {
	key := p.keyNow()
	if key == p.key && p.loaded {
		return
	}
	p.key, p.loaded, p.job = key, true, nil
	p.checked, p.checkEr, p.base, p.baseDemo, p.baseEr = "", nil, "", false, nil
	ready, jobs, d, goal := p.ready, p.jobs, p.w.d, p.w.goal
	if ready == nil || jobs == nil || d == nil || ready.Supports(goal) != nil {
		return
	}
	go func() {
		ctx := context.Background()
		j, jerr := jobs.Latest(ctx, d, goal)
		desc, cerr := ready.Check(ctx)
		base, demo, berr := ready.Base(ctx, goal)
		if berr == nil && demo {
			base += " (demo-grade)"
		}
		p.w.host.Do(func() {
			if p.key != key {
				return
			}
			if jerr == nil {
				p.job = j
			} else {
				p.status.SetText("Could not read the training jobs: " + jerr.Error())
			}
			p.checked, p.checkEr = desc, cerr
			if p.checked == "" && cerr == nil {
				p.checked = "ready"
			}
			p.base, p.baseDemo, p.baseEr = base, demo, berr
			p.setWhat()
			p.w.refresh()
		})
	}()
}

// The voice goal's two kinds of fine-tune.
const (
	whatWhole   = "The whole voice model (closest to you, less clear)"
	whatSpeaker = "A speaker vector only (small; keeps the model)"
)

// setWhat picks the default kind of voice fine-tune, unless the person chose: what the
// dataset's last job trained, else the whole model for the small demo voice (the one
// fine-tune of it that measurably moves towards the person, and the faster one, though its
// speech is less clear: make clone-eval, CER 70 % vs 44 % for the speaker vector) and a
// speaker vector for a full-size model.
func (p *trainPage) setWhat() {
	if p.whatPicked {
		return
	}
	whole := p.baseDemo
	if p.job != nil {
		if m, err := tune.TTSMetaOf(*p.job); err == nil {
			whole = m.GPT
		}
	}
	sel := whatSpeaker
	if whole {
		sel = whatWhole
	}
	p.what.SetSelected(sel)
	p.whatPicked = false // SetSelected calls OnChanged
}

func (p *trainPage) refresh() {
	w := p.w
	p.sync()
	if w.goal == goalVoice && p.blocked() == "" {
		p.what.Show()
		if p.running() {
			p.what.Disable()
		} else {
			p.what.Enable()
		}
	} else {
		p.what.Hide()
	}
	s := w.d.Summary()
	what := "a voice that sounds like you"
	if w.goal == goalRecognition {
		what = "the speech recogniser, so it understands you better"
	}
	p.needs.SetText(fmt.Sprintf("Goal: %s. Data: %d usable clips, %s of speech.", what, s.Usable, minutes(s.UsableMinutes)))
	show := func(o fyne.CanvasObject, on bool) {
		if on {
			o.Show()
		} else {
			o.Hide()
		}
	}
	p.quick.refresh()
	if why := p.blocked(); why != "" {
		p.why.SetText(why)
		p.checks.SetText("")
		p.start.Disable()
		show(p.start, false)
		show(p.resume, false)
		show(p.cancel, false)
		show(p.bar, false)
		show(p.plot, false)
		p.status.SetText("")
		return
	}
	// the checklist
	var lines []string
	ready := true
	mark := func(ok bool, s string) {
		if ok {
			lines = append(lines, "✓ "+s)
		} else {
			lines = append(lines, "✗ "+s)
			ready = false
		}
	}
	switch {
	case p.checkEr != nil:
		mark(false, "Python and PyTorch: "+sentence(strings.TrimPrefix(p.checkEr.Error(), "tune: ")))
	case p.checked == "":
		lines, ready = append(lines, "… checking Python and PyTorch"), false
	default:
		mark(true, "Python and PyTorch: "+p.checked)
	}
	switch {
	case p.baseEr != nil:
		mark(false, "Starting point: "+sentence(p.baseEr.Error()))
	case p.base != "" && w.goal == goalVoice:
		mark(true, "Starting point: the voice model "+p.base+", from the seed speaker closest to you")
	case p.base != "":
		mark(true, "Starting point: "+p.base)
	}
	need := p.ready.MinClips(w.goal)
	mark(s.Usable >= need, fmt.Sprintf("Clips: %d usable, at least %d needed", s.Usable, need))
	if w.goal == goalVoice && s.UsableMinutes < minVoiceMinutes {
		lines = append(lines, fmt.Sprintf("! A voice wants at least %.0f minutes of speech; you have %s.", minVoiceMinutes, minutes(s.UsableMinutes)))
	}
	p.checks.SetText(strings.Join(lines, "\n"))

	j := p.job
	p.why.SetText("")
	show(p.cancel, p.running())
	show(p.start, !p.running())
	show(p.resume, !p.running() && j != nil && j.Resumable() && j.Status != store.JobQueued)
	if ready && w.busy == nil && !p.run {
		p.start.Enable()
		p.resume.Enable()
	} else {
		p.start.Disable()
		p.resume.Disable()
	}
	if p.run && !p.running() {
		p.why.SetText("Another dataset's training job is running; one job runs at a time.")
	}
	switch {
	case p.running():
		p.mu.Lock()
		prog := p.live
		p.mu.Unlock()
		p.showProgress(prog, "")
	case j == nil:
		show(p.bar, false)
		show(p.plot, false)
		p.status.SetText("")
	default:
		p.showProgress(j.Progress, p.stopped(*j))
		if j.Status == store.JobDone {
			p.start.SetText("Train again")
		} else {
			p.start.SetText("Start over")
		}
	}
	if j == nil {
		p.start.SetText("Start training")
	}
}

// stopped words why a job is not running.
func (p *trainPage) stopped(j tune.Job) string {
	at := ""
	if j.Progress.TotalSteps > 0 {
		at = fmt.Sprintf(" at step %d of %d", j.Progress.Step, j.Progress.TotalSteps)
	}
	switch {
	case j.Status == store.JobDone:
		if j.Progress.Loss <= 0 { // a run shorter than the trainer's log interval reports no loss
			return fmt.Sprintf("Trained: %d steps. Next: evaluate it on your held-out clips.", j.Progress.Step)
		}
		return fmt.Sprintf("Trained: %d steps, final loss %.3f. Next: evaluate it on your held-out clips.", j.Progress.Step, j.Progress.Loss)
	case j.Progress.Interrupted:
		return "Parley closed while this job was training" + at + ". Resume continues from its last checkpoint."
	case j.Status == store.JobCancelled:
		return "Cancelled" + at + ". Resume continues from its last checkpoint."
	case j.Status == store.JobFailed:
		return "Training failed" + at + ": " + sentence(j.Error)
	case j.Status == store.JobQueued:
		return "Not started yet."
	}
	return ""
}

// showProgress draws a job's progress: the bar, the line under it and the plot.
func (p *trainPage) showProgress(pr tune.Progress, note string) {
	p.bar.Show()
	p.bar.SetValue(pr.Fraction())
	parts := []string{}
	switch {
	case pr.TotalSteps > 0:
		parts = append(parts, fmt.Sprintf("step %d of %d", pr.Step, pr.TotalSteps))
	case pr.Stage != "":
		parts = append(parts, pr.Stage)
	}
	if pr.Epoch > 0 {
		parts = append(parts, fmt.Sprintf("epoch %d", pr.Epoch))
	}
	if pr.Loss > 0 {
		parts = append(parts, fmt.Sprintf("loss %.3f", pr.Loss))
	}
	if p.running() {
		if pr.ETA > 0 {
			parts = append(parts, "about "+eta(pr.ETA)+" left")
		}
		if pr.WorldSize > 1 {
			parts = append(parts, fmt.Sprintf("%d processes", pr.WorldSize))
		}
		if pr.Device != "" {
			parts = append(parts, "on "+pr.Device)
		}
	}
	txt := ""
	if len(parts) > 0 {
		txt = strings.ToUpper(parts[0][:1]) + parts[0][1:]
		if len(parts) > 1 {
			txt += " · " + strings.Join(parts[1:], " · ")
		}
		txt += "."
	}
	preparing := p.running() && pr.TotalSteps == 0
	if preparing {
		// no steps to count yet (clips prepared, the seed speaker searched): say what runs
		// and for how long, with a bar that moves, so the step never looks frozen
		txt = "Preparing (" + kit.OrDefault(pr.Stage, "starting") + ")… " + sinceWords(p.began) + " so far."
		p.mu.Lock()
		done, total := p.prepDone, p.prepTotal
		p.mu.Unlock()
		if total > 0 && p.job == nil { // the seed-speaker search, before the job exists
			txt = fmt.Sprintf("Preparing (%s: %d of %d seed speakers)… %s so far%s.", pr.Stage, done, total,
				sinceWords(p.began), prepLeft(time.Since(p.began), done, total))
		}
		p.bar.Hide()
		p.prep.Show()
		p.prep.Start()
	} else {
		p.prep.Stop()
		p.prep.Hide()
	}
	if note != "" {
		txt = strings.TrimSpace(txt + " " + note)
	}
	p.status.SetText(txt)
	p.plot.set(pr.Losses, pr.TotalSteps)
	if len(pr.Losses) > 0 {
		p.plot.Show()
	} else {
		p.plot.Hide()
	}
}

// prepLeft is ", about N left" at the rate so far (nothing before the first item is done:
// there is no rate yet).
func prepLeft(spent time.Duration, done, total int) string {
	if done <= 0 || done >= total {
		return ""
	}
	left := time.Duration(float64(spent) / float64(done) * float64(total-done))
	return ", about " + eta(left.Seconds()) + " left"
}

// sinceWords words the time since t: "12 s", "3 min 05 s".
func sinceWords(t time.Time) string {
	d := time.Since(t).Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%d s", int(d.Seconds()))
	}
	return fmt.Sprintf("%d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
}

// eta words a number of seconds left.
func eta(s float64) string {
	switch {
	case s < 60:
		return "a minute"
	case s < 3600:
		return fmt.Sprintf("%.0f min", math.Ceil(s/60))
	}
	return fmt.Sprintf("%.0f h %02.0f min", math.Floor(s/3600), math.Mod(math.Ceil(s/60), 60))
}

// begin starts a new job (or resumes the one shown) in the background.
func (p *trainPage) begin(resume bool) {
	w := p.w
	jobs := p.jobs
	if jobs == nil || w.d == nil || p.run || w.busy != nil {
		return
	}
	w.proof.commit()
	key, d, goal := p.key, w.d, w.goal
	opt := tune.JobOptions{WholeModel: goal == goalVoice && p.what.Selected == whatWhole}
	opt.Progress = func(done, total int) {
		p.mu.Lock()
		p.prepDone, p.prepTotal = done, total
		p.mu.Unlock()
	}
	var id int64
	if resume && p.job != nil {
		id = p.job.ID
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.runKey = key
	p.run = true
	finished := make(chan struct{})
	p.finished = finished
	p.mu.Lock()
	p.live = tune.Progress{Stage: "starting"}
	p.prepDone, p.prepTotal = 0, 0
	if goal == goalVoice {
		p.live.Stage = "finding the seed speaker closest to you" // Create synthesises a few first
	}
	if resume && p.job != nil {
		p.live = p.job.Progress
	}
	p.mu.Unlock()
	p.status.SetText("Starting…")
	p.began = time.Now()
	p.cancel.Enable() // a job cancelled before left it disabled
	w.refresh()
	go p.tick(ctx, finished)
	go func() {
		defer close(finished)
		if id == 0 {
			j, err := jobs.Create(ctx, d, goal, opt)
			if err != nil {
				p.ended(key, d, goal, 0, err)
				return
			}
			id = j.ID
			p.w.host.Do(func() {
				if p.key == key {
					p.job = &j
				}
			})
		}
		wait, err := jobs.Start(ctx, id, func(ev tune.Event) { p.event(ev) })
		if err != nil {
			p.ended(key, d, goal, id, err)
			return
		}
		p.ended(key, d, goal, id, wait())
	}()
}

// tick repaints the progress once a second while the job prepares (nothing reports then),
// so the time so far moves; it stops when training reports steps or the job ends.
func (p *trainPage) tick(ctx context.Context, finished <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-finished:
			return
		case <-t.C:
		}
		p.mu.Lock()
		steps := p.live.TotalSteps
		ev := tune.Event{Progress: p.live}
		p.mu.Unlock()
		if steps > 0 {
			return
		}
		p.event(ev)
	}
}

// event keeps a job's newest progress and queues one repaint at a time, so a trainer that
// logs every step does not flood the UI.
func (p *trainPage) event(ev tune.Event) {
	p.mu.Lock()
	p.live = ev.Progress
	queued := p.pending
	p.pending = true
	p.mu.Unlock()
	if queued {
		return
	}
	p.w.host.Do(func() {
		p.mu.Lock()
		p.pending = false
		p.mu.Unlock()
		if p.w.step == stepTrain && p.running() && p.w.busy == nil && p.w.host.OnScreen() {
			p.refresh()
		}
	})
}

// ended runs when a job stops: it reads the job's final record.
func (p *trainPage) ended(key string, d *clone.Dataset, goal string, id int64, err error) {
	var j *tune.Job
	if id != 0 {
		if latest, lerr := p.jobs.Latest(context.Background(), d, goal); lerr == nil && latest != nil && latest.ID == id {
			j = latest
		}
	}
	p.w.host.Do(func() {
		if p.stop != nil {
			p.stop()
		}
		p.run, p.stop = false, nil
		if p.key == key && j != nil {
			p.job = j
		}
		p.w.refresh()
		if err != nil && !errors.Is(err, context.Canceled) && p.key == key {
			p.why.SetText("Training stopped: " + sentence(strings.TrimPrefix(err.Error(), "tune: ")))
		}
	})
}

// update takes a newer record of the job shown.
func (p *trainPage) update(j *tune.Job) {
	if j != nil && p.job != nil && j.ID == p.job.ID {
		p.job = j
	}
}

func (p *trainPage) cancelRun() {
	if p.stop != nil {
		p.stop()
		p.status.SetText("Stopping… (the job keeps its last checkpoint)")
		p.cancel.Disable()
	}
}

// close stops a running job when the app quits, and waits a little for the trainer to
// stop and the job to be recorded as cancelled (resumable). A job that takes longer is
// found again as interrupted at the next start.
func (p *trainPage) close() {
	if p.stop == nil {
		return
	}
	p.stop()
	select {
	case <-p.finished:
	case <-time.After(15 * time.Second):
	}
}

// lossPlot draws the training loss over the steps. It repaints only itself, and only when a
// new point arrives.
type lossPlot struct {
	widget.BaseWidget
	points []tune.LossPoint
	total  int
}

func newLossPlot() *lossPlot {
	l := &lossPlot{}
	l.ExtendBaseWidget(l)
	return l
}

func (l *lossPlot) set(points []tune.LossPoint, total int) {
	if len(points) == len(l.points) && total == l.total && (len(points) == 0 || points[len(points)-1] == l.points[len(l.points)-1]) {
		return
	}
	l.points = append(l.points[:0], points...)
	l.total = total
	l.Refresh()
}

func (l *lossPlot) CreateRenderer() fyne.WidgetRenderer {
	r := &lossRenderer{l: l, bg: kit.NewThemedRect(theme.ColorNameInputBackground, 6)}
	for i := range r.labels {
		r.labels[i] = widget.NewLabel("")
		r.labels[i].SizeName = theme.SizeNameCaptionText
	}
	return r
}

type lossRenderer struct {
	l      *lossPlot
	bg     *kit.ThemedRect
	lines  []*canvas.Line
	labels [4]*widget.Label // loss max, loss min, first step, last step
	objs   []fyne.CanvasObject
	size   fyne.Size
}

func (r *lossRenderer) MinSize() fyne.Size           { return fyne.NewSize(200, 140) }
func (r *lossRenderer) Layout(s fyne.Size)           { r.size = s; r.build() }
func (r *lossRenderer) Refresh()                     { r.build(); canvas.Refresh(r.l) }
func (r *lossRenderer) Objects() []fyne.CanvasObject { return r.objs }
func (r *lossRenderer) Destroy()                     {}

func (r *lossRenderer) build() {
	s := r.size
	r.objs = r.objs[:0]
	r.bg.Resize(s)
	r.objs = append(r.objs, r.bg)
	pts := r.l.points
	if len(pts) == 0 || s.Width < 40 || s.Height < 40 {
		return
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		lo, hi = min(lo, p.Loss), max(hi, p.Loss)
	}
	if hi-lo < 1e-9 {
		hi, lo = hi+0.5, max(0, lo-0.5)
	}
	last := max(r.l.total, pts[len(pts)-1].Step, 1)
	const padL, padR, padT, padB = 56, 12, 12, 26
	pw, ph := s.Width-padL-padR, s.Height-padT-padB
	xy := func(p tune.LossPoint) fyne.Position {
		return fyne.NewPos(padL+pw*float32(p.Step)/float32(last), padT+ph*float32((hi-p.Loss)/(hi-lo)))
	}
	for len(r.lines) < len(pts) {
		r.lines = append(r.lines, canvas.NewLine(color.Transparent))
	}
	col := kit.ThemeColor(kit.ColWave)
	prev := xy(tune.LossPoint{Step: 0, Loss: pts[0].Loss})
	for i, p := range pts {
		cur := xy(p)
		ln := r.lines[i]
		ln.StrokeColor, ln.StrokeWidth = col, 2
		ln.Position1, ln.Position2 = prev, cur
		r.objs = append(r.objs, ln)
		prev = cur
	}
	set := func(i int, text string, x, y float32) {
		lb := r.labels[i]
		lb.SetText(text)
		sz := lb.MinSize()
		lb.Resize(sz)
		lb.Move(fyne.NewPos(x, y-sz.Height/2))
		r.objs = append(r.objs, lb)
	}
	prec := 2 // enough digits that the two ends differ
	for d := hi - lo; d < 0.05 && prec < 5; d *= 10 {
		prec++
	}
	set(0, fmt.Sprintf("%.*f", prec, hi), 2, padT)
	set(1, fmt.Sprintf("%.*f", prec, lo), 2, padT+ph)
	set(2, "step 0", padL-8, s.Height-padB/2)
	lastLabel := fmt.Sprintf("step %d", last)
	set(3, lastLabel, s.Width-padR-r.labels[3].MinSize().Width, s.Height-padB/2)
}

// evalPage is step 6: the starting point and the fine-tuned model on the held-out clips,
// the figures before and after, and A/B listening.
type evalPage struct {
	w       *Wizard
	jobs    tune.Jobs
	eval    tune.Evaluator // nil: not in this build
	run     *widget.Button
	bar     *jobBar
	why     *kit.Notice
	summary *kit.Notice
	items   []tune.EvalItem
	list    *widget.List
	box     fyne.CanvasObject
}

func newEvalPage(w *Wizard, jobs tune.Jobs, eval tune.Evaluator) *evalPage {
	p := &evalPage{w: w, jobs: jobs, eval: eval}
	p.run = widget.NewButtonWithIcon("Evaluate", theme.SearchIcon(), func() { p.evaluate() })
	p.run.Importance = widget.HighImportance
	p.bar = newJobBar()
	p.why = kit.NewNotice()
	p.why.Importance = widget.WarningImportance
	p.summary = kit.NewNotice()
	p.summary.TextStyle = fyne.TextStyle{Bold: true}
	p.list = widget.NewList(func() int { return len(p.items) }, p.newRow, p.updateRow)
	intro := "Parley compares the model before and after fine-tuning on clips it did not train on. For the recogniser: what each one writes " +
		"for your held-out clips and its character error rate (lower is better); play a clip and read both. For a voice: your held-out sentences " +
		"spoken by a random voice (A), a 3-second zero-shot clone and your fine-tuned voice (B), how close each sounds to you (speaker similarity) " +
		"and how well the recogniser understands it; play your clip, then A and B."
	p.box = pageFrame("6  Evaluate", intro, container.NewVBox(container.NewHBox(p.run), p.bar.box, p.why, p.summary), p.list)
	return p
}

func (p *evalPage) view() fyne.CanvasObject { return p.box }

func (p *evalPage) job() *tune.Job {
	t := p.w.train
	t.sync()
	if t.job == nil || t.job.Status != store.JobDone {
		return nil
	}
	return t.job
}

func (p *evalPage) evaluation() *tune.Evaluation {
	j := p.job()
	if j == nil || p.eval == nil {
		return nil
	}
	return p.eval.Evaluation(*j)
}

func (p *evalPage) state() (bool, string) {
	if done, why := p.w.train.state(); !done {
		if why == "" {
			why = "Train first (step 5)."
		}
		return false, why
	}
	return p.evaluation() != nil, ""
}

func (p *evalPage) refresh() {
	_, why := p.state()
	p.why.SetText(why)
	ev := p.evaluation()
	if why != "" || p.w.busy != nil || p.w.train.run {
		p.run.Disable()
	} else {
		p.run.Enable()
	}
	p.items = p.items[:0]
	if ev == nil {
		p.summary.SetText("")
		p.run.SetText("Evaluate")
		p.list.Refresh()
		return
	}
	p.run.SetText("Evaluate again")
	p.items = append(p.items, ev.Items...)
	p.list.Refresh()
	if len(ev.Voices) > 0 {
		p.summary.SetText(voiceSummary(ev))
		return
	}
	verdict := "better"
	if !ev.Improved {
		verdict = "not better"
	}
	txt := fmt.Sprintf("%s on %d held-out clips: %.1f%% before, %.1f%% after — %s.", capitalise(ev.Metric), len(ev.Items), 100*ev.Before, 100*ev.After, verdict)
	if ev.Message != "" {
		txt += " " + sentence(ev.Message)
	}
	p.summary.SetText(txt)
}

// voiceSummary words a voice evaluation: how alike each voice sounds to the person and how
// much of it the recogniser misheard, then the verdict.
func voiceSummary(ev *tune.Evaluation) string {
	lines := []string{fmt.Sprintf("On %d held-out sentences, how alike each voice sounds to you (1 = the same) and how much the recogniser misheard:", ev.Voices[0].Sentences)}
	for i, v := range ev.Voices {
		tag := "   "
		switch i {
		case 0:
			tag = "A: "
		case len(ev.Voices) - 1:
			tag = "B: "
		}
		lines = append(lines, fmt.Sprintf("%s%s — %.2f alike, %.0f%% misheard", tag, v.Name, v.Similarity, 100*v.CER))
	}
	// the voices between A and B are the quick clones: say so when one beat the fine-tune
	if n := len(ev.Voices); n >= 3 {
		b := ev.Voices[n-1]
		for _, c := range ev.Voices[1 : n-1] {
			if c.Similarity > b.Similarity {
				lines = append(lines, fmt.Sprintf("The quick clone %s sounds more like you than the fine-tuned voice (%.2f against %.2f): "+
					"use the clone, or collect more speech and train again.", c.Name, c.Similarity, b.Similarity))
				break
			}
		}
	}
	if ev.Message != "" {
		lines = append(lines, sentence(ev.Message))
	}
	return strings.Join(lines, "\n")
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (p *evalPage) evaluate() {
	j := p.job()
	eval, jobs := p.eval, p.jobs
	if j == nil || eval == nil || jobs == nil {
		return
	}
	job, goal := *j, p.w.goal
	p.why.SetText("")
	doing := "transcribing the held-out clips with both recognisers"
	if goal == goalVoice {
		doing = "speaking held-out sentences with a random voice, a 3-second clone and your fine-tuned voice, and scoring each"
	}
	var fresh *tune.Job
	p.w.job(p.bar, func(ctx context.Context, d *clone.Dataset, progress func(int, int, string)) error {
		progress(0, 1, doing)
		_, err := eval.Evaluate(ctx, job)
		fresh, _ = jobs.Latest(context.WithoutCancel(ctx), d, goal) // the result is stored with the job
		return err
	}, func(err error) {
		p.w.train.update(fresh)
		if err != nil {
			p.why.SetText("Evaluation failed: " + sentence(strings.TrimPrefix(err.Error(), "tune: ")))
		}
	})
}

// newRow is a held-out clip: play it, what it says, then A and B (for a voice, each with
// its own play button: the sentence spoken by the random voice and by the fine-tuned one).
func (p *evalPage) newRow() fyne.CanvasObject {
	button := func() *widget.Button {
		b := widget.NewButtonWithIcon("", theme.MediaPlayIcon(), nil)
		b.Importance = widget.LowImportance
		return b
	}
	label := func() *widget.Label {
		l := widget.NewLabel("")
		l.Truncation = fyne.TextTruncateEllipsis
		return l
	}
	ref, a, b := label(), label(), label()
	ref.TextStyle = fyne.TextStyle{Bold: true}
	return container.NewVBox(container.NewBorder(nil, nil, button(), nil, ref),
		container.NewBorder(nil, nil, button(), nil, a), container.NewBorder(nil, nil, button(), nil, b))
}

func (p *evalPage) updateRow(i widget.ListItemID, o fyne.CanvasObject) {
	if i >= len(p.items) {
		return
	}
	it := p.items[i]
	row := o.(*fyne.Container)
	rowRef, rowA, rowB := row.Objects[0].(*fyne.Container), row.Objects[1].(*fyne.Container), row.Objects[2].(*fyne.Container)
	ref, play := rowRef.Objects[0].(*widget.Label), rowRef.Objects[1].(*widget.Button)
	ref.SetText(it.Clip + ": “" + it.Ref + "”")
	a, playA := rowA.Objects[0].(*widget.Label), rowA.Objects[1].(*widget.Button)
	b, playB := rowB.Objects[0].(*widget.Label), rowB.Objects[1].(*widget.Button)
	heard := func(s string) string {
		if strings.TrimSpace(s) == "" {
			return "(nothing)"
		}
		return s
	}
	if it.PlayA != "" && it.PlayB != "" {
		ref.SetText("You, " + it.Clip + ": “" + it.Ref + "”")
		a.SetText(fmt.Sprintf("A, a random voice (heard with %d errors): %s", it.BeforeErr, heard(it.Before)))
		b.SetText(fmt.Sprintf("B, your fine-tuned voice (heard with %d errors): %s", it.AfterErr, heard(it.After)))
		playA.OnTapped = func() { p.w.playClip(it.PlayA, p.why.SetText) }
		playB.OnTapped = func() { p.w.playClip(it.PlayB, p.why.SetText) }
		playA.Show()
		playB.Show()
	} else {
		a.SetText(fmt.Sprintf("A, before (%d errors): %s", it.BeforeErr, heard(it.Before)))
		b.SetText(fmt.Sprintf("B, after (%d errors): %s", it.AfterErr, heard(it.After)))
		playA.Hide()
		playB.Hide()
	}
	b.Importance = widget.MediumImportance
	if it.AfterErr < it.BeforeErr {
		b.Importance = widget.SuccessImportance
	} else if it.AfterErr > it.BeforeErr {
		b.Importance = widget.WarningImportance
	}
	b.Refresh()
	play.OnTapped = func() { p.w.playClip(it.Path, p.why.SetText) }
}

// installPage is step 7: the fine-tuned model added for use, and a way to switch to it.
type installPage struct {
	w       *Wizard
	jobs    tune.Jobs
	inst    tune.Installer // nil: not in this build
	run     *widget.Button
	use     *widget.Button
	bar     *jobBar
	why     *kit.Notice
	done    *kit.Notice
	box     fyne.CanvasObject
	lastErr string
}

func newInstallPage(w *Wizard, jobs tune.Jobs, inst tune.Installer) *installPage {
	p := &installPage{w: w, jobs: jobs, inst: inst}
	p.run = widget.NewButtonWithIcon("Install", theme.DownloadIcon(), func() { p.install() })
	p.run.Importance = widget.HighImportance
	p.use = widget.NewButtonWithIcon("Use it in Parley", theme.ConfirmIcon(), func() { p.useIt() })
	p.bar = newJobBar()
	p.why = kit.NewNotice()
	p.why.Importance = widget.WarningImportance
	p.done = kit.NewNotice()
	p.done.Importance = widget.SuccessImportance
	intro := "The fine-tuned model is exported, checked and added to Parley: a recogniser joins the models (Models tab), a voice the voice library, " +
		"where the conversation, `parley say` and the server can use it. If anything fails, the earlier state is kept and nothing half-installed is left."
	p.box = pageFrame("7  Install", intro, container.NewVBox(p.why, p.done, container.NewHBox(p.run, p.use), p.bar.box), nil)
	return p
}

func (p *installPage) view() fyne.CanvasObject { return p.box }

func (p *installPage) state() (bool, string) {
	done, why := p.w.eval.state()
	if why != "" {
		return false, why
	}
	if !done {
		return false, "Evaluate first (step 6): you see (and hear) how the result compares on your held-out clips before it is installed."
	}
	ev := p.w.eval.evaluation()
	if ev == nil {
		return false, "Evaluate first (step 6)."
	}
	if !ev.Improved && len(ev.Voices) == 0 {
		return false, "The fine-tuned model is not better than the one you have on your held-out clips, so it is not installed. More (or cleaner) clips, or a longer training, usually help."
	}
	return ev.Installed != "", ""
}

// notAlike is what the install step says of a voice the speaker encoder does not find
// closer to the person than a random voice: ears judge a voice better than one figure, so
// the person may still install it (as `parley finetune install` does).
const notAlike = "By the speaker encoder, the fine-tuned voice does not sound more like you than a random voice on your held-out clips. " +
	"Listen to A and B in step 6: if you like it, install it anyway. More (or cleaner) clips, or a longer training, usually help; " +
	"the quick clone (step 5) is a voice you can use meanwhile."

func (p *installPage) refresh() {
	done, why := p.state()
	p.why.SetText(why)
	cfg, save := p.w.host.Config()
	ev := p.w.eval.evaluation()
	if why == "" && ev != nil && len(ev.Voices) > 0 && !ev.Improved && ev.Installed == "" {
		p.why.SetText(notAlike)
	}
	if p.lastErr != "" && why == "" {
		p.why.SetText(p.lastErr)
	}
	p.use.Hide()
	p.done.SetText("")
	if done && ev != nil && len(ev.Voices) > 0 {
		p.done.SetText("Installed in the voice library as " + ev.Installed + ": pick it in the Voice tab, or `parley say --engine chattts --voice " + ev.Installed + "`.")
		if ev.Model != "" {
			p.done.SetText("Installed in the voice library as " + ev.Installed + ", with its own model " + ev.Model + " (Models tab).")
		}
		p.run.SetText("Install again")
		if ev.Model == "" && save != nil { // a voice for the installed model: the assistant can speak with it
			p.use.Show()
			if c := cfg; c != nil && c.TTS.Voice == ev.Installed && c.TTS.Engine == "chattts" {
				p.use.Disable()
				p.done.SetText("Installed in the voice library as " + ev.Installed + ", and Parley speaks with it.")
			} else {
				p.use.Enable()
			}
		}
	} else if done && ev != nil {
		p.done.SetText("Installed as " + ev.Installed + ".")
		p.run.SetText("Install again")
		if p.w.goal == goalRecognition && save != nil {
			p.use.Show()
			if c := cfg; c != nil && c.ASR.Model == ev.Installed {
				p.use.Disable()
				p.done.SetText("Installed as " + ev.Installed + ", and Parley uses it to hear you.")
			} else {
				p.use.Enable()
			}
		}
	} else if ev != nil && len(ev.Voices) > 0 && !ev.Improved {
		p.run.SetText("Install anyway")
	} else {
		p.run.SetText("Install")
	}
	if why != "" || p.w.busy != nil {
		p.run.Disable()
	} else {
		p.run.Enable()
	}
}

func (p *installPage) install() {
	j := p.w.eval.job()
	inst, jobs := p.inst, p.jobs
	if j == nil || inst == nil || jobs == nil {
		return
	}
	job, goal := *j, p.w.goal
	p.lastErr = ""
	var fresh *tune.Job
	p.w.job(p.bar, func(ctx context.Context, d *clone.Dataset, progress func(int, int, string)) error {
		if goal == goalVoice {
			progress(0, 1, "adding the voice to the library")
		} else {
			progress(0, 1, "exporting and checking the model")
		}
		_, err := inst.Install(ctx, job)
		fresh, _ = jobs.Latest(context.WithoutCancel(ctx), d, goal)
		return err
	}, func(err error) {
		p.w.train.update(fresh)
		if err != nil {
			p.lastErr = "Install failed, nothing was changed: " + sentence(strings.TrimPrefix(err.Error(), "tune: "))
		}
	})
}

// useIt makes the installed recogniser the one Parley hears with (asr.model, saved), or the
// installed voice the one it speaks with (tts.engine and tts.voice).
func (p *installPage) useIt() {
	ev := p.w.eval.evaluation()
	base, save := p.w.host.Config()
	if ev == nil || ev.Installed == "" || base == nil || save == nil {
		return
	}
	c := *base
	if len(ev.Voices) > 0 {
		c.TTS.Engine, c.TTS.Voice, c.TTS.Seed = "chattts", ev.Installed, 0
	} else {
		c.ASR.Model = ev.Installed
	}
	p.use.Disable()
	go func() {
		err := save(&c)
		p.w.host.Do(func() {
			if err != nil {
				p.lastErr = "Could not switch to it: " + err.Error()
			} else {
				*base = c
			}
			p.w.refresh()
		})
	}()
}
