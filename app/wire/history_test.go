package wire

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
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

// ask submits a typed turn and waits for its end.
func ask(t *testing.T, a *Assistant, q string) *app.Exchange {
	t.Helper()
	ev, unsub := a.Subscribe(64)
	defer unsub()
	id, err := a.SubmitText(q)
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e := <-ev:
			if e.Kind == app.EvError {
				t.Errorf("%q: %s", q, e.Err)
			}
			if e.Kind == app.EvTurnDone && e.Turn == id {
				return e.Exchange
			}
		case <-timeout:
			t.Fatalf("no answer to %q", q)
		}
	}
}

// TestResumeKeepsTheConversation: an assistant rebuilt with the last one's Resume (the
// desktop app after a mode or settings change) adds its turns to the same stored
// conversation and its brain remembers the earlier exchanges; NewConversation starts a new
// one; a conversation deleted while it goes on gets a new one instead of losing turns.
func TestResumeKeepsTheConversation(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	cfg := config.Default()
	cfg.LLM.Backend = "skills"
	build := func(r *Resume) *Assistant {
		a, err := Build(ctx, cfg, Options{NoAudio: true, NoDiscovery: true, Store: s, Resume: r})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := build(nil)
	ask(t, a, "what is two plus two")
	r := a.Resume()
	a.Close()
	if r.Conversation == 0 || len(r.Messages) != 2 {
		t.Fatalf("resume after one exchange: %+v", r)
	}
	b := build(&r)
	if got := b.Brain.History(); len(got) != 2 || got[0].Content != "what is two plus two" {
		t.Errorf("the rebuilt brain remembers %+v", got)
	}
	if ex := ask(t, b, "what is ten times three"); ex.Turn != 1 {
		t.Logf("the rebuilt assistant numbers its first turn %d", ex.Turn)
	}
	if b.History.Conversation() != r.Conversation {
		t.Errorf("the rebuilt assistant wrote to conversation %d, want %d", b.History.Conversation(), r.Conversation)
	}
	turns, err := s.Turns(ctx, r.Conversation)
	if err != nil || len(turns) != 4 {
		t.Fatalf("conversation %d holds %d turns (%v), want 4", r.Conversation, len(turns), err)
	}
	if convs, _ := s.Conversations(ctx, store.ListOptions{}); len(convs) != 1 {
		t.Errorf("%d stored conversations, want 1", len(convs))
	}

	b.NewConversation()
	if len(b.Brain.History()) != 0 {
		t.Error("the brain remembers after NewConversation")
	}
	ask(t, b, "what is one plus one")
	second := b.History.Conversation()
	if second == r.Conversation || second == 0 {
		t.Errorf("NewConversation went on in conversation %d", second)
	}

	if _, err := s.DeleteConversation(ctx, second); err != nil {
		t.Fatal(err)
	}
	ask(t, b, "what is three plus three")
	// (SQLite may hand the new conversation the deleted one's id)
	third := b.History.Conversation()
	turns, err = s.Turns(ctx, third)
	if err != nil || len(turns) != 2 || turns[0].Text != "what is three plus three" {
		t.Errorf("after the delete: %d turns (%v), want the 2 of the new exchange", len(turns), err)
	}
	b.Close()
}
