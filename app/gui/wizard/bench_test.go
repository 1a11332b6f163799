package wizard

import (
	"path/filepath"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/parley-voice/parley/voices/clone"
)

// BenchmarkWizardSteps: the wall time of the wizard's import, slice and label steps on about
// three minutes of speech (espeak-ng reading the built-in sentences as one long recording),
// through the same jobs the buttons start: Silero VAD and the demo recogniser on this
// machine's cores. Each figure is also given per minute of audio (x-realtime: seconds of
// work per second of speech).
func BenchmarkWizardSteps(b *testing.B) {
	requireWizardModels(b)
	svc := newTestCloning(b)
	in := b.TempDir()
	var pcm []float32
	for _, s := range clone.Prompts("en")[:40] {
		pcm = append(pcm, make([]float32, 12000)...)
		pcm = append(pcm, speech(b, "en-us", s)...)
	}
	audioSec := float64(len(pcm)) / 16000
	writeWizardWAV(b, filepath.Join(in, "reading.wav"), pcm)
	var imp, slice, label time.Duration
	var clips int
	for i := 0; i < b.N; i++ {
		u, _ := newTestUI(b, Services{Clone: svc})
		w := u.wizard
		if err := w.create("bench"+string(rune('a'+i%26))+time.Now().Format("150405.000"), goalVoice); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		w.collect.importPaths([]string{in})
		benchIdle(b, u)
		imp += time.Since(t0)
		w.show(stepSlice)
		t0 = time.Now()
		test.Tap(w.slice.run)
		benchIdle(b, u)
		slice += time.Since(t0)
		w.show(stepLabel)
		t0 = time.Now()
		test.Tap(w.label.run)
		benchIdle(b, u)
		label += time.Since(t0)
		clips = len(w.d.Clips)
	}
	n := float64(b.N)
	b.ReportMetric(audioSec/60, "audio-min")
	b.ReportMetric(float64(clips), "clips")
	b.ReportMetric(imp.Seconds()/n, "s/import")
	b.ReportMetric(slice.Seconds()/n, "s/slice")
	b.ReportMetric(label.Seconds()/n, "s/label")
	b.ReportMetric((imp+slice+label).Seconds()/n/audioSec, "x-realtime")
}

func benchIdle(b *testing.B, u *testUI) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for u.wizard.busy != nil {
		drain(u)
		if time.Now().After(deadline) {
			b.Fatal("a wizard step did not finish")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
