package cli

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/gpu/gputest"
)

// TestVoicesSeeds measures seed speakers of the tiny ChatTTS export: one JSON object per seed
// with its speaker vector (the one `voices show --speaker` would give a seed voice), the table
// with its count of whispering seeds, and usage errors for bad ranges and flags.
func TestVoicesSeeds(t *testing.T) {
	gputest.RequireORT(t)
	isolate(t)
	tiny, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "chattts", "tiny"))
	code, stdout, errs := runCLI(t, "voices", "seeds", "--from", "4", "--to", "6", "--model", tiny, "--json", "--speaker", "--text", "hello there")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines for 3 seeds: %q", len(lines), stdout)
	}
	var first []float32
	for i, l := range lines {
		var r struct {
			Seed     int64     `json:"seed"`
			F0       float64   `json:"f0_hz"`
			Voiced   *float64  `json:"voiced_share"`
			Whispers bool      `json:"whispers"`
			Speaker  []float32 `json:"speaker"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, l)
		}
		if r.Seed != int64(4+i) || r.Voiced == nil || *r.Voiced < 0 || *r.Voiced > 1 || r.F0 < 0 || len(r.Speaker) != 16 {
			t.Fatalf("line %d: %s", i, l)
		}
		if r.Whispers != (*r.Voiced < 0.15) {
			t.Fatalf("line %d: whispers %v at voiced share %.2f", i, r.Whispers, *r.Voiced)
		}
		if i == 0 {
			first = r.Speaker
		}
	}
	// the same seed, measured again, is the same speaker, and says no filter was in use
	code, again, errs := runCLI(t, "voices", "seeds", "--from", "4", "--to", "4", "--model", tiny, "--json", "--speaker", "--text", "hello there")
	var r struct {
		Speaker  []float32
		Filtered *bool
	}
	if err := json.Unmarshal([]byte(again), &r); code != 0 || err != nil || !slices.Equal(r.Speaker, first) || r.Filtered == nil || *r.Filtered {
		t.Fatalf("seed 4 again: exit %d %v %s %s", code, err, again, errs)
	}

	code, stdout, errs = runCLI(t, "voices", "seeds", "--to", "2", "--model", tiny, "--text", "hello there")
	if code != 0 || !strings.Contains(stdout, "SEED") || !strings.Contains(stdout, "of 2 seeds whisper") {
		t.Fatalf("table: exit %d: %s %s", code, stdout, errs)
	}

	// the tiny model suggests no seeds
	if code, _, errs := runCLI(t, "voices", "seeds", "--suggested", "--model", tiny); code != 1 || !strings.Contains(errs, "suggests no seeds") {
		t.Errorf("--suggested on a model without: exit %d, %s", code, errs)
	}

	for _, args := range [][]string{
		{"--from", "5", "--to", "1"},
		{"--from", "1", "--to", "200000"},
		{"--from", "0", "--to", "3"},
		{"--from", "-9223372036854775808", "--to", "9223372036854775807"},
		{"--suggested", "--from", "2"},
		{"--speaker"},
		{"extra"},
	} {
		if code, _, errs := runCLI(t, append([]string{"voices", "seeds", "--model", tiny}, args...)...); code != 2 || !strings.Contains(errs, "voices seeds") {
			t.Errorf("%v: exit %d, %s", args, code, errs)
		}
	}
}
