package store

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"time"
)

// PruneResult reports what PruneAudio did.
type PruneResult struct {
	Turns   int      // turns whose audio reference was removed
	Deleted int      // files deleted (including earlier interrupted deletions now finished)
	Failed  []string // files that could not be deleted (still queued; retried on the next prune or Open)
}

// PruneAudio deletes the saved audio of turns created before the cutoff. Crash-safe order: in
// one transaction the turns stop referencing their files and the paths are queued in
// audio_trash; then the files are deleted; then the queue rows. A crash at any point leaves
// either a queued path (finished by the next Open) or nothing to do — never a turn pointing at
// a deleted file, never a forgotten file.
func (s *Store) PruneAudio(ctx context.Context, before time.Time) (PruneResult, error) {
	var res PruneResult
	err := s.write(ctx, "prune audio", func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE turns SET audio_path = NULL
			WHERE audio_path IS NOT NULL AND created_at < ?`, before.UnixMilli())
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		res.Turns = int(n)
		return err
	})
	if err != nil {
		return res, err
	}
	res.Deleted, res.Failed, err = s.sweepAudioTrash(ctx)
	return res, err
}

// maxRetentionDays is far more than any turn's age (about 27,000 years).
const maxRetentionDays = 10_000_000

// PruneAudioDays applies a retention of days (config store.retention_days): audio of turns
// older than that is deleted. days ≤ 0 keeps everything.
func (s *Store) PruneAudioDays(ctx context.Context, days int, now time.Time) (PruneResult, error) {
	if days <= 0 {
		return PruneResult{}, nil
	}
	// AddDate, not a Duration: days × 24h overflows time.Duration beyond ~292 years (into a
	// cutoff in the future, which would delete all audio). Beyond year 1 nothing is older.
	if days > maxRetentionDays {
		return PruneResult{}, nil
	}
	return s.PruneAudio(ctx, now.AddDate(0, 0, -days))
}

// sweepAudioTrash deletes queued audio files that no turn references any more, then their
// queue rows. Files that cannot be deleted stay queued and are returned in failed.
func (s *Store) sweepAudioTrash(ctx context.Context) (deleted int, failed []string, err error) {
	rows, err := s.w.QueryContext(ctx, `SELECT path, EXISTS (SELECT 1 FROM turns WHERE audio_path = a.path)
		FROM audio_trash a ORDER BY trashed_at`)
	if err != nil {
		return 0, nil, s.wrap("sweep audio", err)
	}
	type item struct {
		path string
		used bool
	}
	var items []item
	for rows.Next() {
		var it item
		if err := rows.Scan(&it.path, &it.used); err != nil {
			rows.Close()
			return 0, nil, s.wrap("sweep audio", err)
		}
		items = append(items, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, nil, s.wrap("sweep audio", err)
	}
	if len(items) == 0 {
		return 0, nil, nil
	}
	var done []string
	for _, it := range items {
		if it.used { // another turn still points at this file: keep it, forget the queue row
			done = append(done, it.path)
			continue
		}
		err := os.Remove(it.path)
		switch {
		case err == nil:
			deleted++
			done = append(done, it.path)
		case errors.Is(err, fs.ErrNotExist):
			done = append(done, it.path)
		default:
			failed = append(failed, it.path)
		}
	}
	err = s.write(ctx, "sweep audio", func(tx *sql.Tx) error {
		for _, p := range done {
			if _, err := tx.ExecContext(ctx, `DELETE FROM audio_trash WHERE path = ?`, p); err != nil {
				return err
			}
		}
		return nil
	})
	return deleted, failed, err
}
