package serve

import (
	"runtime/debug"
	"sync"
	"time"
)

// memBudget is the memory the server lets audio buffers hold at once (realtime sessions'
// input, Wyoming utterances): a buffer grows only by reserving from it, and a client whose
// buffer cannot grow gets an error instead of the server growing without bound. When much of
// what was held is given back (sessions closed), the memory is returned to the system soon
// after, so the process's resident size comes back near its baseline instead of staying at
// its peak until the runtime's slow scavenger gets to it.
type memBudget struct {
	mu       sync.Mutex
	max      int64
	used     int64
	peak     int64 // highest use since memory was last returned
	timer    *time.Timer
	relieveN int // times memory was returned (tests)
	// relieve returns freed memory to the system; debug.FreeOSMemory by default.
	relieve func()
}

// reliefThreshold is how much must have been given back before memory is returned.
const reliefThreshold = 32 << 20

func newMemBudget(max int64) *memBudget {
	return &memBudget{max: max, relieve: debug.FreeOSMemory}
}

// Reserve takes n bytes, or reports false when that would pass the budget.
func (b *memBudget) Reserve(n int64) bool {
	if n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

// Release gives n bytes back.
func (b *memBudget) Release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used = max(0, b.used-n)
	if b.peak-b.used >= reliefThreshold && b.timer == nil {
		// a second later, so that a burst of closing sessions is one collection
		b.timer = time.AfterFunc(time.Second, b.relieveNow)
	}
}

func (b *memBudget) relieveNow() {
	b.mu.Lock()
	b.timer = nil
	b.peak = b.used
	b.relieveN++
	f := b.relieve
	b.mu.Unlock()
	f()
}

// Used is the bytes held now.
func (b *memBudget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
