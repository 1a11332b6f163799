package vad

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
)

const rate = 16000

func openDetector(t testing.TB, cfg Config) *Detector {
	t.Helper()
	d, err := New(gputest.RequireModel(t, "silero-vad-v5/silero_vad.onnx"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// conversation is speech from several voices with known boundaries (in samples).
type conversation struct {
	name   string
	audio  []float32
	truth  [][2]int64
	speech []float32 // the clean speech alone, for SNR scaling
}

type line struct{ text, voice string }

var (
	mainLines = []line{
		{"what time is it", "en-us"},
		{"please set a timer for ten minutes", "en+f3"},
		{"turn off the lights in the kitchen", "en-gb+m3"},
		{"how is the weather tomorrow in paris", "en+f2"},
		{"play some quiet music", "en-us+m5"},
		{"thank you, that will be all for now", "en+f4"},
	}
	mainGaps = []float64{1.0, 0.7, 1.5, 2.0, 0.9, 1.2, 1.0}
	// a second conversation, never used to tune the detector
	heldOutLines = []line{
		{"can you read me the news headlines", "en-gb"},
		{"add eggs and butter to my shopping list", "en+m7"},
		{"what's the capital of australia", "en-us+f2"},
		{"stop", "en+f3"},
		{"call mum on her mobile phone", "en-gb+m3"},
		{"how many kilometres is it to the coast", "en+f4"},
		{"never mind", "en-us"},
	}
	heldOutGaps = []float64{0.8, 1.1, 0.6, 1.4, 0.9, 1.7, 1.0, 0.8}

	convMu      sync.Mutex
	convCache   = map[string]*conversation{}
	babbleCache []float32
)

// makeConversation builds (once per test binary) the main conversation: six utterances in six
// voices separated by gaps of 0.7–2 s, with 1 s of silence at both ends.
func makeConversation(t testing.TB) *conversation {
	return buildConversation(t, "main", mainLines, mainGaps)
}

func buildConversation(t testing.TB, name string, lines []line, gaps []float64) *conversation {
	return buildConversationWith(t, name, lines, gaps, nil)
}

// buildConversationWith is buildConversation with a speaking rate (words per minute, 0 =
// espeak's default) and a gain in dB per line.
func buildConversationWith(t testing.TB, name string, lines []line, gaps []float64, style func(i int) (int, float64)) *conversation {
	t.Helper()
	audiotest.RequireSpeech(t, "test", "en-us", 0) // skip early without espeak-ng
	convMu.Lock()
	defer convMu.Unlock()
	if c := convCache[name]; c != nil {
		return c
	}
	c := &conversation{name: name}
	c.audio = make([]float32, int(gaps[0]*rate))
	for i, l := range lines {
		speed, gain := 0, 0.0
		if style != nil {
			speed, gain = style(i)
		}
		b, err := audiotest.Speak(context.Background(), l.text, l.voice, speed)
		if err != nil {
			t.Fatal(err)
		}
		s := speechPart(b.Data)
		audio.Gain(s, float32(math.Pow(10, gain/20)))
		start := int64(len(c.audio))
		c.audio = append(c.audio, s...)
		c.speech = append(c.speech, s...)
		c.truth = append(c.truth, [2]int64{start, int64(len(c.audio))})
		c.audio = append(c.audio, make([]float32, int(gaps[i+1]*rate))...)
	}
	convCache[name] = c
	return c
}

// noisy returns the conversation mixed with noise at snr dB relative to the speech RMS, and
// the noise gain used.
func noisy(t testing.TB, c *conversation, kind string, snr float64) ([]float32, []float32) {
	noise := makeNoise(t, kind, len(c.audio))
	mix := append([]float32(nil), c.audio...)
	g := float32(audio.RMS(c.speech) / audio.RMS(noise) / math.Pow(10, snr/20))
	for i := range mix {
		mix[i] += g * noise[i]
	}
	scaled := make([]float32, len(noise))
	for i := range noise {
		scaled[i] = g * noise[i]
	}
	return mix, scaled
}

func makeNoise(t testing.TB, kind string, n int) []float32 {
	switch kind {
	case "white":
		return audiotest.WhiteNoise(n, 0.1, 7)
	case "babble":
		convMu.Lock()
		defer convMu.Unlock()
		if len(babbleCache) < n {
			b, err := audiotest.Babble(context.Background(), max(n, 40*rate), 0.1, 7)
			if err != nil {
				t.Fatal(err)
			}
			babbleCache = b
		}
		return append([]float32(nil), babbleCache[:n]...)
	}
	t.Fatalf("noise %q", kind)
	return nil
}

func segmentsOf(t testing.TB, d *Detector, x []float32) []Segment {
	t.Helper()
	segs, err := d.Segments(context.Background(), audio.NewBufferSource(&audio.Buffer{Format: audio.Mono16k, Data: x}))
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// TestConversationInNoise runs two synthetic conversations (the main one and a held-out one
// that was never used for tuning) through white and babble noise at 10–20 dB SNR. Asserted:
// every utterance is found (at least half of it inside detected speech) and nothing is detected in the
// gaps; where the segments pair one-to-one with the utterances (all but babble at 10 dB, where
// 18-talker espeak babble that loud is speech to Silero and bridges short gaps), every
// boundary is within ±200 ms and at least 90% are within ±100 ms. The figures are logged.
func TestConversationInNoise(t *testing.T) {
	d := openDetector(t, Config{})
	within, total := 0, 0
	for _, c := range []*conversation{makeConversation(t), buildConversation(t, "held-out", heldOutLines, heldOutGaps)} {
		for _, tc := range []struct {
			noise string
			snr   float64
		}{{"none", 0}, {"white", 20}, {"white", 15}, {"white", 10}, {"babble", 20}, {"babble", 15}, {"babble", 10}} {
			t.Run(fmt.Sprintf("%s/%s/%.0fdB", c.name, tc.noise, tc.snr), func(t *testing.T) {
				x := c.audio
				if tc.noise != "none" {
					x, _ = noisy(t, c, tc.noise, tc.snr)
				}
				segs := segmentsOf(t, d, x)
				for i, tr := range c.truth {
					var in int64
					for _, s := range segs {
						in += max(0, min(s.End, tr[1])-max(s.Start, tr[0]))
					}
					if float64(in) < 0.5*float64(tr[1]-tr[0]) {
						t.Errorf("utterance %d: only %.0f%% inside detected speech", i, 100*float64(in)/float64(tr[1]-tr[0]))
					}
				}
				for _, s := range segs {
					hit := false
					for _, tr := range c.truth {
						hit = hit || (s.Start < tr[1] && s.End > tr[0])
					}
					if !hit {
						t.Errorf("false alarm: %+v", s)
					}
				}
				if len(segs) != len(c.truth) {
					if tc.noise != "babble" || tc.snr > 10 {
						t.Errorf("%d segments, want %d: %+v", len(segs), len(c.truth), segs)
					}
					t.Logf("%s at %.0f dB: %d segments for %d utterances (merged)", tc.noise, tc.snr, len(segs), len(c.truth))
					return
				}
				worst, sum, ok := 0.0, 0.0, 0
				for i, tr := range c.truth {
					for _, e := range []float64{float64(segs[i].Start-tr[0]) / rate * 1000, float64(segs[i].End-tr[1]) / rate * 1000} {
						worst = max(worst, math.Abs(e))
						sum += math.Abs(e)
						if math.Abs(e) <= 100 {
							ok++
						}
						if math.Abs(e) > 200 {
							t.Errorf("utterance %d: boundary %+.0f ms off", i, e)
						}
					}
				}
				within += ok
				total += 2 * len(c.truth)
				t.Logf("%s at %.0f dB: %d/%d utterances, boundaries within ±100 ms: %d/%d, worst %.0f ms, mean %.0f ms",
					tc.noise, tc.snr, len(segs), len(c.truth), ok, 2*len(c.truth), worst, sum/float64(2*len(c.truth)))
			})
		}
	}
	t.Logf("all conditions: %d of %d boundaries within ±100 ms", within, total)
	if within*10 < total*9 {
		t.Errorf("only %d of %d boundaries within ±100 ms, want ≥ 90%%", within, total)
	}
}

// TestNoiseAlone: 30 s of the noise used above (at the 10 dB level) triggers nothing.
func TestNoiseAlone(t *testing.T) {
	c := makeConversation(t)
	d := openDetector(t, Config{})
	for _, kind := range []string{"white", "babble"} {
		t.Run(kind, func(t *testing.T) {
			_, lvl := noisy(t, c, kind, 10)
			g := audio.RMS(lvl)
			noise := makeNoise(t, kind, 30*rate)
			audio.Gain(noise, float32(g/audio.RMS(noise)))
			segs := segmentsOf(t, d, noise)
			t.Logf("%s noise alone at %.1f dBFS RMS, 30 s: %d detections", kind, audio.DB(g), len(segs))
			if len(segs) != 0 {
				t.Errorf("detections in %s noise: %+v", kind, segs)
			}
		})
	}
}

// speechPart trims an utterance to its audible part: from the first to the last 10 ms frame
// whose RMS is within 30 dB of the loudest frame (what a listener hears above a noise floor
// 30 dB down; espeak-ng fades its last phoneme out long below that).
func speechPart(x []float32) []float32 {
	const frame = rate / 100
	var peak float64
	for i := 0; i+frame <= len(x); i += frame {
		peak = max(peak, audio.RMS(x[i:i+frame]))
	}
	first, last := -1, -1
	for i := 0; i+frame <= len(x); i += frame {
		if audio.RMS(x[i:i+frame]) >= peak*math.Pow(10, -30.0/20) {
			if first < 0 {
				first = i
			}
			last = i + frame
		}
	}
	return x[first:last]
}

func TestStreamingMatchesOffline(t *testing.T) {
	c := makeConversation(t)
	d := openDetector(t, Config{})
	x, _ := noisy(t, c, "white", 20)
	want := segmentsOf(t, d, x)
	d.Reset()
	ctx := context.Background()
	var evs []Event
	for i, n := 0, 1; i < len(x); n = n*7%1000 + 1 { // odd chunk sizes
		j := min(i+n, len(x))
		e, err := d.Accept(ctx, x[i:j])
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e...)
		i = j
	}
	e, _ := d.Flush(ctx)
	evs = append(evs, e...)
	var ends []Event
	open := false
	for _, e := range evs {
		switch e.Type {
		case SpeechStart:
			if open {
				t.Fatal("two starts without an end")
			}
			open = true
			if e.At-e.Start < d.minSpeech-2*int64(d.win) { // refinement may move the onset 2 windows
				t.Errorf("start decided %d samples after the onset, before MinSpeech", e.At-e.Start)
			}
		case SpeechEnd:
			if !open {
				t.Fatal("end without start")
			}
			open = false
			ends = append(ends, e)
			if int64(len(e.Samples)) != e.AudioEnd-e.AudioStart || e.AudioStart > e.Start || e.AudioEnd < e.End {
				t.Errorf("end event bounds: %d samples for [%d,%d), speech [%d,%d)", len(e.Samples), e.AudioStart, e.AudioEnd, e.Start, e.End)
			}
			// the samples are the input audio at those positions
			for k := range e.Samples {
				if e.Samples[k] != x[e.AudioStart+int64(k)] {
					t.Fatalf("utterance sample %d differs from the input", k)
				}
			}
		}
	}
	if len(ends) != len(want) {
		t.Fatalf("streaming found %d utterances, offline %d", len(ends), len(want))
	}
	for i := range ends {
		if ends[i].Start != want[i].Start || ends[i].End != want[i].End {
			t.Errorf("utterance %d: streaming [%d,%d) offline [%d,%d)", i, ends[i].Start, ends[i].End, want[i].Start, want[i].End)
		}
	}
}

func TestMaxSpeechSplits(t *testing.T) {
	c := makeConversation(t)
	d := openDetector(t, Config{MaxSpeech: time.Second})
	segs := segmentsOf(t, d, c.audio)
	forced := 0
	for _, s := range segs {
		if s.End-s.Start > rate+int64(Window(rate)) {
			t.Errorf("segment of %d samples is longer than MaxSpeech", s.End-s.Start)
		}
		if s.Forced {
			forced++
		}
	}
	if forced == 0 {
		t.Errorf("no forced split in %d segments of utterances up to 2 s long", len(segs))
	}
}

func TestEightKilohertz(t *testing.T) {
	c := makeConversation(t)
	d := openDetector(t, Config{SampleRate: 8000})
	x8, err := audio.Resample(c.audio, rate, 8000, 1)
	if err != nil {
		t.Fatal(err)
	}
	segs, err := d.Segments(context.Background(), audio.NewBufferSource(&audio.Buffer{Format: audio.Format{SampleRate: 8000, Channels: 1}, Data: x8}))
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != len(c.truth) {
		t.Fatalf("8 kHz: %d segments, want %d", len(segs), len(c.truth))
	}
	for i, tr := range c.truth {
		if d := math.Abs(segs[i].StartSec - float64(tr[0])/rate); d > 0.1 {
			t.Errorf("8 kHz utterance %d: start off by %.0f ms", i, d*1000)
		}
	}
	// and a 48 kHz stereo file is converted on the way in
	st := audio.UpMix(nil, mustResample(t, c.audio, rate, 48000), 2)
	d16 := openDetector(t, Config{})
	segs, err = d16.Segments(context.Background(), audio.NewBufferSource(&audio.Buffer{Format: audio.Format{SampleRate: 48000, Channels: 2}, Data: st}))
	if err != nil || len(segs) != len(c.truth) {
		t.Fatalf("48 kHz stereo: %v, %d segments", err, len(segs))
	}
}

func mustResample(t *testing.T, x []float32, from, to int) []float32 {
	y, err := audio.Resample(x, from, to, 1)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

func TestBadConfigAndModel(t *testing.T) {
	gputest.RequireORT(t)
	for _, cfg := range []Config{{SampleRate: 44100}, {Threshold: 1.5}, {Threshold: 0.5, NegThresh: 0.7}, {MaxSpeech: time.Millisecond}} {
		if _, err := New("", cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	// a model that is not Silero v5: the wake word's melspectrogram
	dir := t.TempDir()
	bad := filepath.Join(dir, "x.onnx")
	os.WriteFile(bad, []byte("not a model"), 0o644)
	if _, err := New(bad, Config{}); err == nil {
		t.Error("garbage model accepted")
	}
	if _, err := New(filepath.Join(dir, "missing.onnx"), Config{}); err == nil {
		t.Error("missing model accepted")
	}
}

func TestContextCancel(t *testing.T) {
	d := openDetector(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Accept(ctx, make([]float32, 16000)); !errors.Is(err, context.Canceled) {
		t.Errorf("Accept with a cancelled context: %v", err)
	}
}

// The model is loaded once (no inspection session before the real one).
func TestModelLoadedOnce(t *testing.T) {
	gputest.RequireModel(t, "silero-vad-v5/silero_vad.onnx")
	before := gpu.Loads()
	d, err := New("", Config{})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if n := gpu.Loads() - before; n != 1 {
		t.Errorf("loaded %d sessions, want 1", n)
	}
}

// Detectors over a pool of one Model, fed two different streams interleaved in odd chunks,
// find exactly what detectors with a Model each find: each carries its stream's state.
func TestPooledDetectorsMatchOwned(t *testing.T) {
	path := gputest.RequireModel(t, "silero-vad-v5/silero_vad.onnx")
	c := makeConversation(t)
	a, _ := noisy(t, c, "white", 20)
	b, _ := noisy(t, c, "babble", 15)
	b = b[len(b)/3:] // a different stream, starting elsewhere
	pool, err := NewPool(path, rate, gpu.Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	run := func(d *Detector, x []float32, i, n int) ([]Event, int) {
		j := min(i+n, len(x))
		e, err := d.Accept(ctx, x[i:j])
		if err != nil {
			t.Fatal(err)
		}
		return e, j
	}
	var want [2][]Event
	for k, x := range [][]float32{a, b} {
		d := openDetector(t, Config{})
		for i, n := 0, 1; i < len(x); n = n*7%1000 + 1 {
			var e []Event
			e, i = run(d, x, i, n)
			want[k] = append(want[k], e...)
		}
	}
	var got [2][]Event
	ds := [2]*Detector{}
	for k := range ds {
		if ds[k], err = NewPooled(Config{}, pool); err != nil {
			t.Fatal(err)
		}
	}
	pos := [2]int{}
	for n := 1; pos[0] < len(a) || pos[1] < len(b); n = n*7%1000 + 1 {
		for k, x := range [][]float32{a, b} {
			if pos[k] < len(x) {
				var e []Event
				e, pos[k] = run(ds[k], x, pos[k], n)
				got[k] = append(got[k], e...)
			}
		}
	}
	for k := range got {
		if len(got[k]) != len(want[k]) || len(want[k]) == 0 {
			t.Fatalf("stream %d: pooled %d events, owned %d", k, len(got[k]), len(want[k]))
		}
		for i := range got[k] {
			g, w := got[k][i], want[k][i]
			if g.Type != w.Type || g.Start != w.Start || g.End != w.End || g.At != w.At {
				t.Errorf("stream %d event %d: pooled %+v, owned %+v", k, i, g, w)
			}
		}
	}
	if pool.Open() != 1 {
		t.Errorf("%d models opened for a pool of 1", pool.Open())
	}
}

// TestQuietWindowsSkipTheModel: windows under Config.Quiet are silence without inference (a
// silent room costs nothing), and the model restarting after such a stretch finds the same
// utterances, within a window or two, as a model that heard every window.
func TestQuietWindowsSkipTheModel(t *testing.T) {
	c := makeConversation(t) // digital silence between the utterances
	gated := segmentsOf(t, openDetector(t, Config{}), c.audio)
	all := segmentsOf(t, openDetector(t, Config{Quiet: -1}), c.audio)
	if len(gated) != len(c.truth) || len(all) != len(c.truth) {
		t.Fatalf("%d utterances with the quiet gate, %d without; want %d", len(gated), len(all), len(c.truth))
	}
	win := int64(512)
	for i := range gated {
		if d := abs64(gated[i].Start - all[i].Start); d > 2*win {
			t.Errorf("utterance %d starts %d samples apart with and without the gate", i, d)
		}
		if d := abs64(gated[i].End - all[i].End); d > 2*win {
			t.Errorf("utterance %d ends %d samples apart with and without the gate", i, d)
		}
	}
	// every window under the gate: the model is never asked, so nothing is speech
	if segs := segmentsOf(t, openDetector(t, Config{Quiet: 10}), c.audio); len(segs) != 0 {
		t.Errorf("a gate above every window still found %d utterances: the model was asked", len(segs))
	}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
