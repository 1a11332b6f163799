package asr

import (
	"context"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/vad"
)

// sliceSource serves samples in reads of varying size.
type sliceSource struct {
	x   []float32
	rng *rand.Rand
}

func (s *sliceSource) Read(ctx context.Context, p []float32) (int, error) {
	if len(s.x) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(s.x), 1+s.rng.IntN(7000))
	copy(p, s.x[:n])
	s.x = s.x[n:]
	return n, nil
}

// longInput alternates speech clips and pauses: 3 × (2.4 s + 1 s + 1.5 s + 1.3 s) ≈ 18.6 s.
func longInput(t testing.TB) (x []float32, pauses [][2]int) {
	a, b := loadCase(t, "speech_en"), loadCase(t, "speech_fast")
	for range 3 {
		x = append(x, a...)
		pauses = append(pauses, [2]int{len(x), len(x) + 16000})
		x = append(x, make([]float32, 16000)...)
		x = append(x, b...)
		pauses = append(pauses, [2]int{len(x), len(x) + 20800})
		x = append(x, make([]float32, 20800)...)
	}
	return x, pauses
}

// TestLongAudioCutsAtPauses: with 5 s pieces, every cut lands in a pause, no piece is longer
// than 5 s, timestamps are absolute, and the merge equals the pieces transcribed alone.
func TestLongAudioCutsAtPauses(t *testing.T) {
	for _, mode := range cutModes(t) {
		t.Run(mode.name, func(t *testing.T) { testLongAudio(t, mode.vad) })
	}
}

type cutMode struct{ name, vad string }

// cutModes are the two ways of finding pauses: energy always, the Silero VAD when set up.
func cutModes(t *testing.T) []cutMode {
	modes := []cutMode{{"energy", "none"}}
	if _, err := os.Stat(vad.DefaultModel()); err == nil || os.Getenv("CI") != "" {
		modes = append(modes, cutMode{"silero", ""})
	} else {
		t.Logf("Silero VAD not installed (%s): testing energy-based cuts only", vad.DefaultModel())
	}
	return modes
}

func testLongAudio(t *testing.T, vadCfg string) {
	const maxSeg = 5 * time.Second
	r := newTiny(t, Config{MaxSegment: maxSeg, VAD: vadCfg})
	if r.UsesVAD() != (vadCfg == "") {
		t.Fatalf("UsesVAD = %v with VAD %q", r.UsesVAD(), vadCfg)
	}
	x, pauses := longInput(t)
	res, err := r.Transcribe(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Segments) < 4 {
		t.Fatalf("%d segments for %.1f s", len(res.Segments), res.Duration)
	}
	if !slices.IsSorted(res.Timestamps) || len(res.Timestamps) != len(res.Tokens) {
		t.Fatalf("timestamps %v", res.Timestamps)
	}
	for i, s := range res.Segments {
		if s.End-s.Start > maxSeg.Seconds()+1e-9 {
			t.Errorf("segment %d lasts %.2f s", i, s.End-s.Start)
		}
		if i > 0 {
			cut := int(s.Start * SampleRate)
			inPause := false
			for _, p := range pauses {
				inPause = inPause || (cut >= p[0] && cut <= p[1])
			}
			if !inPause {
				t.Errorf("cut at %.2f s is not in a pause", s.Start)
			}
		}
		// The same audio alone, shifted back by the piece's offset.
		lo, hi := int(s.Start*SampleRate+0.5), int(s.End*SampleRate+0.5)
		alone, err := r.Transcribe(context.Background(), x[lo:hi])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(alone.TokenIDs, s.TokenIDs) {
			t.Errorf("segment %d: ids %v, alone %v", i, s.TokenIDs, alone.TokenIDs)
		}
		for k, ts := range alone.Timestamps {
			if d := s.Timestamps[k] - (ts + s.Start); d > 1e-6 || d < -1e-6 {
				t.Errorf("segment %d token %d at %.3f, alone %.3f + %.3f", i, k, s.Timestamps[k], ts, s.Start)
			}
		}
	}
}

// TestStreamEqualsInMemory: the bounded-memory stream gives what the in-memory call gives.
func TestStreamEqualsInMemory(t *testing.T) {
	for _, mode := range cutModes(t) {
		t.Run(mode.name, func(t *testing.T) { testStreamEqualsInMemory(t, mode.vad) })
	}
}

func testStreamEqualsInMemory(t *testing.T, vadCfg string) {
	for _, cfg := range []Config{{MaxSegment: 5 * time.Second}, {Segment: 3 * time.Second, MaxSegment: 8 * time.Second}} {
		cfg.VAD = vadCfg
		streamEqualsInMemory(t, newTiny(t, cfg))
	}
}

func streamEqualsInMemory(t *testing.T, r *Recognizer) {
	x, _ := longInput(t)
	want, err := r.Transcribe(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	got, err := r.TranscribeStream(context.Background(), &sliceSource{x: x, rng: rand.New(rand.NewPCG(1, 2))}, Options{},
		func(Segment) error { seen++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.TokenIDs, want.TokenIDs) || !slices.Equal(got.Timestamps, want.Timestamps) || got.Text != want.Text {
		t.Fatalf("stream %v\nmemory %v", got.TokenIDs, want.TokenIDs)
	}
	if got.Duration != want.Duration || seen != len(got.Segments) {
		t.Fatalf("duration %v vs %v, %d callbacks for %d segments", got.Duration, want.Duration, seen, len(got.Segments))
	}
}

// hourSource is an hour of silence with a speech clip every five minutes, generated on the fly.
type hourSource struct {
	pos, total int
	clip       []float32
	every      int
}

func (h *hourSource) Read(ctx context.Context, p []float32) (int, error) {
	if h.pos >= h.total {
		return 0, io.EOF
	}
	n := min(len(p), h.total-h.pos)
	for i := range n {
		k := (h.pos + i) % h.every
		if k < len(h.clip) {
			p[i] = h.clip[k]
		} else {
			p[i] = 0
		}
	}
	h.pos += n
	return n, nil
}

// TestHourLongStreamBoundedMemory streams an hour (230 MB as float32) and checks that the
// heap never holds more than a few tens of MB.
func TestHourLongStreamBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	r := newTiny(t, Config{VAD: "none"}) // the VAD's share is tested above; keep this one quick
	src := &hourSource{total: 3600 * SampleRate, clip: loadCase(t, "speech_en"), every: 300 * SampleRate}
	var peak uint64
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	res, err := r.TranscribeStream(context.Background(), src, Options{}, func(Segment) error {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Duration != 3600 {
		t.Fatalf("duration %v", res.Duration)
	}
	if len(res.Segments) != 12 {
		t.Errorf("%d segments with words, want 12 (one per clip)", len(res.Segments))
	}
	for i, s := range res.Segments {
		if want := float64(i * 300); s.Start > want || s.End < want+2 {
			t.Errorf("segment %d spans %.1f..%.1f s, want it to cover the clip at %.0f s", i, s.Start, s.End, want)
		}
	}
	grew := int64(peak) - int64(base)
	t.Logf("heap grew by at most %.1f MB while streaming an hour", float64(grew)/(1<<20))
	if grew > 64<<20 {
		t.Errorf("heap grew by %d MB while streaming an hour", grew>>20)
	}
}

func TestStreamCancel(t *testing.T) {
	r := newTiny(t, Config{VAD: "none"})
	ctx, cancel := context.WithCancel(context.Background())
	src := &hourSource{total: 3600 * SampleRate, clip: loadCase(t, "speech_en"), every: 60 * SampleRate}
	n := 0
	_, err := r.TranscribeStream(ctx, src, Options{}, func(Segment) error {
		if n++; n == 2 {
			cancel()
		}
		return nil
	})
	if err == nil {
		t.Fatal("cancelled stream returned no error")
	}
	if src.pos > 10*60*SampleRate {
		t.Fatalf("read %d s after cancel", src.pos/SampleRate)
	}
}

func TestFindCut(t *testing.T) {
	// Noise with a 300 ms pause at 3 s in a 5 s window: the cut lands in the pause.
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 8*SampleRate)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 0.1)
	}
	clear(x[3*SampleRate : 3*SampleRate+4800])
	c := findCut(x, 5*SampleRate, 5*SampleRate)
	if c < 3*SampleRate || c > 3*SampleRate+4800 {
		t.Fatalf("cut at %d, want within the pause [%d, %d]", c, 3*SampleRate, 3*SampleRate+4800)
	}
	// No pause at all: still a cut inside the window.
	y := make([]float32, 8*SampleRate)
	for i := range y {
		y[i] = float32(rng.NormFloat64() * 0.1)
	}
	if c := findCut(y, 5*SampleRate, 5*SampleRate); c <= 0 || c > 5*SampleRate {
		t.Fatalf("cut at %d outside (0, %d]", c, 5*SampleRate)
	}
	if c := findCut(y[:100], 5*SampleRate, 5*SampleRate); c != 100 {
		t.Fatalf("short input cut at %d", c)
	}
}

// TestFindCutSoftHard: a pause inside the soft window wins; with none there, the first pause
// after it (up to hard) ends the piece, rather than a cut inside a word; with none before hard,
// a cut inside the soft window.
func TestFindCutSoftHard(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 12*SampleRate)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 0.1)
	}
	const soft = 5 * SampleRate
	in := func(c, at int) bool { return c >= at && c <= at+4800 }
	clear(x[7*SampleRate : 7*SampleRate+4800]) // a 300 ms pause at 7 s, after the soft window
	if c := findCut(x, soft, 10*SampleRate); !in(c, 7*SampleRate) {
		t.Errorf("pause after the soft window: cut at %d, want in [%d, %d]", c, 7*SampleRate, 7*SampleRate+4800)
	}
	for _, hard := range []int{soft, 6 * SampleRate, 0} { // none, or the pause beyond hard
		if c := findCut(x, soft, hard); c <= soft/3 || c > soft {
			t.Errorf("hard %d: cut at %d, want in the soft window's last two thirds", hard, c)
		}
	}
	clear(x[3*SampleRate : 3*SampleRate+4800]) // a pause inside the soft window as well: it wins
	if c := findCut(x, soft, 10*SampleRate); !in(c, 3*SampleRate) {
		t.Errorf("pause in the soft window: cut at %d, want in [%d, %d]", c, 3*SampleRate, 3*SampleRate+4800)
	}
	if c := findCut(x[:soft], soft, 10*SampleRate); c != soft {
		t.Errorf("input of the soft length cut at %d", c)
	}
	noise := func() []float32 {
		y := make([]float32, 12*SampleRate)
		for i := range y {
			y[i] = float32(rng.NormFloat64() * 0.1)
		}
		return y
	}
	// a pause that runs past hard: cut in the part that fits
	y := noise()
	clear(y[9700*SampleRate/1000 : 10300*SampleRate/1000])
	if c := findCut(y, soft, 10*SampleRate); c < 9700*SampleRate/1000 || c > 10*SampleRate {
		t.Errorf("pause across hard: cut at %d, want in [%d, %d]", c, 9700*SampleRate/1000, 10*SampleRate)
	}
	// a 70 ms pause across the soft boundary (30 + 40 ms, each half under the 50 ms a pause
	// needs) comes before one at 7 s: it is taken whole
	y = noise()
	clear(y[4970*SampleRate/1000 : 5040*SampleRate/1000])
	clear(y[7*SampleRate : 7*SampleRate+4800])
	if c := findCut(y, soft, 10*SampleRate); c < 4970*SampleRate/1000 || c > 5040*SampleRate/1000 {
		t.Errorf("pause across soft: cut at %d, want in [%d, %d]", c, 4970*SampleRate/1000, 5040*SampleRate/1000)
	}
}

// TestSegment: audio that fits in MaxSegment stays one piece whatever Segment says (cutting a
// sentence costs more than its length); longer audio is cut near Segment, at pauses (ours or
// the clips' own), into pieces of at most MaxSegment, more of them than without Segment.
func TestSegment(t *testing.T) {
	for _, mode := range cutModes(t) {
		t.Run(mode.name, func(t *testing.T) {
			x, pauses := longInput(t)
			r := newTiny(t, Config{Segment: 3 * time.Second, MaxSegment: 8 * time.Second, VAD: mode.vad})
			fits := x[:pauses[1][1]] // 6.2 s: two clips and their pauses
			res, err := r.Transcribe(context.Background(), fits)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Segments) != 1 {
				t.Fatalf("%.1f s that fit in 8 s: %d segments", float64(len(fits))/SampleRate, len(res.Segments))
			}
			res, err = r.Transcribe(context.Background(), x)
			if err != nil {
				t.Fatal(err)
			}
			whole := newTiny(t, Config{MaxSegment: 8 * time.Second, VAD: mode.vad})
			ref, err := whole.Transcribe(context.Background(), x)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Segments) <= len(ref.Segments) {
				t.Errorf("%d segments near 3 s, %d of up to 8 s", len(res.Segments), len(ref.Segments))
			}
			for i, s := range res.Segments {
				if s.End-s.Start > 8+1e-9 {
					t.Errorf("segment %d lasts %.2f s", i, s.End-s.Start)
				}
				if i == 0 {
					continue
				}
				// in a pause, ours or the clips' own (speech here is -30 to -10 dBFS)
				if cut := int(s.Start * SampleRate); meanSquare(x[max(0, cut-160):min(len(x), cut+160)]) > 1e-6 {
					t.Errorf("cut at %.2f s is not in a pause", s.Start)
				}
			}
		})
	}
}

// TestParallelPieces: a long input's pieces run on several workers at once (BatchSize 1)
// and give what one worker gives.
func TestParallelPieces(t *testing.T) {
	x, _ := longInput(t)
	one := newTiny(t, Config{MaxSegment: 5 * time.Second, Workers: 1, BatchSize: 1, VAD: "none"})
	many := newTiny(t, Config{MaxSegment: 5 * time.Second, Workers: 3, BatchSize: 1, VAD: "none"})
	a, err := one.Transcribe(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	b, err := many.Transcribe(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.TokenIDs, b.TokenIDs) || !slices.Equal(a.Timestamps, b.Timestamps) || len(a.Segments) != len(b.Segments) {
		t.Fatalf("3 workers %v\n1 worker %v", b.TokenIDs, a.TokenIDs)
	}
}

// TestTranscribeSource: 44.1 kHz stereo through TranscribeSource is converted on the fly.
func TestTranscribeSource(t *testing.T) {
	r := newTiny(t, Config{})
	x := loadCase(t, "speech_en")
	hi, err := audio.ResampleBuffer(&audio.Buffer{Format: audio.Mono16k, Data: x}, 44100)
	if err != nil {
		t.Fatal(err)
	}
	st := &audio.Buffer{Format: audio.Format{SampleRate: 44100, Channels: 2}, Data: audio.UpMix(nil, hi.Data, 2)}
	res, err := r.TranscribeSource(context.Background(), audio.NewBufferSource(st), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := res.Duration - float64(len(x))/SampleRate; d > 0.01 || d < -0.01 || len(res.Segments) != 1 {
		t.Fatalf("duration %v for %v s, %d segments", res.Duration, float64(len(x))/SampleRate, len(res.Segments))
	}
}
