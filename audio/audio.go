// Package audio is Parley's sound plumbing: the Format and Buffer types, the Source and Sink
// interfaces that devices, files, synthetic signals and network streams implement, WAV input
// and output, band-limited resampling, a lock-free ring buffer, level metering, down-mixing,
// gain and clipping detection.
//
// Samples are float32 in [-1, 1], interleaved by channel. Counts called "samples" include every
// channel; counts called "frames" are one sample per channel.
package audio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Errors returned by the package. They are wrapped with detail; test with errors.Is.
var (
	ErrFormat      = errors.New("audio: bad format")         // invalid Format or malformed data
	ErrUnsupported = errors.New("audio: unsupported format") // valid but not handled (e.g. A-law WAV)
	ErrTruncated   = errors.New("audio: truncated data")     // data ended before its header said
	ErrTooLarge    = errors.New("audio: too large")          // over a configured limit
	// ErrRecovered marks a warning, not a failure: a damaged file was read as far as it goes
	// (a WAV cut short, or one whose recorder was stopped before it wrote the data size).
	ErrRecovered = errors.New("audio: damaged file read as far as possible")
	ErrClosed    = errors.New("audio: closed") // use after Close
)

// MaxChannels and MaxSampleRate bound what the package accepts from outside input.
const (
	MaxChannels   = 64
	MaxSampleRate = 1_536_000
)

// Format is the shape of interleaved float32 audio.
type Format struct {
	SampleRate int // frames per second
	Channels   int // samples per frame
}

// Mono16k is the format of speech flowing into VAD, wake word and ASR.
var Mono16k = Format{SampleRate: 16000, Channels: 1}

// Validate reports whether f is usable.
func (f Format) Validate() error {
	if f.SampleRate <= 0 || f.SampleRate > MaxSampleRate {
		return fmt.Errorf("%w: sample rate %d Hz (want 1..%d)", ErrFormat, f.SampleRate, MaxSampleRate)
	}
	if f.Channels <= 0 || f.Channels > MaxChannels {
		return fmt.Errorf("%w: %d channels (want 1..%d)", ErrFormat, f.Channels, MaxChannels)
	}
	return nil
}

func (f Format) String() string { return fmt.Sprintf("%d Hz × %d ch", f.SampleRate, f.Channels) }

// Duration of n samples (all channels counted) in this format.
func (f Format) Duration(samples int) time.Duration {
	if f.SampleRate <= 0 || f.Channels <= 0 {
		return 0
	}
	frames := samples / f.Channels
	return time.Duration(int64(frames) * int64(time.Second) / int64(f.SampleRate))
}

// Samples is the number of samples (all channels) in d, rounded down to whole frames.
func (f Format) Samples(d time.Duration) int {
	return int(int64(d)*int64(f.SampleRate)/int64(time.Second)) * f.Channels
}

// Buffer is a block of interleaved audio in memory.
type Buffer struct {
	Format
	Data []float32
}

// Frames is the number of frames in b.
func (b *Buffer) Frames() int {
	if b.Channels <= 0 {
		return 0
	}
	return len(b.Data) / b.Channels
}

// Duration is the length of b.
func (b *Buffer) Duration() time.Duration { return b.Format.Duration(len(b.Data)) }

// Channel returns a copy of channel c.
func (b *Buffer) Channel(c int) []float32 {
	n := b.Frames()
	out := make([]float32, n)
	for i := 0; i < n; i++ {
		out[i] = b.Data[i*b.Channels+c]
	}
	return out
}

// Source produces audio. Read fills p with up to len(p) samples and returns how many it wrote,
// always a whole number of frames; len(p) must hold at least one frame. At the end of the
// stream it returns io.EOF (possibly together with n > 0). Read blocks until at least one frame
// is available, the stream ends or ctx is done (then it returns ctx.Err()). Sources are used by
// one goroutine at a time.
type Source interface {
	Format() Format
	Read(ctx context.Context, p []float32) (int, error)
}

// Sink consumes audio. Write accepts whole frames and returns how many samples it took; it
// takes all of p unless it returns an error (ctx.Err() when ctx is done first).
type Sink interface {
	Format() Format
	Write(ctx context.Context, p []float32) (int, error)
}

// ReadAll reads src to the end into a Buffer. maxSamples > 0 bounds the result; a longer
// stream returns ErrTooLarge.
func ReadAll(ctx context.Context, src Source, maxSamples int) (*Buffer, error) {
	f := src.Format()
	if err := f.Validate(); err != nil {
		return nil, err
	}
	out := &Buffer{Format: f}
	chunk := 4096 * f.Channels
	for {
		if maxSamples > 0 && len(out.Data) >= maxSamples {
			// one more read to see whether the stream really goes on
			var probe [MaxChannels]float32
			n, err := src.Read(ctx, probe[:f.Channels])
			if n > 0 {
				return nil, fmt.Errorf("%w: more than %d samples (%v)", ErrTooLarge, maxSamples, f.Duration(maxSamples))
			}
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		want := chunk
		if maxSamples > 0 && maxSamples-len(out.Data) < want {
			want = (maxSamples - len(out.Data) + f.Channels - 1) / f.Channels * f.Channels
		}
		start := len(out.Data)
		out.Data = append(out.Data, make([]float32, want)...)
		n, err := src.Read(ctx, out.Data[start:])
		out.Data = out.Data[:start+n]
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Copy streams src into dst until src ends (returning nil) or an error occurs. It returns the
// number of samples copied. The formats must be equal; use Convert to adapt them.
func Copy(ctx context.Context, dst Sink, src Source) (int64, error) {
	if dst.Format() != src.Format() {
		return 0, fmt.Errorf("%w: copy from %v to %v", ErrFormat, src.Format(), dst.Format())
	}
	buf := make([]float32, 2048*src.Format().Channels)
	var total int64
	for {
		n, err := src.Read(ctx, buf)
		if n > 0 {
			m, werr := dst.Write(ctx, buf[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// frameLen is len(p) rounded down to whole frames, or an error when p holds no frame.
func frameLen(p []float32, channels int) (int, error) {
	n := len(p) / channels * channels
	if n == 0 {
		return 0, fmt.Errorf("%w: read buffer of %d samples holds no %d-channel frame", ErrFormat, len(p), channels)
	}
	return n, nil
}
