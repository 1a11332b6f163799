package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/BurntSushi/toml"
)

// Parley's release is written in one place, FyneApp.toml ([Details] Version): package main
// embeds it and hands it over with SetRelease before Main runs, and the tarball, the Debian
// package and `fyne package` read the same file (build/package.sh). The revision, its commit
// time and the dirty flag come from the Go build info, which `go build` stamps in a git
// checkout.
var (
	// version is the release. -ldflags "-X github.com/parley-voice/parley/app/cli.version=…"
	// still stamps one, and a stamped release wins over FyneApp.toml.
	version = ""
	// vcsStamp is "REVISION TIME MODIFIED", stamped with -X by build/vcs-stamp.sh (set-up and
	// packaging) where Go cannot read the repository itself (a git worktree, whose .git is a
	// file, or GOFLAGS=-buildvcs=false); the build info wins.
	vcsStamp = ""
)

// ErrNoRelease means FyneApp.toml has no [Details] Version.
var ErrNoRelease = errors.New("FyneApp.toml has no [Details] Version")

func init() {
	register(&command{
		name:  "version",
		usage: "version  print the version, revision, Go toolchain and key dependencies",
		run: func(ctx context.Context, env *cliEnv, args []string) error {
			fs := newFlags(env, "version", "")
			if err := fs.parse(args); err != nil {
				return err
			}
			if fs.NArg() > 0 {
				return usageError("version", "version takes no arguments")
			}
			bi, ok := debug.ReadBuildInfo()
			if !ok {
				bi = nil
			}
			writeVersion(env.Stdout, release(), stampOf(bi, vcsStamp), bi)
			return nil
		},
	})
}

// Release reads [Details] Version from the text of FyneApp.toml.
func Release(fyneApp []byte) (string, error) {
	var f struct {
		Details struct {
			Version string
		}
	}
	if _, err := toml.Decode(string(fyneApp), &f); err != nil {
		return "", fmt.Errorf("FyneApp.toml: %w", err)
	}
	v := strings.TrimSpace(f.Details.Version)
	if v == "" {
		return "", ErrNoRelease
	}
	return v, nil
}

// SetRelease takes the release from FyneApp.toml's text unless the build stamped one. Call
// it before Main.
func SetRelease(fyneApp []byte) error {
	v, err := Release(fyneApp)
	if err != nil {
		return err
	}
	if version == "" {
		version = v
	}
	return nil
}

// release is the version Parley reports: "dev" for a build that was told none (tests).
func release() string {
	if version == "" {
		return "dev"
	}
	return version
}

// buildStamp is where a binary was built from.
type buildStamp struct {
	Revision string // full commit hash; "" when the build was not made in a checkout
	Time     string // the commit's time, RFC 3339
	Modified bool   // the working tree had uncommitted changes
}

// stampOf reads the VCS settings Go stamps into the build info, falling back to a stamp
// the build script wrote ("REVISION TIME MODIFIED").
func stampOf(bi *debug.BuildInfo, fallback string) buildStamp {
	var s buildStamp
	if bi != nil {
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				s.Revision = kv.Value
			case "vcs.time":
				s.Time = kv.Value
			case "vcs.modified":
				s.Modified = kv.Value == "true"
			}
		}
	}
	if s.Revision == "" {
		if f := strings.Fields(fallback); len(f) == 3 {
			s = buildStamp{Revision: f[0], Time: f[1], Modified: f[2] == "true"}
		}
	}
	return s
}

// String is the stamp in one parenthesis: "(7c35649abcde, 2026-11-24T20:14:03Z, modified)".
func (s buildStamp) String() string {
	if s.Revision == "" {
		return ""
	}
	rev := s.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	parts := []string{rev}
	if s.Time != "" {
		parts = append(parts, s.Time)
	}
	if s.Modified {
		parts = append(parts, "modified")
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// versionLine is the one-line version `parley --version` prints.
func versionLine(rel string, s buildStamp) string {
	if st := s.String(); st != "" {
		return "parley " + rel + " " + st
	}
	return "parley " + rel
}

func writeVersion(w io.Writer, rel string, s buildStamp, bi *debug.BuildInfo) {
	fmt.Fprintln(w, versionLine(rel, s))
	if s.Revision != "" {
		dirty := "no"
		if s.Modified {
			dirty = "yes (built with uncommitted changes)"
		}
		fmt.Fprintf(w, "revision: %s\ncommitted: %s\nmodified: %s\n", s.Revision, s.Time, dirty)
	} else {
		fmt.Fprintln(w, "revision: unknown (built without VCS information)")
	}
	if bi != nil {
		fmt.Fprintf(w, "go: %s\n", bi.GoVersion)
		for _, d := range bi.Deps {
			if d.Path == "github.com/yalue/onnxruntime_go" {
				fmt.Fprintf(w, "onnxruntime_go: %s\n", d.Version)
			}
		}
	}
}
