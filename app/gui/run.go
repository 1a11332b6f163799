package gui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/driver/desktop"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/logging"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/app/wire"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/store"
)

// AppID is the desktop app's identifier (FyneApp.toml, preferences, the .desktop file).
const AppID = "io.github.parley_voice.parley"

// Options tune Run.
type Options struct {
	Log       *slog.Logger
	StorePath string // overrides store.path
	NoAudio   bool   // text only: no microphone, speaker or speech recognition
	NoTray    bool   // no system tray icon
	// Wire adjusts the options the assistant is built with.
	Wire func(*wire.Options)
	// Started is called on the UI goroutine once the window is shown, and Ready once the
	// assistant is attached (the screenshot test and the start-up benchmark use them).
	Started func(u *UI, w fyne.Window)
	Ready   func(u *UI, w fyne.Window)
	// LogLevel is the log file's level; LogDir where it is written (default
	// logging.StateDir(): ~/.local/state/parley).
	LogLevel slog.Level
	LogDir   string
	// Diagnostics is what Settings → Copy diagnostics copies (doctor's JSON report).
	Diagnostics func(ctx context.Context) ([]byte, error)
	// SetUpGPU is what Settings → Set up GPU runs (doctor --gpu).
	SetUpGPU func(ctx context.Context, progress func(what string, done, total int64)) (string, error)
	// Services adjusts the services before the window is built (tests).
	Services func(*Services)
}

// Log file: parley.log in the state directory, rotated at 5 MB, three old files kept.
const (
	logName     = "parley.log"
	logMaxBytes = 5 << 20
	logKeep     = 3
)

// openLog adds the rotating log file to log (stderr stays as it was). Without a writable
// state directory the app logs to stderr only, and says so there.
func openLog(log *slog.Logger, dir string, level slog.Level) (*slog.Logger, io.Closer) {
	if dir == "" {
		dir = logging.StateDir()
	}
	f, err := logging.OpenRotating(filepath.Join(dir, logName), logMaxBytes, logKeep)
	if err != nil {
		log.Warn("no log file", "err", err)
		return log, io.NopCloser(nil)
	}
	file := slog.NewTextHandler(f, &slog.HandlerOptions{Level: level})
	return slog.New(slog.NewMultiHandler(log.Handler(), file)), f
}

// Run opens the desktop app and returns when its window closes or ctx ends. Call it on the
// main goroutine, and only when a display is available (main checks before any Fyne call).
func Run(ctx context.Context, cfg *config.Config, o Options) error {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	logDir := o.LogDir
	if logDir == "" {
		logDir = logging.StateDir()
	}
	log, logFile := openLog(log, logDir, o.LogLevel)
	defer logFile.Close()
	slog.SetDefault(log)
	defer routeStdLog(log)() // Fyne's error reports, one record each at their level
	log.Info("desktop app starting", "pid", os.Getpid(), "log_dir", logDir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	fa := fyneapp.NewWithID(AppID)
	fa.SetIcon(appIcon())
	fa.Settings().SetTheme(newTheme())
	w := fa.NewWindow("Parley")
	w.SetIcon(appIcon())

	// the app's one factory, over the configuration it starts with and the logger with its
	// file: the services, the wizard's and every assistant the app builds open engines
	// through it (an assistant rebuilt with saved settings through fac.With)
	fac := factory.New(cfg, log)
	storePath := fac.StorePath(o.StorePath)
	r := &runner{cfg: cfg, fac: fac, o: o, log: log, storePath: storePath}
	svc := Services{
		Devices:     deviceService{log: log},
		GPUs:        gpu.DiscoverGPUs,
		Discover:    discoverServers,
		Config:      cfg,
		LogDir:      logDir,
		Diagnostics: o.Diagnostics,
		SetUpGPU:    o.SetUpGPU,
	}
	if m, err := newModelService(log); err == nil {
		svc.Models = m
	} else {
		log.Warn("model manager unavailable", "err", err)
	}
	vs := &voiceService{cfg: cfg, fac: fac, log: log}
	if lib, err := fac.Voices(); err == nil {
		vs.lib = lib
	} else {
		log.Warn("voice library unavailable", "err", err)
	}
	vs.speaker = r.playAside
	svc.Voices = vs
	clones := newCloneService(fac)
	svc.Clone = clones
	// one store for the History panel and every assistant the app builds (one pool, and one
	// place that closes it, after the assistant)
	db, err := fac.Store(storePath)
	if err == nil {
		r.db = db
		svc.History = historyService{db}
		svc.Prefs = prefsService{db}
		ts := tune.NewTrainingService(db, fac)
		ts.Voice = clones.CloneService // the voice goal's models and library
		svc.Training = ts
	} else {
		log.Warn("history unavailable", "err", err)
	}
	svc.SetMode = func(m app.Mode) error {
		c := *r.current()
		c.Assistant.Mode = m.String()
		return r.rebuild(ctx, &c)
	}
	svc.SaveConfig = func(c *config.Config) error {
		path := c.Path
		if path == "" {
			path = config.DefaultPath()
		}
		if err := c.Save(path); err != nil {
			return err
		}
		c.Path = path
		go r.rebuild(ctx, c)
		return nil
	}
	svc.Reload = func() { go r.rebuild(ctx, r.current()) }
	svc.NewConversation = r.newConversation
	svc.TurnAudio = func(turn int64) (string, string) {
		r.mu.Lock()
		a := r.a
		r.mu.Unlock()
		if a == nil || a.History == nil {
			return "", ""
		}
		return a.History.AudioOf(turn)
	}

	if o.Services != nil {
		o.Services(&svc)
	}
	u := New(fa, w, svc)
	r.ui = u
	w.SetContent(u.Content())
	w.Resize(fyne.NewSize(1040, 720))
	w.CenterOnScreen()
	w.SetMaster()
	if !o.NoTray {
		// Fyne's tray (fyne.io/systray) crashes the app on quit when it could not reach a
		// D-Bus session bus, so without one there is no tray
		if sessionBus() {
			installTray(fa, w, u)
		} else {
			log.Info("no D-Bus session bus: no system tray icon")
		}
	}

	fa.Lifecycle().SetOnStarted(func() {
		if o.Started != nil {
			o.Started(u, w)
		}
		go r.rebuild(ctx, cfg)
	})
	go func() {
		<-ctx.Done()
		fyne.Do(fa.Quit)
	}()
	err = showAndRun(w, log)
	u.wizard.Quit() // a training job stops, resumable, before the store closes
	cancel()
	// the assistant first (its last turn is recorded), then what it used
	r.close()
	vs.Close()
	if db != nil {
		if cerr := db.Close(); cerr != nil {
			log.Error("history store", "err", cerr)
			err = errors.Join(err, cerr)
		}
	}
	log.Info("desktop app closed", "assistant", "closed", "store", storePath, "err", err)
	return err
}

// showAndRun runs the window until it closes. A panic inside the toolkit (its tray library
// has crashed on quit) is logged and returned as an error, so that Run still closes the
// assistant and the store on its way out.
func showAndRun(w fyne.Window, log *slog.Logger) (err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("the window toolkit panicked", "panic", p)
			err = fmt.Errorf("gui: the window toolkit failed: %v", p)
		}
	}()
	w.ShowAndRun()
	return nil
}

// partialEvery is how often the utterance being heard is transcribed for the live
// transcript (each pass takes a SenseVoice-Small call on the utterance so far).
const partialEvery = 800 * time.Millisecond

// runner owns the running assistant and rebuilds it when the mode or the settings change.
type runner struct {
	mu        sync.Mutex
	build     sync.Mutex // one build at a time
	cfg       *config.Config
	fac       *factory.Factory // the app's (Run's); an assistant is built through fac.With(its cfg)
	o         Options
	log       *slog.Logger
	storePath string
	db        *store.Store // nil: the assistant opens its own
	a         *wire.Assistant
	resume    *wire.Resume // the conversation the next assistant continues
	ui        *UI
	closed    bool
}

func (r *runner) current() *config.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg
}

// rebuild closes the running assistant and builds one from cfg, off the UI goroutine.
// Audio that cannot be opened leaves a text-only assistant with a note saying why.
func (r *runner) rebuild(ctx context.Context, cfg *config.Config) error {
	r.build.Lock()
	defer r.build.Unlock()
	r.mu.Lock()
	old := r.a
	r.a = nil
	r.cfg = cfg
	r.mu.Unlock()
	if old != nil {
		r.ui.do(func() { r.ui.Detach("Restarting…") })
		old.Close()
		res := old.Resume() // after Close: the last turn is recorded
		r.mu.Lock()
		r.resume = &res
		r.mu.Unlock()
	}
	r.mu.Lock()
	resume := r.resume
	r.mu.Unlock()
	wo := wire.Options{Log: r.log, StorePath: r.storePath, Store: r.db, NoAudio: r.o.NoAudio, Resume: resume}
	wo.Loop = func(lo *app.Options) { lo.Partials = partialEvery } // a live transcript while the user speaks
	if r.o.Wire != nil {
		r.o.Wire(&wo)
	}
	bctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	fac := r.fac.With(cfg) // the app's factory, unless the settings changed since it started
	a, err := wire.BuildFrom(bctx, fac, wo)
	var notes []app.Note
	if err != nil && !wo.NoAudio && ctx.Err() == nil {
		r.log.Warn("assistant with audio failed; text only", "err", err)
		notes = append(notes, app.Note{Part: app.PartAudio, Kind: app.NoteUnavailable, Err: err,
			Message: "audio unavailable (" + err.Error() + "): Parley answers typed messages in text. Check the microphone and speaker in Settings."})
		wo.NoAudio = true
		a, err = wire.BuildFrom(bctx, fac, wo)
	}
	if err != nil {
		r.ui.do(func() {
			r.ui.Detach("Not running")
			r.ui.showFix(app.Note{Part: app.PartOf(err), Kind: app.NoteFailed, Err: err, Message: "Parley could not start: " + err.Error()})
		})
		return err
	}
	notes = append(notes, a.Notes...)
	missing := r.firstRunMissing(bctx)
	notes = withoutPulls(notes, missing)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		a.Close()
		return context.Canceled
	}
	r.a = a
	r.mu.Unlock()
	r.ui.do(func() {
		r.ui.conv.voice = a.VoiceName
		r.ui.voiceName = a.VoiceName
		r.ui.textOnly = wo.NoAudio
		if wo.NoAudio {
			r.ui.conv.voice = ""
		}
		if r.o.NoAudio { // asked for; a failure to open the devices has its own note
			notes = append(notes, app.Note{Part: app.PartAudio, Kind: app.NoteInfo,
				Message: "Text only: no microphone or speaker is in use, so Parley answers in writing."})
		}
		r.ui.Attach(a.Assistant, notes)
		r.ui.offerFirstRun(missing, func() { go r.rebuild(ctx, r.current()) })
		if r.o.Ready != nil {
			r.o.Ready(r.ui, r.ui.win)
		}
	})
	return nil
}

// playAside is how a voice preview plays while an assistant with a speaker runs: on its
// speaker, after it has fallen quiet (nil without one).
func (r *runner) playAside() func(ctx context.Context, b *audio.Buffer) error {
	r.mu.Lock()
	a := r.a
	r.mu.Unlock()
	if a == nil || a.Speaker == nil {
		return nil
	}
	return func(ctx context.Context, b *audio.Buffer) error {
		if s := a.State(); s == app.Thinking || s == app.Speaking || s == app.Transcribing {
			a.Cancel()
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if s := a.State(); s == app.Idle || s == app.Listening {
					break
				}
			}
		}
		return a.PlayAside(ctx, b)
	}
}

// newConversation starts a new conversation: the running assistant stops what it is doing
// and forgets, and its next turn opens a new stored conversation.
func (r *runner) newConversation() error {
	r.mu.Lock()
	a := r.a
	r.resume = nil
	r.mu.Unlock()
	if a == nil {
		return nil
	}
	a.Cancel()
	a.NewConversation()
	return nil
}

// firstRunMissing lists the essential models that are not installed (a packaged install's
// first run), for the first-run offer.
func (r *runner) firstRunMissing(ctx context.Context) []assets.ModelStatus {
	m := r.ui.svc.Models
	if m == nil {
		return nil
	}
	list, err := m.List(ctx)
	if err != nil {
		r.log.Warn("listing models for the first-run check", "err", err)
		return nil
	}
	return wire.MissingOf(list)
}

// withoutPulls drops the notes whose fix is a model the first-run offer fetches.
func withoutPulls(notes []app.Note, missing []assets.ModelStatus) []app.Note {
	var out []app.Note
	for _, n := range notes {
		if n.Model == "" || !slices.ContainsFunc(missing, func(m assets.ModelStatus) bool { return m.ID == n.Model }) {
			out = append(out, n)
		}
	}
	return out
}

func (r *runner) close() {
	r.mu.Lock()
	r.closed = true
	a := r.a
	r.a = nil
	r.mu.Unlock()
	if a != nil {
		a.Close()
	}
}

// installTray puts Parley in the system tray (show, hide, mute, quit) where the desktop has
// one.
func installTray(fa fyne.App, w fyne.Window, u *UI) {
	desk, ok := fa.(desktop.App)
	if !ok {
		return
	}
	var menu *fyne.Menu
	mute := fyne.NewMenuItem("Mute microphone", nil)
	mute.Action = func() {
		u.setMuted(!u.muted)
		mute.Checked = u.muted
		menu.Refresh()
	}
	menu = fyne.NewMenu("Parley",
		fyne.NewMenuItem("Show Parley", func() { w.Show(); w.RequestFocus() }),
		fyne.NewMenuItem("Hide", func() { w.Hide() }),
		mute,
	)
	desk.SetSystemTrayMenu(menu)
	desk.SetSystemTrayIcon(appIcon())
}

// sessionBus says whether a D-Bus session bus answers: DBUS_SESSION_BUS_ADDRESS's unix
// socket, or $XDG_RUNTIME_DIR/bus where that is unset (where the tray library looks).
func sessionBus() bool {
	addr, set := os.LookupEnv("DBUS_SESSION_BUS_ADDRESS")
	if !set || addr == "" {
		if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
			addr = "unix:path=" + filepath.Join(dir, "bus")
		}
	}
	for _, a := range busAddresses(addr) {
		c, err := net.DialTimeout(a.network, a.addr, time.Second)
		if err == nil {
			c.Close()
			return true
		}
	}
	return false
}

type busAddr struct{ network, addr string }

// busAddresses parses a D-Bus server address list ("unix:path=/run/user/1000/bus",
// "unix:abstract=/tmp/dbus-x,guid=…;tcp:host=h,port=p") into what net.Dial takes. Transports
// it cannot dial are left out.
func busAddresses(list string) []busAddr {
	var out []busAddr
	for _, entry := range strings.Split(list, ";") {
		transport, params, ok := strings.Cut(entry, ":")
		if !ok {
			continue
		}
		kv := map[string]string{}
		for _, p := range strings.Split(params, ",") {
			if k, v, ok := strings.Cut(p, "="); ok {
				if u, err := url.PathUnescape(v); err == nil {
					v = u
				}
				kv[k] = v
			}
		}
		switch transport {
		case "unix":
			if p := kv["path"]; p != "" {
				out = append(out, busAddr{"unix", p})
			} else if p := kv["abstract"]; p != "" {
				out = append(out, busAddr{"unix", "@" + p})
			}
		case "tcp":
			if kv["host"] != "" && kv["port"] != "" {
				out = append(out, busAddr{"tcp", net.JoinHostPort(kv["host"], kv["port"])})
			}
		}
	}
	return out
}
