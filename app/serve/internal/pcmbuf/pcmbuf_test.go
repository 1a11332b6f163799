package pcmbuf

import "testing"

type budget struct{ used, max int64 }

func (b *budget) Reserve(n int64) bool {
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}
func (b *budget) Release(n int64) { b.used -= n }

func TestGrowReservesWhatItAdds(t *testing.T) {
	b := &budget{max: 1 << 20}
	buf, r, ok := Grow(nil, 10, 1000, b)
	if !ok || len(buf) != 0 || cap(buf) != 1000 || r != 4000 || b.used != 4000 {
		t.Fatalf("first growth: len %d cap %d reserved %d used %d ok %v", len(buf), cap(buf), r, b.used, ok)
	}
	buf = append(buf, make([]float32, 1000)...)
	if _, r, ok := Grow(buf, 0, 1000, b); !ok || r != 0 {
		t.Errorf("no growth needed, yet reserved %d (ok %v)", r, ok)
	}
	buf[999] = 7
	// a quarter more, or minGrow, or what is needed, whichever is largest
	grown, r, ok := Grow(buf, 5000, 1000, b)
	if !ok || cap(grown) != 6000 || len(grown) != 1000 || grown[999] != 7 || r != 20000 || b.used != 24000 {
		t.Errorf("growth for 5000: len %d cap %d reserved %d used %d", len(grown), cap(grown), r, b.used)
	}
	big := make([]float32, 0, 100000)
	if grown, r, ok := Grow(big, 100001, 1000, b); !ok || cap(grown) != 125000 || r != 100000 {
		t.Errorf("growth of a large buffer: cap %d reserved %d ok %v", cap(grown), r, ok)
	}
}

func TestGrowRefusedLeavesBufferAndBudget(t *testing.T) {
	b := &budget{max: 1000}
	buf := make([]float32, 5, 5)
	got, r, ok := Grow(buf, 1000, 10, b)
	if ok || r != 0 || b.used != 0 || len(got) != 5 || cap(got) != 5 {
		t.Errorf("over the budget: ok %v reserved %d used %d len %d cap %d", ok, r, b.used, len(got), cap(got))
	}
	if _, _, ok := Grow(buf, 1000, 10, nil); !ok {
		t.Error("no budget refused")
	}
}
