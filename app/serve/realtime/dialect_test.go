package realtime

import (
	"fmt"
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

// TestTextMode: output_modalities ["text"] (GA) or modalities ["text"] (beta) answers in text
// deltas with no audio; anything unsupported is an error that names the parameter.
func TestTextMode(t *testing.T) {
	for _, beta := range []bool{false, true} {
		voice := &fakeVoice{}
		p, _ := start(t, Config{Transcriber: fakeASR{""}, Brain: fakeBrain{answer: "Seven times twelve is 84."}, Voice: voice, Beta: beta})
		mods := map[string]any{"output_modalities": []string{"text"}}
		if beta {
			mods = map[string]any{"modalities": []string{"text"}}
		}
		send(p, map[string]any{"type": "session.update", "session": mods})
		up := until(t, p, "session.updated")
		sess := up[len(up)-1]["session"].(map[string]any)
		if om := sess["output_modalities"].([]any); len(om) != 1 || om[0] != "text" {
			t.Errorf("beta=%v: session.updated says output_modalities %v", beta, om)
		}
		send(p, map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": "what is 7 times 12"}}}})
		send(p, map[string]any{"type": "response.create"})
		evs := until(t, p, "response.done")
		var deltas strings.Builder
		delta, doneType := "response.output_text.delta", "response.output_text.done"
		if beta {
			delta, doneType = "response.text.delta", "response.text.done"
		}
		sawDone := false
		for _, e := range evs {
			switch e.typ() {
			case delta:
				deltas.WriteString(e["delta"].(string))
			case doneType:
				sawDone = true
				if e["text"] != "Seven times twelve is 84." {
					t.Errorf("beta=%v: %s text %v", beta, doneType, e["text"])
				}
			}
			if strings.Contains(e.typ(), "audio") {
				t.Errorf("beta=%v: audio event %s in text mode", beta, e.typ())
			}
		}
		if deltas.String() != "Seven times twelve is 84." || !sawDone {
			t.Errorf("beta=%v: text deltas %q, done %v (%v)", beta, deltas.String(), sawDone, types(evs))
		}
		out := evs[len(evs)-1]["response"].(map[string]any)["output"].([]any)
		part := out[0].(map[string]any)["content"].([]any)[0].(map[string]any)
		wantPart := "output_text"
		if beta {
			wantPart = "text"
		}
		if part["type"] != wantPart || part["text"] != "Seven times twelve is 84." {
			t.Errorf("beta=%v: response.done content %v", beta, part)
		}
		if len(voice.said) != 0 {
			t.Errorf("beta=%v: the voice spoke %q in text mode", beta, voice.said)
		}
	}
	p, _ := start(t, Config{Transcriber: fakeASR{""}, Brain: fakeBrain{answer: "x"}, Voice: &fakeVoice{}})
	for _, c := range []struct {
		session map[string]any
		param   string
	}{
		{map[string]any{"output_modalities": []string{"image"}}, "session.output_modalities"},
		{map[string]any{"output_modalities": []string{"audio", "text"}}, "session.output_modalities"},
		{map[string]any{"modalities": []string{"audio"}}, "session.modalities"},
	} {
		send(p, map[string]any{"type": "session.update", "session": c.session})
		e := next(t, p)
		if e.typ() != "error" || e["error"].(map[string]any)["param"] != c.param {
			t.Errorf("update %v: %v, want an error on %s", c.session, e, c.param)
		}
	}
}

func TestResponseDoneUsage(t *testing.T) {
	p, _ := start(t, Config{Transcriber: fakeASR{""}, Brain: fakeBrain{answer: "Sure thing."}, Voice: &fakeVoice{},
		Tokens: func(s string) int { return len(strings.Fields(s)) }})
	send(p, map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "say something now"}}}})
	send(p, map[string]any{"type": "response.create"})
	evs := until(t, p, "response.done")
	u, _ := evs[len(evs)-1]["response"].(map[string]any)["usage"].(map[string]any)
	if u == nil || u["input_tokens"] != 3.0 || u["output_tokens"] != 2.0 || u["total_tokens"] != 5.0 {
		t.Errorf("usage %v", u)
	}
}

// response.create's own output modalities and voice apply to that answer alone; bad ones
// are refused on their response.* parameter and start nothing.
func TestResponseOverrides(t *testing.T) {
	voice := &fakeVoice{}
	p, _ := start(t, Config{Transcriber: fakeASR{""}, Brain: fakeBrain{answer: "Fine."}, Voice: voice,
		CheckVoice: func(name string) error {
			if name != "nova" {
				return fmt.Errorf("no voice %q", name)
			}
			return nil
		}})
	ask := func(response map[string]any) []ev {
		send(p, map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user",
			"content": []any{map[string]any{"type": "input_text", "text": "how are you"}}}})
		ev := map[string]any{"type": "response.create"}
		if response != nil {
			ev["response"] = response
		}
		send(p, ev)
		return until(t, p, "response.done")
	}
	audio := func(evs []ev) bool {
		for _, e := range evs {
			if e.typ() == "response.output_audio.delta" {
				return true
			}
		}
		return false
	}
	if evs := ask(map[string]any{"output_modalities": []string{"text"}}); audio(evs) {
		t.Errorf("a text-only response.create got audio: %v", types(evs))
	}
	if evs := ask(nil); !audio(evs) {
		t.Errorf("the next response (the session's audio) got no audio: %v", types(evs))
	}
	if evs := ask(map[string]any{"audio": map[string]any{"output": map[string]any{"voice": "nova"}}}); !audio(evs) {
		t.Errorf("no audio with the response's voice: %v", types(evs))
	}
	voice.mu.Lock()
	if got := voice.voices; len(got) != 2 || got[0] != "" || got[1] != "nova" {
		t.Errorf("voices spoken %q, want the session's then nova", got)
	}
	voice.mu.Unlock()
	for _, c := range []struct {
		response map[string]any
		param    string
	}{
		{map[string]any{"output_modalities": []string{"image"}}, "response.output_modalities"},
		{map[string]any{"modalities": []string{"audio"}}, "response.modalities"},
		{map[string]any{"voice": "nobody"}, "response.voice"},
	} {
		send(p, map[string]any{"type": "response.create", "response": c.response})
		e := next(t, p)
		if e.typ() != "error" || e["error"].(map[string]any)["param"] != c.param {
			t.Errorf("response %v: %v, want an error on %s", c.response, e, c.param)
		}
	}
}
