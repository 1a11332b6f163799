package wizard

import (
	"context"
	"time"

	"fyne.io/fyne/v2"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/tune"
)

// Host is what the wizard needs from the desktop app's main window (app/gui implements it):
// the window and its preferences, the UI goroutine, whether the wizard's tab is on screen,
// the assistant's microphone, the voice panel, the configuration, and the desktop's
// microphone and speaker. Its methods are called on the UI goroutine, except Do, Record
// and Play.
type Host interface {
	// Window is the main window: the parent of the wizard's dialogs, where files are
	// dropped and where its keyboard shortcuts are added (nil: none of those).
	Window() fyne.Window
	// Preferences keep the wizard's choices across launches (the open dataset, its goal and
	// prompt language).
	Preferences() fyne.Preferences
	// Do runs fn on the UI goroutine.
	Do(fn func())
	// OnScreen says whether the wizard's tab (Tab) is the one the window shows.
	OnScreen() bool
	// HoldMic stops the assistant listening while the wizard records (hands-free, or
	// waiting for the wake word, it would hear and answer the sentences read for the
	// wizard). It says whether it did: false when the assistant was not listening (muted,
	// or push-to-talk), so there is nothing to give back.
	HoldMic() bool
	// ReleaseMic lets the assistant listen again after a HoldMic that returned true.
	ReleaseMic()
	// VoicesChanged says the voice library has a new voice (the voice panel lists it).
	VoicesChanged()
	// Config is the configuration the app runs with and save, which writes and applies a
	// changed one; either may be nil (then Install offers no "Use it in Parley").
	Config() (cfg *config.Config, save func(*config.Config) error)
	Takes
}

// Takes are the desktop's microphone and speaker, as the wizard records and plays clips.
type Takes interface {
	// Record records from the microphone until ctx ends (that is how a take is stopped),
	// reporting levels in dBFS about twenty times a second, and returns the take as 16 kHz
	// mono. It gives up after max.
	Record(ctx context.Context, max time.Duration, level func(db float64)) ([]float32, error)
	// Play plays 16 kHz mono audio and returns when it ends or ctx ends.
	Play(ctx context.Context, pcm []float32) error
}

// Roles are app/tune's roles behind the wizard's pages (tune.CloneService and
// tune.TrainingService implement them; the same Go APIs back the `parley finetune`
// commands). Any may be nil: without a Preparer the wizard says it is not in this build;
// without the training roles steps 5–7 say so; without a Cloner there is no quick clone
// and no Clone from a clip.
type Roles struct {
	Preparer  tune.Preparer  // steps 1–3: the datasets' folder, decoding, slicing, labelling
	Cloner    tune.Cloner    // zero-shot clones: the quick clone of step 5, Clone from a clip
	Readiness tune.Readiness // step 5's checklist
	Jobs      tune.Jobs      // steps 5–7: the dataset's fine-tune jobs
	Evaluator tune.Evaluator // step 6
	Installer tune.Installer // step 7
}
