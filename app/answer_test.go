package app

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// words answers with each of its deltas in turn.
func words(deltas ...string) BrainFunc {
	return func(ctx context.Context, _ Transcript, _ []Message, fn func(string) error) error {
		for _, d := range deltas {
			if err := fn(d); err != nil {
				return err
			}
		}
		return nil
	}
}

func TestStreamAnswerCutsSentences(t *testing.T) {
	var deltas, sentences []string
	err := StreamAnswer(context.Background(), words("It is ", "", "noon. Have", " a nice ", "day.", " "), Transcript{}, nil, NewSimpleChunker(),
		AnswerSink{
			Delta:    func(d string) error { deltas = append(deltas, d); return nil },
			Sentence: func(s string) error { sentences = append(sentences, s); return nil },
		})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"It is ", "noon. Have", " a nice ", "day.", " "}; !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas %q, want %q (empty ones skipped)", deltas, want)
	}
	if want := []string{"It is noon.", "Have a nice day."}; !reflect.DeepEqual(sentences, want) {
		t.Errorf("sentences %q, want %q (the rest flushed at the end, blanks skipped)", sentences, want)
	}
}

func TestStreamAnswerWithoutSentencesDoesNotChunk(t *testing.T) {
	var got string
	err := StreamAnswer(context.Background(), words("One. ", "Two."), Transcript{}, nil, nil,
		AnswerSink{Delta: func(d string) error { got += d; return nil }})
	if err != nil || got != "One. Two." {
		t.Errorf("text %q, err %v", got, err)
	}
}

func TestStreamAnswerStopsTheBrain(t *testing.T) {
	// the sink's error ends the brain and is the answer's; nothing is flushed after it
	boom := errors.New("voice failed")
	var sentences []string
	calls := 0
	err := StreamAnswer(context.Background(), words("A. ", "B. ", "C. ", "rest"), Transcript{}, nil, NewSimpleChunker(),
		AnswerSink{Sentence: func(s string) error {
			calls++
			sentences = append(sentences, s)
			if calls == 2 {
				return boom
			}
			return nil
		}})
	if !errors.Is(err, boom) || !reflect.DeepEqual(sentences, []string{"A.", "B."}) {
		t.Errorf("err %v, sentences %q", err, sentences)
	}

	// a cancelled context stops the brain at its next delta, even one that ignores ctx
	ctx, cancel := context.WithCancel(context.Background())
	var deltas []string
	err = StreamAnswer(ctx, words("a ", "b ", "c ", "d"), Transcript{}, nil, NewSimpleChunker(),
		AnswerSink{Delta: func(d string) error {
			deltas = append(deltas, d)
			if d == "b " {
				cancel()
			}
			return nil
		}})
	if !errors.Is(err, context.Canceled) || len(deltas) != 2 {
		t.Errorf("err %v, deltas %q", err, deltas)
	}

	// the brain's own error comes back as it is, and the chunker's rest is not flushed
	stop := StreamAnswer(context.Background(), BrainFunc(func(_ context.Context, _ Transcript, _ []Message, fn func(string) error) error {
		fn("Half a sentence")
		return ErrStopSpeaking
	}), Transcript{}, nil, NewSimpleChunker(), AnswerSink{Sentence: func(s string) error {
		t.Errorf("flushed %q after the brain failed", s)
		return nil
	}})
	if !errors.Is(stop, ErrStopSpeaking) {
		t.Errorf("brain error %v", stop)
	}
}

func TestRateFollower(t *testing.T) {
	f := RateFollower{Rate: 24000}
	in := make([]float32, 2400)
	for i := range in {
		in[i] = float32(i%50) / 50
	}
	out, err := f.Process(in, 24000)
	if err != nil || &out[0] != &in[0] {
		t.Fatalf("a chunk at the rate is passed as it is: err %v", err)
	}
	if f.Flush() != nil {
		t.Error("nothing to flush without a resampler")
	}
	total := 0
	for range 10 {
		out, err = f.Process(in[:2205], 22050)
		if err != nil {
			t.Fatal(err)
		}
		total += len(out)
	}
	total += len(f.Flush())
	if total != 24000 {
		t.Errorf("1 s at 22.05 kHz became %d samples at 24 kHz", total)
	}
	// the rate changes back: the chunk passes as it is again
	if out, _ = f.Process(in, 24000); len(out) != len(in) {
		t.Errorf("%d samples after the rate changed back", len(out))
	}
	if _, err := (&RateFollower{Rate: 24000}).Process(in, -1); err == nil {
		t.Error("a bad rate was accepted")
	}
}

func TestSpeechLevel(t *testing.T) {
	block := func(v float32) []float32 {
		b := make([]float32, 160)
		for i := range b {
			b[i] = v * float32(1-2*(i%2))
		}
		return b
	}
	var l SpeechLevel
	for _, c := range []struct {
		v    float32
		loud bool
	}{
		{0.0005, false}, // under −60 dBFS
		{0.2, true},     // speech
		{0.05, true},    // softer, still over a tenth of the peak
		{0.01, false},   // the hang-over: under a tenth of the peak
		{0.3, true},
		{0.025, false}, // a tenth of the new peak is 0.03
	} {
		if got := l.Loud(block(c.v)); got != c.loud {
			t.Errorf("block at %v: loud %v, want %v", c.v, got, c.loud)
		}
	}
	var fresh SpeechLevel
	if !fresh.Loud(block(0.01)) {
		t.Error("a new stretch starts afresh: 0.01 is loud on its own")
	}
}
