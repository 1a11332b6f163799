package tune

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/chattts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/clone"
)

// CloneService is Preparer and Cloner on the installed models (opened through app/factory
// with the configuration's settings) and the voice library. The same Go APIs back the
// `parley finetune` commands.
type CloneService struct {
	f   *factory.Factory
	log *slog.Logger
	// Datasets is the folder the datasets live in (DatasetsDir).
	Datasets string
	// ASRModel overrides the configured recogniser (tests: the demo model's directory);
	// CloneModel the ChatTTS export clones are made with (default: the installed one, else
	// the demo voice); VoicesDir the voice library (default voices.DefaultDir).
	ASRModel   string
	CloneModel string
	VoicesDir  string
	Seeds      int // seed speakers tried for the closest one (default 8)
}

// NewCloneService is the service on the models f opens, logging to f's logger (nil: a
// factory of the default configuration that discards its logs).
func NewCloneService(f *factory.Factory) *CloneService {
	if f == nil {
		f = factory.New(nil, nil)
	}
	return &CloneService{f: f, log: f.Log(), Datasets: DatasetsDir()}
}

// Dir implements Preparer.
func (s *CloneService) Dir() string { return s.Datasets }

// Open implements Preparer.
func (s *CloneService) Open(ctx context.Context, path string) (audio.Source, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, nil, errors.New("is a folder")
	}
	d, err := audio.Decode(ctx, f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return d, func() {
		d.Close()
		f.Close()
		if w := d.Warning(); w != nil {
			s.log.Warn("imported a damaged recording as far as it goes", "file", path, "warning", w)
		}
	}, nil
}

func (s *CloneService) factory() *factory.Factory { return s.f }

// Segmenter implements Preparer.
func (s *CloneService) Segmenter() (clone.Segmenter, func(), error) {
	det, err := s.factory().VAD("", vad.Config{})
	if err != nil {
		return nil, nil, fmt.Errorf("voice activity detection: %w", err)
	}
	return det, func() { det.Close() }, nil
}

// RecogniserInfo implements Preparer.
func (s *CloneService) RecogniserInfo(ctx context.Context) (string, bool, error) {
	m, err := s.factory().FindASR(ctx, s.ASRModel)
	if err != nil {
		return "", false, notInstalled(err)
	}
	return m.ID, m.Demo, nil
}

// Recogniser implements Preparer.
func (s *CloneService) Recogniser(ctx context.Context) (*Recogniser, error) {
	rec, m, err := s.factory().Recognizer(ctx, s.ASRModel, asr.Config{})
	if err != nil {
		return nil, notInstalled(err)
	}
	return &Recogniser{Transcriber: factory.CloneTranscriber(rec), Model: m.ID, Demo: m.Demo, Close: func() { rec.Close() }}, nil
}

// cloneDir is the ChatTTS export clones are made with.
func (s *CloneService) cloneDir() (string, error) {
	if s.CloneModel != "" {
		return s.CloneModel, nil
	}
	if dir, _ := engines.FindChatTTS("", true); dir != "" {
		return dir, nil
	}
	return "", ErrNoCloneModel
}

// CloneReady implements Cloner.
func (s *CloneService) CloneReady() error {
	_, err := s.cloneDir()
	return err
}

// Library opens the voice library clones and fine-tuned voices are added to.
func (s *CloneService) Library() (*voices.Library, error) {
	dir := s.VoicesDir
	if dir == "" {
		dir = voices.DefaultDir()
	}
	return voices.Open(dir)
}

// HasVoice implements Cloner.
func (s *CloneService) HasVoice(name string) bool {
	lib, err := s.Library()
	if err != nil {
		return false
	}
	_, err = lib.Get(name)
	return err == nil
}

// CloneVoice implements Cloner.
func (s *CloneService) CloneVoice(ctx context.Context, pcm []float32, text, name string, progress func(string)) (*CloneResult, error) {
	lib, err := s.Library()
	if err != nil {
		return nil, err
	}
	if _, err := lib.Get(name); err == nil {
		return nil, fmt.Errorf("%w: %s (pick another name)", voices.ErrExists, name)
	}
	res, err := s.clone(ctx, pcm, text, name, progress)
	if err != nil {
		return nil, err
	}
	res.Voice.Description = fmt.Sprintf("cloned from a clip in the desktop app (%.1f s)", res.Seconds)
	if err := lib.Save(res.Voice, false); err != nil {
		return nil, err
	}
	return res, nil
}

// clone runs Clone with the installed engines (the voice is not saved).
func (s *CloneService) clone(ctx context.Context, pcm []float32, text, name string, progress func(string)) (*CloneResult, error) {
	dir, err := s.cloneDir()
	if err != nil {
		return nil, err
	}
	fac := s.factory()
	progress("loading the voice model")
	enc, err := fac.SampleEncoder(dir)
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	eng, err := fac.ChatTTS(dir)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	det, err := fac.VAD("", vad.Config{MinSilence: CloneVADMinSilence})
	if err != nil {
		return nil, fmt.Errorf("voice activity detection: %w", err)
	}
	defer det.Close()
	seeds := s.Seeds
	if seeds == 0 {
		seeds = CloneSeeds
	}
	o := CloneOptions{Name: name, Text: text, Prompter: enc, NumVQ: eng.Model().GPT.NumVQ,
		Model: filepath.Base(filepath.Clean(dir)), Langs: eng.Capabilities().Languages, Speech: det,
		Seeds: seeds, Voice: eng, Progress: progress}
	if rec, _, err := fac.Recognizer(ctx, s.ASRModel, asr.Config{}); err == nil {
		defer rec.Close()
		o.Ear = factory.CloneTranscriber(rec) // checks the transcript against the audio
	}
	if se, _, err := fac.SpeakerEncoder(ctx, ""); err == nil {
		defer se.Close()
		o.Embedder = se
	} else {
		s.log.Info("no speaker encoder: the clone keeps the model's default speaker", "err", err)
	}
	res, err := Clone(ctx, pcm, audio.Mono16k.SampleRate, o)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// CloneDataset implements Cloner.
func (s *CloneService) CloneDataset(ctx context.Context, d *clone.Dataset, name string, secs float64, progress func(string)) (*CloneResult, *clone.Clip, error) {
	train, _, err := SplitClips(d, 0)
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	for _, c := range train {
		ids = append(ids, c.ID)
	}
	c, err := ClipNear(d, ids, secs)
	if err != nil {
		return nil, nil, err
	}
	pcm, err := d.ReadClip(c.Path)
	if err != nil {
		return nil, nil, err
	}
	lib, err := s.Library()
	if err != nil {
		return nil, nil, err
	}
	res, err := s.clone(ctx, pcm, c.Text, name, progress)
	if err != nil {
		return nil, c, fmt.Errorf("clip %s: %w", c.ID, err)
	}
	res.Voice.Description = fmt.Sprintf("zero-shot clone of dataset %s (clip %s, %.1f s)", d.Name, c.ID, res.Seconds)
	if err := lib.Save(res.Voice, true); err != nil { // the dataset's own clone: made again
		return nil, c, err
	}
	return res, c, nil
}

// voiceEngine opens the ChatTTS engine clones speak with.
func (s *CloneService) voiceEngine() (*chattts.Engine, error) {
	dir, err := s.cloneDir()
	if err != nil {
		return nil, err
	}
	return s.factory().ChatTTS(dir)
}

// request is what makes a library voice (or, for "", a seed speaker) speak text.
func (s *CloneService) request(name string, seed int64, text string) (tts.Request, error) {
	req := tts.Request{Text: text}
	if name == "" {
		req.Seed, req.HasSeed = seed, true
		return req, nil
	}
	lib, err := s.Library()
	if err != nil {
		return req, err
	}
	v, err := lib.Get(name)
	if err != nil {
		return req, err
	}
	return engines.ApplyVoice(req, v, "chattts", engines.Explicit{})
}

// CompareVoices implements Cloner: CompareVoices with a random seed voice and the library
// voice name, on the held-out clips of the dataset's split.
func (s *CloneService) CompareVoices(ctx context.Context, d *clone.Dataset, name string, n int, progress func(string)) ([]VoiceScore, []string, int64, error) {
	_, held, err := SplitClips(d, 0)
	if err != nil {
		return nil, nil, 0, err
	}
	var ids []string
	for _, c := range held {
		ids = append(ids, c.ID)
	}
	dir, err := s.cloneDir()
	if err != nil {
		return nil, nil, 0, err
	}
	voice, err := s.request(name, 0, "")
	if err != nil {
		return nil, nil, 0, err
	}
	seed := RandomSeed(d.Name)
	res, err := CompareVoices(ctx, s.factory(), VoiceComparison{Dataset: d, Model: dir, ASRModel: s.ASRModel, HeldOut: ids, Sentences: n,
		Voices: []VoiceCandidate{{Name: fmt.Sprintf("a random voice (seed %d)", seed), Request: tts.Request{Seed: seed, HasSeed: true}},
			{Name: name, Request: voice}},
		Desktop: true, Progress: progress})
	if err != nil {
		return nil, nil, 0, err
	}
	return res.Scores, res.Texts, seed, nil
}

// Say implements Cloner.
func (s *CloneService) Say(ctx context.Context, name string, seed int64, text string) ([]float32, error) {
	req, err := s.request(name, seed, text)
	if err != nil {
		return nil, err
	}
	eng, err := s.voiceEngine()
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	st, err := eng.Synthesize(ctx, req)
	if err != nil {
		return nil, err
	}
	buf, err := tts.ReadAll(ctx, st)
	st.Close()
	if err != nil {
		return nil, err
	}
	return audio.Resample(buf.Data, buf.Format.SampleRate, 16000, 1)
}
