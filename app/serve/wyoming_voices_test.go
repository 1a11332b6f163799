package serve

import (
	"testing"

	"github.com/parley-voice/parley/tts"
)

// seedTTS is an engine whose seeds draw its speakers, as ChatTTS's do.
type seedTTS struct{ fakeTTS }

func (*seedTTS) Capabilities() tts.Capabilities {
	return tts.Capabilities{Engine: "chattts", Model: "chattts-demo", SampleRate: 24000, Languages: []string{"en-us"},
		Voices: []string{"default", "none"}, Controls: map[tts.Control]tts.Support{tts.CtlSeed: tts.Native}}
}

func TestWyomingOffersASeedEnginesSpeakers(t *testing.T) {
	s, err := New(Options{Engines: Engines{TTS: &seedTTS{}, TTSEngine: "chattts"}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	info := s.wyomingInfo(false)
	if len(info.TTS) != 1 {
		t.Fatalf("TTS programs %+v", info.TTS)
	}
	vs := info.TTS[0].Voices
	if len(vs) != 1 {
		t.Fatalf("voices %+v: want the model's one voice (not 'default' and 'none')", vs)
	}
	v := vs[0]
	if v.Name != "chattts" || len(v.Languages) != 1 || v.Languages[0] != "en-US" {
		t.Errorf("voice %+v", v)
	}
	names := map[string]bool{}
	for _, sp := range v.Speakers {
		names[sp.Name] = true
	}
	for n := range OpenAIVoices {
		if !names[n] {
			t.Errorf("speaker %q missing from %+v", n, v.Speakers)
		}
	}
}
