package device

import (
	"fmt"
	"sync"

	"github.com/gordonklaus/portaudio"
)

// Duplex is one PortAudio stream that records and plays at once. Its Capture and Playback are
// sample-locked: every callback moves the same number of frames both ways, so echo-reference
// frame i (Playback.EchoRef) was played in the same callback that captured capture frame i
// (at the device rate), and a speaker-to-microphone echo appears in the capture at a fixed
// delay (the output plus input latency) for as long as the stream runs without xruns. With
// two separate streams that relation drifts with each stream's start-up and scheduling.
type Duplex struct {
	Capture  *Capture
	Playback *Playback
	pa       *rtStream
	once     sync.Once
}

// DuplexConfig configures OpenDuplex. The stream has one sample rate and buffer size: the
// output's (SampleRate, BufferFrames), which the input's must match or leave zero.
type DuplexConfig struct {
	Input  CaptureConfig
	Output PlaybackConfig
}

// OpenDuplex opens and starts a full-duplex stream.
func (h *Host) OpenDuplex(cfg DuplexConfig) (*Duplex, error) {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	p, dout, err := h.newPlayback(cfg.Output)
	if err != nil {
		return nil, err
	}
	in := &cfg.Input.StreamConfig
	if in.SampleRate != 0 && in.SampleRate != p.cfg.SampleRate || in.BufferFrames != 0 && in.BufferFrames != p.cfg.BufferFrames {
		return nil, fmt.Errorf("device: a duplex stream has one rate and buffer: input %d Hz/%d frames, output %d Hz/%d frames",
			in.SampleRate, in.BufferFrames, p.cfg.SampleRate, p.cfg.BufferFrames)
	}
	in.SampleRate, in.BufferFrames = p.cfg.SampleRate, p.cfg.BufferFrames
	c, din, err := h.newCapture(cfg.Input)
	if err != nil {
		return nil, err
	}
	params := portaudio.LowLatencyParameters(din.pa, dout.pa)
	params.Input.Channels, params.Output.Channels = c.cfg.Channels, p.cfg.Channels
	if c.cfg.Latency > 0 {
		params.Input.Latency = c.cfg.Latency
	}
	if p.cfg.Latency > 0 {
		params.Output.Latency = p.cfg.Latency
	}
	params.SampleRate = float64(p.cfg.SampleRate)
	params.FramesPerBuffer = p.cfg.BufferFrames
	d := &Duplex{Capture: c, Playback: p}
	st, err := pa.openStream(params, c.rt, p.rt)
	if err != nil {
		return nil, fmt.Errorf("device: opening duplex %q → %q at %d Hz: %w", din.Name, dout.Name, p.cfg.SampleRate, err)
	}
	d.pa, c.pa, p.pa = st, st, st
	c.shared, p.shared = true, true
	if err := st.Start(); err != nil {
		st.Close()
		pa.open-- // pa.mu is held: closeStream would wait for it forever
		return nil, fmt.Errorf("device: starting duplex %q → %q: %w", din.Name, dout.Name, err)
	}
	c.wg.Add(1)
	go c.watch(Input)
	p.wg.Add(1)
	go p.watch(Output)
	h.log.Debug("duplex open", "input", din.Name, "output", dout.Name, "rate", p.cfg.SampleRate,
		"in_channels", c.cfg.Channels, "out_channels", p.cfg.Channels, "buffer", p.cfg.BufferFrames)
	return d, nil
}

// Close stops the stream at once and closes both halves.
func (d *Duplex) Close() error {
	var err error
	d.once.Do(func() {
		d.Capture.Close()
		d.Playback.Close()
		if d.Capture.lostErr() != nil || d.Playback.lostErr() != nil {
			d.pa.Abort()
		} else {
			err = d.pa.Stop()
		}
		if cerr := pa.closeStream(d.pa); err == nil {
			err = cerr
		}
	})
	return err
}
