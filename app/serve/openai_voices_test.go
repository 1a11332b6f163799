package serve

import (
	"fmt"
	"testing"

	"github.com/parley-voice/parley/tts"
)

// suggestingTTS is fakeTTS on a model that suggests seeds, lowest voice first.
type suggestingTTS struct {
	*fakeTTS
	seeds []int64
}

func (s suggestingTTS) SuggestedSeeds() []int64 { return s.seeds }

// TestOpenAIVoiceSeeds: on an engine that suggests seeds, OpenAI's deep voice (onyx) speaks
// with the lowest suggested seed and its highest (shimmer) with the highest, every name with
// a suggested seed and no two alike, in register order; repeats in the list count once; one
// seed is everyone's; an engine without suggestions keeps each name's own seed; a seed the
// request gives wins. (alloy and fable are fakeTTS presets, so over HTTP they take the preset;
// openAISeed is checked for every name directly.)
func TestOpenAIVoiceSeeds(t *testing.T) {
	seeds := make([]int64, 20)
	for i := range seeds {
		seeds[i] = int64(1000 + i)
	}
	eng := suggestingTTS{fakeTTS: &fakeTTS{}, seeds: seeds}
	_, base := testServer(t, Engines{TTS: eng}, nil)
	say := func(voice, extra string) tts.Request {
		t.Helper()
		body := fmt.Sprintf(`{"model":"tts-1","input":"Hello there.","voice":%q,"response_format":"pcm"%s}`, voice, extra)
		resp, b := post(t, base+"/v1/audio/speech", "application/json", []byte(body))
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", voice, resp.StatusCode, b)
		}
		return eng.last.Load().(tts.Request)
	}
	if r := say("onyx", ""); !r.HasSeed || r.Seed != seeds[0] {
		t.Errorf("onyx: seed %d (%v), want the lowest suggested %d", r.Seed, r.HasSeed, seeds[0])
	}
	if r := say("Shimmer", ""); !r.HasSeed || r.Seed != seeds[len(seeds)-1] {
		t.Errorf("shimmer: seed %d, want the highest suggested %d", r.Seed, seeds[len(seeds)-1])
	}
	if r := say("onyx", `,"seed":7`); r.Seed != 7 {
		t.Errorf("onyx with seed 7: seed %d", r.Seed)
	}
	used := map[int64]string{}
	for name, ov := range OpenAIVoices {
		if ov.Register < 0 || ov.Register > 1 {
			t.Errorf("%s: register %g", name, ov.Register)
		}
		seed, ok := openAISeed(eng, name)
		if !ok || seed < seeds[0] || seed > seeds[len(seeds)-1] {
			t.Errorf("%s: seed %d, %v", name, seed, ok)
		}
		if other, dup := used[seed]; dup {
			t.Errorf("%s and %s both speak with seed %d", name, other, seed)
		}
		used[seed] = name
		if plain, _ := openAISeed(&fakeTTS{}, name); plain != ov.Seed {
			t.Errorf("%s without suggestions: seed %d, want %d", name, plain, ov.Seed)
		}
	}
	if _, ok := openAISeed(eng, "not-a-voice"); ok {
		t.Error("an unknown name has a seed")
	}
	// deeper register, lower (earlier) seed
	for a, ova := range OpenAIVoices {
		for b, ovb := range OpenAIVoices {
			sa, _ := openAISeed(eng, a)
			sb, _ := openAISeed(eng, b)
			if ova.Register < ovb.Register && sa >= sb {
				t.Errorf("%s (register %g) has seed %d, %s (%g) %d", a, ova.Register, sa, b, ovb.Register, sb)
			}
		}
	}
	thirteen := suggestingTTS{fakeTTS: &fakeTTS{}, seeds: append(seeds[:13:13], seeds[0], seeds[5])}
	used = map[int64]string{}
	for name := range OpenAIVoices {
		seed, _ := openAISeed(thirteen, name)
		if other, dup := used[seed]; dup {
			t.Errorf("13 seeds (and 2 repeats): %s and %s share %d", name, other, seed)
		}
		used[seed] = name
	}
	one := suggestingTTS{fakeTTS: &fakeTTS{}, seeds: []int64{42}}
	for name := range OpenAIVoices {
		if seed, ok := openAISeed(one, name); !ok || seed != 42 {
			t.Errorf("one suggestion: %s has %d", name, seed)
		}
	}
}
