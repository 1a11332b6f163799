// Package app is Parley's assistant core: the duplex turn loop that joins the ear (capture,
// VAD, wake word), the transcriber, the brain, the voice and the speaker, with barge-in,
// self-echo rejection, per-turn latency accounting, history and an event stream for the
// faces (GUI, server, CLI).
//
// The loop is written against the small interfaces in this file, so it can be driven by
// fakes in tests and by thin adapters to the engine packages (asr, llm, tts, audio) in the
// product. The package never imports Fyne.
package app

import (
	"context"
	"errors"
	"time"
)

// Errors.
var (
	ErrClosed  = errors.New("app: assistant closed")
	ErrBusy    = errors.New("app: assistant is busy")
	ErrNoEar   = errors.New("app: no capture device")
	ErrNoVoice = errors.New("app: no voice configured")
	ErrConfig  = errors.New("app: bad configuration")
	// ErrSpoken marks an error a part has already explained to the user in its own output
	// (a brain that streamed an apology): the loop records and shows it but does not speak
	// another explanation.
	ErrSpoken = errors.New("already explained to the user")
	// ErrStopSpeaking is returned by a Brain (possibly wrapped) when the user asked Parley to
	// stop talking ("stop", "be quiet", the model's stop control). The loop then ends the
	// exchange as on a barge-in: playback stops at once, generation and synthesis are
	// cancelled, nothing more is said, what had been played is recorded as interrupted, and
	// an EvStopped event is published.
	ErrStopSpeaking = errors.New("app: the user asked Parley to stop speaking")
	// ErrAudioNotSaved is wrapped by a History's error when the turns were recorded but their
	// audio could not be saved (full disk, unwritable directory): the loop reports it and goes
	// on; the text is kept.
	ErrAudioNotSaved = errors.New("turn audio not saved")
)

// SampleRate is the rate of everything the ear hears: 16 kHz mono float32.
const SampleRate = 16000

// Transcript is what the transcriber heard, with SenseVoice's rich tags.
type Transcript struct {
	Text    string `json:"text"`
	Lang    string `json:"lang,omitempty"`
	Emotion string `json:"emotion,omitempty"`
	Event   string `json:"event,omitempty"`
}

// Transcriber turns one utterance (16 kHz mono) into text with its tags. It is the one
// recogniser interface of the faces: the turn loop, the server's realtime sessions and its
// Wyoming service all hear through it.
type Transcriber interface {
	Transcribe(ctx context.Context, pcm []float32, o TranscribeOptions) (Transcript, error)
}

// TranscribeOptions are one utterance's wishes; the zero value takes the recogniser's own
// settings.
type TranscribeOptions struct {
	// Language is the language spoken ("en", "zh", …); "" = the recogniser's setting
	// (asr.language).
	Language string
	// OnSegment, when set, gets each piece of text as it is decoded when a long utterance is
	// cut at pauses into several.
	OnSegment func(text string) error
}

// Message is one earlier exchange given to the brain as context.
type Message struct {
	Role string // "user" | "assistant"
	Text string
}

// Brain answers a user turn, streaming the answer as text deltas to fn. It stops when ctx
// is cancelled or fn returns an error.
type Brain interface {
	Answer(ctx context.Context, in Transcript, history []Message, fn func(delta string) error) error
}

// Interruptible is a Brain that keeps its own conversation: after an answer was cut short
// the loop tells it what was actually spoken, before the next turn reaches it.
type Interruptible interface {
	Interrupted(spoken string)
}

// StopMatcher is a Brain that can tell from a transcript alone that the user asked Parley to
// stop talking. With one, speech heard over an answer that did not barge in (barge-in off,
// or min-speech shorter than the minimum: a short "stop") is transcribed, and a stop request
// stops the answer as a barge-in would.
type StopMatcher interface {
	IsStop(text string) bool
}

// Chunker cuts a streamed answer into sentences for synthesis.
type Chunker interface {
	Push(delta string) []string // complete sentences found so far
	Flush() []string            // whatever is left at the end of the answer
}

// Synthesizer speaks one sentence, streaming mono PCM at SampleRate() to fn.
type Synthesizer interface {
	SampleRate() int
	Synthesize(ctx context.Context, text string, fn func(pcm []float32) error) error
}

// Player plays mono PCM at its own SampleRate. Write blocks while the device queue is full
// and returns ctx.Err() when ctx ends first. Played is the number of samples that have left
// the device since it opened (monotonic; the echo reference and barge-in truncation are
// aligned on it). Stop discards everything queued and silences the output within one device
// buffer; Played stops advancing right after.
type Player interface {
	SampleRate() int
	Write(ctx context.Context, pcm []float32) error
	Played() int64
	Stop()
}

// Capture is the microphone: 16 kHz mono float32. Read blocks until samples are available.
type Capture interface {
	Read(ctx context.Context, p []float32) (int, error)
}

// MicGate is implemented by a Capture that can close the microphone while nothing listens
// (Options.MicOnDemand). SetOpen must not block; while the microphone is closed Read waits
// (for ctx, or the microphone to open again), and the audio of the closed time is missing,
// not replaced by silence.
type MicGate interface {
	SetOpen(open bool)
}

// VADEventKind says what the voice activity detector found.
type VADEventKind int

// VAD event kinds.
const (
	SpeechStart VADEventKind = iota + 1
	SpeechEnd
)

// VADEvent is a speech boundary at an absolute sample index of the stream fed to the VAD
// (counting from the first sample after Reset). SpeechStart's index includes the detector's
// own look-back; SpeechEnd's is where speech ended (before the hang-over).
type VADEvent struct {
	Kind   VADEventKind
	Sample int64
}

// VAD is a streaming voice activity detector over 16 kHz mono.
type VAD interface {
	Process(p []float32) ([]VADEvent, error)
	Reset()
}

// WakeDetector spots the wake word in 16 kHz mono.
type WakeDetector interface {
	Process(p []float32) (bool, error)
	Reset()
}

// EchoReference gives what the speaker played, time-aligned with the capture, at 16 kHz.
// Captured is called by the capture goroutine after every read with the number of samples
// read (in order), so the reference can follow the capture's clock; Reference fills dst with
// the played signal for capture samples [from, from+len(dst)), zeros where nothing played or
// nothing is known. It may be called from any goroutine. Devices with a loop-back of what
// they played implement it; without one the assistant builds it from the Player's position.
type EchoReference interface {
	Captured(n int)
	Reference(dst []float32, from int64)
}

// History records turns. The assistant calls it from the loop's own goroutine after each
// turn; it should be quick (SQLite with WAL is). A History that saves the turns' audio
// (Options.RecordAudio) and fails at that alone records the text anyway and returns an error
// wrapping ErrAudioNotSaved.
type History interface {
	AddTurns(ctx context.Context, turns ...TurnRecord) error
}

// Role of a recorded turn.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// TurnRecord is one side of an exchange as it goes to history.
type TurnRecord struct {
	Turn        int64 // the exchange number within this assistant's life
	Role        Role
	Text        string // assistant: only what was actually played
	Transcript  Transcript
	Interrupted bool
	Start, End  time.Time
	Latency     Latency
	Err         string // set when the exchange ended in an error
	// Audio is what was heard or said, with Options.RecordAudio: the user's utterance (16 kHz
	// mono; nil for a typed turn), or the answer as far as the speaker played it (mono at
	// AudioRate).
	Audio     []float32
	AudioRate int
}

// Latency is one exchange's timeline: instants at each hop, zero when not reached.
type Latency struct {
	SpeechEnd     time.Time `json:"speech_end"` // the user's last word (estimated from the VAD's sample position)
	Endpoint      time.Time `json:"endpoint"`   // the loop knew the utterance was over (after the VAD's hang-over)
	Transcript    time.Time `json:"transcript"`
	FirstToken    time.Time `json:"first_token"`
	FirstSentence time.Time `json:"first_sentence"`
	FirstAudio    time.Time `json:"first_audio"`
}

// Hop returns the time from the end of speech to t, and false when either is unknown.
func (l Latency) Hop(t time.Time) (time.Duration, bool) {
	if l.SpeechEnd.IsZero() || t.IsZero() {
		return 0, false
	}
	return t.Sub(l.SpeechEnd), true
}

// Overhead is the time from the endpoint to the first audio out, less the given model
// compute: what the pipeline itself added.
func (l Latency) Overhead(compute time.Duration) (time.Duration, bool) {
	if l.Endpoint.IsZero() || l.FirstAudio.IsZero() {
		return 0, false
	}
	return l.FirstAudio.Sub(l.Endpoint) - compute, true
}

// String renders "endpoint 400ms · transcript 520ms · first token 600ms · first sentence
// 640ms · first audio 700ms", each measured from the end of speech.
func (l Latency) String() string {
	s := ""
	for _, h := range []struct {
		name string
		t    time.Time
	}{{"endpoint", l.Endpoint}, {"transcript", l.Transcript}, {"first token", l.FirstToken}, {"first sentence", l.FirstSentence}, {"first audio", l.FirstAudio}} {
		if d, ok := l.Hop(h.t); ok {
			if s != "" {
				s += " · "
			}
			s += h.name + " " + d.Round(time.Millisecond).String()
		}
	}
	return s
}
