package gui

import (
	"context"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"fmt"
	"github.com/parley-voice/parley/app"
	"log/slog"
	"time"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"

	"github.com/parley-voice/parley/app/gui/wizard"
)

// Cloning is the fine-tune wizard's (app/gui/wizard) preparation and zero-shot clone roles
// from app/tune, with the desktop's microphone and speaker that the window lends it (Host's
// Takes): one service, as Run makes it. The wizard's pages each see only the role they use.
type Cloning interface {
	tune.Preparer
	tune.Cloner
	wizard.Takes
}

// Training is the wizard's steps 5–7: app/tune's roles over the fine-tune jobs of a dataset
// and a goal (tune.TrainingService). Jobs run in this process, one at a time; a job a closed
// Parley left behind is found again (interrupted) and resumes from its last checkpoint.
type Training interface {
	tune.Readiness
	tune.Jobs
	tune.Evaluator
	tune.Installer
}

// wizardRoles splits the services into the roles the wizard's pages take.
func wizardRoles(svc Services) wizard.Roles {
	var r wizard.Roles
	if svc.Clone != nil {
		r.Preparer, r.Cloner = svc.Clone, svc.Clone
	}
	if svc.Training != nil {
		r.Readiness, r.Jobs, r.Evaluator, r.Installer = svc.Training, svc.Training, svc.Training, svc.Training
	}
	return r
}

// wizardHost is the main window as the wizard's Host.
type wizardHost struct{ u *UI }

func (h wizardHost) Window() fyne.Window           { return h.u.win }
func (h wizardHost) Preferences() fyne.Preferences { return h.u.app.Preferences() }
func (h wizardHost) Do(fn func())                  { h.u.do(fn) }

// OnScreen: the Fine-tune tab is the one shown.
func (h wizardHost) OnScreen() bool {
	t := h.u.tabs
	return t != nil && t.Selected() != nil && t.Selected().Text == wizard.Tab
}

// HoldMic mutes a listening assistant (hands-free or wake word) while the wizard records;
// a muted or push-to-talk one is left alone.
func (h wizardHost) HoldMic() bool {
	if h.u.muted || h.u.mode == app.PushToTalk {
		return false
	}
	h.u.setMuted(true)
	return true
}

func (h wizardHost) ReleaseMic() { h.u.setMuted(false) }

// VoicesChanged lists a new voice in the voice panel.
func (h wizardHost) VoicesChanged() {
	if h.u.voice != nil {
		h.u.voice.refresh()
	}
}

func (h wizardHost) Config() (*config.Config, func(*config.Config) error) {
	return h.u.svc.Config, h.u.svc.SaveConfig
}

// Record and Play are the Clone service's (the desktop's devices, as Run makes it).
func (h wizardHost) Record(ctx context.Context, max time.Duration, level func(float64)) ([]float32, error) {
	if h.u.svc.Clone == nil {
		return nil, ErrUnavailable
	}
	return h.u.svc.Clone.Record(ctx, max, level)
}

func (h wizardHost) Play(ctx context.Context, pcm []float32) error {
	if h.u.svc.Clone == nil {
		return ErrUnavailable
	}
	return h.u.svc.Clone.Play(ctx, pcm)
}

// cloneService is Cloning: app/tune's service on the installed models, with the configured
// audio devices.
type cloneService struct {
	*tune.CloneService
	cfg *config.Config
	log *slog.Logger
}

// newCloneService is the service on the models fac opens, with its configuration's audio
// devices.
func newCloneService(fac *factory.Factory) *cloneService {
	return &cloneService{CloneService: tune.NewCloneService(fac), cfg: fac.Config(), log: fac.Log()}
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

// cloneClipButton is the voice panel's way into the wizard's Clone from a clip (nothing where
// cloning is unavailable).
func cloneClipButton(u *UI) fyne.CanvasObject {
	b := widget.NewButtonWithIcon("Clone from a clip…", theme.MediaRecordIcon(), func() { u.wizard.CloneFromClip() })
	if u.svc.Clone == nil {
		b.Hide()
	}
	return b
}
