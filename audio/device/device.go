// Package device plays and records audio through PortAudio. It is the only package that
// imports PortAudio (cgo).
//
// A Host owns one PortAudio initialisation. Capture and Playback open a device at its native
// rate and convert to and from the caller's format (typically audio.Mono16k). The real-time
// callbacks only copy samples between the device and lock-free ring buffers and bump atomic
// counters: they never allocate, lock, block or call into the runtime's scheduler. Conversion
// (resampling, channel mapping) runs in the caller's goroutine.
//
// Device loss (a server that dies, a USB device unplugged) shows up as callbacks that stop
// arriving: a watchdog turns that into an Event with ErrDeviceLost, and Read/Write return it.
package device

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gordonklaus/portaudio"
)

// Errors.
var (
	ErrNoDevice   = errors.New("device: no such audio device")
	ErrDeviceLost = errors.New("device: audio device lost")
	ErrStopped    = errors.New("device: playback stopped")
	ErrClosed     = errors.New("device: closed")
)

// Info describes one device.
type Info struct {
	Index             int     `json:"index"`
	Name              string  `json:"name"`
	HostAPI           string  `json:"host_api"`
	MaxInputChannels  int     `json:"max_input_channels"`
	MaxOutputChannels int     `json:"max_output_channels"`
	DefaultSampleRate float64 `json:"default_sample_rate"`
	DefaultInput      bool    `json:"default_input,omitempty"`
	DefaultOutput     bool    `json:"default_output,omitempty"`

	pa *portaudio.DeviceInfo
}

// Host is an initialised PortAudio. Close it when done; several Hosts may exist (PortAudio
// counts initialisations).
type Host struct {
	mu     sync.Mutex
	closed bool
	log    *slog.Logger
}

// Open initialises PortAudio. log may be nil.
func Open(log *slog.Logger) (*Host, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	quietNativeAudio(log)
	if err := pa.hostOpened(); err != nil {
		return nil, fmt.Errorf("device: initialising PortAudio: %w", err)
	}
	return &Host{log: log}, nil
}

// Close releases PortAudio. Streams must be closed first.
func (h *Host) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	return pa.hostClosed()
}

// Devices lists the devices PortAudio sees. The list is the one PortAudio scanned when it was
// initialised; a reopening stream may rescan (see Recovery), after which indices can change.
func (h *Host) Devices() ([]Info, error) {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	return h.devices()
}

// devices is Devices with pa.mu held.
func (h *Host) devices() ([]Info, error) {
	if err := pa.ensure(); err != nil {
		return nil, err
	}
	ds, err := portaudio.Devices()
	if err != nil {
		return nil, fmt.Errorf("device: listing devices: %w", err)
	}
	di, _ := portaudio.DefaultInputDevice()
	do, _ := portaudio.DefaultOutputDevice()
	out := make([]Info, len(ds))
	for i, d := range ds {
		api := ""
		if d.HostApi != nil {
			api = d.HostApi.Name
		}
		out[i] = Info{
			Index: i, Name: d.Name, HostAPI: api,
			MaxInputChannels: d.MaxInputChannels, MaxOutputChannels: d.MaxOutputChannels,
			DefaultSampleRate: d.DefaultSampleRate,
			DefaultInput:      di != nil && d == di, DefaultOutput: do != nil && d == do,
			pa: d,
		}
	}
	return out, nil
}

// Direction says which side of a device is wanted.
type Direction int

const (
	Input Direction = iota
	Output
)

func (d Direction) String() string {
	if d == Input {
		return "input"
	}
	return "output"
}

// Lookup finds a device by spec: "" or "default" for the system default, a number for an
// index from Devices, otherwise a name (exact, then a unique case-insensitive substring).
func (h *Host) Lookup(spec string, dir Direction) (Info, error) {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	return h.lookup(spec, dir)
}

// lookup is Lookup with pa.mu held.
func (h *Host) lookup(spec string, dir Direction) (Info, error) {
	ds, err := h.devices()
	if err != nil {
		return Info{}, err
	}
	ok := func(d Info) bool {
		if dir == Input {
			return d.MaxInputChannels > 0
		}
		return d.MaxOutputChannels > 0
	}
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "default" {
		for _, d := range ds {
			if (dir == Input && d.DefaultInput) || (dir == Output && d.DefaultOutput) {
				return d, nil
			}
		}
		return Info{}, fmt.Errorf("%w: no default %s device (%d devices seen)", ErrNoDevice, dir, len(ds))
	}
	if i, err := strconv.Atoi(spec); err == nil {
		if i < 0 || i >= len(ds) {
			return Info{}, fmt.Errorf("%w: index %d (have 0..%d)", ErrNoDevice, i, len(ds)-1)
		}
		if !ok(ds[i]) {
			return Info{}, fmt.Errorf("%w: device %d %q has no %s channels", ErrNoDevice, i, ds[i].Name, dir)
		}
		return ds[i], nil
	}
	for _, d := range ds {
		if d.Name == spec && ok(d) {
			return d, nil
		}
	}
	var hits []Info
	for _, d := range ds {
		if ok(d) && strings.Contains(strings.ToLower(d.Name), strings.ToLower(spec)) {
			hits = append(hits, d)
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		var names []string
		for _, d := range ds {
			if ok(d) {
				names = append(names, strconv.Quote(d.Name))
			}
		}
		return Info{}, fmt.Errorf("%w: no %s device named %q (have %s)", ErrNoDevice, dir, spec, strings.Join(names, ", "))
	default:
		var names []string
		for _, d := range hits {
			names = append(names, strconv.Quote(d.Name))
		}
		return Info{}, fmt.Errorf("%w: %q matches several %s devices: %s", ErrNoDevice, spec, dir, strings.Join(names, ", "))
	}
}

// Event reports something that happened to a stream outside the caller's calls.
type Event struct {
	Kind   EventKind
	Err    error // for Lost (from a resilient stream: a *LostError)
	Time   time.Time
	Device string // the device's name (set by resilient streams)
}

// EventKind is the type of an Event.
type EventKind int

const (
	Lost      EventKind = iota + 1 // callbacks stopped: the device is gone; Err wraps ErrDeviceLost
	Overflow                       // capture: samples were dropped (reader too slow or host overrun)
	Underflow                      // playback: the device ran dry in the middle of a stream
	Reopened                       // a resilient stream opened its device again after a loss (Device names it)
)

func (k EventKind) String() string {
	switch k {
	case Lost:
		return "lost"
	case Overflow:
		return "overflow"
	case Underflow:
		return "underflow"
	case Reopened:
		return "reopened"
	}
	return "unknown"
}

// Stats are a stream's counters.
type Stats struct {
	Callbacks  uint64 `json:"callbacks"`
	Frames     uint64 `json:"frames"`     // device frames handled by callbacks
	Overflows  uint64 `json:"overflows"`  // capture: callbacks that could not store all input
	Dropped    uint64 `json:"dropped"`    // capture: device frames dropped
	Underflows uint64 `json:"underflows"` // playback: callbacks that ran short inside a stream
	HostFlags  uint64 `json:"host_flags"` // callbacks PortAudio flagged with an over/underflow
}

// StreamConfig is shared by Capture and Playback.
type StreamConfig struct {
	Device       string        // "" (default), an index or a name; see Host.Lookup
	SampleRate   int           // device rate; 0 = the device's native (default) rate
	Channels     int           // device channels; 0 = the caller's channel count if the device has them, else its maximum (≤ 2)
	BufferFrames int           // device frames per callback; 0 = 10 ms (a capture's: Batch, when longer)
	Latency      time.Duration // suggested latency; 0 = the device's default low latency
	Ring         time.Duration // ring buffer between callback and caller; 0 = 2 s
	LossTimeout  time.Duration // no callback for this long = device lost; 0 = max(3 s, 20 buffers)
	StartTimeout time.Duration // no first callback for this long = device lost; 0 = 10 s
	Quality      int           // audio.Quality of the resampler (0 = high)
	// Batch is how much audio a waiting reader (the capture's, the echo reference's) lets
	// gather before it wakes: fewer wake-ups at rest for up to that much more delay; 0 = one
	// device buffer.
	Batch time.Duration
}

// batchSamples is Batch in device samples (interleaved), at least one buffer's.
func (c *StreamConfig) batchSamples() int {
	n := int(int64(c.Batch) * int64(c.SampleRate) / int64(time.Second))
	return max(n, c.BufferFrames) * max(1, c.Channels)
}

func (c *StreamConfig) fill(d Info, dir Direction, want int) error {
	maxCh := d.MaxInputChannels
	if dir == Output {
		maxCh = d.MaxOutputChannels
	}
	if c.SampleRate == 0 {
		c.SampleRate = int(d.DefaultSampleRate + 0.5)
		if c.SampleRate <= 0 {
			c.SampleRate = 48000
		}
	}
	if c.Channels == 0 {
		c.Channels = want
		if c.Channels > maxCh {
			c.Channels = min(maxCh, 2)
		}
	}
	if c.Channels < 1 || c.Channels > maxCh {
		return fmt.Errorf("%w: %q has %d %s channels, %d asked", ErrNoDevice, d.Name, maxCh, dir, c.Channels)
	}
	if c.BufferFrames == 0 {
		c.BufferFrames = c.SampleRate / 100
		if dir == Input && c.Batch > 10*time.Millisecond {
			// the reader waits for a batch anyway: buffers that long cost the audio stack
			// fewer wake-ups and the reader no extra delay
			c.BufferFrames = int(int64(c.Batch) * int64(c.SampleRate) / int64(time.Second))
		}
	}
	if c.Ring == 0 {
		c.Ring = 2 * time.Second
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 10 * time.Second
	}
	if c.LossTimeout == 0 {
		c.LossTimeout = max(3*time.Second, 20*time.Duration(c.BufferFrames)*time.Second/time.Duration(c.SampleRate))
	}
	return nil
}

func (c *StreamConfig) params(d Info, dir Direction) portaudio.StreamParameters {
	var p portaudio.StreamParameters
	if dir == Input {
		p = portaudio.LowLatencyParameters(d.pa, nil)
		p.Input.Channels = c.Channels
		if c.Latency > 0 {
			p.Input.Latency = c.Latency
		}
	} else {
		p = portaudio.LowLatencyParameters(nil, d.pa)
		p.Output.Channels = c.Channels
		if c.Latency > 0 {
			p.Output.Latency = c.Latency
		}
	}
	p.SampleRate = float64(c.SampleRate)
	p.FramesPerBuffer = c.BufferFrames
	return p
}

// pollInterval is how often WaitRunning looks at the callback counters (readers and writers
// sleep on their wakers instead, rt.go).
func pollInterval(bufferFrames, rate int) time.Duration {
	d := time.Duration(bufferFrames) * time.Second / time.Duration(rate) / 2
	return min(max(d, time.Millisecond), 5*time.Millisecond)
}
