package gui

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/driver/desktop"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/wire"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/voices"
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
}

// Run opens the desktop app and returns when its window closes or ctx ends. Call it on the
// main goroutine, and only when a display is available (main checks before any Fyne call).
func Run(ctx context.Context, cfg *config.Config, o Options) error {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	fa := fyneapp.NewWithID(AppID)
	fa.SetIcon(appIcon())
	fa.Settings().SetTheme(newTheme())
	w := fa.NewWindow("Parley")
	w.SetIcon(appIcon())

	storePath := o.StorePath
	if storePath == "" {
		storePath = cfg.Store.Path
	}
	if storePath == "" {
		storePath = filepath.Join(assets.DataDir(), "parley.db")
	}
	r := &runner{cfg: cfg, o: o, log: log, storePath: storePath}
	svc := Services{
		Devices:  deviceService{log: log},
		GPUs:     gpu.DiscoverGPUs,
		Discover: discoverServers,
		Config:   cfg,
	}
	if m, err := newModelService(log); err == nil {
		svc.Models = m
	} else {
		log.Warn("model manager unavailable", "err", err)
	}
	vs := &voiceService{cfg: cfg, log: log}
	if lib, err := voices.Open(voices.DefaultDir()); err == nil {
		vs.lib = lib
	} else {
		log.Warn("voice library unavailable", "err", err)
	}
	defer vs.Close()
	svc.Voices = vs
	if s, err := store.Open(storePath); err == nil {
		defer s.Close()
		svc.History = historyService{s}
	} else {
		log.Warn("history unavailable", "err", err)
	}
	svc.SetMode = func(m app.Mode) error {
		c := *r.current()
		c.Assistant.Mode = []string{"push-to-talk", "hands-free", "wake-word"}[m]
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

	u := New(fa, w, svc)
	r.ui = u
	w.SetContent(u.Content())
	w.Resize(fyne.NewSize(1040, 720))
	w.CenterOnScreen()
	w.SetMaster()
	if !o.NoTray {
		installTray(fa, w, u)
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
	w.ShowAndRun()
	cancel()
	r.close()
	return nil
}

// runner owns the running assistant and rebuilds it when the mode or the settings change.
type runner struct {
	mu        sync.Mutex
	build     sync.Mutex // one build at a time
	cfg       *config.Config
	o         Options
	log       *slog.Logger
	storePath string
	a         *wire.Assistant
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
	}
	wo := wire.Options{Log: r.log, StorePath: r.storePath, NoAudio: r.o.NoAudio}
	if r.o.Wire != nil {
		r.o.Wire(&wo)
	}
	bctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	a, err := wire.Build(bctx, cfg, wo)
	var notes []string
	if err != nil && !wo.NoAudio && ctx.Err() == nil {
		r.log.Warn("assistant with audio failed; text only", "err", err)
		notes = append(notes, "audio unavailable ("+err.Error()+"): Parley answers typed messages in text. Check the microphone and speaker in Settings.")
		wo.NoAudio = true
		a, err = wire.Build(bctx, cfg, wo)
	}
	if err != nil {
		r.ui.do(func() {
			r.ui.Detach("Not running")
			r.ui.showFix(fmt.Sprintf("Parley could not start: %v", err))
		})
		return err
	}
	notes = append(notes, a.Notes...)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		a.Close()
		return context.Canceled
	}
	r.a = a
	r.mu.Unlock()
	r.ui.do(func() {
		r.ui.conv.voice = cfg.TTS.Voice
		if r.ui.conv.voice == "" {
			r.ui.conv.voice = "espeak-ng"
		}
		if cfg.TTS.Seed != 0 {
			r.ui.conv.voice += fmt.Sprintf(" (seed %d)", cfg.TTS.Seed)
		}
		r.ui.textOnly = wo.NoAudio
		if wo.NoAudio {
			r.ui.conv.voice = ""
		}
		if r.o.NoAudio { // asked for; a failure to open the devices has its own note
			notes = append(notes, "Text only: no microphone or speaker is in use, so Parley answers in writing.")
		}
		r.ui.Attach(a.Assistant, notes)
		if r.o.Ready != nil {
			r.o.Ready(r.ui, r.ui.win)
		}
	})
	return nil
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
