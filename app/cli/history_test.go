package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/store"
)

func seedHistory(t *testing.T, path string) {
	t.Helper()
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c, err := s.CreateConversation(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	err = s.AddTurns(ctx,
		&store.Turn{ConversationID: c.ID, Role: store.RoleUser, Text: "What's the weather tomorrow?", Language: "en", Emotion: "NEUTRAL",
			Start: ms(0), End: ms(1500), Latency: store.Latency{SpeechEnd: ms(1500), Transcript: ms(1620)}},
		&store.Turn{ConversationID: c.ID, Role: store.RoleAssistant, Text: "Sunny and warm", Interrupted: true,
			Start: ms(2000), End: ms(3000), Latency: store.Latency{SpeechEnd: ms(1500), Transcript: ms(1620), FirstToken: ms(1700), FirstSentence: ms(1800), FirstAudio: ms(2000)}},
		&store.Turn{ConversationID: c.ID, Role: store.RoleUser, Text: "明天天气怎么样", Language: "zh", Start: ms(5000), End: ms(6000)},
	)
	if err != nil {
		t.Fatal(err)
	}
}

func TestHistoryCLI(t *testing.T) {
	dir := isolate(t)
	db := filepath.Join(dir, "h.db")
	seedHistory(t, db)
	out := filepath.Join(dir, "out.srt")
	corrupt := filepath.Join(dir, "corrupt.db")
	os.WriteFile(corrupt, []byte(strings.Repeat("not sqlite ", 100)), 0o600)
	tests := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"history", "--db", db, "list"}, 0, "What's the weather tomorrow?", ""},
		{[]string{"history", "list", "--db", db, "--limit", "1"}, 0, "TURNS", ""},
		{[]string{"history", "--db", db, "show", "1"}, 0, "latency: transcript 120ms · first token 200ms · first sentence 300ms · first audio 500ms", ""},
		{[]string{"history", "--db", db, "show", "1"}, 0, "Parley (interrupted):", ""},
		{[]string{"history", "--db", db, "search", "weather"}, 0, "You: What's the [weather] tomorrow?", ""},
		{[]string{"history", "--db", db, "search", "天气"}, 0, "明天[天气]怎么样", ""},
		{[]string{"history", "--db", db, "search", "--relevance", "weather", "--limit", "1"}, 0, "[weather]", ""},
		{[]string{"history", "--db", db, "search", "snow"}, 0, `no turns match "snow"`, ""},
		{[]string{"history", "--db", db, "search", "!!!"}, 2, "", "search for words"},
		{[]string{"history", "--db", db, "search", `"unbalanced AND (`}, 0, "no turns match", ""},
		{[]string{"history", "--db", db, "export", "1", "--format", "srt"}, 0, "00:00:00,000 --> 00:00:01,500\nYou: What's the weather tomorrow?", ""},
		{[]string{"history", "--db", db, "export", "1"}, 0, "**Parley**", ""},
		{[]string{"history", "--db", db, "export", "1", "--format", "srt", "-o", out}, 0, "", ""},
		{[]string{"history", "--db", db, "export", "1", "--format", "docx"}, 2, "", "want md, json or srt"},
		{[]string{"history", "--db", db, "export", "7"}, 1, "", "conversation 7: not found"},
		{[]string{"history", "--db", db, "show", "abc"}, 2, "", `conversation ID "abc"`},
		{[]string{"history", "--db", db, "show"}, 2, "", "history show ID"},
		{[]string{"history", "--db", db, "list", "extra"}, 2, "", "takes no arguments"},
		{[]string{"history", "--db", db, "frobnicate"}, 2, "", "unknown history command"},
		{[]string{"history"}, 2, "", "usage"},
		{[]string{"history", "--db", corrupt, "list"}, 1, "", corrupt},
		{[]string{"history", "--db", filepath.Join(dir, "none.db"), "list"}, 0, "no history yet", ""},
		{[]string{"history", "--db", filepath.Join(dir, "none.db"), "show", "1"}, 1, "", "no history database"},
		{[]string{"history", "--db", db, "prune", "--days", "1"}, 0, "0 turns", ""},
		{[]string{"history", "--db", db, "prune", "--days", "-5"}, 2, "", "--days"},
		{[]string{"history", "--db", db, "list", "--bogus"}, 2, "", "-bogus"},
		{[]string{"history", "--bogus", "list"}, 2, "", "-bogus"},
		{[]string{"history", "--db", db, "rm", "1"}, 0, "deleted conversation 1 (3 turns)", ""},
		{[]string{"history", "--db", db, "show", "1"}, 1, "", "not found"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("code %d (want %d)\nstdout: %s\nstderr: %s\nwant stdout ∋ %q, stderr ∋ %q", code, tc.code, stdout, stderr, tc.stdout, tc.stderr)
			}
		})
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), "-->") {
		t.Errorf("export -o wrote %q, %v", b, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".out.srt.*")); len(m) != 0 {
		t.Errorf("temporary export files left: %v", m)
	}
}

func TestHistoryCLIExportJSON(t *testing.T) {
	dir := isolate(t)
	// The default database lives in the data directory.
	seedHistory(t, filepath.Join(dir, "data", "parley", "parley.db"))
	code, stdout, stderr := runCLI(t, "history", "export", "--format", "json", "1")
	if code != 0 {
		t.Fatalf("code %d: %s", code, stderr)
	}
	var v struct {
		Turns []struct {
			Role        string `json:"role"`
			Interrupted bool   `json:"interrupted"`
		} `json:"turns"`
	}
	if err := json.Unmarshal([]byte(stdout), &v); err != nil || len(v.Turns) != 3 || !v.Turns[1].Interrupted {
		t.Fatalf("json export %q: %v", stdout, err)
	}
}
