package store

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The database, its WAL and shared-memory files are private to the user (0600) and a
// directory the store creates is 0700, whatever the umask; a database an older Parley left
// readable by others is made private when opened.
func TestDatabaseFilesPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data", "parley")
	path := filepath.Join(dir, "parley.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := s.CreateConversation(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddTurn(ctx, &Turn{ConversationID: c.ID, Role: RoleUser, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s is %o, want 600", filepath.Base(p), m)
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("%s is %o, want 700", dir, st.Mode().Perm())
	}
	s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Chmod(p, 0o644)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm() != 0o600 {
			t.Errorf("reopened: %s is %o, want 600", filepath.Base(p), st.Mode().Perm())
		}
	}
}

// Deleted means gone: after DeleteConversation the words of the conversation are nowhere in
// the bytes of the database files (table pages, the full-text index, the WAL), while the rest
// of the history is still there and still searchable.
func TestDeletedTextLeavesNoTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	secret := "zanzibarquokka"
	keep, _ := s.CreateConversation(ctx, "")
	gone, _ := s.CreateConversation(ctx, "")
	for i := range 40 { // enough turns for several pages and FTS segments
		s.AddTurn(ctx, &Turn{ConversationID: keep.ID, Role: RoleUser, Text: "the weather in Lisbon is mild today, keeper number " + strings.Repeat("x", i)})
		s.AddTurn(ctx, &Turn{ConversationID: gone.ID, Role: RoleUser, Text: "my password is " + secret + " and my bank pin is 4711"})
		s.AddTurn(ctx, &Turn{ConversationID: gone.ID, Role: RoleAssistant, Text: "I will remember " + secret + " for you, turn " + strings.Repeat("y", i)})
	}
	found := func() []string {
		var where []string
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			if bytes.Contains(b, []byte(secret)) {
				where = append(where, filepath.Base(p))
			}
		}
		return where
	}
	if len(found()) == 0 {
		t.Fatal("the test text is not in the database files before the delete: the test proves nothing")
	}
	if _, err := s.DeleteConversation(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	if where := found(); len(where) > 0 {
		t.Errorf("deleted text still in %v", where)
	}
	hits, err := s.Search(ctx, "Lisbon", SearchOptions{})
	if err != nil || len(hits) == 0 {
		t.Errorf("the kept conversation is not searchable any more: %v %v", hits, err)
	}
	if hits, _ := s.Search(ctx, secret, SearchOptions{}); len(hits) != 0 {
		t.Errorf("search still finds the deleted text: %v", hits)
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
}

// Deleted rows are overwritten whatever the SQLite library's compiled default.
func TestSecureDeleteOn(t *testing.T) {
	s := openTest(t)
	var on int
	if err := s.w.QueryRowContext(context.Background(), `PRAGMA secure_delete`).Scan(&on); err != nil || on != 1 {
		t.Errorf("secure_delete = %d, %v", on, err)
	}
}
