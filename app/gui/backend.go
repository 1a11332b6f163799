// Package gui is Parley's desktop app (Fyne): the conversation with streaming bubbles,
// the microphone and its modes, the voice panel, models and devices, settings, history and
// desktop integration; the fine-tune wizard is app/gui/wizard, which this window hosts. It and
// its sub-packages are the only ones besides main that import Fyne.
//
// The UI depends on the assistant core and the other packages through the small interfaces
// in this file, so widget tests drive it with a scripted event stream (fyne.io/fyne/v2/test)
// and Run wires the real engines (app/wire, assets, voices, store, audio/device, gpu).
package gui

import (
	"context"
	"errors"
	"io"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"
)

// ErrUnavailable is returned by a service the running build or machine does not have.
var ErrUnavailable = errors.New("gui: not available")

// Assistant is what the conversation view needs from the assistant core; *app.Assistant
// implements it.
type Assistant interface {
	Subscribe(buf int) (<-chan app.Event, func())
	SubmitText(text string) (int64, error)
	StartListening() error
	StopListening() error
	Cancel() error
}

// Models installs and checks the registry's models (assets.Manager behind an adapter).
type Models interface {
	List(ctx context.Context) ([]assets.ModelStatus, error)
	// Pull downloads (or resumes) a model, reporting progress; it stops when ctx ends and
	// leaves the partial download for a later resume.
	Pull(ctx context.Context, id string, progress func(assets.Event)) error
	Verify(ctx context.Context, id string) (assets.ModelStatus, error)
	Remove(ctx context.Context, id string) error
}

// Voices is the voice library and an audition of a request.
type Voices interface {
	List() ([]*voices.Voice, error)
	Save(v *voices.Voice) error
	// Engines names the speech engines there are (tts/engines), for the engine picker.
	Engines() []string
	// Capabilities of an engine ("" = the configured engine): its voices and how it
	// honours each control. The voice panel is built from it.
	Capabilities(engine string) (tts.Capabilities, error)
	// Synthesize renders a request; req.Voice may name a library voice.
	Synthesize(ctx context.Context, engine string, req tts.Request) (*audio.Buffer, error)
	// Play plays audio and returns when it has played or ctx ends.
	Play(ctx context.Context, b *audio.Buffer) error
}

// History is the conversation store.
type History interface {
	Conversations(ctx context.Context, limit int) ([]store.Conversation, error)
	Search(ctx context.Context, query string, limit int) ([]store.Hit, error)
	Turns(ctx context.Context, conversation int64) ([]store.Turn, error)
	Export(ctx context.Context, w io.Writer, conversation int64, f store.Format) error
	Delete(ctx context.Context, conversation int64) error
}

// Device is one audio device as the settings list it.
type Device struct {
	Name    string
	Input   bool
	Output  bool
	Default bool
}

// Devices lists the audio devices and runs the record-and-play test.
type Devices interface {
	List() ([]Device, error)
	// Test records d of audio from in, reporting levels (dBFS), then plays it back on out.
	Test(ctx context.Context, in, out string, level func(db float64)) error
}

// LLMServer is a local LLM server found by discovery.
type LLMServer struct {
	Name, Kind, URL string
	Models          []string
	Err             string
}

// Services are everything the UI reaches beyond the assistant. Any field may be nil: the
// panel that needs it then says the service is unavailable.
type Services struct {
	Models  Models
	Voices  Voices
	History History
	Devices Devices
	GPUs    func() (gpu.GPUReport, error)
	// Discover probes for local LLM servers.
	Discover func(ctx context.Context) []LLMServer
	// Config is the configuration the app runs with; SaveConfig writes it (app/config's Save)
	// and applies it (rebuilding the assistant).
	Config     *config.Config
	SaveConfig func(cfg *config.Config) error
	// Reload rebuilds the assistant with the configuration it runs with, so that a model just
	// installed (the real recogniser after the demo, Silero VAD) is used without a restart;
	// Attach delivers the new one. nil: nothing to rebuild.
	Reload func()
	// SetMode rebuilds the assistant in another listening mode; Attach delivers the new one.
	SetMode func(m app.Mode) error
	// NewConversation makes the assistant forget and start a new stored conversation.
	NewConversation func() error
	// TurnAudio returns the kept audio files of the running assistant's turn (store.save_audio;
	// "" = none): bubbles offer replay of them.
	TurnAudio func(turn int64) (user, parley string)
	// LogDir holds the app's log files (Settings → Open log folder).
	LogDir string
	// Clone backs the fine-tune wizard (app/gui/wizard): datasets, slicing, labelling,
	// zero-shot clones, and the microphone and speaker it records and plays with.
	Clone Cloning
	// Training runs the wizard's fine-tune jobs (steps 5–7); nil where this build has none.
	Training Training
	// Diagnostics reports the runtime, devices and models as JSON (Settings → Copy
	// diagnostics: what a bug report needs).
	Diagnostics func(ctx context.Context) ([]byte, error)
	// SetUpGPU fetches ONNX Runtime's CUDA provider and checks what it needs (Settings → Set
	// up GPU; doctor --gpu): the report, and why the GPU cannot run yet. nil: not offered.
	SetUpGPU func(ctx context.Context, progress func(what string, done, total int64)) (string, error)
	// Prefs keeps small UI choices across launches (a banner dismissed stays dismissed);
	// nil: they last until the app quits.
	Prefs Prefs
}

// Prefs is a small key-value store of UI choices.
type Prefs interface {
	Pref(key string) (string, bool)
	SetPref(key, value string) error
}
