package asr

import (
	"reflect"
	"testing"
)

func TestLFRFrames(t *testing.T) {
	for _, c := range []struct{ t, want int }{{0, 0}, {1, 1}, {5, 1}, {6, 1}, {7, 2}, {12, 2}, {13, 3}, {20, 4}} {
		if got := LFRFrames(c.t, 6); got != c.want {
			t.Errorf("LFRFrames(%d, 6) = %d, want %d", c.t, got, c.want)
		}
	}
}

// TestLFRVectors stacks 13 one-dimensional frames holding their own index (the vectors).
func TestLFRVectors(t *testing.T) {
	in := make([]float32, 13)
	for i := range in {
		in[i] = float32(i)
	}
	got := lfrCMVN(nil, in, 1, 7, 6, nil)
	want := []float32{
		0, 0, 0, 0, 1, 2, 3,
		3, 4, 5, 6, 7, 8, 9,
		9, 10, 11, 12, 12, 12, 12,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("LFR rows:\n got %v\nwant %v", got, want)
	}
	for _, c := range []struct{ t, want int }{{1, 1}, {5, 1}, {6, 1}, {7, 2}, {12, 2}, {13, 3}, {20, 4}} {
		x := make([]float32, c.t*2)
		if n := len(lfrCMVN(nil, x, 2, 7, 6, nil)) / 14; n != c.want {
			t.Errorf("T=%d: %d LFR frames, want %d", c.t, n, c.want)
		}
	}
	if got := lfrCMVN(nil, nil, 80, 7, 6, nil); len(got) != 0 {
		t.Errorf("no frames in, %d values out", len(got))
	}
}

func TestLFRCMVN(t *testing.T) {
	// Two-dimensional frames, CMVN per stacked dimension.
	in := []float32{1, 10, 2, 20} // T=2, dim=2
	c := &cmvn{negMean: make([]float32, 6), invStd: make([]float32, 6)}
	for i := range c.negMean {
		c.negMean[i] = -float32(i)
		c.invStd[i] = 2
	}
	got := lfrCMVN([]float32{7}, in, 2, 3, 2, c)
	// Rows: frames clamp(2i-1+j): i=0 → 0,0,1.
	want := []float32{7, (1 - 0) * 2, (10 - 1) * 2, (1 - 2) * 2, (10 - 3) * 2, (2 - 4) * 2, (20 - 5) * 2}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}
