package wire

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"
)

// lossySpeaker is a resilient speaker whose device was lost: its next Write reports the loss
// once (nothing written), later writes play.
type lossySpeaker struct {
	lost    bool
	queued  int // samples still queued
	written [][]float32
}

func (s *lossySpeaker) Write(_ context.Context, p []float32) (int, error) {
	if s.lost {
		s.lost = false
		return 0, &device.LostError{Dir: device.Output, Device: "usb", Err: device.ErrDeviceLost}
	}
	s.written = append(s.written, p)
	return len(p), nil
}
func (s *lossySpeaker) Format() audio.Format { return audio.Format{SampleRate: 16000, Channels: 1} }
func (s *lossySpeaker) Queued() time.Duration {
	return time.Duration(s.queued) * time.Second / 16000
}
func (s *lossySpeaker) Stop()                 {}
func (s *lossySpeaker) EchoRef() audio.Source { return nil }

func TestPlayerAfterDeviceLoss(t *testing.T) {
	pcm := make([]float32, 1600)

	// lost while Parley was quiet: the next answer plays on the reopened device
	sp := &lossySpeaker{lost: true}
	p := &Player{P: sp}
	if err := p.Write(context.Background(), pcm); err != nil {
		t.Fatalf("first write after an idle loss: %v", err)
	}
	if len(sp.written) != 1 {
		t.Errorf("written %d chunks, want 1", len(sp.written))
	}

	// lost while an answer was playing: the turn is told (it ends with the loss explained)
	sp = &lossySpeaker{}
	p = &Player{P: sp}
	if err := p.Write(context.Background(), pcm); err != nil {
		t.Fatal(err)
	}
	sp.lost, sp.queued = true, 800 // half of it still queued when the device went
	if err := p.Write(context.Background(), pcm); !errors.Is(err, device.ErrReopening) {
		t.Errorf("write during an answer: %v, want the loss", err)
	}
}
