package app

import (
	"context"
	"sync"
	"testing"
	"time"
)

// sizedEar records how much audio each of the ear's reads asked for.
type sizedEar struct {
	Source interface {
		Read(ctx context.Context, p []float32) (int, error)
	}
	mu    sync.Mutex
	sizes []int
}

func (s *sizedEar) Read(ctx context.Context, p []float32) (int, error) {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(p))
	s.mu.Unlock()
	return s.Source.Read(ctx, p)
}

// since returns the sizes asked for from read k on, and the number of reads so far.
func (s *sizedEar) since(k int) ([]int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.sizes[min(k, len(s.sizes)):]...), len(s.sizes)
}

// TestEarReadsLongBlocksAtRest: a hands-free assistant at rest asks the microphone for three
// VAD windows at a time (a device capture then wakes ten times a second, not thirty), and for
// one window from the moment speech is heard until the turn is over, so that nothing in a turn
// waits for more audio than the VAD needs.
func TestEarReadsLongBlocksAtRest(t *testing.T) {
	var ear *sizedEar
	r := newRig(t, Options{Mode: HandsFree}, fixed("Ten o'clock."), func(p *Parts) {
		ear = &sizedEar{Source: p.Ear}
		p.Ear = ear
	})
	r.ears.texts = []string{"what time is it"}
	waitReads := func(k, n int) []int {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if got, total := ear.since(k); total >= k+n {
				return got
			}
		}
		t.Fatalf("the ear did not read %d more times", n)
		return nil
	}
	rest := waitReads(0, 20)
	for i, n := range rest[1:] { // the first read may come before the loop is at rest
		if n != 3*512 {
			t.Fatalf("read %d at rest asked for %d samples, want %d (all: %v)", i+1, n, 3*512, rest)
		}
	}
	_, mark := ear.since(0)
	r.room.say(speech(time.Second, 0.05, 99))
	r.turnDone(t)
	turn, mark2 := ear.since(mark)
	short := 0
	for _, n := range turn {
		if n == 512 {
			short++
		}
	}
	// a second of speech is 31 windows: most of the turn's reads are one window each
	if short < 20 {
		t.Errorf("%d of the turn's %d reads asked for one VAD window, want most of them: %v", short, len(turn), turn)
	}
	after := waitReads(mark2, 40)
	if last := after[len(after)-1]; last != 3*512 || r.a.State() != Listening {
		t.Errorf("back at rest (%v) the ear asks for %d samples, want %d", r.a.State(), last, 3*512)
	}
}
