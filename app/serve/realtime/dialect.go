package realtime

// The beta protocol (OpenAI-Beta: realtime=v1) names some server events differently from
// the GA protocol the session speaks, and calls its content parts "audio" and "text":
// clients written against the beta (and the openai SDK's beta helpers) ignore the GA names.
// The session builds GA events; toBeta rewrites each one for a beta client.

// betaNames maps GA event names to the beta's.
var betaNames = map[string]string{
	"response.output_audio.delta":            "response.audio.delta",
	"response.output_audio.done":             "response.audio.done",
	"response.output_audio_transcript.delta": "response.audio_transcript.delta",
	"response.output_audio_transcript.done":  "response.audio_transcript.done",
	"response.output_text.delta":             "response.text.delta",
	"response.output_text.done":              "response.text.done",
	"conversation.item.added":                "conversation.item.created",
}

// betaDropped are GA events the beta has no counterpart for (the beta says an item exists
// once, with conversation.item.created).
var betaDropped = map[string]bool{"conversation.item.done": true}

// betaPartTypes maps GA content-part types to the beta's.
var betaPartTypes = map[string]string{"output_audio": "audio", "output_text": "text"}

// toBeta rewrites a GA server event in place for a beta client; false: do not send it.
func toBeta(ev map[string]any) bool {
	t, _ := ev["type"].(string)
	if betaDropped[t] {
		return false
	}
	if b, ok := betaNames[t]; ok {
		ev["type"] = b
	}
	for k, v := range ev {
		if k != "type" {
			betaParts(v)
		}
	}
	return true
}

// betaParts renames content-part types anywhere inside v (parts, items' content, a
// response's output).
func betaParts(v any) {
	switch x := v.(type) {
	case map[string]any:
		if t, ok := x["type"].(string); ok {
			if b, ok := betaPartTypes[t]; ok {
				x["type"] = b
			}
		}
		for k, c := range x {
			if k != "type" {
				betaParts(c)
			}
		}
	case []any:
		for _, c := range x {
			betaParts(c)
		}
	case []map[string]any:
		for _, c := range x {
			betaParts(c)
		}
	}
}
