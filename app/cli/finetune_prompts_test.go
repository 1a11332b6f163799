package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/voices/clone"
)

// TestFinetunePromptsAndTakes: the guided recording from the command line — the sentences
// listed, a recording kept as a sentence's take (its transcript the sentence), a retake
// replacing it, and a silent or unknown take refused with the reason.
func TestFinetunePromptsAndTakes(t *testing.T) {
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng not installed")
	}
	isolate(t)
	step := func(want int, args ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, args...)
		if code != want {
			t.Fatalf("parley %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errs)
		}
		return out + errs
	}
	step(0, "finetune", "new", "me")
	out := step(0, "finetune", "prompts", "me")
	first := clone.Prompts("en")[0]
	if !strings.Contains(out, "  1  "+first) || !strings.Contains(out, "0 of 56 recorded") {
		t.Fatalf("prompts:\n%s", out)
	}
	dir := t.TempDir()
	wav := func(name string, pcm []float32) string {
		p := filepath.Join(dir, name)
		if err := audio.WriteWAVFile(p, &audio.Buffer{Format: audio.Mono16k, Data: pcm}, audio.S16); err != nil {
			t.Fatal(err)
		}
		return p
	}
	speech, err := exec.Command("espeak-ng", "-v", "en-us", "--stdout", first).Output()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := audio.ReadWAV(bytes.NewReader(speech))
	pcm, _ := audio.Resample(b.Data, b.Format.SampleRate, 16000, 1)
	take := wav("take.wav", append(append(make([]float32, 6000), pcm...), make([]float32, 6000)...))

	if out := step(0, "finetune", "take", "me", "1", take); !strings.Contains(out, "sentence 1: kept") {
		t.Errorf("take: %s", out)
	}
	if out := step(0, "finetune", "take", "me", "1", take); !strings.Contains(out, "sentence 1: kept") {
		t.Errorf("retake: %s", out)
	}
	d, err := clone.Open(filepath.Join(finetuneDir(), "me"))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Sources) != 1 || d.Sources[0].Text != first {
		t.Errorf("after a take and a retake: %+v", d.Sources)
	}
	out = step(0, "finetune", "prompts", "me", "--all")
	if !strings.Contains(out, "  1* "+first) || !strings.Contains(out, "1 of 56 recorded") {
		t.Errorf("prompts --all:\n%s", out)
	}
	if out := step(1, "finetune", "take", "me", "2", wav("silence.wav", make([]float32, 3*16000))); !strings.Contains(out, "heard almost nothing") {
		t.Errorf("silent take: %s", out)
	}
	step(2, "finetune", "take", "me", "99", take)
	step(2, "finetune", "prompts", "me", "--lang", "fr")
	if out := step(1, "finetune", "take", "me", "2", filepath.Join(dir, "missing.wav")); !strings.Contains(out, "missing.wav") {
		t.Errorf("missing file: %s", out)
	}
	if out := step(0, "finetune", "prompts", "me", "--lang", "zh"); !strings.Contains(out, clone.Prompts("zh")[0]) {
		t.Errorf("zh prompts:\n%s", out)
	}
	os.RemoveAll(dir)
}
