package tune

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/voices/clone"
)

// TrainingService is Readiness, Jobs, Evaluator and Installer on the Runner and its recipes:
// the recogniser's (NewASRJob) and the voice's (NewTTSJob, trainvoice.go).
type TrainingService struct {
	r   *Runner
	f   *factory.Factory
	log *slog.Logger
	// Voice is where the voice goal finds the ChatTTS model, the speaker encoder, the
	// recogniser that scores a voice and the voice library (nil: no voice goal).
	Voice *CloneService
	// ASRModel overrides the configured recogniser as the starting point, and Epochs and
	// VoiceEpochs the recipes' training lengths, Procs and Threads the trainer's processes
	// and threads (tests; `parley finetune`'s --procs).
	ASRModel       string
	Epochs         int
	VoiceEpochs    int
	Procs, Threads int
	recovered      sync.Once
	recoverErr     error
}

// NewTrainingService runs jobs in st with the trainer of f's configuration, opens models
// through f and logs to f's logger (nil: a factory of the default configuration that
// discards its logs).
func NewTrainingService(st *store.Store, f *factory.Factory) *TrainingService {
	if f == nil {
		f = factory.New(nil, nil)
	}
	cfg, log := f.Config(), f.Log()
	e := Env{Python: cfg.Train.Python, TrainDir: cfg.Train.Dir}
	return &TrainingService{r: NewRunner(st, Options{Env: e, Log: log}), f: f, log: log}
}

// Runner is the job runner the service's jobs run on.
func (s *TrainingService) Runner() *Runner { return s.r }

// Supports implements Readiness.
func (s *TrainingService) Supports(goal string) error {
	if goal == GoalVoice && s.Voice == nil {
		return ErrVoiceTraining
	}
	return nil
}

// kindOf is the job kind of a goal.
func kindOf(goal string) string {
	if goal == GoalVoice {
		return TTSKind
	}
	return ASRKind
}

// datasetOf is the dataset a job of either kind belongs to.
func datasetOf(j Job) string {
	if m, err := ASRMetaOf(j); err == nil {
		return m.Dataset
	}
	if m, err := TTSMetaOf(j); err == nil {
		return m.Dataset
	}
	return ""
}

// recover finds, once per service, the jobs a closed Parley left "running": they become
// interrupted and resumable.
func (s *TrainingService) recover(ctx context.Context) error {
	s.recovered.Do(func() { _, s.recoverErr = s.r.Recover(ctx) })
	return s.recoverErr
}

// Prepare is what a face does before it creates or resumes a job: the jobs a closed Parley
// left running are found (once) and Python, PyTorch and the trainer are checked, so a job
// that cannot run fails before anything is made (`parley finetune train` and `finetune asr`).
func (s *TrainingService) Prepare(ctx context.Context) error {
	if err := s.recover(ctx); err != nil {
		return err
	}
	_, err := s.r.Check(ctx)
	return err
}

// Check implements Readiness.
func (s *TrainingService) Check(ctx context.Context) (string, error) {
	t, err := s.r.Check(ctx)
	if err != nil {
		return "", err
	}
	where := fmt.Sprintf("on the CPU (%d cores)", t.Cores)
	if t.CUDA && t.GPUs > 0 {
		where = fmt.Sprintf("on %d GPU", t.GPUs)
		if t.GPUs != 1 {
			where += "s"
		}
	}
	return fmt.Sprintf("PyTorch %s %s", t.Version, where), nil
}

// ErrNoFloatModel: the recogniser to start from has no float model.onnx that Parley exported
// (the training recovers its weights from it), and no FunASR model.pt was given instead.
var ErrNoFloatModel = errors.New("tune: no float model.onnx that Parley exported")

// BaseError is why a new recogniser job has no starting point. Its message is the wizard's
// wording; Err is the cause (the model lookup's error, such as factory.ErrNoASR, or
// ErrNoFloatModel) and Model the model found, for a face that words it itself (`parley
// finetune asr`). errors.Is finds ErrNoRecogniser in it when no recogniser is installed.
type BaseError struct {
	Model string
	Err   error
	msg   string
	none  bool // no recogniser installed: it is ErrNoRecogniser
}

func (e *BaseError) Error() string { return e.msg }

func (e *BaseError) Unwrap() []error {
	if e.none {
		return []error{ErrNoRecogniser, e.Err}
	}
	return []error{e.Err}
}

// base resolves the recogniser a new job starts from: ASRModel, else the configured or best
// installed one; with official (FunASR's SenseVoiceSmall directory), one without a float
// model.onnx will do.
func (s *TrainingService) base(ctx context.Context, official string) (dir, id string, demo bool, err error) {
	m, err := s.f.FindASR(ctx, s.ASRModel)
	if err != nil {
		be := &BaseError{Err: err, msg: err.Error()}
		if w := notInstalled(err); w != err {
			be.msg, be.none = w.Error(), true
		}
		return "", "", false, be
	}
	if official != "" {
		return m.Path, m.ID, m.Demo, nil
	}
	if _, err := os.Stat(filepath.Join(m.Path, "model.onnx")); err != nil {
		return "", "", false, &BaseError{Model: m.ID, Err: ErrNoFloatModel,
			msg: fmt.Sprintf("%s has no float model.onnx that Parley exported, so it cannot be fine-tuned from "+
				"(`parley finetune asr --official DIR` starts from FunASR's SenseVoiceSmall model.pt)", m.ID)}
	}
	return m.Path, m.ID, m.Demo, nil
}

// Base implements Readiness.
func (s *TrainingService) Base(ctx context.Context, goal string) (string, bool, error) {
	if err := s.Supports(goal); err != nil {
		return "", false, err
	}
	if goal == GoalVoice {
		dir, demo, err := s.voiceModel()
		return filepath.Base(filepath.Clean(dir)), demo, err
	}
	_, id, demo, err := s.base(ctx, "")
	return id, demo, err
}

// MinClips implements Readiness.
func (s *TrainingService) MinClips(string) int { return MinASRClips }

// Latest implements Jobs.
func (s *TrainingService) Latest(ctx context.Context, d *clone.Dataset, goal string) (*Job, error) {
	if err := s.Supports(goal); err != nil {
		return nil, nil
	}
	// jobs a closed Parley left "running" are found once, as interrupted and resumable
	if err := s.recover(ctx); err != nil {
		s.log.Warn("recovering training jobs", "err", err)
	}
	jobs, err := s.r.Jobs(ctx, kindOf(goal))
	if err != nil {
		return nil, err
	}
	for _, j := range jobs { // newest first
		if datasetOf(j) == d.Dir() {
			return &j, nil
		}
	}
	return nil, nil
}

// Create implements Jobs.
func (s *TrainingService) Create(ctx context.Context, d *clone.Dataset, goal string, opt JobOptions) (Job, error) {
	if err := s.Supports(goal); err != nil {
		return Job{}, err
	}
	if goal == GoalVoice {
		return s.createVoice(ctx, d, opt)
	}
	dir, id, _, err := s.base(ctx, opt.Official)
	if err != nil {
		return Job{}, err
	}
	return NewASRJob(ctx, s.r, d, s.asrConfig(dir, id, opt))
}

// asrConfig is a new recogniser job's recipe settings.
func (s *TrainingService) asrConfig(dir, id string, opt JobOptions) ASRConfig {
	return ASRConfig{Base: dir, BaseID: id, Official: opt.Official, Epochs: cmp.Or(opt.Epochs, s.Epochs), LR: opt.LR,
		Procs: s.Procs, Threads: s.Threads}
}

// Start implements Jobs.
func (s *TrainingService) Start(ctx context.Context, id int64, on Handler) (func() error, error) {
	h, err := s.start(ctx, id, on)
	if err != nil {
		return nil, err
	}
	return func() error { _, err := h.Wait(); return err }, nil
}

// Run is Start, then the wait for the job to stop: its final record (the step it stopped
// at, why it failed) and the error wait would return. A job that did not start returns a
// zero Job (`parley finetune`, which waits in the foreground).
func (s *TrainingService) Run(ctx context.Context, id int64, on Handler) (Job, error) {
	h, err := s.start(ctx, id, on)
	if err != nil {
		return Job{}, err
	}
	return h.Wait()
}

// start is the one way both faces start or resume a job.
func (s *TrainingService) start(ctx context.Context, id int64, on Handler) (*Handle, error) {
	return s.r.Start(ctx, id, on)
}

// recogniser opens a model directory for scoring.
func (s *TrainingService) recogniser(dir string) (clone.Transcriber, func(), error) {
	rec, _, err := s.f.Recognizer(context.Background(), dir, asr.Config{})
	if err != nil {
		return nil, nil, err
	}
	return factory.CloneTranscriber(rec), func() { rec.Close() }, nil
}

// Evaluate implements Evaluator.
func (s *TrainingService) Evaluate(ctx context.Context, j Job) (*Evaluation, error) {
	if j.Spec.Kind == TTSKind {
		return s.evaluateVoice(ctx, j)
	}
	res, err := Evaluate(ctx, j, s.recogniser)
	if err != nil {
		return nil, err
	}
	if !res.Improved {
		m, _ := ASRMetaOf(j)
		res.Message = fmt.Sprintf("On your %d held-out clips the fine-tuned recogniser makes %d character errors, %s made %d.",
			len(res.After.Clips), res.After.Errors, m.BaseID, res.Before.Errors)
	}
	if err := s.r.SetResult(context.WithoutCancel(ctx), j.ID, "evaluate", res); err != nil {
		return nil, err
	}
	return evaluationOf(res), nil
}

// storedASR is a recogniser job's stored evaluation.
func storedASR(j Job) (ASRResult, bool) {
	var res ASRResult
	raw, ok := j.Progress.Results["evaluate"]
	if !ok || json.Unmarshal(raw, &res) != nil {
		return res, false
	}
	return res, true
}

// Evaluation implements Evaluator.
func (s *TrainingService) Evaluation(j Job) *Evaluation {
	if j.Spec.Kind == TTSKind {
		if res, ok := storedVoice(j); ok {
			return voiceEvaluation(res)
		}
		return nil
	}
	res, ok := storedASR(j)
	if !ok {
		return nil
	}
	return evaluationOf(res)
}

// Install implements Installer.
func (s *TrainingService) Install(ctx context.Context, j Job) (string, error) {
	if j.Spec.Kind == TTSKind {
		return s.installVoice(ctx, j)
	}
	id, _, err := s.AddRecogniser(ctx, j)
	return id, err
}

// AddRecogniser installs an evaluated recogniser job's model, when it did better than its
// starting point, as the local model LocalID(dataset) (Install: the earlier fine-tune of
// that name replaced, nothing half-installed) — the one install of a recogniser, the
// wizard's install step and `parley finetune asr` alike; it returns the model's id and
// directory. The stored evaluation says what was installed; a record that cannot be written
// is logged, not an error: the model is installed.
func (s *TrainingService) AddRecogniser(ctx context.Context, j Job) (id, dir string, err error) {
	res, ok := storedASR(j)
	if !ok {
		return "", "", errors.New("evaluate the job first")
	}
	if !res.Improved {
		return "", "", ErrNotBetter
	}
	mgr, err := assets.NewManager(nil, assets.Options{Log: s.log})
	if err != nil {
		return "", "", err
	}
	if dir, err = Install(ctx, mgr, j, res); err != nil {
		return "", "", err
	}
	m, _ := ASRMetaOf(j)
	res.Installed = LocalID(m.Name)
	res.Message = "installed as " + res.Installed
	if err := s.r.SetResult(context.WithoutCancel(ctx), j.ID, "evaluate", res); err != nil {
		s.log.Warn("recording the install with the evaluation", "job", j.ID, "err", err)
	}
	return res.Installed, dir, nil
}

// evaluationOf turns a recogniser fine-tune's result into the evaluate step's view.
func evaluationOf(res ASRResult) *Evaluation {
	ev := &Evaluation{Metric: "character error rate", Before: res.Before.CER, After: res.After.CER,
		Improved: res.Improved, Message: res.Message, Installed: res.Installed}
	before := map[string]ClipScore{}
	for _, c := range res.Before.Clips {
		before[c.Clip] = c
	}
	for _, a := range res.After.Clips {
		b := before[a.Clip]
		ev.Items = append(ev.Items, EvalItem{Clip: a.Clip, Path: filepath.Join("clips", a.Clip+".wav"), Ref: a.Ref,
			Before: b.Hyp, After: a.Hyp, BeforeErr: b.Errors, AfterErr: a.Errors})
	}
	return ev
}
