package gui

import (
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app"
)

// Benchmarks run on Fyne's test driver with its software painter (no GL, no display), so
// they measure the UI's own work: building and laying out widgets and painting a frame.
// Each reports a ratio against a baseline measured in the same run.

// BenchmarkStartup: building the whole UI and painting its first frame, against a window
// holding one label (the toolkit's own floor).
func BenchmarkStartup(b *testing.B) {
	a := test.NewTempApp(b)
	a.Settings().SetTheme(newTheme())
	size := fyne.NewSize(1040, 720)
	run := func(build func(w fyne.Window) fyne.CanvasObject) time.Duration {
		start := time.Now()
		w := a.NewWindow("Parley")
		w.SetContent(build(w))
		w.Resize(size)
		w.Canvas().Capture()
		d := time.Since(start)
		w.Close()
		return d
	}
	var base, ui time.Duration
	for i := 0; i < b.N; i++ {
		base += run(func(fyne.Window) fyne.CanvasObject { return widget.NewLabel("Parley") })
		ui += run(func(w fyne.Window) fyne.CanvasObject { return New(a, w, Services{}).Content() })
	}
	b.ReportMetric(float64(ui.Microseconds())/float64(b.N)/1000, "ms/start")
	b.ReportMetric(float64(base.Microseconds())/float64(b.N)/1000, "ms/baseline")
	b.ReportMetric(float64(ui)/float64(base), "x-baseline")
}

// BenchmarkStreamFrame: one frame while a long answer streams (a word arrives, the bubble
// re-wraps, the list scrolls, the frame is painted), against an idle frame of the same
// conversation.
func BenchmarkStreamFrame(b *testing.B) {
	a := test.NewTempApp(b)
	a.Settings().SetTheme(newTheme())
	w := a.NewWindow("Parley")
	u := New(a, w, Services{})
	w.SetContent(u.Content())
	w.Resize(fyne.NewSize(1040, 720))
	u.Attach(newFakeAssistant(), nil)
	for turn := int64(1); turn <= 6; turn++ { // some history above the streaming answer
		u.Handle(app.Event{Kind: app.EvTranscript, Turn: turn, Transcript: &app.Transcript{Text: "Tell me something", Lang: "en"}})
		u.Handle(app.Event{Kind: app.EvDelta, Turn: turn, Text: strings.Repeat("A fairly long sentence of an answer. ", 6)})
		u.Handle(app.Event{Kind: app.EvTurnDone, Turn: turn, Exchange: &app.Exchange{Turn: turn, FullAnswer: strings.Repeat("A fairly long sentence of an answer. ", 6)}})
	}
	u.Handle(app.Event{Kind: app.EvTranscript, Turn: 7, Transcript: &app.Transcript{Text: "Tell me a long story", Lang: "en"}})
	c := w.Canvas()
	c.Capture()
	words := strings.Fields(strings.Repeat("Once upon a time in a quiet valley there lived a curious engineer who built talking machines. ", 40))
	var idle, stream time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c.Capture()
		idle += time.Since(t0)
		t0 = time.Now()
		u.Handle(app.Event{Kind: app.EvDelta, Turn: 7, Text: words[i%len(words)] + " "})
		c.Capture()
		stream += time.Since(t0)
	}
	b.ReportMetric(float64(stream.Microseconds())/float64(b.N)/1000, "ms/stream-frame")
	b.ReportMetric(float64(idle.Microseconds())/float64(b.N)/1000, "ms/idle-frame")
	b.ReportMetric(float64(stream)/float64(idle), "x-baseline")
}
