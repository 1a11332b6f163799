package store

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Format is an export format.
type Format string

// Export formats.
const (
	FormatMarkdown Format = "md"
	FormatJSON     Format = "json"
	FormatSRT      Format = "srt"
)

// ParseFormat accepts md (markdown), json and srt.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "md", "markdown":
		return FormatMarkdown, nil
	case "json":
		return FormatJSON, nil
	case "srt":
		return FormatSRT, nil
	}
	return "", fmt.Errorf("export format %q: want md, json or srt: %w", s, ErrInvalid)
}

// ExportOptions tune an export.
type ExportOptions struct {
	Location *time.Location // for times shown in Markdown; default time.Local
	// Names shown for roles in Markdown and SRT; defaults "You" and "Parley".
	UserName, AssistantName string
}

func (o ExportOptions) withDefaults() ExportOptions {
	if o.Location == nil {
		o.Location = time.Local
	}
	if o.UserName == "" {
		o.UserName = "You"
	}
	if o.AssistantName == "" {
		o.AssistantName = "Parley"
	}
	return o
}

func (o ExportOptions) name(r Role) string {
	switch r {
	case RoleUser:
		return o.UserName
	case RoleAssistant:
		return o.AssistantName
	case RoleSystem:
		return "System"
	case RoleTool:
		return "Tool"
	}
	return string(r)
}

// Export writes a conversation in the given format.
func (s *Store) Export(ctx context.Context, w io.Writer, id int64, f Format, opt ExportOptions) error {
	c, err := s.Conversation(ctx, id)
	if err != nil {
		return err
	}
	turns, err := s.Turns(ctx, id)
	if err != nil {
		return err
	}
	return WriteExport(w, c, turns, f, opt)
}

// WriteExport writes an already loaded conversation in the given format.
func WriteExport(w io.Writer, c Conversation, turns []Turn, f Format, opt ExportOptions) error {
	opt = opt.withDefaults()
	bw := bufio.NewWriter(w)
	var err error
	switch f {
	case FormatMarkdown:
		err = writeMarkdown(bw, c, turns, opt)
	case FormatJSON:
		err = writeJSON(bw, c, turns)
	case FormatSRT:
		err = writeSRT(bw, turns, opt)
	default:
		return fmt.Errorf("store: export: format %q: want md, json or srt: %w", f, ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("store: export conversation %d as %s: %w", c.ID, f, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("store: export conversation %d as %s: %w", c.ID, f, err)
	}
	return nil
}

func writeMarkdown(w io.Writer, c Conversation, turns []Turn, o ExportOptions) error {
	title := c.Title
	if title == "" {
		title = fmt.Sprintf("Conversation %d", c.ID)
	}
	fmt.Fprintf(w, "# %s\n\n", title)
	fmt.Fprintf(w, "_Conversation %d · %s · %d turns_\n", c.ID, c.Created.In(o.Location).Format("2006-01-02 15:04"), len(turns))
	for _, t := range turns {
		at := t.Start
		if at.IsZero() {
			at = t.Created
		}
		head := []string{"**" + o.name(t.Role) + "**", at.In(o.Location).Format("15:04:05")}
		for _, tag := range []string{t.Language, t.Emotion, t.Event, t.Voice} {
			if tag != "" {
				head = append(head, "`"+tag+"`")
			}
		}
		if t.Interrupted {
			head = append(head, "_interrupted_")
		}
		fmt.Fprintf(w, "\n%s\n\n", strings.Join(head, " · "))
		text := strings.TrimRight(t.Text, "\n")
		if text == "" {
			text = "…"
		}
		for _, line := range strings.Split(text, "\n") {
			if line = strings.TrimRight(line, " \t\r"); line == "" {
				fmt.Fprintln(w, ">")
				continue
			}
			fmt.Fprintf(w, "> %s\n", line)
		}
		if l := t.Latency.String(); l != "" {
			fmt.Fprintf(w, "\n_latency: %s_\n", l)
		}
		if t.Error != "" {
			fmt.Fprintf(w, "\n_error: %s_\n", strings.Join(strings.Fields(t.Error), " "))
		}
		if t.AudioPath != "" {
			fmt.Fprintf(w, "\n[audio](<%s>)\n", t.AudioPath)
		}
	}
	return nil
}

type jsonLatency struct {
	SpeechEnd       *time.Time `json:"speech_end,omitempty"`
	TranscriptMS    *int64     `json:"transcript_ms,omitempty"`
	FirstTokenMS    *int64     `json:"first_token_ms,omitempty"`
	FirstSentenceMS *int64     `json:"first_sentence_ms,omitempty"`
	FirstAudioMS    *int64     `json:"first_audio_ms,omitempty"`
}

type jsonTurn struct {
	ID          int64        `json:"id"`
	Seq         int          `json:"seq"`
	Role        Role         `json:"role"`
	Text        string       `json:"text"`
	Language    string       `json:"language,omitempty"`
	Emotion     string       `json:"emotion,omitempty"`
	Event       string       `json:"event,omitempty"`
	Voice       string       `json:"voice,omitempty"`
	Interrupted bool         `json:"interrupted"`
	Start       *time.Time   `json:"start,omitempty"`
	End         *time.Time   `json:"end,omitempty"`
	Latency     *jsonLatency `json:"latency,omitempty"`
	AudioPath   string       `json:"audio_path,omitempty"`
	Error       string       `json:"error,omitempty"`
	Created     time.Time    `json:"created"`
}

type jsonConversation struct {
	ID      int64      `json:"id"`
	Title   string     `json:"title"`
	Created time.Time  `json:"created"`
	Updated time.Time  `json:"updated"`
	Turns   []jsonTurn `json:"turns"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func msPtr(l Latency, t time.Time) *int64 {
	d, ok := l.Since(t)
	if !ok {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

func writeJSON(w io.Writer, c Conversation, turns []Turn) error {
	out := jsonConversation{ID: c.ID, Title: c.Title, Created: c.Created.UTC(), Updated: c.Updated.UTC(), Turns: []jsonTurn{}}
	for _, t := range turns {
		jt := jsonTurn{ID: t.ID, Seq: t.Seq, Role: t.Role, Text: t.Text, Language: t.Language,
			Emotion: t.Emotion, Event: t.Event, Voice: t.Voice, Interrupted: t.Interrupted,
			Start: timePtr(t.Start), End: timePtr(t.End), AudioPath: t.AudioPath, Error: t.Error, Created: t.Created.UTC()}
		if l := t.Latency; !l.IsZero() {
			jt.Latency = &jsonLatency{SpeechEnd: timePtr(l.SpeechEnd), TranscriptMS: msPtr(l, l.Transcript),
				FirstTokenMS: msPtr(l, l.FirstToken), FirstSentenceMS: msPtr(l, l.FirstSentence), FirstAudioMS: msPtr(l, l.FirstAudio)}
		}
		out.Turns = append(out.Turns, jt)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// estimateDuration guesses how long a text takes to say when the turn has no end time.
func estimateDuration(text string) time.Duration {
	d := time.Second + time.Duration(utf8.RuneCountInString(text))*60*time.Millisecond
	return min(d, 15*time.Second)
}

// writeSRT writes the spoken turns (user and assistant) as subtitles timed from the first
// turn. Turns without recorded times follow the previous one with an estimated duration.
func writeSRT(w io.Writer, turns []Turn, o ExportOptions) error {
	var origin time.Time
	for _, t := range turns {
		at := t.Start
		if at.IsZero() {
			at = t.Created
		}
		if !at.IsZero() && (origin.IsZero() || at.Before(origin)) {
			origin = at
		}
	}
	var prevEnd time.Duration
	n := 0
	for _, t := range turns {
		if t.Role != RoleUser && t.Role != RoleAssistant {
			continue
		}
		text := strings.TrimSpace(t.Text)
		if text == "" {
			continue
		}
		var start time.Duration
		if !t.Start.IsZero() {
			start = t.Start.Sub(origin)
		} else {
			start = prevEnd
		}
		start = max(start, 0)
		end := start + estimateDuration(text)
		if !t.End.IsZero() && t.End.Sub(origin) > start {
			end = t.End.Sub(origin)
		}
		prevEnd = end
		n++
		label := o.name(t.Role)
		if t.Interrupted {
			label += " (interrupted)"
		}
		// A blank line ends an SRT cue, so blank lines inside the text are dropped.
		var lines []string
		for _, l := range strings.Split(text, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		fmt.Fprintf(w, "%d\n%s --> %s\n%s: %s\n\n", n, srtTime(start), srtTime(end), label, strings.Join(lines, "\n"))
	}
	return nil
}

func srtTime(d time.Duration) string {
	ms := d.Milliseconds()
	return fmt.Sprintf("%02d:%02d:%02d,%03d", ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
}
