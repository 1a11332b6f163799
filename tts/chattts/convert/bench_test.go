package convert

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/chattts"
)

// BenchmarkConvertOfficial converts an official-size release with the built-in template and
// compares the result with the Python exporter's export of the same release: seconds to
// convert and the largest audio difference for the same text and seed. Made by hand (5 GB):
//
//	python3 -m train.chattts.fixture --size official --out /tmp/official-release
//	python3 -m train.chattts.export --official /tmp/official-release --spk-stat /tmp/official-release/config.py --int8 --out /tmp/official-py
//	PARLEY_CHATTTS_RELEASE=/tmp/official-release PARLEY_CHATTTS_RELEASE_PY=/tmp/official-py go test -bench ConvertOfficial ./tts/chattts/convert
func BenchmarkConvertOfficial(b *testing.B) {
	rel, py := os.Getenv("PARLEY_CHATTTS_RELEASE"), os.Getenv("PARLEY_CHATTTS_RELEASE_PY")
	if rel == "" || py == "" {
		b.Skip("PARLEY_CHATTTS_RELEASE and PARLEY_CHATTTS_RELEASE_PY not set")
	}
	gputest.RequireORT(b)
	var out string
	var took time.Duration
	for b.Loop() {
		out = filepath.Join(b.TempDir(), "chattts")
		t0 := time.Now()
		if _, err := Convert(context.Background(), Options{Assets: filepath.Join(rel, "asset"), SpkStat: filepath.Join(rel, "config.py")}, out); err != nil {
			b.Fatal(err)
		}
		took = time.Since(t0)
	}
	b.StopTimer()
	req := tts.Request{Text: "what time is it? it is a quarter past ten.", Seed: 5, HasSeed: true}
	var maxd, peak float64
	var n int
	for _, prec := range []string{chattts.PrecisionFP32, chattts.PrecisionInt8} {
		g := openB(b, out, prec)
		p := openB(b, py, prec)
		x, y := synthB(b, g, req), synthB(b, p, req)
		if len(x) != len(y) {
			b.Fatalf("%s: %d samples from the Go conversion, %d from the Python export", prec, len(x), len(y))
		}
		for i := range x {
			maxd = max(maxd, math.Abs(float64(x[i]-y[i])))
			peak = max(peak, math.Abs(float64(y[i])))
		}
		n = len(x)
		g.Close()
		p.Close()
	}
	b.ReportMetric(took.Seconds(), "s-convert")
	b.ReportMetric(maxd/max(peak, 1e-9), "max-rel-diff")
	b.ReportMetric(float64(n), "samples")
}

func openB(b *testing.B, dir, prec string) *chattts.Engine {
	e, err := chattts.New(dir, chattts.Config{Precision: prec})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

func synthB(b *testing.B, e *chattts.Engine, req tts.Request) []float32 {
	s, err := e.Synthesize(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	buf, err := tts.ReadAll(context.Background(), s)
	if err != nil {
		b.Fatal(err)
	}
	return buf.Data
}
