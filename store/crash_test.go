package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// envKillChild switches TestKillChildWriter into the child role: it writes turns to the
// database named by the variable until it is killed, printing "ok ID TEXT" after each commit.
const envKillChild = "PARLEY_STORE_KILL_CHILD_DB"

func TestKillChildWriter(t *testing.T) {
	path := os.Getenv(envKillChild)
	if path == "" {
		t.Skip("child process of TestKillDuringWritesLosesNoCommittedTurn")
	}
	s, err := Open(path)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	ctx := context.Background()
	c, err := s.CreateConversation(ctx, "crash")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	big := strings.Repeat("天气 weather ", 2000) // multi-page rows, so a kill can land mid-write
	for i := 0; ; i++ {
		text := fmt.Sprintf("turn %d", i)
		if i%3 == 0 {
			text += " " + big
		}
		tr := &Turn{ConversationID: c.ID, Role: RoleUser, Text: text}
		if i%2 == 1 {
			// Several turns in one transaction: all or none must survive.
			tr2 := &Turn{ConversationID: c.ID, Role: RoleAssistant, Text: text + " answer"}
			if err := s.AddTurns(ctx, tr, tr2); err != nil {
				fmt.Println("error", err)
				os.Exit(3)
			}
			fmt.Printf("ok %d %s\nok %d %s\n", tr.ID, tr.Text[:min(len(tr.Text), 40)], tr2.ID, tr2.Text[:min(len(tr2.Text), 40)])
			continue
		}
		if err := s.AddTurn(ctx, tr); err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		fmt.Printf("ok %d %s\n", tr.ID, tr.Text[:min(len(tr.Text), 40)])
	}
}

// A process killed with SIGKILL in the middle of writing turns loses none it had committed,
// leaves no partial transaction, and the database passes PRAGMA integrity_check.
func TestKillDuringWritesLosesNoCommittedTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "parley.db")
	for round, killAfter := range []int{25, 60, 120} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChildWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), envKillChild+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Read acknowledgements in the background; kill at a random instant after killAfter of
		// them, so the kill lands anywhere in a write, and keep every line printed before it.
		var mu sync.Mutex
		committed := map[int64]string{}
		reached := make(chan struct{})
		done := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			signalled := false
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "error") {
					done <- line
					return
				}
				f := strings.SplitN(line, " ", 3)
				if len(f) != 3 || f[0] != "ok" {
					continue
				}
				id, _ := strconv.ParseInt(f[1], 10, 64)
				mu.Lock()
				committed[id] = f[2]
				n := len(committed)
				mu.Unlock()
				if n >= killAfter && !signalled {
					signalled = true
					close(reached)
				}
			}
			done <- ""
		}()
		select {
		case <-reached:
		case msg := <-done:
			cmd.Wait()
			t.Fatalf("round %d: child ended before %d commits: %s", round, killAfter, msg)
		}
		time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if msg := <-done; msg != "" {
			t.Fatalf("round %d: child: %s", round, msg)
		}
		cmd.Wait()

		s, err := Open(path)
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		ctx := context.Background()
		if err := s.IntegrityCheck(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for id, text := range committed {
			tr, err := s.Turn(ctx, id)
			if err != nil {
				t.Fatalf("round %d: committed turn %d lost: %v", round, id, err)
			}
			if !strings.HasPrefix(tr.Text, text) {
				t.Fatalf("round %d: turn %d = %.40q, want %q", round, id, tr.Text, text)
			}
		}
		// Multi-turn transactions are atomic: every user turn with an odd number has its answer.
		var orphans int
		s.r.QueryRow(`SELECT count(*) FROM turns u WHERE u.role = 'user'
			AND CAST(substr(u.text, 6, instr(substr(u.text, 6) || ' ', ' ') - 1) AS INTEGER) % 2 = 1
			AND NOT EXISTS (SELECT 1 FROM turns a WHERE a.conversation_id = u.conversation_id AND a.seq = u.seq + 1)`).Scan(&orphans)
		if orphans != 0 {
			t.Errorf("round %d: %d half-written transactions", round, orphans)
		}
		// The FTS index agrees with the table.
		var nTurns, nFTS int
		s.r.QueryRow(`SELECT count(*) FROM turns`).Scan(&nTurns)
		s.r.QueryRow(`SELECT count(*) FROM turns_fts`).Scan(&nFTS)
		if nTurns != nFTS {
			t.Errorf("round %d: %d turns but %d FTS rows", round, nTurns, nFTS)
		}
		if _, err := s.w.Exec(`INSERT INTO turns_fts(turns_fts) VALUES ('integrity-check')`); err != nil {
			t.Errorf("round %d: FTS integrity: %v", round, err)
		}
		t.Logf("round %d: %d committed turns seen, %d in the database", round, len(committed), nTurns)
		s.Close()
	}
}

func TestOpenCorruptFile(t *testing.T) {
	dir := t.TempDir()
	cases := map[string][]byte{
		"garbage.db":   []byte(strings.Repeat("this is not a database\n", 500)),
		"truncated.db": nil, // filled below: a real database cut short
	}
	good := filepath.Join(dir, "good.db")
	s, err := Open(good)
	if err != nil {
		t.Fatal(err)
	}
	c := mustConv(t, s, "x")
	for i := 0; i < 50; i++ {
		mustTurn(t, s, c.ID, RoleUser, strings.Repeat("some words ", 100))
	}
	s.Close()
	b, _ := os.ReadFile(good)
	// Keep the header, wreck the schema page.
	wrecked := append([]byte{}, b...)
	for i := 100; i < 4096 && i < len(wrecked); i++ {
		wrecked[i] = 0xA5
	}
	cases["truncated.db"] = wrecked
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			os.WriteFile(p, data, 0o600)
			s, err := Open(p)
			if err == nil {
				err = s.IntegrityCheck(context.Background())
				s.Close()
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v; want ErrCorrupt naming %s", err, p)
			}
			t.Log(err)
		})
	}
	t.Run("directory", func(t *testing.T) {
		_, err := Open(dir)
		if err == nil || !strings.Contains(err.Error(), "is a directory") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestOpenNewerSchema(t *testing.T) {
	p := filepath.Join(t.TempDir(), "future.db")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	s.w.Exec(`PRAGMA user_version = 99`)
	s.Close()
	_, err = Open(p)
	if !errors.Is(err, ErrTooNew) || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v; want ErrTooNew naming the file", err)
	}
}

func TestOpenReadOnlyDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	dir := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(dir, 0o700)
	// An existing database in a directory that became read-only.
	existing := filepath.Join(dir, "old.db")
	s, err := Open(existing)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	os.Chmod(dir, 0o500)
	defer os.Chmod(dir, 0o700)
	for _, p := range []string{filepath.Join(dir, "new.db"), existing} {
		_, err := Open(p)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("Open(%s) = %v; want an error naming the file", p, err)
		}
		t.Log(err)
	}
}

// A full disk (simulated with PRAGMA max_page_count, which fails writes with SQLITE_FULL the
// way a full file system does) fails the write with ErrFull, keeps everything committed
// before, and the store works again once there is room.
func TestDiskFull(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	c := mustConv(t, s, "full")
	var pages int
	s.w.QueryRow(`PRAGMA page_count`).Scan(&pages)
	if _, err := s.w.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+8)); err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("filling the disk ", 200)
	var ok int
	var err error
	for i := 0; i < 1000; i++ {
		if err = s.AddTurn(ctx, &Turn{ConversationID: c.ID, Role: RoleUser, Text: text}); err != nil {
			break
		}
		ok++
	}
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), s.Path()) {
		t.Fatalf("after %d turns: err = %v; want ErrFull naming the file", ok, err)
	}
	t.Logf("%d turns fit; then: %v", ok, err)
	turns, err := s.Turns(ctx, c.ID)
	if err != nil || len(turns) != ok {
		t.Fatalf("%d turns kept (%v), want %d", len(turns), err, ok)
	}
	if err := s.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	s.w.Exec(`PRAGMA max_page_count = 1073741823`)
	if err := s.AddTurn(ctx, &Turn{ConversationID: c.ID, Role: RoleUser, Text: "room again"}); err != nil {
		t.Fatalf("write after freeing space: %v", err)
	}
}

func TestClosedStore(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.CreateConversation(ctx, "x"); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v", err)
	}
	if _, err := s.Conversations(ctx, ListOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("read after Close: %v", err)
	}
}

func TestCancelledContext(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.CreateConversation(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("write with cancelled context: %v", err)
	}
	if _, err := s.Search(ctx, "x", SearchOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("search with cancelled context: %v", err)
	}
}
