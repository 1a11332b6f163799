package store

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// openAt creates a database at path migrated to exactly version v (0 = empty), bypassing Open.
func openAt(t *testing.T, path string, v int) *sql.DB {
	t.Helper()
	db := sql.OpenDB(newConnector("file:" + path + "?_journal_mode=WAL&_foreign_keys=1&_txlock=immediate"))
	db.SetMaxOpenConns(1)
	if err := migrate(context.Background(), db, migrations, v); err != nil {
		t.Fatalf("migrate to v%d: %v", v, err)
	}
	return db
}

// schemaDump lists every schema object with its SQL, in a stable order.
func schemaDump(t *testing.T, db interface {
	QueryRow(string, ...any) *sql.Row
	Query(string, ...any) (*sql.Rows, error)
}) string {
	t.Helper()
	var b strings.Builder
	var v int
	db.QueryRow(`PRAGMA user_version`).Scan(&v)
	fmt.Fprintf(&b, "-- user_version %d\n", v)
	rows, err := db.Query(`SELECT type, name, COALESCE(sql, '') FROM sqlite_master
		WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var typ, name, sqlText string
		rows.Scan(&typ, &name, &sqlText)
		fmt.Fprintf(&b, "-- %s %s\n%s;\n", typ, name, sqlText)
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -tags libsqlite3 ./store -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (go test -tags libsqlite3 ./store -run %s -update after checking):\n--- got\n%s", p, t.Name(), got)
	}
}

// Each version's schema is pinned by a golden file, so a migration that is edited after release
// (rather than followed by a new one) is caught.
func TestSchemaGolden(t *testing.T) {
	for v := 1; v <= SchemaLatest(); v++ {
		db := openAt(t, filepath.Join(t.TempDir(), "s.db"), v)
		golden(t, fmt.Sprintf("schema_v%d.sql", v), schemaDump(t, db))
		db.Close()
	}
}

// fixtures insert data the way the schema of each version allowed. A new migration adds the
// fixture for its predecessor's schema.
var fixtures = map[int]string{
	1: fixtureV1,
	// v2 only added tables filled by triggers: v1 data is valid v2 data.
	2: fixtureV1,
}

const fixtureV1 = `INSERT INTO conversations(id, title, created_at, updated_at) VALUES (1, 'old chat', 1700000000000, 1700000005000);
	    INSERT INTO turns(conversation_id, seq, role, text, language, emotion, event, interrupted, start_at, end_at,
	                      speech_end_at, transcript_at, audio_path, created_at)
	    VALUES (1, 1, 'user', '今天天气怎么样', 'zh', 'NEUTRAL', 'Speech', 0, 1700000000000, 1700000001500,
	            1700000001500, 1700000001700, '/nonexistent/parley-fixture/a.wav', 1700000000000),
	           (1, 2, 'assistant', 'Sunny weather today.', '', '', '', 1, 1700000002000, 1700000003000,
	            NULL, NULL, NULL, 1700000002000);
	    INSERT INTO timers(id, kind, label, due_at, duration_ms, lang, created_at)
	    VALUES ('t1', 'timer', 'tea', 1700000100000, 180000, 'en', 1700000000000);
	    INSERT INTO jobs(kind, status, config, created_at, updated_at) VALUES ('clone', 'running', '{"a":1}', 1, 1);
	    INSERT INTO settings(key, value, updated_at) VALUES ('voice', 'espeak:en', 1);`

// Every earlier version, with data in it, migrates to the latest schema: the same schema a new
// database gets, the data intact and searchable.
func TestMigrateFromEveryEarlierVersion(t *testing.T) {
	fresh := openAt(t, filepath.Join(t.TempDir(), "fresh.db"), SchemaLatest())
	want := schemaDump(t, fresh)
	fresh.Close()
	for from := 0; from < SchemaLatest(); from++ {
		t.Run(fmt.Sprintf("v%d", from), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			db := openAt(t, path, from)
			hasData := false
			if fx, ok := fixtures[from]; ok {
				if _, err := db.Exec(fx); err != nil {
					t.Fatalf("fixture v%d: %v", from, err)
				}
				hasData = true
			} else if from > 0 {
				t.Fatalf("no fixture for schema v%d: add one to fixtures", from)
			}
			db.Close()

			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := schemaDump(t, s.r); got != want {
				t.Errorf("schema after migrating from v%d differs from a fresh database:\n%s\n--- want\n%s", from, got, want)
			}
			if err := s.IntegrityCheck(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !hasData {
				return
			}
			ctx := context.Background()
			turns, err := s.Turns(ctx, 1)
			if err != nil || len(turns) != 2 || turns[0].Language != "zh" || !turns[1].Interrupted {
				t.Fatalf("turns after migration = %+v, %v", turns, err)
			}
			if d, ok := turns[0].Latency.Since(turns[0].Latency.Transcript); !ok || d.Milliseconds() != 200 {
				t.Errorf("latency lost: %+v", turns[0].Latency)
			}
			for _, q := range []string{"天气", "weather"} {
				hits, err := s.Search(ctx, q, SearchOptions{})
				if err != nil || len(hits) != 1 {
					t.Errorf("search %q after migration = %+v, %v", q, hits, err)
				}
			}
			if ts, _ := s.Timers(ctx); len(ts) != 1 || ts[0].ID != "t1" || ts[0].Duration != 3*time.Minute {
				t.Errorf("timers = %+v", ts)
			}
			if v, _, _ := s.Setting(ctx, "voice"); v != "espeak:en" {
				t.Errorf("setting = %q", v)
			}
			// New behaviour works on old rows: deleting the turn queues its audio file.
			if _, err := s.DeleteConversation(ctx, 1); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A migration that fails leaves the database at the previous version, untouched.
func TestMigrationIsAtomic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	db := openAt(t, path, 1)
	defer db.Close()
	before := schemaDump(t, db)
	broken := migration{version: 2, name: "0002_broken.sql", sql: `CREATE TABLE half(x); SELECT no_such_function();`}
	err := migrate(context.Background(), db, []migration{migrations[0], broken}, 2)
	if err == nil || !strings.Contains(err.Error(), "0002_broken.sql") {
		t.Fatalf("err = %v", err)
	}
	if after := schemaDump(t, db); after != before {
		t.Errorf("failed migration left changes:\n%s", after)
	}
}

func TestLoadMigrationsRejectsGaps(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"gap":     {"migrations/0001_a.sql": {}, "migrations/0003_c.sql": {}},
		"badname": {"migrations/first.sql": {}},
	} {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if ms, err := loadMigrations(migrationFS); err != nil || len(ms) < 2 {
		t.Errorf("embedded migrations: %d, %v", len(ms), err)
	}
}
