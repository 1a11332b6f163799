package wire

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/store"
)

func tone(n, rate int, hz float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(0.3 * math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
	}
	return out
}

func exchange(user, said []float32) []app.TurnRecord {
	t0 := time.Now()
	return []app.TurnRecord{
		{Turn: 1, Role: app.RoleUser, Text: "what time is it", Start: t0.Add(-time.Second), End: t0, Audio: user, AudioRate: app.SampleRate},
		{Turn: 1, Role: app.RoleAssistant, Text: "It is ten.", Start: t0, End: t0.Add(time.Second), Audio: said, AudioRate: 22050},
	}
}

// TestHistorySavesAudio: with an audio directory each turn's audio becomes a WAV file that
// reads back as the samples given (16-bit), referenced by the turn and deleted with it.
func TestHistorySavesAudio(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(filepath.Join(dir, "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := &History{S: s, AudioDir: filepath.Join(dir, "audio")}
	ctx := context.Background()
	user, said := tone(app.SampleRate, app.SampleRate, 440), tone(11025, 22050, 220)
	if err := h.AddTurns(ctx, exchange(user, said)...); err != nil {
		t.Fatal(err)
	}
	turns, err := s.Turns(ctx, h.Conversation())
	if err != nil || len(turns) != 2 {
		t.Fatalf("turns %+v, %v", turns, err)
	}
	if u, a := h.AudioOf(1); u != turns[0].AudioPath || a != turns[1].AudioPath || u == "" {
		t.Errorf("AudioOf(1) = %q, %q; want the stored paths", u, a)
	}
	for i, want := range []struct {
		rate int
		pcm  []float32
	}{{app.SampleRate, user}, {22050, said}} {
		p := turns[i].AudioPath
		if !strings.HasPrefix(p, filepath.Join(dir, "audio", "1")+string(filepath.Separator)) || !strings.HasSuffix(p, "-"+string(turns[i].Role)+".wav") {
			t.Errorf("turn %d audio path %q", i, p)
			continue
		}
		// private: the file 0600, its directories 0700
		for f, perm := range map[string]os.FileMode{p: 0o600, filepath.Dir(p): 0o700, filepath.Join(dir, "audio"): 0o700} {
			if st, err := os.Stat(f); err != nil || st.Mode().Perm() != perm {
				t.Errorf("%s: %v, want mode %o", f, err, perm)
			}
		}
		b, err := audio.ReadWAVFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if b.SampleRate != want.rate || b.Channels != 1 || len(b.Data) != len(want.pcm) {
			t.Fatalf("%s: %d Hz × %d, %d samples; want %d Hz mono, %d", p, b.SampleRate, b.Channels, len(b.Data), want.rate, len(want.pcm))
		}
		for k := range b.Data {
			if d := math.Abs(float64(b.Data[k] - want.pcm[k])); d > 2.0/32768 {
				t.Fatalf("%s: sample %d is %g, want %g", p, k, b.Data[k], want.pcm[k])
			}
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "audio", "1", ".part-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// the store owns the files: deleting the conversation deletes them
	if _, err := s.DeleteConversation(ctx, h.Conversation()); err != nil {
		t.Fatal(err)
	}
	for _, tr := range turns {
		if _, err := os.Stat(tr.AudioPath); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after the conversation was deleted: %v", tr.AudioPath, err)
		}
	}
}

// TestHistoryAudioUnwritable: a directory that cannot be written loses the audio, never the
// turn: the text is stored and the error says the audio was not saved.
func TestHistoryAudioUnwritable(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(filepath.Join(dir, "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	blocker := filepath.Join(dir, "not-a-dir") // a file where the directory should be (root ignores permissions)
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h := &History{S: s, AudioDir: filepath.Join(blocker, "audio")}
	ctx := context.Background()
	err = h.AddTurns(ctx, exchange(tone(1600, app.SampleRate, 300), tone(1600, 22050, 300))...)
	if !errors.Is(err, app.ErrAudioNotSaved) || !strings.Contains(err.Error(), "not-a-dir") {
		t.Fatalf("AddTurns = %v; want ErrAudioNotSaved naming the path", err)
	}
	turns, err := s.Turns(ctx, h.Conversation())
	if err != nil || len(turns) != 2 || turns[0].Text != "what time is it" || turns[1].Text != "It is ten." {
		t.Fatalf("turns %+v, %v: want both texts stored", turns, err)
	}
	for _, tr := range turns {
		if tr.AudioPath != "" {
			t.Errorf("turn %d references %q, which was never written", tr.ID, tr.AudioPath)
		}
	}
}

// TestBuildSaveAudio: store.save_audio puts the recordings next to the database, and only
// when asked.
func TestBuildSaveAudio(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := config.Default()
		cfg.LLM.Backend = "skills"
		cfg.Store.SaveAudio = on
		dbPath := filepath.Join(t.TempDir(), "p.db")
		// a crash left a half-written recording and a finished one
		conv := filepath.Join(filepath.Dir(dbPath), "audio", "7")
		if err := os.MkdirAll(conv, 0o755); err != nil {
			t.Fatal(err)
		}
		part, done := filepath.Join(conv, ".part-123.wav"), filepath.Join(conv, "20261122T101500-1-user.wav")
		for _, f := range []string{part, done} {
			if err := os.WriteFile(f, []byte("RIFF"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		a, err := Build(context.Background(), cfg, Options{NoAudio: true, NoDiscovery: true, StorePath: dbPath})
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if on {
			want = filepath.Join(filepath.Dir(dbPath), "audio")
		}
		if a.History == nil || a.History.AudioDir != want {
			t.Errorf("save_audio=%v: history %+v, want audio dir %q", on, a.History, want)
		}
		if _, err := os.Stat(part); on == (err == nil) {
			t.Errorf("save_audio=%v: leftover %s: %v (removed only when saving audio)", on, part, err)
		}
		if _, err := os.Stat(done); err != nil {
			t.Errorf("a finished recording was removed: %v", err)
		}
		a.Close()
	}
}
