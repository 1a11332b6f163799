package app

import (
	"context"
	"strings"

	"github.com/parley-voice/parley/audio"
)

// This file holds what the assistant's turn loop and the realtime server's sessions
// (app/serve/realtime) both do with an answer: stream the brain through a chunker into
// sentences, follow a voice's rate, and tell loud speech from the VAD's hang-over for
// min-speech barge-in. Each loop keeps its own turn taking (see docs/DESIGN.md, "The
// realtime server and the turn loop").

// BrainFunc is a function that answers like a Brain (an announcement that says fixed text).
type BrainFunc func(ctx context.Context, in Transcript, history []Message, fn func(delta string) error) error

// Answer implements Brain.
func (f BrainFunc) Answer(ctx context.Context, in Transcript, history []Message, fn func(delta string) error) error {
	return f(ctx, in, history, fn)
}

// AnswerSink takes one answer as it streams. Delta, if set, gets each non-empty piece of text
// the brain writes, before it is cut into sentences; Sentence, if set, gets each non-blank
// sentence the chunker cuts from them (nil: the answer is not cut at all, as for an answer
// given as text). An error from either stops the brain and is the answer's error.
type AnswerSink struct {
	Delta    func(delta string) error
	Sentence func(sentence string) error
}

// StreamAnswer runs brain b's answer to in through chunker c into sink, the part of a turn
// both turn loops share. The brain is stopped at its next delta once ctx ends (its error is
// then ctx's), and the chunker's rest is flushed only when the brain finished without an
// error. It returns the brain's error as it is (ErrStopSpeaking stays findable).
func StreamAnswer(ctx context.Context, b Brain, in Transcript, history []Message, c Chunker, sink AnswerSink) error {
	sentences := func(ss []string) error {
		for _, s := range ss {
			if strings.TrimSpace(s) == "" {
				continue
			}
			if err := sink.Sentence(s); err != nil {
				return err
			}
		}
		return nil
	}
	err := b.Answer(ctx, in, history, func(d string) error {
		if d == "" {
			return ctx.Err()
		}
		if sink.Delta != nil {
			if err := sink.Delta(d); err != nil {
				return err
			}
		}
		if sink.Sentence != nil {
			if err := sentences(c.Push(d)); err != nil {
				return err
			}
		}
		return ctx.Err()
	})
	if err == nil && sink.Sentence != nil {
		err = sentences(c.Flush())
	}
	return err
}

// NewSimpleChunker returns the fallback sentence splitter (Parts.Chunker's default): it cuts
// after . ! ? followed by a space or a line break, and at once after their CJK forms.
func NewSimpleChunker() Chunker { return &simpleChunker{} }

// RateFollower converts a voice's chunks to one rate whatever rate each comes at (a voice may
// change rate between sentences), with a fresh resampler whenever the input rate changes. A
// chunk already at Rate is returned as it is (the same slice), not copied.
type RateFollower struct {
	Rate    int
	Quality audio.Quality // its zero value is audio.QualityHigh

	in int
	rs *audio.Resampler
}

// Process returns pcm, which comes at rate, at f.Rate.
func (f *RateFollower) Process(pcm []float32, rate int) ([]float32, error) {
	if rate != f.in {
		f.in, f.rs = rate, nil
		if rate != f.Rate {
			rs, err := audio.NewResampler(rate, f.Rate, 1, f.Quality)
			if err != nil {
				return nil, err
			}
			f.rs = rs
		}
	}
	if f.rs == nil {
		return pcm, nil
	}
	return f.rs.Process(nil, pcm), nil
}

// Flush returns what the resampler still holds of the input so far (nil when it holds
// nothing or none was needed), and starts it afresh.
func (f *RateFollower) Flush() []float32 {
	if f.rs == nil {
		return nil
	}
	return f.rs.Flush(nil)
}

// SpeechLevel follows one stretch of speech and tells its loud blocks, the speaker's words,
// from the quiet ones around them (the VAD's hang-over, breaths): a block is loud when its RMS
// is over a tenth of the loudest block of the stretch so far and over 1e-3 (−60 dBFS).
// BargeInMinSpeech counts only loud audio towards Options.BargeInMin, in the assistant and in
// the realtime server alike. The zero value starts a stretch.
type SpeechLevel struct{ peak float64 }

// Loud reports whether block is loud, taking it into the stretch.
func (l *SpeechLevel) Loud(block []float32) bool {
	rms := audio.RMS(block)
	l.peak = max(l.peak, rms)
	return rms > max(1e-3, l.peak*0.1)
}
