package audio

import "sync/atomic"

// Ring is a lock-free single-producer single-consumer ring buffer of float32 samples. One
// goroutine (or a real-time callback) may Write while another Reads; neither allocates, locks
// or blocks. Capacity is rounded up to a power of two.
type Ring struct {
	_    [64]byte
	w    atomic.Uint64 // total samples written (producer owns)
	_    [56]byte
	r    atomic.Uint64 // total samples read (consumer owns)
	_    [56]byte
	buf  []float32
	mask uint64
}

// NewRing makes a ring that holds at least capacity samples.
func NewRing(capacity int) *Ring {
	n := 1
	for n < capacity {
		n <<= 1
	}
	return &Ring{buf: make([]float32, n), mask: uint64(n - 1)}
}

// Cap is the number of samples the ring holds.
func (q *Ring) Cap() int { return len(q.buf) }

// Len is the number of samples waiting to be read.
func (q *Ring) Len() int { return int(q.w.Load() - q.r.Load()) }

// Free is the number of samples that can be written now.
func (q *Ring) Free() int { return len(q.buf) - q.Len() }

// Write copies as much of p as fits and returns the count (producer side).
func (q *Ring) Write(p []float32) int {
	w := q.w.Load()
	free := uint64(len(q.buf)) - (w - q.r.Load())
	n := uint64(len(p))
	if n > free {
		n = free
	}
	if n == 0 {
		return 0
	}
	i := w & q.mask
	c := copy(q.buf[i:], p[:n])
	copy(q.buf, p[c:n])
	q.w.Store(w + n)
	return int(n)
}

// Read copies up to len(p) waiting samples into p and returns the count (consumer side).
func (q *Ring) Read(p []float32) int {
	r := q.r.Load()
	avail := q.w.Load() - r
	n := uint64(len(p))
	if n > avail {
		n = avail
	}
	if n == 0 {
		return 0
	}
	i := r & q.mask
	c := copy(p[:n], q.buf[i:])
	copy(p[c:n], q.buf)
	q.r.Store(r + n)
	return int(n)
}

// Discard drops up to n waiting samples (consumer side) and returns how many it dropped.
func (q *Ring) Discard(n int) int {
	r := q.r.Load()
	avail := q.w.Load() - r
	if uint64(n) > avail {
		n = int(avail)
	}
	q.r.Store(r + uint64(n))
	return n
}

// Written is the total number of samples ever written (a position clock for the producer).
func (q *Ring) Written() uint64 { return q.w.Load() }

// Consumed is the total number of samples ever read or discarded.
func (q *Ring) Consumed() uint64 { return q.r.Load() }
