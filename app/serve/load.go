package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/serve/realtime"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/llm/brain"
	"github.com/parley-voice/parley/llm/skills"
)

// Loaded is what Load opened: the engines, notes for the user about what is missing or
// demo-grade, and Close to release it all.
type Loaded struct {
	Engines Engines
	Notes   []app.Note
	closers []func() error
}

// Close releases every engine.
func (l *Loaded) Close() error {
	var errs []error
	for i := len(l.closers) - 1; i >= 0; i-- {
		errs = append(errs, l.closers[i]())
	}
	return errors.Join(errs...)
}

// Load is LoadFrom over a factory of cfg that logs to log (nil: discarded), for callers
// without one of their own (`parley serve` passes its command's factory to LoadFrom).
func Load(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Loaded, error) {
	return LoadFrom(ctx, factory.New(cfg, log))
}

// LoadFrom opens the engines f's configuration names, through f as the assistant
// (wire.BuildFrom) does: the same recogniser, voice and language model for the same
// configuration. An engine that cannot be opened is left out with a note (its endpoints
// answer 503); a language model that cannot be used leaves the offline skills. The server
// keeps f (Engines.Factory) for what it opens later.
func LoadFrom(ctx context.Context, f *factory.Factory) (*Loaded, error) {
	cfg, log := f.Config(), f.Log()
	l := &Loaded{}
	e := &l.Engines
	e.Factory = f
	note := func(n *app.Note) {
		if n != nil {
			l.Notes = append(l.Notes, *n)
		}
	}

	// speech recognition
	ac := f.ASRConfig()
	ac.Workers = max(1, cfg.Serve.MaxConcurrentASR)
	r, m, err := f.Recognizer(ctx, "", ac)
	if err == nil {
		l.closers = append(l.closers, r.Close)
		e.ASR, e.ASRModel = r, m.ID
		var langs []string
		for _, lang := range r.Info().Languages {
			if lang != "auto" && lang != "nospeech" {
				langs = append(langs, lang)
			}
		}
		e.ASRLanguages = langs
		if m.Demo {
			e.ASRNote = "demo-grade model; `parley models pull " + factory.RealASR + "` for the real one"
		}
	} else {
		log.Warn("no speech recognition", "err", err)
	}
	note(factory.ASRNote(m, err))

	// token counts for usage an upstream does not report (the tokenizer loads on first use)
	count := f.TokenCounter()
	e.Tokens = func(text string) int {
		if n, ok := count(text); ok {
			return n
		}
		return realtime.EstimateTokens(text)
	}

	// voice
	eng, err := f.Voice(factory.Voice{Preset: cfg.TTS.Voice})
	if err != nil {
		note(&app.Note{Part: app.PartVoice, Kind: app.NoteUnavailable, Err: err, Message: "speech synthesis unavailable: " + err.Error()})
		log.Warn("no speech synthesis", "err", err)
	} else {
		l.closers = append(l.closers, eng.Close)
		e.TTS, e.TTSEngine = eng, factory.EngineName(cfg.TTS.Engine)
	}
	if lib, err := f.Voices(); err == nil {
		e.Voices = lib
	}

	// brain
	choice, notes, err := f.LLM(ctx)
	if err != nil {
		l.Close()
		return nil, err
	}
	l.Notes = append(l.Notes, notes...)
	if choice.Backend != nil {
		e.LLM, e.LLMModel = choice.Backend, choice.Model
		log.Info("llm", "server", choice.Name, "model", choice.Model)
	}
	if e.Skills, err = f.ServerSkills(); err != nil {
		l.Close()
		return nil, fmt.Errorf("skills: %w", err)
	}
	e.NewBrain = func(sk *skills.Engine) (*brain.Brain, error) {
		return f.Brain(factory.Brain{Choice: choice, Skills: sk, LocalFirst: true, Spoken: true})
	}

	// voice activity for realtime sessions: Silero when its model is installed
	if p := vad.DefaultModel(); fileExists(p) && gpu.Init() == nil {
		pool, err := f.VADPool(runtime.GOMAXPROCS(0))
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("voice activity detection: %w", err)
		}
		e.NewVAD = factory.SileroVADs(pool)
		l.closers = append(l.closers, pool.Close)
	} else {
		note(&app.Note{Part: app.PartVAD, Kind: app.NoteMissing, Model: "silero-vad-v5",
			Message: "realtime: energy voice activity detector (Silero VAD model not installed)"})
	}
	return l, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
