package device

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPulseSocket(t *testing.T) {
	run := t.TempDir()
	for _, c := range []struct{ server, runtime, want string }{
		{"unix:/tmp/p/native", "", "/tmp/p/native"},
		{"/tmp/q/native", "", "/tmp/q/native"},
		{"{abc123}unix:/tmp/r/native tcp:host:4713", "", "/tmp/r/native"},
		{"tcp:localhost:4713", run, ""}, // a TCP server is not checked, and PULSE_SERVER wins
		{"", run, ""},                   // no socket under XDG_RUNTIME_DIR
	} {
		t.Setenv("PULSE_SERVER", c.server)
		t.Setenv("XDG_RUNTIME_DIR", c.runtime)
		if got := pulseSocket(); got != c.want {
			t.Errorf("PULSE_SERVER=%q: %q, want %q", c.server, got, c.want)
		}
	}
	os.MkdirAll(filepath.Join(run, "pulse"), 0o755)
	os.WriteFile(filepath.Join(run, "pulse", "native"), nil, 0o644)
	t.Setenv("PULSE_SERVER", "")
	if got := pulseSocket(); got != filepath.Join(run, "pulse", "native") {
		t.Errorf("the runtime socket: %q", got)
	}
}

// TestPulseGate: a server that refuses connections holds reopening back (the error names
// it) until pulseGrace of refusals has passed; an answer resets the run; no socket, no check.
func TestPulseGate(t *testing.T) {
	now := time.Unix(1000, 0)
	refused := errors.New("connection refused")
	var dialErr error
	g := &pulseGate{socket: func() string { return "/run/pulse/native" }, dial: func(string) error { return dialErr },
		now: func() time.Time { return now }}
	if err := g.check(); err != nil {
		t.Fatalf("an answering server: %v", err)
	}
	dialErr = refused
	if err := g.check(); err == nil || !errors.Is(err, refused) || !strings.Contains(err.Error(), "/run/pulse/native") {
		t.Fatalf("a refusing server: %v", err)
	}
	now = now.Add(pulseGrace - time.Second)
	if err := g.check(); err == nil {
		t.Fatal("refusals within the grace let PortAudio try")
	}
	now = now.Add(time.Second)
	if err := g.check(); err != nil {
		t.Fatalf("after %v of refusals: %v", pulseGrace, err)
	}
	dialErr = nil
	g.check()
	dialErr = refused
	if err := g.check(); err == nil {
		t.Fatal("a new run of refusals after an answer was let through")
	}
	g.socket = func() string { return "" }
	if err := g.check(); err != nil {
		t.Fatalf("no socket to check: %v", err)
	}

	// the real dial: a listening socket answers, a stale one refuses
	sock := filepath.Join(t.TempDir(), "native")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Skip(err)
	}
	real := newPulseGate()
	real.socket = func() string { return sock }
	if err := real.check(); err != nil {
		t.Fatalf("a listening socket: %v", err)
	}
	l.Close()
	os.WriteFile(sock, nil, 0o644) // stale
	if err := real.check(); err == nil {
		t.Fatal("a stale socket answered")
	}
}

// TestReopenWaitsForTheServer: while ready refuses, the reopener does not open at all (the
// refusal is a failure with backoff); once it passes, the device opens.
func TestReopenWaitsForTheServer(t *testing.T) {
	op, clk := newOpener[*Capture](t), newClock(t)
	c1 := fakeCapture(t, "mic")
	rc := &ResilientCapture{}
	rc.r = newReopener(Input, "mic", Recovery{NoFallback: true, NoRescan: true, MinBackoff: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, op.open, nil)
	rc.r.after, rc.r.now = clk.after, func() time.Time { return clk.now }
	down := make(chan bool, 1)
	down <- true
	rc.r.ready = func() error {
		d := <-down
		down <- d
		if d {
			return errors.New("server down")
		}
		return nil
	}
	rc.r.start(c1)
	t.Cleanup(func() { release(op, clk); rc.Close() })
	kill(&c1.stream)
	clk.expect(t, 100*time.Millisecond) // refused without an open (an open would block on op.calls)
	if h := rc.r.health(); h.Failures < 1 || !strings.Contains(h.LastError, "server down") {
		t.Fatalf("health while the server is down: %+v", h)
	}
	<-down
	down <- false
	clk.fire <- clk.now
	op.expect(t, "mic", fakeCapture(t, "mic"), nil)
}

// TestPulseAwait: a first open waits for a server still starting (until it answers), and
// gives up waiting after the bound.
func TestPulseAwait(t *testing.T) {
	now := time.Unix(1000, 0)
	refusals := 3
	g := &pulseGate{socket: func() string { return "/run/pulse/native" }, now: func() time.Time { return now },
		dial: func(string) error {
			if refusals > 0 {
				refusals--
				return errors.New("refused")
			}
			return nil
		}}
	sleeps := 0
	sleep := func(d time.Duration) { sleeps++; now = now.Add(d) }
	g.await(startWait, sleep)
	if sleeps != 3 {
		t.Fatalf("waited %d times for a server that answered on the 4th try", sleeps)
	}
	refusals, sleeps = 1<<30, 0
	g.await(startWait, sleep)
	if sleeps != int(startWait/(100*time.Millisecond)) {
		t.Fatalf("a server that never answers: %d waits", sleeps)
	}
	g.socket = func() string { return "" }
	sleeps = 0
	g.await(startWait, sleep)
	if sleeps != 0 {
		t.Fatal("waited with no socket to check")
	}
}
