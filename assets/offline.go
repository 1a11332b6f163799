package assets

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
)

// ErrOffline is wrapped by OfflineError: no download host of a model could be reached.
var ErrOffline = errors.New("network unreachable")

// OfflineError is a pull that reached none of a model's download hosts (no network, no DNS, a
// firewall). It says, in one line, what to fetch on another machine for `parley models
// import`.
type OfflineError struct {
	Model   string
	Hosts   []string // the hosts that could not be reached
	Cause   string   // the network's own words, e.g. "no such host"
	Files   []string // one URL per missing file
	Archive string   // an archive holding them all, when the registry knows one
}

func (e *OfflineError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: cannot download: the network is unreachable (%s", e.Model, strings.Join(e.Hosts, ", "))
	if e.Cause != "" {
		b.WriteString(": " + e.Cause)
	}
	b.WriteString("). On a machine with network fetch ")
	switch {
	case len(e.Files) > 0 && e.Archive != "":
		fmt.Fprintf(&b, "%s (or the archive %s)", strings.Join(e.Files, " and "), e.Archive)
	case len(e.Files) > 0:
		b.WriteString(strings.Join(e.Files, " and "))
	default:
		b.WriteString(e.Archive)
	}
	b.WriteString(" into one folder, bring it here and run `parley models import FOLDER`")
	return b.String()
}

func (e *OfflineError) Unwrap() error { return ErrOffline }

// offlineError returns an OfflineError when every failure in errs is a host that could not be
// reached, else nil.
func (m *Manager) offlineError(model *Model, failed []File, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	hosts := map[string]bool{}
	cause := ""
	for _, err := range errs {
		if !allUnreachable(err) {
			return nil
		}
		var dns *net.DNSError
		switch {
		case errors.As(err, &dns):
			hosts[dns.Name] = true
			if cause == "" {
				cause = dns.Err
			}
		default:
			var op *net.OpError
			if errors.As(err, &op) && cause == "" {
				cause = op.Err.Error()
			}
		}
	}
	e := &OfflineError{Model: model.ID, Cause: cause}
	for _, f := range failed {
		if len(f.URLs) == 0 {
			continue
		}
		e.Files = append(e.Files, m.fetchURL(f.URLs[0]))
		if h := hostOf(m.fetchURL(f.URLs[0])); h != "" && len(hosts) == 0 {
			hosts[h] = true
		}
	}
	for _, a := range model.Archives {
		if len(a.URLs) > 0 && e.Archive == "" {
			e.Archive = m.fetchURL(a.URLs[0])
		}
	}
	for h := range hosts {
		e.Hosts = append(e.Hosts, h)
	}
	sort.Strings(e.Hosts)
	return e
}

// allUnreachable reports whether err, and every error joined in it, is a host that could not
// be reached.
func allUnreachable(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !allUnreachable(e) {
				return false
			}
		}
		return len(j.Unwrap()) > 0
	}
	return unreachable(err)
}

// fetchURL is where a user fetches a source by hand: its HTTP(S) URL, or the npm tarball.
func (m *Manager) fetchURL(raw string) string {
	s, err := parseSource(raw)
	if err != nil {
		return raw
	}
	if s.Scheme == "npm" {
		return s.npmTarballURL(m.opts.Getenv) + " (" + s.Member + " inside)"
	}
	return s.httpURL(m.opts.Getenv)
}
