// Package store keeps Parley's history and state in one SQLite database: conversations and
// their turns (with SenseVoice tags, the per-turn latency breakdown and optional saved audio),
// timers, training jobs and settings, with FTS5 full-text search over turn text in every
// language Parley speaks.
//
// The database runs in WAL mode with foreign keys on. All writes go through a single writer
// connection (so they are serialised in Go, never fight over the lock, and use BEGIN IMMEDIATE);
// reads use a separate pool of read-only connections that never block the writer. Schema
// changes are embedded SQL migrations, recorded in PRAGMA user_version, each applied in one
// transaction.
//
// Build with the libsqlite3 tag (go build -tags libsqlite3) to link the system SQLite (FTS5
// is required).
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/mattn/go-sqlite3"
)

// Sentinel errors. Errors returned by the store wrap one of these where they apply.
var (
	ErrNotFound   = errors.New("not found")
	ErrCorrupt    = errors.New("database file is corrupt or not a Parley database")
	ErrTooNew     = errors.New("database was written by a newer Parley")
	ErrFull       = errors.New("database or disk is full")
	ErrReadOnly   = errors.New("database is read-only")
	ErrEmptyQuery = errors.New("search query has no words")
	ErrInvalid    = errors.New("invalid value")
	ErrClosed     = errors.New("store is closed")
	ErrNoFTS5     = errors.New("SQLite library lacks FTS5")
)

// BusyTimeoutMS is how long a connection waits on a locked database before giving up.
const BusyTimeoutMS = 5000

// Options tune Open. The zero value is the default.
type Options struct {
	// Readers is the size of the read-only connection pool; 0 means max(4, GOMAXPROCS).
	Readers int
	// SyncNormal relaxes PRAGMA synchronous from FULL to NORMAL: still safe against a crash of
	// the process, but a power loss may drop the last commits. Default FULL.
	SyncNormal bool
}

// Store is an open Parley database. It is safe for concurrent use.
type Store struct {
	path string
	w    *sql.DB // exactly one connection: every write goes through it
	r    *sql.DB // read-only pool
}

// Open opens (creating if needed) the database at path, applies pending migrations, and
// returns the store. The parent directory is created if missing.
func Open(path string) (*Store, error) { return OpenWith(path, Options{}) }

// OpenWith is Open with options.
func OpenWith(path string, opt Options) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("store: open: empty database path: %w", ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("store: open %s: is a directory, not a database file: %w", abs, ErrInvalid)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("store: open %s: create directory: %w", abs, err)
	}
	if err := makePrivate(abs); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	s := &Store{path: abs}
	sync := "FULL"
	if opt.SyncNormal {
		sync = "NORMAL"
	}
	base := "file:" + (&url.URL{Path: abs}).EscapedPath()
	// secure_delete: deleted rows are overwritten with zeros, not left in free space (Debian's
	// SQLite is built with it on; others are not).
	wdsn := fmt.Sprintf("%s?_journal_mode=WAL&_foreign_keys=1&_busy_timeout=%d&_txlock=immediate&_synchronous=%s&_secure_delete=on",
		base, BusyTimeoutMS, sync)
	s.w = sql.OpenDB(newConnector(wdsn))
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)

	ctx := context.Background()
	if err := s.w.PingContext(ctx); err != nil {
		s.w.Close()
		return nil, s.openErr(err)
	}
	if err := checkFTS5(ctx, s.w); err != nil {
		s.w.Close()
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	if err := migrate(ctx, s.w, migrations, len(migrations)); err != nil {
		s.w.Close()
		return nil, s.openErr(err)
	}

	n := opt.Readers
	if n <= 0 {
		n = max(4, runtime.GOMAXPROCS(0))
	}
	rdsn := fmt.Sprintf("%s?mode=ro&_foreign_keys=1&_busy_timeout=%d", base, BusyTimeoutMS)
	s.r = sql.OpenDB(newConnector(rdsn))
	s.r.SetMaxOpenConns(n)
	s.r.SetMaxIdleConns(n)
	if err := s.r.PingContext(ctx); err != nil {
		s.r.Close()
		s.w.Close()
		return nil, s.openErr(err)
	}
	// Finish deletions of audio files that a crash interrupted.
	if _, _, err := s.sweepAudioTrash(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// makePrivate creates the database file readable by its owner only, before SQLite does
// (SQLite gives the -wal and -shm files the database's permissions), and makes the files of a
// database that an older Parley left readable by others private.
func makePrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f.Close() // an empty file is an empty SQLite database
	}
	if !errors.Is(err, os.ErrExist) {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o077 != 0 {
			os.Chmod(p, st.Mode().Perm()&0o700) // best effort: it may belong to someone else
		}
	}
	return nil
}

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes all connections. The WAL is checkpointed by the last connection to close.
func (s *Store) Close() error {
	var errs []error
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	if s.w != nil {
		errs = append(errs, s.w.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close %s: %w", s.path, err)
	}
	return nil
}

// IntegrityCheck runs PRAGMA integrity_check and returns nil when it reports "ok".
func (s *Store) IntegrityCheck(ctx context.Context) error {
	rows, err := s.r.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return s.wrap("integrity check", err)
	}
	defer rows.Close()
	var msgs []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return s.wrap("integrity check", err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return s.wrap("integrity check", err)
	}
	if len(msgs) == 1 && msgs[0] == "ok" {
		return nil
	}
	return fmt.Errorf("store: %s: integrity check failed: %s: %w", s.path, strings.Join(msgs, "; "), ErrCorrupt)
}

// SchemaVersion returns PRAGMA user_version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.r.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return 0, s.wrap("schema version", err)
	}
	return v, nil
}

// openErr wraps an error from opening the database with the file name and a sentinel.
func (s *Store) openErr(err error) error {
	if errors.Is(err, ErrTooNew) {
		return fmt.Errorf("store: open %s: %w", s.path, err)
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrNotADB, sqlite3.ErrCorrupt:
			return fmt.Errorf("store: open %s: %w (%v)", s.path, ErrCorrupt, err)
		case sqlite3.ErrCantOpen:
			return fmt.Errorf("store: open %s: cannot open the file (does the directory exist and is it writable?): %w", s.path, err)
		case sqlite3.ErrReadonly:
			return fmt.Errorf("store: open %s: %w: the file or its directory is not writable (WAL needs to create %s-wal and -shm): %v",
				s.path, ErrReadOnly, filepath.Base(s.path), err)
		case sqlite3.ErrFull:
			return fmt.Errorf("store: open %s: %w: %v", s.path, ErrFull, err)
		}
	}
	return fmt.Errorf("store: open %s: %w", s.path, err)
}

// wrap names the database and maps SQLite error codes to sentinels.
func (s *Store) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrFull:
			return fmt.Errorf("store: %s: %s: %w (%v)", s.path, op, ErrFull, err)
		case sqlite3.ErrNotADB, sqlite3.ErrCorrupt:
			return fmt.Errorf("store: %s: %s: %w (%v)", s.path, op, ErrCorrupt, err)
		case sqlite3.ErrReadonly:
			return fmt.Errorf("store: %s: %s: %w (%v)", s.path, op, ErrReadOnly, err)
		}
	}
	if errors.Is(err, sql.ErrConnDone) || strings.Contains(err.Error(), "database is closed") {
		return fmt.Errorf("store: %s: %s: %w", s.path, op, ErrClosed)
	}
	return fmt.Errorf("store: %s: %s: %w", s.path, op, err)
}

// write runs fn in one IMMEDIATE transaction on the writer connection.
func (s *Store) write(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(op, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) {
			return fmt.Errorf("store: %s: %w", op, err)
		}
		return s.wrap(op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.wrap(op, err)
	}
	return nil
}

func checkFTS5(ctx context.Context, db *sql.DB) error {
	var ok int
	if err := db.QueryRowContext(ctx, `SELECT sqlite_compileoption_used('ENABLE_FTS5')`).Scan(&ok); err != nil {
		return err
	}
	if ok == 0 {
		var v string
		_ = db.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&v)
		return fmt.Errorf("%w (SQLite %s); build with -tags libsqlite3 against a library with FTS5", ErrNoFTS5, v)
	}
	return nil
}

// connector opens connections with Parley's SQL functions registered, without registering a
// global database/sql driver name.
type connector struct {
	drv *sqlite3.SQLiteDriver
	dsn string
}

func newConnector(dsn string) connector {
	return connector{dsn: dsn, drv: &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error {
			return c.RegisterFunc("parley_fts_text", ftsText, true)
		},
	}}
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.drv }
