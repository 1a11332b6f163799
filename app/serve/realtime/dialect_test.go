package realtime

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBetaEventNames: one GA event per row, and what a beta client gets instead.
func TestBetaEventNames(t *testing.T) {
	for _, c := range []struct{ ga, beta string }{
		{"response.output_audio.delta", "response.audio.delta"},
		{"response.output_audio.done", "response.audio.done"},
		{"response.output_audio_transcript.delta", "response.audio_transcript.delta"},
		{"response.output_audio_transcript.done", "response.audio_transcript.done"},
		{"response.output_text.delta", "response.text.delta"},
		{"response.output_text.done", "response.text.done"},
		{"conversation.item.added", "conversation.item.created"},
		{"conversation.item.done", ""}, // no beta counterpart: not sent
		{"session.created", "session.created"},
		{"response.done", "response.done"},
		{"input_audio_buffer.speech_started", "input_audio_buffer.speech_started"},
		{"error", "error"},
	} {
		ev := map[string]any{"type": c.ga}
		ok := toBeta(ev)
		switch {
		case c.beta == "" && ok:
			t.Errorf("%s: sent to a beta client", c.ga)
		case c.beta != "" && (!ok || ev["type"] != c.beta):
			t.Errorf("%s: beta client got %v (sent %v), want %s", c.ga, ev["type"], ok, c.beta)
		}
	}
	// content parts, in a part and in an item's content, are "audio"/"text" in the beta
	ev := map[string]any{"type": "response.content_part.added", "part": map[string]any{"type": "output_audio"},
		"item": map[string]any{"type": "message", "content": []any{map[string]any{"type": "output_text"}, map[string]any{"type": "input_audio"}}}}
	toBeta(ev)
	if ev["part"].(map[string]any)["type"] != "audio" {
		t.Errorf("part %v", ev["part"])
	}
	content := ev["item"].(map[string]any)["content"].([]any)
	if content[0].(map[string]any)["type"] != "text" || content[1].(map[string]any)["type"] != "input_audio" || ev["item"].(map[string]any)["type"] != "message" {
		t.Errorf("item %v", ev["item"])
	}
}

// TestBetaSessionSpeaksBeta: a whole spoken turn with Beta: the client sees beta names only.
func TestBetaSessionSpeaksBeta(t *testing.T) {
	for _, beta := range []bool{false, true} {
		p, _ := start(t, Config{Transcriber: fakeASR{"hello"}, Brain: fakeBrain{answer: "Hi there."}, Voice: &fakeVoice{}, Beta: beta})
		send(p, map[string]any{"type": "session.update", "session": map[string]any{"turn_detection": nil}})
		until(t, p, "session.updated")
		appendAudio(p, tone(100*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond))
		send(p, map[string]any{"type": "input_audio_buffer.commit"})
		send(p, map[string]any{"type": "response.create"})
		var got []string
		for _, e := range until(t, p, "response.done") {
			if !slices.Contains(got, e.typ()) {
				got = append(got, e.typ())
			}
		}
		want := []string{"response.output_audio.delta", "response.output_audio_transcript.delta", "conversation.item.added", "conversation.item.done"}
		if beta {
			want = []string{"response.audio.delta", "response.audio_transcript.delta", "response.audio.done", "conversation.item.created"}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("beta=%v: no %s in %v", beta, w, got)
			}
		}
		for _, g := range got {
			if beta && (strings.Contains(g, "output_audio") || g == "conversation.item.added" || g == "conversation.item.done") {
				t.Errorf("beta client got the GA event %s", g)
			}
		}
	}
}
