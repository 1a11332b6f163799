package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mattn/go-sqlite3"
)

// Role says who spoke a turn.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	RoleTool      Role = "tool"
)

func (r Role) valid() bool {
	switch r {
	case RoleUser, RoleAssistant, RoleSystem, RoleTool:
		return true
	}
	return false
}

// MaxTurnText is the largest turn text accepted, in bytes.
const MaxTurnText = 1 << 20

// Latency is the latency breakdown of one exchange: wall-clock instants at each hop, zero when
// not recorded. The turn loop fills what it has; durations are measured from SpeechEnd.
type Latency struct {
	SpeechEnd     time.Time // the user's speech ended (VAD endpoint, or push-to-talk release)
	Transcript    time.Time // the transcript was ready
	FirstToken    time.Time // the brain produced its first token
	FirstSentence time.Time // the first complete sentence went to synthesis
	FirstAudio    time.Time // the first audio of the answer was played
}

// IsZero reports whether no instant is recorded.
func (l Latency) IsZero() bool {
	return l.SpeechEnd.IsZero() && l.Transcript.IsZero() && l.FirstToken.IsZero() &&
		l.FirstSentence.IsZero() && l.FirstAudio.IsZero()
}

// Since returns the duration from the end of speech to t, and false if either is unknown.
func (l Latency) Since(t time.Time) (time.Duration, bool) {
	if l.SpeechEnd.IsZero() || t.IsZero() {
		return 0, false
	}
	return t.Sub(l.SpeechEnd), true
}

// String renders the breakdown as "transcript 120ms · first token 340ms · …" (hops unknown
// are left out).
func (l Latency) String() string {
	var parts []string
	for _, h := range []struct {
		name string
		t    time.Time
	}{{"transcript", l.Transcript}, {"first token", l.FirstToken}, {"first sentence", l.FirstSentence}, {"first audio", l.FirstAudio}} {
		if d, ok := l.Since(h.t); ok {
			parts = append(parts, fmt.Sprintf("%s %dms", h.name, d.Milliseconds()))
		}
	}
	return strings.Join(parts, " · ")
}

// Turn is one utterance in a conversation.
type Turn struct {
	ID             int64 // set by AddTurn
	ConversationID int64
	Seq            int // position in the conversation, from 1; set by AddTurn
	Role           Role
	Text           string // for an interrupted assistant turn: only what was actually played
	// SenseVoice rich tags of a user turn ("en", "HAPPY", "Speech"…), empty when unknown.
	Language, Emotion, Event string
	Voice                    string // the voice of an assistant turn
	Interrupted              bool   // the user barged in
	// Start and End bound the turn's audio: the user's speech, or the answer's playback.
	Start, End time.Time
	Latency    Latency
	AudioPath  string    // optional saved audio, a file owned by the store once referenced
	Error      string    // why the exchange failed, if it did
	Created    time.Time // set by AddTurn
}

// Conversation is a thread of turns.
type Conversation struct {
	ID      int64
	Title   string
	Created time.Time
	Updated time.Time
	Turns   int // number of turns (filled by Conversations and Conversation)
	// Exchanges is the number of the user's turns (what people count: two questions and
	// their answers are two exchanges, four turns).
	Exchanges int
}

// ListOptions page through lists, newest first.
type ListOptions struct {
	Limit  int // default 50
	Offset int
}

func toMS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func fromMS(ms int64) time.Time { return time.UnixMilli(ms) }

func fromNullMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func isFKError(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintForeignKey
}

// CreateConversation starts a conversation. An empty title is filled from the first user turn.
func (s *Store) CreateConversation(ctx context.Context, title string) (Conversation, error) {
	now := time.Now()
	c := Conversation{Title: cleanTitle(title), Created: now.Truncate(time.Millisecond), Updated: now.Truncate(time.Millisecond)}
	err := s.write(ctx, "create conversation", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO conversations(title, created_at, updated_at) VALUES (?, ?, ?)`,
			c.Title, now.UnixMilli(), now.UnixMilli())
		if err != nil {
			return err
		}
		c.ID, err = res.LastInsertId()
		return err
	})
	return c, err
}

func cleanTitle(t string) string {
	t = strings.Join(strings.Fields(strings.ToValidUTF8(t, "\ufffd")), " ")
	if utf8.RuneCountInString(t) > 80 {
		r := []rune(t)
		t = strings.TrimSpace(string(r[:79])) + "…"
	}
	return t
}

const convCols = `c.id, c.title, c.created_at, c.updated_at,
	(SELECT count(*) FROM turns t WHERE t.conversation_id = c.id),
	(SELECT count(*) FROM turns t WHERE t.conversation_id = c.id AND t.role = 'user')`

func scanConv(sc interface{ Scan(...any) error }) (Conversation, error) {
	var c Conversation
	var cr, up int64
	err := sc.Scan(&c.ID, &c.Title, &cr, &up, &c.Turns, &c.Exchanges)
	c.Created, c.Updated = fromMS(cr), fromMS(up)
	return c, err
}

// Conversation returns one conversation, or an error wrapping ErrNotFound.
func (s *Store) Conversation(ctx context.Context, id int64) (Conversation, error) {
	c, err := scanConv(s.r.QueryRowContext(ctx, `SELECT `+convCols+` FROM conversations c WHERE c.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("store: conversation %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return c, s.wrap(fmt.Sprintf("conversation %d", id), err)
	}
	return c, nil
}

// Conversations lists conversations, most recently updated first.
func (s *Store) Conversations(ctx context.Context, opt ListOptions) ([]Conversation, error) {
	if opt.Limit <= 0 {
		opt.Limit = 50
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+convCols+` FROM conversations c
		ORDER BY c.updated_at DESC, c.id DESC LIMIT ? OFFSET ?`, opt.Limit, max(opt.Offset, 0))
	if err != nil {
		return nil, s.wrap("list conversations", err)
	}
	defer rows.Close()
	var out []Conversation
	for rows.Next() {
		c, err := scanConv(rows)
		if err != nil {
			return nil, s.wrap("list conversations", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("list conversations", err)
	}
	return out, nil
}

// RenameConversation sets a conversation's title.
func (s *Store) RenameConversation(ctx context.Context, id int64, title string) error {
	return s.write(ctx, fmt.Sprintf("rename conversation %d", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE conversations SET title = ?, updated_at = ? WHERE id = ?`,
			cleanTitle(title), time.Now().UnixMilli(), id)
		return mustAffect(res, err, "conversation", id)
	})
}

// DeleteConversation removes a conversation, its turns and their saved audio files. It returns
// the number of turns deleted. Deleted means gone: the rows are overwritten (secure_delete),
// the full-text index is rebuilt without them, and the WAL is checkpointed and truncated, so
// the words are nowhere in the database's files (see forget).
func (s *Store) DeleteConversation(ctx context.Context, id int64) (int, error) {
	var n int
	err := s.write(ctx, fmt.Sprintf("delete conversation %d", id), func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM turns WHERE conversation_id = ?`, id).Scan(&n); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM conversations WHERE id = ?`, id)
		return mustAffect(res, err, "conversation", id)
	})
	if err != nil {
		return 0, err
	}
	if err := s.forget(ctx); err != nil {
		return n, err
	}
	_, _, err = s.sweepAudioTrash(ctx)
	return n, err
}

// forget removes what deleted rows leave behind. secure_delete zeroes the rows themselves;
// FTS5 only marks deleted entries, keeping the old index segments (with the words) until a
// merge, so the index is merged into one segment; the WAL still holds the old page images
// until it is checkpointed into the database and truncated. A reader holding an old snapshot
// can keep the WAL from being reset; the next delete or Close finishes the job.
func (s *Store) forget(ctx context.Context) error {
	if err := s.write(ctx, "merge the search index", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO turns_fts(turns_fts) VALUES ('optimize')`)
		return err
	}); err != nil {
		return err
	}
	var busy, logPages, done int
	if err := s.w.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &logPages, &done); err != nil {
		return s.wrap("checkpoint", err)
	}
	return nil
}

func mustAffect(res sql.Result, err error, what string, id int64) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s %d: %w", what, id, ErrNotFound)
	}
	return nil
}

func (t *Turn) validate() error {
	if !t.Role.valid() {
		return fmt.Errorf("turn role %q (want user, assistant, system or tool): %w", t.Role, ErrInvalid)
	}
	if len(t.Text) > MaxTurnText {
		return fmt.Errorf("turn text of %d bytes exceeds %d: %w", len(t.Text), MaxTurnText, ErrInvalid)
	}
	if !t.Start.IsZero() && !t.End.IsZero() && t.End.Before(t.Start) {
		return fmt.Errorf("turn ends (%s) before it starts (%s): %w", t.End.Format(time.RFC3339Nano), t.Start.Format(time.RFC3339Nano), ErrInvalid)
	}
	if t.AudioPath != "" && !filepath.IsAbs(t.AudioPath) {
		return fmt.Errorf("turn audio path %q is not absolute: %w", t.AudioPath, ErrInvalid)
	}
	t.Text = strings.ToValidUTF8(t.Text, "\ufffd")
	return nil
}

// AddTurn appends a turn to its conversation, setting t.ID, t.Seq and t.Created. When it
// returns nil the turn is durably committed.
func (s *Store) AddTurn(ctx context.Context, t *Turn) error {
	return s.AddTurns(ctx, t)
}

// AddTurns appends several turns in one transaction (all or none).
func (s *Store) AddTurns(ctx context.Context, ts ...*Turn) error {
	for _, t := range ts {
		if err := t.validate(); err != nil {
			return fmt.Errorf("store: add turn: %w", err)
		}
	}
	now := time.Now()
	return s.write(ctx, "add turn", func(tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT INTO turns(conversation_id, seq, role, text,
			language, emotion, event, voice, interrupted, start_at, end_at,
			speech_end_at, transcript_at, first_token_at, first_sentence_at, first_audio_at,
			audio_path, error, created_at)
			VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM turns WHERE conversation_id = ?1),
			        ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)
			RETURNING id, seq`)
		if err != nil {
			return err
		}
		defer ins.Close()
		touched := map[int64]string{}
		for _, t := range ts {
			created := t.Created
			if created.IsZero() {
				created = now
			}
			err := ins.QueryRowContext(ctx, t.ConversationID, string(t.Role), t.Text,
				t.Language, t.Emotion, t.Event, t.Voice, t.Interrupted, toMS(t.Start), toMS(t.End),
				toMS(t.Latency.SpeechEnd), toMS(t.Latency.Transcript), toMS(t.Latency.FirstToken),
				toMS(t.Latency.FirstSentence), toMS(t.Latency.FirstAudio),
				nullString(t.AudioPath), t.Error, created.UnixMilli()).Scan(&t.ID, &t.Seq)
			if isFKError(err) {
				return fmt.Errorf("conversation %d: %w", t.ConversationID, ErrNotFound)
			}
			if err != nil {
				return err
			}
			t.Created = created.Truncate(time.Millisecond)
			if _, ok := touched[t.ConversationID]; !ok {
				touched[t.ConversationID] = ""
			}
			if t.Role == RoleUser && touched[t.ConversationID] == "" {
				touched[t.ConversationID] = t.Text // a title for an untitled conversation
			}
		}
		for id, firstUser := range touched {
			if _, err := tx.ExecContext(ctx, `UPDATE conversations
				SET updated_at = ?, title = CASE WHEN title = '' THEN ? ELSE title END WHERE id = ?`,
				now.UnixMilli(), cleanTitle(firstUser), id); err != nil {
				return err
			}
		}
		return nil
	})
}

// UpdateTurn rewrites a turn's content (text, tags, voice, interrupted flag, times, latency,
// audio path and error) — e.g. to cut an answer to what was played when the user barged in. Replacing
// or clearing AudioPath deletes the old file.
func (s *Store) UpdateTurn(ctx context.Context, t *Turn) error {
	if err := t.validate(); err != nil {
		return fmt.Errorf("store: update turn %d: %w", t.ID, err)
	}
	err := s.write(ctx, fmt.Sprintf("update turn %d", t.ID), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE turns SET role = ?, text = ?, language = ?, emotion = ?,
			event = ?, voice = ?, interrupted = ?, start_at = ?, end_at = ?, speech_end_at = ?,
			transcript_at = ?, first_token_at = ?, first_sentence_at = ?, first_audio_at = ?, audio_path = ?,
			error = ? WHERE id = ?`,
			string(t.Role), t.Text, t.Language, t.Emotion, t.Event, t.Voice, t.Interrupted,
			toMS(t.Start), toMS(t.End), toMS(t.Latency.SpeechEnd), toMS(t.Latency.Transcript),
			toMS(t.Latency.FirstToken), toMS(t.Latency.FirstSentence), toMS(t.Latency.FirstAudio),
			nullString(t.AudioPath), t.Error, t.ID)
		if err := mustAffect(res, err, "turn", t.ID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE conversations SET updated_at = ?
			WHERE id = (SELECT conversation_id FROM turns WHERE id = ?)`, time.Now().UnixMilli(), t.ID)
		return err
	})
	if err != nil {
		return err
	}
	_, _, err = s.sweepAudioTrash(ctx)
	return err
}

const turnCols = `id, conversation_id, seq, role, text, language, emotion, event, voice, interrupted,
	start_at, end_at, speech_end_at, transcript_at, first_token_at, first_sentence_at, first_audio_at,
	COALESCE(audio_path, ''), error, created_at`

func scanTurn(sc interface{ Scan(...any) error }) (Turn, error) {
	var t Turn
	var start, end, se, tr, ft, fs, fa sql.NullInt64
	var created int64
	err := sc.Scan(&t.ID, &t.ConversationID, &t.Seq, &t.Role, &t.Text, &t.Language, &t.Emotion,
		&t.Event, &t.Voice, &t.Interrupted, &start, &end, &se, &tr, &ft, &fs, &fa, &t.AudioPath, &t.Error, &created)
	t.Start, t.End = fromNullMS(start), fromNullMS(end)
	t.Latency = Latency{fromNullMS(se), fromNullMS(tr), fromNullMS(ft), fromNullMS(fs), fromNullMS(fa)}
	t.Created = fromMS(created)
	return t, err
}

// Turn returns one turn, or an error wrapping ErrNotFound.
func (s *Store) Turn(ctx context.Context, id int64) (Turn, error) {
	t, err := scanTurn(s.r.QueryRowContext(ctx, `SELECT `+turnCols+` FROM turns WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("store: turn %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return t, s.wrap(fmt.Sprintf("turn %d", id), err)
	}
	return t, nil
}

// Turns returns a conversation's turns in order. An unknown conversation is ErrNotFound.
func (s *Store) Turns(ctx context.Context, conversationID int64) ([]Turn, error) {
	op := fmt.Sprintf("turns of conversation %d", conversationID)
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}) // one snapshot for both queries
	if err != nil {
		return nil, s.wrap(op, err)
	}
	defer tx.Rollback()
	var one int
	if err := tx.QueryRowContext(ctx, `SELECT 1 FROM conversations WHERE id = ?`, conversationID).Scan(&one); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("store: conversation %d: %w", conversationID, ErrNotFound)
		}
		return nil, s.wrap(op, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+turnCols+` FROM turns WHERE conversation_id = ? ORDER BY seq`, conversationID)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	defer rows.Close()
	var out []Turn
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, s.wrap(op, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(op, err)
	}
	return out, nil
}

// RecentTurns returns the last n turns of a conversation in order (context for the LLM).
func (s *Store) RecentTurns(ctx context.Context, conversationID int64, n int) ([]Turn, error) {
	op := fmt.Sprintf("recent turns of conversation %d", conversationID)
	rows, err := s.r.QueryContext(ctx, `SELECT * FROM (SELECT `+turnCols+` FROM turns
		WHERE conversation_id = ? ORDER BY seq DESC LIMIT ?) ORDER BY seq`, conversationID, n)
	if err != nil {
		return nil, s.wrap(op, err)
	}
	defer rows.Close()
	var out []Turn
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, s.wrap(op, err)
		}
		out = append(out, t)
	}
	return out, s.wrap(op, rows.Err())
}
