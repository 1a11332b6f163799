package vad

import (
	"context"
	"sync"

	"github.com/parley-voice/parley/gpu"
)

// ModelPool shares a few Models among many streams. An ONNX Runtime session of Silero VAD
// costs about 12 MB, which the C allocator keeps after the session is closed, so a server
// giving each of 32 connections its own Model grows by ~400 MB for good. A Detector over a
// pool (NewPooled) carries its stream's recurrent state and context itself (a few hundred
// floats), borrows a Model for each Accept and gives it back: Models are opened as streams
// need them concurrently, at most Size.
type ModelPool struct {
	path string
	rate int
	opts gpu.Options
	size int

	mu     sync.Mutex
	opened int
	closed bool
	free   chan *Model
}

// NewPool returns a pool of at most size Models of the model at path (DefaultModel() if
// empty) at rate; the first Model is opened now, so a bad model fails here.
func NewPool(path string, rate int, opts gpu.Options, size int) (*ModelPool, error) {
	size = max(size, 1)
	m, err := OpenModel(path, rate, opts)
	if err != nil {
		return nil, err
	}
	p := &ModelPool{path: path, rate: rate, opts: opts, size: size, opened: 1, free: make(chan *Model, size)}
	p.free <- m
	return p, nil
}

// Rate is the sample rate the pool's Models run at.
func (p *ModelPool) Rate() int { return p.rate }

// Open is the number of Models opened so far.
func (p *ModelPool) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opened
}

func (p *ModelPool) get(ctx context.Context) (*Model, error) {
	select {
	case m := <-p.free:
		return m, nil
	default:
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if p.opened < p.size {
		p.opened++
		p.mu.Unlock()
		m, err := OpenModel(p.path, p.rate, p.opts)
		if err != nil {
			p.mu.Lock()
			p.opened--
			p.mu.Unlock()
			return nil, err
		}
		return m, nil
	}
	p.mu.Unlock()
	select {
	case m := <-p.free:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *ModelPool) put(m *Model) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		m.Close()
		return
	}
	p.free <- m
}

// Close closes the idle Models; Models in use close when given back.
func (p *ModelPool) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	for {
		select {
		case m := <-p.free:
			m.Close()
		default:
			return nil
		}
	}
}

// streamState is what a Model carries from window to window for one stream.
type streamState struct {
	state []float32 // (2, 1, 128)
	ctx   []float32 // the last ctxLen samples
}

func (m *Model) saveStream(s *streamState) {
	s.state = append(s.state[:0], m.state.GetData()...)
	s.ctx = append(s.ctx[:0], m.input.GetData()[:m.ctxLen]...)
}

func (m *Model) loadStream(s *streamState) {
	if len(s.state) == 0 {
		m.Reset()
		return
	}
	copy(m.state.GetData(), s.state)
	copy(m.input.GetData()[:m.ctxLen], s.ctx)
}

// NewPooled returns a Detector whose windows run on Models borrowed from pool.
func NewPooled(cfg Config, pool *ModelPool) (*Detector, error) {
	cfg.SampleRate = pool.rate
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return newDetectorWin(cfg, nil, pool, Window(pool.rate)), nil
}
