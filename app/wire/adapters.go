// Package wire builds a running assistant (package app) from the configuration: it opens the
// audio devices, loads the speech recognizer, the brain (offline skills, an LLM server, or
// both) and the voice through app/factory, adapts each engine to the loop's small interfaces
// with app/factory/roles, and adapts the devices and history itself (this file). The GUI, the
// server and `parley chat --voice` all start the assistant here.
package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/device"
	"github.com/parley-voice/parley/store"
)

// speaker is what Player and Echo need of the playback device (*device.Playback, or the
// *device.ResilientPlayback the assistant uses, which reopens a lost device).
type speaker interface {
	Write(ctx context.Context, s []float32) (int, error)
	Format() audio.Format
	Queued() time.Duration
	Stop()
	EchoRef() audio.Source
}

// Player adapts a device.Playback (mono, opened at the voice's rate) to app.Player: Played
// counts the samples written that have left the queue, discarding what Stop dropped.
type Player struct {
	P speaker

	mu      sync.Mutex
	written int64 // samples written, minus those Stop discarded
	last    int64
}

// SampleRate implements app.Player.
func (p *Player) SampleRate() int { return p.P.Format().SampleRate }

// Write implements app.Player.
func (p *Player) Write(ctx context.Context, pcm []float32) error {
	idle := p.Played() >= p.writtenNow() // nothing of ours was queued or playing
	n, err := p.P.Write(ctx, pcm)
	if idle && n == 0 && errors.Is(err, device.ErrReopening) {
		// the speaker was lost while Parley was quiet and has been reopened (or is being):
		// nothing was cut off, so this answer goes to the reopened device
		n, err = p.P.Write(ctx, pcm)
	}
	p.mu.Lock()
	p.written += int64(n)
	p.mu.Unlock()
	if errors.Is(err, device.ErrStopped) {
		return context.Canceled
	}
	return err
}

func (p *Player) writtenNow() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.written
}

// Played implements app.Player.
func (p *Player) Played() int64 {
	q := p.P.Format().Samples(p.P.Queued())
	p.mu.Lock()
	defer p.mu.Unlock()
	v := min(p.written, max(p.last, p.written-int64(q)))
	p.last = v
	return v
}

// Stop implements app.Player.
func (p *Player) Stop() {
	played := p.Played()
	p.P.Stop()
	p.mu.Lock()
	p.written, p.last = played, played
	p.mu.Unlock()
}

// Echo turns the playback device's echo reference (what the device played, frame for frame,
// silence included) into app.EchoReference for a 16 kHz capture. Call Run in its own
// goroutine; Reference is called by the loop's capture goroutine once per read, in order.
//
// Alignment: the streams' start times (PortAudio's ADC/DAC stamps) proved unreliable through
// PulseAudio's ALSA plug-in (off by most of a second), so the echo is aligned by sample counts:
// the newest echo sample is taken as simultaneous with the newest capture sample, the offset is
// held steady, and re-synchronised when callback jitter moves it by more than 100 ms. The real
// acoustic delay (output + input latency) is left to the loop's delay search.
type Echo struct {
	src audio.Source

	// paused: nobody listens (the microphone is closed), so the reference is not read (its
	// reading and resampling cost more than the playback stream itself); on resuming, what
	// queued meanwhile is dropped
	gate   sync.Mutex
	paused bool
	resume chan struct{}

	mu      sync.Mutex
	ring    []float32 // 16 kHz echo from the playback stream's first frame
	n       int64
	capN    int64 // capture samples seen so far
	anchors []anchor
	err     error
}

const echoRing = 1 << 19

// NewEcho prepares the echo reference of play (nil when play has none).
func NewEcho(play speaker) (*Echo, error) {
	ref := play.EchoRef()
	if ref == nil {
		return nil, nil
	}
	src, err := audio.Convert(ref, audio.Mono16k, audio.QualityLow)
	if err != nil {
		return nil, err
	}
	return &Echo{src: src, ring: make([]float32, echoRing)}, nil
}

// SetActive pauses (false) or resumes (true) reading the reference; the assistant's Mic
// calls it as it closes and opens.
func (e *Echo) SetActive(on bool) {
	e.gate.Lock()
	defer e.gate.Unlock()
	if on == !e.paused {
		return
	}
	e.paused = !on
	if on {
		close(e.resume)
	} else {
		e.resume = make(chan struct{})
	}
}

// waitActive blocks while the reading is paused; it reports whether it was (the queue is
// stale then), and false, false when ctx ended.
func (e *Echo) waitActive(ctx context.Context) (ok, waited bool) {
	for {
		e.gate.Lock()
		paused, resume := e.paused, e.resume
		e.gate.Unlock()
		if !paused {
			return true, waited
		}
		waited = true
		select {
		case <-resume:
		case <-ctx.Done():
			return false, waited
		}
	}
}

// Run reads the echo reference steadily until ctx ends.
func (e *Echo) Run(ctx context.Context) error {
	buf := make([]float32, 1024)
	for {
		ok, waited := e.waitActive(ctx)
		if !ok {
			return nil
		}
		if waited { // drop what queued while paused: a read shorter than buf reached the end
			for i := 0; i < 1000; i++ {
				n, err := e.src.Read(ctx, buf)
				if err != nil || n < len(buf) {
					break
				}
			}
		}
		n, err := e.src.Read(ctx, buf)
		e.mu.Lock()
		for _, v := range buf[:n] {
			e.ring[e.n&(echoRing-1)] = v
			e.n++
		}
		if err != nil {
			e.err = err
		}
		e.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// Captured implements app.EchoReference.
func (e *Echo) Captured(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.capN += int64(n)
	if e.n == 0 {
		return
	}
	now := e.n - e.capN
	last := len(e.anchors) - 1
	if last < 0 || now-e.anchors[last].off > app.SampleRate/10 || e.anchors[last].off-now > app.SampleRate/10 {
		e.anchors = append(e.anchors, anchor{capIdx: e.capN - int64(n), off: now})
		if len(e.anchors) > 64 {
			e.anchors = append(e.anchors[:0], e.anchors[len(e.anchors)-32:]...)
		}
	}
}

// anchor: from capture index capIdx on, echo index = capture index + off.
type anchor struct{ capIdx, off int64 }

// Reference implements app.EchoReference.
func (e *Echo) Reference(dst []float32, from int64) {
	clear(dst)
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.anchors) == 0 {
		return
	}
	a := 0
	for i := range dst {
		c := from + int64(i)
		for a+1 < len(e.anchors) && e.anchors[a+1].capIdx <= c {
			a++
		}
		k := e.anchors[a].off + c
		if k < 0 || k >= e.n || k <= e.n-echoRing {
			continue
		}
		dst[i] = e.ring[k&(echoRing-1)]
	}
}

// History writes exchanges into a store conversation, created on the first turn. With
// AudioDir set (config store.save_audio) each turn's audio (app.TurnRecord.Audio) is saved as
// a 16-bit WAV file AudioDir/<conversation id>/<time>-<exchange>-<role>.wav, written to a
// temporary file and renamed, and referenced by the turn's AudioPath: from then on the store
// owns it (history rm and retention delete it). A file that cannot be written leaves the turn
// without audio; its text is still recorded and the error wraps app.ErrAudioNotSaved.
type History struct {
	S        *store.Store
	Voice    string
	AudioDir string // absolute; "" = no audio saved

	mu    sync.Mutex
	conv  int64
	audio map[int64][2]string // this assistant's turn → the user's and its own audio file
}

// AudioOf returns the audio files kept for an exchange of this assistant ("" = none).
func (h *History) AudioOf(turn int64) (user, assistant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.audio[turn]
	return p[0], p[1]
}

// Conversation is the store's id of the conversation (0 before the first turn).
func (h *History) Conversation() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conv
}

// SetConversation makes the next turns part of stored conversation id (0: a new one, created
// on the next turn).
func (h *History) SetConversation(id int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.conv = id
}

// AddTurns implements app.History.
func (h *History) AddTurns(ctx context.Context, recs ...app.TurnRecord) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conv == 0 {
		c, err := h.S.CreateConversation(ctx, "")
		if err != nil {
			return err
		}
		h.conv = c.ID
	}
	turns := make([]*store.Turn, 0, len(recs))
	var turnOf []int64 // the exchange of each stored turn
	var audioErrs []error
	var written []string
	for _, r := range recs {
		t := &store.Turn{ConversationID: h.conv, Role: store.Role(r.Role), Text: r.Text,
			Interrupted: r.Interrupted, Start: r.Start, End: r.End, Error: r.Err,
			Latency: store.Latency{SpeechEnd: r.Latency.SpeechEnd, Transcript: r.Latency.Transcript,
				FirstToken: r.Latency.FirstToken, FirstSentence: r.Latency.FirstSentence, FirstAudio: r.Latency.FirstAudio}}
		if r.Role == app.RoleUser {
			t.Language, t.Emotion, t.Event = r.Transcript.Lang, r.Transcript.Emotion, r.Transcript.Event
		} else {
			t.Voice = h.Voice
		}
		if strings.TrimSpace(t.Text) == "" && t.Error == "" {
			continue
		}
		if h.AudioDir != "" && len(r.Audio) > 0 && r.AudioRate > 0 {
			path, err := h.saveAudio(r)
			if err != nil {
				audioErrs = append(audioErrs, err)
			} else {
				t.AudioPath = path
				written = append(written, path)
			}
		}
		turns = append(turns, t)
		turnOf = append(turnOf, r.Turn)
	}
	if len(turns) == 0 {
		return nil
	}
	err := h.S.AddTurns(ctx, turns...)
	if errors.Is(err, store.ErrNotFound) {
		// the conversation was deleted (History → Delete) while it went on: the turns start
		// a new one rather than being lost
		c, cerr := h.S.CreateConversation(ctx, "")
		if cerr != nil {
			err = errors.Join(err, cerr)
		} else {
			h.conv = c.ID
			for _, t := range turns {
				t.ConversationID = c.ID
			}
			err = h.S.AddTurns(ctx, turns...)
		}
	}
	if err != nil {
		for _, p := range written { // not referenced: nobody else would delete them
			os.Remove(p)
		}
		return err
	}
	for i, t := range turns {
		if t.AudioPath == "" {
			continue
		}
		if h.audio == nil {
			h.audio = map[int64][2]string{}
		}
		p := h.audio[turnOf[i]]
		if t.Role == store.RoleUser {
			p[0] = t.AudioPath
		} else {
			p[1] = t.AudioPath
		}
		h.audio[turnOf[i]] = p
	}
	if len(audioErrs) > 0 {
		return fmt.Errorf("%w: %w", app.ErrAudioNotSaved, errors.Join(audioErrs...))
	}
	return nil
}

// saveAudio writes one turn's audio atomically and returns its absolute path.
func (h *History) saveAudio(r app.TurnRecord) (string, error) {
	dir := filepath.Join(h.AudioDir, strconv.FormatInt(h.conv, 10))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	at := r.Start
	if at.IsZero() {
		at = time.Now()
	}
	name := fmt.Sprintf("%s-%d-%s.wav", at.UTC().Format("20060102T150405.000Z"), r.Turn, r.Role)
	path, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".part-*.wav")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; removes what a failure left
	bw := bufio.NewWriterSize(tmp, 64<<10)
	err = audio.WriteWAV(bw, &audio.Buffer{Format: audio.Format{SampleRate: r.AudioRate, Channels: 1}, Data: r.Audio}, audio.S16)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("save %s: %w", path, err)
	}
	return path, nil
}
