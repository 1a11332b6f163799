package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu/gputest"
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
