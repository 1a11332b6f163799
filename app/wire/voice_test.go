package wire

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/factory/roles"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"
)

func TestVoiceFromConfig(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir()) // the user's voice library is empty but for these
	lib, err := voices.Open(voices.DefaultDir())
	if err != nil {
		t.Fatal(err)
	}
	seed := int64(4242)
	v := voices.New("narrator", "espeak", voices.KindSeed)
	v.Seed = &seed
	v.Defaults.Speed = 1.25
	if err := lib.Save(v, false); err != nil {
		t.Fatal(err)
	}
	k := voices.New("kokoro-voice", "kokoro", voices.KindPreset)
	k.Preset = "af_heart"
	if err := lib.Save(k, false); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name    string
		tts     config.TTS
		set     []string // keys set explicitly, "section.key=value", after tts
		wantErr string
		check   func(t *testing.T, x *roles.Voice)
	}{
		{name: "espeak preset", tts: config.TTS{Engine: "espeak", Voice: "en-gb", Speed: 0.9}, check: func(t *testing.T, x *roles.Voice) {
			if x.Req.Voice != "en-gb" || x.Req.Speed != 0.9 || x.Req.HasSeed {
				t.Errorf("request %+v", x.Req)
			}
		}},
		{name: "saved seed voice fills what config leaves unset", tts: config.TTS{Voice: "narrator"}, check: func(t *testing.T, x *roles.Voice) {
			if x.Req.Voice != "" || !x.Req.HasSeed || x.Req.Seed != seed || x.Req.Speed != 1.25 {
				t.Errorf("request %+v", x.Req)
			}
		}},
		{name: "config wins over the saved voice's defaults", tts: config.TTS{Voice: "narrator"}, set: []string{"tts.speed=0.8", "tts.seed=7"}, check: func(t *testing.T, x *roles.Voice) {
			if x.Req.Seed != 7 || x.Req.Speed != 0.8 {
				t.Errorf("request %+v", x.Req)
			}
		}},
		{name: "config's defaults leave the saved voice's own", tts: func() config.TTS {
			c := config.Default().TTS
			c.Voice = "narrator"
			return c
		}(), check: func(t *testing.T, x *roles.Voice) {
			if x.Req.Speed != 1.25 || x.Req.Seed != seed {
				t.Errorf("request %+v", x.Req)
			}
		}},
		{name: "saved voice of another engine", tts: config.TTS{Voice: "kokoro-voice"}, wantErr: "kokoro voice"},
		{name: "unknown engine", tts: config.TTS{Engine: "festival"}, wantErr: "festival"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.TTS = c.tts
			for _, kv := range c.set {
				k, v, _ := strings.Cut(kv, "=")
				if err := cfg.Set(k, v); err != nil {
					t.Fatal(err)
				}
			}
			x, err := voice(factory.New(cfg, nil))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Skip("espeak-ng:", err)
			}
			defer x.E.Close()
			if x.Rate <= 0 {
				t.Errorf("rate %d", x.Rate)
			}
			c.check(t, x)
		})
	}
}

// tts.engine kokoro gives the assistant a Kokoro voice from the installed models (here the
// project's tiny random-weight fixture installed as kokoro-82m), with tts.voice a Kokoro pack.
func TestVoiceKokoro(t *testing.T) {
	gputest.RequireORT(t)
	models := t.TempDir()
	dir := filepath.Join(models, "kokoro-82m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"model.onnx", "voices.npz", "config.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "tts", "kokoro", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PARLEY_MODELS", models)
	cfg := config.Default()
	cfg.TTS = config.TTS{Engine: "kokoro", Voice: "am_tiny", Speed: 1.1}
	cfg.Runtime.Provider = "cpu"
	x, err := voice(factory.New(cfg, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer x.E.Close()
	if x.E.Capabilities().Engine != "kokoro" || x.Req.Voice != "am_tiny" || x.Req.Speed != 1.1 || x.Rate != 24000 {
		t.Fatalf("voice %+v, engine %q, rate %d", x.Req, x.E.Capabilities().Engine, x.Rate)
	}
	req := x.Req
	req.Text = "hello there"
	st, err := x.E.Synthesize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if c, err := st.Next(context.Background()); err != nil || len(c.Samples) == 0 {
		t.Fatalf("first chunk: %d samples, %v", len(c.Samples), err)
	}
}

// The default tts.engine (auto) gives the assistant ChatTTS once a ChatTTS export is installed
// (here the tiny random export as models/chattts), with a ChatTTS seed voice from the library.
func TestVoiceChatTTSAuto(t *testing.T) {
	gputest.RequireORT(t)
	models := t.TempDir()
	dir := filepath.Join(models, "chattts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join("..", "..", "testdata", "chattts", "tiny")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PARLEY_MODELS", models)
	cfg := config.Default()
	cfg.TTS.Seed = 8
	cfg.Runtime.Provider = "cpu"
	x, err := voice(factory.New(cfg, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer x.E.Close()
	if c := x.E.Capabilities(); c.Engine != "chattts" || x.Rate != 24000 || x.Req.Seed != 8 || c.Support(tts.CtlTopK) != tts.Native {
		t.Fatalf("voice %+v, engine %q, rate %d", x.Req, c.Engine, x.Rate)
	}
	req := x.Req
	req.Text = "hello there [laugh]"
	st, err := x.E.Synthesize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if c, err := st.Next(context.Background()); err != nil || len(c.Samples) == 0 {
		t.Fatalf("first chunk: %d samples, %v", len(c.Samples), err)
	}
}
