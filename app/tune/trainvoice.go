package tune

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/clone"
)

// The voice goal's steps 5–7 on the voice fine-tune, as `parley finetune train` and
// `finetune install` run it: a speaker vector for the installed ChatTTS model, trained from
// the seed speaker closest to the person; evaluated against a random seed voice and a
// 3-second zero-shot clone on the held-out clips (CompareVoices, as `parley finetune
// evaluate` runs it); installed as a library voice.

// Voice evaluation settings.
const (
	voiceEvalSentences = 4 // held-out sentences each voice speaks
	voiceCloneSeconds  = 3 // the zero-shot clone it is compared with is made from a clip this long
	voiceStartSeeds    = 8 // seed speakers tried for the starting speaker
	// voiceCERSlack is how much more the recogniser may mishear the fine-tuned voice than
	// the random one before the evaluation says so (the 1.3× bound).
	voiceCERSlack = 1.3
)

// voiceResult is a voice job's stored evaluation (the job's results.evaluate).
type voiceResult struct {
	// Voices: the random seed voice, the zero-shot clone (when one could be made) and the
	// fine-tuned voice, last.
	Voices []VoiceScore `json:"voices"`
	Clips  []string     `json:"clips"` // the held-out clip of each sentence
	// PlayA and PlayB are each sentence spoken by the random voice and by the fine-tuned one
	// (16 kHz WAVs, relative to the dataset).
	PlayA     []string `json:"play_a"`
	PlayB     []string `json:"play_b"`
	Improved  bool     `json:"improved"`
	Message   string   `json:"message,omitempty"`
	Installed string   `json:"installed,omitempty"` // the voice's name in the library
	Model     string   `json:"model,omitempty"`     // the local model installed with it (GPT trained)
}

// voiceModel is the ChatTTS export a new voice job starts from.
func (s *TrainingService) voiceModel() (dir string, demo bool, err error) {
	if s.Voice == nil {
		return "", false, ErrVoiceTraining
	}
	dir, err = s.Voice.cloneDir()
	if err != nil {
		return "", false, err
	}
	return dir, engines.IsChatTTSDemo(dir), nil
}

func (s *TrainingService) createVoice(ctx context.Context, d *clone.Dataset, opt JobOptions) (Job, error) {
	dir, _, err := s.voiceModel()
	if err != nil {
		return Job{}, err
	}
	if _, _, err := SplitClips(d, 0.2); err != nil { // before loading any model
		return Job{}, err
	}
	cfg := s.ttsConfig(dir, opt)
	seeds := s.startSeeds(opt)
	if seeds <= 0 {
		return NewTTSJob(ctx, s.r, d, cfg)
	}
	if seed, sim, spk, err := s.startingSpeaker(ctx, d, dir, seeds, opt.Progress); err != nil {
		s.log.Info("the voice fine-tune starts from the model's mean speaker", "reason", err)
	} else {
		s.log.Info("the voice fine-tune starts from the closest seed speaker", "seed", seed, "similarity", sim)
		cfg.SpeakerInit, cfg.StartSeed, cfg.StartSimilarity = spk, seed, sim
	}
	return NewTTSJob(ctx, s.r, d, cfg)
}

// ttsConfig is a new voice job's recipe settings (the starting speaker aside).
func (s *TrainingService) ttsConfig(dir string, opt JobOptions) TTSConfig {
	return TTSConfig{Model: dir, GPT: opt.WholeModel, Epochs: cmp.Or(opt.Epochs, s.VoiceEpochs), LR: opt.LR, Procs: s.Procs, Threads: s.Threads}
}

// startSeeds is how many seed speakers a new voice job tries for its starting speaker (0:
// none).
func (s *TrainingService) startSeeds(opt JobOptions) int {
	switch {
	case opt.Seeds < 0:
		return 0
	case opt.Seeds > 0:
		return opt.Seeds
	case s.Voice != nil && s.Voice.Seeds > 0:
		return s.Voice.Seeds
	}
	return voiceStartSeeds
}

// startingSpeaker is the seed speaker closest to the person (ClosestSeed: the speaker
// encoder's choice, less what pitch and voicing cost a seed).
func (s *TrainingService) startingSpeaker(ctx context.Context, d *clone.Dataset, dir string, n int, progress func(done, total int)) (int64, float64, []float32, error) {
	return StartingSpeakerOf(ctx, s.Voice.factory(), d, dir, n, progress)
}

// StartingSpeakerOf is StartingSpeaker with the speaker encoder and the ChatTTS model in dir
// opened by fac (and closed again): how a new voice job (Create, for the wizard and `parley
// finetune train` alike) finds its starting speaker.
func StartingSpeakerOf(ctx context.Context, fac *factory.Factory, d *clone.Dataset, dir string, n int, progress func(done, total int)) (int64, float64, []float32, error) {
	se, _, err := fac.SpeakerEncoder(ctx, "")
	if err != nil {
		return 0, 0, nil, err
	}
	defer se.Close()
	eng, err := fac.ChatTTS(dir)
	if err != nil {
		return 0, 0, nil, err
	}
	defer eng.Close()
	return StartingSpeaker(ctx, d, eng, se, n, progress)
}

// evaluateVoice speaks held-out sentences with a random seed voice, a 3-second zero-shot
// clone and the fine-tuned voice, scores each against the person's held-out clips, and keeps
// the random and fine-tuned speech for A/B listening.
func (s *TrainingService) evaluateVoice(ctx context.Context, j Job) (*Evaluation, error) {
	m, err := TTSMetaOf(j)
	if err != nil {
		return nil, err
	}
	if j.Status != store.JobDone {
		return nil, fmt.Errorf("job %d is %s, not trained", j.ID, j.Status)
	}
	if s.Voice == nil {
		return nil, ErrVoiceTraining
	}
	d, err := clone.Open(m.Dataset)
	if err != nil {
		return nil, err
	}
	spk, err := TrainedSpeaker(j)
	if err != nil {
		return nil, err
	}
	v := voices.New("fine-tuned", "chattts", voices.KindEmbedding)
	v.Embedding = &voices.Embedding{Dim: len(spk), Data: spk}
	req, err := engines.ApplyVoice(tts.Request{}, v, "chattts", engines.Explicit{})
	if err != nil {
		return nil, err
	}
	tuned := ""
	if m.GPT { // the fine-tuned voice speaks with its own model
		tuned = ModelDir(j)
	}

	// the speech is written next to the job, and takes the place of an earlier evaluation's
	// only once all of it is there
	tmp, err := os.MkdirTemp(j.Spec.Dir, ".evaluate-")
	if err != nil {
		return nil, fmt.Errorf("cannot keep the voices' speech: %w", err)
	}
	defer os.RemoveAll(tmp)
	final := filepath.Join(j.Spec.Dir, "evaluate")
	var res voiceResult
	keep := func(tag string, paths *[]string) func(int, []float32) error {
		return func(i int, pcm []float32) error {
			name := fmt.Sprintf("%s-%d.wav", tag, i+1)
			if err := audio.WriteWAVFile(filepath.Join(tmp, name), &audio.Buffer{Format: audio.Mono16k, Data: pcm}, audio.S16); err != nil {
				return fmt.Errorf("cannot keep the speech (is the disk full?): %w", err)
			}
			rel, _ := filepath.Rel(d.Dir(), filepath.Join(final, name))
			*paths = append(*paths, rel)
			return nil
		}
	}
	seed := RandomSeed(d.Name)
	cmp, err := CompareVoices(ctx, s.Voice.factory(), VoiceComparison{
		Dataset: d, Model: m.Model, ASRModel: s.Voice.ASRModel,
		HeldOut: m.HeldOut, Sentences: voiceEvalSentences, // the job's own held-out clips: never trained on
		Voices: []VoiceCandidate{{Name: fmt.Sprintf("a random voice (seed %d)", seed), Request: tts.Request{Seed: seed, HasSeed: true},
			Keep: keep("a", &res.PlayA)}},
		Clone: &ZeroShot{From: m.Train, Seconds: voiceCloneSeconds, Seeds: CloneSeeds, Optional: true,
			Name: func(cl CloneResult, _ *clone.Clip) string {
				return fmt.Sprintf("a zero-shot clone from a %.1f s clip", cl.Seconds)
			}},
		After: []ModelVoice{{VoiceCandidate: VoiceCandidate{Name: "your fine-tuned voice", Request: req, Keep: keep("b", &res.PlayB)},
			Model: tuned}},
		Desktop: true,
	})
	if err != nil {
		return nil, err
	}
	res.Voices, res.Clips = cmp.Scores, cmp.Clips
	random, fine := res.Voices[0], res.Voices[len(res.Voices)-1]
	res.Improved = fine.Similarity > random.Similarity
	var msg []string
	if res.Improved {
		msg = append(msg, fmt.Sprintf("Your fine-tuned voice sounds more like you than a random voice (%.2f against %.2f).", fine.Similarity, random.Similarity))
	} else {
		msg = append(msg, fmt.Sprintf("Your fine-tuned voice does not sound more like you than a random voice (%.2f against %.2f): "+
			"more (or cleaner) clips, or training the model too (`parley finetune train %s --gpt`), usually help.", fine.Similarity, random.Similarity, d.Name))
	}
	if fine.CER > voiceCERSlack*random.CER+0.02 {
		msg = append(msg, fmt.Sprintf("The recogniser mishears it more than the random voice (%.0f%% of characters against %.0f%%).", 100*fine.CER, 100*random.CER))
	}
	if cmp.NoClone != nil {
		msg = append(msg, "No zero-shot clone to compare with: "+Sentence(strings.TrimPrefix(cmp.NoClone.Error(), "tune: ")))
	}
	res.Message = strings.Join(msg, " ")
	if err := os.RemoveAll(final); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("cannot keep the voices' speech: %w", err)
	}
	if err := s.r.SetResult(context.WithoutCancel(ctx), j.ID, "evaluate", res); err != nil {
		return nil, err
	}
	return voiceEvaluation(res), nil
}

func storedVoice(j Job) (voiceResult, bool) {
	var res voiceResult
	raw, ok := j.Progress.Results["evaluate"]
	if !ok || json.Unmarshal(raw, &res) != nil || len(res.Voices) < 2 {
		return res, false
	}
	return res, true
}

// voiceEvaluation turns a voice job's result into the evaluate step's view: similarity
// before (a random voice) and after (the fine-tuned one), and per sentence what the
// recogniser heard from each, with their speech for A/B.
func voiceEvaluation(res voiceResult) *Evaluation {
	random, fine := res.Voices[0], res.Voices[len(res.Voices)-1]
	ev := &Evaluation{Metric: "speaker similarity", Before: random.Similarity, After: fine.Similarity, Voices: res.Voices,
		Improved: res.Improved, Message: res.Message, Installed: res.Installed, Model: res.Model}
	for i, id := range res.Clips {
		if i >= len(random.Items) || i >= len(fine.Items) {
			break
		}
		a, b := random.Items[i], fine.Items[i]
		it := EvalItem{Clip: id, Path: filepath.Join("clips", id+".wav"), Ref: a.Text, Before: a.Heard, After: b.Heard,
			BeforeErr: a.Errors, AfterErr: b.Errors}
		if i < len(res.PlayA) && i < len(res.PlayB) {
			it.PlayA, it.PlayB = res.PlayA[i], res.PlayB[i]
		}
		ev.Items = append(ev.Items, it)
	}
	return ev
}

// installVoice is the wizard's install step for a voice job: after its evaluation (the step
// order: the person has listened to the voice first), AddVoice under the dataset's name.
// Unlike a recogniser it is installed even when the speaker encoder did not find it closer to
// the person than a random voice: the person has listened to both (the install step says so).
func (s *TrainingService) installVoice(ctx context.Context, j Job) (string, error) {
	if _, ok := storedVoice(j); !ok {
		return "", errors.New("evaluate the job first")
	}
	in, err := s.AddVoice(ctx, j, "", false)
	return in.Voice, err
}

// VoiceInstall is what installing a voice job added.
type VoiceInstall struct {
	Voice string // the voice's name in the library
	Model string // the local model installed with it (the whole model was trained), else ""
}

// AddVoice adds a finished voice job's voice to the library (InstallVoice: nothing is left
// half-installed) — the one install of a voice, the wizard's install step and `parley
// finetune install` alike. With name "" it takes the dataset's name (VoiceNameOf), replacing
// an earlier fine-tune of the same dataset, or NAME-tuned when another voice has that name;
// a name given is used as it is, and replaces a voice of that name only when replace is set.
// What was installed is recorded with the job (results.install, and the stored evaluation's
// Installed and Model when it was evaluated); a record that cannot be written is logged, not
// an error: the voice is installed.
func (s *TrainingService) AddVoice(ctx context.Context, j Job, name string, replace bool) (VoiceInstall, error) {
	if s.Voice == nil {
		return VoiceInstall{}, ErrVoiceTraining
	}
	m, err := TTSMetaOf(j)
	if err != nil {
		return VoiceInstall{}, err
	}
	lib, err := s.Voice.Library()
	if err != nil {
		return VoiceInstall{}, err
	}
	overwrite := replace
	if name == "" {
		if name, overwrite, err = s.voiceName(ctx, lib, m); err != nil {
			return VoiceInstall{}, err
		}
	}
	mgr, err := assets.NewManager(nil, assets.Options{Log: s.log})
	if err != nil {
		return VoiceInstall{}, err
	}
	model, err := InstallVoice(ctx, mgr, lib, j, name, overwrite)
	if err != nil {
		return VoiceInstall{}, err
	}
	in := VoiceInstall{Voice: name, Model: model}
	ctx = context.WithoutCancel(ctx)
	if err := s.r.SetResult(ctx, j.ID, "install", map[string]string{"voice": name, "model": model}); err != nil {
		s.log.Warn("recording the install with the job", "job", j.ID, "err", err)
	}
	if fresh, err := s.r.Job(ctx, j.ID); err == nil { // the evaluation as stored now
		j = fresh
	}
	if res, ok := storedVoice(j); ok {
		res.Installed, res.Model = name, model
		if err := s.r.SetResult(ctx, j.ID, "evaluate", res); err != nil {
			s.log.Warn("recording the install with the evaluation", "job", j.ID, "err", err)
		}
	}
	return in, nil
}

// VoiceNameOf is the library name a dataset's fine-tuned voice takes by default (before
// NAME-tuned, when another voice has it).
func VoiceNameOf(dataset string) string { return strings.TrimPrefix(LocalID(dataset), "sensevoice-") }

// voiceName is the library name a dataset's fine-tuned voice takes: the dataset's, unless
// another voice (not an earlier fine-tune of this dataset, which is replaced) has it.
func (s *TrainingService) voiceName(ctx context.Context, lib *voices.Library, m TTSMeta) (string, bool, error) {
	base := VoiceNameOf(m.Name)
	names := []string{base, base + "-tuned"}
	for _, n := range names {
		if _, err := lib.Get(n); err != nil {
			return n, false, nil
		}
		if s.installedBy(ctx, m.Dataset, n) {
			return n, true, nil
		}
	}
	return "", false, fmt.Errorf("%w: %s and %s are other voices; rename or delete one in the Voice tab", voices.ErrExists, names[0], names[1])
}

// installedBy says whether a voice job of the dataset installed the voice name.
func (s *TrainingService) installedBy(ctx context.Context, dataset, name string) bool {
	jobs, err := s.r.Jobs(ctx, TTSKind)
	if err != nil {
		return false
	}
	for _, j := range jobs {
		if m, err := TTSMetaOf(j); err != nil || m.Dataset != dataset {
			continue
		}
		var inst struct {
			Voice string `json:"voice"`
		}
		if raw, ok := j.Progress.Results["install"]; ok && json.Unmarshal(raw, &inst) == nil && inst.Voice == name {
			return true
		}
	}
	return false
}
