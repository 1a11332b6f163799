package espeak

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAllVariantsExist makes sure every variant a seed can pick ships in espeak-ng-data
// (libespeak-ng silently falls back to the plain voice for a missing one).
func TestAllVariantsExist(t *testing.T) {
	version, dir, err := Info()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("libespeak-ng %s, data in %s", version, dir)
	for _, v := range Variants {
		if _, err := os.Stat(filepath.Join(dir, "voices", "!v", v)); err != nil {
			t.Errorf("variant %q: %v", v, err)
		}
	}
}
