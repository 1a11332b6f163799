package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/voices"
)

// TestFinetuneTrainInstall: parley finetune train (speaker vector, from the closest of 2 seed
// speakers) and install on the tiny ChatTTS export; the voice then speaks through say.
func TestFinetuneTrainInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	gputest.RequireORT(t)
	if _, err := tune.CheckPython(t.Context(), tune.DefaultPython); err != nil {
		t.Skipf("no PyTorch: %v", err)
	}
	vad := filepath.Join(assets.ModelsDir(), "silero-vad-v5") // set up by make setup
	isolate(t)
	labelledDataset(t, "anna", 10)
	tiny, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "chattts", "tiny"))
	if code, _, errs := runCLI(t, "finetune", "install", "anna"); code == 0 || !strings.Contains(errs, "no finished voice training") {
		t.Fatalf("install before training: %d %s", code, errs)
	}
	// a few clips are far from the 3 minutes a voice wants: refused unless forced
	code, out, errs := runCLI(t, "finetune", "train", "anna", "--model", tiny, "--epochs", "1", "--seeds", "2", "--procs", "1")
	if code == 0 || !strings.Contains(errs, "minutes of usable speech") || !strings.Contains(errs, "--force") {
		t.Fatalf("train on a few clips without --force: %d %s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "finetune", "train", "anna", "--model", tiny, "--epochs", "1", "--seeds", "2", "--procs", "1", "--force")
	if code != 0 {
		t.Fatalf("train: %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"starting speaker: seed:", "training a speaker vector of tiny", "next: parley finetune install anna"} {
		if !strings.Contains(out, want) {
			t.Errorf("train output lacks %q:\n%s", want, out)
		}
	}
	if code, out, errs := runCLI(t, "finetune", "install", "anna"); code != 0 || !strings.Contains(out, "voice anna installed") {
		t.Fatalf("install: %d %s%s", code, out, errs)
	}
	wav := filepath.Join(t.TempDir(), "a.wav")
	if code, _, errs := runCLI(t, "say", "--engine", "chattts", "--model", tiny, "--voice", "anna", "-o", wav, "Hello."); code != 0 {
		t.Fatalf("say with the trained voice: %d %s", code, errs)
	}
	if st, err := os.Stat(wav); err != nil || st.Size() < 1000 {
		t.Fatalf("no audio: %v", err)
	}

	// --gpt: the model is installed with the voice, and the voice is scored with that model
	code, out, errs = runCLI(t, "finetune", "train", "anna", "--gpt", "--new", "--model", tiny, "--epochs", "1", "--seeds", "0", "--procs", "1", "--force")
	if code != 0 {
		t.Fatalf("train --gpt: %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "finetune", "install", "anna", "--name", "anna-gpt")
	if code != 0 || !strings.Contains(out, "voice anna-gpt installed with its model chattts-anna-gpt") || !strings.Contains(out, "--voice anna-gpt@chattts-anna-gpt") {
		t.Fatalf("install --gpt: %d %s%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(vad, "silero_vad.onnx")); err != nil {
		t.Logf("no Silero VAD (make setup): the --gpt voice is not evaluated: %v", err)
		return
	}
	if err := os.Symlink(vad, filepath.Join(assets.ModelsDir(), "silero-vad-v5")); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "finetune", "evaluate", "anna", "--model", tiny, "--sentences", "1", "--voice", "anna-gpt@chattts-anna-gpt", "--json")
	if code != 0 || !strings.Contains(out, `"name":"anna-gpt@chattts-anna-gpt"`) {
		t.Fatalf("evaluate anna-gpt@chattts-anna-gpt: %d %s%s", code, out, errs)
	}
}

// TestFinetuneVoiceIsTheWizards: `parley finetune train` and `finetune install` are the
// wizard's steps 5 and 7 (tune.TrainingService) with flags, run here on a stand-in trainer
// (testdata/faketrain: the voice recipe's modules, quick and deterministic). For the same
// settings the command and the wizard make the same job (steps, processes, clips, held-out
// clips), the trainer runs with the same arguments, the stages the command prints are the
// events the wizard hears, and either face installs the same voice under the same name — the
// dataset's, as the wizard names it — replacing the dataset's own earlier install, and the
// wizard's stored evaluation says what the command installed.
func TestFinetuneVoiceIsTheWizards(t *testing.T) {
	fakeTrainer(t, "Anna_B")
	tiny, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "chattts", "tiny"))
	code, out, errs := runCLI(t, "finetune", "train", "Anna_B", "--model", tiny, "--seeds", "0", "--gpt=false",
		"--epochs", "3", "--lr", "0.01", "--procs", "1", "--force")
	if code != 0 {
		t.Fatalf("train: %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"job 1: training a speaker vector of tiny on ", "preparing the starting point…\ntraining…\n",
		"exporting the model…\n", "step 3/3 (100%)", "trained; next: parley finetune install Anna_B (then parley finetune evaluate Anna_B --voice anna-b)"} {
		if !strings.Contains(out, want) {
			t.Errorf("train output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "starting speaker:") {
		t.Errorf("--seeds 0 searched a starting speaker:\n%s", out)
	}
	code, out, errs = runCLI(t, "finetune", "install", "Anna_B")
	if code != 0 || !strings.HasPrefix(out, "voice anna-b installed\n") || !strings.Contains(out, "--voice anna-b ") {
		t.Fatalf("install: %d %s%s", code, out, errs)
	}
	lib, err := voices.Open(voices.DefaultDir())
	if err != nil {
		t.Fatal(err)
	}
	byCLI, err := lib.Get("anna-b")
	if err != nil {
		t.Fatal(err)
	}

	// the wizard's face on the same store, dataset and settings
	ctx := t.Context()
	f := factory.New(nil, nil)
	st, err := f.Store("")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := tune.NewTrainingService(st, f)
	ts.Voice, ts.Procs = tune.NewCloneService(f), 1
	ts.Voice.CloneModel = tiny
	cliJob, j, stages := wizardRun(t, ts, "Anna_B", tune.GoalVoice, tune.JobOptions{Epochs: 3, LR: 0.01, Seeds: -1})
	j2, _ := ts.Runner().Job(ctx, j.ID)
	sameJob(t, *cliJob, j2, stages)

	// the wizard installs its job (after its evaluation): the same voice, the same name,
	// replacing the command's install of the dataset's earlier job
	if err := ts.Runner().SetResult(ctx, j.ID, "evaluate", map[string]any{"voices": []tune.VoiceScore{{Name: "random"}, {Name: "fine-tuned"}}}); err != nil {
		t.Fatal(err)
	}
	j2, _ = ts.Runner().Job(ctx, j.ID)
	name, err := ts.Install(ctx, j2)
	if err != nil || name != "anna-b" {
		t.Fatalf("the wizard's install: %q %v", name, err)
	}
	byWizard, _ := lib.Get("anna-b")
	if byWizard == nil || byWizard.Description != byCLI.Description || byWizard.Kind != byCLI.Kind || !reflect.DeepEqual(byWizard.Embedding, byCLI.Embedding) {
		t.Errorf("the faces installed different voices:\n%+v\n%+v", byCLI, byWizard)
	}
	// the command installs the wizard's (newest) job again: over its own voice, and the
	// evaluation the wizard shows says so
	ts.Runner().SetResult(ctx, j.ID, "evaluate", map[string]any{"voices": []tune.VoiceScore{{Name: "random"}, {Name: "fine-tuned"}}})
	if code, out, errs := runCLI(t, "finetune", "install", "Anna_B"); code != 0 || !strings.HasPrefix(out, "voice anna-b installed\n") {
		t.Fatalf("install over the dataset's own voice: %d %s%s", code, out, errs)
	}
	j2, _ = ts.Runner().Job(ctx, j.ID)
	if ev := ts.Evaluation(j2); ev == nil || ev.Installed != "anna-b" {
		t.Errorf("the wizard's evaluation does not say what the command installed: %+v", ev)
	}
}

// sameJob fails t unless the command's job and the wizard's are one job: the same spec, the
// trainer run with the same arguments, and the stages the wizard heard the command's job did.
func sameJob(t *testing.T, cliJob, wizJob tune.Job, stages []string) {
	t.Helper()
	a, b := cliJob.Spec, wizJob.Spec
	if a.Title != b.Title || a.Procs != b.Procs || a.Threads != b.Threads || a.Samples != b.Samples ||
		string(a.Meta) != string(b.Meta) || !reflect.DeepEqual(a.Steps, b.Steps) {
		t.Errorf("the command's job\n%+v\nthe wizard's\n%+v", a, b)
	}
	argsOf := func(j tune.Job) string {
		b, err := os.ReadFile(filepath.Join(j.Spec.Dir, "run", "args.json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if x, y := argsOf(cliJob), argsOf(wizJob); x != y {
		t.Errorf("the trainer ran with\n%s\nfor the command, and with\n%s\nfor the wizard", x, y)
	}
	if !slices.Equal(stages, []string{"prepare", "train", "export"}) || !slices.Equal(cliJob.Progress.StagesDone, stages) {
		t.Errorf("stages: the wizard heard %v, the command's job did %v", stages, cliJob.Progress.StagesDone)
	}
}

// wizardRun finds the command's latest job on the dataset for goal, then makes and runs the
// wizard's own job with opts, as the wizard's train step does: -> the command's job, the
// wizard's, and the stages the wizard heard.
func wizardRun(t *testing.T, ts *tune.TrainingService, dataset, goal string, opts tune.JobOptions) (*tune.Job, tune.Job, []string) {
	t.Helper()
	ctx := t.Context()
	d, err := openDataset(dataset)
	if err != nil {
		t.Fatal(err)
	}
	cliJob, err := ts.Latest(ctx, d, goal)
	if err != nil || cliJob == nil {
		t.Fatalf("the command's job: %v %v", cliJob, err)
	}
	j, err := ts.Create(ctx, d, goal, opts)
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	wait, err := ts.Start(ctx, j.ID, func(ev tune.Event) {
		if ev.Kind == "stage" {
			stages = append(stages, ev.Progress.Stage)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatalf("the wizard's job: %v", err)
	}
	return cliJob, j, stages
}

// fakeTrainer isolates the test's home, points Parley at the stand-in trainer
// (testdata/faketrain) and makes a labelled dataset named dataset; it skips without PyTorch,
// which the stand-in still imports.
func fakeTrainer(t *testing.T, dataset string) {
	t.Helper()
	if _, err := tune.CheckPython(t.Context(), tune.DefaultPython); err != nil {
		t.Skipf("no PyTorch: %v", err)
	}
	isolate(t)
	fake, _ := filepath.Abs(filepath.Join("testdata", "faketrain", "train"))
	t.Setenv("PARLEY_TRAIN_DIR", fake)
	labelledDataset(t, dataset, 10)
}
