package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/audio/vad"
)

func init() {
	register(&command{
		name:  "vad",
		usage: "vad [flags] FILE…|-|--listen  print speech segments of audio files as JSON (or live events from the microphone)",
		run:   runVAD,
	})
}

type vadFileReport struct {
	File       string       `json:"file"`
	SampleRate int          `json:"sample_rate"`
	Channels   int          `json:"channels"`
	Duration   float64      `json:"duration_s"`
	Segments   []vadSegment `json:"segments"`
}

// vadSegment is a vad.Segment with sample positions at the file's own rate.
type vadSegment struct {
	Start      int64   `json:"start"` // first sample of speech (file rate)
	End        int64   `json:"end"`   // sample after the last
	StartSec   float64 `json:"start_s"`
	EndSec     float64 `json:"end_s"`
	AudioStart float64 `json:"audio_start_s"` // with pre-roll
	AudioEnd   float64 `json:"audio_end_s"`   // with hang-over
	Forced     bool    `json:"forced,omitempty"`
}

func runVAD(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "vad", "")
	var cfg vad.Config
	var thr, neg float64
	model := fs.String("model", "", "Silero VAD v5 model file (default: the models directory's silero-vad-v5)")
	fs.Float64Var(&thr, "threshold", 0.5, "speech probability that starts speech")
	fs.Float64Var(&neg, "neg-threshold", 0, "probability below which speech may end (default threshold-0.15)")
	fs.DurationVar(&cfg.MinSpeech, "min-speech", 250*time.Millisecond, "ignore speech shorter than this")
	fs.DurationVar(&cfg.MinSilence, "min-silence", 400*time.Millisecond, "silence that ends an utterance")
	fs.DurationVar(&cfg.LookBack, "look-back", 500*time.Millisecond, "how far a start may move back over the rising probability before it (negative: one window)")
	var onset float64
	fs.Float64Var(&onset, "onset-threshold", 0.1, "probability of the windows a start moves back over")
	fs.DurationVar(&cfg.PreRoll, "pre-roll", 300*time.Millisecond, "audio kept before speech")
	fs.DurationVar(&cfg.HangOver, "hang-over", 150*time.Millisecond, "audio kept after speech")
	fs.DurationVar(&cfg.MaxSpeech, "max-speech", 30*time.Second, "cut utterances at this length")
	listen := fs.Bool("listen", false, "listen on the input device and print events as JSON lines")
	dev := fs.String("device", "", "input device for --listen (name or index; default from config)")
	if err := fs.parse(args); err != nil {
		return err
	}
	cfg.Threshold, cfg.NegThresh, cfg.OnsetThresh = float32(thr), float32(neg), float32(onset)
	if *listen {
		if fs.NArg() != 0 {
			return fmt.Errorf("%w: --listen takes no file", errUsage)
		}
		if *dev == "" {
			*dev = env.Config.Audio.Input
		}
		return vadListen(ctx, env, *model, cfg, *dev)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: parley vad [flags] FILE…|- (or --listen)", errUsage)
	}
	d, err := env.factory().VAD(*model, cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	var reports []vadFileReport
	for _, name := range fs.Args() {
		rep, err := vadFile(ctx, env, d, name)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
	}
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	if len(reports) == 1 {
		return enc.Encode(reports[0])
	}
	return enc.Encode(reports)
}

func vadFile(ctx context.Context, env *cliEnv, d *vad.Detector, name string) (vadFileReport, error) {
	wr, done, err := openAudio(ctx, env, name)
	if err != nil {
		return vadFileReport{}, fmt.Errorf("%s: %w", name, err)
	}
	defer done()
	counted := &countingSource{Source: wr}
	segs, err := d.Segments(ctx, counted)
	if err != nil {
		return vadFileReport{}, fmt.Errorf("%s: %w", name, err)
	}
	f := wr.Format()
	out := make([]vadSegment, len(segs))
	for i, s := range segs {
		out[i] = vadSegment{Start: int64(s.StartSec*float64(f.SampleRate) + 0.5), End: int64(s.EndSec*float64(f.SampleRate) + 0.5),
			StartSec: s.StartSec, EndSec: s.EndSec, AudioStart: s.AudioStart, AudioEnd: s.AudioEnd, Forced: s.Forced}
	}
	return vadFileReport{File: name, SampleRate: f.SampleRate, Channels: f.Channels,
		Duration: f.Duration(int(counted.n)).Seconds(), Segments: out}, nil
}

// countingSource counts the samples that pass through.
type countingSource struct {
	audio.Source
	n int64
}

func (c *countingSource) Read(ctx context.Context, p []float32) (int, error) {
	n, err := c.Source.Read(ctx, p)
	c.n += int64(n)
	return n, err
}

type vadLiveEvent struct {
	Event   string  `json:"event"`
	StartS  float64 `json:"start_s"`
	EndS    float64 `json:"end_s,omitempty"`
	Seconds float64 `json:"duration_s,omitempty"`
	Forced  bool    `json:"forced,omitempty"`
}

func vadListen(ctx context.Context, env *cliEnv, model string, cfg vad.Config, dev string) error {
	d, err := env.factory().VAD(model, cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	h, err := device.Open(env.Log)
	if err != nil {
		return err
	}
	defer h.Close()
	capt, err := h.OpenCapture(device.CaptureConfig{StreamConfig: device.StreamConfig{Device: dev}, Format: d.Format()})
	if err != nil {
		return err
	}
	defer capt.Close()
	fmt.Fprintf(env.Stderr, "listening on %q (%v → %v); Ctrl-C to stop\n", capt.Device().Name, capt.DeviceFormat(), capt.Format())
	enc := json.NewEncoder(env.Stdout)
	buf := make([]float32, vad.Window(d.Format().SampleRate))
	r := float64(d.Format().SampleRate)
	for {
		n, err := capt.Read(ctx, buf)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		if err != nil {
			return err
		}
		evs, err := d.Accept(ctx, buf[:n])
		if err != nil {
			return err
		}
		for _, e := range evs {
			le := vadLiveEvent{Event: e.Type.String(), StartS: float64(e.Start) / r}
			if e.Type == vad.SpeechEnd {
				le.EndS, le.Seconds, le.Forced = float64(e.End)/r, float64(e.End-e.Start)/r, e.Forced
			}
			if err := enc.Encode(le); err != nil {
				return err
			}
		}
	}
}
