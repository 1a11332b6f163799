package cli

import (
	"bytes"
	"errors"
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

// The release is written once, in FyneApp.toml; main hands it over.
func TestReleaseFromFyneApp(t *testing.T) {
	data, err := os.ReadFile("../../FyneApp.toml")
	if err != nil {
		t.Fatal(err)
	}
	v, err := Release(data)
	if err != nil || v == "" || strings.ContainsAny(v, " \t\"") {
		t.Fatalf("Release(FyneApp.toml) = %q, %v", v, err)
	}
	if _, err := Release([]byte("[Details]\nName = \"Parley\"\n")); !errors.Is(err, ErrNoRelease) {
		t.Errorf("no Version: %v, want ErrNoRelease", err)
	}
	if _, err := Release([]byte("[Details\nVersion = 1")); err == nil {
		t.Error("malformed TOML accepted")
	}

	saved := version
	t.Cleanup(func() { version = saved })
	version = ""
	if err := SetRelease(data); err != nil || release() != v {
		t.Errorf("SetRelease: release() = %q, %v; want %q", release(), err, v)
	}
	version = "9.9.9" // stamped with -ldflags -X: the stamp wins
	if err := SetRelease(data); err != nil || release() != "9.9.9" {
		t.Errorf("a stamped release was overridden: %q", release())
	}
}

func TestVersionStamp(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "7c35649abcdef0123456789abcdef0123456789a"},
		{Key: "vcs.time", Value: "2026-11-24T20:14:03Z"},
		{Key: "vcs.modified", Value: "true"},
	}, Deps: []*debug.Module{{Path: "github.com/yalue/onnxruntime_go", Version: "v1.35.0"}}}
	tests := []struct {
		name     string
		bi       *debug.BuildInfo
		fallback string
		line     string
	}{
		{"build info", bi, "", "parley 0.1.0 (7c35649abcde, 2026-11-24T20:14:03Z, modified)"},
		{"build info wins over the script's stamp", bi, "1111111111111111 2020-01-01T00:00:00Z false", "parley 0.1.0 (7c35649abcde, 2026-11-24T20:14:03Z, modified)"},
		{"a worktree build: the script's stamp", &debug.BuildInfo{GoVersion: "go1.26.8"}, "abcdef0123456789abcd 2026-01-02T03:04:05Z false", "parley 0.1.0 (abcdef012345, 2026-01-02T03:04:05Z)"},
		{"no VCS at all", nil, "", "parley 0.1.0"},
		{"a malformed stamp is ignored", nil, "abc", "parley 0.1.0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := stampOf(tc.bi, tc.fallback)
			if got := versionLine("0.1.0", s); got != tc.line {
				t.Errorf("versionLine = %q, want %q", got, tc.line)
			}
			var out bytes.Buffer
			writeVersion(&out, "0.1.0", s, tc.bi)
			if !strings.HasPrefix(out.String(), tc.line+"\n") {
				t.Errorf("version output starts %q, want the line %q", out.String(), tc.line)
			}
			if s.Modified && !strings.Contains(out.String(), "modified: yes") {
				t.Errorf("a dirty build is not called modified:\n%s", out.String())
			}
		})
	}
}
