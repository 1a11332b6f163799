package assets

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Event is a progress report. Phases: "waiting" (another process holds the model), "probe",
// "download", "verify", "installed" (a file is in place), "present" (a file was already
// installed), "extract" (embedded or archive), "done" (the model is complete).
type Event struct {
	Model   string  `json:"model"`
	File    string  `json:"file,omitempty"`
	Phase   string  `json:"phase"`
	Done    int64   `json:"done"`            // bytes
	Total   int64   `json:"total"`           // bytes; -1 or 0 when unknown
	Rate    float64 `json:"rate,omitempty"`  // bytes per second
	ETA     float64 `json:"eta_s,omitempty"` // seconds
	Message string  `json:"message,omitempty"`
}

// rateMeter smooths the transfer rate (exponential moving average).
type rateMeter struct {
	last     time.Time
	lastDone int64
	rate     float64
}

func newRateMeter(done int64) *rateMeter { return &rateMeter{last: time.Now(), lastDone: done} }

func (r *rateMeter) update(now time.Time, done, total int64) (rate, eta float64) {
	dt := now.Sub(r.last).Seconds()
	if dt > 0 {
		inst := float64(done-r.lastDone) / dt
		if r.rate == 0 {
			r.rate = inst
		} else {
			r.rate = 0.7*r.rate + 0.3*inst
		}
		r.last, r.lastDone = now, done
	}
	if r.rate > 0 && total > 0 && done <= total {
		eta = float64(total-done) / r.rate
	}
	return r.rate, eta
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// NewProgressPrinter returns a Progress callback that draws a bar per file on a terminal
// (tty true) or writes one JSON object per event otherwise.
func NewProgressPrinter(w io.Writer, tty bool) func(Event) {
	var mu sync.Mutex
	if !tty {
		enc := json.NewEncoder(w)
		return func(ev Event) {
			mu.Lock()
			defer mu.Unlock()
			enc.Encode(ev)
		}
	}
	var open bool // a bar line is being redrawn
	return func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		name := ev.Model
		if ev.File != "" {
			name += "/" + ev.File
		}
		switch ev.Phase {
		case "download", "verify", "extract":
			fmt.Fprintf(w, "\r\x1b[K%s", bar(name, ev))
			open = true
		default:
			if open {
				fmt.Fprintln(w)
				open = false
			}
			switch ev.Phase {
			case "installed":
				fmt.Fprintf(w, "%s: installed (%s)\n", name, humanBytes(ev.Total))
			case "present":
				fmt.Fprintf(w, "%s: already installed\n", name)
			case "done":
				fmt.Fprintf(w, "%s: done\n", name)
			case "waiting":
				fmt.Fprintf(w, "%s: %s\n", name, ev.Message)
			}
		}
	}
}

func bar(name string, ev Event) string {
	const width = 24
	if len(name) > 40 {
		name = "…" + name[len(name)-39:]
	}
	verb := map[string]string{"download": "", "verify": "verifying ", "extract": "extracting "}[ev.Phase]
	if ev.Phase == "extract" && ev.Done == 0 {
		return fmt.Sprintf("%-40s extracting %s", name, humanBytes(ev.Total))
	}
	if ev.Total <= 0 {
		return fmt.Sprintf("%-40s %s%s  %s/s", name, verb, humanBytes(ev.Done), humanBytes(int64(ev.Rate)))
	}
	frac := min(1, float64(ev.Done)/float64(ev.Total))
	fill := int(frac * width)
	b := strings.Repeat("=", fill)
	if fill < width {
		b += ">" + strings.Repeat(" ", width-fill-1)
	}
	s := fmt.Sprintf("%-40s %s[%s] %3.0f%% %s/%s", name, verb, b, frac*100, humanBytes(ev.Done), humanBytes(ev.Total))
	if ev.Phase == "download" && ev.Rate > 0 {
		s += fmt.Sprintf("  %s/s", humanBytes(int64(ev.Rate)))
		if ev.ETA > 0 {
			s += "  ETA " + (time.Duration(ev.ETA) * time.Second).String()
		}
	}
	return s
}

func humanBytes(n int64) string {
	switch {
	case n < 0:
		return "?"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}
