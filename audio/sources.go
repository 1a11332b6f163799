package audio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
)

// BufferSource reads a Buffer from the start. It implements Source.
type BufferSource struct {
	b   *Buffer
	pos int
}

// NewBufferSource returns a Source over b (not copied).
func NewBufferSource(b *Buffer) *BufferSource { return &BufferSource{b: b} }

// Format implements Source.
func (s *BufferSource) Format() Format { return s.b.Format }

// Read implements Source.
func (s *BufferSource) Read(ctx context.Context, p []float32) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := frameLen(p, s.b.Channels)
	if err != nil {
		return 0, err
	}
	if s.pos >= len(s.b.Data) {
		return 0, io.EOF
	}
	n = copy(p[:n], s.b.Data[s.pos:])
	n = n / s.b.Channels * s.b.Channels
	s.pos += n
	return n, nil
}

// BufferSink collects everything written into a Buffer. It implements Sink.
type BufferSink struct {
	Buffer
	Max int // if > 0, writes past Max samples fail with ErrTooLarge
}

// NewBufferSink returns an empty sink of format f.
func NewBufferSink(f Format) *BufferSink { return &BufferSink{Buffer: Buffer{Format: f}} }

// Format implements Sink.
func (s *BufferSink) Format() Format { return s.Buffer.Format }

// Write implements Sink.
func (s *BufferSink) Write(ctx context.Context, p []float32) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.Max > 0 && len(s.Data)+len(p) > s.Max {
		return 0, fmt.Errorf("%w: sink holds at most %d samples", ErrTooLarge, s.Max)
	}
	s.Data = append(s.Data, p...)
	return len(p), nil
}

// PCMReader decodes raw little-endian PCM (no header) from an io.Reader: a network stream, a
// pipe, a file of raw samples. It implements Source. A trailing partial frame at the end of
// the input is dropped.
type PCMReader struct {
	r   io.Reader
	f   Format
	sf  SampleFormat
	buf []byte
	n   int // bytes held in buf
	err error
}

// NewPCMReader returns a Source that decodes r as format f stored as sf.
func NewPCMReader(r io.Reader, f Format, sf SampleFormat) (*PCMReader, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if sf.Size() == 0 {
		return nil, fmt.Errorf("%w: sample format %v", ErrUnsupported, sf)
	}
	block := f.Channels * sf.Size()
	return &PCMReader{r: r, f: f, sf: sf, buf: make([]byte, (16<<10)/block*block+block)}, nil
}

// Format implements Source.
func (s *PCMReader) Format() Format { return s.f }

// Read implements Source. It returns as soon as at least one whole frame is available.
func (s *PCMReader) Read(ctx context.Context, p []float32) (int, error) {
	n, err := frameLen(p, s.f.Channels)
	if err != nil {
		return 0, err
	}
	block := s.f.Channels * s.sf.Size()
	want := min(n/s.f.Channels*block, len(s.buf)/block*block)
	for s.n < block {
		if s.err != nil {
			return 0, s.err
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		m, rerr := s.r.Read(s.buf[s.n:want])
		s.n += m
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				s.err = io.EOF
			} else {
				s.err = fmt.Errorf("audio: reading PCM stream: %w", rerr)
			}
		}
	}
	whole := s.n / block * block
	got := DecodePCM(p, s.buf[:whole], s.sf)
	s.n = copy(s.buf, s.buf[whole:s.n])
	return got, nil
}

// Generator is a synthetic Source: silence, a sine, white noise or a sweep, of a fixed
// length (or endless when Frames < 0).
type Generator struct {
	f      Format
	frames int64
	pos    int64
	fn     func(t int64) float32
}

// Format implements Source.
func (g *Generator) Format() Format { return g.f }

// Read implements Source.
func (g *Generator) Read(ctx context.Context, p []float32) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := frameLen(p, g.f.Channels)
	if err != nil {
		return 0, err
	}
	frames := int64(n / g.f.Channels)
	if g.frames >= 0 && g.pos+frames > g.frames {
		frames = g.frames - g.pos
	}
	if frames <= 0 {
		return 0, io.EOF
	}
	for i := int64(0); i < frames; i++ {
		v := g.fn(g.pos + i)
		for c := 0; c < g.f.Channels; c++ {
			p[int(i)*g.f.Channels+c] = v
		}
	}
	g.pos += frames
	return int(frames) * g.f.Channels, nil
}

// Silence returns frames frames of silence (endless when frames < 0).
func Silence(f Format, frames int64) *Generator {
	return &Generator{f: f, frames: frames, fn: func(int64) float32 { return 0 }}
}

// Sine returns a sine of freq Hz and amplitude amp (same on every channel).
func Sine(f Format, frames int64, freq, amp float64) *Generator {
	w := 2 * math.Pi * freq / float64(f.SampleRate)
	return &Generator{f: f, frames: frames, fn: func(t int64) float32 { return float32(amp * math.Sin(w*float64(t))) }}
}

// Noise returns uniform white noise of RMS amplitude rms from a fixed seed.
func Noise(f Format, frames int64, rms float64, seed uint64) *Generator {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	a := rms * math.Sqrt(3)
	return &Generator{f: f, frames: frames, fn: func(int64) float32 { return float32(a * (2*rng.Float64() - 1)) }}
}

// Sweep returns an exponential sine sweep from f0 to f1 Hz over frames frames.
func Sweep(f Format, frames int64, f0, f1, amp float64) *Generator {
	T := float64(frames) / float64(f.SampleRate)
	k := math.Log(f1 / f0)
	return &Generator{f: f, frames: frames, fn: func(t int64) float32 {
		x := float64(t) / float64(f.SampleRate)
		return float32(amp * math.Sin(2*math.Pi*f0*T/k*(math.Exp(x/T*k)-1)))
	}}
}

// Converter adapts a Source to another format: it down-mixes (average) or up-mixes (copy of
// mono) channels and resamples. Create it with Convert.
type Converter struct {
	src    Source
	to     Format
	rs     *Resampler
	in     []float32
	mixed  []float32
	out    []float32 // converted samples not yet returned
	off    int
	eof    bool
	srcErr error
}

// Convert returns src in format to. Channel counts other than N→N, N→1 and 1→N are refused.
func Convert(src Source, to Format, q Quality) (Source, error) {
	from := src.Format()
	if err := from.Validate(); err != nil {
		return nil, err
	}
	if err := to.Validate(); err != nil {
		return nil, err
	}
	if from == to {
		return src, nil
	}
	if from.Channels != to.Channels && from.Channels != 1 && to.Channels != 1 {
		return nil, fmt.Errorf("%w: cannot map %d channels to %d", ErrUnsupported, from.Channels, to.Channels)
	}
	// Read about 4096 frames of output at a time: when upsampling, fewer input frames, so
	// that a source at a very low rate (a WAV header may claim 1 Hz) cannot make one Read
	// produce hundreds of megabytes.
	frames := 4096
	if from.SampleRate < to.SampleRate {
		frames = max(1, int(int64(frames)*int64(from.SampleRate)/int64(to.SampleRate)))
	}
	c := &Converter{src: src, to: to, in: make([]float32, frames*from.Channels)}
	if from.SampleRate != to.SampleRate {
		var err error
		if c.rs, err = NewResampler(from.SampleRate, to.SampleRate, to.Channels, q); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Format implements Source.
func (c *Converter) Format() Format { return c.to }

// Read implements Source.
func (c *Converter) Read(ctx context.Context, p []float32) (int, error) {
	n, err := frameLen(p, c.to.Channels)
	if err != nil {
		return 0, err
	}
	for c.off >= len(c.out) {
		if c.eof {
			if c.srcErr != nil {
				return 0, c.srcErr
			}
			return 0, io.EOF
		}
		c.out, c.off = c.out[:0], 0
		m, rerr := c.src.Read(ctx, c.in)
		from := c.src.Format()
		c.mixed = c.mixed[:0]
		switch {
		case from.Channels == c.to.Channels:
			c.mixed = append(c.mixed, c.in[:m]...)
		case c.to.Channels == 1:
			c.mixed = DownMix(c.mixed, c.in[:m], from.Channels)
		default:
			c.mixed = UpMix(c.mixed, c.in[:m], c.to.Channels)
		}
		if c.rs != nil {
			c.out = c.rs.Process(c.out, c.mixed)
		} else {
			c.out = append(c.out, c.mixed...)
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				if errors.Is(rerr, context.Canceled) || errors.Is(rerr, context.DeadlineExceeded) {
					return 0, rerr // transient for this call; the source decides whether it ends
				}
				c.srcErr = rerr
			}
			c.eof = true
			if c.rs != nil {
				c.out = c.rs.Flush(c.out)
			}
		}
	}
	m := copy(p[:n], c.out[c.off:])
	c.off += m
	return m, nil
}

// Pipe is an in-memory audio stream: one goroutine Writes (e.g. from a network connection),
// another Reads. Write blocks while more than Max samples wait. It implements Source and Sink.
type Pipe struct {
	f      Format
	max    int
	mu     sync.Mutex
	q      []float32
	closed bool
	err    error
	data   chan struct{} // signalled when samples arrive or the pipe closes
	space  chan struct{} // signalled when samples are taken or the pipe closes
}

// NewPipe returns a pipe of format f that buffers at most max samples (max ≤ 0: one second).
func NewPipe(f Format, max int) *Pipe {
	if max <= 0 {
		max = f.SampleRate * f.Channels
	}
	return &Pipe{f: f, max: max, data: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

// Format implements Source and Sink.
func (p *Pipe) Format() Format { return p.f }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Write implements Sink.
func (p *Pipe) Write(ctx context.Context, s []float32) (int, error) {
	if len(s)%p.f.Channels != 0 {
		return 0, fmt.Errorf("%w: %d samples is not a whole number of %d-channel frames", ErrFormat, len(s), p.f.Channels)
	}
	done := 0
	for done < len(s) {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return done, ErrClosed
		}
		room := p.max - len(p.q)
		room = room / p.f.Channels * p.f.Channels
		if room > 0 {
			m := min(room, len(s)-done)
			p.q = append(p.q, s[done:done+m]...)
			done += m
			p.mu.Unlock()
			signal(p.data)
			continue
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return done, ctx.Err()
		case <-p.space:
		}
	}
	return done, nil
}

// CloseWithError ends the stream: readers get the waiting samples, then err (io.EOF if nil).
func (p *Pipe) CloseWithError(err error) {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		if err == nil {
			err = io.EOF
		}
		p.err = err
	}
	p.mu.Unlock()
	signal(p.data)
	signal(p.space)
}

// Close ends the stream normally.
func (p *Pipe) Close() error { p.CloseWithError(nil); return nil }

// Read implements Source.
func (p *Pipe) Read(ctx context.Context, dst []float32) (int, error) {
	n, err := frameLen(dst, p.f.Channels)
	if err != nil {
		return 0, err
	}
	for {
		p.mu.Lock()
		if len(p.q) > 0 {
			m := copy(dst[:n], p.q)
			p.q = p.q[:copy(p.q, p.q[m:])]
			p.mu.Unlock()
			signal(p.space)
			return m, nil
		}
		if p.closed {
			p.mu.Unlock()
			return 0, p.err
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-p.data:
		}
	}
}

// LimitSource reads at most n values (interleaved samples) from src, then reports io.EOF:
// io.LimitReader for audio, e.g. a fixed stretch of a live capture.
func LimitSource(src Source, n int) Source { return &limitSource{src, n} }

type limitSource struct {
	src Source
	n   int
}

func (l *limitSource) Format() Format { return l.src.Format() }

func (l *limitSource) Read(ctx context.Context, p []float32) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), l.n)]
	n, err := l.src.Read(ctx, p)
	l.n -= n
	return n, err
}
