package wire

import (
	"testing"

	"github.com/parley-voice/parley/tts"
)

func TestVoiceName(t *testing.T) {
	demo := tts.Capabilities{Engine: "chattts", Model: "chattts-demo"}
	espeak := tts.Capabilities{Engine: "espeak-ng"}
	for _, c := range []struct {
		caps  tts.Capabilities
		voice string
		req   tts.Request
		want  string
	}{
		{demo, "", tts.Request{}, "chattts-demo"},
		{demo, "", tts.Request{Seed: 7, HasSeed: true}, "chattts-demo, seed 7"},
		{demo, "anna", tts.Request{}, "anna (chattts-demo)"},
		{demo, "default", tts.Request{}, "chattts-demo"},
		{espeak, "en-gb", tts.Request{}, "en-gb (espeak-ng)"},
		{espeak, "", tts.Request{Seed: 3, HasSeed: true}, "espeak-ng, seed 3"},
		{tts.Capabilities{Engine: "kokoro", Model: "."}, "af_heart", tts.Request{}, "af_heart (kokoro)"},
	} {
		if got := VoiceName(c.caps, c.voice, c.req); got != c.want {
			t.Errorf("VoiceName(%+v, %q, seed %d) = %q, want %q", c.caps, c.voice, c.req.Seed, got, c.want)
		}
	}
}
