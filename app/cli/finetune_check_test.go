package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/gpu"
)

// TestFinetuneCheck: `parley finetune check` names the trainer the jobs would run (here the
// repository's train/, found from the working directory), and when Python or PyTorch is
// missing exits 1 with the exact apt line; the configured train.dir wins and a wrong one is
// named.
func TestFinetuneCheck(t *testing.T) {
	realVAD := filepath.Dir(vad.DefaultModel()) // make setup's, before the data directory moves
	isolate(t)
	t.Setenv("PARLEY_TRAIN_DIR", "")
	repoTrain, _ := filepath.Abs(filepath.Join("..", "..", "train"))

	t.Setenv("PARLEY_TRAIN_PYTHON", filepath.Join(t.TempDir(), "no-python"))
	code, out, errs := runCLI(t, "finetune", "check", "--json")
	var r trainerReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("check --json: %v: %q", err, out)
	}
	if code != 1 || r.TrainDir != repoTrain || r.Torch != nil || r.Install != tune.InstallLine ||
		!strings.Contains(r.Error, "does not run") || !strings.Contains(errs, tune.InstallLine) {
		t.Errorf("no Python: exit %d, %+v, stderr %q", code, r, errs)
	}
	code, out, errs = runCLI(t, "finetune", "check")
	if code != 1 || !strings.Contains(out, "trainer:  "+repoTrain) || !strings.Contains(errs, tune.InstallLine) {
		t.Errorf("no Python (text): exit %d, %q, %q", code, out, errs)
	}

	empty := t.TempDir()
	t.Setenv("PARLEY_TRAIN_DIR", empty)
	code, out, _ = runCLI(t, "finetune", "check", "--json")
	r = trainerReport{}
	json.Unmarshal([]byte(out), &r)
	if code != 1 || r.TrainDir != "" || !strings.Contains(r.Error, empty) || !strings.Contains(r.Error, "trainer.py") {
		t.Errorf("train.dir without the trainer: exit %d, %+v", code, r)
	}

	t.Setenv("PARLEY_TRAIN_DIR", "")
	t.Setenv("PARLEY_TRAIN_PYTHON", "")
	if _, err := os.Stat(tune.DefaultPython); err != nil {
		t.Skip("no " + tune.DefaultPython)
	}
	if _, err := tune.CheckPython(t.Context(), tune.DefaultPython); err != nil {
		t.Skipf("no PyTorch: %v", err)
	}
	// PyTorch is there, but slicing recordings needs the Silero VAD model, missing here
	code, out, errs = runCLI(t, "finetune", "check")
	if code != 1 || !strings.Contains(out, "pytorch:  ") || !strings.Contains(out, "missing:  the Silero VAD model") ||
		strings.Contains(out, "Fine-tuning can run here.") || !strings.Contains(errs, "slicing recordings") {
		t.Errorf("with PyTorch, without the VAD model: exit %d, %q, %q", code, out, errs)
	}
	if err := gpu.Init(); err != nil {
		t.Skipf("no ONNX Runtime: %v", err)
	}
	if _, err := os.Stat(filepath.Join(realVAD, "silero_vad.onnx")); err != nil {
		t.Skipf("no Silero VAD (make setup): %v", err)
	}
	os.MkdirAll(filepath.Dir(filepath.Dir(vad.DefaultModel())), 0o755)
	if err := os.Symlink(realVAD, filepath.Dir(vad.DefaultModel())); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "finetune", "check")
	if code != 0 || !strings.Contains(out, "pytorch:  ") || !strings.Contains(out, "Fine-tuning can run here.") {
		t.Errorf("with PyTorch: exit %d, %q, %q", code, out, errs)
	}
}
