package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mattn/go-sqlite3"
)

// Timer is a persisted timer or alarm of the offline skills. Its fields mirror
// llm/skills.Timer, so an adapter in app converts one to the other field by field (store is a
// leaf package and does not import skills).
type Timer struct {
	ID       string // chosen by the caller; unique
	Kind     string // "timer" or "alarm"
	Label    string
	Due      time.Time
	Duration time.Duration // timers: the duration asked for
	Lang     string        // language to announce it in
	Fired    bool
	Created  time.Time
}

// AddTimer persists a timer. The ID must be new.
func (s *Store) AddTimer(ctx context.Context, t Timer) error {
	if t.ID == "" || len(t.ID) > 256 {
		return fmt.Errorf("store: add timer: id %q must be 1–256 bytes: %w", t.ID, ErrInvalid)
	}
	if t.Due.IsZero() {
		return fmt.Errorf("store: add timer %q: no due time: %w", t.ID, ErrInvalid)
	}
	if t.Kind == "" {
		t.Kind = "timer"
	}
	if t.Created.IsZero() {
		t.Created = time.Now()
	}
	return s.write(ctx, "add timer", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO timers(id, kind, label, due_at, duration_ms, lang, fired, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, t.ID, t.Kind, cleanTitle(t.Label), t.Due.UnixMilli(),
			t.Duration.Milliseconds(), t.Lang, t.Fired, t.Created.UnixMilli())
		var se sqlite3.Error
		if errors.As(err, &se) && se.Code == sqlite3.ErrConstraint {
			return fmt.Errorf("timer %q already exists: %w", t.ID, ErrInvalid)
		}
		return err
	})
}

func (s *Store) timers(ctx context.Context, op, where string, args ...any) ([]Timer, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, kind, label, due_at, duration_ms, lang, fired, created_at
		FROM timers `+where+` ORDER BY due_at, id`, args...)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	defer rows.Close()
	var out []Timer
	for rows.Next() {
		var t Timer
		var due, dur, cr int64
		if err := rows.Scan(&t.ID, &t.Kind, &t.Label, &due, &dur, &t.Lang, &t.Fired, &cr); err != nil {
			return nil, s.wrap(op, err)
		}
		t.Due, t.Duration, t.Created = fromMS(due), time.Duration(dur)*time.Millisecond, fromMS(cr)
		out = append(out, t)
	}
	return out, s.wrap(op, rows.Err())
}

// Timers returns the timers not yet fired, soonest first.
func (s *Store) Timers(ctx context.Context) ([]Timer, error) {
	return s.timers(ctx, "timers", `WHERE fired = 0`)
}

// DueTimers returns unfired timers due at or before now (including ones missed while Parley
// was not running), soonest first.
func (s *Store) DueTimers(ctx context.Context, now time.Time) ([]Timer, error) {
	return s.timers(ctx, "due timers", `WHERE fired = 0 AND due_at <= ?`, now.UnixMilli())
}

// Timer returns one timer (fired or not), or an error wrapping ErrNotFound.
func (s *Store) Timer(ctx context.Context, id string) (Timer, error) {
	ts, err := s.timers(ctx, "timer", `WHERE id = ?`, id)
	if err != nil {
		return Timer{}, err
	}
	if len(ts) == 0 {
		return Timer{}, fmt.Errorf("store: timer %q: %w", id, ErrNotFound)
	}
	return ts[0], nil
}

// MarkTimerFired records that a timer was announced (it leaves Timers, stays in Timer).
func (s *Store) MarkTimerFired(ctx context.Context, id string) error {
	return s.write(ctx, fmt.Sprintf("fire timer %q", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE timers SET fired = 1 WHERE id = ?`, id)
		return mustAffectKey(res, err, "timer", id)
	})
}

// RemoveTimer deletes a timer (cancelled, or announced and done with).
func (s *Store) RemoveTimer(ctx context.Context, id string) error {
	return s.write(ctx, fmt.Sprintf("remove timer %q", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM timers WHERE id = ?`, id)
		return mustAffectKey(res, err, "timer", id)
	})
}

func mustAffectKey(res sql.Result, err error, what, id string) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s %q: %w", what, id, ErrNotFound)
	}
	return nil
}
