package wake

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio/audiotest"
)

// BenchmarkWake reports the real-time factor of hey_jarvis on 10 s of speech, and the time
// per 80 ms step.
func BenchmarkWake(b *testing.B) {
	d := openDetector(b, Config{})
	var x []float32
	for _, p := range []string{"the weather today is mild with a light breeze", "hey jarvis", "remind me to buy bread and milk on the way home"} {
		x = append(x, audiotest.RequireSpeech(b, p, "en-us", 0).Data...)
		x = append(x, make([]float32, Rate/2)...)
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for n := 0; n < b.N; n++ {
		d.Reset()
		if _, err := d.Accept(ctx, x); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(el/(float64(len(x))/Rate), "rtf")
	b.ReportMetric(el/float64(len(x)/Chunk)*1e3, "ms/step")
}
