package gui

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/chattts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/clone"
)

// Cloning is what the fine-tune wizard needs beyond the datasets themselves (voices/clone):
// the engines of the slice and label steps, decoding of imported files, and the microphone
// and speaker of the guided recording and the proofread table. The same Go APIs back the
// `parley finetune` commands.
type Cloning interface {
	// Dir is the folder the datasets live in (one sub-folder each).
	Dir() string
	// Open decodes an audio file of any format (clone.OpenFunc).
	Open(ctx context.Context, path string) (audio.Source, func(), error)
	// Segmenter opens the voice activity detector of the slice step.
	Segmenter() (clone.Segmenter, func(), error)
	// Recogniser opens the speech recogniser of the label step.
	Recogniser(ctx context.Context) (*Recogniser, error)
	// RecogniserInfo names the recogniser Recogniser would open, without loading it.
	RecogniserInfo(ctx context.Context) (id string, demo bool, err error)
	// Record records from the microphone until ctx ends (that is how a take is stopped),
	// reporting levels in dBFS about twenty times a second, and returns the take as 16 kHz
	// mono. It gives up after max.
	Record(ctx context.Context, max time.Duration, level func(db float64)) ([]float32, error)
	// Play plays 16 kHz mono audio and returns when it ends or ctx ends.
	Play(ctx context.Context, pcm []float32) error
	// CloneReady says why a zero-shot clone cannot be made here (nil when it can).
	CloneReady() error
	// CloneVoice makes a zero-shot clone voice from a clip (16 kHz mono) and its transcript
	// (tune.Clone: the speech trimmed, the language checked, the DVAE prompt codes, the
	// closest seed speaker) and adds it to the voice library under name. progress hears
	// what is being done.
	CloneVoice(ctx context.Context, pcm []float32, text, name string, progress func(string)) (*tune.CloneResult, error)
	// CloneDataset makes (or makes again) a dataset's zero-shot clone voice, name, from its
	// training clip nearest secs long.
	CloneDataset(ctx context.Context, d *clone.Dataset, name string, secs float64, progress func(string)) (*tune.CloneResult, *clone.Clip, error)
	// CompareVoices scores a random seed voice and the library voice name against the
	// dataset's held-out clips (speaker similarity, the recogniser's CER) on up to n of their
	// sentences; it returns the scores, the sentences, and the random seed.
	CompareVoices(ctx context.Context, d *clone.Dataset, name string, n int, progress func(string)) ([]tune.VoiceScore, []string, int64, error)
	// Say synthesises text with the library voice name (or, for "", seed's speaker), as
	// 16 kHz mono for Play.
	Say(ctx context.Context, name string, seed int64, text string) ([]float32, error)
	// HasVoice says whether the voice library holds name.
	HasVoice(name string) bool
}

// ErrNoCloneModel: no speech-token (ChatTTS) voice model to clone with.
var ErrNoCloneModel = errors.New("cloning needs a ChatTTS voice model: import an export of ChatTTS in Models (`parley models import DIR`), or install the demo voice")

// Recogniser is the label step's recogniser and what the wizard says about it.
type Recogniser struct {
	clone.Transcriber
	Model string // the model's id
	Demo  bool   // demo-grade: expect to correct many transcripts
	Close func()
}

// ErrNoRecogniser: no speech recognition model is installed.
var ErrNoRecogniser = errors.New("no speech recognition model is installed")

// cloneService is Cloning on the installed models and the configured audio devices.
type cloneService struct {
	cfg *config.Config
	log *slog.Logger
	dir string
	// asrModel overrides the configured recogniser (tests: the demo model's directory);
	// cloneModel the ChatTTS export clones are made with, voicesDir the voice library.
	asrModel   string
	cloneModel string
	voicesDir  string
	seeds      int // seed speakers tried for the closest one (default 8)
}

// DatasetsDir is where `parley finetune` and the wizard keep their datasets.
func DatasetsDir() string { return filepath.Join(assets.DataDir(), "finetune") }

func newCloneService(cfg *config.Config, log *slog.Logger) *cloneService {
	return &cloneService{cfg: cfg, log: log, dir: DatasetsDir()}
}

func (s *cloneService) Dir() string { return s.dir }

func (s *cloneService) Open(ctx context.Context, path string) (audio.Source, func(), error) {
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

func (s *cloneService) factory() *factory.Factory { return factory.New(s.cfg, s.log) }

func (s *cloneService) Segmenter() (clone.Segmenter, func(), error) {
	det, err := s.factory().VAD("", vad.Config{})
	if err != nil {
		return nil, nil, fmt.Errorf("voice activity detection: %w", err)
	}
	return det, func() { det.Close() }, nil
}

// notInstalled names what the label step needs when no recogniser is installed.
func notInstalled(err error) error {
	if errors.Is(err, assets.ErrNotInstalled) {
		return fmt.Errorf("%w: download %s in Models", ErrNoRecogniser, factory.RealASR)
	}
	return err
}

func (s *cloneService) RecogniserInfo(ctx context.Context) (string, bool, error) {
	m, err := s.factory().FindASR(ctx, s.asrModel)
	if err != nil {
		return "", false, notInstalled(err)
	}
	return m.ID, m.Demo, nil
}

func (s *cloneService) Recogniser(ctx context.Context) (*Recogniser, error) {
	rec, m, err := s.factory().Recognizer(ctx, s.asrModel, asr.Config{})
	if err != nil {
		return nil, notInstalled(err)
	}
	return &Recogniser{Transcriber: factory.CloneTranscriber(rec), Model: m.ID, Demo: m.Demo, Close: func() { rec.Close() }}, nil
}

func (s *cloneService) Record(ctx context.Context, max time.Duration, level func(float64)) ([]float32, error) {
	h, err := device.Open(s.log)
	if err != nil {
		return nil, fmt.Errorf("microphone: %w", err)
	}
	defer h.Close()
	in := ""
	if s.cfg != nil {
		in = s.cfg.Audio.Input
	}
	c, err := h.OpenCapture(device.CaptureConfig{StreamConfig: device.StreamConfig{Device: in}, Format: audio.Mono16k})
	if err != nil {
		return nil, fmt.Errorf("microphone: %w", err)
	}
	defer c.Close()
	return recordFrom(ctx, c, max, level)
}

// recordFrom reads a take from src until ctx ends or max is reached.
func recordFrom(ctx context.Context, src audio.Source, max time.Duration, level func(float64)) ([]float32, error) {
	limit := int(max.Seconds() * float64(audio.Mono16k.SampleRate))
	rec := make([]float32, 0, 10*audio.Mono16k.SampleRate)
	buf := make([]float32, audio.Mono16k.SampleRate/20)
	for len(rec) < limit {
		n, err := src.Read(ctx, buf)
		rec = append(rec, buf[:n]...)
		if n > 0 && level != nil {
			level(audio.DB(audio.RMS(buf[:n])))
		}
		if ctx.Err() != nil { // stopped: the take is what was heard until now
			return rec, nil
		}
		if err != nil {
			return rec, fmt.Errorf("microphone: %w", err)
		}
	}
	return rec[:limit], nil
}

func (s *cloneService) Play(ctx context.Context, pcm []float32) error {
	out := ""
	if s.cfg != nil {
		out = s.cfg.Audio.Output
	}
	return play(ctx, s.log, out, pcm, audio.Mono16k.SampleRate)
}

func (s *cloneService) cloneDir() (string, error) {
	if s.cloneModel != "" {
		return s.cloneModel, nil
	}
	if dir, _ := engines.FindChatTTS("", true); dir != "" {
		return dir, nil
	}
	return "", ErrNoCloneModel
}

func (s *cloneService) CloneReady() error {
	_, err := s.cloneDir()
	return err
}

func (s *cloneService) library() (*voices.Library, error) {
	dir := s.voicesDir
	if dir == "" {
		dir = voices.DefaultDir()
	}
	return voices.Open(dir)
}

func (s *cloneService) HasVoice(name string) bool {
	lib, err := s.library()
	if err != nil {
		return false
	}
	_, err = lib.Get(name)
	return err == nil
}

func (s *cloneService) CloneVoice(ctx context.Context, pcm []float32, text, name string, progress func(string)) (*tune.CloneResult, error) {
	lib, err := s.library()
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

// clone runs tune.Clone with the installed engines (the voice is not saved).
func (s *cloneService) clone(ctx context.Context, pcm []float32, text, name string, progress func(string)) (*tune.CloneResult, error) {
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
	det, err := fac.VAD("", vad.Config{MinSilence: tune.CloneVADMinSilence})
	if err != nil {
		return nil, fmt.Errorf("voice activity detection: %w", err)
	}
	defer det.Close()
	seeds := s.seeds
	if seeds == 0 {
		seeds = 8
	}
	o := tune.CloneOptions{Name: name, Text: text, Prompter: enc, NumVQ: eng.Model().GPT.NumVQ,
		Model: filepath.Base(filepath.Clean(dir)), Langs: eng.Capabilities().Languages, Speech: det,
		Seeds: seeds, Voice: eng, Progress: progress}
	if rec, _, err := fac.Recognizer(ctx, s.asrModel, asr.Config{}); err == nil {
		defer rec.Close()
		o.Ear = factory.CloneTranscriber(rec) // checks the transcript against the audio
	}
	if se, _, err := fac.SpeakerEncoder(ctx, ""); err == nil {
		defer se.Close()
		o.Embedder = se
	} else {
		s.log.Info("no speaker encoder: the clone keeps the model's default speaker", "err", err)
	}
	res, err := tune.Clone(ctx, pcm, audio.Mono16k.SampleRate, o)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

func (s *cloneService) CloneDataset(ctx context.Context, d *clone.Dataset, name string, secs float64, progress func(string)) (*tune.CloneResult, *clone.Clip, error) {
	train, _, err := tune.SplitClips(d, 0)
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	for _, c := range train {
		ids = append(ids, c.ID)
	}
	c, err := tune.ClipNear(d, ids, secs)
	if err != nil {
		return nil, nil, err
	}
	pcm, err := d.ReadClip(c.Path)
	if err != nil {
		return nil, nil, err
	}
	lib, err := s.library()
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
func (s *cloneService) voiceEngine() (*chattts.Engine, error) {
	dir, err := s.cloneDir()
	if err != nil {
		return nil, err
	}
	return s.factory().ChatTTS(dir)
}

// request is what makes a library voice (or, for "", a seed speaker) speak text.
func (s *cloneService) request(name string, seed int64, text string) (tts.Request, error) {
	req := tts.Request{Text: text}
	if name == "" {
		req.Seed, req.HasSeed = seed, true
		return req, nil
	}
	lib, err := s.library()
	if err != nil {
		return req, err
	}
	v, err := lib.Get(name)
	if err != nil {
		return req, err
	}
	return engines.ApplyVoice(req, v, "chattts", engines.Explicit{})
}

func (s *cloneService) CompareVoices(ctx context.Context, d *clone.Dataset, name string, n int, progress func(string)) ([]tune.VoiceScore, []string, int64, error) {
	_, held, err := tune.SplitClips(d, 0)
	if err != nil {
		return nil, nil, 0, err
	}
	var ids, texts []string
	for _, c := range held {
		ids = append(ids, c.ID)
		if len(texts) < n {
			texts = append(texts, c.Text)
		}
	}
	fac := s.factory()
	progress("loading the voice model, the speaker encoder and the recogniser")
	eng, err := s.voiceEngine()
	if err != nil {
		return nil, nil, 0, err
	}
	defer eng.Close()
	se, _, err := fac.SpeakerEncoder(ctx, "")
	if err != nil {
		return nil, nil, 0, fmt.Errorf("comparing voices needs a speaker encoder: %w", err)
	}
	defer se.Close()
	rec, _, err := fac.Recognizer(ctx, s.asrModel, asr.Config{})
	if err != nil {
		return nil, nil, 0, notInstalled(err)
	}
	defer rec.Close()
	progress("your voice in the held-out clips")
	ref, err := tune.ReferenceEmbedding(ctx, d, ids, se)
	if err != nil {
		return nil, nil, 0, err
	}
	seed := randomSeed(d.Name)
	clone, err := s.request(name, 0, "")
	if err != nil {
		return nil, nil, 0, err
	}
	cands := []tune.VoiceCandidate{{Name: fmt.Sprintf("a random voice (seed %d)", seed), Request: tts.Request{Seed: seed, HasSeed: true}},
		{Name: name, Request: clone}}
	progress(fmt.Sprintf("speaking %d held-out sentences with both voices", len(texts)))
	scores, err := tune.EvaluateVoices(ctx, eng, cands, texts, ref, se, factory.CloneTranscriber(rec))
	return scores, texts, seed, err
}

// randomSeed is a dataset's "random voice": a seed speaker fixed by its name, so the
// comparison is the same each time.
func randomSeed(name string) int64 {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int64(1 + h.Sum32()%10000)
}

func (s *cloneService) Say(ctx context.Context, name string, seed int64, text string) ([]float32, error) {
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
