package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Timer is a persisted timer or alarm of the offline skills.
type Timer struct {
	ID      int64
	Label   string
	Due     time.Time
	Fired   bool
	Created time.Time
}

// TimerStore is what a skills engine needs to persist timers; *Store implements it.
type TimerStore interface {
	AddTimer(ctx context.Context, label string, due time.Time) (Timer, error)
	PendingTimers(ctx context.Context) ([]Timer, error)
	DueTimers(ctx context.Context, now time.Time) ([]Timer, error)
	MarkTimerFired(ctx context.Context, id int64) error
	CancelTimer(ctx context.Context, id int64) error
}

var _ TimerStore = (*Store)(nil)

// AddTimer persists a timer due at the given instant.
func (s *Store) AddTimer(ctx context.Context, label string, due time.Time) (Timer, error) {
	if due.IsZero() {
		return Timer{}, fmt.Errorf("store: add timer %q: no due time: %w", label, ErrInvalid)
	}
	t := Timer{Label: cleanTitle(label), Due: due.Truncate(time.Millisecond), Created: time.Now().Truncate(time.Millisecond)}
	err := s.write(ctx, "add timer", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO timers(label, due_at, created_at) VALUES (?, ?, ?) RETURNING id`,
			t.Label, t.Due.UnixMilli(), t.Created.UnixMilli()).Scan(&t.ID)
	})
	return t, err
}

func (s *Store) timers(ctx context.Context, op, where string, args ...any) ([]Timer, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, label, due_at, fired, created_at FROM timers `+where+` ORDER BY due_at, id`, args...)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	defer rows.Close()
	var out []Timer
	for rows.Next() {
		var t Timer
		var due, cr int64
		if err := rows.Scan(&t.ID, &t.Label, &due, &t.Fired, &cr); err != nil {
			return nil, s.wrap(op, err)
		}
		t.Due, t.Created = fromMS(due), fromMS(cr)
		out = append(out, t)
	}
	return out, s.wrap(op, rows.Err())
}

// PendingTimers returns timers not yet fired, soonest first.
func (s *Store) PendingTimers(ctx context.Context) ([]Timer, error) {
	return s.timers(ctx, "pending timers", `WHERE fired = 0`)
}

// DueTimers returns unfired timers due at or before now (including ones missed while Parley
// was not running), soonest first.
func (s *Store) DueTimers(ctx context.Context, now time.Time) ([]Timer, error) {
	return s.timers(ctx, "due timers", `WHERE fired = 0 AND due_at <= ?`, now.UnixMilli())
}

// Timer returns one timer, or an error wrapping ErrNotFound.
func (s *Store) Timer(ctx context.Context, id int64) (Timer, error) {
	ts, err := s.timers(ctx, "timer", `WHERE id = ?`, id)
	if err != nil {
		return Timer{}, err
	}
	if len(ts) == 0 {
		return Timer{}, fmt.Errorf("store: timer %d: %w", id, ErrNotFound)
	}
	return ts[0], nil
}

// MarkTimerFired records that a timer was announced.
func (s *Store) MarkTimerFired(ctx context.Context, id int64) error {
	return s.write(ctx, fmt.Sprintf("fire timer %d", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE timers SET fired = 1 WHERE id = ?`, id)
		return mustAffect(res, err, "timer", id)
	})
}

// CancelTimer deletes a timer.
func (s *Store) CancelTimer(ctx context.Context, id int64) error {
	return s.write(ctx, fmt.Sprintf("cancel timer %d", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM timers WHERE id = ?`, id)
		return mustAffect(res, err, "timer", id)
	})
}
