package assets

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A model no registry entry describes is installed from a directory under its own name, with
// the hashes recorded at import; later managers find it, verify checks it, rm forgets it.
func TestInstallLocal(t *testing.T) {
	t.Setenv("PARLEY_MODELS_MANIFEST", filepath.Join(t.TempDir(), "none.toml"))
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "model.onnx"), []byte("not really onnx, but bytes"), 0o644)
	os.WriteFile(filepath.Join(src, "tokens.txt"), []byte("<blk> 0\n"), 0o644)
	os.WriteFile(filepath.Join(src, "README.md"), []byte("left behind"), 0o644)
	models := t.TempDir()
	mgr, err := NewManager(nil, Options{Dir: models})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lm := LocalModel{ID: "my-sensevoice", Kind: KindASR, Description: "SenseVoice (sherpa-onnx layout)", Files: []string{"model.onnx", "tokens.txt"}}
	dir, err := mgr.InstallLocal(ctx, src, lm)
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(models, "my-sensevoice") {
		t.Errorf("installed in %s", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err == nil {
		t.Error("a file not in the layout was installed")
	}
	if _, err := mgr.InstallLocal(ctx, src, lm); !errors.Is(err, ErrExists) {
		t.Errorf("second install: %v", err)
	}
	if _, err := mgr.InstallLocal(ctx, src, LocalModel{ID: "silero-vad-v5", Kind: KindVAD, Files: []string{"model.onnx"}}); !errors.Is(err, ErrExists) {
		t.Errorf("a registry id: %v", err)
	}

	again, err := NewManager(nil, Options{Dir: models})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := again.Path(ctx, "my-sensevoice"); err != nil || p != dir {
		t.Fatalf("Path = %q, %v", p, err)
	}
	if p, id, err := again.Resolve(ctx, KindASR, "my-sensevoice"); err != nil || p != dir || id != "my-sensevoice" {
		t.Errorf("Resolve = %q %q %v", p, id, err)
	}
	st, err := again.Verify(ctx, "my-sensevoice")
	if err != nil || st.State != StateInstalled {
		t.Fatalf("verify: %+v %v", st, err)
	}
	os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte("<blk> 1\n"), 0o644)
	if st, _ := again.Verify(ctx, "my-sensevoice"); st.State != StateCorrupt {
		t.Errorf("a changed file verifies as %s", st.State)
	}
	if err := again.Remove(ctx, "my-sensevoice"); err != nil {
		t.Fatal(err)
	}
	third, _ := NewManager(nil, Options{Dir: models})
	if _, err := third.Registry().Lookup("my-sensevoice"); err == nil {
		t.Error("a removed local model is still known")
	}
}
