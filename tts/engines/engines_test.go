package engines

import (
	"errors"
	"testing"

	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"
)

func TestApplyVoice(t *testing.T) {
	seed := int64(9)
	sv := voices.New("s", "espeak", voices.KindSeed)
	sv.Seed = &seed
	sv.Defaults = voices.Defaults{Temperature: 0.9, Speed: 1.2, Language: "en-gb"}
	req, err := ApplyVoice(tts.Request{Text: "x", Speed: 1, Temperature: 0.3}, sv, "espeak", Explicit{Speed: true})
	if err != nil {
		t.Fatal(err)
	}
	if !req.HasSeed || req.Seed != 9 || req.Temperature != 0.9 || req.Speed != 1 || req.Language != "en-gb" {
		t.Errorf("seed voice applied as %+v", req)
	}
	mv := voices.New("m", "kokoro", voices.KindMix)
	mv.Mix = []voices.Part{{Voice: "af_heart", Weight: 2}, {Voice: "am_adam", Weight: 1}}
	req, err = ApplyVoice(tts.Request{Text: "x"}, mv, "kokoro", Explicit{})
	if err != nil || len(req.Mix) != 2 || req.Mix[0].Weight != 2 {
		t.Errorf("mix voice applied as %+v, %v", req, err)
	}
	if _, err := ApplyVoice(tts.Request{Text: "x"}, mv, "espeak", Explicit{}); err == nil {
		t.Error("kokoro voice accepted for espeak")
	}
	ev := voices.New("e", "kokoro", voices.KindEmbedding)
	ev.Embedding = &voices.Embedding{Dim: 256, Data: make([]float32, 256)}
	if req, err := ApplyVoice(tts.Request{Text: "x"}, ev, "kokoro", Explicit{}); err != nil || len(req.Embedding) != 256 {
		t.Errorf("embedding voice: %v", err)
	}
}

func TestOpen(t *testing.T) {
	e, err := Open(Options{Engine: "espeak"})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if _, err := Open(Options{Engine: "festival"}); !errors.Is(err, ErrUnknownEngine) {
		t.Errorf("unknown engine: %v", err)
	}
	if _, err := Open(Options{Engine: "kokoro", ModelsDir: t.TempDir()}); err == nil {
		t.Error("kokoro opened without a model")
	}
}
