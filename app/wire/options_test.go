package wire

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
)

// TestLoopOptionsFromConfig: the echo keys reach the loop's options and audio.latency_ms the
// device streams.
func TestLoopOptionsFromConfig(t *testing.T) {
	for _, tc := range []struct {
		name     string
		residual float64
		delayMs  int
		wantRes  float64
		wantDel  time.Duration
	}{
		{"defaults", 0.35, 600, 0.35, 600 * time.Millisecond},
		{"rejection off", -1, 600, -1, 600 * time.Millisecond},
		{"custom", 0.2, 1500, 0.2, 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.LLM.Backend = "skills"
			cfg.Assistant.EchoResidual, cfg.Assistant.EchoMaxDelayMs = tc.residual, tc.delayMs
			var got app.Options
			a, err := Build(context.Background(), cfg, Options{NoAudio: true, NoHistory: true, NoDiscovery: true,
				StorePath: filepath.Join(t.TempDir(), "x.db"), Loop: func(o *app.Options) { got = *o }})
			if err != nil {
				t.Fatal(err)
			}
			a.Close()
			if got.EchoResidual != tc.wantRes || got.EchoMaxDelay != tc.wantDel {
				t.Errorf("loop options: EchoResidual %g, EchoMaxDelay %v; want %g, %v", got.EchoResidual, got.EchoMaxDelay, tc.wantRes, tc.wantDel)
			}
		})
	}
	cfg := config.Default()
	if d := deviceLatency(cfg); d != 100*time.Millisecond {
		t.Errorf("default device latency %v, want 100ms", d)
	}
	cfg.Audio.LatencyMs = 40
	if d := deviceLatency(cfg); d != 40*time.Millisecond {
		t.Errorf("audio.latency_ms 40: device latency %v", d)
	}
}
