package gui

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
)

// TestVoiceServiceChatTTS: the desktop voice panel's service opens ChatTTS (tts.engine auto
// with an installed export, or by name) and reports its controls as native.
func TestVoiceServiceChatTTS(t *testing.T) {
	gputest.RequireORT(t)
	models := t.TempDir()
	dir := filepath.Join(models, "chattts")
	os.MkdirAll(dir, 0o755)
	src := filepath.Join("..", "..", "testdata", "chattts", "tiny")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(src, e.Name()))
		os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
	}
	t.Setenv("PARLEY_MODELS", models)
	cfg := config.Default()
	cfg.Runtime.Provider = "cpu"
	s := &voiceService{cfg: cfg}
	defer s.Close()
	for _, name := range []string{"auto", "chattts"} {
		c, err := s.Capabilities(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, ctl := range []tts.Control{tts.CtlSeed, tts.CtlTemperature, tts.CtlTopP, tts.CtlTopK, tts.CtlLaugh, tts.CtlPause} {
			if c.Engine != "chattts" || c.Support(ctl) != tts.Native {
				t.Errorf("%s: %s %s is %s", name, c.Engine, ctl, c.Support(ctl))
			}
		}
	}
	if len(s.open) != 1 {
		t.Errorf("%d engines opened for auto and chattts (want the one)", len(s.open))
	}
}
