package gui

import (
	"bytes"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
)

type logRecord struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	Err   string `json:"err"`
	At    string `json:"at"`
}

func records(t *testing.T, buf *bytes.Buffer) []logRecord {
	t.Helper()
	var out []logRecord
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r logRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// TestFyneErrorsJoined: Fyne's own three-line error reports (through fyne.LogError, as its file
// dialog makes them) become one record each; the file dialog's missing XDG folder goes to
// debug, other Fyne errors to warn, and other lines of package log stay at info.
func TestFyneErrorsJoined(t *testing.T) {
	var buf bytes.Buffer
	restore := routeStdLog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	fyne.LogError("Getting favorite locations", errors.New("this computer does not define a VIDEOS folder"))
	fyne.LogError("Failed to set directory", errors.New("permission denied"))
	log.Print("a plain line")
	fyne.LogError("Cannot set a filter for a folder dialog", nil)
	restore()

	got := records(t, &buf)
	want := []logRecord{
		{Level: "DEBUG", Msg: "fyne: Getting favorite locations", Err: "this computer does not define a VIDEOS folder"},
		{Level: "WARN", Msg: "fyne: Failed to set directory", Err: "permission denied"},
		{Level: "INFO", Msg: "a plain line"},
		{Level: "WARN", Msg: "fyne: Cannot set a filter for a folder dialog"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		at := got[i].At
		got[i].At = ""
		if got[i] != want[i] {
			t.Errorf("record %d = %+v, want %+v", i, got[i], want[i])
		}
		if strings.HasPrefix(want[i].Msg, "fyne:") && !strings.Contains(at, "fynelog_test.go:") {
			t.Errorf("record %d names the caller %q, want this test's file", i, at)
		}
	}
}

// FuzzFyneLog: any output of package log is logged without a panic, and none of its text is
// lost: each non-blank line that is not part of a Fyne report becomes a record.
func FuzzFyneLog(f *testing.F) {
	f.Add("Fyne error:  x\n  Cause: y\n  At: z:1\n")
	f.Add("  Cause: orphan\n  At: orphan\nplain\n\n")
	f.Add("Fyne error: a\nFyne error: b\n")
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		w := &fyneLog{log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		w.flush()
		if strings.TrimSpace(s) != "" && buf.Len() == 0 {
			t.Fatalf("%q logged nothing", s)
		}
	})
}
