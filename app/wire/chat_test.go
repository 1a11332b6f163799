package wire

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
)

func TestConsole(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lat := app.Latency{SpeechEnd: t0, Endpoint: t0.Add(400 * time.Millisecond), Transcript: t0.Add(520 * time.Millisecond),
		FirstToken: t0.Add(530 * time.Millisecond), FirstSentence: t0.Add(540 * time.Millisecond), FirstAudio: t0.Add(600 * time.Millisecond)}
	evs := make(chan app.Event, 16)
	evs <- app.Event{Kind: app.EvLevel, Level: -30}
	evs <- app.Event{Kind: app.EvTranscript, Transcript: &app.Transcript{Text: "what time is it", Lang: "en", Emotion: "NEUTRAL", Event: "Speech"}}
	evs <- app.Event{Kind: app.EvTurnDone, Exchange: &app.Exchange{Answer: "It's 3:04 AM.", Latency: lat}}
	evs <- app.Event{Kind: app.EvTurnDone, Exchange: &app.Exchange{Answer: "Once upon", FullAnswer: "Once upon a time.", Interrupted: true}}
	evs <- app.Event{Kind: app.EvError, Err: errors.New("think: connection refused")}
	evs <- app.Event{Kind: app.EvEchoRejected}
	close(evs)
	var b bytes.Buffer
	Console(&b, evs, false)
	want := strings.Join([]string{
		"you: what time is it  [en · NEUTRAL · Speech]",
		"parley: It's 3:04 AM.",
		"  latency: endpoint 400ms · transcript 520ms · first token 530ms · first sentence 540ms · first audio 600ms",
		"parley: Once upon  [interrupted]",
		"  error: think: connection refused",
		""}, "\n")
	if b.String() != want {
		t.Errorf("console:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestChatTextOnly drives the text face end to end: typed lines go through the real brain
// (offline skills) and come back printed with the latency line; no devices are opened.
func TestChatTextOnly(t *testing.T) {
	cfg := config.Default()
	cfg.LLM.Backend = "skills"
	a, err := Build(context.Background(), cfg, Options{NoAudio: true, NoHistory: true, StorePath: filepath.Join(t.TempDir(), "x.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var out bytes.Buffer
	if err := ChatVoice(context.Background(), a, strings.NewReader("what time is it\nwhat is 6 times 7\n"), &out, false); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"you: what time is it", "parley: It's ", "you: what is 6 times 7", "42", "latency: endpoint 0s"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
