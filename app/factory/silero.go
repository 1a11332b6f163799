package factory

import (
	"context"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/audio/vad"
)

// SileroVAD adapts the Silero detector (audio/vad) to app.VAD, beside the factory that opens
// it: the assistant and the server's realtime sessions both use it, and package app sees
// only its interface.
type SileroVAD struct{ D *vad.Detector }

// Process implements app.VAD.
func (v SileroVAD) Process(p []float32) ([]app.VADEvent, error) {
	evs, err := v.D.Accept(context.Background(), p)
	if err != nil {
		return nil, err
	}
	out := make([]app.VADEvent, 0, len(evs))
	for _, e := range evs {
		switch e.Type {
		case vad.SpeechStart:
			out = append(out, app.VADEvent{Kind: app.SpeechStart, Sample: e.Start})
		case vad.SpeechEnd:
			out = append(out, app.VADEvent{Kind: app.SpeechEnd, Sample: e.End})
		}
	}
	return out, nil
}

// Reset implements app.VAD.
func (v SileroVAD) Reset() { v.D.Reset() }

// Close releases the detector.
func (v SileroVAD) Close() error { return v.D.Close() }

// SileroVADs returns a maker of Silero detectors over one shared pool (VADPool), for the
// server's realtime sessions. A Silero session in ONNX Runtime costs about 12 MB that the C
// allocator keeps once closed: one per realtime session left ~400 MB behind after 32
// sessions; pooled, the server holds the pool's size of them at most.
func SileroVADs(pool *vad.ModelPool) (newVAD func() (app.VAD, error)) {
	return func() (app.VAD, error) {
		d, err := vad.NewPooled(vad.Config{}, pool)
		if err != nil {
			return nil, err
		}
		return SileroVAD{D: d}, nil
	}
}
