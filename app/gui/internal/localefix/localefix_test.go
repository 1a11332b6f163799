package localefix

import (
	"os"
	"testing"
)

func TestRestorePutsTheEnvironmentBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  *string
		want string
		set  bool
	}{
		{"unset", strp("\x00unset"), "", false},
		{"was C", strp("C"), "C", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("LC_MESSAGES", "en_US.UTF-8")
			saved = tc.old
			Restore()
			got, ok := os.LookupEnv("LC_MESSAGES")
			if ok != tc.set || got != tc.want {
				t.Errorf("LC_MESSAGES = %q (set %v), want %q (set %v)", got, ok, tc.want, tc.set)
			}
			if saved != nil {
				t.Error("Restore kept its saved value")
			}
		})
	}
}

func TestIsC(t *testing.T) {
	for loc, want := range map[string]bool{"C": true, "C.UTF-8": true, "POSIX": true, "en_US.UTF-8": false, "de_DE": false} {
		if isC(loc) != want {
			t.Errorf("isC(%q) = %v", loc, !want)
		}
	}
}

func strp(s string) *string { return &s }
