// Package audiotest holds test harnesses for audio code: a private PulseAudio server with a
// null sink (real devices without a sound card), espeak-ng utterances, noise, and
// cross-correlation to find a signal inside a recording. Other packages' tests (the assistant's
// end-to-end tests) import it.
package audiotest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ErrNoPulse means PulseAudio is not installed.
var ErrNoPulse = errors.New("audiotest: pulseaudio is not installed")

// Pulse is a private PulseAudio server listening on its own socket, with one null sink whose
// monitor is the default source. While it runs, PULSE_SERVER points at it, so PortAudio's
// ALSA "pulse" device (and paplay/parec) use it.
type Pulse struct {
	Dir     string // runtime directory (socket, config)
	Server  string // PULSE_SERVER value, "unix:DIR/native"
	Sink    string // the null sink's name
	Monitor string // its monitor source
	Device  string // the PortAudio device name to open ("pulse")
	Rate    int    // the sink's sample rate

	bin    string
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	log    bytes.Buffer
	env    map[string]*string // previous values of the variables we set
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// PulseConfig configures StartPulse.
type PulseConfig struct {
	Dir  string // runtime directory; required
	Sink string // null sink name; default "parley_test"
	Rate int    // sink rate; default 48000
}

// StartPulse starts a PulseAudio daemon as a child process and waits until it answers. It
// sets PULSE_SERVER, PULSE_SINK, PULSE_SOURCE and PULSE_CLIENTCONFIG (no autospawn) in this
// process's environment until Close. Start it before PortAudio is initialised.
func StartPulse(ctx context.Context, cfg PulseConfig) (*Pulse, error) {
	bin, err := exec.LookPath("pulseaudio")
	if err != nil {
		return nil, ErrNoPulse
	}
	if cfg.Sink == "" {
		cfg.Sink = "parley_test"
	}
	if cfg.Rate == 0 {
		cfg.Rate = 48000
	}
	if cfg.Dir == "" {
		return nil, errors.New("audiotest: PulseConfig.Dir is required")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "native")
	p := &Pulse{Dir: dir, Server: "unix:" + sock, Sink: cfg.Sink,
		Monitor: cfg.Sink + ".monitor", Device: "pulse", Rate: cfg.Rate}
	script := fmt.Sprintf(`load-module module-null-sink sink_name=%[1]s rate=%[2]d channels=2 format=float32le
load-module module-native-protocol-unix socket=%[3]s auth-anonymous=1
set-default-sink %[1]s
set-default-source %[1]s.monitor
`, cfg.Sink, cfg.Rate, sock)
	if err := os.WriteFile(filepath.Join(dir, "parley.pa"), []byte(script), 0o600); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("default-sample-rate = %d\ndefault-sample-format = float32le\nresample-method = soxr-vhq\n", cfg.Rate)
	if err := os.MkdirAll(filepath.Join(dir, "pulse"), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "pulse", "daemon.conf"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "client.conf"), []byte("autospawn = no\n"), 0o600); err != nil {
		return nil, err
	}
	p.bin = bin
	p.setenv(map[string]string{
		"PULSE_SERVER": p.Server, "PULSE_SINK": p.Sink, "PULSE_SOURCE": p.Monitor,
		"PULSE_CLIENTCONFIG": filepath.Join(dir, "client.conf"), "JACK_NO_START_SERVER": "1",
	})
	if err := p.spawn(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Restart starts the server again after Kill (or restarts a running one), on the same socket
// with the same null sink, and waits until it answers: a PulseAudio restart as users see it.
func (p *Pulse) Restart(ctx context.Context) error {
	p.Kill()
	return p.spawn(ctx)
}

// spawn starts the daemon and waits until it answers.
func (p *Pulse) spawn(ctx context.Context) error {
	dir := p.Dir
	p.exited = make(chan struct{})
	p.cmd = exec.Command(p.bin, "-n", "-F", filepath.Join(dir, "parley.pa"),
		"--daemonize=no", "--exit-idle-time=-1", "--disallow-exit", "--use-pid-file=false",
		"--log-target=stderr", "--log-level=error", "--disable-shm=true")
	p.cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+dir, "HOME="+dir, "XDG_CONFIG_HOME="+dir,
		"PULSE_RUNTIME_PATH="+dir, "PULSE_STATE_PATH="+dir, "DBUS_SESSION_BUS_ADDRESS=disabled:")
	lw := lockedWriter{&p.mu, &p.log}
	p.cmd.Stdout, p.cmd.Stderr = lw, lw
	if err := p.cmd.Start(); err != nil {
		p.cmd = nil
		return fmt.Errorf("audiotest: starting pulseaudio: %w", err)
	}
	cmd, exited := p.cmd, p.exited
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := p.pactl(ctx, "info")
		if err == nil && strings.Contains(out, "Default Sink: "+p.Sink) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("audiotest: pulseaudio exited at start: %s", strings.TrimSpace(p.Log()))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("audiotest: pulseaudio did not answer in 15 s: %v %s; log: %s", err, out, p.Log())
		}
	}
}

func (p *Pulse) setenv(vars map[string]string) {
	p.env = map[string]*string{}
	for k, v := range vars {
		if old, ok := os.LookupEnv(k); ok {
			p.env[k] = &old
		} else {
			p.env[k] = nil
		}
		os.Setenv(k, v)
	}
}

func (p *Pulse) restoreEnv() {
	for k, v := range p.env {
		if v == nil {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, *v)
		}
	}
	p.env = nil
}

func (p *Pulse) pactl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "pactl", args...)
	cmd.Env = append(os.Environ(), "PULSE_SERVER="+p.Server)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Pactl runs pactl against this server.
func (p *Pulse) Pactl(ctx context.Context, args ...string) (string, error) {
	return p.pactl(ctx, args...)
}

// PlayFile plays a sound file into the null sink with paplay and waits until it is done.
func (p *Pulse) PlayFile(ctx context.Context, path string) error {
	cmd := exec.CommandContext(ctx, "paplay", "--device="+p.Sink, path)
	cmd.Env = append(os.Environ(), "PULSE_SERVER="+p.Server)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("audiotest: paplay %s: %v: %s", path, err, out)
	}
	return nil
}

// Kill ends the server abruptly (to simulate a lost device); Restart brings it back.
func (p *Pulse) Kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// Log is what the server printed.
func (p *Pulse) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Close stops the server and restores the environment.
func (p *Pulse) Close() error {
	if p.cmd != nil && p.cmd.Process != nil {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.exited:
			case <-time.After(3 * time.Second):
				p.cmd.Process.Kill()
				<-p.exited
			}
		}
	}
	p.restoreEnv()
	return nil
}

// RequirePulse starts a private PulseAudio for the test and stops it at cleanup. Without
// pulseaudio installed it skips, except under CI=true where it fails. Do not use it in
// parallel tests (it changes the environment).
func RequirePulse(t testing.TB) *Pulse {
	t.Helper()
	// a short directory: unix socket paths are limited to 107 bytes
	dir, err := os.MkdirTemp("", "parley-pulse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, err := StartPulse(context.Background(), PulseConfig{Dir: dir})
	if errors.Is(err, ErrNoPulse) {
		missing(t, "pulseaudio is not installed (build/setup.sh packages installs it)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// CPU is the CPU time the server has used so far (user and system, from /proc), so that a
// benchmark can count the audio work a client hands to the server; 0 when not known.
func (p *Pulse) CPU() time.Duration {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// fields after the command name (which may hold spaces) start at ") "
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ, 100 on Linux
}
