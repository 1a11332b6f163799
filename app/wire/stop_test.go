package wire

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory/roles"
	"github.com/parley-voice/parley/llm/skills"
)

// TestStopReachesTheLoop: the skills' stop intent comes out of the brain adapters as
// app.ErrStopSpeaking (so the loop stops), other requests answer normally, and the text face
// shows the stop without a spoken reply.
func TestStopReachesTheLoop(t *testing.T) {
	cfg := config.Default()
	cfg.LLM.Backend = "skills"
	a, err := Build(context.Background(), cfg, Options{NoAudio: true, NoHistory: true, NoDiscovery: true,
		StorePath: filepath.Join(t.TempDir(), "x.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sk, err := skills.New(skills.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		name string
		b    app.Brain
	}{{"brain", roles.Brain{B: a.Brain, Skills: sk}}, {"skills", roles.SkillsBrain{E: sk}}} {
		for _, tc := range []struct {
			q    string
			stop bool
		}{{"stop", true}, {"be quiet", true}, {"stop talking", true}, {"别说了", true}, {"what is 6 times 7", false}} {
			var said strings.Builder
			err := b.b.Answer(context.Background(), app.Transcript{Text: tc.q}, nil, func(d string) error { said.WriteString(d); return nil })
			if got := errors.Is(err, app.ErrStopSpeaking); got != tc.stop {
				t.Errorf("%s: %q: err %v, want stop=%v", b.name, tc.q, err, tc.stop)
			}
			if m, ok := b.b.(app.StopMatcher); !ok || m.IsStop(tc.q) != tc.stop {
				t.Errorf("%s: IsStop(%q) wrong or not a StopMatcher (%v), want %v", b.name, tc.q, ok, tc.stop)
			}
			if tc.stop && said.Len() > 0 {
				t.Errorf("%s: %q answered %q; want silence", b.name, tc.q, said.String())
			}
			if !tc.stop && (err != nil || !strings.Contains(said.String(), "42")) {
				t.Errorf("%s: %q: %q, %v", b.name, tc.q, said.String(), err)
			}
		}
	}
	var out bytes.Buffer
	if err := ChatVoice(context.Background(), a, strings.NewReader("be quiet\nwhat is 6 times 7\n"), &out, false); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"you: be quiet\n  (stopped)\n", "you: what is 6 times 7", "42"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "error") {
		t.Errorf("stop reported as an error:\n%s", got)
	}
}
