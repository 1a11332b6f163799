package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// `parley --config FILE config path` names FILE even before it exists (it showed the default
// path instead), and so does doctor.
func TestConfigPathNamesTheChosenFile(t *testing.T) {
	dir := isolate(t)
	chosen := filepath.Join(dir, "elsewhere", "parley.toml")
	code, out, errOut := runCLI(t, "--config", chosen, "config", "path")
	if code != 0 || !strings.HasPrefix(out, chosen+" ") {
		t.Errorf("config path: code %d, stdout %q, stderr %q; want %s first", code, out, errOut, chosen)
	}
	_, out, _ = runCLI(t, "--config", chosen, "doctor", "--json")
	if !strings.Contains(out, `"config_file": "`+chosen+`"`) {
		t.Errorf("doctor --json does not name %s:\n%s", chosen, out)
	}
}
