package wizard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/voices/clone"
)

// fakeTraining is a scripted trainer: a job advances one step per tick the test sends,
// and stops at once when cancelled. Jobs outlive a UI (the "app restart" of the tests).
type fakeTraining struct {
	mu       sync.Mutex
	jobs     []*tune.Job
	meta     map[int64]string // job → dataset dir + goal
	evals    map[int64]*tune.Evaluation
	tick     chan struct{}
	steps    int
	checkErr error
	installs int
	// unsupported: goals this "build" cannot train, and why
	unsupported map[string]error
	opts        map[int64]tune.JobOptions // each job's options from the train step
	fullSize    bool                      // Base: a full-size model, not a demo-grade one
	// prepare, when set, holds a started job in its preparation (no steps to count) until
	// it is closed
	prepare chan struct{}
	// search, when set, makes Create report 1 of 4 seed speakers searched and wait until it
	// is closed (the voice's search before the job exists)
	search chan struct{}
}

func newFakeTraining() *fakeTraining {
	return &fakeTraining{meta: map[int64]string{}, evals: map[int64]*tune.Evaluation{}, opts: map[int64]tune.JobOptions{}, tick: make(chan struct{}), steps: 10}
}

func (f *fakeTraining) Supports(goal string) error { return f.unsupported[goal] }

func (f *fakeTraining) Check(context.Context) (string, error) {
	if f.checkErr != nil {
		return "", f.checkErr
	}
	return "PyTorch 1.13.0 on CPU, 2 cores", nil
}

func (f *fakeTraining) Base(_ context.Context, goal string) (string, bool, error) {
	if goal == goalVoice {
		return "chattts-demo", !f.fullSize, nil
	}
	return "sensevoice-demo", true, nil
}

func (f *fakeTraining) MinClips(string) int { return 2 }

func (f *fakeTraining) Latest(_ context.Context, d *clone.Dataset, goal string) (*tune.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.jobs) - 1; i >= 0; i-- {
		if f.meta[f.jobs[i].ID] == d.Dir()+goal {
			j := *f.jobs[i]
			return &j, nil
		}
	}
	return nil, nil
}

func (f *fakeTraining) Create(_ context.Context, d *clone.Dataset, goal string, opt tune.JobOptions) (tune.Job, error) {
	if f.search != nil && opt.Progress != nil {
		opt.Progress(1, 4)
		<-f.search
		opt.Progress(4, 4)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	j := &tune.Job{Job: store.Job{ID: int64(len(f.jobs) + 1), Kind: "asr-finetune", Status: store.JobQueued},
		Spec: tune.Spec{Steps: []tune.Step{{Name: "train", Module: "train.x", Train: true}}}}
	f.jobs = append(f.jobs, j)
	f.meta[j.ID] = d.Dir() + goal
	f.opts[j.ID] = opt
	if goal == goalVoice { // the record the train step reads back
		j.Spec.Kind = tune.TTSKind
		j.Spec.Meta, _ = json.Marshal(tune.TTSMeta{Dataset: d.Dir(), Name: d.Name, GPT: opt.WholeModel})
	}
	return *j, nil
}

func (f *fakeTraining) job(id int64) *tune.Job {
	for _, j := range f.jobs {
		if j.ID == id {
			return j
		}
	}
	return nil
}

func (f *fakeTraining) Start(ctx context.Context, id int64, on tune.Handler) (func() error, error) {
	f.mu.Lock()
	j := f.job(id)
	if j == nil || j.Status == store.JobDone {
		f.mu.Unlock()
		return nil, fmt.Errorf("no job %d to start", id)
	}
	j.Status = store.JobRunning
	j.Progress.Interrupted = false
	j.Progress.TotalSteps = f.steps
	j.Progress.Device, j.Progress.WorldSize = "cpu", 2
	prepare := f.prepare
	if prepare != nil {
		j.Progress.TotalSteps, j.Progress.Stage = 0, "prepare"
	}
	p := j.Progress
	f.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		set := func(s store.JobStatus, pr tune.Progress) {
			f.mu.Lock()
			j.Status, j.Progress = s, pr
			f.mu.Unlock()
		}
		if prepare != nil {
			on(tune.Event{Job: id, Kind: "stage", Progress: p})
			select {
			case <-ctx.Done():
				set(store.JobCancelled, p)
				done <- context.Canceled
				return
			case <-prepare:
			}
			p.TotalSteps, p.Stage = f.steps, "train"
			set(store.JobRunning, p)
			on(tune.Event{Job: id, Kind: "stage", Progress: p})
		}
		for p.Step < f.steps {
			select {
			case <-ctx.Done():
				set(store.JobCancelled, p)
				done <- context.Canceled
				return
			case <-f.tick:
			}
			p.Step++
			p.Epoch = 1 + p.Step/4
			p.Loss = 3 / float64(p.Step)
			p.ETA = float64(f.steps-p.Step) * 30
			p.Losses = append(p.Losses, tune.LossPoint{Step: p.Step, Loss: p.Loss, N: 1})
			set(store.JobRunning, p)
			on(tune.Event{Job: id, Kind: "train", Progress: p})
		}
		p.ETA = 0
		set(store.JobDone, p)
		done <- nil
	}()
	return func() error { return <-done }, nil
}

func (f *fakeTraining) Evaluate(_ context.Context, j tune.Job) (*tune.Evaluation, error) {
	ev := &tune.Evaluation{Metric: "character error rate", Before: 0.4, After: 0.1, Improved: true, Items: []tune.EvalItem{
		{Clip: "s0001-001", Path: "clips/s0001-001.wav", Ref: "hello there", Before: "helo ther", After: "hello there", BeforeErr: 2},
		{Clip: "s0001-002", Path: "clips/s0001-002.wav", Ref: "good night", Before: "god nite", After: "good nite", BeforeErr: 3, AfterErr: 1},
	}}
	f.mu.Lock()
	f.evals[j.ID] = ev
	f.mu.Unlock()
	return ev, nil
}

func (f *fakeTraining) Evaluation(j tune.Job) *tune.Evaluation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.evals[j.ID]
}

func (f *fakeTraining) Install(_ context.Context, j tune.Job) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installs++
	f.evals[j.ID].Installed = "sensevoice-ada"
	return "sensevoice-ada", nil
}

// ticks advances the fake job n steps.
func (f *fakeTraining) ticks(n int) {
	for range n {
		f.tick <- struct{}{}
	}
}

// labelledDataset walks steps 1–3 on espeak-ng speech with the real VAD and demo recogniser.
func labelledDataset(t *testing.T, u *testUI, name, goal string) {
	t.Helper()
	w := u.wizard
	u.tabs.SelectIndex(5)
	if err := w.create(name, goal); err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	writeWizardWAV(t, filepath.Join(in, "reading.wav"), longRecording(t, "en-us",
		"the quick brown fox jumps over the lazy dog near the river bank",
		"please remind me to buy bread and milk on the way home tonight",
		"what time does the last train to the city leave this evening"))
	w.collect.importPaths([]string{in})
	waitIdle(t, u)
	w.show(stepSlice)
	test.Tap(w.slice.run)
	waitIdle(t, u)
	w.show(stepLabel)
	test.Tap(w.label.run)
	waitIdle(t, u)
	w.show(stepProof)
}

// TestWizardTrainEvaluateInstall: the readiness checks, a job's live progress (bar, ETA,
// loss plot), Cancel, the stopped job found again after a restart and resumed, then the
// before/after evaluation with A/B rows, the install, and switching Parley to the result.
func TestWizardTrainEvaluateInstall(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	tr := newFakeTraining()
	cfg := config.Default()
	var savedMu sync.Mutex
	var saved []string // SaveConfig runs off the UI goroutine
	services := Services{Clone: svc, Training: tr, Config: cfg, SaveConfig: func(c *config.Config) error {
		savedMu.Lock()
		saved = append(saved, c.ASR.Model)
		savedMu.Unlock()
		return nil
	}}
	u, _ := newTestUI(t, services)
	w := u.wizard
	labelledDataset(t, u, "Ada", goalRecognition)
	if w.next.Disabled() {
		t.Fatal("Next from proofreading is disabled although training is available")
	}
	test.Tap(w.next)
	p := w.train
	waitFor(t, u, "the readiness checks", func() bool { return strings.Contains(p.checks.Text, "PyTorch 1.13.0") })
	if !strings.Contains(p.checks.Text, "✓ Starting point: sensevoice-demo (demo-grade)") || p.start.Disabled() {
		t.Fatalf("checks %q, start disabled=%v", p.checks.Text, p.start.Disabled())
	}
	test.Tap(p.start)
	waitFor(t, u, "the job to start", func() bool { return p.running() && p.cancel.Visible() })
	tr.ticks(3)
	waitFor(t, u, "three steps shown", func() bool { return strings.HasPrefix(p.status.Text, "Step 3 of 10") })
	if !strings.Contains(p.status.Text, "about 4 min left") || !strings.Contains(p.status.Text, "2 processes") {
		t.Errorf("progress line %q", p.status.Text)
	}
	if got := p.bar.Value; got < 0.29 || got > 0.31 {
		t.Errorf("bar at %.2f after 3 of 10 steps", got)
	}
	if len(p.plot.points) != 3 || !p.plot.Visible() {
		t.Errorf("the loss plot has %d points", len(p.plot.points))
	}
	// the person looks at other steps meanwhile; the job goes on
	test.Tap(w.stepBtns[stepProof])
	if w.step != stepProof || w.stepBtns[stepCollect].Disabled() {
		t.Error("the wizard is locked while training")
	}
	tr.ticks(1)
	test.Tap(w.stepBtns[stepTrain])
	waitFor(t, u, "step 4", func() bool { return strings.HasPrefix(p.status.Text, "Step 4 of 10") })
	test.Tap(p.cancel)
	waitFor(t, u, "the job to stop", func() bool { return !p.run })
	if !strings.Contains(p.status.Text, "Cancelled at step 4 of 10") || !p.resume.Visible() || p.resume.Disabled() {
		t.Errorf("after Cancel: %q, resume visible=%v", p.status.Text, p.resume.Visible())
	}
	if done, _ := w.stepState(stepTrain); done {
		t.Error("a cancelled job counts as trained")
	}

	// Parley restarts: the dataset reopens at the train step with the stopped job
	u2, _ := newTestUI(t, services)
	u2.app.Preferences().SetString("wizard.dataset", "Ada")
	u2.app.Preferences().SetString("wizard.goal.Ada", goalRecognition)
	u2.tabs.SelectIndex(5)
	u2.wizard.d = nil
	u2.wizard.openNamed("Ada")
	w2, p2 := u2.wizard, u2.wizard.train
	waitFor(t, u2, "the stopped job found", func() bool { return p2.resume.Visible() })
	if w2.step != stepTrain || !strings.Contains(p2.status.Text, "Cancelled at step 4 of 10") {
		t.Errorf("after the restart: step %d, %q", w2.step, p2.status.Text)
	}
	test.Tap(p2.resume)
	waitFor(t, u2, "the job to resume", func() bool { return p2.running() })
	tr.ticks(6)
	waitFor(t, u2, "the job to finish", func() bool { return !p2.run })
	if !strings.HasPrefix(p2.status.Text, "Step 10 of 10") || !strings.Contains(p2.status.Text, "Trained: 10 steps") {
		t.Errorf("finished: %q", p2.status.Text)
	}
	if len(p2.plot.points) != 10 {
		t.Errorf("the plot has %d points after resuming, want the whole run", len(p2.plot.points))
	}
	if w2.next.Disabled() {
		t.Fatal("Next: Evaluate is disabled after training")
	}

	// 6 Evaluate
	test.Tap(w2.next)
	e := w2.eval
	if e.run.Disabled() {
		t.Fatalf("evaluate disabled: %q", e.why.Text)
	}
	test.Tap(e.run)
	waitIdle(t, u2)
	if !strings.Contains(e.summary.Text, "Character error rate on 2 held-out clips: 40.0% before, 10.0% after — better") || len(e.items) != 2 {
		t.Errorf("evaluation %q with %d rows", e.summary.Text, len(e.items))
	}
	if !strings.Contains(shown(e.box), "B, after (1 errors): good nite") {
		t.Errorf("the A/B rows are not shown:\n%s", shown(e.box))
	}
	// 7 Install, then use it
	test.Tap(w2.next)
	in := w2.install
	if in.run.Disabled() {
		t.Fatalf("install disabled: %q", in.why.Text)
	}
	test.Tap(in.run)
	waitIdle(t, u2)
	tr.mu.Lock()
	installs := tr.installs
	tr.mu.Unlock()
	if installs != 1 || !strings.Contains(in.done.Text, "Installed as sensevoice-ada") || !in.use.Visible() {
		t.Fatalf("install: %d, %q", installs, in.done.Text)
	}
	test.Tap(in.use)
	waitFor(t, u2, "the switch", func() bool {
		savedMu.Lock()
		defer savedMu.Unlock()
		return len(saved) == 1 && cfg.ASR.Model == "sensevoice-ada"
	})
	if !strings.Contains(in.done.Text, "Parley uses it to hear you") || !in.use.Disabled() {
		t.Errorf("after switching: %q", in.done.Text)
	}
	if done, _ := w2.stepState(stepInstall); !done {
		t.Error("install is not done")
	}
}

// TestWizardTrainBlocked: a machine without PyTorch (the voice goal: the exact install line;
// the quick clone, which needs no training, still offered) and a goal this build cannot
// train each say so on the train page and keep Start disabled.
func TestWizardTrainBlocked(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	tr := newFakeTraining()
	tr.checkErr = errors.New("tune: PyTorch is not installed for /usr/bin/python3 (ModuleNotFoundError: No module named 'torch'); install it with: sudo apt-get install python3-torch")
	u, _ := newTestUI(t, Services{Clone: svc, Training: tr})
	w := u.wizard
	tr.unsupported = map[string]error{goalRecognition: errors.New("fine-tuning the recogniser is not in this build")}
	labelledDataset(t, u, "Bo", goalVoice)
	test.Tap(w.stepBtns[stepTrain])
	waitFor(t, u, "the checks", func() bool { return strings.Contains(w.train.checks.Text, "✗ Python and PyTorch") })
	if !strings.Contains(w.train.checks.Text, "sudo apt-get install python3-torch") || !w.train.start.Disabled() {
		t.Errorf("voice goal, no PyTorch: %q", w.train.checks.Text)
	}
	if !w.train.quick.box.Visible() || w.train.quick.make.Disabled() != (w.d.Summary().Usable < tune.MinASRClips) {
		t.Error("without PyTorch the quick clone (no training) is not offered")
	}
	w.goalSel.SetSelected(goalLabels[goalRecognition])
	if !w.train.start.Disabled() || !strings.Contains(w.train.why.Text, "not in this build") {
		t.Errorf("a goal this build cannot train: %q", w.train.why.Text)
	}
}

// TestWizardVoiceWhatToTrain: the voice goal's train step offers the whole model or a speaker
// vector, defaulting to the whole model on the demo voice and to a speaker vector on a
// full-size model; the choice (the default or the person's) reaches the new job, and the
// recognition goal does not show it.
func TestWizardVoiceWhatToTrain(t *testing.T) {
	requireWizardModels(t)
	for _, full := range []bool{false, true} {
		svc := newTestCloning(t)
		tr := newFakeTraining()
		tr.fullSize = full
		u, _ := newTestUI(t, Services{Clone: svc, Training: tr})
		w := u.wizard
		labelledDataset(t, u, "Cy", goalVoice)
		test.Tap(w.stepBtns[stepTrain])
		p := w.train
		waitFor(t, u, "the checks", func() bool { return strings.Contains(p.checks.Text, "Starting point") && !p.start.Disabled() })
		want := whatWhole
		if full {
			want = whatSpeaker
		}
		if !p.what.Visible() || p.what.Selected != want {
			t.Fatalf("full-size %v: visible=%v, selected %q", full, p.what.Visible(), p.what.Selected)
		}
		if got := u.Content().MinSize().Width; got > 700 {
			t.Errorf("the train step with the choice needs %.0f px, want ≤ 700 (the choice %.0f, the quick clone %.0f)", got, p.what.MinSize().Width, p.quick.box.MinSize().Width)
		}
		test.Tap(p.start)
		waitFor(t, u, "the job to start", func() bool { return p.running() })
		if !p.what.Disabled() {
			t.Error("the choice can change while the job runs")
		}
		test.Tap(p.cancel)
		waitFor(t, u, "the job to stop", func() bool { return !p.run })
		tr.mu.Lock()
		got := tr.opts[1].WholeModel
		tr.mu.Unlock()
		if got != !full {
			t.Errorf("full-size %v: the job's WholeModel is %v", full, got)
		}
		// the person's choice wins over the default, and is kept
		other := map[bool]string{false: whatSpeaker, true: whatWhole}[full]
		p.what.SetSelected(other)
		w.refresh()
		if p.what.Selected != other {
			t.Errorf("the choice %q was reset to %q", other, p.what.Selected)
		}
		test.Tap(p.start)
		waitFor(t, u, "the second job to start", func() bool { return p.running() })
		test.Tap(p.cancel)
		waitFor(t, u, "the second job to stop", func() bool { return !p.run })
		tr.mu.Lock()
		got = tr.opts[2].WholeModel
		tr.mu.Unlock()
		if got != full {
			t.Errorf("full-size %v: the person's choice %q gave WholeModel %v", full, other, got)
		}
		// Parley restarts: the choice shown is what the dataset's last job trained
		u2, _ := newTestUI(t, Services{Clone: svc, Training: tr})
		u2.app.Preferences().SetString("wizard.dataset", "Cy")
		u2.app.Preferences().SetString("wizard.goal.Cy", goalVoice)
		u2.wizard.d = nil
		u2.wizard.openNamed("Cy")
		test.Tap(u2.wizard.stepBtns[stepTrain])
		p2 := u2.wizard.train
		waitFor(t, u2, "the last job found", func() bool { return p2.job != nil && p2.what.Selected != "" })
		if p2.what.Selected != other {
			t.Errorf("full-size %v, after a restart: %q shown, the last job trained %q", full, p2.what.Selected, other)
		}
		w.goalSel.SetSelected(goalLabels[goalRecognition])
		w.refresh()
		if p.what.Visible() {
			t.Error("the recognition goal shows the voice's choice")
		}
	}
}

// The voice's seed-speaker search (before the job exists) says how far it is and, from the
// first speaker done, how long it has left.
func TestWizardSeedSearchProgress(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	tr := newFakeTraining()
	tr.search = make(chan struct{})
	u, _ := newTestUI(t, Services{Clone: svc, Training: tr})
	w := u.wizard
	labelledDataset(t, u, "Ada", goalVoice)
	test.Tap(w.next)
	p := w.train
	waitFor(t, u, "the readiness checks", func() bool { return !p.start.Disabled() })
	test.Tap(p.start)
	waitFor(t, u, "the search shown", func() bool { return strings.Contains(p.status.Text, "1 of 4 seed speakers") })
	if !strings.Contains(p.status.Text, "left.") || !strings.Contains(p.status.Text, "finding the seed speaker") {
		t.Errorf("search status %q: no time left", p.status.Text)
	}
	close(tr.search)
	waitFor(t, u, "the job to start", func() bool { return p.job != nil })
	test.Tap(p.cancel)
	waitFor(t, u, "the job to stop", func() bool { return !p.run })
}

func TestPrepLeft(t *testing.T) {
	for _, c := range []struct {
		spent       time.Duration
		done, total int
		want        string
	}{{10 * time.Second, 0, 4, ""}, {10 * time.Second, 4, 4, ""}, {30 * time.Second, 1, 4, ", about 2 min left"}, {5 * time.Second, 1, 3, ", about a minute left"}} {
		if got := prepLeft(c.spent, c.done, c.total); got != c.want {
			t.Errorf("%v %d/%d: %q, want %q", c.spent, c.done, c.total, got, c.want)
		}
	}
}

// While a job prepares (no steps to count yet) the train step says what runs and for how
// long, the time moving each second, under a bar that moves: it never looks frozen at 0 %.
func TestWizardTrainPreparingIsNotFrozen(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	tr := newFakeTraining()
	tr.prepare = make(chan struct{})
	u, _ := newTestUI(t, Services{Clone: svc, Training: tr})
	w := u.wizard
	labelledDataset(t, u, "Ada", goalRecognition)
	test.Tap(w.next)
	p := w.train
	waitFor(t, u, "the readiness checks", func() bool { return !p.start.Disabled() })
	test.Tap(p.start)
	waitFor(t, u, "the preparation shown", func() bool { return strings.HasPrefix(p.status.Text, "Preparing (prepare)…") })
	if !p.prep.Visible() || p.bar.Visible() {
		t.Errorf("while preparing: moving bar shown %v, step bar shown %v", p.prep.Visible(), p.bar.Visible())
	}
	first := p.status.Text
	waitFor(t, u, "the time so far to move", func() bool { return p.status.Text != first && strings.HasSuffix(p.status.Text, "so far.") })
	close(tr.prepare)
	tr.ticks(1)
	waitFor(t, u, "the first step", func() bool { return strings.HasPrefix(p.status.Text, "Step 1 of 10") })
	if p.prep.Visible() || !p.bar.Visible() {
		t.Errorf("training: moving bar shown %v, step bar shown %v", p.prep.Visible(), p.bar.Visible())
	}
	test.Tap(p.cancel)
	waitFor(t, u, "the job to stop", func() bool { return !p.run })
}
