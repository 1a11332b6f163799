package chattts

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/tts"
)

func withNeutral(streams []int, code int) func(map[string]any) {
	return func(m map[string]any) {
		m["dvae"] = map[string]any{"neutral_streams": streams, "neutral_code": code}
	}
}

// TestNeutralStreams: a model trained with neutral streams (config.json dvae.neutral_streams)
// gets the neutral code there in every generated frame and in every clone prompt; the other
// streams are still sampled.
func TestNeutralStreams(t *testing.T) {
	dir := tinyCopy(t, withNeutral([]int{1, 3}, 312))
	e, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}, MaxNewTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	Q := e.mc.GPT.NumVQ
	prompt := e.codePrompt(e.tok.Encode("hello world"), 5, true, nil)
	p := e.codeParams(tts.Request{Temperature: 0.9})
	p.MinNewTokens = 20
	res, err := e.decode(context.Background(), prompt, decodeOptions{mode: modeCode, sampler: NewSampler(p, NewRNG(3)), maxNew: 30, spk: e.stat.Sample(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Codes) < 20*Q {
		t.Fatalf("%d codes", len(res.Codes))
	}
	other := map[int32]bool{}
	for i, c := range res.Codes {
		switch q := i % Q; q {
		case 1, 3:
			if c != 312 {
				t.Fatalf("frame %d stream %d: code %d, want the neutral 312", i/Q, q, c)
			}
		default:
			other[c] = true
		}
	}
	if len(other) < 3 {
		t.Errorf("the sampled streams hold only %v", other)
	}

	// a clone prompt: the encoder's codes get the neutral streams
	enc, err := NewSampleEncoder(dir, gpu.Options{Provider: "cpu", IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	r := readMelRef(t)
	codes, err := enc.Encode(context.Background(), slices.Repeat(r.Mel.Audio, 20), 24000)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(codes); i += Q {
		if codes[i] != 312 || codes[i+2] != 312 {
			t.Fatalf("encoded frame %d: %v", i/Q, codes[i-1:i-1+Q])
		}
	}
	// and a sample stored before: prepareSample neutralizes a copy, the caller's codes stay
	stored := make([]int32, 8*Q)
	for i := range stored {
		stored[i] = int32(i % 600)
	}
	ps, err := e.prepareSample(&SpeakerSample{Text: "hello", Codes: stored})
	if err != nil {
		t.Fatal(err)
	}
	if ps.codes[1] != 312 || ps.codes[3] != 312 || ps.codes[0] != stored[0] || stored[1] == 312 {
		t.Errorf("prepared %v from %v", ps.codes[:Q], stored[:Q])
	}
}

// TestNeutralStreamsChecked: neutral streams outside the model or stream 0 are refused on load.
func TestNeutralStreamsChecked(t *testing.T) {
	for _, c := range []struct {
		streams []int
		code    int
		want    string
	}{
		{[]int{0}, 312, "neutral_streams holds 0"},
		{[]int{9}, 312, "neutral_streams holds 9"},
		{[]int{1}, 900, "neutral_code 900"},
	} {
		_, err := ReadModelConfig(tinyCopy(t, withNeutral(c.streams, c.code)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("streams %v code %d: %v (want %q)", c.streams, c.code, err, c.want)
		}
	}
}
