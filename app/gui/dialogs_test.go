package gui

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/widget"
)

// writeFile (behind Export and Save WAV) writes what was rendered for the chosen name and
// says where; a render that fails writes nothing and says why.
func TestWriteFile(t *testing.T) {
	u, _ := newTestUI(t, Services{})
	status := widget.NewLabel("")
	dir := t.TempDir()
	save := func(name string, render func(io.Writer, string) error) string {
		t.Helper()
		path := filepath.Join(dir, name)
		w, err := storage.Writer(storage.NewFileURI(path))
		if err != nil {
			t.Fatal(err)
		}
		status.SetText("")
		go u.writeFile(w, status, "Exported to", "Export failed", render)
		waitFor(t, u, "the status", func() bool { return status.Text != "" })
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	got := save("talk.json", func(dst io.Writer, name string) error {
		_, err := io.WriteString(dst, "rendered for "+name)
		return err
	})
	if got != "rendered for talk.json" || status.Text != "Exported to "+filepath.Join(dir, "talk.json") {
		t.Errorf("saved %q, status %q", got, status.Text)
	}
	got = save("broken.md", func(dst io.Writer, _ string) error {
		io.WriteString(dst, "half")
		return errors.New("no such conversation")
	})
	if got != "" || status.Text != "Export failed: no such conversation" {
		t.Errorf("a failed render saved %q, status %q", got, status.Text)
	}
}
