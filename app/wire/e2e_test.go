package wire_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/wire"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/espeak"
)

// These tests run the whole loop through real audio devices without a sound card: a private
// PulseAudio with a null sink whose monitor is the default source. Whatever is played into the
// sink — the harness's question (paplay) and Parley's own answer — is what Parley's microphone
// hears, so Parley hears itself exactly as it would through loudspeakers.
//
// Speech recognition: the demo SenseVoice model (assets/demo/sensevoice, landed 07:16) is too
// weak for these questions even on clean espeak-ng audio ("what time is it" → "what is theo
// it"), so unless PARLEY_E2E_ASR names a model directory (or id) the transcriber is scripted:
// it returns the question's text for an utterance that really is the question (checked block
// by block against the audio played), so the test still proves the real capture → VAD →
// endpointing → brain → voice → playback path and the self-echo rejection; only the
// recognition step is stood in for. When the demo model is present its transcripts of the
// question and of the sink recording are logged beside the test.

// scripted transcribes by recognising which of the known utterances it was given.
type scripted struct {
	demo   *asr.Recognizer // when the demo model is present: what it makes of each utterance (logged only)
	mu     sync.Mutex
	known  map[string][]float32 // text → 16 kHz audio played
	calls  []string
	audios [][]float32
	// demoHeard is what the demo model made of the same utterances
	demoHeard []string
}

func (s *scripted) Transcribe(ctx context.Context, pcm []float32) (app.Transcript, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audios = append(s.audios, pcm)
	best, bestCorr := "", 0.0
	for text, ref := range s.known {
		if len(pcm) < len(ref)/2 {
			continue
		}
		// judged block by block: under load PulseAudio under-runs and shifts parts of it
		// either may hold the other: the VAD's cut can clip the question's first syllable
		if score := max(matchingBlocks(pcm, ref), matchingBlocks(ref, pcm)); score > bestCorr {
			best, bestCorr = text, score
		}
	}
	if bestCorr < 0.3 { // unrelated speech matches under 10% of the blocks
		if d := os.Getenv("PARLEY_E2E_DUMP"); d != "" {
			audio.WriteWAVFile(filepath.Join(d, fmt.Sprintf("heard%d.wav", len(s.calls))), &audio.Buffer{Format: audio.Mono16k, Data: pcm}, audio.F32)
		} // unrelated speech scores 0.1–0.3; a barge-in utterance carries some echo
		best = fmt.Sprintf("(unrecognised utterance of %.2f s, best block match %.2f)", float64(len(pcm))/app.SampleRate, bestCorr)
	}
	s.calls = append(s.calls, best)
	if s.demo != nil {
		if r, err := s.demo.Transcribe(ctx, pcm); err == nil {
			s.demoHeard = append(s.demoHeard, r.Text)
		}
	}
	return app.Transcript{Text: best, Lang: "en"}, nil
}

func (s *scripted) heard() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

type e2e struct {
	pulse *audiotest.Pulse
	a     *wire.Assistant
	ev    <-chan app.Event
	seen  []app.Event
	tr    *scripted
	db    string
	rec   *recorder
}

func start(t *testing.T, mode string, utterances map[string]string) *e2e {
	t.Helper()
	pulse := audiotest.RequirePulse(t)
	x := &e2e{pulse: pulse, tr: &scripted{known: map[string][]float32{}}, db: filepath.Join(t.TempDir(), "parley.db")}
	for name, text := range utterances {
		x.tr.known[text] = audiotest.RequireSpeech(t, text, "en-us", 0).Data
		_ = name
	}
	// the demo model, when present, transcribes alongside (logged, not asserted)
	if _, err := os.Stat(demoASR); err == nil && gpu.Init() == nil {
		if r, err := asr.New(demoASR, asr.Config{Options: asr.Options{Language: "en"}, Provider: "cpu", Threads: 1}); err == nil {
			x.tr.demo = r
			t.Cleanup(func() { r.Close() })
		}
	}
	cfg := config.Default()
	cfg.Audio.Input, cfg.Audio.Output = pulse.Device, pulse.Device
	cfg.Assistant.Mode = mode
	cfg.LLM.Backend = "skills"
	o := wire.Options{StorePath: x.db, Transcript: x.tr, Stream: func(dir device.Direction, sc *device.StreamConfig) {
		sc.SampleRate = pulse.Rate // the null sink's own rate, as the device package's tests do
		if dir == device.Output {
			sc.Channels = 2
		}
	}}
	if os.Getenv("PARLEY_E2E_DEBUG") != "" {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if m := os.Getenv("PARLEY_E2E_ASR"); m != "" {
		o.Transcript, o.ASRModel = nil, m
	}
	ctx := context.Background()
	a, err := wire.Build(ctx, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	x.a = a
	for _, n := range a.Notes {
		t.Log("note:", n)
	}
	x.ev, _ = a.Subscribe(1024)
	t.Cleanup(func() { a.Close() })
	x.rec = startRecorder(t, pulse.Device)
	// wait until the microphone delivers audio
	x.wait(t, "capture running", func(e app.Event) bool { return e.Kind == app.EvLevel })
	time.Sleep(500 * time.Millisecond)
	return x
}

func (x *e2e) wait(t *testing.T, what string, pred func(app.Event) bool) app.Event {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		select {
		case e := <-x.ev:
			if e.Kind != app.EvLevel {
				x.seen = append(x.seen, e)
			}
			if pred(e) {
				return e
			}
		case <-deadline:
			var ks []string
			for _, e := range x.seen {
				ks = append(ks, string(e.Kind)+e.Err)
			}
			t.Fatalf("waiting for %s: gave up (saw %s)", what, strings.Join(ks, " "))
		}
	}
}

func (x *e2e) count(k app.EventKind) int {
	n := 0
	for _, e := range x.seen {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// play plays text (espeak-ng) into the null sink, as a person speaking into the room.
func (x *e2e) play(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	b := audiotest.RequireSpeech(t, text, "en-us", 0)
	path := filepath.Join(t.TempDir(), "say.wav")
	if err := audio.WriteWAVFile(path, b, audio.S16); err != nil {
		t.Fatal(err)
	}
	if err := x.pulse.PlayFile(ctx, path); err != nil {
		t.Fatal(err)
	}
}

// recorder records the sink's monitor independently of the assistant (the "harness's ear").
type recorder struct {
	mu     sync.Mutex
	data   []float32
	cancel context.CancelFunc
	done   chan struct{}
}

func startRecorder(t *testing.T, dev string) *recorder {
	h, err := device.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.OpenCapture(device.CaptureConfig{StreamConfig: device.StreamConfig{Device: dev}, Format: audio.Mono16k})
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &recorder{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]float32, 1600)
		for {
			n, err := c.Read(ctx, buf)
			r.mu.Lock()
			r.data = append(r.data, buf[:n]...)
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { r.stop(); c.Close(); h.Close() })
	return r
}

func (r *recorder) stop() []float32 {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.data
}

// spoken is what espeak-ng says for text in Parley's default voice, at 16 kHz.
func spoken(t *testing.T, text string) []float32 {
	e, err := espeak.New(espeak.Config{})
	if err != nil {
		t.Skip("espeak-ng:", err)
	}
	defer e.Close()
	ctx := context.Background()
	st, err := e.Synthesize(ctx, tts.Request{Text: text})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var pcm []float32
	for {
		c, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		pcm = append(pcm, c.Samples...)
	}
	out, err := audio.Resample(pcm, e.Capabilities().SampleRate, app.SampleRate, 1)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// matchingBlocks is the fraction of ref's voiced 50 ms blocks found in rec at ≥ 6 dB SNR.
func matchingBlocks(rec, ref []float32) float64 {
	m := audiotest.Find(rec, ref)
	blocks := audiotest.BlockSNR(rec, ref, m.Lag, 800, 1600)
	if len(blocks) == 0 {
		return 0
	}
	good := 0
	for _, b := range blocks {
		if b >= 6 {
			good++
		}
	}
	return float64(good) / float64(len(blocks))
}

// demoASR is the project's demo recognizer in the source tree.
const demoASR = "../../assets/demo/sensevoice"

var clock = regexp.MustCompile(`\b(\d{1,2}):(\d{2})\b`)

func TestEndToEndWhatTimeIsIt(t *testing.T) {
	x := start(t, "hands-free", map[string]string{"q": "what time is it"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	asked := time.Now()
	x.play(t, ctx, "what time is it")
	ex := x.wait(t, "the answer", func(e app.Event) bool { return e.Kind == app.EvTurnDone }).Exchange
	t.Logf("heard %q, answered %q; latency: %s", ex.Transcript.Text, ex.Answer, ex.Latency)
	if ex.Err != "" || ex.Interrupted {
		t.Fatalf("exchange %+v", ex)
	}
	if !strings.Contains(strings.ToLower(ex.Transcript.Text), "what time") {
		t.Fatalf("transcript %q", ex.Transcript.Text)
	}
	m := clock.FindStringSubmatch(ex.Answer)
	if m == nil {
		t.Fatalf("answer %q holds no time", ex.Answer)
	}
	if h := asked.Local().Hour() % 12; !(m[1] == fmt.Sprint(h) || m[1] == fmt.Sprint(h+1) || (h == 0 && m[1] == "12") || m[1] == fmt.Sprintf("%02d", asked.Local().Hour())) {
		t.Errorf("answer %q: hour %s is not now (%s)", ex.Answer, m[1], asked.Local().Format("15:04"))
	}
	for _, hop := range []time.Time{ex.Latency.Transcript, ex.Latency.FirstToken, ex.Latency.FirstSentence, ex.Latency.FirstAudio} {
		if hop.IsZero() {
			t.Errorf("latency hop missing: %+v", ex.Latency)
		}
	}

	// Parley's own answer came back through the monitor: it must start no turn
	time.Sleep(3 * time.Second)
	x.drain()
	if got := x.tr.heard(); len(got) != 1 {
		t.Errorf("transcriber called %d times (%q): Parley answered its own voice", len(got), got)
	}
	if x.count(app.EvBargeIn) != 0 || x.count(app.EvTurnDone) != 1 {
		t.Errorf("events after the answer: barge-ins %d, turns %d", x.count(app.EvBargeIn), x.count(app.EvTurnDone))
	}
	t.Logf("echo rejections: %d", x.count(app.EvEchoRejected))

	// the answer was really played aloud: find it in the harness's own recording of the sink
	rec := x.rec.stop()
	ref := spoken(t, ex.Answer)
	if d := os.Getenv("PARLEY_E2E_DUMP"); d != "" {
		audio.WriteWAVFile(filepath.Join(d, "rec.wav"), &audio.Buffer{Format: audio.Mono16k, Data: rec}, audio.F32)
		audio.WriteWAVFile(filepath.Join(d, "ref.wav"), &audio.Buffer{Format: audio.Mono16k, Data: ref}, audio.F32)
	}
	if x.tr.demo != nil {
		x.tr.mu.Lock()
		t.Logf("demo ASR heard the question as %q", x.tr.demoHeard)
		x.tr.mu.Unlock()
		if r, err := x.tr.demo.Transcribe(ctx, rec); err == nil {
			t.Logf("demo ASR transcript of the whole sink recording (question + answer): %q", r.Text)
		}
	}
	// PulseAudio on a busy 2-core host under-runs and shifts parts of it: judge 50 ms blocks,
	// each at its best lag, and compare with a control sentence that was never played
	good := matchingBlocks(rec, ref)
	control := matchingBlocks(rec, spoken(t, "The quick brown fox jumps over the lazy dog."))
	t.Logf("answer found in the sink recording: %.0f%% of its 50 ms blocks match at ≥ 6 dB (control sentence: %.0f%%)", 100*good, 100*control)
	if good < 0.4 || good < 2*control+0.2 {
		t.Errorf("the spoken answer is not in the sink's recording (%.0f%% of blocks, control %.0f%%)", 100*good, 100*control)
	}
	t.Logf("phase: recording checked at %v", time.Since(asked))

	// history
	x.a.Close()
	t.Logf("phase: closed at %v", time.Since(asked))
	s, err := store.Open(x.db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	turns, err := s.Turns(ctx, x.a.History.Conversation())
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 2 || turns[0].Role != store.RoleUser || turns[1].Text != ex.Answer || turns[1].Latency.FirstAudio.IsZero() {
		t.Errorf("history %+v", turns)
	}
}

// drain collects the events that are waiting, until 100 ms pass without one that is not a
// level update (levels keep coming for as long as the microphone is open) or 2 s in all.
func (x *e2e) drain() {
	quiet := time.NewTimer(100 * time.Millisecond)
	defer quiet.Stop()
	limit := time.After(2 * time.Second)
	for {
		select {
		case e := <-x.ev:
			if e.Kind != app.EvLevel {
				x.seen = append(x.seen, e)
				quiet.Reset(100 * time.Millisecond)
			}
		case <-quiet.C:
			return
		case <-limit:
			return
		}
	}
}

func TestEndToEndBargeIn(t *testing.T) {
	x := start(t, "hands-free", map[string]string{"q1": "what can you do", "q2": "what time is it"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	x.play(t, ctx, "what can you do")
	x.wait(t, "the long answer", func(e app.Event) bool { return e.Kind == app.EvSentenceStarted && e.Sentence >= 1 })
	x.play(t, ctx, "what time is it")
	first := x.wait(t, "the interrupted answer", func(e app.Event) bool { return e.Kind == app.EvTurnDone }).Exchange
	t.Logf("first: heard %q, played %q of %q (interrupted %v)", first.Transcript.Text, first.Answer, first.FullAnswer, first.Interrupted)
	if !first.Interrupted || first.Answer == "" || len(first.Answer) >= len(first.FullAnswer) || !strings.HasPrefix(first.FullAnswer, first.Answer[:len(first.Answer)/2]) {
		t.Fatalf("first exchange not cut short: %+v", first)
	}
	second := x.wait(t, "the second answer", func(e app.Event) bool { return e.Kind == app.EvTurnDone }).Exchange
	t.Logf("second: heard %q, answered %q; latency %s", second.Transcript.Text, second.Answer, second.Latency)
	if !strings.Contains(second.Transcript.Text, "what time") || clock.FindString(second.Answer) == "" {
		t.Errorf("second exchange %+v", second)
	}
	x.a.Close()
	s, err := store.Open(x.db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	turns, err := s.Turns(ctx, x.a.History.Conversation())
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 4 || !turns[1].Interrupted || turns[1].Text != first.Answer || turns[3].Text != second.Answer {
		t.Errorf("history: %+v", turns)
	}
	if second.Interrupted {
		// known weakness under heavy load (load average > 12 on 2 cores): PulseAudio under-runs
		// shift the echo so much that the tail of an answer can be taken for the user
		t.Logf("KNOWN ISSUE: the second answer was cut short too (%q of %q)", second.Answer, second.FullAnswer)
	}
}
