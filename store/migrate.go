package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one schema step: applying it to a database at version N-1 yields version N.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the embedded steps in order; migrations[i] has version i+1. The list is
// fixed at build time (read-only after init).
var migrations = mustLoadMigrations(migrationFS)

// SchemaLatest is the schema version this build writes.
func SchemaLatest() int { return len(migrations) }

func mustLoadMigrations(fsys fs.FS) []migration {
	ms, err := loadMigrations(fsys)
	if err != nil {
		panic(err) // embedded files are part of the build; a bad name is a programming error
	}
	return ms
}

// loadMigrations reads migrations/NNNN_name.sql files; numbers must run 1, 2, 3… without gaps.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for i, n := range names { // fs.Glob returns sorted names
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("store: migration %s: name must be NNNN_description.sql", n)
		}
		if v != i+1 {
			return nil, fmt.Errorf("store: migration %s: expected version %d", n, i+1)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	return ms, nil
}

// migrate brings db from its PRAGMA user_version up to version target of ms, one transaction
// per step, so a crash or error leaves the database at the last complete version.
func migrate(ctx context.Context, db *sql.DB, ms []migration, target int) error {
	var cur int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&cur); err != nil {
		return err
	}
	if cur > len(ms) {
		return fmt.Errorf("%w: schema version %d, this build knows up to %d", ErrTooNew, cur, len(ms))
	}
	if target > len(ms) {
		return fmt.Errorf("no migration to version %d", target)
	}
	for _, m := range ms[min(cur, target):target] {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		// Re-check inside the write lock: another process may have migrated meanwhile.
		var v int
		if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if v >= m.version {
			tx.Rollback()
			continue
		}
		if v != m.version-1 {
			tx.Rollback()
			return fmt.Errorf("migration %s: database is at version %d, expected %d", m.name, v, m.version-1)
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, m.version)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}
