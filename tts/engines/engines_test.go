package engines

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"

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

// A clone voice gives the request its prompt, pitch shift included, and its seed speaker
// unless the caller set a seed.
func TestApplyCloneVoice(t *testing.T) {
	cv := voices.New("me", "chattts", voices.KindClone)
	seed := int64(4)
	cv.Seed = &seed
	cv.Sample = &voices.Sample{Text: "hello there", NumVQ: 4, Codes: []int32{1, 2, 3, 4}, Model: "m", ModelID: "id", Pitch: 2.5}
	req, err := ApplyVoice(tts.Request{Text: "x"}, cv, "chattts", Explicit{})
	if err != nil {
		t.Fatal(err)
	}
	if s := req.Sample; s == nil || s.Text != "hello there" || len(s.Codes) != 4 || s.ModelID != "id" || s.Pitch != 2.5 || req.Seed != 4 || !req.HasSeed {
		t.Errorf("clone voice applied as %+v (sample %+v)", req, req.Sample)
	}
	if req, _ := ApplyVoice(tts.Request{Text: "x", Seed: 9, HasSeed: true}, cv, "chattts", Explicit{Seed: true}); req.Seed != 9 {
		t.Errorf("an explicit seed was replaced by the voice's: %d", req.Seed)
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

// copyTiny installs the tiny ChatTTS export as models/<id>, optionally with a card.
func copyTiny(t *testing.T, models, id string, card string) {
	t.Helper()
	src := "../../testdata/chattts/tiny"
	dst := filepath.Join(models, id)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "config.json" && card != "" {
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			var c any
			if err := json.Unmarshal([]byte(card), &c); err != nil {
				t.Fatal(err)
			}
			m["card"] = c
			b, _ = json.Marshal(m)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDefaultVoicePolicy: "auto" is espeak-ng until a ChatTTS export is installed; Parley's
// demo voice takes over only when its card says it meets the intelligibility goal.
func TestDefaultVoicePolicy(t *testing.T) {
	models := t.TempDir()
	if got := Default(models); got != "espeak" {
		t.Fatalf("nothing installed: %s", got)
	}
	copyTiny(t, models, ChatTTSDemo, "")
	if got := Default(models); got != "espeak" {
		t.Fatalf("demo voice without a card: %s", got)
	}
	os.RemoveAll(filepath.Join(models, ChatTTSDemo))
	copyTiny(t, models, ChatTTSDemo, `{"intelligibility": {"metric": "CER", "value": 0.4, "goal": 0.2, "meets_goal": false}}`)
	if got := Default(models); got != "espeak" {
		t.Fatalf("demo voice missing its goal: %s", got)
	}
	os.RemoveAll(filepath.Join(models, ChatTTSDemo))
	copyTiny(t, models, ChatTTSDemo, `{"intelligibility": {"metric": "CER", "value": 0.1, "goal": 0.2, "meets_goal": true}}`)
	if got := Default(models); got != "chattts" {
		t.Fatalf("demo voice meeting its goal: %s", got)
	}
	other := t.TempDir()
	copyTiny(t, other, "chattts", "")
	if got := Default(other); got != "chattts" {
		t.Fatalf("installed export: %s", got)
	}
	if dir, demo := FindChatTTS(other, true); demo || filepath.Base(dir) != "chattts" {
		t.Fatalf("FindChatTTS: %s %v", dir, demo)
	}
	gputest.RequireORT(t)
	e, err := Open(Options{Engine: "auto", ModelsDir: other, GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if c := e.Capabilities(); c.Engine != "chattts" || c.Support(tts.CtlLaugh) != tts.Native {
		t.Fatalf("auto opened %s", c.Engine)
	}
	if _, err := Open(Options{Engine: "chattts", ModelsDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "models import") {
		t.Errorf("chattts without a model: %v", err)
	}
}

func TestApplyVoiceChatTTS(t *testing.T) {
	seed := int64(4)
	v := voices.New("c", "chattts", voices.KindSeed)
	v.Seed = &seed
	req, err := ApplyVoice(tts.Request{Text: "x"}, v, "chattts", Explicit{})
	if err != nil || req.Seed != 4 || !req.HasSeed {
		t.Fatalf("%+v %v", req, err)
	}
	if _, err := ApplyVoice(tts.Request{Text: "x"}, v, "kokoro", Explicit{}); err == nil {
		t.Error("chattts voice accepted for kokoro")
	}
}

func TestIsChatTTSDemo(t *testing.T) {
	for dir, want := range map[string]bool{
		"/home/a/.local/share/parley/models/chattts-demo":  true,
		"/home/a/.local/share/parley/models/chattts-demo/": true,
		"chattts-demo":                     true,
		"/models/chattts-official":         false,
		"/models/chattts-demo-copy":        false,
		"/models/chattts-demo/chattts-ada": false,
		"":                                 false,
	} {
		if got := IsChatTTSDemo(dir); got != want {
			t.Errorf("IsChatTTSDemo(%q) = %v, want %v", dir, got, want)
		}
	}
}

// Resolve is what Open opens: the name a caller shows and the engine that plays agree for
// every spelling of a tts.engine value.
func TestResolveIsWhatOpenOpens(t *testing.T) {
	models := t.TempDir()
	copyTiny(t, models, "chattts", "")
	for in, want := range map[string]string{
		"": "espeak", "espeak": "espeak", "ESPEAK-NG": "espeak", " espeak-ng ": "espeak",
		"auto": "chattts", "Auto": "chattts", "chattts": "chattts", "Kokoro": "kokoro", "nope": "nope",
	} {
		if got := Resolve(in, models); got != want {
			t.Errorf("Resolve(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Resolve("auto", t.TempDir()); got != "espeak" {
		t.Errorf("auto with nothing installed: %q", got)
	}
	gputest.RequireORT(t)
	for _, in := range []string{"", "ESPEAK-NG", "AUTO"} {
		e, err := Open(Options{Engine: in, ModelsDir: models, GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
		if err != nil {
			t.Fatalf("Open(%q): %v", in, err)
		}
		got := e.Capabilities().Engine
		if got == "espeak-ng" { // the engine's own name for the setting's "espeak"
			got = "espeak"
		}
		if got != Resolve(in, models) {
			t.Errorf("Open(%q) opened %s, Resolve says %s", in, got, Resolve(in, models))
		}
		e.Close()
	}
	if _, err := Open(Options{Engine: "nope"}); !errors.Is(err, ErrUnknownEngine) {
		t.Errorf("unknown engine: %v", err)
	}
}
