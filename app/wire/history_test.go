package wire

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/store"
)

func TestHistoryAdapter(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := &History{S: s, Voice: "en-us"}
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Millisecond)
	lat := app.Latency{SpeechEnd: t0, Transcript: t0.Add(100 * time.Millisecond), FirstAudio: t0.Add(300 * time.Millisecond)}
	err = h.AddTurns(ctx,
		app.TurnRecord{Turn: 1, Role: app.RoleUser, Text: "tell me a story", Transcript: app.Transcript{Text: "tell me a story", Lang: "en", Emotion: "HAPPY", Event: "Speech"}, Start: t0.Add(-time.Second), End: t0},
		app.TurnRecord{Turn: 1, Role: app.RoleAssistant, Text: "Once upon", Interrupted: true, Latency: lat, Start: lat.FirstAudio, End: t0.Add(time.Second)},
	)
	if err != nil {
		t.Fatal(err)
	}
	// an exchange that failed before anything was heard keeps its error
	if err := h.AddTurns(ctx, app.TurnRecord{Turn: 2, Role: app.RoleUser}, app.TurnRecord{Turn: 2, Role: app.RoleAssistant, Err: "transcribe: model missing"}); err != nil {
		t.Fatal(err)
	}
	turns, err := s.Turns(ctx, h.Conversation())
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 3 {
		t.Fatalf("%d turns, want 3: %+v", len(turns), turns)
	}
	u, a, e := turns[0], turns[1], turns[2]
	if u.Role != store.RoleUser || u.Text != "tell me a story" || u.Language != "en" || u.Emotion != "HAPPY" || u.Event != "Speech" {
		t.Errorf("user turn %+v", u)
	}
	if a.Role != store.RoleAssistant || a.Text != "Once upon" || !a.Interrupted || a.Voice != "en-us" || !a.Latency.FirstAudio.Equal(lat.FirstAudio) {
		t.Errorf("assistant turn %+v", a)
	}
	if e.Error != "transcribe: model missing" {
		t.Errorf("failed turn %+v", e)
	}
}
