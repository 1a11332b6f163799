package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

func exportFixture(t *testing.T) (*Store, Conversation) {
	s := openTest(t)
	ctx := context.Background()
	c := mustConv(t, s, "Weather and timers")
	t0 := time.Date(2026, 11, 22, 6, 10, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	turns := []*Turn{
		{ConversationID: c.ID, Role: RoleUser, Text: "What's the weather tomorrow?", Language: "en", Emotion: "NEUTRAL", Event: "Speech",
			Start: ms(0), End: ms(1800), Latency: Latency{SpeechEnd: ms(1800), Transcript: ms(1950)}, Created: ms(1950)},
		{ConversationID: c.ID, Role: RoleAssistant, Text: "Sunny, 21 degrees.\n\nA lovely day.", Voice: "espeak:en-us",
			Start: ms(2400), End: ms(5100), AudioPath: "/data/audio/2.wav", Created: ms(5100),
			Latency: Latency{SpeechEnd: ms(1800), Transcript: ms(1950), FirstToken: ms(2100), FirstSentence: ms(2250), FirstAudio: ms(2400)}},
		{ConversationID: c.ID, Role: RoleSystem, Text: "timer set", Created: ms(5200)},
		{ConversationID: c.ID, Role: RoleUser, Text: "明天会下雨吗", Language: "zh", Emotion: "HAPPY", Start: ms(8000), End: ms(9500), Created: ms(9600)},
		{ConversationID: c.ID, Role: RoleAssistant, Text: "不会，明天是", Interrupted: true, Start: ms(10000), Created: ms(11000)},
		{ConversationID: c.ID, Role: RoleAssistant, Text: "No times recorded here.", Created: ms(12000)},
		{ConversationID: c.ID, Role: RoleAssistant, Text: "", Error: "llm: connection refused", Created: ms(13000)},
	}
	if err := s.AddTurns(ctx, turns...); err != nil {
		t.Fatal(err)
	}
	// Pin the conversation's own times for the golden files.
	s.w.Exec(`UPDATE conversations SET created_at = ?, updated_at = ? WHERE id = ?`, t0.UnixMilli(), ms(12000).UnixMilli(), c.ID)
	return s, c
}

func TestExportGolden(t *testing.T) {
	s, c := exportFixture(t)
	for _, f := range []Format{FormatMarkdown, FormatJSON, FormatSRT} {
		t.Run(string(f), func(t *testing.T) {
			var b bytes.Buffer
			if err := s.Export(context.Background(), &b, c.ID, f, ExportOptions{Location: time.UTC}); err != nil {
				t.Fatal(err)
			}
			golden(t, "export."+string(f), b.String())
			if f == FormatJSON {
				var v struct {
					Turns []map[string]any `json:"turns"`
				}
				if err := json.Unmarshal(b.Bytes(), &v); err != nil || len(v.Turns) != 7 {
					t.Errorf("JSON export does not parse back: %v (%d turns)", err, len(v.Turns))
				}
			}
		})
	}
}

func TestExportErrors(t *testing.T) {
	s, c := exportFixture(t)
	ctx := context.Background()
	if err := s.Export(ctx, &bytes.Buffer{}, 999, FormatJSON, ExportOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing conversation: %v", err)
	}
	if err := s.Export(ctx, &bytes.Buffer{}, c.ID, "docx", ExportOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad format: %v", err)
	}
	if _, err := ParseFormat("pdf"); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParseFormat(pdf): %v", err)
	}
	for in, want := range map[string]Format{"md": FormatMarkdown, "Markdown": FormatMarkdown, "json": FormatJSON, " SRT ": FormatSRT} {
		if got, err := ParseFormat(in); got != want || err != nil {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if err := s.Export(ctx, failWriter{}, c.ID, FormatMarkdown, ExportOptions{}); err == nil {
		t.Error("write error not reported")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("disk full") }

func TestSRTTime(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "00:00:00,000", 1500 * time.Millisecond: "00:00:01,500", 3*time.Hour + 2*time.Minute + 1*time.Second + 7*time.Millisecond: "03:02:01,007",
	} {
		if got := srtTime(d); got != want {
			t.Errorf("srtTime(%v) = %s, want %s", d, got, want)
		}
	}
}
