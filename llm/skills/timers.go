package skills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Timer kinds.
const (
	KindTimer = "timer"
	KindAlarm = "alarm"
)

// Timer is a pending timer or alarm.
type Timer struct {
	ID       string        `json:"id"`
	Kind     string        `json:"kind"` // KindTimer or KindAlarm
	Label    string        `json:"label,omitempty"`
	Due      time.Time     `json:"due"`
	Created  time.Time     `json:"created"`
	Duration time.Duration `json:"duration,omitempty"` // timers: as asked
	Lang     string        `json:"lang,omitempty"`     // language to announce it in
}

// TimerStore persists timers and alarms. The store package may implement it on SQLite;
// FileTimers is a JSON-file implementation and MemTimers an in-memory one.
type TimerStore interface {
	AddTimer(ctx context.Context, t Timer) error
	Timers(ctx context.Context) ([]Timer, error) // sorted by Due
	RemoveTimer(ctx context.Context, id string) error
}

// ErrNoTimer is returned when removing a timer that does not exist.
var ErrNoTimer = errors.New("skills: no such timer")

// ErrNoTimers is returned by a TimerStore where timers cannot work: a headless speech server
// has nothing that would ring when one runs out. The skills then say so instead of promising.
var ErrNoTimers = errors.New("timers and alarms are not available here: nothing would ring when they ran out")

// NoTimers is the TimerStore of a place without timers (parley --serve): every call fails
// with ErrNoTimers, and the skills answer "set a timer" honestly.
type NoTimers struct{}

// AddTimer implements TimerStore.
func (NoTimers) AddTimer(context.Context, Timer) error { return ErrNoTimers }

// Timers implements TimerStore.
func (NoTimers) Timers(context.Context) ([]Timer, error) { return nil, ErrNoTimers }

// RemoveTimer implements TimerStore.
func (NoTimers) RemoveTimer(context.Context, string) error { return ErrNoTimers }

// MemTimers keeps timers in memory. The zero value is ready.
type MemTimers struct {
	mu sync.Mutex
	ts []Timer
}

// AddTimer implements TimerStore.
func (m *MemTimers) AddTimer(_ context.Context, t Timer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ts = append(m.ts, t)
	sortTimers(m.ts)
	return nil
}

// Timers implements TimerStore.
func (m *MemTimers) Timers(context.Context) ([]Timer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Timer(nil), m.ts...), nil
}

// RemoveTimer implements TimerStore.
func (m *MemTimers) RemoveTimer(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, t := range m.ts {
		if t.ID == id {
			m.ts = append(m.ts[:i], m.ts[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoTimer, id)
}

func sortTimers(ts []Timer) {
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].Due.Before(ts[j].Due) })
}

// FileTimers keeps timers in a JSON file, rewritten atomically (temporary file, fsync,
// rename) on every change, so a crash never leaves a half-written file.
type FileTimers struct {
	path string
	mu   sync.Mutex
}

// OpenFileTimers opens (or prepares to create) the timer file at path and checks that an
// existing file is readable.
func OpenFileTimers(path string) (*FileTimers, error) {
	f := &FileTimers{path: path}
	if _, err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FileTimers) load() ([]Timer, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("skills: timers: %w", err)
	}
	var v struct {
		Timers []Timer `json:"timers"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("skills: timers file %s is corrupt: %w", f.path, err)
	}
	sortTimers(v.Timers)
	return v.Timers, nil
}

func (f *FileTimers) save(ts []Timer) error {
	if ts == nil {
		ts = []Timer{}
	}
	b, err := json.MarshalIndent(struct {
		Timers []Timer `json:"timers"`
	}{ts}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
		return fmt.Errorf("skills: timers: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), ".timers-*.json")
	if err != nil {
		return fmt.Errorf("skills: timers: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("skills: timers: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("skills: timers: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("skills: timers: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return fmt.Errorf("skills: timers: %w", err)
	}
	return nil
}

// AddTimer implements TimerStore.
func (f *FileTimers) AddTimer(_ context.Context, t Timer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ts, err := f.load()
	if err != nil {
		return err
	}
	ts = append(ts, t)
	sortTimers(ts)
	return f.save(ts)
}

// Timers implements TimerStore.
func (f *FileTimers) Timers(context.Context) ([]Timer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.load()
}

// RemoveTimer implements TimerStore.
func (f *FileTimers) RemoveTimer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ts, err := f.load()
	if err != nil {
		return err
	}
	for i, t := range ts {
		if t.ID == id {
			return f.save(append(ts[:i], ts[i+1:]...))
		}
	}
	return fmt.Errorf("%w: %s", ErrNoTimer, id)
}
