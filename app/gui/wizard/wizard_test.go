package wizard

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/gui/internal/guitest"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/clone"
)

// testCloning is the real wizard service (Silero VAD, the demo recogniser, real decoding)
// with a scripted microphone and a silent speaker.
type testCloning struct {
	*tune.CloneService
	mu       sync.Mutex
	mic      []float32 // what the next take hears
	levels   int       // level reports per take
	played   int
	notReady error // CloneReady's answer when set
}

func (f *testCloning) CloneReady() error {
	if f.notReady != nil {
		return f.notReady
	}
	return f.CloneService.CloneReady()
}

func (f *testCloning) Record(ctx context.Context, max time.Duration, level func(float64)) ([]float32, error) {
	f.mu.Lock()
	pcm, n := f.mic, f.levels
	f.mu.Unlock()
	for range n {
		level(-18)
	}
	<-ctx.Done() // recording lasts until Stop
	return pcm, nil
}

func (f *testCloning) hear(pcm []float32) { f.mu.Lock(); f.mic = pcm; f.mu.Unlock() }

func (f *testCloning) Play(ctx context.Context, pcm []float32) error {
	f.mu.Lock()
	f.played++
	f.mu.Unlock()
	return nil
}

// waitPlayed waits until the n-th clip has played and the wizard has seen it end: tapping
// another play button while one plays stops it instead (the wizard's toggle), so the next tap
// must wait for the end, not only for the speaker to be handed the clip.
func waitPlayed(t *testing.T, u *testUI, svc *testCloning, n int, what string) {
	t.Helper()
	waitFor(t, u, what+" played", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return svc.played == n && u.wizard.playing == nil
	})
}

// requireWizardModels skips when the set-up models or espeak-ng are missing.
func requireWizardModels(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(assets.ModelsDir(), "silero-vad-v5", "silero_vad.onnx")); err != nil {
		t.Skipf("Silero VAD not set up (make setup): %v", err)
	}
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng not installed (make setup installs it)")
	}
}

func newTestCloning(t testing.TB) *testCloning {
	t.Helper()
	t.Setenv("PARLEY_MODELS", assets.ModelsDir())
	tiny, _ := filepath.Abs(filepath.Join("..", "..", "..", "testdata", "chattts", "tiny"))
	s := tune.NewCloneService(factory.New(nil, nil))
	s.Datasets = t.TempDir()
	s.ASRModel = "sensevoice-demo" // embedded: extracted on first use
	s.CloneModel, s.VoicesDir, s.Seeds = tiny, t.TempDir(), 2
	return &testCloning{CloneService: s, levels: 5}
}

// speech is espeak-ng reading text, at 16 kHz.
func speech(t testing.TB, voice, text string) []float32 {
	t.Helper()
	out, err := exec.Command("espeak-ng", "-v", voice, "--stdout", text).Output()
	if err != nil {
		t.Fatalf("espeak-ng: %v", err)
	}
	b, err := audio.ReadWAV(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	pcm, err := audio.Resample(b.Data, b.Format.SampleRate, 16000, 1)
	if err != nil {
		t.Fatal(err)
	}
	return pcm
}

func writeWizardWAV(t testing.TB, path string, pcm []float32) {
	t.Helper()
	if err := audio.WriteWAVFile(path, &audio.Buffer{Format: audio.Mono16k, Data: pcm}, audio.S16); err != nil {
		t.Fatal(err)
	}
}

// longRecording is sentences read with pauses between them, as one file.
func longRecording(t testing.TB, voice string, sentences ...string) []float32 {
	pcm := make([]float32, 16000)
	for _, s := range sentences {
		pcm = append(pcm, speech(t, voice, s)...)
		pcm = append(pcm, make([]float32, 24000)...)
	}
	return pcm
}

// waitIdle waits until the wizard's job has finished.
func waitIdle(t *testing.T, u *testUI) {
	t.Helper()
	waitFor(t, u, "the wizard's job", func() bool { return u.wizard.busy == nil })
}

// proofRowOf finds the proofread row a text box belongs to.
func proofRowOf(root fyne.CanvasObject, e *commitEntry) *fyne.Container {
	var row *fyne.Container
	deepCollect(root, func(o fyne.CanvasObject) {
		if c, ok := o.(*fyne.Container); ok && len(c.Objects) == 3 {
			if mid, ok := c.Objects[0].(*fyne.Container); ok && len(mid.Objects) == 2 && mid.Objects[0] == e {
				row = c
			}
		}
	})
	return row
}

// TestWizardStepsOneToFour walks the wizard on espeak-ng speech: import (a folder with a
// long recording and a silent one, plus a broken file), slice (the silent recording is
// reported there), label with the demo recogniser, proofread (an edit and a drop persist on
// disk), and steps 5–7 say why they cannot start.
func TestWizardStepsOneToFour(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	u, win := newTestUI(t, Services{Clone: svc})
	w := u.wizard
	u.tabs.SelectIndex(5)
	if u.tabs.Selected().Text != Tab {
		t.Fatalf("tab 6 is %q", u.tabs.Selected().Text)
	}
	if !strings.Contains(shown(w.content), "Teach Parley your voice") || !w.stepBtns[0].Disabled() {
		t.Error("with no dataset the wizard should introduce itself and keep the steps closed")
	}
	if err := w.create("../evil", goalVoice); err == nil {
		t.Error("a dataset name with a slash was accepted")
	} else if !strings.Contains(w.note.Text, "bad dataset name") {
		t.Errorf("bad name note: %q", w.note.Text)
	}
	if err := w.create("Ada", goalVoice); err != nil {
		t.Fatal(err)
	}
	if w.step != stepCollect || w.stepBtns[stepSlice].Importance != widget.LowImportance {
		t.Errorf("a new dataset opens at step %d, slice importance %v", w.step, w.stepBtns[stepSlice].Importance)
	}
	_, why := w.stepState(stepSlice)
	if !strings.Contains(why, "Record or import") {
		t.Errorf("slice before any recording: %q", why)
	}

	// 1 Collect: import a folder and a broken file
	in := t.TempDir()
	writeWizardWAV(t, filepath.Join(in, "reading.wav"), longRecording(t, "en-us",
		"the quick brown fox jumps over the lazy dog near the river bank",
		"please remind me to buy bread and milk on the way home tonight",
		"she sells sea shells by the sea shore every summer morning",
		"what time does the last train to the city leave this evening"))
	writeWizardWAV(t, filepath.Join(in, "silence.wav"), make([]float32, 3*16000))
	os.WriteFile(filepath.Join(in, "notes.txt"), []byte("not audio"), 0o644)
	broken := filepath.Join(t.TempDir(), "broken.wav")
	os.WriteFile(broken, []byte("RIFF\x10\x00\x00\x00WAVEjunkjunkjunk"), 0o644)
	w.collect.importPaths([]string{in, broken})
	if !w.stepBtns[stepCollect].Disabled() {
		t.Error("the stepper stays usable while a job runs")
	}
	waitIdle(t, u)
	if got := w.collect.importMsg.Text; !strings.HasPrefix(got, "Imported 2 recordings") {
		t.Errorf("import message %q", got)
	}
	if !w.collect.problems.box.Visible() || !strings.Contains(w.collect.problems.body.Text, "broken.wav") {
		t.Errorf("the broken file is not reported in step 1: %q", w.collect.problems.body.Text)
	}
	if len(w.collect.sources) != 2 || w.collect.list.Length() != 2 {
		t.Errorf("the recordings list shows %d", len(w.collect.sources))
	}
	if w.next.Disabled() || w.next.Text != "Next: Slice" {
		t.Fatalf("Next after an import: %q disabled=%v", w.next.Text, w.next.Disabled())
	}

	// 2 Slice
	test.Tap(w.next)
	if w.step != stepSlice || !strings.HasPrefix(w.slice.run.Text, "Cut 2 new recordings") {
		t.Fatalf("step %d, button %q", w.step, w.slice.run.Text)
	}
	test.Tap(w.slice.run)
	waitIdle(t, u)
	if w.slice.msg.Text != "" {
		t.Fatalf("slice: %s", w.slice.msg.Text)
	}
	if !w.slice.problems.box.Visible() || !strings.Contains(w.slice.problems.body.Text, "silence.wav: no speech found") {
		t.Errorf("the silent recording is not reported in step 2: %q", w.slice.problems.body.Text)
	}
	if len(w.slice.all) < 2 || !strings.Contains(w.slice.summary.Text, "usable") {
		t.Fatalf("slice gave %d clips: %q", len(w.slice.all), w.slice.summary.Text)
	}
	t.Logf("slice: %s", w.slice.summary.Text)
	if !w.slice.run.Disabled() {
		t.Error("Cut stays enabled with nothing new to cut")
	}
	// 3 Label with the demo recogniser
	test.Tap(w.next)
	if w.step != stepLabel || w.label.run.Disabled() {
		t.Fatalf("step %d, transcribe disabled=%v", w.step, w.label.run.Disabled())
	}
	test.Tap(w.label.run)
	waitIdle(t, u)
	if w.label.msg.Text != "" {
		t.Fatalf("label: %s", w.label.msg.Text)
	}
	if !strings.Contains(w.label.model.Text, "demo-grade") {
		t.Errorf("the demo recogniser is not called demo-grade: %q", w.label.model.Text)
	}
	if !strings.Contains(w.label.summary.Text, "English") {
		t.Errorf("label summary %q", w.label.summary.Text)
	}
	for _, c := range w.label.clips {
		t.Logf("%s %.1f s %s %q %s", c.ID, c.Seconds, c.Lang, c.Text, c.Warning)
	}
	if done, _ := w.stepState(stepLabel); !done {
		t.Error("label is not done after transcribing every clip")
	}
	// 4 Proofread: edit the first clip's text, drop the last one; both reach the disk
	test.Tap(w.next)
	if w.step != stepProof || len(w.proof.rows) < 2 {
		t.Fatalf("step %d with %d rows", w.step, len(w.proof.rows))
	}
	before := w.d.Summary()
	first, last := w.proof.rows[0], w.proof.rows[len(w.proof.rows)-1]
	var entry *commitEntry
	deepCollect(win.Content(), func(o fyne.CanvasObject) {
		if e, ok := o.(*commitEntry); ok && e.Visible() && e.Text == first.Text && entry == nil {
			entry = e
		}
	})
	if entry == nil {
		t.Fatal("no text box shows the first clip")
	}
	entry.SetText("")
	win.Canvas().Focus(entry)
	test.Type(entry, "the quick brown fox jumps over the lazy dog")
	win.Canvas().Unfocus() // done editing: the edit is saved
	onDisk, err := clone.Open(w.d.Dir())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := onDisk.Clip(first.ID)
	if c.Text != "the quick brown fox jumps over the lazy dog" || !c.Edited {
		t.Errorf("the edit did not reach the disk: %+v", c)
	}
	var drop *widget.Button
	deepCollect(win.Content(), func(o fyne.CanvasObject) {
		if e, ok := o.(*commitEntry); ok && e.Visible() && e.Text == last.Text && drop == nil && e != entry {
			if row := proofRowOf(win.Content(), e); row != nil {
				drop = row.Objects[2].(*fyne.Container).Objects[1].(*widget.Button)
			}
		}
	})
	if drop == nil || drop.Text != "Drop" {
		t.Fatal("no Drop button on the last clip's row")
	}
	test.Tap(drop)
	onDisk, _ = clone.Open(w.d.Dir())
	if c, _ := onDisk.Clip(last.ID); !c.Dropped {
		t.Error("the drop did not reach the disk")
	}
	after := w.d.Summary()
	if after.Dropped != before.Dropped+1 || !strings.Contains(w.proof.total.Text, fmt.Sprintf("%d usable clip", after.Usable)) {
		t.Errorf("after the drop: %+v, footer %q", after, w.proof.total.Text)
	}
	if !strings.Contains(w.proof.total.Text, "at least 3 minutes") {
		t.Errorf("a short dataset should say a voice wants 3 minutes: %q", w.proof.total.Text)
	}
	w.proof.show.SetSelected(showDropped)
	if len(w.proof.rows) != 1 || w.proof.rows[0].ID != last.ID {
		t.Errorf("the dropped filter shows %d rows", len(w.proof.rows))
	}
	w.proof.show.SetSelected(showUsable)
	// the step is ticked once the person has checked every text, not when the recogniser wrote them
	if done, _ := w.stepState(stepProof); done || w.proof.rest.Disabled() || !strings.Contains(w.proof.total.Text, "not checked yet") {
		t.Errorf("proofread done %v before checking, button disabled %v, footer %q", done, w.proof.rest.Disabled(), w.proof.total.Text)
	}
	test.Tap(w.proof.rest)
	if done, _ := w.stepState(stepProof); !done || !w.proof.rest.Disabled() {
		t.Errorf("after \"The rest look right\": done %v, button disabled %v", done, w.proof.rest.Disabled())
	}
	if onDisk, _ := clone.Open(w.d.Dir()); onDisk.Summary().Unchecked != 0 {
		t.Error("the confirmation did not reach the disk")
	}

	// 5–7 say plainly why they cannot run
	if !w.next.Disabled() {
		t.Error("Next from proofreading leads to a step this build cannot run")
	}
	test.Tap(w.stepBtns[stepTrain])
	if w.step != stepTrain || !w.train.start.Disabled() || !strings.Contains(w.train.why.Text, "not in this build") {
		t.Errorf("train page: step %d, %q", w.step, w.train.why.Text)
	}
	test.Tap(w.stepBtns[stepInstall])
	if !w.install.run.Disabled() || !strings.Contains(w.install.why.Text, "not in this build") {
		t.Errorf("install page: %q", w.install.why.Text)
	}

	// the app restarts: the dataset reopens at the first step not done (train, locked),
	// its edits intact
	u2, _ := newTestUIOn(t, u.app, Services{Clone: svc})
	if u2.wizard.d == nil || u2.wizard.d.Name != "Ada" {
		t.Fatal("the last dataset is not reopened")
	}
	if u2.wizard.step != stepTrain {
		t.Errorf("reopened at step %d, want %d", u2.wizard.step, stepTrain)
	}
	if c, _ := u2.wizard.d.Clip(first.ID); c.Text != "the quick brown fox jumps over the lazy dog" {
		t.Errorf("after restart the edit reads %q", c.Text)
	}
}

// TestWizardGuidedRecording: a take shows live levels, is saved with its sentence, can be
// redone, and a silent or too short take is refused on the spot with the reason.
func TestWizardGuidedRecording(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	u, win := newTestUI(t, Services{Clone: svc})
	w := u.wizard
	u.tabs.SelectIndex(5)
	if err := w.create("Rec", goalVoice); err != nil {
		t.Fatal(err)
	}
	p := w.collect
	prompt := p.sentence.Text
	if prompt != clone.Prompts("en")[0] || !strings.HasPrefix(p.counter.Text, "Sentence 1 of ") {
		t.Fatalf("first sentence %q (%s)", prompt, p.counter.Text)
	}
	if !p.playTake.Disabled() {
		t.Error("Play take is enabled before any take")
	}

	// silence: refused, nothing saved
	svc.hear(make([]float32, 3*16000))
	test.Tap(p.record)
	if p.record.Text != "Stop" || !w.stepBtns[0].Disabled() {
		t.Errorf("while recording: button %q", p.record.Text)
	}
	waitFor(t, u, "levels on the meter", func() bool { return p.meter.Fraction() > 0 })
	test.Tap(p.record)
	waitIdle(t, u)
	if !strings.Contains(p.status.Text, "heard almost nothing") || len(w.d.Sources) != 0 {
		t.Errorf("a silent take: %q, %d sources", p.status.Text, len(w.d.Sources))
	}
	if p.meter.Fraction() != 0 {
		t.Error("the meter does not fall back after the take")
	}
	// too short
	svc.hear(speech(t, "en-us", "hi")[:8000])
	test.Tap(p.record)
	test.Tap(p.record)
	waitIdle(t, u)
	if !strings.Contains(p.status.Text, "only 0.5 s") {
		t.Errorf("a short take: %q", p.status.Text)
	}
	// a good take (Ctrl+R starts and stops it), then a retake
	svc.hear(speech(t, "en-us", prompt))
	ctrl := func(k fyne.KeyName) {
		win.Canvas().(interface{ TypedShortcut(fyne.Shortcut) }).TypedShortcut(&desktop.CustomShortcut{KeyName: k, Modifier: fyne.KeyModifierShortcutDefault})
	}
	ctrl(fyne.KeyR)
	if p.recording == nil {
		t.Fatal("Ctrl+R does not start a take")
	}
	ctrl(fyne.KeyR)
	waitIdle(t, u)
	if !strings.HasPrefix(p.status.Text, "Saved the take") || len(w.d.Sources) != 1 || w.d.Sources[0].Text != prompt {
		t.Fatalf("a good take: %q, sources %+v", p.status.Text, w.d.Sources)
	}
	first := w.d.Sources[0].ID
	if p.record.Text != "Retake" || p.playTake.Disabled() {
		t.Errorf("after a take: %q, play disabled=%v", p.record.Text, p.playTake.Disabled())
	}
	test.Tap(p.playTake)
	waitPlayed(t, u, svc, 1, "the take")
	test.Tap(p.record)
	test.Tap(p.record)
	waitIdle(t, u)
	if len(w.d.Sources) != 1 || w.d.Sources[0].ID == first {
		t.Errorf("the retake did not replace the take: %+v", w.d.Sources)
	}
	ctrl(fyne.KeyRight)
	if p.sentence.Text != clone.Prompts("en")[1] || p.record.Text != "Record" {
		t.Errorf("next sentence %q, button %q", p.sentence.Text, p.record.Text)
	}
	// the reopened dataset continues at the first sentence not read
	w.d = nil
	w.openNamed("Rec")
	if p.sentence.Text != clone.Prompts("en")[1] {
		t.Errorf("reopened at %q", p.sentence.Text)
	}
	// deleting the dataset removes its folder and returns to the start
	dir := w.d.Dir()
	if err := w.deleteDataset(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) || w.d != nil || len(w.picker.Options) != 0 {
		t.Errorf("after delete: %v, options %v", err, w.picker.Options)
	}
	if !strings.Contains(shown(w.content), "Teach Parley your voice") {
		t.Error("the start page is not shown after deleting the dataset")
	}
}

// TestWizardBadInput: a folder of more files than an import takes is refused in step 1 with
// the reason, and a transcript in another language than the audio (a Mandarin sentence read
// in English) is flagged in proofreading.
func TestWizardBadInput(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	u, _ := newTestUI(t, Services{Clone: svc})
	w := u.wizard
	u.tabs.SelectIndex(5)
	if err := w.create("Bad", goalRecognition); err != nil {
		t.Fatal(err)
	}
	many := t.TempDir()
	for i := range clone.DefaultMaxFiles + 1 {
		os.WriteFile(filepath.Join(many, fmt.Sprintf("take%05d.wav", i)), nil, 0o644)
	}
	w.collect.importPaths([]string{many})
	waitIdle(t, u)
	if got := w.collect.importMsg.Text; !strings.Contains(got, fmt.Sprintf("%d audio files to import, at most %d", clone.DefaultMaxFiles+1, clone.DefaultMaxFiles)) {
		t.Errorf("a folder of too many files: %q", got)
	}
	if len(w.d.Sources) != 0 {
		t.Errorf("%d sources after a refused import", len(w.d.Sources))
	}

	// the prompt is Mandarin, the person reads English
	w.collect.lang.SetSelected(promptLangLabels["zh"])
	if w.collect.sentence.Text != clone.Prompts("zh")[0] {
		t.Fatalf("the Mandarin prompts are not shown: %q", w.collect.sentence.Text)
	}
	svc.hear(append(speech(t, "en-us", "the weather is lovely today so let us go for a long walk in the park"), make([]float32, 8000)...))
	test.Tap(w.collect.record)
	test.Tap(w.collect.record)
	waitIdle(t, u)
	if len(w.d.Sources) != 1 {
		t.Fatalf("take not saved: %q", w.collect.status.Text)
	}
	w.show(stepSlice)
	test.Tap(w.slice.run)
	waitIdle(t, u)
	w.show(stepLabel)
	test.Tap(w.label.run)
	waitIdle(t, u)
	w.show(stepProof)
	w.proof.show.SetSelected(showWarnings)
	if len(w.proof.rows) != 1 {
		t.Fatalf("%d clips with a warning, want the mismatched one; clips %+v", len(w.proof.rows), w.d.Clips)
	}
	t.Logf("warning: %s", w.proof.rows[0].Warning)
	if !strings.Contains(shown(w.proof.box), "⚠") {
		t.Error("the warning is not shown in the table")
	}
	if !strings.Contains(w.proof.total.Text, "recogniser already learns") {
		t.Errorf("the recognition goal's footer: %q", w.proof.total.Text)
	}
}

// TestCloneFromClip: a picked clip is checked and transcribed (editable), a long file or a
// silent one is refused with the reason, and creating the voice says why it cannot yet.
func TestCloneFromClip(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	u, _ := newTestUI(t, Services{Clone: svc})
	c := u.wizard.showCloneFromClip()
	if c == nil {
		t.Fatal("no dialog")
	}
	dir := t.TempDir()
	clip := filepath.Join(dir, "me.wav")
	writeWizardWAV(t, clip, append(append(make([]float32, 4000), speech(t, "en-us", "hello there, this is my voice, and I like to talk about the weather")...), make([]float32, 4000)...))
	c.load(clip)
	waitFor(t, u, "the transcript", func() bool { return c.lang.Text != "" })
	if c.pcm == nil || c.text.Text == "" || c.lang.Text != "English" || c.play.Disabled() {
		t.Errorf("clip %v s, transcript %q, language %q; status %q", float64(len(c.pcm))/16000, c.text.Text, c.lang.Text, c.status.Text)
	}
	c.text.SetText("")
	c.name.SetText("me")
	if !c.create.Disabled() || !strings.Contains(c.why.Text, "transcript is empty") {
		t.Errorf("empty transcript: %q", c.why.Text)
	}
	c.text.SetText("hello there, this is my voice, and I like to talk about the weather")
	if c.create.Disabled() || c.why.Text != "" {
		t.Fatalf("create: disabled=%v, %q", c.create.Disabled(), c.why.Text)
	}
	test.Tap(c.create)
	waitFor(t, u, "the clone", func() bool { return !c.creating })
	if c.created != "me" || !strings.Contains(c.status.Text, "Voice me created") {
		t.Fatalf("clone: %q / %q", c.status.Text, c.why.Text)
	}
	lib, err := voices.Open(svc.VoicesDir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := lib.Get("me")
	if err != nil || v.Kind != voices.KindClone || v.Sample == nil || !strings.HasPrefix(v.Sample.Text, "hello there") || len(v.Sample.Codes) == 0 {
		t.Fatalf("the saved voice: %+v %v", v, err)
	}
	test.Tap(c.create) // the same name again
	waitFor(t, u, "the refusal", func() bool { return !c.creating && c.why.Text != "" })
	if !strings.Contains(c.why.Text, "already exists") {
		t.Errorf("a second voice of the name: %q", c.why.Text)
	}

	long := filepath.Join(dir, "podcast.wav")
	writeWizardWAV(t, long, make([]float32, 40*16000))
	c.load(long)
	waitFor(t, u, "the long file refused", func() bool { return strings.Contains(c.status.Text, "longer than 30 seconds") })
	if c.pcm != nil {
		t.Error("a refused file is kept as the clip")
	}
	quiet := filepath.Join(dir, "silence.wav")
	writeWizardWAV(t, quiet, make([]float32, 5*16000))
	c.load(quiet)
	waitFor(t, u, "the silent file refused", func() bool { return strings.Contains(c.status.Text, "heard almost nothing") })
	short := filepath.Join(dir, "short.wav")
	writeWizardWAV(t, short, speech(t, "en-us", "hi there"))
	c.load(short)
	waitFor(t, u, "the short file refused", func() bool { return strings.Contains(c.status.Text, "at least 3 seconds") })

	// a recorded clip stops by itself after 10 s
	svc.hear(append(speech(t, "en-us", "one two three four five six seven eight nine ten"), make([]float32, 12*16000)...))
	test.Tap(c.record)
	test.Tap(c.record)
	waitFor(t, u, "the recording transcribed", func() bool { return c.lang.Text != "" })
	if got := float64(len(c.pcm)) / 16000; got > clipMaxSeconds+0.01 {
		t.Errorf("the recorded clip is %.1f s, want at most %.0f", got, clipMaxSeconds)
	}

	// without a voice model to clone with, the dialog says so before anything is recorded
	svc.notReady = tune.ErrNoCloneModel
	c2 := u.wizard.showCloneFromClip()
	if !c2.create.Disabled() || !strings.Contains(c2.why.Text, "ChatTTS voice model") {
		t.Errorf("no voice model: %q", c2.why.Text)
	}
}

// TestWizardFitsNarrowWindows: every step's page fits the narrow window the other panels fit.
func TestWizardFitsNarrowWindows(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	u, _ := newTestUI(t, Services{Clone: svc})
	w := u.wizard
	check := func(what string) {
		t.Helper()
		if got := u.Content().MinSize().Width; got > 700 {
			t.Errorf("%s: the window needs %.0f px, want ≤ 700 (the wizard needs %.0f)", what, got, w.content.MinSize().Width)
		}
	}
	check("no dataset")
	if err := w.create("Narrow one with a long name", goalRecognition); err != nil {
		t.Fatal(err)
	}
	svc.hear(append(make([]float32, 8000), speech(t, "en-us", "the clouds are low and grey over the harbour this morning")...))
	test.Tap(w.collect.record)
	test.Tap(w.collect.record)
	waitIdle(t, u)
	for i := range numSteps {
		w.step = -1
		w.show(i)
		if i == stepSlice {
			test.Tap(w.slice.run)
			waitIdle(t, u)
		}
		check(stepNames[i])
	}
}

// TestWizardHoldsTheMicrophone: the wizard has the window stop a listening assistant while
// it records (it would answer the sentences read for the wizard) and lets it listen again
// when the person leaves the recording page; an assistant that is not listening (push-to-talk)
// is not held. How the window holds it is app/gui's TestWizardHostHoldsTheMicrophone.
func TestWizardHoldsTheMicrophone(t *testing.T) {
	requireWizardModels(t)
	svc := newTestCloning(t)
	u, _ := newTestUI(t, Services{Clone: svc})
	w := u.wizard
	u.tabs.SelectIndex(5)
	if err := w.create("Mic", goalVoice); err != nil {
		t.Fatal(err)
	}
	svc.hear(speech(t, "en-us", w.collect.prompts[0]))
	test.Tap(w.collect.record)
	test.Tap(w.collect.record)
	waitIdle(t, u)
	if !u.muted || u.holds != 1 {
		t.Errorf("while recording: held=%v, %d holds", u.muted, u.holds)
	}
	test.Tap(w.collect.record) // a second take does not hold it again
	test.Tap(w.collect.record)
	waitIdle(t, u)
	w.show(stepSlice)
	if u.muted || u.holds != 1 || u.releases != 1 {
		t.Errorf("after leaving the page: held=%v, %d holds, %d releases", u.muted, u.holds, u.releases)
	}
	// a push-to-talk assistant is left alone
	w.show(stepCollect)
	u.pushToTalk = true
	test.Tap(w.collect.record)
	test.Tap(w.collect.record)
	waitIdle(t, u)
	if u.muted || u.holds != 1 {
		t.Errorf("push-to-talk: held=%v, %d holds", u.muted, u.holds)
	}
	w.show(stepSlice)
	if u.releases != 1 {
		t.Errorf("push-to-talk: %d releases, want none more", u.releases)
	}
}

// TestWizardPlaybackEnds: a playback stopped and followed by another, which ends late, leaves
// the newer one playing (and stoppable); the newer one's own end clears it.
func TestWizardPlaybackEnds(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	w := u.wizard
	first, endFirst := w.startPlaying()
	w.stopPlaying()
	if first.Err() == nil || w.playing != nil {
		t.Fatal("stop did not cancel the first playback")
	}
	second, endSecond := w.startPlaying()
	endFirst()
	if w.playing == nil || second.Err() != nil {
		t.Fatal("the first playback's late end stopped the second")
	}
	endSecond()
	if w.playing != nil || second.Err() == nil {
		t.Fatal("the second playback's end left it playing")
	}
}

// TestLanguageNames: the wizard names the codes SenseVoice reports as written ("—" for
// none); a code SenseVoice does not have stays as it is.
func TestLanguageNames(t *testing.T) {
	for _, c := range []struct{ code, want string }{
		{"en", "English"}, {"zh", "Mandarin"}, {"yue", "Cantonese"},
		{"ja", "Japanese"}, {"ko", "Korean"}, {"EN", "EN"}, {"Yue", "Yue"},
		{"", "—"}, {"nospeech", "nospeech"}, {"AUTO", "AUTO"}, {"de", "de"}, {"xx", "xx"},
	} {
		if got := langName(c.code); got != c.want {
			t.Errorf("langName(%q) = %q, want %q", c.code, got, c.want)
		}
	}
}

// the widget-tree readers both packages' tests use
var (
	deepCollect = guitest.Walk
	shown       = guitest.Shown
)
