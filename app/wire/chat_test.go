package wire

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
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
	evs <- app.Event{Kind: app.EvError, Err: "think: connection refused"}
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
