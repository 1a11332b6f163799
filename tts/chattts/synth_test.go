package chattts

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"
)

func smallRuns(c *Config) { c.MaxNewTokens = 40 }

func synthAll(t testing.TB, e *Engine, req tts.Request) ([]float32, []tts.Chunk, []string) {
	t.Helper()
	s, err := e.Synthesize(context.Background(), req)
	if err != nil {
		t.Fatalf("Synthesize(%q): %v", req.Text, err)
	}
	defer s.Close()
	var pcm []float32
	var chunks []tts.Chunk
	for {
		c, err := s.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, c)
		pcm = append(pcm, c.Samples...)
	}
	return pcm, chunks, s.Warnings()
}

func hashPCM(x []float32) string {
	h := sha256.New()
	for _, v := range x {
		binary.Write(h, binary.LittleEndian, math.Float32bits(v))
	}
	return fmt.Sprintf("%x", h.Sum(nil))[:16]
}

// TestSampledReproducible: a seed, a text and settings give bit-identical audio from one
// engine and from a fresh one, and in another process (TestHelperProcess); another seed gives
// other audio.
func TestSampledReproducible(t *testing.T) {
	e := tinyEngine(t, smallRuns)
	req := tts.Request{Text: "hello world. what time is it?", Seed: 42, Temperature: 0.7}
	a, _, _ := synthAll(t, e, req)
	b, _, _ := synthAll(t, e, req)
	if len(a) == 0 || hashPCM(a) != hashPCM(b) {
		t.Fatalf("same request twice: %d samples %s vs %s", len(a), hashPCM(a), hashPCM(b))
	}
	e2 := tinyEngine(t, smallRuns)
	if c, _, _ := synthAll(t, e2, req); hashPCM(c) != hashPCM(a) {
		t.Fatal("a fresh engine gave other samples")
	}
	req.Seed = 43
	if d, _, _ := synthAll(t, e, req); hashPCM(d) == hashPCM(a) {
		t.Fatal("seeds 42 and 43 gave the same samples")
	}
	if testing.Short() {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "PARLEY_CHATTTS_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "hash="+hashPCM(a)) {
		t.Fatalf("another process gave other samples (want hash=%s):\n%s", hashPCM(a), out)
	}
}

func TestHelperProcess(t *testing.T) {
	if os.Getenv("PARLEY_CHATTTS_HELPER") != "1" {
		t.Skip("helper for TestSampledReproducible")
	}
	e := tinyEngine(t, smallRuns)
	a, _, _ := synthAll(t, e, tts.Request{Text: "hello world. what time is it?", Seed: 42, Temperature: 0.7})
	fmt.Printf("hash=%s\n", hashPCM(a))
}

// TestSpeakerRoundTrip: seed N, the embedding SampleSpeaker(N) gives, and that embedding as a
// ChatTTS speaker string all drive the same voice (bit-identical audio for one sampling seed).
func TestSpeakerRoundTrip(t *testing.T) {
	e := tinyEngine(t, smallRuns)
	emb, _ := e.SampleSpeaker(7)
	str, err := voices.EncodeChatTTSSpeaker(emb)
	if err != nil {
		t.Fatal(err)
	}
	base := tts.Request{Text: "hello world", Seed: 5}
	withEmb := base
	withEmb.Embedding = emb
	withStr := tts.Request{Text: "hello world", Voice: str}
	withSeedVoice := tts.Request{Text: "hello world", Voice: "seed:7"}
	a, _, _ := synthAll(t, e, withEmb)
	// the same sampling seed as a voice-only request: Voice requests carry no Seed
	b, _, _ := synthAll(t, e, withStr)
	c, _, _ := synthAll(t, e, withSeedVoice)
	if hashPCM(b) != hashPCM(c) {
		t.Fatal("speaker string and seed:7 differ")
	}
	d, _, _ := synthAll(t, e, tts.Request{Text: "hello world", Embedding: emb})
	if hashPCM(d) != hashPCM(b) {
		t.Fatal("embedding and its speaker string differ")
	}
	if hashPCM(a) == hashPCM(d) {
		t.Fatal("the sampling seed had no effect")
	}
}

// TestStreamingJoins: streamed audio (chunks re-decoded with left context, a lookahead held
// back) equals one-shot decoding of the same codes up to a small error at the joins.
func TestStreamingJoins(t *testing.T) {
	gen := func(c *Config) { c.MaxNewTokens = 120 }
	oneShot := tinyEngine(t, gen, func(c *Config) { c.StreamFrames = 1 << 20 })
	streamed := tinyEngine(t, gen)
	req := tts.Request{Text: "hello world what time is it", Seed: 3}
	a, ac, _ := synthAll(t, oneShot, req)
	b, bc, _ := synthAll(t, streamed, req)
	if len(ac) != 1 || len(bc) < 3 {
		t.Fatalf("one-shot gave %d chunks, streaming %d", len(ac), len(bc))
	}
	if len(a) != len(b) {
		t.Fatalf("one-shot %d samples, streamed %d", len(a), len(b))
	}
	maxD, rms := joinError(a, b)
	t.Logf("%d chunks; max |streamed − one-shot| = %.2e, signal RMS %.3f", len(bc), maxD, rms)
	if maxD > 1e-3*math.Max(rms, 1e-3) {
		t.Fatalf("joins differ from one-shot by %g (RMS %g)", maxD, rms)
	}
	if first := len(bc[0].Samples); first != (DefaultStreamFrames-DefaultLookaheadFrames)*512 {
		t.Errorf("first chunk %d samples", first)
	}
}

func joinError(a, b []float32) (maxD, rms float64) {
	for i := range a {
		maxD = math.Max(maxD, math.Abs(float64(a[i]-b[i])))
		rms += float64(a[i]) * float64(a[i])
	}
	return maxD, math.Sqrt(rms / float64(len(a)))
}

func goroutinesSettle(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines left behind:\n%s", n-before, buf[:runtime.Stack(buf, true)])
	}
}

// TestNoGoroutineLeft: a 5,000-character text, an all-control-token text and a cancelled
// stream leave no goroutine behind; the cancelled one stops within one chunk.
func TestNoGoroutineLeft(t *testing.T) {
	e := tinyEngine(t, func(c *Config) { c.MaxNewTokens = 8 })
	before := runtime.NumGoroutine()
	var long strings.Builder
	for long.Len() < 5000 {
		long.WriteString("what time is it? hello world [uv_break] speak the test. ")
	}
	pcm, chunks, _ := synthAll(t, e, tts.Request{Text: long.String()})
	if len(pcm) == 0 || len(chunks) < 50 {
		t.Fatalf("5,000 characters: %d samples in %d chunks", len(pcm), len(chunks))
	}
	pcm, _, _ = synthAll(t, e, tts.Request{Text: "[laugh][uv_break][laugh][lbreak][speed_3][oral_2][laugh_1][break_4]"})
	if len(pcm) == 0 {
		t.Fatal("all-control text gave no audio")
	}
	goroutinesSettle(t, before)

	// cancel after the first chunk: the stream ends with the context's error, promptly
	e2 := tinyEngine(t, func(c *Config) { c.MaxNewTokens = 2000 })
	before = runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := e2.Synthesize(ctx, tts.Request{Text: long.String(), Temperature: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cancel()
	after := 0
	for {
		if _, err := s.Next(context.Background()); err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("after cancel: %v", err)
			}
			break
		}
		after++
	}
	s.Close()
	t.Logf("stopped %v after cancel, %d chunk(s) delivered after it", time.Since(start), after)
	if after > 1 { // the one already waiting in the stream's buffer
		t.Fatalf("%d chunks after cancel", after)
	}
	goroutinesSettle(t, before)
}

func TestSynthesizeErrors(t *testing.T) {
	e := tinyEngine(t, smallRuns)
	for _, req := range []tts.Request{
		{Text: ""},
		{Text: "[uv_break]"},
		{Text: "hi", Voice: "nobody"},
		{Text: "hi", Voice: "seed:x"},
		{Text: "hi", Embedding: []float32{1, 2, 3}},
		{Text: "hi", Mix: []tts.VoiceWeight{{Voice: "none", Weight: 1}}},
	} {
		if s, err := e.Synthesize(context.Background(), req); err == nil {
			s.Close()
			t.Errorf("%+v accepted", req)
		}
	}
	e.Close()
	if _, err := e.Synthesize(context.Background(), tts.Request{Text: "hi"}); !errors.Is(err, tts.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestMixAndCapabilities(t *testing.T) {
	e := tinyEngine(t, smallRuns)
	a, _, _ := synthAll(t, e, tts.Request{Text: "hello", Mix: []tts.VoiceWeight{{Voice: "seed:1", Weight: 1}, {Voice: "seed:2", Weight: 1}}})
	m, _ := Mix([][]float32{e.stat.Sample(1), e.stat.Sample(2)}, []float64{1, 1})
	b, _, _ := synthAll(t, e, tts.Request{Text: "hello", Embedding: m})
	if hashPCM(a) != hashPCM(b) {
		t.Fatal("a mix of seeds differs from their interpolated embedding")
	}
	c := e.Capabilities()
	for _, ctl := range []tts.Control{tts.CtlSeed, tts.CtlTemperature, tts.CtlTopP, tts.CtlTopK, tts.CtlLaugh, tts.CtlPause, tts.CtlRate, tts.CtlOral, tts.CtlLaughLevel} {
		if c.Support(ctl) != tts.Native {
			t.Errorf("%s is %s, want native", ctl, c.Support(ctl))
		}
	}
	if c.SampleRate != 24000 || c.Engine != "chattts" {
		t.Errorf("%+v", c)
	}
}

// TestCloseDuringStream: closing the engine while a stream synthesizes, its reader idle, stops
// the stream (an error, not a crash) and returns once no model call uses the sessions.
func TestCloseDuringStream(t *testing.T) {
	gputest.RequireORT(t)
	e, err := New(tinyDir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}, MaxNewTokens: 2000})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Synthesize(context.Background(), tts.Request{Text: strings.Repeat("hello world what time is it. ", 40), Temperature: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the producer fills the stream's buffer and waits for a reader
	done := make(chan error, 1)
	go func() { done <- e.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a stream was running")
	}
	for {
		if _, err := s.Next(context.Background()); err != nil {
			if errors.Is(err, io.EOF) {
				t.Fatal("the stream ran to its end after Close")
			}
			break
		}
	}
	s.Close()
}
