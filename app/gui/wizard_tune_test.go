package gui

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/store"
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
	ts := newTrainingService(st, nil, log)
	ts.asrModel = "sensevoice-demo"
	ctx := context.Background()
	if err := ts.Supports(goalVoice); err == nil || !strings.Contains(err.Error(), "speech-token voice") {
		t.Errorf("voice goal: %v", err)
	}
	if err := ts.Supports(goalRecognition); err != nil {
		t.Errorf("recognition goal: %v", err)
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
	if _, err := ts.Create(ctx, d, goalRecognition); !errors.Is(err, tune.ErrTooFewClips) {
		t.Fatalf("3 clips: %v, want ErrTooFewClips", err)
	}
	moreSpeech(t, u)
	j, err := ts.Create(ctx, d, goalRecognition)
	if err != nil {
		t.Fatalf("create: %v (%d usable clips)", err, d.Summary().Usable)
	}
	m, _ := tune.ASRMetaOf(j)
	if m.Dataset != d.Dir() || len(m.HeldOut) == 0 || m.BaseID != "sensevoice-demo" {
		t.Errorf("job meta %+v", m)
	}
	again := newTrainingService(st, nil, log) // a restarted app
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
	if err := ts.r.SetResult(ctx, j.ID, "evaluate", res); err != nil {
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
func moreSpeech(t *testing.T, u *UI) {
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
	waitFor(t, u, "A played", func() bool { svc.mu.Lock(); defer svc.mu.Unlock(); return svc.played == 1 })
	test.Tap(q.playB)
	waitFor(t, u, "B played", func() bool { svc.mu.Lock(); defer svc.mu.Unlock(); return svc.played == 2 })
	// the recognition goal has its own train step: no quick clone there
	w.goalSel.SetSelected(goalLabels[goalRecognition])
	if q.box.Visible() {
		t.Error("the quick clone shows for the recognition goal")
	}
}
