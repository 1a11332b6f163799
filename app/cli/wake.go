package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/audio/wake"
)

func init() {
	register(&command{
		name:  "wake",
		usage: "wake [--model NAME]… [FILE|-]  listen for wake words (or scan an audio file) and print detections as JSON lines",
		run:   runWake,
	})
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, strings.Split(v, ",")...); return nil }

func runWake(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "wake", "")
	var models multiFlag
	fs.Var(&models, "model", "wake model name or file (repeatable; default: assistant.wake_word)")
	var cfg wake.Config
	var thr float64
	dir := fs.String("dir", "", "openWakeWord model directory (default: the models directory's openwakeword)")
	fs.Float64Var(&thr, "threshold", 0.5, "score that counts as a detection")
	fs.IntVar(&cfg.Patience, "patience", 1, "consecutive 80 ms steps at or above the threshold")
	fs.DurationVar(&cfg.Refractory, "refractory", 2*time.Second, "quiet time after a detection")
	dev := fs.String("device", "", "input device (name or index; default from config)")
	list := fs.Bool("list", false, "list the wake models available and exit")
	scores := fs.Bool("scores", false, "with a file: also print every step's scores")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *list {
		names, err := wake.Available(*dir)
		if err != nil {
			return err
		}
		for _, n := range names {
			fmt.Fprintln(env.Stdout, n)
		}
		return nil
	}
	cfg.Models, cfg.Threshold = models, float32(thr) // none: assistant.wake_word
	if fs.NArg() > 1 {
		return fmt.Errorf("%w: parley wake [flags] [FILE|-]", errUsage)
	}
	d, err := env.factory().Wake(*dir, cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	enc := json.NewEncoder(env.Stdout)
	if fs.NArg() == 1 {
		return wakeFile(ctx, env, d, fs.Arg(0), *scores)
	}
	h, err := device.Open(env.Log)
	if err != nil {
		return err
	}
	defer h.Close()
	if *dev == "" {
		*dev = env.Config.Audio.Input
	}
	capt, err := h.OpenCapture(device.CaptureConfig{StreamConfig: device.StreamConfig{Device: *dev}, Format: audio.Mono16k})
	if err != nil {
		return err
	}
	defer capt.Close()
	fmt.Fprintf(env.Stderr, "listening for %s on %q; Ctrl-C to stop\n", strings.Join(d.Models(), ", "), capt.Device().Name)
	buf := make([]float32, wake.Chunk)
	for {
		n, err := capt.Read(ctx, buf)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		if err != nil {
			return err
		}
		dets, err := d.Accept(ctx, buf[:n])
		if err != nil {
			return err
		}
		for _, det := range dets {
			det.Sec = math.Round(det.Sec*1000) / 1000
			if err := enc.Encode(det); err != nil {
				return err
			}
		}
	}
}

func wakeFile(ctx context.Context, env *cliEnv, d *wake.Detector, name string, withScores bool) error {
	src, done, err := openAudio(ctx, env, name)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer done()
	dets, scores, err := d.Process(ctx, src)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	enc := json.NewEncoder(env.Stdout)
	for _, det := range dets {
		// Process adds one second of silence in front
		det.At -= wake.Rate
		det.Sec = math.Round((det.Sec-1)*1000) / 1000
		if err := enc.Encode(det); err != nil {
			return err
		}
	}
	if withScores {
		return enc.Encode(map[string]any{"step_s": float64(wake.Chunk) / wake.Rate, "lead_in_s": 1.0, "scores": scores})
	}
	return nil
}
