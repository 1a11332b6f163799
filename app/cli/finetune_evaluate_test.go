package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu/gputest"
)

// TestFinetuneEvaluate scores the random-seed and zero-shot voices of the tiny ChatTTS export
// against a dataset (the figures mean nothing with random weights; the path is what is tested).
func TestFinetuneEvaluate(t *testing.T) {
	models := assets.ModelsDir()
	if _, err := os.Stat(filepath.Join(models, "silero-vad-v5", "silero_vad.onnx")); err != nil {
		t.Skipf("Silero VAD not set up (make setup): %v", err)
	}
	gputest.RequireORT(t)
	isolate(t)
	t.Setenv("PARLEY_MODELS", models)
	labelledDataset(t, "anna", 10)
	tiny, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "chattts", "tiny"))
	code, out, errs := runCLI(t, "finetune", "evaluate", "anna", "--model", tiny, "--sentences", "2", "--random", "2", "--json")
	if code != 0 {
		t.Fatalf("evaluate: %d %s%s", code, out, errs)
	}
	var res struct {
		Sentences int
		Voices    []tune.VoiceScore
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sentences != 2 || len(res.Voices) != 3 {
		t.Fatalf("%s: %v", out, err)
	}
	if !strings.HasPrefix(res.Voices[0].Name, "random seed") || !strings.HasPrefix(res.Voices[1].Name, "random seed") ||
		res.Voices[0].Name == res.Voices[1].Name || !strings.HasPrefix(res.Voices[2].Name, "zero-shot clone") {
		t.Fatalf("voices %+v", res.Voices)
	}
	// the clone is the one voices clone makes: with the closest of the seed speakers tried
	if !strings.Contains(res.Voices[2].Name, "seed:") || strings.Contains(res.Voices[2].Name, "seed:0)") {
		t.Errorf("zero-shot clone %q: no closest seed speaker", res.Voices[2].Name)
	}
	for _, v := range res.Voices {
		if v.Sentences != 2 || v.Chars == 0 || v.AudioSeconds <= 0 {
			t.Errorf("score %+v", v)
		}
	}
	if code, _, errs := runCLI(t, "finetune", "evaluate", "anna", "--model", tiny, "--random", "0"); code == 0 || !strings.Contains(errs, "--random 0") {
		t.Errorf("--random 0: %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "finetune", "evaluate", "anna", "--model", tiny, "--voice", "nobody"); code == 0 || !strings.Contains(errs, "nobody") {
		t.Errorf("unknown --voice: %d %s", code, errs)
	}

	// NAME@MODEL: a voice spoken by a model of its own (what a --gpt fine-tune installs)
	if code, out, errs := runCLI(t, "voices", "create", "bob", "--engine", "chattts", "--seed", "7"); code != 0 {
		t.Fatalf("voices create: %d %s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "finetune", "evaluate", "anna", "--model", tiny, "--sentences", "1", "--random", "1", "--voice", "bob", "--voice", "bob@"+tiny, "--json")
	if code != 0 {
		t.Fatalf("evaluate bob@MODEL: %d %s%s", code, out, errs)
	}
	res.Voices = nil
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Voices) != 4 {
		t.Fatalf("%s: %v", out, err)
	}
	if res.Voices[2].Name != "bob" || res.Voices[3].Name != "bob@"+tiny || res.Voices[3].Sentences != 1 || res.Voices[3].AudioSeconds <= 0 {
		t.Errorf("voices %+v", res.Voices)
	}
	// the same model and voice, so the same sentence synthesised the same way
	if res.Voices[2].AudioSeconds != res.Voices[3].AudioSeconds {
		t.Errorf("bob %.3f s, bob@tiny %.3f s: the same model should say the same", res.Voices[2].AudioSeconds, res.Voices[3].AudioSeconds)
	}
	for _, bad := range []string{"bob@no-such-model", "bob@" + t.TempDir()} {
		if code, _, errs := runCLI(t, "finetune", "evaluate", "anna", "--model", tiny, "--voice", bad); code == 0 || !strings.Contains(errs, "bob@") {
			t.Errorf("--voice %s: %d %s", bad, code, errs)
		}
	}
}
