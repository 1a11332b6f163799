package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "parley.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func mustConv(t testing.TB, s *Store, title string) Conversation {
	t.Helper()
	c, err := s.CreateConversation(context.Background(), title)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustTurn(t testing.TB, s *Store, conv int64, role Role, text string) *Turn {
	t.Helper()
	tr := &Turn{ConversationID: conv, Role: role, Text: text}
	if err := s.AddTurn(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestOpenPragmas(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	var mode string
	var fk, busy, sync int
	if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	s.w.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk)
	s.w.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy)
	s.w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync)
	if mode != "wal" || fk != 1 || busy != BusyTimeoutMS || sync != 2 {
		t.Errorf("journal_mode=%s foreign_keys=%d busy_timeout=%d synchronous=%d; want wal 1 %d 2(FULL)", mode, fk, busy, BusyTimeoutMS, sync)
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != SchemaLatest() {
		t.Errorf("schema version = %d, %v; want %d", v, err, SchemaLatest())
	}
	// Readers are read-only.
	if _, err := s.r.ExecContext(ctx, `INSERT INTO settings(key, value, updated_at) VALUES ('x', 'y', 0)`); err == nil {
		t.Error("write through the reader pool succeeded")
	}
	if s.w.Stats().MaxOpenConnections != 1 {
		t.Errorf("writer pool allows %d connections, want 1", s.w.Stats().MaxOpenConnections)
	}
}

func TestFTS5Available(t *testing.T) {
	s := openTest(t)
	var v string
	var fts int
	s.r.QueryRow(`SELECT sqlite_version(), sqlite_compileoption_used('ENABLE_FTS5')`).Scan(&v, &fts)
	t.Logf("SQLite %s, FTS5 %d", v, fts)
	if fts != 1 {
		t.Fatal("FTS5 not compiled in")
	}
	// The trigram tokenizer exists too (SQLite ≥ 3.34), though we don't rely on it.
	if _, err := s.w.Exec(`CREATE VIRTUAL TABLE temp.tri USING fts5(x, tokenize='trigram')`); err != nil {
		t.Errorf("trigram tokenizer: %v", err)
	}
}

func TestConversationsAndTurns(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	c := mustConv(t, s, "")
	t0 := time.UnixMilli(1_800_000_000_000)
	u := &Turn{ConversationID: c.ID, Role: RoleUser, Text: "what time is it", Language: "en", Emotion: "NEUTRAL", Event: "Speech",
		Start: t0, End: t0.Add(1500 * time.Millisecond),
		Latency: Latency{SpeechEnd: t0.Add(1500 * time.Millisecond), Transcript: t0.Add(1620 * time.Millisecond)}}
	a := &Turn{ConversationID: c.ID, Role: RoleAssistant, Text: "It is ten past six.", Voice: "espeak:en", Interrupted: true, Error: "tts: device lost",
		Start: t0.Add(2 * time.Second), End: t0.Add(3 * time.Second), AudioPath: filepath.Join(t.TempDir(), "a.wav"),
		Latency: Latency{SpeechEnd: t0.Add(1500 * time.Millisecond), Transcript: t0.Add(1620 * time.Millisecond),
			FirstToken: t0.Add(1700 * time.Millisecond), FirstSentence: t0.Add(1800 * time.Millisecond), FirstAudio: t0.Add(2 * time.Second)}}
	if err := s.AddTurns(ctx, u, a); err != nil {
		t.Fatal(err)
	}
	if u.Seq != 1 || a.Seq != 2 || u.ID == 0 || a.ID == u.ID {
		t.Fatalf("seq/id = %d/%d %d/%d", u.Seq, u.ID, a.Seq, a.ID)
	}
	got, err := s.Turns(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []*Turn{u, a} {
		if !reflect.DeepEqual(got[i], *want) {
			t.Errorf("turn %d:\n got %+v\nwant %+v", i, got[i], *want)
		}
	}
	if l := got[1].Latency.String(); l != "transcript 120ms · first token 200ms · first sentence 300ms · first audio 500ms" {
		t.Errorf("latency line %q", l)
	}
	// The conversation took its title from the first user turn.
	cc, err := s.Conversation(ctx, c.ID)
	if err != nil || cc.Title != "what time is it" || cc.Turns != 2 || cc.Exchanges != 1 {
		t.Errorf("conversation = %+v, %v", cc, err)
	}
	// Barge-in: cut the answer to what was played.
	a.Text = "It is ten"
	if err := s.UpdateTurn(ctx, a); err != nil {
		t.Fatal(err)
	}
	if tr, _ := s.Turn(ctx, a.ID); tr.Text != "It is ten" || !tr.Interrupted {
		t.Errorf("updated turn = %+v", tr)
	}
	recent, err := s.RecentTurns(ctx, c.ID, 1)
	if err != nil || len(recent) != 1 || recent[0].ID != a.ID {
		t.Errorf("recent = %+v, %v", recent, err)
	}
	list, err := s.Conversations(ctx, ListOptions{})
	if err != nil || len(list) != 1 || list[0].ID != c.ID {
		t.Errorf("list = %+v, %v", list, err)
	}
	if err := s.RenameConversation(ctx, c.ID, "  Time\n question "); err != nil {
		t.Fatal(err)
	}
	if cc, _ := s.Conversation(ctx, c.ID); cc.Title != "Time question" {
		t.Errorf("renamed title %q", cc.Title)
	}
	n, err := s.DeleteConversation(ctx, c.ID)
	if err != nil || n != 2 {
		t.Fatalf("delete = %d, %v", n, err)
	}
	if _, err := s.Turn(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("turn after delete: %v", err)
	}
	if hits, err := s.Search(ctx, "time", SearchOptions{}); err != nil || len(hits) != 0 {
		t.Errorf("search after delete = %v, %v", hits, err)
	}
}

func TestBadInputs(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	c := mustConv(t, s, "x")
	cases := []struct {
		name string
		err  error
		do   func() error
	}{
		{"unknown conversation", ErrNotFound, func() error {
			return s.AddTurn(ctx, &Turn{ConversationID: 999, Role: RoleUser, Text: "hi"})
		}},
		{"bad role", ErrInvalid, func() error { return s.AddTurn(ctx, &Turn{ConversationID: c.ID, Role: "robot", Text: "hi"}) }},
		{"huge text", ErrInvalid, func() error {
			return s.AddTurn(ctx, &Turn{ConversationID: c.ID, Role: RoleUser, Text: strings.Repeat("a", MaxTurnText+1)})
		}},
		{"end before start", ErrInvalid, func() error {
			return s.AddTurn(ctx, &Turn{ConversationID: c.ID, Role: RoleUser, Text: "x", Start: time.Unix(10, 0), End: time.Unix(5, 0)})
		}},
		{"relative audio path", ErrInvalid, func() error {
			return s.AddTurn(ctx, &Turn{ConversationID: c.ID, Role: RoleUser, Text: "x", AudioPath: "a.wav"})
		}},
		{"update missing turn", ErrNotFound, func() error { return s.UpdateTurn(ctx, &Turn{ID: 12345, Role: RoleUser}) }},
		{"missing conversation", ErrNotFound, func() error { _, err := s.Conversation(ctx, 42); return err }},
		{"turns of missing conversation", ErrNotFound, func() error { _, err := s.Turns(ctx, 42); return err }},
		{"delete missing conversation", ErrNotFound, func() error { _, err := s.DeleteConversation(ctx, 42); return err }},
		{"empty search", ErrEmptyQuery, func() error { _, err := s.Search(ctx, " \t!? ", SearchOptions{}); return err }},
		{"bad job json", ErrInvalid, func() error { _, err := s.CreateJob(ctx, "clone", json.RawMessage(`{"a":`)); return err }},
		{"bad job status", ErrInvalid, func() error { return s.SetJobStatus(ctx, 1, "sleeping", "") }},
		{"missing job", ErrNotFound, func() error { _, err := s.Job(ctx, 99); return err }},
		{"empty setting key", ErrInvalid, func() error { return s.SetSetting(ctx, "", "v") }},
		{"timer without time", ErrInvalid, func() error { return s.AddTimer(ctx, Timer{ID: "x"}) }},
		{"timer without id", ErrInvalid, func() error { return s.AddTimer(ctx, Timer{Due: time.Now()}) }},
		{"remove missing timer", ErrNotFound, func() error { return s.RemoveTimer(ctx, "nope") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
		})
	}
	// Invalid UTF-8 is stored with replacement characters rather than lost.
	tr := mustTurn(t, s, c.ID, RoleUser, "caf\xe9 ok")
	if got, _ := s.Turn(ctx, tr.ID); got.Text != "caf\ufffd ok" {
		t.Errorf("invalid UTF-8 stored as %q", got.Text)
	}
}

// Two stores on one file (the app, and parley history in another process) see each other's
// writes; the second waits on the lock instead of failing.
func TestTwoStoresSameFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := mustConv(t, a, "shared")
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, s := range []*Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := s.AddTurn(ctx, &Turn{ConversationID: c.ID, Role: RoleUser, Text: "hello"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if turns, err := b.Turns(ctx, c.ID); err != nil || len(turns) != 100 {
		t.Fatalf("%d turns, %v", len(turns), err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestTimersJobsSettings(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := time.UnixMilli(1_800_000_000_000)
	tea := Timer{ID: "t-tea", Kind: "timer", Label: "tea", Due: now.Add(3 * time.Minute), Duration: 3 * time.Minute, Lang: "zh", Created: now}
	past := Timer{ID: "a-missed", Kind: "alarm", Label: "missed alarm", Due: now.Add(-time.Hour), Created: now.Add(-2 * time.Hour)}
	for _, tm := range []Timer{tea, past} {
		if err := s.AddTimer(ctx, tm); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddTimer(ctx, tea); !errors.Is(err, ErrInvalid) {
		t.Errorf("duplicate timer id: %v", err)
	}
	all, err := s.Timers(ctx)
	if err != nil || !reflect.DeepEqual(all, []Timer{past, tea}) {
		t.Fatalf("timers = %+v, %v\nwant %+v", all, err, []Timer{past, tea})
	}
	due, err := s.DueTimers(ctx, now)
	if err != nil || len(due) != 1 || due[0].ID != past.ID {
		t.Fatalf("due = %+v, %v", due, err)
	}
	if err := s.MarkTimerFired(ctx, past.ID); err != nil {
		t.Fatal(err)
	}
	pending, _ := s.Timers(ctx)
	if len(pending) != 1 || pending[0].ID != tea.ID {
		t.Errorf("pending = %+v", pending)
	}
	if got, _ := s.Timer(ctx, past.ID); !got.Fired {
		t.Errorf("fired timer = %+v", got)
	}
	if err := s.RemoveTimer(ctx, tea.ID); err != nil {
		t.Fatal(err)
	}
	if pending, _ := s.Timers(ctx); len(pending) != 0 {
		t.Errorf("pending after remove = %+v", pending)
	}

	j, err := s.CreateJob(ctx, "voice-clone", json.RawMessage(`{"voice":"me","steps":100}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetJobStatus(ctx, j.ID, JobRunning, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateJobProgress(ctx, j.ID, json.RawMessage(`{"step":40,"loss":0.31}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetJobStatus(ctx, j.ID, JobFailed, "out of memory"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Job(ctx, j.ID)
	if err != nil || got.Status != JobFailed || got.Error != "out of memory" || string(got.Progress) != `{"step":40,"loss":0.31}` ||
		got.Started.IsZero() || got.Finished.IsZero() || string(got.Config) != `{"voice":"me","steps":100}` {
		t.Errorf("job = %+v, %v", got, err)
	}
	if js, _ := s.Jobs(ctx, "voice-clone", ListOptions{}); len(js) != 1 {
		t.Errorf("jobs = %+v", js)
	}
	if js, _ := s.Jobs(ctx, "other", ListOptions{}); len(js) != 0 {
		t.Errorf("jobs of other kind = %+v", js)
	}

	if _, ok, _ := s.Setting(ctx, "voice"); ok {
		t.Error("unset setting reported set")
	}
	s.SetSetting(ctx, "voice", "a")
	s.SetSetting(ctx, "voice", "b")
	if v, ok, err := s.Setting(ctx, "voice"); v != "b" || !ok || err != nil {
		t.Errorf("setting = %q %v %v", v, ok, err)
	}
	if all, _ := s.Settings(ctx); !reflect.DeepEqual(all, map[string]string{"voice": "b"}) {
		t.Errorf("settings = %v", all)
	}
	s.DeleteSetting(ctx, "voice")
	if _, ok, _ := s.Setting(ctx, "voice"); ok {
		t.Error("deleted setting still set")
	}
}

// Readers see consistent, committed data while a writer keeps writing, and never block it.
func TestConcurrentReadersWhileWriting(t *testing.T) {
	// synchronous=NORMAL only saves fsyncs here; what is tested does not depend on it.
	s, err := OpenWith(filepath.Join(t.TempDir(), "parley.db"), Options{SyncNormal: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := mustConv(t, s, "busy")
	const writes = 300
	var written atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				before := written.Load()
				turns, err := s.Turns(ctx, c.ID)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				if int64(len(turns)) < before {
					errs <- fmt.Errorf("reader saw %d turns after %d were committed", len(turns), before)
					return
				}
				for i, tr := range turns { // seq is dense and ordered in every snapshot
					if tr.Seq != i+1 {
						errs <- fmt.Errorf("snapshot has seq %d at %d", tr.Seq, i)
						return
					}
				}
				if _, err := s.Search(ctx, "turn", SearchOptions{Limit: 5}); err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Two writer goroutines share the single writer connection.
	var ww sync.WaitGroup
	for g := 0; g < 2; g++ {
		ww.Add(1)
		go func() {
			defer ww.Done()
			for i := 0; i < writes/2; i++ {
				if err := s.AddTurn(ctx, &Turn{ConversationID: c.ID, Role: RoleUser, Text: "turn number"}); err != nil {
					errs <- err
					return
				}
				written.Add(1)
			}
		}()
	}
	ww.Wait()
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	turns, err := s.Turns(context.Background(), c.ID)
	if err != nil || len(turns) != writes {
		t.Fatalf("%d turns, %v; want %d", len(turns), err, writes)
	}
}

func TestRetention(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	dir := t.TempDir()
	c := mustConv(t, s, "audio")
	now := time.Now()
	mk := func(name string, age time.Duration) *Turn {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("RIFF"), 0o600); err != nil {
			t.Fatal(err)
		}
		tr := &Turn{ConversationID: c.ID, Role: RoleUser, Text: name, AudioPath: p, Created: now.Add(-age)}
		if err := s.AddTurn(ctx, tr); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	old := mk("old.wav", 40*24*time.Hour)
	gone := mk("gone.wav", 40*24*time.Hour)
	os.Remove(gone.AudioPath) // already missing: still unreferenced without error
	fresh := mk("fresh.wav", time.Hour)

	if res, err := s.PruneAudioDays(ctx, 0, now); err != nil || res.Turns != 0 {
		t.Fatalf("prune with retention 0 = %+v, %v", res, err)
	}
	// A retention longer than time.Duration can hold (~292 years) keeps everything; it once
	// overflowed into a cutoff in the future and deleted all audio.
	for _, days := range []int{200000, math.MaxInt32, math.MaxInt} {
		if res, err := s.PruneAudioDays(ctx, days, now); err != nil || res.Turns != 0 {
			t.Fatalf("prune with retention %d days = %+v, %v; want nothing pruned", days, res, err)
		}
	}
	res, err := s.PruneAudioDays(ctx, 30, now)
	if err != nil || res.Turns != 2 || res.Deleted != 1 || len(res.Failed) != 0 {
		t.Fatalf("prune = %+v, %v", res, err)
	}
	if _, err := os.Stat(old.AudioPath); !os.IsNotExist(err) {
		t.Errorf("old audio still there: %v", err)
	}
	if _, err := os.Stat(fresh.AudioPath); err != nil {
		t.Errorf("fresh audio deleted: %v", err)
	}
	if tr, _ := s.Turn(ctx, old.ID); tr.AudioPath != "" || tr.Text != "old.wav" {
		t.Errorf("pruned turn = %+v", tr)
	}
	if tr, _ := s.Turn(ctx, fresh.ID); tr.AudioPath != fresh.AudioPath {
		t.Errorf("fresh turn lost its audio: %+v", tr)
	}
	// Deleting the conversation deletes the remaining audio.
	if _, err := s.DeleteConversation(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fresh.AudioPath); !os.IsNotExist(err) {
		t.Errorf("audio of deleted conversation still there: %v", err)
	}
}

// A crash between "stop referencing" and "delete the file" is finished by the next Open, and
// a file another turn still references is never deleted.
func TestRetentionCrashRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.wav"), filepath.Join(dir, "shared.wav")
	os.WriteFile(a, nil, 0o600)
	os.WriteFile(b, nil, 0o600)
	c := mustConv(t, s, "x")
	t1 := &Turn{ConversationID: c.ID, Role: RoleUser, Text: "one", AudioPath: a}
	t2 := &Turn{ConversationID: c.ID, Role: RoleUser, Text: "two", AudioPath: b}
	t3 := &Turn{ConversationID: c.ID, Role: RoleAssistant, Text: "three", AudioPath: b}
	if err := s.AddTurns(ctx, t1, t2, t3); err != nil {
		t.Fatal(err)
	}
	// Simulate the crash: do the first step only, as PruneAudio's transaction does.
	if _, err := s.w.ExecContext(ctx, `UPDATE turns SET audio_path = NULL WHERE id IN (?, ?)`, t1.ID, t2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a); err != nil {
		t.Fatal("file deleted before the sweep")
	}
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(a); !os.IsNotExist(err) {
		t.Errorf("queued file not deleted on reopen: %v", err)
	}
	if _, err := os.Stat(b); err != nil {
		t.Errorf("file still referenced by turn %d was deleted: %v", t3.ID, err)
	}
	var n int
	s.r.QueryRow(`SELECT count(*) FROM audio_trash`).Scan(&n)
	if n != 0 {
		t.Errorf("%d rows left in audio_trash", n)
	}
}
