package device

import (
	"fmt"
	"sync"

	"github.com/gordonklaus/portaudio"
)

// paLife tracks PortAudio's process-wide state. PortAudio itself is a process singleton: it
// counts Pa_Initialize calls, and it scans devices only when the count goes from 0 to 1 (the
// Go binding also caches the device list until the last Pa_Terminate, and its own counters are
// not safe for concurrent use). So this is the one piece of package-level mutable state: it has
// to mirror a global that already exists.
//
// Every Initialize/Terminate, device listing and stream open/close of this package goes
// through it. A rescan (terminate down to zero, initialise back up) is only done while no
// stream is open anywhere in the process: the final Pa_Terminate would close them under their
// owners' feet.
type paLife struct {
	mu      sync.Mutex
	want    int    // Hosts open (each owns one initialisation)
	inits   int    // initialisations actually held (less than want if a rescan's re-init failed)
	open    int    // PortAudio streams open
	rescans uint64 // rescans done (process-wide)
}

var pa paLife

// hostOpened records a Host's initialisation.
func (l *paLife) hostOpened() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := portaudio.Initialize(); err != nil {
		return err
	}
	l.want++
	l.inits++
	return nil
}

// hostClosed gives a Host's initialisation back.
func (l *paLife) hostClosed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.want--
	if l.inits > l.want {
		l.inits--
		return portaudio.Terminate()
	}
	return nil
}

// ensure re-initialises what a failed rescan left terminated. Call with mu held.
func (l *paLife) ensure() error {
	for l.inits < l.want {
		if err := portaudio.Initialize(); err != nil {
			return fmt.Errorf("device: re-initialising PortAudio: %w", err)
		}
		l.inits++
	}
	if l.want == 0 {
		return ErrClosed
	}
	return nil
}

// rescan terminates PortAudio completely and initialises it again, so that devices that came
// or went since are seen. It does nothing (false) while any stream is open or no Host is.
func (l *paLife) rescan() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open > 0 || l.want == 0 {
		return false, nil
	}
	for l.inits > 0 {
		if err := portaudio.Terminate(); err != nil {
			return false, fmt.Errorf("device: terminating PortAudio for a rescan: %w", err)
		}
		l.inits--
	}
	l.rescans++
	return true, l.ensure()
}

// openStream opens a PortAudio stream over the given halves (either may be nil) and counts
// it. Call with mu held.
func (l *paLife) openStream(p portaudio.StreamParameters, capt *rtCapture, play *rtPlayback) (*rtStream, error) {
	if err := l.ensure(); err != nil {
		return nil, err
	}
	s, err := openRT(p, capt, play)
	if err != nil {
		return nil, err
	}
	l.open++
	return s, nil
}

// closeStream closes a stream opened by openStream (after Stop or Abort).
func (l *paLife) closeStream(s *rtStream) error {
	err := s.Close()
	l.mu.Lock()
	l.open--
	l.mu.Unlock()
	return err
}
