package chattts

import (
	"context"
	"strings"
	"testing"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/tts"
)

func withMinFramesPerToken(v any) func(map[string]any) {
	return func(m map[string]any) {
		m["code"].(map[string]any)["min_frames_per_token"] = v
	}
}

// TestSamplerHoldEOS: HoldEOS masks the end token for its steps as MinNewTokens does, the
// longer of the two applying.
func TestSamplerHoldEOS(t *testing.T) {
	logits := logitsFor(.2, .12, .6, .08) // EOS (2) the likeliest
	s := NewSampler(SampleParams{Greedy: true, EOS: 2, MinNewTokens: 1}, nil)
	s.HoldEOS(3)
	for step, want := range []int{0, 0, 0, 2} {
		if tok, _ := s.Sample(0, append([]float32(nil), logits...), nil, step); tok != want {
			t.Fatalf("step %d: picked %d, want %d", step, tok, want)
		}
	}
	s.HoldEOS(0)
	if tok, _ := s.Sample(0, append([]float32(nil), logits...), nil, 1); tok != 2 {
		t.Fatalf("after HoldEOS(0), step 1 (MinNewTokens 1): picked %d, want EOS", tok)
	}
}

// TestMinFramesPerToken: a model's code.min_frames_per_token holds the end token back for
// that many frames per token of the sentence (a clone prompt's text does not count), and a
// value outside 0..64 is refused on load.
func TestMinFramesPerToken(t *testing.T) {
	frames := func(dir string, sample *SpeakerSample) (int, int) {
		t.Helper()
		e, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}, MaxNewTokens: 600})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		req := tts.Request{Text: "hello there.", Seed: 5, HasSeed: true, Temperature: 0.3}
		var st tts.Stream
		if sample != nil {
			st, err = e.SynthesizeWithSample(context.Background(), req, sample)
		} else {
			st, err = e.Synthesize(context.Background(), req)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		buf, err := tts.ReadAll(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		ft, _ := e.frontText("hello there.")
		perFrame := e.mc.Audio.Hop * e.mc.Audio.MelFramesPerCode
		return len(buf.Data) / perFrame, len(e.tok.Encode(ft))
	}
	plain, tokens := frames(tinyCopy(t, nil), nil)
	// the tiny random model ends this sentence by itself after about 200 frames: a hold of
	// 60 frames per token is longer
	held, _ := frames(tinyCopy(t, withMinFramesPerToken(60.0)), nil)
	if held < 60*tokens-1 || held <= plain {
		t.Errorf("min 60 frames per token × %d tokens: %d frames (%d without)", tokens, held, plain)
	}
	// and after a clone prompt
	codes := make([]int32, 10*4)
	withSample, _ := frames(tinyCopy(t, withMinFramesPerToken(60.0)), &SpeakerSample{Text: "a sample", Codes: codes})
	if withSample < 60*tokens-1 {
		t.Errorf("with a clone prompt: %d frames, want at least %d", withSample, 60*tokens)
	}
	for _, v := range []any{-1.0, 65.0} {
		_, err := ReadModelConfig(tinyCopy(t, withMinFramesPerToken(v)))
		if err == nil || !strings.Contains(err.Error(), "code.min_frames_per_token") {
			t.Errorf("min_frames_per_token %v: %v", v, err)
		}
	}
	t.Logf("%d tokens: %d frames without, %d held, %d held after a clone prompt", tokens, plain, held, withSample)
}
