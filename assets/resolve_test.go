package assets

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

func TestResolve(t *testing.T) {
	reg, err := LoadRegistry(filepath.Join(t.TempDir(), "no-override.toml"))
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := NewManager(reg, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, ok := mgr.BestInstalled(KindASR); !ok {
		t.Skip("this build embeds no ASR model")
	}
	best, _ := mgr.BestInstalled(KindASR)

	// empty: the best installed model of the kind, the same one BestInstalled names
	p, id, err := mgr.Resolve(ctx, KindASR, "")
	if err != nil || id != best || p == "" {
		t.Fatalf("Resolve(asr, \"\") = %q, %q, %v; want the best installed %q", p, id, err, best)
	}
	// a path is used as it is, named by its base name
	dir := t.TempDir()
	if p, id, err := mgr.Resolve(ctx, KindASR, dir); err != nil || p != dir || id != filepath.Base(dir) {
		t.Errorf("Resolve(dir) = %q, %q, %v", p, id, err)
	}
	// an id resolves through the registry
	if p2, id2, err := mgr.Resolve(ctx, KindASR, best); err != nil || p2 != p || id2 != best {
		t.Errorf("Resolve(%s) = %q, %q, %v; want %q", best, p2, id2, err, p)
	}
	// an unknown id names it and suggests
	if _, _, err := mgr.Resolve(ctx, KindASR, "sensevoice-smal"); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("Resolve(misspelt id) = %v, want ErrUnknownModel", err)
	}
	// nothing of the kind installed (every kind has an embedded or bundled model in the real
	// registry, so a registry of one downloadable model)
	bare, err := newRegistry([]*Model{oneFileModel("m", "https://example.invalid/m.onnx", 1, "00")}, embedSource{})
	if err != nil {
		t.Fatal(err)
	}
	bareMgr, err := NewManager(bare, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := bareMgr.Resolve(ctx, KindTTS, ""); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Resolve(tts, \"\") with nothing installed = %v, want ErrNotInstalled", err)
	}
}
