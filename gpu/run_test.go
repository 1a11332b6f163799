package gpu

import (
	"context"
	"sync"
	"testing"
)

// TestRunOptionsCancelRacesRelease: cancels landing at the same moment as release, many
// times over; a terminate after the free would crash the process.
func TestRunOptionsCancelRacesRelease(t *testing.T) {
	if err := Init(); err != nil {
		t.Skipf("ONNX Runtime unavailable: %v", err)
	}
	for i := 0; i < 2000; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		_, release, err := RunOptions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); cancel() }()
		go func() { defer wg.Done(); release() }()
		wg.Wait()
		release() // twice is harmless
	}
}
