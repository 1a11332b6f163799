package gui

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
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
	s := &voiceService{cfg: cfg, fac: factory.New(cfg, nil)}
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

// TestModelServicePullsChatTTSThroughItsRelease: the Models page offers Download for the
// ChatTTS voice, and Download fetches its official release (here a stand-in server with a tiny
// release in the official layout) and hands it to the Go converter; the progress is the
// voice's row's, and a release the converter refuses leaves no voice installed.
func TestModelServicePullsChatTTSThroughItsRelease(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
	t.Setenv("PARLEY_CACHE", filepath.Join(dir, "cache"))
	release := filepath.Join("..", "..", "testdata", "chattts", "tiny-release")
	srv := httptest.NewServer(http.FileServer(http.Dir(release)))
	defer srv.Close()
	var m strings.Builder
	m.WriteString("version = 1\n[[model]]\nid = \"chattts-release\"\nkind = \"release\"\ndescription = \"test\"\nlicence = \"test\"\n")
	for _, f := range []struct{ path, src string }{
		{"asset/Decoder.safetensors", "asset/Decoder.safetensors"}, {"asset/DVAE.safetensors", "asset/DVAE.safetensors"},
		{"asset/Embed.safetensors", "asset/Embed.safetensors"}, {"asset/Vocos.safetensors", "asset/Vocos.safetensors"},
		{"asset/gpt/config.json", "asset/gpt/config.json"}, {"asset/gpt/model.safetensors", "asset/gpt/model.safetensors"},
		{"asset/tokenizer/tokenizer.json", "asset/tokenizer/tokenizer.json"}, {"ChatTTS/config/config.py", "config.py"},
	} {
		fmt.Fprintf(&m, "[[model.file]]\npath = %q\nurls = [%q]\n", f.path, srv.URL+"/"+f.src)
	}
	manifest := filepath.Join(dir, "models.toml")
	os.WriteFile(manifest, []byte(m.String()), 0o644)
	t.Setenv("PARLEY_MODELS_MANIFEST", manifest)

	s, err := newModelService(nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	offered := false
	for _, st := range list {
		if st.ID == "chattts" {
			offered = st.Downloadable
		}
	}
	if !offered {
		t.Error("the ChatTTS voice offers no Download though its release is in the registry")
	}
	var phases []string
	err = s.Pull(context.Background(), "chattts", func(ev assets.Event) {
		if ev.Model != "chattts" {
			t.Errorf("an event for %q reached the voice's row", ev.Model)
		}
		phases = append(phases, ev.Phase)
	})
	// the tiny release is not the official size the built-in template converts
	if err == nil || !strings.Contains(err.Error(), "hidden_size") {
		t.Fatalf("pull: %v, want the converter's refusal of another size", err)
	}
	if !slices.Contains(phases, "converting") || !slices.Contains(phases, "download") {
		t.Errorf("progress phases %v: want the release's download, then converting", phases)
	}
	if st, err := s.manager().Status("chattts"); err != nil || st.State == assets.StateInstalled {
		t.Errorf("after a refused conversion the voice is %+v (%v)", st, err)
	}
}
