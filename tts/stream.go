package tts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/parley-voice/parley/audio"
)

// Stream delivers synthesized audio chunk by chunk.
type Stream interface {
	// Next returns the next chunk, io.EOF after the last one, or the error that stopped
	// synthesis (ctx.Err() when cancelled).
	Next(ctx context.Context) (Chunk, error)
	// Warnings lists controls that were dropped or ignored (complete once Next returned io.EOF).
	Warnings() []string
	// Close stops synthesis and releases the stream; it is safe to call more than once.
	Close() error
}

// Producer synthesizes into emit until done; emit returns an error when the consumer has gone
// (the producer must then return promptly). Engines write one Producer per request.
type Producer func(ctx context.Context, emit func(Chunk) error) error

type pipeStream struct {
	ch     chan Chunk
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done closes
	mu     sync.Mutex
	warn   []string
	once   sync.Once
}

// NewStream runs p on its own goroutine and returns its chunks as a Stream. The channel holds
// one chunk, so a slow consumer holds the producer back (at most one sentence ahead).
// warnings are reported by the stream's Warnings.
func NewStream(ctx context.Context, warnings []string, p Producer) Stream {
	return NewStreamWarn(ctx, warnings, func(ctx context.Context, emit func(Chunk) error, _ func(string)) error {
		return p(ctx, emit)
	})
}

// NewStreamWarn is NewStream for producers that find more warnings while they work: warn adds
// one (they are all visible through Warnings once Next has returned io.EOF).
func NewStreamWarn(ctx context.Context, warnings []string, p func(ctx context.Context, emit func(Chunk) error, warn func(string)) error) Stream {
	ctx, cancel := context.WithCancel(ctx)
	s := &pipeStream{ch: make(chan Chunk, 1), cancel: cancel, done: make(chan struct{}), warn: warnings}
	go func() {
		defer close(s.done)
		defer close(s.ch)
		err := p(ctx, func(c Chunk) error {
			select {
			case s.ch <- c:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, s.addWarning)
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		s.err = err
	}()
	return s
}

func (s *pipeStream) addWarning(w string) {
	s.mu.Lock()
	s.warn = append(s.warn, w)
	s.mu.Unlock()
}

func (s *pipeStream) Next(ctx context.Context) (Chunk, error) {
	if err := ctx.Err(); err != nil {
		s.Close()
		return Chunk{}, err
	}
	select {
	case c, ok := <-s.ch:
		if ok {
			return c, nil
		}
		<-s.done
		if s.err != nil {
			return Chunk{}, s.err
		}
		return Chunk{}, io.EOF
	case <-ctx.Done():
		s.Close()
		return Chunk{}, ctx.Err()
	}
}

func (s *pipeStream) Warnings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.warn...)
}

func (s *pipeStream) Close() error {
	s.once.Do(func() {
		s.cancel()
		for range s.ch { // drain so the producer can finish
		}
		<-s.done
	})
	return nil
}

// Each calls f with every remaining chunk of s, in order. It returns nil once s has ended
// (io.EOF), the error that stopped s, or the first error of f (f is not called again).
func Each(ctx context.Context, s Stream, f func(Chunk) error) error {
	for {
		c, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(c); err != nil {
			return err
		}
	}
}

// ReadAll collects a whole stream into one mono buffer.
func ReadAll(ctx context.Context, s Stream) (*audio.Buffer, error) {
	defer s.Close()
	out := &audio.Buffer{Format: audio.Format{Channels: 1}}
	err := Each(ctx, s, func(c Chunk) error {
		if out.SampleRate == 0 {
			out.SampleRate = c.SampleRate
		} else if c.SampleRate != out.SampleRate {
			return fmt.Errorf("tts: stream changed sample rate from %d to %d", out.SampleRate, c.SampleRate)
		}
		out.Data = append(out.Data, c.Samples...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out.SampleRate == 0 {
		return nil, fmt.Errorf("tts: stream produced no audio")
	}
	return out, nil
}

// resampled converts every chunk of a stream to one rate.
type resampled struct {
	Stream
	rate int
	rs   *audio.Resampler
	in   int
	done bool
}

// Resampled returns s with its chunks converted to rate (Hz). It is s itself when rate is 0.
func Resampled(s Stream, rate int) Stream {
	if rate <= 0 {
		return s
	}
	return &resampled{Stream: s, rate: rate}
}

func (r *resampled) Next(ctx context.Context) (Chunk, error) {
	if r.done {
		return Chunk{}, io.EOF
	}
	c, err := r.Stream.Next(ctx)
	if errors.Is(err, io.EOF) && r.rs != nil {
		r.done = true
		tail := r.rs.Flush(nil)
		if len(tail) > 0 {
			return Chunk{Samples: tail, SampleRate: r.rate, Sentence: -1, Last: true}, nil
		}
		return Chunk{}, io.EOF
	}
	if err != nil || c.SampleRate == r.rate {
		return c, err
	}
	if r.rs == nil || r.in != c.SampleRate {
		rs, err := audio.NewResampler(c.SampleRate, r.rate, 1, audio.QualityLow)
		if err != nil {
			return Chunk{}, fmt.Errorf("tts: resample %d → %d Hz: %w", c.SampleRate, r.rate, err)
		}
		r.rs, r.in = rs, c.SampleRate
	}
	c.Samples = r.rs.Process(nil, c.Samples)
	c.SampleRate = r.rate
	return c, nil
}
