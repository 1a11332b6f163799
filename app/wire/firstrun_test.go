package wire

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/parley-voice/parley/assets"
)

func TestMissingOf(t *testing.T) {
	list := []assets.ModelStatus{
		{ID: "sensevoice-small", State: assets.StateMissing}, // not essential
		{ID: "openwakeword", State: assets.StatePartial},
		{ID: "silero-vad-v5", State: assets.StateInstalled},
	}
	got := MissingOf(list)
	if len(got) != 1 || got[0].ID != "openwakeword" || got[0].State != assets.StatePartial {
		t.Errorf("MissingOf = %+v, want openwakeword (partial) only", got)
	}
	got = MissingOf(nil) // a registry that lost an entry still reports it
	if len(got) != len(Essential()) || got[0].State != assets.StateUnavailable {
		t.Errorf("MissingOf(nil) = %+v", got)
	}
}

// A fresh models directory lacks every essential model; one with their files (sizes as
// pinned) lacks none.
func TestMissingEssential(t *testing.T) {
	dir := t.TempDir()
	reg, err := assets.DefaultRegistry()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := assets.NewManager(reg, assets.Options{Dir: dir, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := MissingEssential(context.Background(), mgr)
	if err != nil || len(got) != len(Essential()) {
		t.Fatalf("fresh dir: %+v, %v", got, err)
	}
	for i, m := range got {
		if m.ID != Essential()[i] || m.State != assets.StateMissing {
			t.Errorf("fresh dir: %s is %s", m.ID, m.State)
		}
	}
	src := assets.ModelsDir() // what set-up installed
	for _, id := range Essential() {
		if err := os.CopyFS(filepath.Join(dir, id), os.DirFS(filepath.Join(src, id))); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("set-up model %s unavailable: %v", id, err)
			}
			t.Skipf("set-up model %s unavailable (run `make setup`): %v", id, err)
		}
	}
	if got, err := MissingEssential(context.Background(), mgr); err != nil || len(got) != 0 {
		t.Errorf("after copying the models in: %+v, %v", got, err)
	}
}

// The real recogniser is recommended exactly when Parley would hear through the demo one.
func TestRecogniserOffer(t *testing.T) {
	demo := assets.ModelStatus{ID: "sensevoice-demo", Kind: "asr", Demo: true, State: assets.StateInstalled}
	real := assets.ModelStatus{ID: "sensevoice-small-int8", Kind: "asr", State: assets.StateMissing}
	other := assets.ModelStatus{ID: "sensevoice-small", Kind: "asr", State: assets.StateInstalled}
	installed := real
	installed.State = assets.StateInstalled
	partial := real
	partial.State = assets.StatePartial
	for _, c := range []struct {
		name       string
		list       []assets.ModelStatus
		configured string
		want       bool
	}{
		{"only the demo, best installed", []assets.ModelStatus{demo, real}, "", true},
		{"only the demo, auto", []assets.ModelStatus{demo, real}, "auto", true},
		{"a half-downloaded real one resumes", []assets.ModelStatus{demo, partial}, "", true},
		{"the demo named in the config", []assets.ModelStatus{demo, real, other}, "sensevoice-demo", true},
		{"another real recogniser installed", []assets.ModelStatus{demo, real, other}, "", false},
		{"the real one installed", []assets.ModelStatus{demo, installed}, "", false},
		{"a model of the user's own", []assets.ModelStatus{demo, real}, "/home/ada/my-asr", false},
		{"a registry without it", []assets.ModelStatus{demo}, "", false},
	} {
		m, ok := RecogniserOffer(c.list, c.configured)
		if ok != c.want || (ok && m.ID != "sensevoice-small-int8") {
			t.Errorf("%s: offer %q %v, want %v", c.name, m.ID, ok, c.want)
		}
	}
}
