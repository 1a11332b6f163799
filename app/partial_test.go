package app

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// growingEars says how much audio it was given, so partial and final transcripts differ.
type growingEars struct {
	mu    sync.Mutex
	calls int
}

func (g *growingEars) Transcribe(_ context.Context, pcm []float32, _ TranscribeOptions) (Transcript, error) {
	g.mu.Lock()
	g.calls++
	g.mu.Unlock()
	return Transcript{Text: fmt.Sprintf("heard %d ms", len(pcm)*1000/SampleRate)}, nil
}

// TestPartialTranscripts: with Options.Partials the utterance being held is transcribed as it
// grows (EvPartial, longer each time), before the turn's final transcript; none come at rest.
func TestPartialTranscripts(t *testing.T) {
	ge := &growingEars{}
	r := newRig(t, Options{Partials: 100 * time.Millisecond}, fixed("Yes."), func(p *Parts) { p.Transcriber = ge })
	time.Sleep(300 * time.Millisecond)
	r.drainAll()
	if n := r.count(EvPartial); n != 0 {
		t.Fatalf("%d partial transcripts with nothing being said", n)
	}
	if err := r.a.StartListening(); err != nil {
		t.Fatal(err)
	}
	r.room.say(speech(1500*time.Millisecond, 0.05, 3))
	var texts []string
	for len(texts) < 3 {
		e := r.wait(t, "a partial transcript", func(e Event) bool { return e.Kind == EvPartial })
		texts = append(texts, e.Text)
	}
	if texts[0] == texts[2] {
		t.Errorf("the partial transcript does not grow: %q", texts)
	}
	if err := r.a.StopListening(); err != nil {
		t.Fatal(err)
	}
	ex := r.turnDone(t)
	if ex.Transcript.Text == "" {
		t.Fatal("no final transcript")
	}
	r.drainAll()
	time.Sleep(300 * time.Millisecond)
	n := r.count(EvPartial)
	r.drainAll()
	if r.count(EvPartial) != n {
		t.Error("partial transcripts after the utterance ended")
	}
}
