package vad

import (
	"context"
	"testing"
	"time"
)

// BenchmarkVAD reports the detector's real-time factor (processing time / audio time) on a
// noisy conversation, the bare model's on the same windows in the same run (interleaved), and
// the detector's overhead over it. Each op runs both.
func BenchmarkVAD(b *testing.B) {
	c := makeConversation(b)
	x, _ := noisy(b, c, "white", 15)
	d := openDetector(b, Config{})
	ctx := context.Background()
	audioSec := float64(len(x)) / rate
	win := d.m.Window()

	b.ResetTimer()
	var el, bare float64
	runBare := func() {
		// bare model: the same windows, nothing else
		d.Reset()
		start := time.Now()
		for i := 0; i+win <= len(x); i += win {
			if _, err := d.m.Prob(x[i : i+win]); err != nil {
				b.Fatal(err)
			}
		}
		bare += time.Since(start).Seconds()
	}
	runDetector := func() {
		d.Reset()
		start := time.Now()
		for i := 0; i < len(x); i += 1600 { // 100 ms chunks, as from a device
			if _, err := d.Accept(ctx, x[i:min(i+1600, len(x))]); err != nil {
				b.Fatal(err)
			}
		}
		el += time.Since(start).Seconds()
	}
	runBare() // warm-up, not counted
	bare = 0
	for n := 0; n < b.N; n++ {
		if n%2 == 0 { // alternate the order so that neither gets the warmer caches
			runBare()
			runDetector()
		} else {
			runDetector()
			runBare()
		}
	}
	el /= float64(b.N)
	bare /= float64(b.N)
	b.ReportMetric(el/audioSec, "rtf")
	b.ReportMetric(bare/audioSec, "model_rtf")
	b.ReportMetric(100*(el-bare)/bare, "overhead_%")
	b.ReportMetric(el/float64(len(x)/win)*1e6, "us/window")
}
