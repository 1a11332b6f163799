package app

import (
	"context"

	"github.com/parley-voice/parley/audio/vad"
)

// SileroVAD adapts the Silero detector (audio/vad) to VAD; the assistant and the server's
// realtime sessions both use it.
type SileroVAD struct{ D *vad.Detector }

// Process implements VAD.
func (v SileroVAD) Process(p []float32) ([]VADEvent, error) {
	evs, err := v.D.Accept(context.Background(), p)
	if err != nil {
		return nil, err
	}
	out := make([]VADEvent, 0, len(evs))
	for _, e := range evs {
		switch e.Type {
		case vad.SpeechStart:
			out = append(out, VADEvent{Kind: SpeechStart, Sample: e.Start})
		case vad.SpeechEnd:
			out = append(out, VADEvent{Kind: SpeechEnd, Sample: e.End})
		}
	}
	return out, nil
}

// Reset implements VAD.
func (v SileroVAD) Reset() { v.D.Reset() }

// Close releases the detector.
func (v SileroVAD) Close() error { return v.D.Close() }
