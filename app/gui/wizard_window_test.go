package gui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/gui/internal/guitest"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/app/wire"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
)

// The wizard's real-window test: the app runs under X (Xvfb when there is no display) in a
// child process, walks the wizard on espeak-ng speech through the same buttons a person
// presses, and captures every step's page. PARLEY_UPDATE_SCREENSHOT=1 copies them to
// docs/wizard/.

// wizardReport is what the wizard helper tells the parent.
type wizardReport struct {
	Shots []string          `json:"shots"` // file names in the helper's directory, step order
	Texts map[string]string `json:"texts"` // what each page showed (labels and buttons)
	Times map[string]string `json:"times"` // wall time of the import, slice and label jobs
	// Trained says whether the recogniser was fine-tuned for steps 5–7 (false: no PyTorch)
	Trained bool `json:"trained"`
	// VoiceTrained says whether the voice was fine-tuned too
	VoiceTrained bool `json:"voice_trained"`
	// Sizes is the window's size at each shot and on each tab, [width, height]
	Sizes map[string][2]float32 `json:"sizes"`
	Err   string                `json:"error,omitempty"`
}

// wizardFixture writes the recordings the helper imports: sentences read by espeak-ng in
// one file, a noisy recording, a very quiet one and one of silence.
func wizardFixture(dir string) ([]string, error) {
	say := func(voice, text string) ([]float32, error) {
		out, err := exec.Command("espeak-ng", "-v", voice, "-w", filepath.Join(dir, "tmp.wav"), text).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("espeak-ng: %v: %s", err, out)
		}
		b, err := readWAVMono16k(filepath.Join(dir, "tmp.wav"))
		return b, err
	}
	var long []float32
	for _, s := range []string{
		"the quick brown fox jumps over the lazy dog near the river bank",
		"please remind me to buy bread and milk on the way home tonight",
		"she sells sea shells by the sea shore every summer morning",
		"what time does the last train to the city leave this evening",
		"my favourite season is autumn when the leaves turn red and gold",
		"the library opens at half past eight on saturday mornings",
		"seven red balloons drifted over the harbour and out to sea",
		"could you read the next chapter out loud after dinner",
		"we measured the room twice and it was four metres wide",
	} {
		pcm, err := say("en-us", s)
		if err != nil {
			return nil, err
		}
		long = append(long, make([]float32, 16000)...)
		long = append(long, pcm...)
	}
	long = append(long, make([]float32, 16000)...)
	noisy, err := say("en-us", "the wind was so loud that nobody could hear a single word")
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(7, 7))
	noisy = append(append(make([]float32, 8000), noisy...), make([]float32, 8000)...)
	for i := range noisy { // wind all the way through
		noisy[i] += float32(r.NormFloat64() * 0.05)
	}
	quiet, err := say("en-us", "this one was recorded from across the room and is far too quiet")
	if err != nil {
		return nil, err
	}
	for i := range quiet {
		quiet[i] *= 0.02
	}
	quiet = append(append(make([]float32, 8000), quiet...), make([]float32, 8000)...)
	files := map[string][]float32{
		"reading.wav":         long,
		"windy-balcony.wav":   noisy,
		"across-the-room.wav": quiet,
		"silence.wav":         make([]float32, 3*16000),
	}
	var paths []string
	for name, pcm := range files {
		p := filepath.Join(dir, name)
		if err := writeWAVMono16k(p, pcm); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	os.Remove(filepath.Join(dir, "tmp.wav"))
	return paths, nil
}

// wizardHelper runs the real app, walks the wizard and captures each step.
func wizardHelper(dir string) int {
	rep := wizardReport{Texts: map[string]string{}, Times: map[string]string{}, Sizes: map[string][2]float32{}}
	fail := func(err error) int {
		rep.Err = err.Error()
		writeWizardReport(dir, rep)
		return 1
	}
	in := filepath.Join(dir, "in")
	os.MkdirAll(in, 0o755)
	files, err := wizardFixture(in)
	if err != nil {
		return fail(err)
	}
	cfg := config.Default()
	cfg.LLM.Backend = "skills"
	cfg.ASR.Model = "sensevoice-demo"
	ctx, cancel := context.WithTimeout(context.Background(), 420*time.Second)
	defer cancel()
	result := errors.New("the window closed before the wizard was walked")
	err = Run(ctx, cfg, Options{
		StorePath: filepath.Join(dir, "parley.db"), NoAudio: true, NoTray: true,
		Wire: func(o *wire.Options) { o.NoDiscovery = true },
		// steps 5–7 fine-tune the project's tiny recogniser for 40 short epochs: the real
		// trainer, in seconds
		Services: func(s *Services) {
			if ts, ok := s.Training.(*tune.TrainingService); ok {
				ts.ASRModel, ts.Epochs, ts.Procs, ts.Threads = os.Getenv(helperEnv+"_BASE"), 40, 1, 1
				ts.VoiceEpochs = 10 // the voice: a few epochs of the tiny ChatTTS
			}
			// Clone from a clip with the project's tiny ChatTTS export
			if cs, ok := s.Clone.(*cloneService); ok {
				cs.CloneModel, cs.Seeds = os.Getenv(helperEnv+"_CHATTTS"), 2
			}
		},
		Ready: func(u *UI, w fyne.Window) {
			go func() {
				result = walkWizard(u, w, dir, files, &rep)
				fyne.Do(func() { quitSoon(w) })
			}()
		},
	})
	if err != nil {
		return fail(err)
	}
	if result != nil {
		return fail(result)
	}
	writeWizardReport(dir, rep)
	return 0
}

// walkWizard presses through the wizard from a goroutine, every UI call on the UI goroutine.
func walkWizard(u *UI, w fyne.Window, dir string, files []string, rep *wizardReport) error {
	z := u.wizard.Script()
	on := func(fn func()) { fyne.DoAndWait(fn) }
	idle := func(what string) error {
		t0 := time.Now()
		for {
			busy := true
			on(func() { busy = z.Busy() })
			if !busy {
				rep.Times[what] = time.Since(t0).Round(10 * time.Millisecond).String()
				return nil
			}
			if time.Since(t0) > 150*time.Second {
				return fmt.Errorf("%s did not finish", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	shot := func(name string) error {
		time.Sleep(600 * time.Millisecond) // let layout and paint settle
		var err error
		on(func() {
			rep.Texts[name] = shown(u.wizard.Content())
			sz := w.Canvas().Size()
			rep.Sizes[name] = [2]float32{sz.Width, sz.Height}
			err = capture(w, filepath.Join(dir, name+".png"))
		})
		rep.Shots = append(rep.Shots, name+".png")
		return err
	}
	tabs := func(when string) {
		for i := range 6 {
			on(func() { u.tabs.SelectIndex(i) })
			time.Sleep(200 * time.Millisecond)
			on(func() {
				sz := w.Canvas().Size()
				rep.Sizes[when+" "+u.tabs.Selected().Text] = [2]float32{sz.Width, sz.Height}
			})
		}
	}
	tabs("tab")
	on(func() { u.tabs.SelectIndex(5) })
	if err := shot("0-start"); err != nil {
		return err
	}
	var err error
	on(func() { err = z.Create("Ada", tune.GoalVoice) })
	if err != nil {
		return err
	}
	// three sentences read with the guided recording: the takes as the microphone gives
	// them, a moment of room before and after the voice
	var prompts []string
	on(func() { prompts = z.Prompts(3) })
	var takes [][]float32
	for _, p := range prompts {
		pcm, err := sayTake(dir, p)
		if err != nil {
			return err
		}
		takes = append(takes, pcm)
	}
	var takeErr error
	on(func() {
		takeErr = z.Read(takes, prompts)
		z.Import(files)
	})
	if takeErr != nil {
		return takeErr
	}
	if err := idle("import"); err != nil {
		return err
	}
	if err := shot("1-collect"); err != nil {
		return err
	}
	on(func() { z.Slice() })
	if err := idle("slice"); err != nil {
		return err
	}
	on(func() { z.OnlyBad() })
	if err := shot("2-slice"); err != nil {
		return err
	}
	on(func() { z.Label() })
	if err := idle("label"); err != nil {
		return err
	}
	if err := shot("3-label"); err != nil {
		return err
	}
	on(func() { z.Proofread("the quick brown fox jumps over the lazy dog near the river bank") })
	if err := shot("4-proofread"); err != nil {
		return err
	}
	// step 5 for the voice goal: the zero-shot clone from the dataset, compared with a random voice
	on(func() { z.QuickClone() })
	if err := idle("voice clone"); err != nil {
		return err
	}
	on(func() { z.CompareVoices() })
	if err := idle("compare voices"); err != nil {
		return err
	}
	// ready waits for the train page's checks: whether this machine can train
	ready := func() bool {
		var checked, ok bool
		for t0 := time.Now(); !checked && time.Since(t0) < 120*time.Second; time.Sleep(200 * time.Millisecond) {
			on(func() { checked, ok = z.TrainChecked() })
		}
		return ok
	}
	// trainToEnd runs the train page's job until it stops
	trainToEnd := func(what string, limit time.Duration) error {
		t0 := time.Now()
		on(func() { z.Train() })
		for running := true; running; time.Sleep(200 * time.Millisecond) {
			on(func() { running = z.Training() })
			if time.Since(t0) > limit {
				return fmt.Errorf("%s did not finish", what)
			}
		}
		rep.Times[what] = time.Since(t0).Round(10 * time.Millisecond).String()
		return nil
	}
	if err := shot("5-voice-clone"); err != nil {
		return err
	}
	// steps 5–7 for the voice: the fine-tune of a speaker vector (the real trainer, a few epochs
	// of the tiny ChatTTS), the evaluation with A/B, the install into the voice library
	if ready() {
		rep.VoiceTrained = true
		if err := trainToEnd("voice train", 240*time.Second); err != nil {
			return err
		}
		if err := shot("5-voice-trained"); err != nil {
			return err
		}
		on(func() { z.Evaluate() })
		if err := idle("voice evaluate"); err != nil {
			return err
		}
		if err := shot("6-voice-evaluate"); err != nil {
			return err
		}
		on(func() { z.InstallAnyway() })
		if err := idle("voice install"); err != nil {
			return err
		}
		if err := shot("7-voice-install"); err != nil {
			return err
		}
	}
	// steps 5–7 for the recogniser: the same clips, the other goal
	on(func() { z.SetGoal(tune.GoalRecognition) })
	if !ready() { // no PyTorch here: the pages say so
		for i, name := range []string{"5-train", "6-evaluate", "7-install"} {
			on(func() { z.Show(4 + i) }) // Train, Evaluate, Install
			if err := shot(name); err != nil {
				return err
			}
		}
		return cloneFromClip(u, w, dir, shot, rep)
	}
	rep.Trained = true
	t0 := time.Now()
	on(func() { z.Train() })
	// a shot while it trains: some steps done, the plot drawn
	for t1 := time.Now(); time.Since(t1) < 180*time.Second; time.Sleep(100 * time.Millisecond) {
		var steps, total int
		var running bool
		on(func() {
			steps, total = z.TrainProgress()
			running = z.Training()
		})
		if !running || (total > 0 && steps >= max(2, total/2)) {
			break
		}
	}
	if err := shot("5-train"); err != nil {
		return err
	}
	for running := true; running; time.Sleep(200 * time.Millisecond) {
		on(func() { running = z.Training() })
		if time.Since(t0) > 300*time.Second {
			return errors.New("training did not finish")
		}
	}
	rep.Times["train"] = time.Since(t0).Round(10 * time.Millisecond).String()
	if err := shot("5-trained"); err != nil {
		return err
	}
	on(func() { z.Evaluate() })
	if err := idle("evaluate"); err != nil {
		return err
	}
	if err := shot("6-evaluate"); err != nil {
		return err
	}
	improved := false
	on(func() { improved = z.Install() })
	if improved {
		if err := idle("install"); err != nil {
			return err
		}
	}
	if err := shot("7-install"); err != nil {
		return err
	}
	if err := cloneFromClip(u, w, dir, shot, rep); err != nil {
		return err
	}
	tabs("after training, tab")
	return nil
}

// cloneFromClip opens the voice panel's Clone from a clip, loads a recording, and creates the voice.
func cloneFromClip(u *UI, w fyne.Window, dir string, shot func(string) error, rep *wizardReport) error {
	clip, err := sayTake(dir, "Hello there, this is my own voice, and I would like Parley to speak like me.")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "clip.wav")
	if err := writeWAVMono16k(path, clip); err != nil {
		return err
	}
	z := u.wizard.Script()
	opened := false
	fyne.DoAndWait(func() {
		u.tabs.SelectIndex(1)
		opened = z.CloneFromClip(path)
	})
	if !opened {
		return errors.New("Clone from a clip is not offered")
	}
	t0 := time.Now()
	for heard := false; !heard; time.Sleep(100 * time.Millisecond) {
		fyne.DoAndWait(func() { heard = z.ClipHeard() })
		if time.Since(t0) > 60*time.Second {
			return errors.New("the clip was not transcribed")
		}
	}
	fyne.DoAndWait(func() {
		// "ada" is the wizard's fine-tuned voice
		z.CreateClipVoice("hello there this is my own voice and i would like parley to speak like me", "ada-clip")
	})
	for creating := true; creating; time.Sleep(100 * time.Millisecond) {
		fyne.DoAndWait(func() { creating = z.ClipCreating() })
		if time.Since(t0) > 120*time.Second {
			return errors.New("the clone was not made")
		}
	}
	rep.Times["clone"] = time.Since(t0).Round(10 * time.Millisecond).String()
	var texts string
	fyne.DoAndWait(func() { texts = shown(z.ClipContent()) })
	err = shot("8-clone-from-clip")
	rep.Texts["8-clone-from-clip"] = texts
	return err
}

// sayTake is espeak-ng reading a prompt as a take: 0.4 s of a quiet room, the sentence, 0.6 s.
func sayTake(dir, text string) ([]float32, error) {
	path := filepath.Join(dir, "take.wav")
	if out, err := exec.Command("espeak-ng", "-v", "en-gb", "-w", path, text).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("espeak-ng: %v: %s", err, out)
	}
	pcm, err := readWAVMono16k(path)
	if err != nil {
		return nil, err
	}
	take := append(append(make([]float32, 6400), pcm...), make([]float32, 9600)...)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range take {
		take[i] += float32(r.NormFloat64() * 0.0005) // the room: about -66 dBFS
	}
	return take, nil
}

func writeWizardReport(dir string, rep wizardReport) {
	b, _ := json.MarshalIndent(rep, "", "  ")
	os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644)
}

// TestWizardScreenshots walks the wizard in a real window under Xvfb and checks each step's
// page: the clips set aside with their reasons, the transcripts, the proofread table, and
// the reasons steps 5–7 give.
func TestWizardScreenshots(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real-window test starts Xvfb and the app")
	}
	requireWizardModels(t)
	display := requireDisplay(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 460*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", "-test.bench=^$")
	// a models folder of its own, so the fine-tuned recogniser is installed there: the set-up
	// models linked in, the demo recogniser extracted on first use
	models := filepath.Join(dir, "models")
	os.MkdirAll(models, 0o755)
	for _, m := range []string{"silero-vad-v5", "openwakeword"} {
		if _, err := os.Stat(filepath.Join(assets.ModelsDir(), m)); err == nil {
			os.Symlink(filepath.Join(assets.ModelsDir(), m), filepath.Join(models, m))
		}
	}
	base, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "sensevoice", "tiny"))
	tinyVoice, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "chattts", "tiny"))
	cmd.Env = append(os.Environ(),
		helperEnv+"="+dir,
		helperEnv+"_MODE=wizard",
		helperEnv+"_BASE="+base,
		helperEnv+"_CHATTTS="+tinyVoice,
		"DISPLAY="+display,
		"WAYLAND_DISPLAY=",
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(dir, "data"),
		"XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"PARLEY_MODELS="+models,
		"PARLEY_CONFIG="+filepath.Join(dir, "config", "parley.toml"),
		"FYNE_SCALE=1",
		"LANG=en_US.UTF-8", "LC_ALL=",
	)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	var rep wizardReport
	b, rerr := os.ReadFile(filepath.Join(dir, "report.json"))
	if rerr == nil {
		rerr = json.Unmarshal(b, &rep)
	}
	switch {
	case rerr != nil:
		t.Fatalf("no report from the helper (%v; exit %v):\n%s", rerr, err, tail(out, 4000))
	case rep.Err != "":
		t.Fatalf("the wizard walk failed: %s\n%s", rep.Err, tail(out, 4000))
	case err != nil:
		t.Fatalf("the helper: %v\n%s", err, tail(out, 4000))
	}
	t.Logf("job wall times on this machine: %v", rep.Times)
	// The window fits a 1366×768 laptop screen (less a title bar) through every step and tab.
	t.Logf("window sizes: %v", rep.Sizes)
	if len(rep.Sizes) < 12 {
		t.Errorf("window sizes of %d pages, want every step and tab", len(rep.Sizes))
	}
	for name, sz := range rep.Sizes {
		if sz[0] > 1366 || sz[1] > 768-32 {
			t.Errorf("%s: the window grew to %.0f×%.0f, past a 1366×768 screen", name, sz[0], sz[1])
		}
	}
	want := map[string][]string{
		"0-start":           {"Teach Parley your voice", "[Improve recognition of my voice…]"},
		"1-collect":         {"Sentence 4 of", "7 recordings"},
		"2-slice":           {"set aside", "too noisy", "too quiet", "silence.wav: no speech found"},
		"3-label":           {"English", "demo-grade"},
		"4-proofread":       {"usable clip", "at least 3 minutes"},
		"5-voice-clone":     {"[Make it again]", "ada-clone: sounds", "[B: your clone]"},
		"5-train":           {"Step ", "✓ Python and PyTorch"},
		"5-trained":         {"Trained:"},
		"6-evaluate":        {"Character error rate on", "A, before"},
		"7-install":         {},
		"8-clone-from-clip": {"Voice ada-clip created"},
		"5-voice-trained":   {"Trained:", "✓ Starting point: the voice model tiny", "[Make it again]"},
		"6-voice-evaluate":  {"A: a random voice (seed", "a zero-shot clone from a", "B: your fine-tuned voice", "B, your fine-tuned voice (heard with"},
		"7-voice-install":   {"Installed in the voice library as ada"},
	}
	if !rep.VoiceTrained {
		delete(want, "5-voice-trained")
		delete(want, "6-voice-evaluate")
		delete(want, "7-voice-install")
	}
	if !rep.Trained {
		t.Log("no PyTorch here: steps 5–7 show why instead of training")
		delete(want, "5-trained")
		want["5-train"] = []string{"Python and PyTorch"}
		want["6-evaluate"] = []string{"Train first"}
	} else if got := rep.Texts["7-install"]; !strings.Contains(got, "Installed as sensevoice-ada") && !strings.Contains(got, "not better") {
		t.Errorf("7-install neither installed nor said why not:\n%s", got)
	}
	if len(rep.Shots) != len(want) {
		t.Errorf("%d screenshots, want %d", len(rep.Shots), len(want))
	}
	for name, needles := range want {
		got := rep.Texts[name]
		for _, n := range needles {
			if !strings.Contains(got, n) {
				t.Errorf("%s does not show %q; it shows:\n%s", name, n, got)
			}
		}
	}
	for _, s := range rep.Shots {
		f, err := os.Open(filepath.Join(dir, s))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 400 || uniform(img) {
			t.Errorf("%s is %v or blank", s, b.Size())
		}
	}
	if os.Getenv("PARLEY_UPDATE_SCREENSHOT") != "" {
		dst := filepath.Join("..", "..", "docs", "wizard")
		os.MkdirAll(dst, 0o755)
		for _, s := range rep.Shots {
			if err := smallPNG(filepath.Join(dir, s), filepath.Join(dst, s)); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("updated %s", dst)
	}
}

// smallPNG writes a screenshot for the docs with a palette of 96 colours (a quarter of the
// size; UI pictures lose nothing visible), or as it is without ffmpeg.
func smallPNG(src, dst string) error {
	if ff, err := exec.LookPath("ffmpeg"); err == nil {
		out, err := exec.Command(ff, "-loglevel", "error", "-y", "-i", src,
			"-vf", "split[a][b];[a]palettegen=max_colors=96:stats_mode=full[p];[b][p]paletteuse=dither=none", dst).CombinedOutput()
		if err == nil {
			return nil
		}
		return fmt.Errorf("ffmpeg: %v: %s", err, out)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

func readWAVMono16k(path string) ([]float32, error) {
	b, err := audio.ReadWAVFile(path)
	if err != nil {
		return nil, err
	}
	mono := b.Data
	if ch := b.Format.Channels; ch > 1 {
		mono = make([]float32, len(b.Data)/ch)
		for i := range mono {
			mono[i] = b.Data[i*ch]
		}
	}
	return audio.Resample(mono, b.Format.SampleRate, 16000, 1)
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

func writeWAVMono16k(path string, pcm []float32) error {
	return audio.WriteWAVFile(path, &audio.Buffer{Format: audio.Mono16k, Data: pcm}, audio.S16)
}

// the widget-tree readers both packages' tests use
var (
	deepCollect = guitest.Walk
	shown       = guitest.Shown
)
