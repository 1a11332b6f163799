// Package factory builds every engine from the configuration: the speech recogniser, the
// language model and the offline skills, the voice, the voice activity and wake word
// detectors, the speaker encoder and the history store. Each constructor applies runtime.*
// (execution provider, threads, ONNX Runtime library), so the assistant (app/wire), the
// server (app/serve), the desktop app (app/gui) and every command (app/cli) open engines
// alike, and a setting reaches all of them or none.
package factory

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/audio/wake"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/llm/tokenizer"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/chattts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/clone"
	"github.com/parley-voice/parley/voices/speaker"
)

// RealASR is the recogniser a demo-grade or missing one points the user to.
const RealASR = "sensevoice-small-int8"

// ErrNoASR means no speech recognition model is installed. It wraps assets.ErrNotInstalled.
var ErrNoASR error = notInstalled("no speech recognition model is installed; run `parley models pull " + RealASR + "`")

// notInstalled is a sentinel that is also assets.ErrNotInstalled, and says only itself.
type notInstalled string

func (e notInstalled) Error() string { return string(e) }
func (notInstalled) Unwrap() error   { return assets.ErrNotInstalled }

// Factory opens engines from one configuration. Each face builds one where its
// configuration and logger are set up (cli.run for a command, gui.Run for the desktop app)
// and passes it down: wire.BuildFrom and serve.LoadFrom are two recipes over it, the
// fine-tune services (app/tune) open their models through it. A part that runs with a
// configuration of its own (a command's flags, the desktop app's saved settings) derives a
// factory for it (With).
type Factory struct {
	cfg *config.Config
	log *slog.Logger
}

// New returns the factory of cfg (config.Default() when nil). log receives the engines'
// logs; nil discards them. The configured ONNX Runtime library (runtime.ort_library) is
// handed to package gpu here, before any engine loads it.
func New(cfg *config.Config, log *slog.Logger) *Factory {
	if cfg == nil {
		cfg = config.Default()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if lib := ORTLibrary(cfg); lib != "" {
		gpu.UseLibrary(lib)
	}
	return &Factory{cfg: cfg, log: log}
}

// ORTLibrary is the ONNX Runtime library to load: runtime.ort_library, else the CUDA runtime
// that `parley doctor --gpu` installed (assets.RuntimeLibrary), else "" (package gpu finds the
// set-up's).
func ORTLibrary(cfg *config.Config) string {
	if cfg.Runtime.Library != "" {
		return cfg.Runtime.Library
	}
	// every command and factory asks: without the runtimes' folder (the registry keeps
	// kind-runtime entries under runtime/) there is nothing to find, and the registry is not
	// parsed
	if _, err := os.Stat(filepath.Join(assets.ModelsDir(), "runtime")); err != nil {
		return ""
	}
	reg, err := assets.LoadRegistry(assets.OverridePath())
	if err != nil {
		return ""
	}
	return assets.RuntimeLibrary(reg, assets.ModelsDir())
}

// With is the factory of another configuration with f's logger: f itself when cfg is f's
// configuration, else a new one, which hands cfg's ONNX Runtime library to package gpu as
// New does.
func (f *Factory) With(cfg *config.Config) *Factory {
	if cfg == f.cfg {
		return f
	}
	return New(cfg, f.log)
}

// Config is the configuration the factory builds from.
func (f *Factory) Config() *config.Config { return f.cfg }

// Log is the logger the engines log to (never nil), for the services built over the factory.
func (f *Factory) Log() *slog.Logger { return f.log }

// GPU is the session options of runtime.*: the execution provider (a GPU one falls back to
// the CPU with a logged reason) and the intra- and inter-op threads. Every model-sized
// engine runs with them.
func (f *Factory) GPU() gpu.Options {
	r := f.cfg.Runtime
	return gpu.Options{Provider: r.Provider, IntraOpThreads: r.IntraOpThreads, InterOpThreads: r.InterOpThreads}
}

// detectorGPU is the session options of the small streaming detectors (Silero VAD,
// openWakeWord): one CPU thread whatever runtime.* says, as a 2 MB model run every 32 or
// 80 ms costs less on the CPU than a round trip to a GPU, and more threads only add
// hand-offs. They do load the configured ONNX Runtime library.
func detectorGPU() gpu.Options { return gpu.Options{Provider: gpu.ProviderCPU, IntraOpThreads: 1} }

// Model is an installed model a constructor resolved.
type Model struct {
	ID   string // the registry id, or a directory's name
	Path string // the directory (or file) loaded
	Demo bool   // demo-grade: fine for trying Parley out, not for real use
}

// resolve finds a model of kind: spec is a directory or file, a registry id, or "" for the
// best installed one.
func (f *Factory) resolve(ctx context.Context, kind, spec string) (Model, error) {
	mgr, err := assets.NewManager(nil, assets.Options{Log: f.log})
	if err != nil {
		return Model{}, err
	}
	path, id, err := mgr.Resolve(ctx, kind, spec)
	if err != nil {
		return Model{ID: spec}, err
	}
	m := Model{ID: id, Path: path}
	if r, err := mgr.Registry().Lookup(id); err == nil {
		m.Demo = r.Demo
	}
	return m, nil
}

// ASRConfig is the recogniser configuration of the asr section (language, ITN); callers
// change what their own flags or requests say before passing it to Recognizer.
func (f *Factory) ASRConfig() asr.Config {
	return asr.Config{Options: asr.Options{Language: f.cfg.ASR.Language, ITN: f.cfg.ASR.ITN}}
}

// FindASR resolves a recogniser model: spec is a directory, a registry id, or "" for
// asr.model (and when that is empty too, the best installed model). Nothing installed is
// ErrNoASR (which wraps assets.ErrNotInstalled).
func (f *Factory) FindASR(ctx context.Context, spec string) (Model, error) {
	if spec == "" {
		spec = f.cfg.ASR.Model
	}
	m, err := f.resolve(ctx, assets.KindASR, spec)
	if errors.Is(err, assets.ErrNotInstalled) && spec == "" {
		return m, ErrNoASR // nothing installed at all
	}
	return m, err
}

// Recognizer opens the speech recogniser spec names (see FindASR) with c's options; the
// execution provider, threads and log are the factory's, whatever c says.
func (f *Factory) Recognizer(ctx context.Context, spec string, c asr.Config) (*asr.Recognizer, Model, error) {
	m, err := f.FindASR(ctx, spec)
	if err != nil {
		return nil, m, err
	}
	c.GPU, c.Log = f.GPU(), f.log
	if c.LM == "" {
		c.LM = f.cfg.ASR.LM
	}
	if c.Words == nil {
		c.Words = f.cfg.ASR.Words
	}
	r, err := asr.New(m.Path, c)
	return r, m, err
}

// ASRNote is the note about a recogniser that opened (a demo-grade model) or did not (err):
// nil when there is nothing to say.
func ASRNote(m Model, err error) *app.Note {
	switch {
	case errors.Is(err, ErrNoASR):
		return &app.Note{Part: app.PartASR, Kind: app.NoteMissing, Model: RealASR, Err: err,
			Message: "speech recognition unavailable: " + err.Error()}
	case errors.Is(err, assets.ErrNotInstalled):
		return &app.Note{Part: app.PartASR, Kind: app.NoteMissing, Model: m.ID, Err: err,
			Message: "speech recognition unavailable: " + err.Error()}
	case err != nil:
		return &app.Note{Part: app.PartASR, Kind: app.NoteUnavailable, Err: err,
			Message: "speech recognition unavailable: " + err.Error()}
	case m.Demo:
		return &app.Note{Part: app.PartASR, Kind: app.NoteDemo, Model: RealASR,
			Message: "speech recognition: demo-grade model (" + m.ID + "); `parley models pull " + RealASR + "` for the real one"}
	}
	return nil
}

// Voice chooses a TTS engine; empty fields take the tts section's.
type Voice struct {
	Engine string // auto | espeak | kokoro | chattts; "" = tts.engine
	Model  string // model directory of an ONNX engine; "" = the installed one
	Preset string // the engine's default voice (not a library voice); "" = none
	// Precision is ChatTTS's GPT precision: auto | fp32 | int8; "" = tts.precision
	Precision string
}

// Voice opens a TTS engine with runtime.*'s session options.
func (f *Factory) Voice(v Voice) (tts.Engine, error) {
	if v.Engine == "" {
		v.Engine = f.cfg.TTS.Engine
	}
	v.Engine = EngineName(v.Engine) // the engine named is the engine opened, empty or not
	if v.Precision == "" {
		v.Precision = f.cfg.TTS.Precision
	}
	return engines.Open(engines.Options{Engine: v.Engine, ModelDir: v.Model, Voice: v.Preset, GPU: f.GPU(),
		Precision: v.Precision, Log: f.log})
}

// EngineName is the engine a tts.engine value means: "auto" resolved, and an empty value is
// "auto" (the setting's default), any case (engines.Resolve).
func EngineName(engine string) string {
	if strings.TrimSpace(engine) == "" {
		engine = "auto"
	}
	return engines.Resolve(engine, "")
}

// Voices is the user's voice library, or nil when it cannot be opened (the engines' own
// voices still work); the error says why.
func (f *Factory) Voices() (*voices.Library, error) {
	lib, err := voices.Open(voices.DefaultDir())
	if err != nil {
		return nil, err
	}
	return lib, nil
}

// LibraryVoice is the saved voice name names, or nil when name is not a library voice (an
// engine preset, or empty). A library that cannot be read is no library voice.
func (f *Factory) LibraryVoice(name string) (*voices.Voice, error) {
	if name == "" || voices.ValidName(name) != nil {
		return nil, nil
	}
	lib, err := f.Voices()
	if err != nil {
		return nil, nil
	}
	v, err := lib.Get(name)
	if errors.Is(err, voices.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

// VAD opens a Silero voice activity detector (model "" = the installed silero-vad-v5) on
// one CPU thread (see detectorGPU).
func (f *Factory) VAD(model string, c vad.Config) (*vad.Detector, error) {
	c.GPU = detectorGPU()
	return vad.New(model, c)
}

// VADPool opens a pool of at most size Silero models for many detectors at once (the
// server's realtime sessions).
func (f *Factory) VADPool(size int) (*vad.ModelPool, error) {
	return vad.NewPool(vad.DefaultModel(), 16000, detectorGPU(), size)
}

// Wake opens the openWakeWord detector in dir ("" = the installed openwakeword) for c.Models
// (none = assistant.wake_word) on one CPU thread.
func (f *Factory) Wake(dir string, c wake.Config) (*wake.Detector, error) {
	if len(c.Models) == 0 && f.cfg.Assistant.WakeWord != "" {
		c.Models = []string{f.cfg.Assistant.WakeWord}
	}
	c.GPU = detectorGPU()
	return wake.New(dir, c)
}

// SpeakerEncoder opens the speaker encoder spec names (a directory, a registry id, or ""
// for the best installed: CAM++ when there, else Parley's demo encoder).
func (f *Factory) SpeakerEncoder(ctx context.Context, spec string) (*speaker.Encoder, Model, error) {
	m, err := f.resolve(ctx, assets.KindSpeaker, spec)
	if err != nil {
		return nil, m, err
	}
	e, err := speaker.New(m.Path, speaker.Config{GPU: f.GPU()})
	return e, m, err
}

// StorePath is the history database: path when given, else store.path, else parley.db in
// the data directory.
func (f *Factory) StorePath(path string) string {
	switch {
	case path != "":
		return path
	case f.cfg.Store.Path != "":
		return f.cfg.Store.Path
	}
	return filepath.Join(assets.DataDir(), "parley.db")
}

// Store opens the history database (see StorePath).
func (f *Factory) Store(path string) (*store.Store, error) { return store.Open(f.StorePath(path)) }

// CloneTranscriber adapts a recogniser to the label step of a fine-tune dataset.
func CloneTranscriber(r *asr.Recognizer) clone.Transcriber { return cloneEar{r} }

type cloneEar struct{ r *asr.Recognizer }

func (e cloneEar) Transcribe(ctx context.Context, pcm []float32) (clone.Heard, error) {
	res, err := e.r.Transcribe(ctx, pcm)
	if err != nil {
		return clone.Heard{}, err
	}
	return clone.Heard{Text: res.Text, Lang: res.Lang, Event: res.Event}, nil
}

// Heard is what a recogniser's result means to the faces (app.Transcriber): the text and
// its tags, each piece handed to o.OnSegment first when the utterance was cut into several.
func Heard(res *asr.Result, o app.TranscribeOptions) (app.Transcript, error) {
	if o.OnSegment != nil && len(res.Segments) > 1 {
		for _, seg := range res.Segments {
			if seg.Text == "" {
				continue
			}
			if err := o.OnSegment(seg.Text); err != nil {
				return app.Transcript{}, err
			}
		}
	}
	return app.Transcript{Text: res.Text, Lang: res.Lang, Emotion: res.Emotion, Event: res.Event}, nil
}

// TokenCounter counts tokens with the Qwen3 tokenizer set-up installs (the built-in model's,
// and the family local servers run most): the server's usage for upstreams that report none.
// The tokenizer (11 MB of JSON) is read on the first count, not at start-up; until it loads,
// or when it cannot, count is false and the caller estimates.
func (f *Factory) TokenCounter() func(text string) (n int, counted bool) {
	load := sync.OnceValue(func() *tokenizer.Tokenizer {
		mgr, err := assets.NewManager(nil, assets.Options{Log: f.log})
		if err == nil {
			var dir string
			if dir, err = mgr.Path(context.Background(), "qwen3-tokenizer"); err == nil {
				var tok *tokenizer.Tokenizer
				if tok, err = tokenizer.Load(filepath.Join(dir, "tokenizer.json")); err == nil {
					return tok
				}
			}
		}
		f.log.Info("usage an upstream does not report is estimated from characters", "reason", err)
		return nil
	})
	return func(text string) (int, bool) {
		tok := load()
		if tok == nil {
			return 0, false
		}
		return len(tok.Encode(text)), true
	}
}

// ChatTTS opens the ChatTTS export in dir with runtime.*'s session options (the voice
// clone, the wizard and `parley finetune` open a given export, not the configured voice).
func (f *Factory) ChatTTS(dir string) (*chattts.Engine, error) {
	return chattts.New(dir, chattts.Config{GPU: f.GPU(), Precision: f.cfg.TTS.Precision, Log: f.log})
}

// SampleEncoder opens the DVAE encoder of the ChatTTS export in dir, which turns a
// recording into a clone voice's prompt codes.
func (f *Factory) SampleEncoder(dir string) (*chattts.SampleEncoder, error) {
	return chattts.NewSampleEncoder(dir, f.GPU())
}
