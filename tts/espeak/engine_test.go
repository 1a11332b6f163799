package espeak

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/control"
)

func newEngine(t testing.TB) *Engine {
	t.Helper()
	e, err := New(Config{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func say(t testing.TB, e *Engine, req tts.Request) (*audio.Buffer, []string) {
	t.Helper()
	s, err := e.Synthesize(context.Background(), req)
	if err != nil {
		t.Fatalf("Synthesize(%q): %v", req.Text, err)
	}
	b, err := tts.ReadAll(context.Background(), s)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	return b, s.Warnings()
}

// gapsOver finds silences of at least 100 ms, which words never leave inside a clause.
func gapsOver(b *audio.Buffer) []tts.Gap {
	return tts.Silences(b.Data, b.SampleRate, trimDB, 100*time.Millisecond)
}

func TestPausesMatchCalibration(t *testing.T) {
	e := newEngine(t)
	cal := control.DefaultCalibration()
	// expected gap = calibration + the two trim margins (speech kept around each side), within
	// a tolerance of 40 ms for espeak's own onset/offset quietness.
	const tol = 40 * time.Millisecond
	cases := []struct {
		ctl  string
		want time.Duration
	}{
		{"[uv_break]", cal.Strengths[control.UVBreak]},
		{"[v_break]", cal.Strengths[control.VBreak]},
		{"[lbreak]", cal.Strengths[control.LBreak]},
		{"[break_2]", 2 * cal.BreakStep},
		{"[break_4]", 4 * cal.BreakStep},
		{"[break_7]", 7 * cal.BreakStep},
		{`<break time="300ms"/>`, 300 * time.Millisecond},
		{`<break strength="strong"/>`, cal.Strengths[control.StrengthStrong]},
	}
	var prevBreak time.Duration
	for _, c := range cases {
		b, _ := say(t, e, tts.Request{Text: "hello there " + c.ctl + " good morning"})
		gaps := gapsOver(b)
		if len(gaps) != 1 {
			t.Errorf("%s: found %d gaps ≥100 ms %v, want 1", c.ctl, len(gaps), gaps)
			continue
		}
		got := gaps[0].Len()
		if d := got - c.want; d < -tol || d > tol+2*trimMargin {
			t.Errorf("%s: pause %v, calibration %v", c.ctl, got, c.want)
		}
		if strings.HasPrefix(c.ctl, "[break_") {
			if got <= prevBreak {
				t.Errorf("%s: pause %v not longer than the previous break_N (%v)", c.ctl, got, prevBreak)
			}
			prevBreak = got
		}
	}
}

func speechLen(b *audio.Buffer) time.Duration {
	return b.Format.Duration(len(tts.Trim(b.Data, b.SampleRate, trimDB, 0)))
}

func TestSpeedScalesDuration(t *testing.T) {
	e := newEngine(t)
	text := "The quick brown fox jumps over the lazy dog near the river bank"
	base := speechLen(mustSay(t, e, tts.Request{Text: text, Speed: 1}))
	for _, sp := range []float64{0.75, 1.5, 2} {
		got := speechLen(mustSay(t, e, tts.Request{Text: text, Speed: sp}))
		ratio := float64(base) / float64(got)
		if math.Abs(ratio-sp)/sp > 0.2 {
			t.Errorf("speed %.2f: duration %v vs %v at 1.0 (ratio %.2f)", sp, got, base, ratio)
		}
	}
	// [speed_N] and <prosody rate> go the same way
	slow := speechLen(mustSay(t, e, tts.Request{Text: "[speed_1] " + text}))
	fast := speechLen(mustSay(t, e, tts.Request{Text: `<prosody rate="fast">` + text + `</prosody>`}))
	if !(slow > base && fast < base) {
		t.Errorf("[speed_1] %v, base %v, prosody fast %v: want slow > base > fast", slow, base, fast)
	}
}

func mustSay(t testing.TB, e *Engine, req tts.Request) *audio.Buffer {
	b, _ := say(t, e, req)
	return b
}

// TestSeedReproducible checks that the same seed and text give identical samples from a fresh
// engine. Each synthesis runs in its own process: libespeak-ng keeps waveform-generator state
// (glottal phase, flutter index, harmonic double-buffer switch: statics in wavegen.c that its
// API cannot reset) from one call to the next, so within one process repeated calls give the
// same voice and timing but not bit-identical samples. In-process we check the same duration.
func TestSeedReproducible(t *testing.T) {
	if os.Getenv("PARLEY_ESPEAK_HELPER") != "" {
		return
	}
	run := func(seed string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSynth$", "-test.v")
		cmd.Env = append(os.Environ(), "PARLEY_ESPEAK_HELPER="+seed)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if h, ok := strings.CutPrefix(strings.TrimSpace(l), "SHA256 "); ok {
				return h
			}
		}
		t.Fatalf("helper printed no hash:\n%s", out)
		return ""
	}
	a, b, c := run("1234"), run("1234"), run("4321")
	if a != b {
		t.Errorf("same seed and text gave different samples in two fresh processes (%s vs %s)", a, b)
	}
	if a == c {
		t.Error("different seeds gave identical samples")
	}
	e := newEngine(t)
	req := tts.Request{Text: "Same seed, same voice. Twice over.", Seed: 77, Temperature: 0.8}
	x, y := mustSay(t, e, req), mustSay(t, e, req)
	if d := math.Abs(float64(x.Duration()-y.Duration())) / float64(x.Duration()); d > 0.04 {
		t.Errorf("same seed in one process: durations %v vs %v", x.Duration(), y.Duration())
	}
}

func TestHelperSynth(t *testing.T) {
	seed := os.Getenv("PARLEY_ESPEAK_HELPER")
	if seed == "" {
		t.Skip("helper for TestSeedReproducible")
	}
	n, _ := strconv.ParseInt(seed, 10, 64)
	b := mustSay(t, newEngine(t), tts.Request{Text: "Same seed, same voice. Twice over.", Seed: n, Temperature: 0.8})
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, b.Data)
	fmt.Printf("SHA256 %x\n", h.Sum(nil))
}

// pitch estimates the median fundamental frequency of voiced 40 ms frames by autocorrelation.
func pitch(x []float32, rate int) float64 {
	fl := rate * 40 / 1000
	var f0s []float64
	for i := 0; i+fl <= len(x); i += fl / 2 {
		fr := x[i : i+fl]
		var e float64
		for _, v := range fr {
			e += float64(v * v)
		}
		if e/float64(fl) < 1e-3 {
			continue
		}
		best, bestLag := 0.0, 0
		for lag := rate / 400; lag <= rate/60; lag++ {
			var c float64
			for j := 0; j+lag < fl; j++ {
				c += float64(fr[j] * fr[j+lag])
			}
			if c > best {
				best, bestLag = c, lag
			}
		}
		if bestLag > 0 && best/e > 0.5 {
			f0s = append(f0s, float64(rate)/float64(bestLag))
		}
	}
	if len(f0s) == 0 {
		return 0
	}
	slices.Sort(f0s)
	return f0s[len(f0s)/2]
}

func TestSeedsGiveDifferentPitch(t *testing.T) {
	e := newEngine(t)
	text := "I am speaking with my own voice today."
	// pick the lowest- and highest-pitched seeds among a few, by their mapped parameters
	lo, hi := int64(1), int64(1)
	for s := int64(1); s <= 40; s++ {
		if SeedVoice(s).Pitch < SeedVoice(lo).Pitch {
			lo = s
		}
		if SeedVoice(s).Pitch > SeedVoice(hi).Pitch {
			hi = s
		}
	}
	pl := pitch(mustSay(t, e, tts.Request{Text: text, Seed: lo, Temperature: 0.01}).Data, e.rate)
	ph := pitch(mustSay(t, e, tts.Request{Text: text, Seed: hi, Temperature: 0.01}).Data, e.rate)
	t.Logf("seed %d (%+v): %.0f Hz; seed %d (%+v): %.0f Hz", lo, SeedVoice(lo), pl, hi, SeedVoice(hi), ph)
	if pl == 0 || ph == 0 || math.Abs(ph-pl)/math.Min(ph, pl) < 0.1 {
		t.Errorf("seeds %d and %d: pitch %.0f vs %.0f Hz, want ≥10%% apart", lo, hi, pl, ph)
	}
	// and two seeds differ in samples at all
	a := mustSay(t, e, tts.Request{Text: text, Seed: 7})
	b := mustSay(t, e, tts.Request{Text: text, Seed: 8})
	if slices.Equal(a.Data, b.Data) {
		t.Error("seeds 7 and 8 gave identical audio")
	}
}

func TestTemperatureWidensVariation(t *testing.T) {
	e := newEngine(t)
	text := strings.Repeat("This is one sentence of many. ", 6)
	spread := func(temp float64) float64 {
		s, err := e.Synthesize(context.Background(), tts.Request{Text: text, Seed: 5, Temperature: temp})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var f0 []float64
		for {
			c, err := s.Next(context.Background())
			if err != nil {
				break
			}
			f0 = append(f0, pitch(c.Samples, c.SampleRate))
		}
		mn, mx := slices.Min(f0), slices.Max(f0)
		return (mx - mn) / mn
	}
	cold, hot := spread(0.01), spread(1.5)
	t.Logf("pitch spread across sentences: temperature 0.01 → %.3f, 1.5 → %.3f", cold, hot)
	if hot <= cold {
		t.Errorf("temperature 1.5 spread %.3f not wider than 0.01 spread %.3f", hot, cold)
	}
}

func TestStreamsPerSentenceAndResamples(t *testing.T) {
	e := newEngine(t)
	s, err := e.Synthesize(context.Background(), tts.Request{Text: "One. Two. Three.", SampleRate: 16000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var sentences []int
	for {
		c, err := s.Next(context.Background())
		if err != nil {
			break
		}
		if c.SampleRate != 16000 {
			t.Fatalf("chunk at %d Hz, want 16000", c.SampleRate)
		}
		if c.Sentence >= 0 {
			sentences = append(sentences, c.Sentence)
		}
	}
	if !slices.Equal(sentences, []int{0, 1, 2}) {
		t.Errorf("chunks for sentences %v, want [0 1 2]", sentences)
	}
}

// countdownCtx reports cancellation after its Err has been asked n times: a deterministic
// "consumer cancels mid-sentence" without timing.
type countdownCtx struct {
	context.Context
	n atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func TestCancelMidSentence(t *testing.T) {
	long := strings.Repeat("and this sentence goes on and on without any end in sight ", 8)
	full, err := synth(context.Background(), long, params{voice: "en-us", rate: 175, pitch: 50, rng: 50, volume: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx := &countdownCtx{Context: context.Background()}
	ctx.n.Store(6) // a few callbacks in
	part, err := synth(ctx, long, params{voice: "en-us", rate: 175, pitch: 50, rng: 50, volume: 100})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(part) >= len(full)/10 {
		t.Errorf("cancelled synthesis produced %d of %d samples; it should stop within a few buffers", len(part), len(full))
	}
	// and through the stream: cancelling the consumer's context ends Next with the error
	e := newEngine(t)
	cctx, cancel := context.WithCancel(context.Background())
	s, err := e.Synthesize(cctx, tts.Request{Text: long + ". " + long})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for {
		if _, err = s.Next(context.Background()); err != nil {
			break
		}
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("stream ended with %v, want context.Canceled", err)
	}
	s.Close()
}

func TestLaughAndEventsEmulated(t *testing.T) {
	e := newEngine(t)
	plain := mustSay(t, e, tts.Request{Text: "that is funny"})
	laugh := mustSay(t, e, tts.Request{Text: "that is [laugh] funny"})
	if laugh.Duration() < plain.Duration()+200*time.Millisecond {
		t.Errorf("[laugh] added %v, want an audible laugh", laugh.Duration()-plain.Duration())
	}
	for _, tok := range []string{"[breath]", "[cough]", "[sigh]"} {
		b := mustSay(t, e, tts.Request{Text: "well " + tok + " okay"})
		if b.Duration() <= mustSay(t, e, tts.Request{Text: "well okay"}).Duration() {
			t.Errorf("%s added no audio", tok)
		}
	}
	_, warn := say(t, e, tts.Request{Text: "[oral_3] hi [bogus]", TopP: 0.7, TopK: 20})
	joined := strings.Join(warn, "\n")
	for _, w := range []string{"top_p", "top_k", "oral", "[bogus]"} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings %q do not mention %s", warn, w)
		}
	}
}

func TestBadRequests(t *testing.T) {
	e := newEngine(t)
	for _, req := range []tts.Request{
		{Text: ""}, {Text: "[uv_break][laugh_1]"}, {Text: "hi", Speed: 9}, {Text: "hi", Voice: "no-such-voice"},
		{Text: "hi", TopP: 2}, {Text: "hi", Temperature: math.NaN()},
	} {
		if _, err := e.Synthesize(context.Background(), req); err == nil {
			t.Errorf("Synthesize(%+v) succeeded, want an error", req)
		}
	}
}

func TestPhonemesMatchCommand(t *testing.T) {
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng command not installed")
	}
	for _, c := range []struct{ text, voice string }{
		{"Hello world. How are you today?", "en-us"},
		{"The quick brown fox jumps over the lazy dog, twice!", "en-us"},
		{"Colour and flavour", "en-gb"},
		{"Bonjour tout le monde", "fr"},
	} {
		out, err := exec.Command("espeak-ng", "--ipa", "-q", "-v", c.voice, c.text).Output()
		if err != nil {
			t.Fatalf("espeak-ng --ipa: %v", err)
		}
		want := strings.Join(strings.Fields(string(out)), " ")
		got, err := Phonemes(c.text, c.voice)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(strings.Fields(got), " ") != want {
			t.Errorf("Phonemes(%q, %s)\n got %q\nwant %q (espeak-ng --ipa)", c.text, c.voice, got, want)
		}
	}
}

func TestCapabilitiesCoverAllControls(t *testing.T) {
	caps := newEngine(t).Capabilities()
	for _, c := range tts.AllControls {
		if _, ok := caps.Controls[c]; !ok {
			t.Errorf("capabilities do not say how %s is handled", c)
		}
	}
	if caps.Support(tts.CtlLaugh) != tts.Emulated || caps.Support(tts.CtlTopP) != tts.Ignored {
		t.Error(fmt.Sprint(caps.Controls))
	}
}

func TestChineseAndMixed(t *testing.T) {
	e := newEngine(t)
	// Chinese through the pinyin voice: Hanzi are spoken, not spelled as English digits
	ph, err := Phonemes("我有三个苹果", voiceFor("zh"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ph, "θɹiː") || strings.Contains(ph, "(en)") {
		t.Errorf("Chinese phonemes %q contain English", ph)
	}
	zh := mustSay(t, e, tts.Request{Text: "我有3个苹果。", Language: "zh"})
	mixed := mustSay(t, e, tts.Request{Text: "我有3个苹果, I love Paris.", Language: "zh"})
	if zh.Duration() < 500*time.Millisecond || mixed.Duration() <= zh.Duration() {
		t.Errorf("zh %v, mixed %v", zh.Duration(), mixed.Duration())
	}
}

// TestVoiceLanguage checks that a voice naming a language makes it the text's language: "12"
// stays digits for espeak's French rules instead of becoming English "twelve".
func TestVoiceLanguage(t *testing.T) {
	if got := voiceLang("en-gb+f2"); got != "en-gb" {
		t.Errorf("voiceLang = %q", got)
	}
	if got := voiceLang("cmn-latn-pinyin"); got != "zh" {
		t.Errorf("voiceLang = %q", got)
	}
	e := newEngine(t)
	for _, c := range []struct {
		req       tts.Request
		want      string
		base, seg string
	}{
		{tts.Request{Text: "j'ai 12 ans", Voice: "fr"}, "12", "fr", "fr"},
		{tts.Request{Text: "I am 12", Voice: "en-gb+f2"}, "twelve", "en-gb+f2", "en-gb"},
		{tts.Request{Text: "I am 12"}, "twelve", "en-us", "en-us"},
		{tts.Request{Text: "我有2个", Language: "zh"}, "两个", "cmn-latn-pinyin", "zh"},
	} {
		req, base, p, err := e.prepare(c.req)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p.Sentences[0].Text, c.want) || base != c.base || p.Sentences[0].Segments[0].Lang != c.seg {
			t.Errorf("%+v: planned %q in %s (run %s, language %s); want %q in %s (run %s)", c.req, p.Sentences[0].Text, base,
				p.Sentences[0].Segments[0].Lang, req.Language, c.want, c.base, c.seg)
		}
	}
}

// The capabilities list the languages libespeak-ng really speaks, each a tag a request can
// give, with the voice's name from Languages.
func TestCapabilitiesListEveryLanguage(t *testing.T) {
	e := newEngine(t)
	langs := e.Capabilities().Languages
	if len(langs) < 50 {
		t.Fatalf("%d languages: %v", len(langs), langs)
	}
	for _, want := range []string{"en-us", "en-gb", "fr-fr", "de", "cmn", "es", "yue"} {
		if !slices.Contains(langs, want) {
			t.Errorf("no %s in %v", want, langs)
		}
	}
	for _, l := range langs {
		if strings.ContainsAny(l, " (…") {
			t.Errorf("%q is not a language tag", l)
		}
	}
	named, _ := Languages()
	for _, l := range named {
		if l.Tag == "en-gb" && !strings.Contains(l.Name, "English") {
			t.Errorf("en-gb is called %q", l.Name)
		}
	}
	// a listed language is a voice the engine speaks with
	st, err := e.Synthesize(context.Background(), tts.Request{Text: "bonjour", Voice: "fr"})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
}
