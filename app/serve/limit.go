package serve

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter admits jobs to one engine by the work they bring, not by their number. Each job
// states its cost (seconds of audio for the recogniser, characters for a voice); the limiter
// learns how long a unit of cost takes from the jobs it ran, and admits a job while the work
// queued ahead of it would keep it waiting less than MaxWait. Past that, or past MaxQueued
// waiting jobs (which bounds the memory they hold), a job is refused at once (ErrBusy), and
// RetryAfter says how long the work ahead of it takes. A few workers run;
// waiting jobs start in arrival order. Jobs that can run together (Ticket.Batch) are taken
// as one batch when a worker frees up.
type Limiter struct {
	name      string
	workers   int
	maxWait   time.Duration
	maxQueued int
	maxBatch  int
	prior     float64          // seconds of work per cost unit until jobs have been measured
	now       func() time.Time // the clock (tests move a fake one)

	mu      sync.Mutex
	queue   []*Ticket // waiting, in arrival order
	running []*Ticket
	hist    [32]costSample // the last jobs run: their cost and time
	histN   int
	histI   int

	draining bool // Drain was called: nothing more is admitted

	rejected atomic.Int64
	waitingN atomic.Int64
	runningN atomic.Int64
}

type costSample struct {
	cost    float64
	elapsed time.Duration
}

// LimiterConfig configures a Limiter.
type LimiterConfig struct {
	Workers   int           // jobs running at once (default 1)
	MaxWait   time.Duration // admit while the estimated wait is under this (default 60 s)
	MaxQueued int           // jobs waiting at most (default 32 per worker)
	MaxBatch  int           // jobs in one batch (default 1: no batching)
	// Prior is the seconds of work per unit of cost assumed until jobs have been timed.
	Prior float64
}

// NewLimiter returns a limiter for the engine called name.
func NewLimiter(name string, c LimiterConfig) *Limiter {
	if c.Workers < 1 {
		c.Workers = 1
	}
	if c.MaxWait <= 0 {
		c.MaxWait = time.Minute
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = 32 * c.Workers
	}
	if c.MaxBatch < 1 {
		c.MaxBatch = 1
	}
	if c.Prior <= 0 {
		c.Prior = 0.05
	}
	return &Limiter{name: name, workers: c.Workers, maxWait: c.MaxWait, maxQueued: c.MaxQueued, maxBatch: c.MaxBatch, prior: c.Prior, now: time.Now}
}

// Ticket is a job admitted to a Limiter.
type Ticket struct {
	l     *Limiter
	cost  float64
	state ticketState
	start time.Time
	ready chan struct{} // closed when the job may run (or was taken into a batch, or refused)
	err   error         // why a waiting job was refused (ErrShuttingDown), else nil

	// Batch, when set before Wait, lets the job join others with the same BatchKey into one
	// run. The ticket that starts leads: Group returns the others it took along.
	Batch    any
	BatchKey string
	group    []*Ticket
	leader   *Ticket
}

type ticketState int

const (
	waiting ticketState = iota
	running
	batched // taken into another ticket's batch
	done
)

// Admit takes a place in the queue for a job of the given cost, or fails at once with
// ErrBusy. The ticket must be ended with Done.
func (l *Limiter) Admit(cost float64) (*Ticket, error) {
	return l.admit(cost, nil, "")
}

// AdmitBatch is Admit for a job that may run in a batch with others of the same key.
func (l *Limiter) AdmitBatch(cost float64, batch any, key string) (*Ticket, error) {
	return l.admit(cost, batch, key)
}

func (l *Limiter) admit(cost float64, batch any, key string) (*Ticket, error) {
	cost = max(cost, 0)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.draining {
		return nil, ErrShuttingDown
	}
	if !l.roomLocked() {
		l.rejected.Add(1)
		return nil, ErrBusy
	}
	t := &Ticket{l: l, cost: cost, ready: make(chan struct{}), Batch: batch, BatchKey: key}
	l.queue = append(l.queue, t)
	l.waitingN.Add(1)
	l.dispatchLocked()
	return t, nil
}

// roomLocked says whether one more job may wait: a worker is free, or fewer than MaxQueued
// wait and the work ahead keeps a newcomer's wait under MaxWait.
func (l *Limiter) roomLocked() bool {
	if len(l.running) < l.workers && len(l.queue) == 0 {
		return true
	}
	if len(l.queue) >= l.maxQueued {
		return false
	}
	return l.workAheadLocked(l.now()) <= l.maxWait.Seconds()*float64(l.workers)
}

// workAheadLocked is the estimated work, in seconds, before a newcomer starts: what the
// running jobs have left plus the waiting jobs.
func (l *Limiter) workAheadLocked(now time.Time) float64 {
	rate := l.rateLocked()
	w := 0.0
	for _, t := range l.running {
		w += t.remaining(rate, now)
	}
	for _, t := range l.queue {
		w += t.cost * rate
	}
	return w
}

// remaining estimates what a running job (and its batch) has left; one that overran its
// estimate is given a tenth of it more.
func (t *Ticket) remaining(rate float64, now time.Time) float64 {
	est := t.groupCost() * rate
	return max(est-now.Sub(t.start).Seconds(), est/10)
}

func (t *Ticket) groupCost() float64 {
	c := t.cost
	for _, g := range t.group {
		c += g.cost
	}
	return c
}

// rateLocked is the seconds of work per unit of cost, from the jobs last run (their total
// time over their total cost, so a few long jobs weigh as much as they cost and no more),
// raised to the pace of a running job that has already taken longer than that: the engine is
// slower now (a bigger model, a loaded machine) than what it ran before, or than the prior.
func (l *Limiter) rateLocked() float64 {
	var c float64
	var d time.Duration
	for i := 0; i < l.histN; i++ {
		c += l.hist[i].cost
		d += l.hist[i].elapsed
	}
	rate := l.prior
	if c > 0 {
		rate = d.Seconds() / c
	}
	now := l.now()
	for _, t := range l.running {
		if gc := t.groupCost(); gc > 0 {
			rate = max(rate, now.Sub(t.start).Seconds()/gc)
		}
	}
	return rate
}

// dispatchLocked starts waiting jobs while workers are free, taking batches along.
func (l *Limiter) dispatchLocked() {
	for len(l.running) < l.workers && len(l.queue) > 0 {
		t := l.queue[0]
		l.queue = l.queue[1:]
		t.state, t.start = running, l.now()
		l.waitingN.Add(-1)
		if t.Batch != nil && l.maxBatch > 1 {
			for i := 0; i < len(l.queue) && len(t.group) < l.maxBatch-1; {
				o := l.queue[i]
				if o.Batch == nil || o.BatchKey != t.BatchKey {
					i++
					continue
				}
				l.queue = slices.Delete(l.queue, i, i+1)
				o.state, o.leader, o.start = batched, t, t.start
				l.waitingN.Add(-1)
				t.group = append(t.group, o)
				close(o.ready)
			}
		}
		l.running = append(l.running, t)
		l.runningN.Add(1)
		close(t.ready)
	}
}

// Wait blocks until the job may run (or ctx ends, which gives up its place). A ticket taken
// into another's batch returns at once with Leader set: its leader runs it.
func (t *Ticket) Wait(ctx context.Context) error {
	select {
	case <-t.ready:
		return t.err
	case <-ctx.Done():
	}
	l := t.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.state != waiting {
		return t.err // started meanwhile (the caller sees ctx ended and calls Done), or refused
	}
	if i := slices.Index(l.queue, t); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
		l.waitingN.Add(-1)
	}
	t.state = done
	return ctx.Err()
}

// Group returns the tickets this one took along in its batch.
func (t *Ticket) Group() []*Ticket { return t.group }

// Leader returns the ticket whose batch runs this one, or nil.
func (t *Ticket) Leader() *Ticket { return t.leader }

// Done ends the job and frees its place (and worker). It is safe to call more than once.
func (t *Ticket) Done() {
	l := t.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch t.state {
	case done, batched:
		t.state = done
		return
	case waiting:
		if i := slices.Index(l.queue, t); i >= 0 {
			l.queue = slices.Delete(l.queue, i, i+1)
			l.waitingN.Add(-1)
		}
	case running:
		l.hist[l.histI] = costSample{cost: t.groupCost(), elapsed: l.now().Sub(t.start)}
		l.histI = (l.histI + 1) % len(l.hist)
		l.histN = min(l.histN+1, len(l.hist))
		if i := slices.Index(l.running, t); i >= 0 {
			l.running = slices.Delete(l.running, i, i+1)
			l.runningN.Add(-1)
		}
	}
	t.state = done
	l.dispatchLocked()
}

// Acquire is Admit then Wait. On success release must be called once.
func (l *Limiter) Acquire(ctx context.Context, cost float64) (release func(), err error) {
	t, err := l.Admit(cost)
	if err != nil {
		return nil, err
	}
	if err := t.Wait(ctx); err != nil {
		return nil, err
	}
	return t.Done, nil
}

// Drain stops admitting jobs (Admit fails with ErrShuttingDown) and refuses, with
// ErrShuttingDown from Wait, every waiting job that would not be done by deadline as the
// queue stands: the jobs are laid out on the workers in order, running ones with what they
// have left, and a job refused leaves its worker's time to the next. It returns how many it
// refused. The rest keep their place and run.
func (l *Limiter) Drain(deadline time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.draining = true
	now := l.now()
	rate := l.rateLocked()
	left := deadline.Sub(now).Seconds()
	free := l.workersFreeLocked(now, rate)
	refused := 0
	keep := l.queue[:0]
	for _, t := range l.queue {
		k := argmin(free)
		if end := free[k] + t.cost*rate; end <= left {
			free[k] = end
			keep = append(keep, t)
			continue
		}
		t.state, t.err = done, ErrShuttingDown
		l.waitingN.Add(-1)
		close(t.ready)
		refused++
	}
	clear(l.queue[len(keep):])
	l.queue = keep
	return refused
}

// RetryAfter is the work ahead of a job refused now: the time until it would start, had it
// been queued. The jobs waiting are laid out on the workers in order, the running ones with
// what they have left, at the measured rate; the answer is when the first worker is free
// after all of them (at least one second). A client that comes back then finds the queue
// drained rather than being admitted at the first free place and waiting behind the rest.
func (l *Limiter) RetryAfter() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	rate := l.rateLocked()
	free := l.workersFreeLocked(now, rate)
	for _, t := range l.queue {
		free[argmin(free)] += t.cost * rate
	}
	return retrySeconds(slices.Min(free))
}

// workersFreeLocked is when each worker frees up, in seconds from now: what its running job
// has left at rate (0 for an idle worker). Drain and RetryAfter lay the queue out on it.
func (l *Limiter) workersFreeLocked(now time.Time, rate float64) []float64 {
	free := make([]float64, l.workers)
	for i, t := range l.running {
		if i < len(free) {
			free[i] = t.remaining(rate, now)
		}
	}
	return free
}

// argmin is the index of the smallest value (the first of equals).
func argmin(x []float64) int {
	k := 0
	for j := range x {
		if x[j] < x[k] {
			k = j
		}
	}
	return k
}

func retrySeconds(s float64) time.Duration {
	d := time.Duration(s * float64(time.Second))
	return min(max(d, time.Second), 10*time.Minute)
}

// WorkSeconds is the estimated work queued and running, in seconds.
func (l *Limiter) WorkSeconds() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.workAheadLocked(l.now())
}

// Waiting is the number of jobs queued now.
func (l *Limiter) Waiting() int64 { return l.waitingN.Load() }

// Running is the number of jobs (batches count once) running now.
func (l *Limiter) Running() int64 { return l.runningN.Load() }

// Rejected counts jobs refused because the queue was full.
func (l *Limiter) Rejected() int64 { return l.rejected.Load() }

// Workers is the number of jobs that run at once.
func (l *Limiter) Workers() int { return l.workers }

// QueueCap is the number of jobs that may wait.
func (l *Limiter) QueueCap() int { return l.maxQueued }

// MaxWait is the longest estimated wait a job is admitted to.
func (l *Limiter) MaxWait() time.Duration { return l.maxWait }
