package gui

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"fyne.io/fyne/v2"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/wire"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/store"
)

// The lifecycle helpers run the real app in a child process under X (see window_test.go) on
// the private PulseAudio's null sink: "sigterm" is stopped by SIGTERM after one exchange,
// "idle" measures its own CPU time while it waits in push-to-talk.

// pulseWire points the app's devices at the parent's PulseAudio: the speaker at its null
// sink's rate, the microphone at the rate the app picks itself (as on a user's machine).
func pulseWire(cfg *config.Config) func(*wire.Options) {
	dev := os.Getenv(helperEnv + "_PULSE")
	if dev == "" {
		return func(*wire.Options) {}
	}
	cfg.Audio.Input, cfg.Audio.Output = dev, dev
	rate, _ := strconv.Atoi(os.Getenv(helperEnv + "_PULSE_RATE"))
	return func(o *wire.Options) {
		o.Stream = func(dir device.Direction, sc *device.StreamConfig) {
			if dir == device.Output {
				sc.SampleRate, sc.Channels = rate, 2
			}
		}
	}
}

// sigtermHelper runs the app as main does (SIGTERM cancels its context), with the tray asked
// for and no D-Bus session, answers one typed question, tells the parent it is ready and
// waits to be stopped.
func sigtermHelper(dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cfg := config.Default()
	cfg.LLM.Backend = "skills"
	stream := pulseWire(cfg)
	var rep helperReport
	err := Run(ctx, cfg, Options{
		StorePath: filepath.Join(dir, "parley.db"),
		Wire:      func(o *wire.Options) { o.NoDiscovery = true; stream(o) },
		Ready: func(u *UI, w fyne.Window) {
			u.OnEvent = func(e app.Event) {
				if e.Kind == app.EvTurnDone {
					rep.Answer = e.Exchange.FullAnswer
					os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644)
				}
			}
			u.submit("what is two plus two")
		},
	})
	if err != nil {
		rep.Err = err.Error()
	}
	writeReport(dir, rep)
	return 0
}

// idleHelper waits in push-to-talk with the microphone attached and reports the process's
// CPU time over the measuring window.
func idleHelper(dir string) int {
	cfg := config.Default()
	cfg.LLM.Backend = "skills"
	idleCase := os.Getenv(helperEnv + "_IDLE_CASE")
	switch idleCase {
	case "hands-free", "wake-word":
		cfg.Assistant.Mode = idleCase
	}
	stream := pulseWire(cfg)
	secs, _ := strconv.Atoi(os.Getenv(helperEnv + "_IDLE_SECONDS"))
	if secs <= 0 {
		secs = 10
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs+60)*time.Second)
	defer cancel()
	var rep helperReport
	err := Run(ctx, cfg, Options{
		StorePath: filepath.Join(dir, "parley.db"), NoTray: true,
		Wire: func(o *wire.Options) { o.NoDiscovery = true; stream(o) },
		Ready: func(u *UI, w fyne.Window) {
			rep.TextOnly = u.textOnly
			if idleCase == "focus" { // the message field has the cursor, as after typing
				w.Canvas().Focus(u.talk.entry)
			}
			go func() {
				time.Sleep(3 * time.Second) // start-up work settles
				// where the idle time goes
				if p := os.Getenv(helperEnv + "_CPUPROFILE"); p != "" {
					if f, err := os.Create(p + "-" + idleCase); err == nil {
						pprof.StartCPUProfile(f)
						defer func() { pprof.StopCPUProfile(); f.Close() }()
					}
				}
				c0, t0 := cpuTime(), time.Now()
				time.Sleep(time.Duration(secs) * time.Second)
				rep.IdleCPU = 100 * float64(cpuTime()-c0) / float64(time.Since(t0))
				fyne.Do(func() { quitSoon(w) })
			}()
		},
	})
	if err != nil {
		rep.Err = err.Error()
	}
	writeReport(dir, rep)
	return 0
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestQuitOnSIGTERM: SIGTERM (the session ending, systemd, kill) closes the app cleanly
// without a D-Bus session, though a tray was asked for: exit status 0, the exchange in the
// store, the store closed (SQLite's write-ahead log folded back into the database and
// removed), and the log file says so.
func TestQuitOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Xvfb and the app")
	}
	display := requireDisplay(t)
	pulse := audiotest.RequirePulse(t)
	dir, out, hung := quitOnce(t, display, pulse)
	if hung {
		// KNOWN ISSUE: once (in a full make test under load) the app had not exited 30 s after
		// SIGTERM; its goroutines (dumped by SIGQUIT) are logged here. One fresh attempt.
		t.Logf("KNOWN ISSUE: the app did not exit within 30 s of SIGTERM; its goroutines:\n%s", tail([]byte(out.String()), 20000))
		if dir, out, hung = quitOnce(t, display, pulse); hung {
			t.Fatalf("the app did not exit within 30 s of SIGTERM, twice\n%s", tail([]byte(out.String()), 20000))
		}
	}
	if strings.Contains(out.String(), "panic") {
		t.Errorf("the app panicked on the way out:\n%s", tail([]byte(out.String()), 4000))
	}
	var rep helperReport
	if b, err := os.ReadFile(filepath.Join(dir, "report.json")); err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("no report from the app: %v", err)
	}
	if rep.Err != "" {
		t.Errorf("Run returned %q", rep.Err)
	}
	db := filepath.Join(dir, "parley.db")
	if _, err := os.Stat(db + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store was not closed: %s-wal is still there (%v)", db, err)
	}
	s, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	convs, err := s.Conversations(context.Background(), store.ListOptions{})
	if err != nil || len(convs) != 1 || convs[0].Turns != 2 {
		t.Errorf("stored conversations %+v (%v), want the one exchange", convs, err)
	}
	logText, err := os.ReadFile(filepath.Join(dir, "state", "parley", logName))
	if err != nil {
		t.Fatalf("no log file: %v", err)
	}
	for _, want := range []string{"desktop app starting", "no D-Bus session bus", "desktop app closed"} {
		if !strings.Contains(string(logText), want) {
			t.Errorf("the log file lacks %q:\n%s", want, tail(logText, 3000))
		}
	}
}

// measureIdle runs the idle helper and returns its CPU use in percent of a core.
func measureIdle(tb testing.TB, display string, secs int, idleCase string) float64 {
	tb.Helper()
	pulse := audiotest.RequirePulse(tb)
	tb.Setenv(helperEnv+"_IDLE_CASE", idleCase)
	tb.Setenv(helperEnv+"_PULSE", pulse.Device)
	tb.Setenv(helperEnv+"_PULSE_RATE", strconv.Itoa(pulse.Rate))
	tb.Setenv(helperEnv+"_IDLE_SECONDS", strconv.Itoa(secs))
	rep, out, err := runHelper(tb, display, "idle", time.Duration(secs+90)*time.Second)
	if err != nil {
		tb.Fatalf("idle app: %v\n%s", err, tail(out, 4000))
	}
	if rep.TextOnly {
		tb.Fatalf("the app could not open the audio devices, so it measured a text-only app\n%s", tail(out, 4000))
	}
	return rep.IdleCPU
}

// TestIdleCPU: the app waiting with a microphone and speaker attached (in each of idleCases)
// uses almost no CPU (the issue measured 36–52 % of a core; the aim is under 2 %, measured about
// 1 %). The bound here is loose, for loaded CI machines; BenchmarkIdleCPU reports the figure.
func TestIdleCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Xvfb and the app")
	}
	display := requireDisplay(t)
	for _, c := range idleCases {
		cpu := measureIdle(t, display, 8, c)
		t.Logf("idle app, %s: %.2f%% of a core", c, cpu)
		limit := 6.0 // the aim is 2 %; a busy CI machine gets room
		if c == "hands-free" || c == "wake-word" {
			limit = 8 // the microphone open and its detectors listening: 1.1-2.4 % here (docs/DESIGN.md, Idle)
		}
		if cpu > limit {
			t.Errorf("the idle app (%s) uses %.1f%% of a core; want under %.0f%%", c, cpu, limit)
		}
	}
}

// idleCases are the states the app rests in: push-to-talk with nothing focused, with the
// message field focused (its cursor blinking), and listening hands-free or for the wake word
// to silence.
var idleCases = []string{"push-to-talk", "focus", "hands-free", "wake-word"}

// BenchmarkIdleCPU reports the idle app's CPU use (percent of a core) with audio devices
// attached, in each of idleCases. The listening cases are measured again with the microphone
// through PortAudio and ALSA's PulseAudio plug-in (PARLEY_AUDIO_BACKEND=portaudio), the path
// before PulseAudio's own API: the baseline, in the same run.
func BenchmarkIdleCPU(b *testing.B) {
	display := requireDisplay(b)
	measure := func(name, c, backend string) {
		b.Run(name, func(b *testing.B) {
			b.Setenv("PARLEY_AUDIO_BACKEND", backend)
			var sum float64
			for i := 0; i < b.N; i++ {
				sum += measureIdle(b, display, 20, c)
			}
			b.ReportMetric(sum/float64(b.N), "%core-idle")
		})
	}
	for _, c := range idleCases {
		measure(c, c, "")
		if c == "hands-free" || c == "wake-word" {
			measure(c+"/portaudio", c, "portaudio")
		}
	}
}

// quitOnce starts the sigterm helper, waits for its answer, sends SIGTERM and waits up to 30 s
// for it to exit (hung: it did not; it was then sent SIGQUIT for a goroutine dump and killed).
func quitOnce(t *testing.T, display string, pulse *audiotest.Pulse) (string, *lockedBuffer, bool) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(helperEnviron(dir, display), helperEnv+"_MODE=sigterm",
		helperEnv+"_PULSE="+pulse.Device, helperEnv+"_PULSE_RATE="+strconv.Itoa(pulse.Rate),
		"DBUS_SESSION_BUS_ADDRESS=", "XDG_RUNTIME_DIR="+filepath.Join(dir, "run"))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ready := false
	for deadline := time.Now().Add(120 * time.Second); !ready && time.Now().Before(deadline); {
		select {
		case err := <-exited:
			t.Fatalf("the app exited before it was stopped: %v\n%s", err, tail([]byte(out.String()), 4000))
		case <-time.After(100 * time.Millisecond):
		}
		_, err := os.Stat(filepath.Join(dir, "ready"))
		ready = err == nil
	}
	if !ready {
		cmd.Process.Kill()
		t.Fatalf("the app did not answer\n%s", tail([]byte(out.String()), 4000))
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, tail([]byte(out.String()), 4000))
		}
	case <-time.After(30 * time.Second):
		signalThenKill(cmd.Process, syscall.SIGQUIT, exited) // SIGQUIT: the goroutine dump
		return dir, out, true
	}
	return dir, out, false
}
