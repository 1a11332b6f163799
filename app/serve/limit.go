package serve

import (
	"context"
	"sync/atomic"
	"time"
)

// Limiter bounds how many jobs run on one engine at once and how many wait for it. A job
// that finds the queue full is refused at once (ErrBusy) rather than held: the caller
// answers 429 with Retry-After, so memory and waiting time stay bounded.
type Limiter struct {
	name     string
	slots    chan struct{}
	queue    chan struct{} // tickets: running + waiting
	waiting  atomic.Int64
	running  atomic.Int64
	rejected atomic.Int64
	// avg is an exponentially weighted mean job time in nanoseconds, for Retry-After.
	avg atomic.Int64
}

// NewLimiter returns a limiter with workers slots and room for queue waiting jobs.
func NewLimiter(name string, workers, queue int) *Limiter {
	if workers < 1 {
		workers = 1
	}
	if queue < 0 {
		queue = 0
	}
	return &Limiter{name: name, slots: make(chan struct{}, workers), queue: make(chan struct{}, workers+queue)}
}

// Ticket is a job admitted to a Limiter's queue.
type Ticket struct {
	l       *Limiter
	running bool
	start   time.Time
	done    bool
}

// Admit takes a place in the queue, or fails at once with ErrBusy when it is full. The
// ticket must be ended with Done. Admitting before reading a request body bounds the number
// of bodies held in memory as well as the jobs waiting.
func (l *Limiter) Admit() (*Ticket, error) {
	select {
	case l.queue <- struct{}{}:
	default:
		l.rejected.Add(1)
		return nil, ErrBusy
	}
	l.waiting.Add(1)
	return &Ticket{l: l}, nil
}

// Wait blocks until a slot is free (or ctx ends).
func (t *Ticket) Wait(ctx context.Context) error {
	if t.running || t.done {
		return nil
	}
	select {
	case t.l.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	t.l.waiting.Add(-1)
	t.l.running.Add(1)
	t.running, t.start = true, time.Now()
	return nil
}

// Done frees the ticket's place (and slot). It is safe to call more than once.
func (t *Ticket) Done() {
	if t.done {
		return
	}
	t.done = true
	l := t.l
	if t.running {
		d := int64(time.Since(t.start))
		old := l.avg.Load()
		if old == 0 {
			l.avg.Store(d)
		} else {
			l.avg.Store(old + (d-old)/8)
		}
		l.running.Add(-1)
		<-l.slots
	} else {
		l.waiting.Add(-1)
	}
	<-l.queue
}

// Acquire is Admit then Wait. On success release must be called once.
func (l *Limiter) Acquire(ctx context.Context) (release func(), err error) {
	t, err := l.Admit()
	if err != nil {
		return nil, err
	}
	if err := t.Wait(ctx); err != nil {
		t.Done()
		return nil, err
	}
	return t.Done, nil
}

// RetryAfter estimates when a slot frees up: the queue's length times the mean job time
// divided by the workers, at least one second.
func (l *Limiter) RetryAfter() time.Duration {
	d := time.Duration(l.avg.Load()) * time.Duration(cap(l.queue)) / time.Duration(cap(l.slots))
	if d < time.Second {
		d = time.Second
	}
	if d > time.Minute {
		d = time.Minute
	}
	return d
}

// Waiting is the number of jobs queued now.
func (l *Limiter) Waiting() int64 { return l.waiting.Load() }

// Running is the number of jobs running now.
func (l *Limiter) Running() int64 { return l.running.Load() }

// Rejected counts jobs refused because the queue was full.
func (l *Limiter) Rejected() int64 { return l.rejected.Load() }

// Workers is the number of slots.
func (l *Limiter) Workers() int { return cap(l.slots) }

// QueueCap is the number of jobs that may wait.
func (l *Limiter) QueueCap() int { return cap(l.queue) - cap(l.slots) }
