package audio

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// soxResample runs sox's resampler (rate -h, or -v) on x and returns its output as float32.
func soxResample(tb testing.TB, x []float32, in, out int, quality string) ([]float32, time.Duration) {
	tb.Helper()
	if _, err := exec.LookPath("sox"); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal("sox is not installed (build/setup.sh packages installs it)")
		}
		tb.Skip("sox is not installed")
	}
	dir := tb.TempDir()
	src, dst := filepath.Join(dir, "in.wav"), filepath.Join(dir, "out.wav")
	if err := WriteWAVFile(src, &Buffer{Format: Format{in, 1}, Data: x}, F32); err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command("sox", "-D", src, "-e", "floating-point", "-b", "32", dst, "rate", quality, fmt.Sprint(out))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("sox: %v: %s", err, stderr.String())
	}
	took := time.Since(start)
	b, err := ReadWAVFile(dst)
	if err != nil {
		tb.Fatal(err)
	}
	return b.Data, took
}

// diffSNR is 10·log10(Σref² / Σ(got−ref)²) over the common part, skipping edge samples at
// both ends (the two resamplers treat the signal's edges differently).
func diffSNR(got, ref []float32, edge int) float64 {
	n := min(len(got), len(ref))
	var s, d float64
	for i := edge; i < n-edge; i++ {
		s += float64(ref[i]) * float64(ref[i])
		e := float64(got[i] - ref[i])
		d += e * e
	}
	if d == 0 {
		return 300
	}
	return 10 * math.Log10(s/d)
}

// sweep is an exponential sine sweep from f0 to f1 Hz, amplitude 0.5.
func sweep(rate int, secs, f0, f1 float64) []float32 {
	g := Sweep(Format{rate, 1}, int64(secs*float64(rate)), f0, f1, 0.5)
	b, _ := ReadAll(context.Background(), g, 0)
	return b.Data
}

// speechAt is espeak-ng speech resampled by sox -v to rate (the source material for
// comparisons at 44.1 and 48 kHz), or nil without espeak-ng.
func speechAt(tb testing.TB, rate int) []float32 {
	tb.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		return nil
	}
	out, err := exec.Command("espeak-ng", "--stdout", "-v", "en-us", "the quick brown fox jumps over the lazy dog, and then she sells sea shells by the sea shore").Output()
	if err != nil {
		tb.Fatal(err)
	}
	b, err := ReadWAV(bytes.NewReader(out))
	if err != nil {
		tb.Fatal(err)
	}
	if b.SampleRate == rate {
		return b.Data
	}
	y, _ := soxResample(tb, b.Data, b.SampleRate, rate, "-v")
	return y
}

type qualityRow struct {
	name              string
	in, out           int
	sweepSNR, bandSNR float64 // full-band sweep; sweep below 0.9 × output Nyquist
	speechSNR         float64
	aliasOurs         float64 // dB re input: a tone 10% above the output Nyquist
	aliasSox          float64
}

func measureQuality(tb testing.TB, in, out int, quality string) qualityRow {
	r := qualityRow{name: fmt.Sprintf("%d→%d", in, out), in: in, out: out}
	low := float64(min(in, out))
	edge := out / 10
	x := sweep(in, 4, 20, 0.5*float64(in)*0.999)
	ours, _ := Resample(x, in, out, 1)
	ref, _ := soxResample(tb, x, in, out, quality)
	r.sweepSNR = diffSNR(ours, ref, edge)
	xb := sweep(in, 4, 20, 0.45*low)
	ours, _ = Resample(xb, in, out, 1)
	ref, _ = soxResample(tb, xb, in, out, quality)
	r.bandSNR = diffSNR(ours, ref, edge)
	if sp := speechAt(tb, in); sp != nil {
		ours, _ = Resample(sp, in, out, 1)
		ref, _ = soxResample(tb, sp, in, out, quality)
		r.speechSNR = diffSNR(ours, ref, edge)
	}
	if out < in {
		f := 0.55 * float64(out)
		tone := sineAt(in, in*2, f, 0.5)
		ours, _ = Resample(tone, in, out, 1)
		ref, _ = soxResample(tb, tone, in, out, quality)
		level := func(y []float32) float64 {
			return 20 * math.Log10(RMS(y[edge:len(y)-edge])/(0.5/math.Sqrt2)+1e-15)
		}
		r.aliasOurs, r.aliasSox = level(ours), level(ref)
	}
	return r
}

var qualityPairs = [][2]int{{48000, 16000}, {44100, 16000}, {22050, 16000}, {24000, 16000}, {8000, 16000}, {16000, 48000}, {16000, 44100}, {16000, 24000}}

// TestQualityVsSox compares the resampler with sox's high-quality one (rate -h) on sweeps
// and speech: our output must match sox's to ≥ 60 dB on speech and ≥ 100 dB on sweeps below
// 0.9 × Nyquist, and reject aliases (≤ −100 dB).
func TestQualityVsSox(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sox many times")
	}
	for _, p := range qualityPairs {
		r := measureQuality(t, p[0], p[1], "-h")
		alias := "n/a (upsampling)"
		if p[1] < p[0] {
			alias = fmt.Sprintf("ours %.0f dB, sox %.0f dB", r.aliasOurs, r.aliasSox)
		}
		t.Logf("%-12s SNR of the difference from sox -h: full sweep %.1f dB, sweep to 0.9·Nyquist %.1f dB, speech %.1f dB; tone at 0.55·fs_out: %s",
			r.name, r.sweepSNR, r.bandSNR, r.speechSNR, alias)
		if r.bandSNR < 100 {
			t.Errorf("%s: in-band sweep differs from sox by SNR %.1f dB, want ≥ 100", r.name, r.bandSNR)
		}
		if r.speechSNR != 0 && r.speechSNR < 60 {
			t.Errorf("%s: speech differs from sox by SNR %.1f dB, want ≥ 60", r.name, r.speechSNR)
		}
		if p[1] < p[0] && r.aliasOurs > -100 {
			t.Errorf("%s: alias at %.1f dB, want ≤ −100", r.name, r.aliasOurs)
		}
	}
}

// BenchmarkResample measures throughput (input samples per second) and, in the same run,
// sox's: sox_speed is sox's throughput on the same 60 s of audio (including its start-up),
// vs_sox our throughput divided by it; snr_vs_sox_dB is the speech difference from sox -h.
func BenchmarkResample(b *testing.B) {
	for _, p := range [][2]int{{48000, 16000}, {44100, 16000}, {16000, 48000}, {22050, 16000}} {
		b.Run(fmt.Sprintf("%dto%d", p[0], p[1]), func(b *testing.B) {
			in, out := p[0], p[1]
			x := sweep(in, 60, 20, 0.45*float64(in))
			_, soxTook := soxResample(b, x, in, out, "-h")
			q := measureQuality(b, in, out, "-h")
			r, _ := NewResampler(in, out, 1, QualityHigh)
			chunk := in / 50 // 20 ms blocks, as a stream
			dst := make([]float32, 0, 2*chunk)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				for j := 0; j+chunk <= len(x); j += chunk {
					dst = r.Process(dst[:0], x[j:j+chunk])
				}
				dst = r.Flush(dst[:0])
			}
			el := time.Since(start)
			b.StopTimer()
			ours := float64(len(x)) * float64(b.N) / el.Seconds()
			sox := float64(len(x)) / soxTook.Seconds()
			b.ReportMetric(ours, "samples/s")
			b.ReportMetric(ours/float64(in), "x_realtime")
			b.ReportMetric(sox, "sox_samples/s")
			b.ReportMetric(ours/sox, "vs_sox")
			b.ReportMetric(q.speechSNR, "snr_vs_sox_dB")
			b.ReportMetric(q.bandSNR, "inband_snr_vs_sox_dB")
		})
	}
}
