package gui

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"
)

// Cloning is what the fine-tune wizard needs beyond the datasets themselves (voices/clone):
// app/tune's roles for preparing a dataset and making zero-shot clones, and the microphone
// and speaker of the guided recording and the proofread table. The same Go APIs back the
// `parley finetune` commands.
type Cloning interface {
	tune.Preparer
	tune.Cloner
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
