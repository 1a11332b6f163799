package gui

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/audio"
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

// A turn's recording cut short (Parley stopped mid-turn) still replays: ReadWAVFile gives
// its samples with an ErrRecovered warning, which is not a failure.
func TestReplayPlaysARecordingCutShort(t *testing.T) {
	fv := &fakeVoices{}
	u, _ := newTestUI(t, Services{Voices: fv})
	var wav bytes.Buffer
	if err := audio.WriteWAV(&wav, &audio.Buffer{Format: audio.Mono16k, Data: make([]float32, 32000)}, audio.S16); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "turn.wav")
	if err := os.WriteFile(path, wav.Bytes()[:wav.Len()/2], 0o644); err != nil {
		t.Fatal(err)
	}
	u.replay(path)
	waitFor(t, u, "the replay or its failure", func() bool { _, plays := fv.counts(); return plays > 0 || len(u.banners.Objects) > 0 })
	if _, plays := fv.counts(); plays != 1 {
		t.Errorf("the recording was not replayed: %q", texts(u.banners))
	}
}
