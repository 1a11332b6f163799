package tts

import (
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/tts/control"
)

func TestPrepare(t *testing.T) {
	p := Prepare(Request{Text: "I have 3 cats [uv_break] and 2 dogs. 我有2个苹果。", Speed: 2}, control.DefaultCalibration())
	if len(p.Sentences) != 2 {
		t.Fatalf("%d sentences, want 2", len(p.Sentences))
	}
	s0 := p.Sentences[0]
	if !strings.Contains(s0.Text, "three cats") || !strings.Contains(s0.Text, "two dogs") {
		t.Errorf("sentence 0 text %q not normalized", s0.Text)
	}
	var pauses []time.Duration
	for _, seg := range s0.Segments {
		if seg.Kind == control.Pause {
			pauses = append(pauses, seg.Pause)
		}
		if seg.Kind == control.Text && seg.Rate != 2 {
			t.Errorf("rate %v, want request speed 2", seg.Rate)
		}
	}
	// uv_break (150 ms) and the sentence gap (250 ms), both halved by speed 2
	if len(pauses) != 2 || pauses[0] != 75*time.Millisecond || pauses[1] != 125*time.Millisecond {
		t.Errorf("pauses %v, want [75ms 125ms]", pauses)
	}
	if s1 := p.Sentences[1]; s1.Segments[0].Lang != "zh" || !strings.Contains(s1.Text, "两个") {
		t.Errorf("sentence 1 = %+v", s1)
	}
}

func tone(d time.Duration, rate int) []float32 {
	x := make([]float32, int(d.Seconds()*float64(rate)))
	for i := range x {
		x[i] = float32(0.3 * math.Sin(2*math.Pi*220*float64(i)/float64(rate)))
	}
	return x
}

func TestSilencesAndTrim(t *testing.T) {
	const rate = 16000
	var x []float32
	x = append(x, Silence(200*time.Millisecond, rate)...)
	x = append(x, tone(300*time.Millisecond, rate)...)
	x = append(x, Silence(400*time.Millisecond, rate)...)
	x = append(x, tone(300*time.Millisecond, rate)...)
	x = append(x, Silence(100*time.Millisecond, rate)...)
	g := Silences(x, rate, -50, 50*time.Millisecond)
	if len(g) != 1 || g[0].Len() < 390*time.Millisecond || g[0].Len() > 410*time.Millisecond {
		t.Errorf("gaps %v, want one of 400 ms", g)
	}
	tr := Trim(x, rate, -50, 0)
	if d := time.Duration(len(tr)) * time.Second / rate; d < 990*time.Millisecond || d > 1010*time.Millisecond {
		t.Errorf("trimmed to %v, want 1 s", d)
	}
	if len(Trim(Silence(time.Second, rate), rate, -50, 0)) != 0 {
		t.Error("silence not trimmed to nothing")
	}
}

func TestStreamCancelAndResample(t *testing.T) {
	started := make(chan struct{})
	s := NewStream(context.Background(), nil, func(ctx context.Context, emit func(Chunk) error) error {
		close(started)
		for i := 0; ; i++ {
			if err := emit(Chunk{Samples: tone(100*time.Millisecond, 24000), SampleRate: 24000, Sentence: i}); err != nil {
				return err
			}
		}
	})
	r := Resampled(s, 16000)
	c, err := r.Next(context.Background())
	if err != nil || c.SampleRate != 16000 || len(c.Samples) < 1500 || len(c.Samples) > 1700 {
		t.Fatalf("chunk %d samples at %d Hz, err %v", len(c.Samples), c.SampleRate, err)
	}
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next after cancel: %v", err)
	}
	r.Close() // returns only once the producer has stopped
}

func TestStreamEOFAndError(t *testing.T) {
	s := NewStream(context.Background(), []string{"w"}, func(ctx context.Context, emit func(Chunk) error) error {
		return emit(Chunk{Samples: []float32{1}, SampleRate: 8000})
	})
	b, err := ReadAll(context.Background(), s)
	if err != nil || len(b.Data) != 1 || s.Warnings()[0] != "w" {
		t.Fatalf("ReadAll = %v, %v", b, err)
	}
	bad := errors.New("boom")
	s = NewStream(context.Background(), nil, func(ctx context.Context, emit func(Chunk) error) error { return bad })
	if _, err := s.Next(context.Background()); !errors.Is(err, bad) {
		t.Errorf("Next = %v, want boom", err)
	}
	if _, err := s.Next(context.Background()); err == io.EOF {
		t.Error("error turned into EOF")
	}
}

func TestValidate(t *testing.T) {
	for _, r := range []Request{
		{}, {Text: " "}, {Text: "a", Speed: 5}, {Text: "a", TopP: 1.5}, {Text: "a", TopK: -1},
		{Text: "a", Format: "mp3"}, {Text: "a", Embedding: []float32{float32(math.NaN())}},
		{Text: "a", Mix: []VoiceWeight{{"x", -1}}}, {Text: strings.Repeat("a", MaxTextBytes+1)},
	} {
		if _, err := r.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", r)
		}
	}
	r, err := Request{Text: "a", Seed: 3}.Validate()
	if err != nil || r.Speed != 1 || !r.HasSeed {
		t.Errorf("Validate defaults: %+v %v", r, err)
	}
}

// TestStreamBackpressure: the producer runs at most one chunk ahead of the consumer, so the
// first audio reaches the consumer long before a long reply is synthesized.
func TestStreamBackpressure(t *testing.T) {
	var produced atomic.Int64
	s := NewStream(context.Background(), nil, func(ctx context.Context, emit func(Chunk) error) error {
		for i := 0; i < 50; i++ {
			produced.Add(1)
			if err := emit(Chunk{Samples: []float32{0}, SampleRate: 8000, Sentence: i}); err != nil {
				return err
			}
		}
		return nil
	})
	defer s.Close()
	for i := 0; i < 5; i++ {
		c, err := s.Next(context.Background())
		if err != nil || c.Sentence != i {
			t.Fatalf("chunk %d: %+v %v", i, c, err)
		}
		// the producer may have made this chunk, one in the channel and one blocked in emit
		if p := produced.Load(); p > int64(i)+3 {
			t.Fatalf("after %d chunks consumed the producer made %d", i+1, p)
		}
	}
}

// TestPreparePauseBudget: a few bytes of markup must not ask an engine for hours of silence
// (4096 characters of <break time="10s"/> made one sentence of 2150 s, over 1 GB of samples in
// the server): the pauses of one request add up to at most MaxTotalPause, with a warning.
func TestPreparePauseBudget(t *testing.T) {
	total := func(p *Plan) (d time.Duration) {
		for _, s := range p.Sentences {
			for _, seg := range s.Segments {
				if seg.Kind == control.Pause && seg.Item.Strength != control.Sentence {
					d += seg.Pause
				}
			}
		}
		return d
	}
	tests := []struct {
		text string
		want time.Duration
		warn bool
	}{
		{`one <break time="10s"/> two <break time="10s"/> three`, 20 * time.Second, false},
		{strings.Repeat(`<break time="10s"/>`, 200) + "hi", MaxTotalPause, true},
		{strings.Repeat(`[lbreak]`, 4000) + "hi. And again " + strings.Repeat(`<break time="10s"/>`, 10), MaxTotalPause, true},
	}
	for _, tt := range tests {
		p := Prepare(Request{Text: tt.text, Speed: 0.25}, control.DefaultCalibration())
		if got := total(p); got != tt.want {
			t.Errorf("%.40q…: pauses add up to %v, want %v", tt.text, got, tt.want)
		}
		warned := false
		for _, w := range p.Script.Warnings {
			warned = warned || strings.Contains(w.Reason, "pauses")
		}
		if warned != tt.warn {
			t.Errorf("%.40q…: warnings %v, want a pause warning: %v", tt.text, p.Script.Warnings, tt.warn)
		}
	}
}

// Each hands every chunk over in order and tells the stream's end, the stream's error and
// its own callback's error apart: the callback's error stops the loop at once.
func TestEach(t *testing.T) {
	three := func(fail error) Stream {
		return NewStream(context.Background(), nil, func(ctx context.Context, emit func(Chunk) error) error {
			for i := range 3 {
				if err := emit(Chunk{Samples: []float32{float32(i)}, SampleRate: 16000}); err != nil {
					return err
				}
			}
			return fail
		})
	}
	var got []float32
	if err := Each(context.Background(), three(nil), func(c Chunk) error { got = append(got, c.Samples...); return nil }); err != nil || len(got) != 3 || got[2] != 2 {
		t.Fatalf("got %v, %v", got, err)
	}
	bad := errors.New("engine broke")
	if err := Each(context.Background(), three(bad), func(Chunk) error { return nil }); !errors.Is(err, bad) {
		t.Fatalf("stream error: %v", err)
	}
	stop, calls := errors.New("client gone"), 0
	s := three(nil)
	defer s.Close()
	if err := Each(context.Background(), s, func(Chunk) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("callback error: %v after %d calls", err, calls)
	}
}
