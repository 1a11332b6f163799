package gpu

import (
	"context"
	"fmt"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// RunOptions returns ONNX Runtime run options that a cancel of ctx terminates (the model
// call in progress returns early), and release, which frees them. Call release when the
// call is over (defer it). context.AfterFunc's stop does not wait for a callback already
// running, so the callback and release take turns under a lock: the options are never
// terminated after they are freed (a use-after-free that crashed the process under load).
func RunOptions(ctx context.Context) (opts *ort.RunOptions, release func(), err error) {
	opts, err = ort.NewRunOptions()
	if err != nil {
		return nil, nil, fmt.Errorf("run options: %w", err)
	}
	var mu sync.Mutex
	freed := false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !freed {
			_ = opts.Terminate()
		}
	})
	return opts, func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		if !freed {
			freed = true
			_ = opts.Destroy()
		}
	}, nil
}
