package chattts

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/control"
	"github.com/parley-voice/parley/tts/espeak"
)

func plan(t *testing.T, text string, refine bool, speed float64) textPlan {
	t.Helper()
	req := tts.Request{Text: text, Speed: speed}
	if speed == 0 {
		speed = 1
	}
	return planText(tts.Prepare(req, control.DefaultCalibration()), refine, true, control.DefaultCalibration(), speed)
}

func runTexts(tp textPlan) []string {
	var out []string
	for _, r := range tp.Runs {
		out = append(out, r.Text)
	}
	return out
}

func TestChatTTSChars(t *testing.T) {
	for _, c := range []struct {
		in   string
		zh   bool
		want string
	}{
		{"Hello, world!", false, "Hello, world."},
		{"it's (really) 'fine': yes; no?", false, "its ,really, fine, yes, no"},
		{"今天天气很好！", true, "今天天气很好。"},
		{"我们去公园吧？", true, "我们去公园吧"},
		{"你好,世界.", true, "你好，世界。"},
		{"《书名》：内容", true, "，书名，，内容"},
		{"café 🍌 naïve", false, "caf nave"},
	} {
		if got := chatttsChars(c.in, c.zh); got != c.want {
			t.Errorf("chatttsChars(%q, %v) = %q, want %q", c.in, c.zh, got, c.want)
		}
	}
	if !isZH("今天天气 ok") || isZH("hello world 你") {
		t.Error("language guess")
	}
}

func TestPlanTokens(t *testing.T) {
	tp := plan(t, "Hello [uv_break] world [laugh] and [lbreak] more [v_break] words.", false, 0)
	if got := runTexts(tp); len(got) != 1 || got[0] != "Hello [uv_break] world [laugh] and [lbreak] more [v_break] words." {
		t.Fatalf("runs %q", got)
	}
	if r := tp.Runs[0]; r.Speed != 5 || !r.Last || r.Before != 0 {
		t.Fatalf("run %+v", r)
	}
	if tp.RefinePrompt != "" {
		t.Fatalf("refine prompt %q", tp.RefinePrompt)
	}
}

func TestPlanRefinePromptAndBreaks(t *testing.T) {
	text := "[oral_2][laugh_0][break_6]Hello there [break_3] friend."
	tp := plan(t, text, true, 0)
	// the last [break_N] written is the level (tts/control's Script.BreakLevel)
	if tp.RefinePrompt != "[oral_2][laugh_0][break_3]" {
		t.Fatalf("refine prompt %q", tp.RefinePrompt)
	}
	// with refine, [break_N] is the refine pass's to place: no silence, one run
	if got := runTexts(tp); len(got) != 1 || got[0] != "Hello there friend." {
		t.Fatalf("refine runs %q", got)
	}
	// without refine an inline [break_3] is a 300 ms silence between two runs
	tp = plan(t, text, false, 0)
	if got := runTexts(tp); len(got) != 2 || tp.Runs[1].Before != 300*time.Millisecond {
		t.Fatalf("runs %q, %+v", got, tp.Runs)
	}
}

func TestPlanSpeedAndSentences(t *testing.T) {
	tp := plan(t, "One two [speed_8] three four. Next sentence <break time=\"400ms\"/> here.", false, 0)
	got := runTexts(tp)
	want := []string{"One two", "three four.", "Next sentence", "here."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("runs %q, want %q", got, want)
	}
	speeds := []int{5, 8, 8, 8}
	for i, r := range tp.Runs {
		if r.Speed != speeds[i] {
			t.Errorf("run %d speed %d, want %d", i, r.Speed, speeds[i])
		}
	}
	if tp.Runs[2].Before != 250*time.Millisecond || tp.Runs[3].Before != 400*time.Millisecond {
		t.Errorf("silences %v %v", tp.Runs[2].Before, tp.Runs[3].Before)
	}
	if !tp.Runs[1].Last || tp.Runs[0].Last || tp.Runs[2].Last || !tp.Runs[3].Last {
		t.Errorf("last flags %+v", tp.Runs)
	}
	// the request's speed picks the level; past [speed_9] it is clamped with a warning
	if tp := plan(t, "Fast words.", false, 1.3); tp.Runs[0].Speed != 8 || len(tp.Warnings) != 0 {
		t.Errorf("speed 1.3: %+v", tp)
	}
	if tp := plan(t, "Fast words.", false, 2); tp.Runs[0].Speed != 9 || len(tp.Warnings) != 1 {
		t.Errorf("speed 2: %+v", tp)
	}
}

func TestPlanControlOnly(t *testing.T) {
	tp := plan(t, "[laugh][uv_break][laugh]", false, 0)
	if got := runTexts(tp); len(got) != 1 || got[0] != "[laugh] [uv_break] [laugh]" {
		t.Fatalf("runs %q", got)
	}
	if tp := plan(t, "[uv_break][lbreak]", false, 0); len(tp.Runs) != 0 {
		t.Fatalf("pauses alone gave runs %q", runTexts(tp))
	}
	tp = plan(t, "你好！[laugh]今天天气很好。", false, 0)
	if got := runTexts(tp); strings.Join(got, "|") != "你好。|[laugh] 今天天气很好。" {
		t.Fatalf("runs %q", got)
	}
}

// TestFrontTextEspeakIPA: the demo voice's front-end (train/chattts/CONTRACT.md "espeak-ipa"):
// control tokens kept, the rest cut after , . ; : ! ? (marks kept as words), each piece
// phonemised by espeak-ng, all joined with single spaces.
func TestFrontTextEspeakIPA(t *testing.T) {
	e := &Engine{mc: &ModelConfig{}}
	e.mc.Frontend.Type = "espeak-ipa"
	ph := func(s string) string {
		p, err := espeak.Phonemes(s, "en-us")
		if err != nil {
			t.Skipf("espeak-ng: %v", err)
		}
		return strings.TrimSpace(p)
	}
	got, err := e.frontText("hello there, world [laugh] it is ten! ok")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{ph("hello there"), ",", ph(" world "), "[laugh]", ph(" it is ten"), "!", ph(" ok")}, " ")
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got, _ := e.frontText("[uv_break][laugh]"); got != "[uv_break] [laugh]" {
		t.Fatalf("tokens only: %q", got)
	}
	e.mc.Frontend.Type = "wordpiece"
	if got, _ := e.frontText("hello, world"); got != "hello, world" {
		t.Fatalf("wordpiece front-end changed the text: %q", got)
	}
}

// TestDemoFrontendReference: the demo voice's reference (train/chattts/export.py: texts, their
// espeak-ipa phonemes and ids, made with espeak-ng on the exporting machine) against the Go
// front-end and tokenizer. Skips until the demo voice is in assets/demo/chattts.
func TestDemoFrontendReference(t *testing.T) {
	dir := demoDir()
	var ref struct {
		Frontend []struct {
			Text     string `json:"text"`
			Phonemes string `json:"phonemes"`
			IDs      []int  `json:"ids"`
		} `json:"frontend"`
	}
	var raw []byte
	for _, f := range []string{"_reference.json", "reference.json"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			raw = b
			break
		}
	}
	if raw == nil {
		t.Skipf("no demo voice reference in %s yet", dir)
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	mc, err := ReadModelConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := LoadTokenizer(filepath.Join(dir, mc.Files["tokenizer"]))
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{mc: mc, tok: tok}
	if len(ref.Frontend) == 0 {
		t.Fatal("the demo reference has no frontend cases")
	}
	for _, c := range ref.Frontend {
		got, err := e.frontText(c.Text)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.Phonemes { // both sides run Debian 12's espeak-ng
			t.Errorf("%q: phonemes here %q, at export %q", c.Text, got, c.Phonemes)
		}
		if ids := tok.Encode(c.Phonemes); !slices.Equal(ids, c.IDs) {
			t.Errorf("%q: ids %v, reference %v", c.Phonemes, ids, c.IDs)
		}
	}
}

// TestDemoVoiceSpeedActs: the demo voice does not act on [speed_N] (its espeak-ng corpus
// barely varied tempo), so it speaks at its normal tempo and the audio is time-scaled: the
// speed must set the duration, and the capability report must say it is emulated.
func TestDemoVoiceSpeedActs(t *testing.T) {
	dir := demoDir()
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Skipf("no demo voice in %s", dir)
	}
	gputest.RequireORT(t)
	e, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	native := !e.timeScalesSpeed() // a voice that learnt [speed_N] from real tempo changes
	if c := e.Capabilities(); native && c.Support(tts.CtlSpeed) != tts.Native ||
		!native && (c.Support(tts.CtlSpeed) != tts.Emulated || !strings.Contains(c.Notes[tts.CtlSpeed], "time-scaled")) {
		t.Errorf("speed reported as %v (%q)", c.Support(tts.CtlSpeed), c.Notes[tts.CtlSpeed])
	}
	dur := map[float64]float64{}
	for _, speed := range []float64{0.6, 1, 1.4} {
		s, err := e.Synthesize(context.Background(), tts.Request{Text: "Good evening, how can I help you tonight?", Seed: 7, HasSeed: true, Speed: speed})
		if err != nil {
			t.Fatal(err)
		}
		b, err := tts.ReadAll(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		dur[speed] = b.Duration().Seconds()
	}
	t.Logf("durations at 0.6/1/1.4: %.2f/%.2f/%.2f s (native %v)", dur[0.6], dur[1], dur[1.4], native)
	if native {
		// the model's own [speed_N]: slower is longer, and the ends at least 1.4x apart
		if !(dur[0.6] > dur[1] && dur[1] > dur[1.4]) || dur[0.6]/dur[1.4] < 1.4 {
			t.Errorf("[speed_N] durations %.2f/%.2f/%.2f s: not monotonic, or under 1.4x apart", dur[0.6], dur[1], dur[1.4])
		}
		return
	}
	for _, speed := range []float64{0.6, 1.4} {
		if r := dur[1] / dur[speed]; math.Abs(r-speed)/speed > 0.05 {
			t.Errorf("speed %.1f: %.2f s against %.2f s at 1× (ratio %.2f)", speed, dur[speed], dur[1], r)
		}
	}
}
