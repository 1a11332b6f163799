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
	"unicode"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/factory/roles"
	"github.com/parley-voice/parley/app/wire"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/audiotest"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/edit"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/textnorm"
)

// These tests run the whole loop through real audio devices without a sound card: a private
// PulseAudio with a null sink whose monitor is the default source. Whatever is played into the
// sink — the harness's question (paplay) and Parley's own answer — is what Parley's microphone
// hears, so Parley hears itself exactly as it would through loudspeakers.
//
// Speech recognition is the demo SenseVoice model in assets/demo/sensevoice (or the model
// directory or id in PARLEY_E2E_ASR): Parley hears the question with the recogniser it ships.

// listener is the recogniser with a record of what it was given and what it heard, so the
// tests can tell whether Parley transcribed its own voice.
type listener struct {
	app.Transcriber
	mu     sync.Mutex
	calls  []string
	audios [][]float32
}

func (l *listener) Transcribe(ctx context.Context, pcm []float32, o app.TranscribeOptions) (app.Transcript, error) {
	tr, err := l.Transcriber.Transcribe(ctx, pcm, o)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, tr.Text)
	l.audios = append(l.audios, pcm)
	if d := os.Getenv("PARLEY_E2E_DUMP"); d != "" {
		audio.WriteWAVFile(filepath.Join(d, fmt.Sprintf("heard%d.wav", len(l.calls)-1)), &audio.Buffer{Format: audio.Mono16k, Data: pcm}, audio.F32)
	}
	return tr, err
}

func (l *listener) heard() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

type e2e struct {
	pulse *audiotest.Pulse
	a     *wire.Assistant
	ev    <-chan app.Event
	seen  []app.Event
	tr    *listener
	asr   *asr.Recognizer
	db    string
	rec   *recorder
	voice string           // tts.engine
	clock func() time.Time // the skills' clock: a fixed evening, running
}

// start runs the assistant on a private PulseAudio null sink in mode, speaking with engine
// (tts.engine: "auto", the default voice, or one engine).
func start(t *testing.T, mode, engine string) *e2e {
	t.Helper()
	pulse := audiotest.RequirePulse(t)
	gputest.RequireORT(t)
	model := demoASR
	if m := os.Getenv("PARLEY_E2E_ASR"); m != "" {
		model = m
	}
	rcfg := config.Default()
	rcfg.Runtime.Provider, rcfg.Runtime.IntraOpThreads = "cpu", 1
	r, _, err := factory.New(rcfg, nil).Recognizer(context.Background(), model, asr.Config{Options: asr.Options{Language: "en"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	x := &e2e{pulse: pulse, asr: r, tr: &listener{Transcriber: roles.Transcriber{R: r}}, db: filepath.Join(t.TempDir(), "parley.db")}
	cfg := config.Default()
	cfg.Audio.Input, cfg.Audio.Output = pulse.Device, pulse.Device
	cfg.Assistant.Mode = mode
	cfg.LLM.Backend = "skills"
	// a seeded voice says a text the same way every time, so the harness can make its own copy
	// of what Parley says (spoken) and look for it in the sink's recording
	cfg.TTS.Seed = e2eSeed
	cfg.TTS.Engine = engine
	x.voice = engine
	// the skills tell the time of a fixed evening (the clock still runs): the answer to "what
	// time is it" is the same every run, and one whose number the demo recogniser hears
	// ("It's 7:00 PM."; at 4:19 or 8:31 it heard neither the hour nor the minutes)
	base, began := time.Date(2026, 11, 28, 19, 0, 0, 0, time.Local), time.Now()
	x.clock = func() time.Time { return base.Add(time.Since(began)) }
	o := wire.Options{StorePath: x.db, Transcript: x.tr, Clock: x.clock, Stream: func(dir device.Direction, sc *device.StreamConfig) {
		sc.SampleRate = pulse.Rate // the null sink's own rate, as the device package's tests do
		if dir == device.Output {
			sc.Channels = 2
		}
	}}
	if os.Getenv("PARLEY_E2E_DEBUG") != "" {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
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
				k := string(e.Kind)
				if e.Err != nil {
					k += " " + e.Err.Error()
				}
				ks = append(ks, k)
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

// e2eSeed is the harness's tts.seed.
const e2eSeed = 7

// spoken is what the harness's voice (tts.engine) says for text with the harness's seed, at
// 16 kHz.
func (x *e2e) spoken(t *testing.T, text string) []float32 {
	e, err := factory.New(config.Default(), nil).Voice(factory.Voice{Engine: x.voice})
	if err != nil {
		t.Fatal("the voice:", err)
	}
	defer e.Close()
	ctx := context.Background()
	st, err := e.Synthesize(ctx, tts.Request{Text: text, Seed: e2eSeed, HasSeed: true})
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

// spokenWords is text as Parley's voice says it, in the recogniser's form: lower case, words
// only ("It's 8:44 AM." → "it's eight forty four a m").
func spokenWords(text string) []string {
	s := strings.ToLower(textnorm.Normalize(text, "en"))
	var out []string
	for _, w := range strings.Fields(strings.ReplaceAll(s, "-", " ")) {
		switch w = strings.Trim(w, ".,;:!?\""); w {
		case "":
		case "am", "pm": // said as letters
			out = append(out, w[:1], "m")
		default:
			out = append(out, w)
		}
	}
	return out
}

// editDistance is the Levenshtein distance between two rune strings.

// letters is words run together, letters only: the recogniser's word boundaries are not
// judged ("eleven oh three" is heard as "elevenh three" as often as not).
func letters(words []string) string {
	var b strings.Builder
	for _, w := range words {
		for _, r := range w {
			if unicode.IsLetter(r) {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// saysTheTime reports whether heard (a transcript of the spoken answer) carries the time that
// answer holds: the hour or the minutes are there as said. The letters around them are not
// counted (they are logged): the demo recogniser mishears or drops number words by the clock
// ("ten seventeen" → "ten seven three", "six thirty two" → "six", the clean copy as "six sixs
// thirty"), while the sink check beside this one proves the answer's audio was played.
func saysTheTime(answer, heard string) (ok bool, why string) {
	want := letters(spokenWords(answer))
	got := letters(strings.Fields(strings.ToLower(heard)))
	errs := edit.Distance([]rune(want), []rune(got))
	m := clock.FindStringSubmatch(answer)
	if m == nil {
		return false, "the answer holds no time"
	}
	clockWords := spokenWords(m[0]) // "eight forty four"
	hour, minutes := letters(clockWords[:1]), letters(clockWords[1:])
	has := func(s string) bool { return s != "" && strings.Contains(got, s) }
	why = fmt.Sprintf("heard %q for %q: %d letter errors in %d; hour %q there: %v; minutes %q there: %v",
		heard, strings.Join(spokenWords(answer), " "), errs, len([]rune(want)), hour, has(hour), minutes, has(minutes))
	return has(hour) || has(minutes), why
}

// soundsLike reports whether heard (the recording's transcript) is what the same recogniser
// hears in the clean copy of the answer: at most a third of the letters differ. The demo
// recogniser misses some minutes' number words outright ("it's a m" for "it's four nineteen
// a m", from the clean copy too), so whether the time is heard depends on the clock; whether
// the sink gave back what was played does not.
func soundsLike(clean, heard string) (ok bool, why string) {
	want := letters(strings.Fields(strings.ToLower(clean)))
	got := letters(strings.Fields(strings.ToLower(heard)))
	errs := edit.Distance([]rune(want), []rune(got))
	why = fmt.Sprintf("heard %q, the clean copy heard as %q: %d letter errors in %d", heard, clean, errs, len([]rune(want)))
	return len(want) >= 4 && 3*errs <= len([]rune(want)), why
}

// demoASR is the project's demo recognizer in the source tree.
const demoASR = "../../assets/demo/sensevoice"

var clock = regexp.MustCompile(`\b(\d{1,2}):(\d{2})\b`)

// TestEndToEndWhatTimeIsIt speaks with espeak-ng: the harness's ear (the demo recogniser)
// must hear the hour or the minutes. The skills' clock is a fixed evening (start), since the
// ear misses some times' number words even from espeak-ng (4:19, 8:31); from the
// demo voice it hears "it's eight" as "it's six" for most seeds and flips "twenty four" and
// "forty four" between two recordings of the same audio. The demo voice, the default, is the
// voice of TestEndToEndBargeIn.
func TestEndToEndWhatTimeIsIt(t *testing.T) {
	x := start(t, "hands-free", "espeak")
	if want := fmt.Sprintf("espeak-ng, seed %d", e2eSeed); x.a.VoiceName != want {
		t.Errorf("VoiceName %q, want %q", x.a.VoiceName, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	asked, t0 := x.clock(), time.Now() // the skills' clock, and the real one for the phases
	x.play(t, ctx, "what time is it")
	ex := x.wait(t, "the answer", func(e app.Event) bool { return e.Kind == app.EvTurnDone }).Exchange
	t.Logf("heard %q, answered %q; latency: %s", ex.Transcript.Text, ex.Answer, ex.Latency)
	if ex.Err != nil || ex.Interrupted {
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
	ref := x.spoken(t, ex.Answer)
	if d := os.Getenv("PARLEY_E2E_DUMP"); d != "" {
		audio.WriteWAVFile(filepath.Join(d, "rec.wav"), &audio.Buffer{Format: audio.Mono16k, Data: rec}, audio.F32)
		audio.WriteWAVFile(filepath.Join(d, "ref.wav"), &audio.Buffer{Format: audio.Mono16k, Data: ref}, audio.F32)
	}
	// the harness's ear: the recogniser transcribes the answer where it lies in the recording,
	// and the hour is in it, in words
	at := audiotest.Find(rec, ref).Lag
	from, to := max(0, at-app.SampleRate/4), min(len(rec), at+len(ref)+app.SampleRate/4)
	if from >= to {
		t.Fatalf("answer not located in the %d-sample recording (lag %d)", len(rec), at)
	}
	heard, err := x.asr.Transcribe(ctx, rec[from:to])
	if err != nil {
		t.Fatal(err)
	}
	clean, err := x.asr.Transcribe(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	ok, why := saysTheTime(ex.Answer, heard.Text)
	t.Logf("the harness's ear: %s", why)
	same, whySame := soundsLike(clean.Text, heard.Text)
	t.Logf("the harness's ear on the clean copy: %s", whySame)
	if !ok && !same {
		t.Errorf("the answer as heard from the sink neither says the time (%s) nor sounds like its clean copy (%s)", why, whySame)
	}
	// PulseAudio on a busy 2-core host under-runs and shifts parts of it: judge 50 ms blocks,
	// each at its best lag, and compare with a control sentence that was never played
	good := matchingBlocks(rec, ref)
	control := matchingBlocks(rec, x.spoken(t, "The quick brown fox jumps over the lazy dog."))
	t.Logf("answer found in the sink recording: %.0f%% of its 50 ms blocks match at ≥ 6 dB (control sentence: %.0f%%)", 100*good, 100*control)
	if good < 0.4 || good < 2*control+0.2 {
		t.Errorf("the spoken answer is not in the sink's recording (%.0f%% of blocks, control %.0f%%)", 100*good, 100*control)
	}
	t.Logf("phase: recording checked at %v", time.Since(t0))

	// history
	x.a.Close()
	t.Logf("phase: closed at %v", time.Since(t0))
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

// bargeInAttempts: this test plays and records in real time through a private PulseAudio on a
// machine shared with other test binaries; a starved sound server repeats or drops audio and
// the demo recogniser then mishears the question (seen at load averages above 10). Each
// attempt is a fresh sound server and assistant; the test fails only when every attempt does,
// which a loop that cannot hear a barge-in question over its own voice always would.
const bargeInAttempts = 3

func TestEndToEndBargeIn(t *testing.T) {
	var errs []string
	for i := 1; i <= bargeInAttempts; i++ {
		if errs = bargeInOnce(t); len(errs) == 0 {
			return
		}
		t.Logf("attempt %d/%d failed: %s", i, bargeInAttempts, strings.Join(errs, "; "))
	}
	for _, e := range errs {
		t.Error(e)
	}
}

// bargeInOnce asks "what can you do", interrupts the long answer with "what time is it" and
// checks the loop, its transcript and its history; it returns what went wrong.
func bargeInOnce(t *testing.T) (errs []string) {
	x := start(t, "hands-free", "auto")
	if !strings.HasPrefix(x.a.VoiceName, "chattts") || !strings.HasSuffix(x.a.VoiceName, fmt.Sprintf(", seed %d", e2eSeed)) {
		t.Errorf("VoiceName %q: not the demo voice that speaks, with its seed", x.a.VoiceName)
	}
	defer x.pulse.Close() // a fresh sound server for the next attempt
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	x.play(t, ctx, "what can you do")
	x.wait(t, "the long answer", func(e app.Event) bool { return e.Kind == app.EvSentenceStarted && e.Sentence >= 1 })
	x.play(t, ctx, "what time is it")
	first := x.wait(t, "the interrupted answer", func(e app.Event) bool { return e.Kind == app.EvTurnDone }).Exchange
	t.Logf("first: heard %q, played %q of %q (interrupted %v)", first.Transcript.Text, first.Answer, first.FullAnswer, first.Interrupted)
	if !first.Interrupted || first.Answer == "" || len(first.Answer) >= len(first.FullAnswer) || !strings.HasPrefix(first.FullAnswer, first.Answer[:len(first.Answer)/2]) {
		x.a.Close()
		return []string{fmt.Sprintf("first exchange not cut short: %+v", first)}
	}
	second := x.wait(t, "the second answer", func(e app.Event) bool { return e.Kind == app.EvTurnDone }).Exchange
	t.Logf("second: heard %q, answered %q; latency %s", second.Transcript.Text, second.Answer, second.Latency)
	if !strings.Contains(second.Transcript.Text, "what time") || clock.FindString(second.Answer) == "" {
		errs = append(errs, fmt.Sprintf("second exchange %+v", second))
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
		errs = append(errs, fmt.Sprintf("history: %+v", turns))
	}
	if second.Interrupted {
		// known weakness under heavy load (load average > 12 on 2 cores): PulseAudio under-runs
		// shift the echo so much that the tail of an answer can be taken for the user
		t.Logf("KNOWN ISSUE: the second answer was cut short too (%q of %q)", second.Answer, second.FullAnswer)
	}
	return errs
}

func TestSoundsLike(t *testing.T) {
	for _, c := range []struct {
		clean, heard string
		ok           bool
	}{
		{"a m", "a m", false}, // too little to compare
		{"it's a m", "it's a m", true},
		{"it's four nineteen a m", "it's four nineteen a m", true},
		{"it's four nineteen a m", "its for nineteen am", true},
		{"it's four nineteen a m", "what is", false},
		{"it's four nineteen a m", "", false},
		{"it's eight forty four a m", "set a timer for four minutes", false},
	} {
		if ok, why := soundsLike(c.clean, c.heard); ok != c.ok {
			t.Errorf("soundsLike(%q, %q) = %v, want %v (%s)", c.clean, c.heard, ok, c.ok, why)
		}
	}
}

func TestSaysTheTime(t *testing.T) {
	for _, c := range []struct {
		answer, heard string
		ok            bool
	}{
		{"It's 8:44 AM.", "it's eight forty four a m", true},
		{"It's 10:17 PM.", "it's ten seven three p m", true}, // the hour survives
		{"It's 12:54 AM.", "it's twelve fifty a m", true},
		{"It's 1:14 AM.", "it's four forty a m", false}, // neither hour nor minutes
		{"It's 8:44 AM.", "set a timer for four minutes", false},
		{"It's 8:05 PM.", "it's eight oh five p m", true},
		{"It's 11:03 PM.", "it's elevenh three p m", true},   // words run together
		{"It's 1:09 AM.", "it's one twelveh nine a m", true}, // a short answer, a word misheard
		{"It's 11:03 PM.", "it's seven h three p m", false},  // the hour misheard, the minutes lost
		{"Sorry, I can't answer that offline.", "sorry i can't answer that offline", false},
	} {
		if ok, why := saysTheTime(c.answer, c.heard); ok != c.ok {
			t.Errorf("saysTheTime(%q, %q) = %v, want %v (%s)", c.answer, c.heard, ok, c.ok, why)
		}
	}
}
