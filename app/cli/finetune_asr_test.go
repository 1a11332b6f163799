package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/voices/clone"
)

// labelledDataset makes dataset NAME with n labelled clips cut from testdata/speech.
func labelledDataset(t *testing.T, name string, n int) {
	t.Helper()
	d, err := clone.Create(filepath.Join(finetuneDir(), name), name)
	if err != nil {
		t.Fatal(err)
	}
	speech := filepath.Join("..", "..", "testdata", "speech")
	texts := map[string]string{
		"test-000001.wav": "how far away is the moon", "test-000002.wav": "she sells sea shells by the sea shore",
		"test-000003.wav": "", "test-000004.wav": "", "test-000008.wav": "", "test-000010.wav": "",
	}
	b, _ := os.ReadFile(filepath.Join(speech, "manifest.jsonl"))
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct{ Source, Target string }
		json.Unmarshal([]byte(l), &r)
		texts[r.Source] = r.Target
	}
	files := []string{"test-000001.wav", "test-000002.wav", "test-000003.wav", "test-000004.wav", "test-000008.wav", "test-000010.wav"}
	for i := range n {
		f := files[i%len(files)]
		id := fmt.Sprintf("s%04d-001", i+1)
		rel := filepath.Join("clips", id+".wav")
		in, _ := os.Open(filepath.Join(speech, f))
		out, _ := os.Create(d.Abs(rel))
		io.Copy(out, in)
		in.Close()
		out.Close()
		secs := 2.5
		if b, err := audio.ReadWAVFile(d.Abs(rel)); err == nil {
			secs = float64(len(b.Data)) / float64(b.Format.SampleRate*b.Format.Channels)
		}
		d.Clips = append(d.Clips, clone.Clip{ID: id, Source: fmt.Sprintf("s%04d", i+1), Path: rel, Seconds: secs, Text: texts[f], Lang: "en"})
	}
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
}

// TestFinetuneASR runs `parley finetune asr` on a tiny random recogniser (it cannot get
// better in one epoch, so nothing is installed and the command says why) and lists the job.
func TestFinetuneASR(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	gputest.RequireORT(t)
	if _, err := tune.CheckPython(t.Context(), tune.DefaultPython); err != nil {
		t.Skipf("no PyTorch: %v", err)
	}
	isolate(t)
	code, _, errs := runCLI(t, "finetune", "asr", "nobody")
	if code != 1 || !strings.Contains(errs, `no dataset "nobody"`) {
		t.Fatalf("unknown dataset: %d %s", code, errs)
	}
	labelledDataset(t, "few", 4)
	code, _, errs = runCLI(t, "finetune", "asr", "few")
	if code != 1 || !strings.Contains(errs, "4 usable clips, at least 8 are needed") {
		t.Fatalf("too few clips: %d %s", code, errs)
	}
	if code, out, _ := runCLI(t, "finetune", "jobs"); code != 0 || !strings.Contains(out, "no training jobs") {
		t.Fatalf("jobs: %d %s", code, out)
	}

	labelledDataset(t, "anna", 10)
	tiny, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "sensevoice", "tiny"))
	code, out, errs := runCLI(t, "finetune", "asr", "anna", "--base", tiny, "--epochs", "1", "--procs", "1")
	t.Logf("%s%s", out, errs)
	for _, want := range []string{"job 1: fine-tuning tiny on", "held out to score it", "training…", "exporting the model…", "character error rate"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if code == 0 {
		if !strings.Contains(out, "installed as sensevoice-anna") {
			t.Errorf("exit 0 without installing")
		}
	} else if !strings.Contains(errs, "not installed: on your") {
		t.Errorf("exit %d without saying why nothing was installed", code)
	}
	code, out, _ = runCLI(t, "finetune", "jobs", "--json")
	var jobs []struct {
		ID       int64  `json:"id"`
		Status   string `json:"status"`
		Progress tune.Progress
	}
	if err := json.Unmarshal([]byte(out), &jobs); err != nil || code != 0 || len(jobs) != 1 || jobs[0].Status != "done" || jobs[0].Progress.Results["evaluate"] == nil {
		t.Fatalf("jobs --json: %d %v %s", code, err, out)
	}
}

// TestFinetuneASRIsTheWizards: `parley finetune asr` is the wizard's steps 5–7 for the
// recogniser (tune.TrainingService) with flags, run on a stand-in trainer (testdata/faketrain,
// whose "fine-tuned" model is its starting point, so it is never better). For the same
// settings the command and the wizard make the same job, the trainer runs with the same
// arguments, the stages are the same, and the evaluation stored with each job is the same
// record; a starting point without a float model.onnx is refused in the command's words.
func TestFinetuneASRIsTheWizards(t *testing.T) {
	gputest.RequireORT(t)
	fakeTrainer(t, "anna")
	tiny, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "sensevoice", "tiny"))
	noFloat := t.TempDir()
	for _, f := range []string{"model.int8.onnx", "tokens.txt"} {
		b, _ := os.ReadFile(filepath.Join(tiny, f))
		os.WriteFile(filepath.Join(noFloat, f), b, 0o600)
	}
	code, out, errs := runCLI(t, "finetune", "asr", "anna", "--base", noFloat)
	if code != 1 || !strings.Contains(errs, "has no float model.onnx that Parley exported, so it cannot be fine-tuned from; get FunASR's SenseVoiceSmall") {
		t.Fatalf("a base without model.onnx: %d %s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "finetune", "asr", "anna", "--base", tiny, "--epochs", "3", "--lr", "0.001", "--procs", "1")
	if code != 1 || !strings.Contains(errs, "not installed: on your") || !strings.Contains(errs, "train longer (--epochs)") {
		t.Fatalf("asr: %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"job 1: fine-tuning tiny on ", "held out to score it", "preparing the starting point…\ntraining…\n",
		"exporting the model…\nscoring the held-out clips…\nheld-out clips: "} {
		if !strings.Contains(out, want) {
			t.Errorf("asr output lacks %q:\n%s", want, out)
		}
	}

	ctx := t.Context()
	f := factory.New(nil, nil)
	st, err := f.Store("")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := tune.NewTrainingService(st, f)
	ts.ASRModel, ts.Procs = tiny, 1
	cliJob, j, stages := wizardRun(t, ts, "anna", tune.GoalRecognition, tune.JobOptions{Epochs: 3, LR: 0.001})
	if _, err := ts.Evaluate(ctx, mustJob(t, ts, j.ID)); err != nil {
		t.Fatal(err)
	}
	j = mustJob(t, ts, j.ID)
	sameJob(t, *cliJob, j, stages)
	var x, y tune.ASRResult
	json.Unmarshal(cliJob.Progress.Results["evaluate"], &x)
	json.Unmarshal(j.Progress.Results["evaluate"], &y)
	if x.Message == "" || x.Message != y.Message || x.Improved != y.Improved || x.Before.CER != y.Before.CER || x.After.CER != y.After.CER {
		t.Errorf("the evaluations differ:\n%+v\n%+v", x, y)
	}
	if _, err := ts.Install(ctx, j); !errors.Is(err, tune.ErrNotBetter) {
		t.Errorf("the wizard installs what the command did not: %v", err)
	}
}

func mustJob(t *testing.T, ts *tune.TrainingService, id int64) tune.Job {
	t.Helper()
	j, err := ts.Runner().Job(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}
