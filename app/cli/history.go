package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/parley-voice/parley/store"
)

func init() {
	register(&command{
		name:  "history",
		usage: "history list|show ID|search QUERY|export ID|rm ID|prune  browse, search, export and delete past conversations",
		run:   runHistory,
	})
}

const historyUsage = `usage: parley history [--db FILE] COMMAND
  list [--limit N] [--offset N]          conversations, most recent first
  show ID                                every turn of a conversation, with tags and latency
  search [--limit N] [--conversation ID] [--relevance] QUERY…
                                         full-text search, newest first (any language; word* for prefixes)
  export ID [--format md|json|srt] [-o FILE]
                                         write a conversation as Markdown, JSON or subtitles
  rm ID…                                 delete conversations and their saved audio
  prune [--days N]                       delete saved audio older than N days (default store.retention_days)
The database is --db, else store.path from the config, else DATA_DIR/parley.db.`

// historyDBPath picks the database: the flag, else the config, else the data directory.
func historyDBPath(env *cliEnv, flagPath string) string { return env.factory().StorePath(flagPath) }

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func runHistory(ctx context.Context, env *cliEnv, args []string) error {
	var dbFlag string
	sub := ""
	if helpRequested(env, args, historyUsage) {
		return nil
	}
	// --db may come before the subcommand.
	top := newFlags(env, "history", historyUsage)
	top.StringVar(&dbFlag, "db", "", "database file")
	if err := top.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			top.printUsage(env.Stdout)
			return err
		}
		return usageError("history", "%v", err)
	}
	if top.NArg() == 0 {
		fmt.Fprintln(env.Stderr, historyUsage)
		return usageError("history", "which command? list, show, search, export, rm or prune")
	}
	sub, args = top.Arg(0), top.Args()[1:]

	fs := newFlags(env, "history "+sub, historyUsage)
	fs.StringVar(&dbFlag, "db", dbFlag, "database file")
	limit := 0
	offset := 0
	switch sub {
	case "list":
		fs.IntVar(&limit, "limit", 50, "conversations to show")
		fs.IntVar(&offset, "offset", 0, "conversations to skip")
	case "search":
		fs.IntVar(&limit, "limit", 20, "hits to show")
	}
	var convFlag int64
	var format, outPath string
	var days int
	var byRelevance bool
	switch sub {
	case "search":
		fs.Int64Var(&convFlag, "conversation", 0, "search only this conversation")
		fs.BoolVar(&byRelevance, "relevance", false, "best matches first (default newest first)")
	case "export":
		fs.StringVar(&format, "format", "md", "md | json | srt")
		fs.StringVar(&outPath, "o", "", "write to FILE instead of standard output")
	case "prune":
		days = -1
		fs.IntVar(&days, "days", -1, "keep audio this many days (default store.retention_days)")
	case "list", "show", "rm":
	default:
		fmt.Fprintln(env.Stderr, historyUsage)
		return fmt.Errorf("%w: unknown history command %q (want list, show, search, export, rm or prune)", errUsage, sub)
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	pos := fs.Args()
	if sub == "prune" && flagSet(fs.FlagSet, "days") && days < 0 {
		return fmt.Errorf("%w: --days %d: want a number of days ≥ 0", errUsage, days)
	}
	if limit < 0 || offset < 0 {
		return fmt.Errorf("%w: --limit and --offset must be ≥ 0", errUsage)
	}

	path := historyDBPath(env, dbFlag)
	// Reading commands don't create a database that isn't there.
	if sub != "prune" {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			switch sub {
			case "list", "search":
				fmt.Fprintf(env.Stdout, "no history yet (%s does not exist)\n", path)
				return nil
			default:
				return fmt.Errorf("no history database at %s", path)
			}
		}
	}
	switch sub {
	case "show", "export":
		if len(pos) != 1 {
			return fmt.Errorf("%w: parley history %s ID", errUsage, sub)
		}
	case "rm":
		if len(pos) == 0 {
			return fmt.Errorf("%w: parley history rm ID…", errUsage)
		}
	case "search":
		if len(pos) == 0 {
			return fmt.Errorf("%w: parley history search QUERY…", errUsage)
		}
	default:
		if len(pos) != 0 {
			return fmt.Errorf("%w: parley history %s takes no arguments, got %q", errUsage, sub, pos)
		}
	}
	var ids []int64
	if sub == "show" || sub == "export" || sub == "rm" {
		for _, p := range pos {
			id, err := strconv.ParseInt(p, 10, 64)
			if err != nil || id <= 0 {
				return fmt.Errorf("%w: conversation ID %q is not a positive number (see parley history list)", errUsage, p)
			}
			ids = append(ids, id)
		}
	}
	var f store.Format
	if sub == "export" {
		var err error
		if f, err = store.ParseFormat(format); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}

	s, err := env.factory().Store(path)
	if err != nil {
		return err
	}
	defer s.Close()

	order := store.SearchNewest
	if byRelevance {
		order = store.SearchRelevance
	}
	switch sub {
	case "list":
		return historyList(ctx, env.Stdout, s, store.ListOptions{Limit: limit, Offset: offset})
	case "show":
		return historyShow(ctx, env.Stdout, s, ids[0])
	case "search":
		return historySearch(ctx, env.Stdout, s, strings.Join(pos, " "), store.SearchOptions{Limit: limit, ConversationID: convFlag, Order: order})
	case "export":
		return historyExport(ctx, env.Stdout, s, ids[0], f, outPath)
	case "rm":
		for _, id := range ids {
			n, err := s.DeleteConversation(ctx, id)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "deleted conversation %d (%d turns)\n", id, n)
		}
		return nil
	case "prune":
		if days < 0 {
			days = 0
			if env.Config != nil {
				days = env.Config.Store.RetentionDays
			}
		}
		if days == 0 {
			fmt.Fprintln(env.Stdout, "retention is 0 days (keep forever): nothing to prune")
			return nil
		}
		res, err := s.PruneAudioDays(ctx, days, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "pruned audio older than %d days: %d turns, %d files deleted\n", days, res.Turns, res.Deleted)
		if len(res.Failed) > 0 {
			return fmt.Errorf("could not delete %d audio files (will retry): %s", len(res.Failed), strings.Join(res.Failed, ", "))
		}
	}
	return nil
}

func historyList(ctx context.Context, w io.Writer, s *store.Store, opt store.ListOptions) error {
	cs, err := s.Conversations(ctx, opt)
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		fmt.Fprintln(w, "no conversations")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tTURNS\tTITLE")
	for _, c := range cs {
		title := c.Title
		if title == "" {
			title = "(untitled)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", c.ID, c.Updated.Local().Format("2006-01-02 15:04"), c.Turns, title)
	}
	return tw.Flush()
}

func roleName(r store.Role) string {
	switch r {
	case store.RoleUser:
		return "You"
	case store.RoleAssistant:
		return "Parley"
	}
	return strings.ToUpper(string(r[:1])) + string(r[1:])
}

func historyShow(ctx context.Context, w io.Writer, s *store.Store, id int64) error {
	c, err := s.Conversation(ctx, id)
	if err != nil {
		return err
	}
	turns, err := s.Turns(ctx, id)
	if err != nil {
		return err
	}
	title := c.Title
	if title == "" {
		title = "(untitled)"
	}
	fmt.Fprintf(w, "Conversation %d: %s\nstarted %s, %d turns\n", c.ID, title, c.Created.Local().Format("2006-01-02 15:04:05"), len(turns))
	for _, t := range turns {
		at := t.Start
		if at.IsZero() {
			at = t.Created
		}
		var tags []string
		for _, tag := range []string{t.Language, t.Emotion, t.Event, t.Voice} {
			if tag != "" {
				tags = append(tags, tag)
			}
		}
		if t.Interrupted {
			tags = append(tags, "interrupted")
		}
		head := roleName(t.Role)
		if len(tags) > 0 {
			head += " (" + strings.Join(tags, ", ") + ")"
		}
		fmt.Fprintf(w, "\n[%s] %s:\n", at.Local().Format("15:04:05"), head)
		for _, line := range strings.Split(strings.TrimRight(t.Text, "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
		if l := t.Latency.String(); l != "" {
			fmt.Fprintf(w, "  latency: %s\n", l)
		}
		if t.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", t.Error)
		}
		if t.AudioPath != "" {
			fmt.Fprintf(w, "  audio: %s\n", t.AudioPath)
		}
	}
	return nil
}

// isTerminal reports whether w is a character device (to decide on highlighting escapes).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func historySearch(ctx context.Context, w io.Writer, s *store.Store, q string, opt store.SearchOptions) error {
	hits, err := s.Search(ctx, q, opt)
	if errors.Is(err, store.ErrEmptyQuery) {
		return fmt.Errorf("%w: search for words, e.g. parley history search weather", errUsage)
	}
	if err != nil {
		return err
	}
	if len(hits) == 0 {
		fmt.Fprintf(w, "no turns match %q\n", q)
		return nil
	}
	on, off := "[", "]"
	if isTerminal(w) {
		on, off = "\x1b[1m", "\x1b[0m"
	}
	for _, h := range hits {
		title := h.Title
		if title == "" {
			title = "(untitled)"
		}
		fmt.Fprintf(w, "conversation %d · %s · %s\n  %s: %s\n", h.ConversationID, title,
			h.Created.Local().Format("2006-01-02 15:04"), roleName(h.Role),
			strings.ReplaceAll(store.Highlight(h.Snippet, h.Highlights, on, off), "\n", " "))
	}
	return nil
}

func historyExport(ctx context.Context, w io.Writer, s *store.Store, id int64, f store.Format, outPath string) error {
	if outPath == "" || outPath == "-" {
		return s.Export(ctx, w, id, f, store.ExportOptions{})
	}
	// Write next to the target and rename, so a failed export never leaves half a file.
	tmp, err := os.CreateTemp(filepath.Dir(outPath), "."+filepath.Base(outPath)+".*.partial")
	if err != nil {
		return fmt.Errorf("export to %s: %w", outPath, err)
	}
	defer os.Remove(tmp.Name())
	if err := s.Export(ctx, tmp, id, f, store.ExportOptions{}); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("export to %s: %w", outPath, err)
	}
	if err := os.Rename(tmp.Name(), outPath); err != nil {
		return fmt.Errorf("export to %s: %w", outPath, err)
	}
	return nil
}
