package gui

import (
	"context"
	"log"
	"log/slog"
	"strings"
	"sync"
)

// fyneLog is the standard logger's output while the app runs. Fyne reports its errors through
// package log as three lines ("Fyne error:  reason", "  Cause: err", "  At: file:line"); this
// joins them into one record of the app's logger, at warn level, except for the ones that say
// nothing to a user: every file dialog reports the XDG folders this computer does not have
// ("this computer does not define a VIDEOS folder"), which go to debug. Other lines of package
// log keep their info level.
type fyneLog struct {
	log *slog.Logger

	mu      sync.Mutex
	pending *fyneError
}

type fyneError struct{ reason, cause, at string }

// routeStdLog sends package log's output to l through a fyneLog until the returned func runs.
func routeStdLog(l *slog.Logger) (restore func()) {
	w := &fyneLog{log: l}
	out, flags := log.Writer(), log.Flags()
	log.SetOutput(w)
	log.SetFlags(0)
	return func() {
		w.flush()
		log.SetOutput(out)
		log.SetFlags(flags)
	}
}

func (w *fyneLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.line(line)
	}
	return len(p), nil
}

func (w *fyneLog) line(line string) {
	switch {
	case strings.HasPrefix(line, "Fyne error:"):
		w.emit()
		w.pending = &fyneError{reason: strings.TrimSpace(strings.TrimPrefix(line, "Fyne error:"))}
	case w.pending != nil && strings.HasPrefix(line, "  Cause:"):
		w.pending.cause = strings.TrimSpace(strings.TrimPrefix(line, "  Cause:"))
	case w.pending != nil && strings.HasPrefix(line, "  At:"):
		w.pending.at = strings.TrimSpace(strings.TrimPrefix(line, "  At:"))
		w.emit() // the report's last line
	default:
		w.emit()
		if strings.TrimSpace(line) != "" {
			w.log.Info(line)
		}
	}
}

// emit logs the report being gathered, if any. Call with mu held.
func (w *fyneLog) emit() {
	e := w.pending
	if e == nil {
		return
	}
	w.pending = nil
	level := slog.LevelWarn
	if e.harmless() {
		level = slog.LevelDebug
	}
	attrs := []any{}
	if e.cause != "" {
		attrs = append(attrs, "err", e.cause)
	}
	if e.at != "" {
		attrs = append(attrs, "at", e.at)
	}
	w.log.Log(context.Background(), level, "fyne: "+e.reason, attrs...)
}

func (w *fyneLog) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.emit()
}

// harmless: the file dialog's list of favourite folders, which skips a folder this computer
// lacks and shows the others.
func (e *fyneError) harmless() bool {
	return e.reason == "Getting favorite locations"
}
