package device

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// PortAudio 19.6 (Debian 12) aborts the whole process when ALSA's pulse plugin cannot open a
// capture stream because the PulseAudio server went away mid-way (an assertion in
// PaAlsaStream_DetermineFramesPerBuffer after the capture open failed). A PulseAudio or
// PipeWire restart is exactly when the reopener tries to open devices, so while the server
// that the plugin would talk to refuses connections, the reopener does not call PortAudio at
// all. A stale socket of a server that is gone for good would keep a plain-ALSA device from
// ever reopening, so the gate gives way after pulseGrace of refusals.

// pulseHostAPI is Info.HostAPI of a capture recorded through PulseAudio's own API.
const pulseHostAPI = "PulseAudio"

// usePulse says whether a capture of device spec goes through PulseAudio's own API: the
// default device ("", "default" or "pulse") where a PulseAudio or PipeWire server's socket
// exists, unless PARLEY_AUDIO_BACKEND is "portaudio". PortAudio reaches the same server
// through ALSA's plug-in at about seven times the CPU (a thread of its own polling the
// plug-in's), which was most of an idle listening app's.
func usePulse(spec string) bool {
	if os.Getenv("PARLEY_AUDIO_BACKEND") == "portaudio" {
		return false
	}
	switch strings.TrimSpace(spec) {
	case "", "default", "pulse":
		return pulseSocket() != ""
	}
	return false
}

// pulseGrace is how long refusals hold reopening back before PortAudio is tried anyway.
const pulseGrace = 30 * time.Second

// pulseSocket is the unix socket of the PulseAudio server ALSA's pulse plugin would use:
// PULSE_SERVER's first unix entry, else XDG_RUNTIME_DIR/pulse/native when it exists; "" when
// there is none to check (plain ALSA, or a TCP server).
func pulseSocket() string {
	if s := os.Getenv("PULSE_SERVER"); s != "" {
		for _, e := range strings.Fields(s) {
			if i := strings.LastIndex(e, "}"); i >= 0 { // "{machine-id}unix:/path"
				e = e[i+1:]
			}
			switch {
			case strings.HasPrefix(e, "unix:"):
				return strings.TrimPrefix(e, "unix:")
			case strings.HasPrefix(e, "/"):
				return e
			}
		}
		return ""
	}
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		return ""
	}
	p := filepath.Join(dir, "pulse", "native")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// pulseGate answers whether PortAudio may be asked to open a stream now. One reopener uses
// it, from its one goroutine.
type pulseGate struct {
	socket func() string
	dial   func(path string) error
	now    func() time.Time
	since  time.Time // first refusal of the current run; zero when the last check passed
}

func newPulseGate() *pulseGate {
	return &pulseGate{socket: pulseSocket, now: time.Now, dial: func(path string) error {
		c, err := net.DialTimeout("unix", path, 250*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err
	}}
}

// check returns an error naming the server while it refuses connections (for at most
// pulseGrace in a row), else nil.
func (g *pulseGate) check() error {
	path := g.socket()
	if path == "" {
		return nil
	}
	err := g.dial(path)
	if err == nil {
		g.since = time.Time{}
		return nil
	}
	now := g.now()
	if g.since.IsZero() {
		g.since = now
	}
	if now.Sub(g.since) >= pulseGrace {
		return nil
	}
	return fmt.Errorf("device: the PulseAudio server at %s does not answer yet: %w", path, err)
}

// startWait is how long a first open waits for a PulseAudio server that is still starting.
const startWait = 2 * time.Second

// await waits up to wait for the server to answer, so that a first open does not meet a
// server still starting (the same abort); after that it returns and PortAudio is tried anyway.
func (g *pulseGate) await(wait time.Duration, sleep func(time.Duration)) {
	path := g.socket()
	if path == "" {
		return
	}
	for end := g.now().Add(wait); g.dial(path) != nil && g.now().Before(end); {
		sleep(100 * time.Millisecond)
	}
}
