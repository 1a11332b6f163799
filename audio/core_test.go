package audio

import (
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"testing"
	"time"
)

func TestRingSPSC(t *testing.T) {
	q := NewRing(1000)
	if q.Cap() != 1024 {
		t.Fatalf("cap %d, want 1024", q.Cap())
	}
	const total = 1 << 20
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]float32, 333)
		next := 0
		for next < total {
			for i := range buf {
				buf[i] = float32(next + i)
			}
			n := min(len(buf), total-next)
			w := q.Write(buf[:n])
			next += w
		}
	}()
	buf := make([]float32, 257)
	want := 0
	for want < total {
		n := q.Read(buf)
		for i := 0; i < n; i++ {
			if buf[i] != float32(want) {
				t.Fatalf("read %v, want %d", buf[i], want)
			}
			want++
		}
	}
	wg.Wait()
	if q.Len() != 0 || q.Written() != total || q.Consumed() != total {
		t.Fatalf("len %d written %d consumed %d", q.Len(), q.Written(), q.Consumed())
	}
}

func TestRingFullAndDiscard(t *testing.T) {
	q := NewRing(8)
	if n := q.Write(make([]float32, 20)); n != 8 {
		t.Fatalf("wrote %d into 8", n)
	}
	if q.Free() != 0 || q.Write([]float32{1}) != 0 {
		t.Fatal("full ring accepted more")
	}
	if q.Discard(5) != 5 || q.Len() != 3 || q.Discard(10) != 3 {
		t.Fatal("discard")
	}
}

func TestLevels(t *testing.T) {
	s := sineAt(16000, 16000, 1000, 1)
	l := Measure(s)
	if math.Abs(l.RMS+3.0103) > 0.01 || math.Abs(l.Peak) > 0.01 {
		t.Errorf("full-scale sine: %+v, want RMS -3.01 peak 0", l)
	}
	if Measure(make([]float32, 100)).RMS != MinDB {
		t.Error("silence not at MinDB")
	}
	half := sineAt(16000, 16000, 1000, 0.5)
	if l := Measure(half); math.Abs(l.RMS+9.03) > 0.01 || l.Clipped != 0 {
		t.Errorf("half-scale sine: %+v", l)
	}
	loud := []float32{0.2, 1, -1.5, 0.99999, math.Float32frombits(0x7fc00000)}
	if n := CountClipped(loud); n != 3 {
		t.Errorf("CountClipped = %d, want 3", n)
	}
	if n := Clip(loud); n != 2 || loud[2] != -1 || loud[4] != 0 {
		t.Errorf("Clip changed %d: %v", n, loud)
	}
	g := []float32{0.5, -0.25}
	GainDB(g, -6.0206)
	if math.Abs(float64(g[0])-0.25) > 1e-4 {
		t.Errorf("-6 dB gain: %v", g)
	}
}

func TestMixing(t *testing.T) {
	st := []float32{1, 0, 0.5, 0.5, -1, 1}
	if m := DownMix(nil, st, 2); len(m) != 3 || m[0] != 0.5 || m[1] != 0.5 || m[2] != 0 {
		t.Errorf("DownMix = %v", m)
	}
	if u := UpMix(nil, []float32{1, 2}, 3); len(u) != 6 || u[5] != 2 {
		t.Errorf("UpMix = %v", u)
	}
}

func TestConvertSource(t *testing.T) {
	ctx := context.Background()
	f := Format{SampleRate: 48000, Channels: 2}
	src := Sine(f, 48000, 440, 0.5)
	c, err := Convert(src, Mono16k, QualityHigh)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadAll(ctx, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Format != Mono16k || len(b.Data) != 16000 {
		t.Fatalf("%v × %d", b.Format, len(b.Data))
	}
	want := sineAt(16000, 16000, 440, 0.5)
	if s := snrDB(b.Data, want, 800, 15200); s < 90 {
		t.Errorf("converted sine SNR %.1f dB", s)
	}
	if _, err := Convert(Silence(Format{16000, 3}, 10), Format{16000, 2}, QualityHigh); !errors.Is(err, ErrUnsupported) {
		t.Errorf("3→2 channels: %v", err)
	}
}

func TestReadAllLimit(t *testing.T) {
	ctx := context.Background()
	if _, err := ReadAll(ctx, Silence(Mono16k, 1000), 999); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over limit: %v", err)
	}
	if b, err := ReadAll(ctx, Silence(Mono16k, 1000), 1000); err != nil || len(b.Data) != 1000 {
		t.Errorf("at limit: %v", err)
	}
}

func TestPipe(t *testing.T) {
	p := NewPipe(Mono16k, 100)
	ctx := context.Background()
	go func() {
		for i := 0; i < 10; i++ {
			p.Write(ctx, make([]float32, 77))
		}
		p.Close()
	}()
	b, err := ReadAll(ctx, p, 0)
	if err != nil || len(b.Data) != 770 {
		t.Fatalf("%v, %d samples", err, len(b.Data))
	}
	// a blocked reader returns when its context ends
	q := NewPipe(Mono16k, 10)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := q.Read(cctx, make([]float32, 4)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked read: %v", err)
	}
	// a blocked writer too
	if _, err := q.Write(cctx, make([]float32, 20)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked write: %v", err)
	}
	q.CloseWithError(io.ErrClosedPipe)
	q.Read(ctx, make([]float32, 100))
	if _, err := q.Read(ctx, make([]float32, 4)); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("closed pipe read: %v", err)
	}
}

func TestPCMReader(t *testing.T) {
	raw := EncodePCM(nil, []float32{0.5, -0.5, 0.25, 0.125, 0.1}, S16)
	r, _ := NewPCMReader(&oneByteReader{raw}, Format{16000, 2}, S16)
	b, err := ReadAll(context.Background(), r, 0)
	if err != nil || len(b.Data) != 4 || b.Data[3] != 0.125 {
		t.Fatalf("%v %v", err, b.Data)
	}
}

type oneByteReader struct{ b []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	p[0] = r.b[0]
	r.b = r.b[1:]
	return 1, nil
}

// TestConvertBoundsUpsampledReads: a source at a very low rate (a WAV header may claim 1 Hz)
// must not turn one Read of the converter into hundreds of megabytes: the converter reads
// only as much input as makes about one buffer of output.
func TestConvertBoundsUpsampledReads(t *testing.T) {
	for _, rate := range []int{1, 7, 100, 8000} {
		src := NewBufferSource(&Buffer{Format: Format{SampleRate: rate, Channels: 1}, Data: make([]float32, 8192)})
		s, err := Convert(src, Mono16k, QualityHigh)
		if err != nil {
			t.Fatal(err)
		}
		c := s.(*Converter)
		p := make([]float32, 1024)
		if _, err := c.Read(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		// one input frame at 1 Hz is 16000 output frames; allow that plus a buffer
		if limit := 16000 + 2*4096 + c.rs.Taps()*16000/rate; cap(c.out) > limit {
			t.Errorf("%d Hz → 16 kHz: one Read buffered %d samples (limit %d)", rate, cap(c.out), limit)
		}
	}
}

func TestLimitSource(t *testing.T) {
	b := &Buffer{Format: Mono16k, Data: []float32{1, 2, 3, 4, 5}}
	for _, n := range []int{0, 3, 5, 9} {
		got, err := ReadAll(context.Background(), LimitSource(NewBufferSource(b), n), 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := b.Data[:min(n, 5)]; len(got.Data) != len(want) || (len(want) > 0 && got.Data[len(want)-1] != want[len(want)-1]) {
			t.Errorf("limit %d: %v, want %v", n, got.Data, want)
		}
		if got.Format != Mono16k {
			t.Errorf("format %v", got.Format)
		}
	}
}
