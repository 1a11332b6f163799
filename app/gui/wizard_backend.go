package gui

import (
	"context"
	"errors"
	"fmt"
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
	det, err := s.factory().VAD(vad.Config{})
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

func (s *cloneService) CloneVoice(ctx context.Context, pcm []float32, text, name string, progress func(string)) (*tune.CloneResult, error) {
	dir, err := s.cloneDir()
	if err != nil {
		return nil, err
	}
	libDir := s.voicesDir
	if libDir == "" {
		libDir = voices.DefaultDir()
	}
	lib, err := voices.Open(libDir)
	if err != nil {
		return nil, err
	}
	if _, err := lib.Get(name); err == nil {
		return nil, fmt.Errorf("%w: %s (pick another name)", voices.ErrExists, name)
	}
	fac := s.factory()
	progress("loading the voice model")
	enc, err := chattts.NewSampleEncoder(dir, fac.GPU())
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	eng, err := chattts.New(chattts.Config{Dir: dir, Options: fac.GPU(), Log: s.log})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	det, err := fac.VAD(vad.Config{})
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
	res.Voice.Description = fmt.Sprintf("cloned from a clip in the desktop app (%.1f s)", res.Seconds)
	if err := lib.Save(res.Voice, false); err != nil {
		return nil, err
	}
	return &res, nil
}
