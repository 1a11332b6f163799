package gui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/voices/clone"
)

// errVoiceTraining: no voice models to fine-tune with (a Parley without the clone service).
var errVoiceTraining = errors.New("fine-tuning a voice needs Parley's voice models, which this window was started without; " +
	"your dataset is kept, and “Improve recognition of my voice” trains on it")

// trainingService is Training on app/tune's runner and its recipes: the recogniser's
// (NewASRJob) and the voice's (NewTTSJob, wizard_tune_voice.go).
type trainingService struct {
	r   *tune.Runner
	cfg *config.Config
	log *slog.Logger
	// voice is where the voice goal finds the ChatTTS model, the speaker encoder, the
	// recogniser that scores a voice and the voice library (the wizard's clone service).
	voice *cloneService
	// asrModel overrides the configured recogniser as the starting point, and epochs and
	// voiceEpochs the recipes' training lengths (tests).
	asrModel       string
	epochs         int
	voiceEpochs    int
	procs, threads int
	recovered      sync.Once
}

func newTrainingService(st *store.Store, cfg *config.Config, log *slog.Logger) *trainingService {
	var e tune.Env
	if cfg != nil {
		e = tune.Env{Python: cfg.Train.Python, TrainDir: cfg.Train.Dir}
	}
	return &trainingService{r: tune.NewRunner(st, tune.Options{Env: e, Log: log}), cfg: cfg, log: log}
}

func (s *trainingService) Supports(goal string) error {
	if goal == goalVoice && s.voice == nil {
		return errVoiceTraining
	}
	return nil
}

// kind is the job kind of a goal.
func kind(goal string) string {
	if goal == goalVoice {
		return tune.TTSKind
	}
	return tune.ASRKind
}

// datasetOf is the dataset a job of either kind belongs to.
func datasetOf(j tune.Job) string {
	if m, err := tune.ASRMetaOf(j); err == nil {
		return m.Dataset
	}
	if m, err := tune.TTSMetaOf(j); err == nil {
		return m.Dataset
	}
	return ""
}

func (s *trainingService) Check(ctx context.Context) (string, error) {
	t, err := s.r.Check(ctx)
	if err != nil {
		return "", err
	}
	where := fmt.Sprintf("on the CPU (%d cores)", t.Cores)
	if t.CUDA && t.GPUs > 0 {
		where = fmt.Sprintf("on %d GPU%s", t.GPUs, plural(t.GPUs))
	}
	return fmt.Sprintf("PyTorch %s %s", t.Version, where), nil
}

// base resolves the recogniser a new job starts from.
func (s *trainingService) base(ctx context.Context) (dir, id string, demo bool, err error) {
	m, err := factory.New(s.cfg, s.log).FindASR(ctx, s.asrModel)
	if err != nil {
		return "", "", false, notInstalled(err)
	}
	if _, err := os.Stat(filepath.Join(m.Path, "model.onnx")); err != nil {
		return "", "", false, fmt.Errorf("%s has no float model.onnx that Parley exported, so it cannot be fine-tuned from "+
			"(`parley finetune asr --official DIR` starts from FunASR's SenseVoiceSmall model.pt)", m.ID)
	}
	return m.Path, m.ID, m.Demo, nil
}

func (s *trainingService) Base(ctx context.Context, goal string) (string, bool, error) {
	if err := s.Supports(goal); err != nil {
		return "", false, err
	}
	if goal == goalVoice {
		dir, demo, err := s.voiceModel()
		return filepath.Base(filepath.Clean(dir)), demo, err
	}
	_, id, demo, err := s.base(ctx)
	return id, demo, err
}

func (s *trainingService) MinClips(string) int { return tune.MinASRClips }

func (s *trainingService) Latest(ctx context.Context, d *clone.Dataset, goal string) (*tune.Job, error) {
	if err := s.Supports(goal); err != nil {
		return nil, nil
	}
	// jobs a closed Parley left "running" are found once, as interrupted and resumable
	s.recovered.Do(func() {
		if _, err := s.r.Recover(ctx); err != nil {
			s.log.Warn("recovering training jobs", "err", err)
		}
	})
	jobs, err := s.r.Jobs(ctx, kind(goal))
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

func (s *trainingService) Create(ctx context.Context, d *clone.Dataset, goal string, opt JobOptions) (tune.Job, error) {
	if err := s.Supports(goal); err != nil {
		return tune.Job{}, err
	}
	if goal == goalVoice {
		return s.createVoice(ctx, d, opt.WholeModel, opt.Progress)
	}
	dir, id, _, err := s.base(ctx)
	if err != nil {
		return tune.Job{}, err
	}
	return tune.NewASRJob(ctx, s.r, d, tune.ASRConfig{Base: dir, BaseID: id, Epochs: s.epochs, Procs: s.procs, Threads: s.threads})
}

func (s *trainingService) Start(ctx context.Context, id int64, on tune.Handler) (func() error, error) {
	h, err := s.r.Start(ctx, id, on)
	if err != nil {
		return nil, err
	}
	return func() error { _, err := h.Wait(); return err }, nil
}

// recogniser opens a model directory for scoring.
func (s *trainingService) recogniser(dir string) (clone.Transcriber, func(), error) {
	rec, _, err := factory.New(s.cfg, s.log).Recognizer(context.Background(), dir, asr.Config{})
	if err != nil {
		return nil, nil, err
	}
	return factory.CloneTranscriber(rec), func() { rec.Close() }, nil
}

func (s *trainingService) Evaluate(ctx context.Context, j tune.Job) (*Evaluation, error) {
	if j.Spec.Kind == tune.TTSKind {
		return s.evaluateVoice(ctx, j)
	}
	res, err := tune.Evaluate(ctx, j, s.recogniser)
	if err != nil {
		return nil, err
	}
	if !res.Improved {
		m, _ := tune.ASRMetaOf(j)
		res.Message = fmt.Sprintf("On your %d held-out clips the fine-tuned recogniser makes %d character errors, %s made %d.",
			len(res.After.Clips), res.After.Errors, m.BaseID, res.Before.Errors)
	}
	if err := s.r.SetResult(context.WithoutCancel(ctx), j.ID, "evaluate", res); err != nil {
		return nil, err
	}
	return evaluationOf(res), nil
}

func (s *trainingService) stored(j tune.Job) (tune.ASRResult, bool) {
	var res tune.ASRResult
	raw, ok := j.Progress.Results["evaluate"]
	if !ok || json.Unmarshal(raw, &res) != nil {
		return res, false
	}
	return res, true
}

func (s *trainingService) Evaluation(j tune.Job) *Evaluation {
	if j.Spec.Kind == tune.TTSKind {
		if res, ok := storedVoice(j); ok {
			return voiceEvaluation(res)
		}
		return nil
	}
	res, ok := s.stored(j)
	if !ok {
		return nil
	}
	return evaluationOf(res)
}

func (s *trainingService) Install(ctx context.Context, j tune.Job) (string, error) {
	if j.Spec.Kind == tune.TTSKind {
		return s.installVoice(ctx, j)
	}
	res, ok := s.stored(j)
	if !ok {
		return "", errors.New("evaluate the job first")
	}
	if !res.Improved {
		return "", tune.ErrNotBetter
	}
	mgr, err := assets.NewManager(nil, assets.Options{Log: s.log})
	if err != nil {
		return "", err
	}
	if _, err := tune.Install(ctx, mgr, j, res); err != nil {
		return "", err
	}
	m, _ := tune.ASRMetaOf(j)
	res.Installed = tune.LocalID(m.Name)
	res.Message = "installed as " + res.Installed
	if err := s.r.SetResult(context.WithoutCancel(ctx), j.ID, "evaluate", res); err != nil {
		return res.Installed, err
	}
	return res.Installed, nil
}

// evaluationOf turns a recogniser fine-tune's result into the evaluate step's view.
func evaluationOf(res tune.ASRResult) *Evaluation {
	ev := &Evaluation{Metric: "character error rate", Before: res.Before.CER, After: res.After.CER,
		Improved: res.Improved, Message: res.Message, Installed: res.Installed}
	before := map[string]tune.ClipScore{}
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
