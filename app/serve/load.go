package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/discover"
	"github.com/parley-voice/parley/llm/ollama"
	"github.com/parley-voice/parley/llm/openai"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
)

// Loaded is what Load opened: the engines, notes for the user about what is missing or
// demo-grade, and Close to release it all.
type Loaded struct {
	Engines Engines
	Notes   []string
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

// Load opens the engines the configuration names. An engine that cannot be opened is left
// out with a note (its endpoints answer 503); only a bad LLM configuration is an error.
func Load(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Loaded, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Loaded{}
	e := &l.Engines

	// speech recognition
	dir, id, err := findASR(cfg.ASR.Model, log)
	if err == nil {
		var r *asr.Recognizer
		r, err = asr.New(dir, asr.Config{Options: asr.Options{Language: cfg.ASR.Language, ITN: cfg.ASR.ITN},
			Provider: cfg.Runtime.Provider, Threads: cfg.Runtime.IntraOpThreads, Workers: max(1, cfg.Serve.MaxConcurrentASR), Logger: log})
		if err == nil {
			l.closers = append(l.closers, r.Close)
			e.ASR, e.ASRModel = r, id
			var langs []string
			for _, lang := range r.Info().Languages {
				if lang != "auto" && lang != "nospeech" {
					langs = append(langs, lang)
				}
			}
			e.ASRLanguages = langs
			if id == "sensevoice-demo" {
				e.ASRNote = "demo-grade model; `parley models pull sensevoice-small-int8` for the real one"
				l.Notes = append(l.Notes, "speech recognition: "+e.ASRNote)
			}
		}
	}
	if err != nil {
		l.Notes = append(l.Notes, "speech recognition unavailable: "+err.Error())
		log.Warn("no speech recognition", "err", err)
	}

	// voice
	eng, err := engines.Open(engines.Options{Engine: cfg.TTS.Engine, Voice: cfg.TTS.Voice, Log: log,
		GPU: gpu.Options{Provider: cfg.Runtime.Provider, IntraOpThreads: cfg.Runtime.IntraOpThreads}})
	if err != nil {
		l.Notes = append(l.Notes, "speech synthesis unavailable: "+err.Error())
		log.Warn("no speech synthesis", "err", err)
	} else {
		l.closers = append(l.closers, eng.Close)
		e.TTS, e.TTSEngine = eng, cfg.TTS.Engine
		if e.TTSEngine == "" || e.TTSEngine == "auto" { // the engine auto chose
			e.TTSEngine = engines.Default("")
		}
	}
	if lib, err := voices.Open(voices.DefaultDir()); err == nil {
		e.Voices = lib
	}

	// brain
	b, model, err := backend(ctx, cfg, log)
	if err != nil {
		l.Close()
		return nil, err
	}
	if b != nil {
		e.LLM, e.LLMModel = b, model
	} else {
		l.Notes = append(l.Notes, "chat: offline skills (no local LLM server found; set llm.url)")
	}

	// voice activity for realtime sessions: Silero when its model is installed
	if p := vad.DefaultModel(); fileExists(p) && gpu.Init() == nil {
		newVAD, closeVAD, err := SileroVADs(p, runtime.GOMAXPROCS(0))
		if err != nil {
			return nil, fmt.Errorf("voice activity detection: %w", err)
		}
		e.NewVAD = newVAD
		l.closers = append(l.closers, closeVAD)
	} else {
		l.Notes = append(l.Notes, "realtime: energy voice activity detector (Silero VAD model not installed)")
	}
	return l, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// findASR resolves asr.model: a directory, a model id, or (empty) the best installed model.
func findASR(spec string, log *slog.Logger) (dir, id string, err error) {
	mgr, err := assets.NewManager(nil, assets.Options{Log: log})
	if err != nil {
		return "", "", err
	}
	dir, id, err = mgr.Resolve(context.Background(), assets.KindASR, spec)
	if errors.Is(err, assets.ErrNotInstalled) {
		return "", "", fmt.Errorf("no speech recognition model is installed (`parley models pull sensevoice-small-int8`)")
	}
	return dir, id, err
}

// backend opens the configured LLM server. With llm.backend auto and no llm.url it looks for
// a local server (Ollama, llama.cpp's server, LM Studio) as the assistant does, so `parley
// --serve` next to a running Ollama chats with it; nil means the offline skills.
func backend(ctx context.Context, cfg *config.Config, log *slog.Logger) (llm.Backend, string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	kind := cfg.LLM.Backend
	switch kind {
	case "skills":
		return nil, "", nil
	case "ollama":
		c, err := ollama.New(ollama.Config{URL: cfg.LLM.URL, Logger: log})
		if err != nil {
			return nil, "", fmt.Errorf("llm: %w", err)
		}
		return c, cfg.LLM.Model, nil
	case "openai":
		if cfg.LLM.URL == "" {
			return nil, "", fmt.Errorf("%w: llm.backend openai needs llm.url", ErrConfig)
		}
	default: // auto
		if cfg.LLM.URL == "" {
			ch, err := discover.Select(ctx, discover.Options{Kind: discover.KindAuto, Model: cfg.LLM.Model, APIKey: cfg.LLM.APIKey, Logger: log})
			if err != nil || ch.Backend == nil {
				return nil, "", nil
			}
			log.Info("llm: using a local server", "server", ch.Name, "model", ch.Model)
			return ch.Backend, ch.Model, nil
		}
	}
	c, err := openai.New(openai.Config{URL: cfg.LLM.URL, APIKey: cfg.LLM.APIKey, Logger: log})
	if err != nil {
		return nil, "", fmt.Errorf("llm: %w", err)
	}
	return c, cfg.LLM.Model, nil
}
