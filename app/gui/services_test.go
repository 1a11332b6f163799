package gui

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/assets"
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

// A model installed after the app started (the wizard's fine-tuned voice, `parley models
// import`) is on the Models page at its next refresh: the wizard's Install step says so.
func TestModelsListAModelInstalledLater(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("PARLEY_MODELS_MANIFEST", "")
	s, err := newModelService(nil)
	if err != nil {
		t.Fatal(err)
	}
	has := func() bool {
		list, err := s.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(list, func(m assets.ModelStatus) bool { return m.ID == "chattts-ada" })
	}
	if has() {
		t.Fatal("listed before it was installed")
	}
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "gpt.onnx"), []byte("weights"), 0o644)
	other, err := assets.NewManager(nil, assets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.InstallLocal(context.Background(), src, assets.LocalModel{ID: "chattts-ada", Kind: "tts", Description: "Ada's voice", Files: []string{"gpt.onnx"}}); err != nil {
		t.Fatal(err)
	}
	if !has() {
		t.Error("a model installed by another manager (the wizard's job) is not listed")
	}
}
