package audio

import (
	"math"
	"testing"
)

func TestAlign(t *testing.T) {
	ref := make([]float32, 3000)
	var seed uint32 = 1
	for i := range ref {
		seed = seed*1664525 + 1013904223
		ref[i] = float32(int32(seed)>>8) / (1 << 23)
	}
	for _, tc := range []struct {
		lag  int
		gain float32
	}{{0, 1}, {1234, 0.5}, {7000, 2}} {
		rec := make([]float32, 10000)
		for i, v := range ref {
			if tc.lag+i < len(rec) {
				rec[tc.lag+i] += tc.gain * v
			}
		}
		// a louder unrelated tone elsewhere must not win
		for i := 0; i < 1000; i++ {
			rec[i+4300] += float32(3 * math.Sin(float64(i)*0.3))
		}
		m := Align(rec, ref)
		if m.Lag != tc.lag || math.Abs(m.Gain-float64(tc.gain)) > 1e-3 || m.Corr < 0.99 {
			t.Errorf("lag %d gain %v: got %+v", tc.lag, tc.gain, m)
		}
	}
	if m := Align(nil, ref); m.Lag != 0 || m.Corr != 0 {
		t.Errorf("empty recording: %+v", m)
	}
}
