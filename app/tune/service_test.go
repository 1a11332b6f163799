package tune

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/clone"
)

// TestTrainingServiceRecogniser: the service the wizard's steps 5–7 call, without the
// window — which goals it trains, the starting point, a dataset's job found again by a new
// service (as after a restart), the stored evaluation read back as the evaluate step shows
// it, and an install refused when the fine-tune is not better. (The gui's TestTrainingService
// walks the same through a dataset made in the wizard.)
func TestTrainingServiceRecogniser(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	ts := NewTrainingService(st, nil)
	ts.ASRModel = tinyBase(t)
	if err := ts.Supports(GoalVoice); !errors.Is(err, ErrVoiceTraining) {
		t.Errorf("voice goal without the voice models: %v", err)
	}
	if _, _, err := ts.Base(ctx, GoalVoice); !errors.Is(err, ErrVoiceTraining) {
		t.Errorf("voice base without the voice models: %v", err)
	}
	if err := ts.Supports(GoalRecognition); err != nil {
		t.Errorf("recognition goal: %v", err)
	}
	cs := NewCloneService(nil)
	cs.CloneModel = tinyVoice(t)
	ts.Voice = cs
	if id, demo, err := ts.Base(ctx, GoalVoice); err != nil || id != "tiny" || demo {
		t.Errorf("voice base: %q demo=%v %v", id, demo, err)
	}
	if _, _, err := ts.Base(ctx, GoalRecognition); err != nil {
		t.Errorf("recogniser base: %v", err)
	}
	if ts.MinClips(GoalRecognition) != MinASRClips {
		t.Errorf("min clips %d", ts.MinClips(GoalRecognition))
	}

	d := testDataset(t, 20)
	if j, err := ts.Latest(ctx, d, GoalRecognition); err != nil || j != nil {
		t.Fatalf("a new dataset has job %v (%v)", j, err)
	}
	j, err := ts.Create(ctx, d, GoalRecognition, JobOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := ASRMetaOf(j)
	if m.Dataset != d.Dir() || len(m.HeldOut) == 0 {
		t.Fatalf("job meta %+v", m)
	}
	if j, err := ts.Latest(ctx, d, GoalVoice); err != nil || j != nil {
		t.Errorf("the recogniser's job is the voice's: %v %v", j, err)
	}
	again := NewTrainingService(st, nil) // a restarted app
	got, err := again.Latest(ctx, d, GoalRecognition)
	if err != nil || got == nil || got.ID != j.ID {
		t.Fatalf("the job is not found again: %v %v", got, err)
	}
	if ev := again.Evaluation(*got); ev != nil {
		t.Errorf("a job never evaluated has an evaluation: %+v", ev)
	}
	if _, err := again.Install(ctx, *got); err == nil || !strings.Contains(err.Error(), "evaluate the job first") {
		t.Errorf("installing before evaluating: %v", err)
	}
	res := ASRResult{
		Before: Score{CER: 0.5, Errors: 5, Chars: 10, Clips: []ClipScore{{Clip: m.HeldOut[0], Ref: "hello there", Hyp: "helo", Errors: 5, Chars: 10}}},
		After:  Score{CER: 0.6, Errors: 6, Chars: 10, Clips: []ClipScore{{Clip: m.HeldOut[0], Ref: "hello there", Hyp: "hel", Errors: 6, Chars: 10}}},
	}
	if err := ts.Runner().SetResult(ctx, j.ID, "evaluate", res); err != nil {
		t.Fatal(err)
	}
	got, _ = again.Latest(ctx, d, GoalRecognition)
	ev := again.Evaluation(*got)
	if ev == nil || ev.Metric != "character error rate" || ev.Before != 0.5 || ev.After != 0.6 || ev.Improved || len(ev.Items) != 1 {
		t.Fatalf("evaluation %+v", ev)
	}
	if it := ev.Items[0]; it.Before != "helo" || it.After != "hel" || it.BeforeErr != 5 || it.AfterErr != 6 || it.Path != filepath.Join("clips", m.HeldOut[0]+".wav") {
		t.Errorf("item %+v", it)
	}
	if _, err := again.Install(ctx, *got); !errors.Is(err, ErrNotBetter) {
		t.Errorf("installing a worse model: %v", err)
	}
	if _, err := again.Start(ctx, 9999, nil); err == nil {
		t.Error("starting a job that does not exist")
	}
}

// A voice job's stored evaluation as the evaluate step shows it: the random voice before,
// the fine-tuned one after (the clone between them), each sentence with what the recogniser
// heard and the A/B speech.
func TestVoiceEvaluationView(t *testing.T) {
	res := voiceResult{
		Voices: []VoiceScore{
			{Name: "a random voice (seed 3)", Similarity: 0.1, Items: []SentenceScore{{Text: "hello there", Heard: "hello", Errors: 6}, {Text: "good day", Heard: "good", Errors: 4}}},
			{Name: "a zero-shot clone", Similarity: 0.3},
			{Name: "your fine-tuned voice", Similarity: 0.4, Items: []SentenceScore{{Text: "hello there", Heard: "hello there"}, {Text: "good day", Heard: "good bay", Errors: 1}}},
		},
		Clips: []string{"s0001-001", "s0002-001"}, PlayA: []string{"a-1.wav", "a-2.wav"}, PlayB: []string{"b-1.wav", "b-2.wav"},
		Improved: true, Message: "better", Installed: "ada", Model: "chattts-ada",
	}
	ev := voiceEvaluation(res)
	if ev.Metric != "speaker similarity" || ev.Before != 0.1 || ev.After != 0.4 || !ev.Improved || len(ev.Voices) != 3 ||
		ev.Installed != "ada" || ev.Model != "chattts-ada" || ev.Message != "better" || len(ev.Items) != 2 {
		t.Fatalf("evaluation %+v", ev)
	}
	want := EvalItem{Clip: "s0002-001", Path: filepath.Join("clips", "s0002-001.wav"), Ref: "good day", Before: "good", After: "good bay",
		BeforeErr: 4, AfterErr: 1, PlayA: "a-2.wav", PlayB: "b-2.wav"}
	if ev.Items[1] != want {
		t.Errorf("item %+v, want %+v", ev.Items[1], want)
	}
	if RandomSeed("Ada") != RandomSeed("Ada") || RandomSeed("Ada") == RandomSeed("Bo") {
		t.Error("the random voice is not fixed by the dataset's name")
	}
	for _, s := range RandomSeeds("Ada", 5) {
		if s <= 1000 || s > 10000 {
			t.Errorf("random seed %d among the clone's seed speakers", s)
		}
	}
}

// TestCompareVoicesTiny runs the comparison the CLI's `finetune evaluate` and the wizard's
// evaluate step share on the tiny ChatTTS export (the figures mean nothing with random
// weights; the path is what is tested): the voices in order, the speech handed to Keep, a
// voice spoken by a model of its own, and a zero-shot clone that cannot be made — a note when
// optional, an error when not.
func TestCompareVoicesTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: synthesises with the tiny voice")
	}
	models := assets.ModelsDir()
	if _, err := os.Stat(filepath.Join(models, "silero-vad-v5", "silero_vad.onnx")); err != nil {
		t.Skipf("Silero VAD not set up (make setup): %v", err)
	}
	gputest.RequireORT(t)
	t.Setenv("PARLEY_MODELS", models)
	ctx := context.Background()
	d := testDataset(t, 10)
	for i, c := range d.Clips { // the clips' real lengths: the clone's clip is the one nearest 3 s
		b, err := audio.ReadWAVFile(d.Abs(c.Path))
		if err != nil {
			t.Fatal(err)
		}
		d.Clips[i].Seconds = float64(len(b.Data)) / float64(b.Format.SampleRate*b.Format.Channels)
	}
	train, held, err := SplitClips(d, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	var trainIDs, heldIDs []string
	for _, c := range train {
		trainIDs = append(trainIDs, c.ID)
	}
	for _, c := range held {
		heldIDs = append(heldIDs, c.ID)
	}
	tiny := tinyVoice(t)
	var kept []int
	c := VoiceComparison{Dataset: d, Model: tiny, ASRModel: "sensevoice-demo", HeldOut: heldIDs, Sentences: 1,
		Voices: []VoiceCandidate{{Name: "random", Request: tts.Request{Seed: 1234, HasSeed: true},
			Keep: func(i int, pcm []float32) error { kept = append(kept, len(pcm)); return nil }}},
		Clone: &ZeroShot{From: trainIDs, Seconds: 3, Seeds: 2, Name: func(cl CloneResult, clip *clone.Clip) string { return "clone of " + clip.ID }},
		After: []ModelVoice{{VoiceCandidate: VoiceCandidate{Name: "seven", Request: tts.Request{Seed: 7, HasSeed: true}}},
			{VoiceCandidate: VoiceCandidate{Name: "seven@tiny", Request: tts.Request{Seed: 7, HasSeed: true}}, Model: tiny}},
	}
	fac := factory.New(nil, nil)
	res, err := CompareVoices(ctx, fac, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Scores) != 4 || res.Scores[0].Name != "random" || !strings.HasPrefix(res.Scores[1].Name, "clone of ") ||
		res.Scores[2].Name != "seven" || res.Scores[3].Name != "seven@tiny" || res.NoClone != nil {
		t.Fatalf("scores %+v (no clone: %v)", res.Scores, res.NoClone)
	}
	if len(res.Texts) != 1 || len(res.Clips) != 1 || res.HeldOut != len(heldIDs) || res.Recogniser != "sensevoice-demo" || res.SpeakerEncoder == "" {
		t.Errorf("result %+v", res)
	}
	for _, s := range res.Scores {
		if s.Sentences != 1 || s.AudioSeconds <= 0 {
			t.Errorf("score %+v", s)
		}
	}
	if len(kept) != 1 || kept[0] == 0 {
		t.Errorf("kept %v", kept)
	}
	// the same model and voice say the same
	if res.Scores[2].AudioSeconds != res.Scores[3].AudioSeconds {
		t.Errorf("seven %.3f s, seven@tiny %.3f s", res.Scores[2].AudioSeconds, res.Scores[3].AudioSeconds)
	}

	// no clip to clone from: optional, a note; required, the error
	c.Clone.From, c.After = nil, nil
	c.Clone.Optional = true
	if res, err = CompareVoices(ctx, fac, c); err != nil || !errors.Is(res.NoClone, ErrTooFewClips) || len(res.Scores) != 1 {
		t.Fatalf("optional clone: %v, %+v", err, res)
	}
	c.Clone.Optional = false
	if _, err := CompareVoices(ctx, fac, c); !errors.Is(err, ErrTooFewClips) {
		t.Fatalf("required clone: %v", err)
	}
	// nothing held out to compare with
	c.HeldOut = []string{"nope"}
	if _, err := CompareVoices(ctx, fac, c); !errors.Is(err, ErrTooFewClips) {
		t.Fatalf("no held-out clips: %v", err)
	}
	// a voice whose own model cannot be opened is named by its label
	c.HeldOut, c.Clone = heldIDs, nil
	c.After = []ModelVoice{{VoiceCandidate: VoiceCandidate{Name: "x"}, Model: t.TempDir(), Label: "--voice x@nowhere"}}
	if _, err := CompareVoices(ctx, fac, c); err == nil || !strings.HasPrefix(err.Error(), "--voice x@nowhere: ") {
		t.Fatalf("a model that does not open: %v", err)
	}
}

// finishVoiceJob marks a voice job done with an exported speaker vector, as the trainer
// leaves it (no trainer runs).
func finishVoiceJob(t *testing.T, ts *TrainingService, j Job, first float32) Job {
	t.Helper()
	spk := make([]float32, 16)
	spk[0] = first
	b, _ := json.Marshal(map[string]any{"dim": len(spk), "data": spk})
	if err := os.MkdirAll(ModelDir(j), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ModelDir(j), "speaker.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ts.r.st.SetJobStatus(context.Background(), j.ID, store.JobDone, ""); err != nil {
		t.Fatal(err)
	}
	j, err := ts.r.Job(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestVoiceJobOneWay: the voice job and its install are one implementation for both faces.
// A job made through the service (the wizard's Create, and `parley finetune train`, which
// maps its flags to JobOptions) is the recipe's job for the same settings; the install the
// CLI calls with no --name (AddVoice) and the wizard's install step (Install, after the
// evaluation) name, replace and record a voice the same way: the dataset's name, over the
// dataset's own earlier fine-tune, NAME-tuned when another voice has the name, and the
// evaluation the wizard shows says what was installed whichever face installed it.
func TestVoiceJobOneWay(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // the local models' folder
	ctx := context.Background()
	st := openStore(t)
	ts := NewTrainingService(st, nil)
	cs := NewCloneService(nil)
	cs.CloneModel, cs.VoicesDir = tinyVoice(t), t.TempDir()
	ts.Voice, ts.Procs = cs, 1
	d := testDataset(t, 10)

	// the options reach the recipe as NewTTSJob takes them
	opt := JobOptions{WholeModel: true, Epochs: 3, LR: 0.01, Seeds: -1}
	j, err := ts.Create(ctx, d, GoalVoice, opt)
	if err != nil {
		t.Fatal(err)
	}
	want, err := NewTTSJob(ctx, ts.Runner(), d, TTSConfig{Model: tinyVoice(t), GPT: true, Epochs: 3, LR: 0.01, Procs: 1})
	if err != nil {
		t.Fatal(err)
	}
	sameJob := func(got, want Job) {
		t.Helper()
		g, w := got.Spec, want.Spec
		for i := range g.Steps { // each job's own directory aside
			g.Steps[i].Args = slices.Clone(g.Steps[i].Args)
		}
		if g.Title != w.Title || g.Procs != w.Procs || g.Threads != w.Threads || g.Samples != w.Samples ||
			string(g.Meta) != string(w.Meta) || !reflect.DeepEqual(g.Steps, w.Steps) {
			t.Errorf("the service's job\n%+v\nthe recipe's\n%+v", g, w)
		}
	}
	sameJob(j, want)
	args := strings.Join(j.Spec.Steps[1].Args, " ")
	for _, a := range []string{"--epochs 3", "--lr 0.01", "--gpt"} {
		if !strings.Contains(args, a) {
			t.Errorf("train args %q lack %q", args, a)
		}
	}
	if strings.Contains(args, "--speaker-init") {
		t.Errorf("Seeds < 0 searched a starting speaker: %q", args)
	}
	if m, _ := TTSMetaOf(j); m.StartSeed != 0 {
		t.Errorf("no search, yet a starting seed %d", m.StartSeed)
	}
	// the service's defaults when the options leave them
	ts.VoiceEpochs = 7
	j2, err := ts.Create(ctx, d, GoalVoice, JobOptions{Seeds: -1})
	if err != nil {
		t.Fatal(err)
	}
	want2, _ := NewTTSJob(ctx, ts.Runner(), d, TTSConfig{Model: tinyVoice(t), Epochs: 7, Procs: 1})
	sameJob(j2, want2)

	// install: the CLI's way (AddVoice, no name) and the wizard's (Install) agree
	lib, _ := cs.Library()
	j = finishVoiceJob(t, ts, j2, 0.5)
	if _, err := ts.Install(ctx, j); err == nil || !strings.Contains(err.Error(), "evaluate the job first") {
		t.Fatalf("the wizard installs before evaluating: %v", err)
	}
	in, err := ts.AddVoice(ctx, j, "", false)
	if err != nil || in.Voice != "anna" || in.Model != "" {
		t.Fatalf("install: %+v %v", in, err)
	}
	first, _ := lib.Get("anna")
	// the wizard evaluates and installs again: its own earlier install is replaced, under the
	// same name, with the same voice
	res := voiceResult{Voices: []VoiceScore{{Name: "random", Similarity: 0.1}, {Name: "fine-tuned", Similarity: 0.2}}, Improved: true}
	if err := ts.Runner().SetResult(ctx, j.ID, "evaluate", res); err != nil {
		t.Fatal(err)
	}
	j, _ = ts.Runner().Job(ctx, j.ID)
	name, err := ts.Install(ctx, j)
	if err != nil || name != in.Voice {
		t.Fatalf("the wizard's install: %q %v (the CLI's: %q)", name, err, in.Voice)
	}
	second, _ := lib.Get("anna")
	if first == nil || second == nil || first.Description != second.Description || first.Kind != second.Kind ||
		!reflect.DeepEqual(first.Embedding, second.Embedding) {
		t.Fatalf("the faces installed different voices:\n%+v\n%+v", first, second)
	}
	// a later job of the dataset, installed by the CLI: over the dataset's own voice, and the
	// wizard's evaluation of it says so
	j3, err := ts.Create(ctx, d, GoalVoice, JobOptions{Seeds: -1})
	if err != nil {
		t.Fatal(err)
	}
	j3 = finishVoiceJob(t, ts, j3, 0.9)
	if err := ts.Runner().SetResult(ctx, j3.ID, "evaluate", res); err != nil {
		t.Fatal(err)
	}
	if in, err := ts.AddVoice(ctx, j3, "", false); err != nil || in.Voice != "anna" {
		t.Fatalf("the CLI over its own earlier install: %+v %v", in, err)
	}
	if v, _ := lib.Get("anna"); v == nil || v.Embedding.Data[0] != 0.9 {
		t.Fatalf("the later job's voice was not installed: %+v", v)
	}
	j3, _ = ts.Runner().Job(ctx, j3.ID)
	if ev := ts.Evaluation(j3); ev == nil || ev.Installed != "anna" {
		t.Fatalf("the evaluation does not say what the CLI installed: %+v", ev)
	}
	// another voice has the dataset's name: NAME-tuned, for both faces; a name given is used
	// as it is, and replaces another voice only when asked to
	other := voices.New("bo", "chattts", voices.KindSeed)
	seed := int64(7)
	other.Seed = &seed
	if err := lib.Save(other, false); err != nil {
		t.Fatal(err)
	}
	db, err := clone.Create(filepath.Join(t.TempDir(), "Bo"), "Bo")
	if err != nil {
		t.Fatal(err)
	}
	db.Clips, db.Lang = d.Clips, d.Lang
	for _, c := range d.Clips {
		copyFile(t, d.Abs(c.Path), db.Abs(c.Path))
	}
	if err := db.Save(); err != nil {
		t.Fatal(err)
	}
	jb, err := ts.Create(ctx, db, GoalVoice, JobOptions{Seeds: -1})
	if err != nil {
		t.Fatal(err)
	}
	jb = finishVoiceJob(t, ts, jb, 0.3)
	if in, err := ts.AddVoice(ctx, jb, "", false); err != nil || in.Voice != "bo-tuned" {
		t.Fatalf("the dataset's name taken: %+v %v", in, err)
	}
	if err := ts.Runner().SetResult(ctx, jb.ID, "evaluate", res); err != nil {
		t.Fatal(err)
	}
	jb, _ = ts.Runner().Job(ctx, jb.ID)
	if name, err := ts.Install(ctx, jb); err != nil || name != "bo-tuned" {
		t.Fatalf("the wizard, the dataset's name taken: %q %v", name, err)
	}
	if _, err := ts.AddVoice(ctx, jb, "bo", false); !errors.Is(err, voices.ErrExists) {
		t.Fatalf("another voice's name without replacing it: %v", err)
	}
	if in, err := ts.AddVoice(ctx, jb, "bo", true); err != nil || in.Voice != "bo" {
		t.Fatalf("another voice's name, replaced: %+v %v", in, err)
	}
	if VoiceNameOf("Anna_B. x") != "anna-b--x" || VoiceNameOf("Ada") != "ada" {
		t.Errorf("VoiceNameOf: %q %q", VoiceNameOf("Anna_B. x"), VoiceNameOf("Ada"))
	}
}

// TestRecogniserJobOneWay: the recogniser job and its install are one implementation for both
// faces. The service's job for JobOptions (the wizard's Create, and `parley finetune asr`'s
// flags) is the recipe's for the same settings, FunASR's model.pt included; a starting point
// that cannot be used is the wizard's sentence with its cause inside, for the command to word
// its own; AddRecogniser (the command's install) and Install (the wizard's) refuse and install
// alike, and the stored evaluation says what was installed.
func TestRecogniserJobOneWay(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // the local models' folder
	ctx := context.Background()
	st := openStore(t)
	ts := NewTrainingService(st, nil)
	ts.ASRModel, ts.Procs = tinyBase(t), 1
	d := testDataset(t, 20)
	j, err := ts.Create(ctx, d, GoalRecognition, JobOptions{Epochs: 3, LR: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	want, err := NewASRJob(ctx, ts.Runner(), d, ASRConfig{Base: tinyBase(t), BaseID: "tiny", Epochs: 3, LR: 0.001, Procs: 1})
	if err != nil {
		t.Fatal(err)
	}
	same := func(g, w Spec) {
		t.Helper()
		if g.Title != w.Title || g.Procs != w.Procs || g.Threads != w.Threads || g.Samples != w.Samples ||
			string(g.Meta) != string(w.Meta) || !reflect.DeepEqual(g.Steps, w.Steps) {
			t.Errorf("the service's job\n%+v\nthe recipe's\n%+v", g, w)
		}
	}
	same(j.Spec, want.Spec)

	// a starting point without a float model.onnx: refused, unless FunASR's model.pt is given
	noFloat := t.TempDir()
	for _, f := range []string{"model.int8.onnx", "tokens.txt"} {
		copyFile(t, filepath.Join(tinyBase(t), f), filepath.Join(noFloat, f))
	}
	ts.ASRModel = noFloat
	_, err = ts.Create(ctx, d, GoalRecognition, JobOptions{})
	var be *BaseError
	if !errors.As(err, &be) || !errors.Is(err, ErrNoFloatModel) || be.Model == "" ||
		err.Error() != be.Model+" has no float model.onnx that Parley exported, so it cannot be fine-tuned from "+
			"(`parley finetune asr --official DIR` starts from FunASR's SenseVoiceSmall model.pt)" {
		t.Fatalf("no float model: %v", err)
	}
	if _, _, err := ts.Base(ctx, GoalRecognition); !errors.Is(err, ErrNoFloatModel) {
		t.Errorf("the checklist's starting point: %v", err)
	}
	official := t.TempDir()
	jo, err := ts.Create(ctx, d, GoalRecognition, JobOptions{Official: official})
	if err != nil {
		t.Fatalf("with --official: %v", err)
	}
	wo, _ := NewASRJob(ctx, ts.Runner(), d, ASRConfig{Base: noFloat, BaseID: be.Model, Official: official, Procs: 1})
	same(jo.Spec, wo.Spec)
	// a recogniser that is not installed: the wizard's sentence, ErrNoRecogniser, and the
	// lookup's cause; one that does not exist: the lookup's words
	ts.ASRModel = factory.RealASR
	_, err = ts.Create(ctx, d, GoalRecognition, JobOptions{})
	if !errors.As(err, &be) || !errors.Is(err, ErrNoRecogniser) || !errors.Is(err, assets.ErrNotInstalled) ||
		!strings.Contains(err.Error(), "download") || be.Err.Error() == err.Error() {
		t.Fatalf("not installed: %v", err)
	}
	ts.ASRModel = "sensevoice-nowhere"
	_, err = ts.Create(ctx, d, GoalRecognition, JobOptions{})
	if !errors.As(err, &be) || errors.Is(err, ErrNoRecogniser) || be.Err.Error() != err.Error() {
		t.Fatalf("no such recogniser: %v", err)
	}

	// install: refused alike before the evaluation and when it is not better, then one model
	ts.ASRModel = tinyBase(t)
	for _, f := range []string{"model.onnx", "tokens.txt"} {
		copyFile2(t, filepath.Join(tinyBase(t), f), filepath.Join(ModelDir(j), f))
	}
	if err := ts.r.st.SetJobStatus(ctx, j.ID, store.JobDone, ""); err != nil {
		t.Fatal(err)
	}
	j, _ = ts.Runner().Job(ctx, j.ID)
	_, _, e1 := ts.AddRecogniser(ctx, j)
	_, e2 := ts.Install(ctx, j)
	if e1 == nil || e2 == nil || e1.Error() != e2.Error() || !strings.Contains(e1.Error(), "evaluate the job first") {
		t.Fatalf("before the evaluation: %v / %v", e1, e2)
	}
	m, _ := ASRMetaOf(j)
	res := ASRResult{Before: Score{CER: 0.5, Errors: 5, Chars: 10}, After: Score{CER: 0.6, Errors: 6, Chars: 10}}
	ts.Runner().SetResult(ctx, j.ID, "evaluate", res)
	j, _ = ts.Runner().Job(ctx, j.ID)
	if _, _, err := ts.AddRecogniser(ctx, j); !errors.Is(err, ErrNotBetter) {
		t.Fatalf("not better, the command's install: %v", err)
	}
	if _, err := ts.Install(ctx, j); !errors.Is(err, ErrNotBetter) {
		t.Fatalf("not better, the wizard's install: %v", err)
	}
	res.After, res.Improved = Score{CER: 0.1, Errors: 1, Chars: 10}, true
	ts.Runner().SetResult(ctx, j.ID, "evaluate", res)
	j, _ = ts.Runner().Job(ctx, j.ID)
	id, dir, err := ts.AddRecogniser(ctx, j)
	if err != nil || id != LocalID(m.Name) {
		t.Fatalf("the command's install: %q %q %v", id, dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.onnx")); err != nil {
		t.Fatalf("the installed model: %v", err)
	}
	j, _ = ts.Runner().Job(ctx, j.ID)
	if ev := ts.Evaluation(j); ev == nil || ev.Installed != id {
		t.Fatalf("the evaluation does not say what was installed: %+v", ev)
	}
	if id2, err := ts.Install(ctx, j); err != nil || id2 != id {
		t.Fatalf("the wizard's install over it: %q %v", id2, err)
	}
}

func copyFile2(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	copyFile(t, src, dst)
}
