package gui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/wire"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/audio/device"
)

// The real-window test runs the app in a child process (this test binary again, with
// helperEnv set), because GLFW must own the process's main thread: TestMain hands the main
// goroutine to the app there. The parent starts Xvfb when there is no display, bounds the
// child with a timeout, and checks the screenshot and the child's report.

const helperEnv = "PARLEY_GUI_WINDOW_HELPER" // the directory the helper writes to

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		switch os.Getenv(helperEnv + "_MODE") {
		case "startup":
			os.Exit(startupHelper(dir, false))
		case "bare":
			os.Exit(startupHelper(dir, true))
		case "sigterm":
			os.Exit(sigtermHelper(dir))
		case "idle":
			os.Exit(idleHelper(dir))
		case "wizard":
			os.Exit(wizardHelper(dir))
		}
		os.Exit(windowHelper(dir))
	}
	os.Exit(m.Run())
}

// startupHelper measures the time from the start of Run to a shown, interactive window (the
// app's Started hook) and quits; bare does the same for a Fyne window holding one label,
// the baseline.
func startupHelper(dir string, bare bool) int {
	var rep helperReport
	t0 := time.Now()
	if bare {
		a := fyneapp.NewWithID(AppID + ".bare")
		w := a.NewWindow("Parley")
		w.SetContent(widget.NewLabel("Parley"))
		w.Resize(fyne.NewSize(1040, 720))
		a.Lifecycle().SetOnStarted(func() {
			rep.StartupMS = ms(time.Since(t0))
			quitSoon(w)
		})
		w.ShowAndRun()
		writeReport(dir, rep)
		return 0
	}
	cfg := config.Default()
	cfg.LLM.Backend = "skills"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := Run(ctx, cfg, Options{
		StorePath: filepath.Join(dir, "parley.db"), NoAudio: true, NoTray: true,
		Wire:    func(o *wire.Options) { o.NoDiscovery = true },
		Started: func(*UI, fyne.Window) { rep.StartupMS = ms(time.Since(t0)) },
		Ready: func(_ *UI, w fyne.Window) {
			rep.ReadyMS = ms(time.Since(t0))
			quitSoon(w)
		},
	})
	if err != nil {
		rep.Err = err.Error()
	}
	writeReport(dir, rep)
	return 0
}

// quitSoon hides the window and quits a moment later: quitting while the X pointer rests
// on a shown window can crash GLFW's event loop (a cursor event for a destroyed window).
func quitSoon(w fyne.Window) {
	w.Hide()
	go func() {
		time.Sleep(200 * time.Millisecond)
		fyne.Do(fyne.CurrentApp().Quit)
	}()
}

// runHelper runs this test binary as a window helper in mode and returns its report.
func runHelper(tb testing.TB, display, mode string, timeout time.Duration) (helperReport, []byte, error) {
	dir := tb.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(helperEnviron(dir, display), helperEnv+"_MODE="+mode)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	var rep helperReport
	b, rerr := os.ReadFile(filepath.Join(dir, "report.json"))
	if rerr == nil {
		rerr = json.Unmarshal(b, &rep)
	}
	if err == nil {
		err = rerr
	}
	if err == nil && rep.Err != "" {
		err = errors.New(rep.Err)
	}
	if mode == "" {
		if b, rerr := os.ReadFile(filepath.Join(dir, "screenshot.png")); rerr == nil {
			rep.shot = b
		}
		if b, rerr := os.ReadFile(filepath.Join(dir, "voice.png")); rerr == nil {
			rep.voiceShot = b
		}
	}
	return rep, out, err
}

// helperEnviron is the environment of a helper writing to dir on display: its own config,
// data and state directories.
func helperEnviron(dir, display string) []string {
	return append(os.Environ(),
		helperEnv+"="+dir,
		"DISPLAY="+display,
		"WAYLAND_DISPLAY=",
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(dir, "data"),
		"XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"PARLEY_MODELS="+assets.ModelsDir(), // the installed (demo) models; the cache keeps the ORT library
		"PARLEY_CONFIG="+filepath.Join(dir, "config", "parley.toml"),
		"FYNE_SCALE=1",
		"LANG=en_US.UTF-8", "LC_ALL=",
	)
}

// BenchmarkWindowStartup: time from Run to a shown window in a real process under X
// (Xvfb when there is no display), against a bare Fyne window with one label.
func BenchmarkWindowStartup(b *testing.B) {
	display := requireDisplay(b)
	var app, base, ready float64
	for i := 0; i < b.N; i++ {
		r, out, err := runHelper(b, display, "bare", 60*time.Second)
		if err != nil {
			b.Fatalf("bare window: %v\n%s", err, tail(out, 2000))
		}
		base += r.StartupMS
		r, out, err = runHelper(b, display, "startup", 60*time.Second)
		if err != nil {
			b.Fatalf("app window: %v\n%s", err, tail(out, 12000))
		}
		app += r.StartupMS
		ready += r.ReadyMS
	}
	n := float64(b.N)
	b.ReportMetric(app/n, "ms/window")
	b.ReportMetric(ready/n, "ms/assistant-ready")
	b.ReportMetric(base/n, "ms/bare-window")
	b.ReportMetric(app/base, "x-baseline")
}

// helperReport is what the child tells the parent.
type helperReport struct {
	Question  string   `json:"question"`
	Answer    string   `json:"answer"`
	More      []string `json:"more"` // the answers to the follow-up questions
	Bubbles   int      `json:"bubbles"`
	StartupMS float64  `json:"startup_ms"` // Run called → window shown
	ReadyMS   float64  `json:"ready_ms"`   // Run called → assistant attached
	AnswerMS  float64  `json:"answer_ms"`  // question sent → turn done
	IdleCPU   float64  `json:"idle_cpu"`   // percent of a core while idle
	TextOnly  bool     `json:"text_only"`  // the assistant had no audio
	Err       string   `json:"error,omitempty"`

	shot      []byte // the screenshot, read by the parent
	voiceShot []byte // the voice panel's
}

// windowHelper runs the real app on the demo configuration (offline skills, no LLM
// discovery, text only), types a question, waits for the answer and captures the window.
func windowHelper(dir string) int {
	rep := helperReport{Question: "What time is it?"}
	followUps := []string{"What is 15 percent of 80?", "Set a timer for ten minutes for the pasta"}
	fail := func(err error) int {
		rep.Err = err.Error()
		writeReport(dir, rep)
		return 1
	}
	cfg := config.Default()
	cfg.LLM.Backend = "skills"
	noAudio, stream := true, func(*wire.Options) {}
	if dev := os.Getenv(helperEnv + "_PULSE"); dev != "" { // the parent's private PulseAudio
		noAudio = false
		cfg.Audio.Input, cfg.Audio.Output = dev, dev
		rate, _ := strconv.Atoi(os.Getenv(helperEnv + "_PULSE_RATE"))
		stream = func(o *wire.Options) {
			o.Stream = func(dir device.Direction, sc *device.StreamConfig) {
				sc.SampleRate = rate // the null sink's own rate
				if dir == device.Output {
					sc.Channels = 2
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	t0 := time.Now()
	var asked time.Time
	var result error = errors.New("the window closed before the answer")
	err := Run(ctx, cfg, Options{
		StorePath: filepath.Join(dir, "parley.db"),
		NoAudio:   noAudio,
		NoTray:    true,
		Wire:      func(o *wire.Options) { o.NoDiscovery = true; stream(o) },
		Started: func(u *UI, w fyne.Window) {
			rep.StartupMS = ms(time.Since(t0))
		},
		Ready: func(u *UI, w fyne.Window) {
			rep.ReadyMS = ms(time.Since(t0))
			u.OnEvent = func(e app.Event) {
				if e.Kind != app.EvTurnDone || e.Exchange == nil {
					return
				}
				if rep.Answer == "" {
					rep.AnswerMS = ms(time.Since(asked))
					rep.Answer = e.Exchange.FullAnswer
				} else {
					rep.More = append(rep.More, e.Exchange.FullAnswer)
				}
				if len(rep.More) < len(followUps) {
					u.talk.entry.SetText(followUps[len(rep.More)])
					u.submit(u.talk.entry.Text)
					return
				}
				rep.Bubbles = u.conv.count()
				u.OnEvent = nil
				// let the last layout and paint happen, then capture
				go func() {
					time.Sleep(700 * time.Millisecond)
					fyne.Do(func() {
						result = capture(w, filepath.Join(dir, "screenshot.png"))
						u.showTab(tabVoice) // the voice panel, with its engine's report
					})
					time.Sleep(1500 * time.Millisecond)
					fyne.Do(func() {
						if err := capture(w, filepath.Join(dir, "voice.png")); err != nil && result == nil {
							result = err
						}
						quitSoon(w)
					})
				}()
			}
			u.talk.entry.SetText(rep.Question)
			asked = time.Now()
			u.submit(u.talk.entry.Text)
		},
	})
	if err != nil {
		return fail(err)
	}
	if ctx.Err() != nil {
		return fail(fmt.Errorf("timed out: %w", ctx.Err()))
	}
	if result != nil {
		return fail(result)
	}
	writeReport(dir, rep)
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// capture saves the window as PNG: Fyne's canvas capture, or, where the GL read-back comes
// back blank (Mesa's software renderer under Xvfb), a grab of the X screen by ffmpeg's
// x11grab, cropped to the window.
func capture(w fyne.Window, path string) error {
	img := w.Canvas().Capture()
	if img == nil || uniform(img) {
		var err error
		if img, err = grabScreen(os.Getenv("DISPLAY")); err != nil {
			return fmt.Errorf("the canvas capture is blank, and grabbing the screen failed: %w", err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func uniform(img image.Image) bool {
	b := img.Bounds()
	if b.Empty() {
		return true
	}
	first := img.At(b.Min.X, b.Min.Y)
	r0, g0, b0, _ := first.RGBA()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bb, _ := img.At(x, y).RGBA()
			if r != r0 || g != g0 || bb != b0 {
				return false
			}
		}
	}
	return true
}

// grabScreen takes the X screen with ffmpeg and crops it to what is not the black root.
func grabScreen(display string) (image.Image, error) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "parley-grab")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "grab.png")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if b, err := exec.CommandContext(ctx, ff, "-loglevel", "error", "-y", "-f", "x11grab", "-draw_mouse", "0", "-i", display,
		"-frames:v", "1", out).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ffmpeg x11grab: %v: %s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, err
	}
	b := img.Bounds()
	box := image.Rectangle{Min: b.Max, Max: b.Min}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bb, _ := img.At(x, y).RGBA()
			if r|g|bb != 0 {
				box = box.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	if box.Empty() {
		return nil, errors.New("the screen is black")
	}
	if s, ok := img.(interface {
		SubImage(image.Rectangle) image.Image
	}); ok {
		return s.SubImage(box), nil
	}
	return img, nil
}

func writeReport(dir string, rep helperReport) {
	b, _ := json.MarshalIndent(rep, "", "  ")
	os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644)
}

// requireDisplay returns a DISPLAY for the child: the current one, or an Xvfb it starts
// (stopped at the end of the test). Without either it skips locally and fails in CI.
func requireDisplay(t testing.TB) string {
	t.Helper()
	if os.Getenv("PARLEY_GUI_USE_DISPLAY") != "" && os.Getenv("DISPLAY") != "" {
		return os.Getenv("DISPLAY")
	}
	xvfb, err := exec.LookPath("Xvfb")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("Xvfb is not installed (build/setup.sh installs xvfb)")
		}
		t.Skip("Xvfb is not installed; the real-window test needs it")
	}
	// Displays from a number unlikely to be taken (not :0, which a desktop or a neighbour
	// may hold); -displayfd makes Xvfb write the number once it accepts clients, and an
	// Xvfb that cannot have its display exits, so the next one is tried.
	first := 100 + os.Getpid()%700
	for n := first; n < first+20; n++ {
		if d, ok := startXvfb(t, xvfb, n); ok {
			return d
		}
	}
	t.Fatalf("Xvfb could not start on any display in :%d…:%d", first, first+19)
	return ""
}

// startXvfb starts Xvfb on display n and waits until it is ready; false when it exits.
func startXvfb(t testing.TB, xvfb string, n int) (string, bool) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// r stays open while Xvfb runs: it writes the number and the newline separately, and a
	// closed pipe kills it ("Cannot write display number to fd 3")
	cmd := exec.Command(xvfb, fmt.Sprintf(":%d", n), "-displayfd", "3", "-screen", "0", "1280x860x24", "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w}
	xlog := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = xlog, xlog
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatalf("start Xvfb: %v", err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() {
		// SIGTERM lets Xvfb remove its lock file and socket; SIGKILL only if it hangs
		signalThenKill(cmd.Process, syscall.SIGTERM, done)
		r.Close()
	}
	line := make(chan string, 1)
	go func() {
		var got []byte
		b := make([]byte, 16)
		for !bytes.Contains(got, []byte("\n")) {
			k, err := r.Read(b)
			got = append(got, b[:k]...)
			if err != nil {
				break
			}
		}
		line <- strings.TrimSpace(string(got))
	}()
	select {
	case num := <-line:
		if num == "" { // the pipe closed: Xvfb exited
			stop()
			return "", false
		}
		t.Cleanup(func() {
			stop()
			if t.Failed() {
				t.Logf("Xvfb :%s said:\n%s", num, tail([]byte(xlog.String()), 3000))
			}
		})
		return ":" + num, true
	case <-done:
		r.Close()
		return "", false
	case <-time.After(20 * time.Second):
		stop()
		t.Fatalf("Xvfb :%d did not come up in 20 s", n)
	}
	return "", false
}

// TestWindowScreenshot starts the real app under Xvfb on the demo models, sends a typed
// question, waits for the offline skills' answer and checks the window's screenshot shows
// the conversation. PARLEY_UPDATE_SCREENSHOT=1 copies it to docs/screenshot.png.
func TestWindowScreenshot(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real-window test starts Xvfb and the app")
	}
	display := requireDisplay(t)
	// a private PulseAudio with a null sink gives the app real devices: Parley speaks its
	// answers (espeak-ng) and the bubbles carry the whole latency bar
	pulse := audiotest.RequirePulse(t)
	t.Setenv(helperEnv+"_PULSE", pulse.Device)
	t.Setenv(helperEnv+"_PULSE_RATE", strconv.Itoa(pulse.Rate))
	rep, out, err := runHelper(t, display, "", 150*time.Second)
	if err != nil {
		// KNOWN ISSUE: once in a while under CI load the app exits with status 2 about half a
		// second after start, while it opens the PulseAudio devices (seen once in ~15 runs; the
		// head of its output, logged here, should name the crash). One fresh attempt.
		t.Logf("KNOWN ISSUE: the app run failed (%v); trying once more. Its output began:\n%s\n…and ended:\n%s", err, head(out, 4000), tail(out, 2000))
		rep, out, err = runHelper(t, display, "", 150*time.Second)
	}
	if err != nil {
		t.Fatalf("the app run failed: %v\n%s\n…\n%s", err, head(out, 4000), tail(out, 3000))
	}
	t.Logf("window shown %.0f ms after start, assistant ready at %.0f ms, answer in %.0f ms: %q",
		rep.StartupMS, rep.ReadyMS, rep.AnswerMS, rep.Answer)
	if !regexp.MustCompile(`\d{1,2}[:.]\d{2}|\b(o'clock|noon|midnight|past|to)\b`).MatchString(strings.ToLower(rep.Answer)) {
		t.Errorf("the answer to %q does not tell the time: %q", rep.Question, rep.Answer)
	}
	for _, a := range rep.More {
		t.Logf("follow-up answer: %q", a)
	}
	if rep.Bubbles < 6 {
		t.Errorf("%d bubbles shown, want the question and the answer", rep.Bubbles)
	}
	if len(rep.shot) == 0 {
		t.Fatal("the app wrote no screenshot")
	}
	img, err := png.Decode(bytes.NewReader(rep.shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	checkScreenshot(t, img)
	vimg, err := png.Decode(bytes.NewReader(rep.voiceShot))
	if err != nil {
		t.Fatalf("voice panel screenshot: %v", err)
	}
	if uniform(vimg) || vimg.Bounds().Dx() < 600 {
		t.Errorf("the voice panel's screenshot is blank or cut (%v)", vimg.Bounds())
	}
	if os.Getenv("PARLEY_UPDATE_SCREENSHOT") != "" {
		for name, b := range map[string][]byte{"screenshot.png": rep.shot, "voice-panel.png": rep.voiceShot} {
			dst := filepath.Join("..", "..", "docs", name)
			os.MkdirAll(filepath.Dir(dst), 0o755)
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("updated %s", dst)
		}
	}
}

// checkScreenshot looks for the conversation in the picture: the user's accent-coloured
// bubble on the right half and Parley's bubble on the left half.
func checkScreenshot(t *testing.T, img image.Image) {
	t.Helper()
	b := img.Bounds()
	if b.Dx() < 600 || b.Dy() < 400 {
		t.Fatalf("screenshot is %v, want the whole window", b.Size())
	}
	near := func(c color.Color, want color.Color) bool {
		r, g, bb, _ := c.RGBA()
		wr, wg, wb, _ := want.RGBA()
		d := func(x, y uint32) int { v := int(x>>8) - int(y>>8); return v * v }
		return d(r, wr)+d(g, wg)+d(bb, wb) < 300
	}
	th := newTheme()
	var userRight, parleyLeft int
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			c := img.At(x, y)
			mid := b.Min.X + b.Dx()/2
			if x > mid && (near(c, th.Color(colUserBubble, 0)) || near(c, th.Color(colUserBubble, 1))) {
				userRight++
			}
			if x < mid+b.Dx()/6 && (near(c, th.Color(colParleyBubble, 0)) || near(c, th.Color(colParleyBubble, 1))) {
				parleyLeft++
			}
		}
	}
	if userRight < 200 {
		t.Errorf("no user bubble on the right of the screenshot (%d accent pixels)", userRight)
	}
	if parleyLeft < 200 {
		t.Errorf("no Parley bubble on the left of the screenshot (%d bubble pixels)", parleyLeft)
	}
}

// lockedBuffer collects a child's output safely.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// signalThenKill sends sig and waits for the process to exit (exited: its Wait), killing it
// if it has not after 5 s.
func signalThenKill(p *os.Process, sig os.Signal, exited <-chan error) {
	p.Signal(sig)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		p.Kill()
		<-exited
	}
}

func head(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
