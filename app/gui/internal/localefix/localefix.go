// Package localefix keeps Fyne from logging "Fyne error: Error parsing user locale C" on
// every parley command when the locale is C or POSIX (LANG=C.UTF-8, usual in containers and
// CI). Fyne's lang package reads the locale in its init; this package has no non-standard
// imports, so Go initialises it before fyne.io/fyne/v2/lang (whose imports include
// golang.org/x/text, later in import-path order). It points LC_MESSAGES at en_US for that
// init, and Restore (called from package gui's init, which runs after Fyne's) puts the
// environment back as it was, so child processes see the user's locale unchanged.
package localefix

import (
	"os"
	"strings"
)

// saved is the environment to put back; set once by init, read once by Restore.
var saved *string

func init() {
	if os.Getenv("LC_ALL") != "" {
		return // LC_ALL overrides LC_MESSAGES; leave the user's choice alone
	}
	loc := os.Getenv("LC_MESSAGES")
	if loc == "" {
		loc = os.Getenv("LANG")
	}
	if loc != "" && !isC(loc) {
		return
	}
	old, had := os.LookupEnv("LC_MESSAGES")
	if had {
		saved = &old
	} else {
		empty := "\x00unset"
		saved = &empty
	}
	os.Setenv("LC_MESSAGES", "en_US.UTF-8")
}

func isC(loc string) bool {
	return loc == "C" || loc == "POSIX" || strings.HasPrefix(loc, "C.")
}

// Restore puts LC_MESSAGES back as it was before init.
func Restore() {
	if saved == nil {
		return
	}
	if *saved == "\x00unset" {
		os.Unsetenv("LC_MESSAGES")
	} else {
		os.Setenv("LC_MESSAGES", *saved)
	}
	saved = nil
}
