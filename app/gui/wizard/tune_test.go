package wizard

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/voices"
)

// TestTrainingService: the wizard's adapter over app/tune on a real store — which goals it
// trains, the starting point, a dataset's job found again (also by a new adapter, as after a
// restart), the stored evaluation read back as the evaluate step shows it, and an install
// refused when the fine-tune is not better. (Training itself is app/tune's test.)
func TestTrainingService(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "parley.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.DiscardHandler)
	ts := tune.NewTrainingService(st, factory.New(nil, log))
	ts.ASRModel = "sensevoice-demo"
	ctx := context.Background()
	if err := ts.Supports(goalVoice); !errors.Is(err, tune.ErrVoiceTraining) {
		t.Errorf("voice goal without the voice models: %v", err)
	}
	if err := ts.Supports(goalRecognition); err != nil {
		t.Errorf("recognition goal: %v", err)
	}
	ts.Voice = svc.CloneService
	if err := ts.Supports(goalVoice); err != nil {
		t.Errorf("voice goal: %v", err)
	}
	if id, demo, err := ts.Base(ctx, goalVoice); err != nil || id != "tiny" || demo {
		t.Errorf("voice base: %q demo=%v %v", id, demo, err)
	}
	if id, demo, err := ts.Base(ctx, goalRecognition); err != nil || id != "sensevoice-demo" || !demo {
		t.Errorf("base: %q demo=%v %v", id, demo, err)
	}
	if ts.MinClips(goalRecognition) != tune.MinASRClips {
		t.Errorf("min clips %d", ts.MinClips(goalRecognition))
	}

	u, _ := newTestUI(t, Services{Clone: svc})
	labelledDataset(t, u, "Ada", goalRecognition)
	d := u.wizard.d
	if j, err := ts.Latest(ctx, d, goalRecognition); err != nil || j != nil {
		t.Fatalf("a new dataset has job %v (%v)", j, err)
	}
	if _, err := ts.Create(ctx, d, goalRecognition, tune.JobOptions{}); !errors.Is(err, tune.ErrTooFewClips) {
		t.Fatalf("3 clips: %v, want ErrTooFewClips", err)
	}
	moreSpeech(t, u)
	j, err := ts.Create(ctx, d, goalRecognition, tune.JobOptions{})
	if err != nil {
		t.Fatalf("create: %v (%d usable clips)", err, d.Summary().Usable)
	}
	// the voice goal's choice: the whole model makes a --gpt job, a speaker vector does not
	for _, whole := range []bool{true, false} {
		vj, err := ts.Create(ctx, d, goalVoice, tune.JobOptions{WholeModel: whole})
		if err != nil {
			t.Fatalf("voice job (whole model %v): %v", whole, err)
		}
		vm, _ := tune.TTSMetaOf(vj)
		gpt := false
		for _, st := range vj.Spec.Steps {
			gpt = gpt || (st.Train && slices.Contains(st.Args, "--gpt"))
		}
		if vm.GPT != whole || gpt != whole {
			t.Errorf("whole model %v: the job's meta says GPT %v, its trainer --gpt %v", whole, vm.GPT, gpt)
		}
	}
	m, _ := tune.ASRMetaOf(j)
	if m.Dataset != d.Dir() || len(m.HeldOut) == 0 || m.BaseID != "sensevoice-demo" {
		t.Errorf("job meta %+v", m)
	}
	again := tune.NewTrainingService(st, factory.New(nil, log)) // a restarted app
	got, err := again.Latest(ctx, d, goalRecognition)
	if err != nil || got == nil || got.ID != j.ID {
		t.Fatalf("the job is not found again: %v %v", got, err)
	}
	if ev := again.Evaluation(*got); ev != nil {
		t.Errorf("a job never evaluated has an evaluation: %+v", ev)
	}
	res := tune.ASRResult{
		Before: tune.Score{CER: 0.5, Errors: 5, Chars: 10, Clips: []tune.ClipScore{{Clip: m.HeldOut[0], Ref: "hello there", Hyp: "helo", Errors: 5, Chars: 10}}},
		After:  tune.Score{CER: 0.6, Errors: 6, Chars: 10, Clips: []tune.ClipScore{{Clip: m.HeldOut[0], Ref: "hello there", Hyp: "hel", Errors: 6, Chars: 10}}},
	}
	if err := ts.Runner().SetResult(ctx, j.ID, "evaluate", res); err != nil {
		t.Fatal(err)
	}
	got, _ = again.Latest(ctx, d, goalRecognition)
	ev := again.Evaluation(*got)
	if ev == nil || ev.Before != 0.5 || ev.After != 0.6 || ev.Improved || len(ev.Items) != 1 {
		t.Fatalf("evaluation %+v", ev)
	}
	if it := ev.Items[0]; it.Before != "helo" || it.After != "hel" || it.Path != filepath.Join("clips", m.HeldOut[0]+".wav") {
		t.Errorf("item %+v", it)
	}
	if _, err := os.Stat(d.Abs(ev.Items[0].Path)); err != nil {
		t.Errorf("the A/B clip does not play: %v", err)
	}
	if _, err := again.Install(ctx, *got); !errors.Is(err, tune.ErrNotBetter) {
		t.Errorf("installing a worse model: %v", err)
	}
	if _, err := again.Start(ctx, 9999, nil); err == nil {
		t.Error("starting a job that does not exist")
	}
}

// moreSpeech imports, slices and labels nine more sentences into the open dataset.
func moreSpeech(t *testing.T, u *testUI) {
	t.Helper()
	in := t.TempDir()
	writeWizardWAV(t, filepath.Join(in, "more.wav"), longRecording(t, "en-us",
		"my favourite season is autumn when the leaves turn red and gold",
		"she sells sea shells by the sea shore every summer morning",
		"turn left at the bakery and walk past the old blue gate",
		"the library opens at half past eight on saturday mornings",
		"seven red balloons drifted over the harbour and out to sea",
		"could you read the next chapter out loud after dinner",
		"the bus was late again so i walked the last mile home",
		"a gentle breeze carried the smell of pine needles and smoke",
		"we measured the room twice and it was four metres wide"))
	u.wizard.show(stepCollect)
	u.wizard.collect.importPaths([]string{in})
	waitIdle(t, u)
	u.wizard.show(stepSlice)
	u.wizard.slice.slice()
	waitIdle(t, u)
	u.wizard.show(stepLabel)
	u.wizard.label.label()
	waitIdle(t, u)
}

// TestWizardQuickClone: while the voice model cannot be fine-tuned, the voice goal's train
// step makes a zero-shot clone from the dataset (the tiny ChatTTS export), adds it to the
// library, compares it with a random voice on the held-out clips, and plays A and B.
func TestWizardQuickClone(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	u, _ := newTestUI(t, Services{Clone: svc})
	w := u.wizard
	labelledDataset(t, u, "Ada", goalVoice)
	q := w.train.quick
	w.show(stepTrain)
	if !q.box.Visible() || !q.make.Disabled() || !strings.Contains(q.msg.Text, "at least 8 usable clips") {
		t.Fatalf("with 3 clips: visible=%v disabled=%v %q", q.box.Visible(), q.make.Disabled(), q.msg.Text)
	}
	moreSpeech(t, u)
	w.show(stepTrain)
	if q.make.Disabled() || q.msg.Text != "" {
		t.Fatalf("with enough clips: disabled=%v %q", q.make.Disabled(), q.msg.Text)
	}
	test.Tap(q.make)
	waitIdle(t, u)
	if !strings.HasPrefix(q.msg.Text, "Made ada-clone from clip") || !svc.HasVoice("ada-clone") {
		t.Fatalf("clone: %q", q.msg.Text)
	}
	if q.compare.Disabled() || q.make.Text != "Make it again" {
		t.Errorf("after the clone: compare disabled=%v, %q", q.compare.Disabled(), q.make.Text)
	}
	test.Tap(q.compare)
	waitIdle(t, u)
	if len(q.scores) != 2 || len(q.texts) == 0 || !strings.Contains(q.result.Text, "ada-clone: sounds") || !q.playB.Visible() {
		t.Fatalf("compare: %q (%v)", q.result.Text+q.msg.Text, q.scores)
	}
	t.Logf("%s", q.result.Text)
	test.Tap(q.playA)
	waitPlayed(t, u, svc, 1, "A")
	test.Tap(q.playB)
	waitPlayed(t, u, svc, 2, "B")
	// the recognition goal has its own train step: no quick clone there
	w.goalSel.SetSelected(goalLabels[goalRecognition])
	if q.box.Visible() {
		t.Error("the quick clone shows for the recognition goal")
	}
}

// waitLong is waitFor for the real trainer and the real voice model, whose jobs can take
// minutes on a loaded machine.
func waitLong(t *testing.T, u *testUI, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		drain(u)
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestWizardVoiceFineTune walks the voice goal's steps 5–7 end to end on the tiny ChatTTS
// export with the real trainer (app/tune's voice recipe, as `parley finetune train`): the
// checklist, a job trained from the closest seed speaker with its progress and loss plot,
// the evaluation (a random voice, a 3-second zero-shot clone and the fine-tuned voice on the
// held-out sentences, their speech kept for A/B and played), and the install into the voice
// library — refused with nothing changed while both of the dataset's names are other
// voices, then under the free one, again over its own earlier install, and "Use it in
// Parley" switching the assistant's voice. The quick clone stays beside the fine-tune.
func TestWizardVoiceFineTune(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: trains a voice")
	}
	requireWizardModels(t)
	svc := newTestCloning(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "parley.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// a voice job long enough to hold at a checkpoint: the trainer's failpoint stops it right
	// after step 25's checkpoint, so Cancel lands there however loaded the machine is
	t.Setenv("PARLEY_TRAIN_HOLD_AT_STEP", "25")
	training := func() *tune.TrainingService {
		ts := tune.NewTrainingService(st, nil)
		ts.Voice, ts.VoiceEpochs, ts.Procs, ts.Threads = svc.CloneService, 30, 1, 1
		return ts
	}
	cfg := config.Default()
	var savedMu sync.Mutex
	var saved []config.TTS
	services := Services{Clone: svc, Training: training(), Config: cfg, SaveConfig: func(c *config.Config) error {
		savedMu.Lock()
		saved = append(saved, c.TTS)
		savedMu.Unlock()
		return nil
	}}
	u, _ := newTestUI(t, services)
	w := u.wizard
	labelledDataset(t, u, "Ada", goalVoice)
	moreSpeech(t, u)
	w.show(stepTrain)
	p := w.train
	waitLong(t, u, "the readiness checks", func() bool { return p.checked != "" || p.checkEr != nil })
	drain(u)
	if p.checkEr != nil {
		t.Skipf("no PyTorch here: %v", p.checkEr)
	}
	if !strings.Contains(p.checks.Text, "✓ Starting point: the voice model tiny") || p.start.Disabled() || !p.quick.box.Visible() {
		t.Fatalf("checks %q, start disabled=%v, quick clone visible=%v", p.checks.Text, p.start.Disabled(), p.quick.box.Visible())
	}
	test.Tap(p.start)
	waitLong(t, u, "the checkpoint at step 25", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.live.Step == 25 && p.live.Checkpoint != ""
	})
	test.Tap(p.cancel)
	waitLong(t, u, "the job to stop", func() bool { return !p.run })
	if !strings.Contains(p.status.Text, "Cancelled at step 25 of") || !p.resume.Visible() {
		t.Fatalf("after Cancel: %q %q, resume visible=%v", p.status.Text, p.why.Text, p.resume.Visible())
	}
	if b, err := os.ReadFile(filepath.Join(p.job.Spec.Dir, "speaker-init.bin")); err != nil || len(b) != 4*16 {
		t.Errorf("the job did not start from the closest seed speaker: %d bytes, %v", len(b), err)
	}

	// Parley restarts: the dataset reopens at the train step with the stopped voice job,
	// which resumes from its step-25 checkpoint and finishes
	services.Training = training()
	u, _ = newTestUI(t, services)
	u.app.Preferences().SetString("wizard.dataset", "Ada")
	u.app.Preferences().SetString("wizard.goal.Ada", goalVoice)
	u.tabs.SelectIndex(5)
	u.wizard.d = nil
	u.wizard.openNamed("Ada")
	w, p = u.wizard, u.wizard.train
	waitLong(t, u, "the stopped job found", func() bool { return p.resume.Visible() && !p.resume.Disabled() })
	if w.step != stepTrain || !strings.Contains(p.status.Text, "Cancelled at step 25 of") {
		t.Fatalf("after the restart: step %d, %q", w.step, p.status.Text)
	}
	test.Tap(p.resume)
	waitLong(t, u, "the voice to train", func() bool { return !p.run })
	if p.job == nil || p.job.Status != store.JobDone {
		t.Fatalf("the job did not finish: %q %q", p.status.Text, p.why.Text)
	}
	if p.job.Spec.Kind != tune.TTSKind || !strings.Contains(p.status.Text, "Trained:") || len(p.plot.points) < 5 || p.job.Progress.Resumed != 1 {
		t.Errorf("after training: %s %q, %d loss points, resumed %d times", p.job.Spec.Kind, p.status.Text, len(p.plot.points), p.job.Progress.Resumed)
	}
	for i, pt := range p.plot.points[1:] {
		if pt.Step <= p.plot.points[i].Step {
			t.Fatalf("the loss history repeats steps after the resume: %+v", p.plot.points)
		}
	}

	// 6 Evaluate
	drain(u)
	test.Tap(w.next)
	e := w.eval
	if w.step != stepEval || e.run.Disabled() {
		t.Fatalf("evaluate: step %d, %q", w.step, e.why.Text)
	}
	test.Tap(e.run)
	waitLong(t, u, "the evaluation", func() bool { return w.busy == nil })
	ev := e.evaluation()
	if ev == nil {
		t.Fatalf("no evaluation: %q", e.why.Text)
	}
	t.Logf("%s", e.summary.Text)
	if len(ev.Voices) != 3 || !strings.Contains(ev.Voices[1].Name, "zero-shot clone") || len(ev.Items) == 0 {
		t.Fatalf("voices %+v, %d items", ev.Voices, len(ev.Items))
	}
	for _, want := range []string{"A: a random voice (seed ", "a zero-shot clone from a ", "B: your fine-tuned voice — "} {
		if !strings.Contains(e.summary.Text, want) {
			t.Errorf("the summary lacks %q:\n%s", want, e.summary.Text)
		}
	}
	if ev.Before != ev.Voices[0].Similarity || ev.After != ev.Voices[2].Similarity || ev.Improved != (ev.After > ev.Before) {
		t.Errorf("before %.3f after %.3f improved %v: %+v", ev.Before, ev.After, ev.Improved, ev.Voices)
	}
	for _, it := range ev.Items {
		for _, wav := range []string{it.PlayA, it.PlayB, it.Path} {
			if pcm, err := w.d.ReadClip(wav); err != nil || len(pcm) == 0 {
				t.Errorf("%s: %d samples, %v", wav, len(pcm), err)
			}
		}
		if it.PlayA == it.PlayB {
			t.Errorf("A and B are one file: %s", it.PlayA)
		}
	}
	if got := shown(e.box); !strings.Contains(got, "B, your fine-tuned voice (heard with") {
		t.Errorf("the A/B rows are not shown:\n%s", got)
	}
	// A and B of the first sentence, from the row's own buttons
	var buttons []*widget.Button
	deepCollect(e.list, func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok && b.Visible() && b.OnTapped != nil {
			buttons = append(buttons, b)
		}
	})
	if len(buttons) < 3 {
		t.Fatalf("%d play buttons in the rows", len(buttons))
	}
	for i, b := range buttons[:3] { // the clip, A, B
		b.OnTapped()
		waitPlayed(t, u, svc, i+1, "clip, A or B")
	}

	// 7 Install: a voice the speaker encoder does not find closer to the person than a random
	// one (the tiny random model's usual case) is offered "anyway", with the reason
	test.Tap(w.next)
	in := w.install
	if w.step != stepInstall || in.run.Disabled() {
		t.Fatalf("install: step %d, disabled=%v, %q", w.step, in.run.Disabled(), in.why.Text)
	}
	if ev.Improved != !strings.Contains(in.why.Text, "install it anyway") || ev.Improved != (in.run.Text == "Install") {
		t.Errorf("improved=%v: %q, button %q", ev.Improved, in.why.Text, in.run.Text)
	}
	lib, _ := svc.Library()
	other := func(name string) {
		v := voices.New(name, "chattts", voices.KindSeed)
		seed := int64(7)
		v.Seed = &seed
		if err := lib.Save(v, false); err != nil {
			t.Fatal(err)
		}
	}
	other("ada")
	other("ada-tuned")
	test.Tap(in.run)
	waitLong(t, u, "the install", func() bool { return w.busy == nil })
	if !strings.Contains(in.why.Text, "Install failed, nothing was changed") || !strings.Contains(in.why.Text, "rename or delete one") {
		t.Fatalf("both names taken: %q", in.why.Text)
	}
	if v, _ := lib.Get("ada"); v.Kind != voices.KindSeed {
		t.Fatalf("a failed install changed another voice: %+v", v)
	}
	lib.Remove("ada-tuned")
	test.Tap(in.run)
	waitLong(t, u, "the install", func() bool { return w.busy == nil })
	v, err := lib.Get("ada-tuned")
	if err != nil || v.Kind != voices.KindEmbedding || v.Embedding == nil || !strings.Contains(in.done.Text, "Installed in the voice library as ada-tuned") {
		t.Fatalf("install: %+v %v; %q %q", v, err, in.done.Text, in.why.Text)
	}
	if done, _ := w.stepState(stepInstall); !done || in.run.Text != "Install again" {
		t.Errorf("install not done: %q", in.run.Text)
	}
	test.Tap(in.run) // again: it replaces its own voice, not another
	waitLong(t, u, "the install", func() bool { return w.busy == nil })
	if in.why.Text != "" || !strings.Contains(in.done.Text, "ada-tuned") {
		t.Fatalf("install again: %q %q", in.why.Text, in.done.Text)
	}
	// the voice speaks, as every face would speak it
	if pcm, err := svc.Say(context.Background(), "ada-tuned", 0, "hello there"); err != nil || len(pcm) == 0 {
		t.Fatalf("say with the installed voice: %v", err)
	}
	test.Tap(in.use)
	waitFor(t, u, "the switch", func() bool {
		savedMu.Lock()
		defer savedMu.Unlock()
		return len(saved) == 1 && cfg.TTS.Voice == "ada-tuned" && cfg.TTS.Engine == "chattts"
	})
	if !strings.Contains(in.done.Text, "Parley speaks with it") || !in.use.Disabled() {
		t.Errorf("after switching: %q", in.done.Text)
	}
}

// The evaluate step says when the quick clone sounded more like the person than the
// fine-tuned voice, and says nothing of it when the fine-tune won.
func TestVoiceSummaryNamesABetterClone(t *testing.T) {
	ev := &tune.Evaluation{Voices: []tune.VoiceScore{
		{Name: "a random voice (seed 3)", Similarity: 0.05, CER: 0.2, Sentences: 4},
		{Name: "a zero-shot clone", Similarity: 0.61, CER: 0.25, Sentences: 4},
		{Name: "your fine-tuned voice", Similarity: 0.48, CER: 0.3, Sentences: 4},
	}}
	if got := voiceSummary(ev); !strings.Contains(got, "The quick clone a zero-shot clone sounds more like you than the fine-tuned voice (0.61 against 0.48)") {
		t.Errorf("clone better, summary:\n%s", got)
	}
	ev.Voices[2].Similarity = 0.7
	if got := voiceSummary(ev); strings.Contains(got, "quick clone") {
		t.Errorf("fine-tune better, summary:\n%s", got)
	}
}
