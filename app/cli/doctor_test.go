package cli

import (
	"strings"
	"testing"
)

// A mistyped doctor invocation is a usage error (exit 2), like every other command's, and
// stray arguments are not silently ignored.
func TestDoctorUsageErrors(t *testing.T) {
	isolate(t)
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"doctor", "--bogus"}, "-bogus"},
		{[]string{"doctor", "models"}, `unexpected arguments ["models"]`},
	}
	for _, tc := range tests {
		code, _, errOut := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("parley %s: code %d (want 2), stderr %q (want ⊇ %q)", strings.Join(tc.args, " "), code, errOut, tc.stderr)
		}
	}
}
