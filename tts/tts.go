// Package tts turns text into speech: a Request (text with inline controls, voice, seed,
// sampling controls, speed, language, output format) goes to an Engine, which returns a Stream
// of PCM chunks, one or more per sentence, as soon as each is synthesized.
//
// The control grammar lives in tts/control, text normalisation in tts/textnorm, engines in
// tts/espeak and tts/kokoro. The interfaces are shaped for an autoregressive engine too (a later
// ChatTTS engine): the request carries temperature/top-p/top-k and a speaker embedding, and the
// stream can deliver chunks smaller than a sentence.
package tts

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/parley-voice/parley/tts/control"
)

// Errors.
var (
	ErrEmpty        = errors.New("tts: nothing to say")
	ErrBadRequest   = errors.New("tts: bad request")
	ErrClosed       = errors.New("tts: engine closed")
	ErrUnknownVoice = errors.New("tts: unknown voice")
	ErrTooLong      = errors.New("tts: text too long")
)

// MaxTextBytes bounds a request's text.
const MaxTextBytes = 1 << 20

// OutputFormat names an encoding for synthesized audio at the edge (files, HTTP).
type OutputFormat string

// Output formats.
const (
	FormatWAV OutputFormat = "wav" // 16-bit PCM WAV
	FormatPCM OutputFormat = "pcm" // raw signed 16-bit little-endian
	FormatF32 OutputFormat = "f32" // raw float32 little-endian
)

// VoiceWeight is one part of a voice blend.
type VoiceWeight struct {
	Voice  string  `json:"voice"`
	Weight float64 `json:"weight"`
}

// Request is one synthesis job.
type Request struct {
	Text  string // may hold ChatTTS/CosyVoice/SSML controls (see tts/control)
	Voice string // engine voice or preset name; "" = engine default
	// Seed picks a reproducible voice: espeak-ng maps it to variant/pitch/range/rate, Kokoro
	// samples a style vector, ChatTTS samples a speaker embedding. 0 = no seed (the voice as
	// named). HasSeed distinguishes an explicit 0.
	Seed    int64
	HasSeed bool
	// Sampling controls. Temperature is also "liveliness" for engines that emulate it.
	// 0 means the engine default.
	Temperature float64
	TopP        float64
	TopK        int
	Speed       float64       // 1 = normal, 0 = default (1); 0.25..4
	Language    string        // "en", "en-us", "zh", …; "" = engine default
	Format      OutputFormat  // for writers at the edge; engines always stream float32
	SampleRate  int           // resample the stream to this rate; 0 = engine native
	Embedding   []float32     // speaker/style embedding (Kokoro: 256 floats)
	Mix         []VoiceWeight // blend of named voices (takes precedence over Voice)
	// Sample is an in-context speaker prompt (a clone voice): the transcript and DVAE codes of
	// a recording, put before every sentence. Only ChatTTS takes it (clone voices are ChatTTS
	// voices: ApplyVoice sets it for no other engine).
	Sample *Sample
}

// Sample is a recording's transcript and its DVAE codes (frames × streams, row-major).
type Sample struct {
	Text  string
	Codes []int32
	// Model and ModelID name the voice model the codes were made with (its directory's
	// name, and the identity its config.json declares): an engine refuses codes another
	// model made, which it would speak as noise.
	Model, ModelID string
	// Pitch shifts the voice by this many semitones (0: none, at most MaxPitch either way):
	// how far the model's voice came out from the recording's pitch when the clone was made.
	Pitch float64
}

// MaxPitch bounds a clone voice's pitch shift (semitones either way): an octave. Further than
// that the voice is no longer a person's.
const MaxPitch = 12.0

// Validate checks ranges and fills defaults, returning the request to use.
func (r Request) Validate() (Request, error) {
	if strings.TrimSpace(r.Text) == "" {
		return r, ErrEmpty
	}
	if len(r.Text) > MaxTextBytes {
		return r, fmt.Errorf("%w: %d bytes (max %d)", ErrTooLong, len(r.Text), MaxTextBytes)
	}
	if r.Speed == 0 {
		r.Speed = 1
	}
	if math.IsNaN(r.Speed) || r.Speed < 0.25 || r.Speed > 4 {
		return r, fmt.Errorf("%w: speed %g outside 0.25..4", ErrBadRequest, r.Speed)
	}
	if math.IsNaN(r.Temperature) || r.Temperature < 0 || r.Temperature > 2 {
		return r, fmt.Errorf("%w: temperature %g outside 0..2", ErrBadRequest, r.Temperature)
	}
	if math.IsNaN(r.TopP) || r.TopP < 0 || r.TopP > 1 {
		return r, fmt.Errorf("%w: top-p %g outside 0..1", ErrBadRequest, r.TopP)
	}
	if r.TopK < 0 || r.TopK > 1000 {
		return r, fmt.Errorf("%w: top-k %d outside 0..1000", ErrBadRequest, r.TopK)
	}
	if r.SampleRate < 0 || r.SampleRate > 384000 {
		return r, fmt.Errorf("%w: sample rate %d", ErrBadRequest, r.SampleRate)
	}
	switch r.Format {
	case "", FormatWAV, FormatPCM, FormatF32:
	default:
		return r, fmt.Errorf("%w: output format %q (have wav, pcm, f32)", ErrBadRequest, r.Format)
	}
	for _, v := range r.Embedding {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return r, fmt.Errorf("%w: embedding holds NaN or Inf", ErrBadRequest)
		}
	}
	for _, m := range r.Mix {
		if math.IsNaN(m.Weight) || m.Weight < 0 {
			return r, fmt.Errorf("%w: mix weight %g for %q", ErrBadRequest, m.Weight, m.Voice)
		}
	}
	if r.Seed != 0 {
		r.HasSeed = true
	}
	return r, nil
}

// Chunk is a piece of synthesized audio: mono float32 at SampleRate.
type Chunk struct {
	Samples    []float32
	SampleRate int
	Sentence   int    // index of the sentence it belongs to
	Text       string // the sentence's spoken text (on its first chunk)
	Last       bool   // last chunk of its sentence
}

// Support says how an engine honours a control.
type Support int

// Support levels.
const (
	Ignored  Support = iota // accepted and dropped (reported as a warning at synthesis)
	Emulated                // approximated by the engine adapter (e.g. silence for a pause)
	Native                  // the model does it itself
)

func (s Support) String() string {
	switch s {
	case Native:
		return "native"
	case Emulated:
		return "emulated"
	}
	return "ignored"
}

// MarshalText makes Support print as a word in JSON.
func (s Support) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Control names the knobs and inline controls engines may support.
type Control string

// Controls reported by Capabilities.
const (
	CtlSeed        Control = "seed"
	CtlTemperature Control = "temperature"
	CtlTopP        Control = "top_p"
	CtlTopK        Control = "top_k"
	CtlSpeed       Control = "speed"
	CtlEmbedding   Control = "embedding"
	CtlMix         Control = "mix"
	CtlPause       Control = "pause"     // [uv_break] [v_break] [lbreak] [break_N] <break>
	CtlLaugh       Control = "laugh"     // [laugh] [laughter]
	CtlLaughSpan   Control = "laughter"  // <laughter>…</laughter>
	CtlBreath      Control = "breath"    // [breath]
	CtlCough       Control = "cough"     // [cough]
	CtlSigh        Control = "sigh"      // [sigh]
	CtlEmphasis    Control = "emphasis"  // <strong>, <emphasis>
	CtlRate        Control = "rate"      // [speed_N], <prosody rate>
	CtlOral        Control = "oral"      // [oral_N]
	CtlLaughLevel  Control = "laugh_N"   // [laugh_N]
	CtlLanguage    Control = "language"  // mixed-language text
	CtlStreaming   Control = "streaming" // sub-sentence chunks
)

// AllControls lists every control in a stable order.
var AllControls = []Control{CtlSeed, CtlTemperature, CtlTopP, CtlTopK, CtlSpeed, CtlEmbedding, CtlMix,
	CtlPause, CtlLaugh, CtlLaughSpan, CtlBreath, CtlCough, CtlSigh, CtlEmphasis, CtlRate, CtlOral,
	CtlLaughLevel, CtlLanguage, CtlStreaming}

// Capabilities describes an engine.
type Capabilities struct {
	Engine string `json:"engine"`
	Model  string `json:"model,omitempty"` // the model in use (its directory's name), for the user
	// Precision is the weights' precision in use where the engine has a choice ("fp32", "int8").
	Precision  string              `json:"precision,omitempty"`
	SampleRate int                 `json:"sample_rate"`
	Languages  []string            `json:"languages,omitempty"`
	Voices     []string            `json:"voices,omitempty"`
	Controls   map[Control]Support `json:"controls"`
	Notes      map[Control]string  `json:"notes,omitempty"` // how an emulation works
	// SuggestedSeeds are seeds the engine suggests trying first (SeedSuggester): voiced, and
	// spanning its voices from the lowest to the highest.
	SuggestedSeeds []int64 `json:"suggested_seeds,omitempty"`
}

// Support returns how c is honoured (Ignored when absent).
func (c Capabilities) Support(ctl Control) Support { return c.Controls[ctl] }

// Engine synthesizes speech.
type Engine interface {
	// Synthesize starts synthesis and returns a stream of chunks. Cancelling ctx (or closing
	// the stream) stops synthesis promptly, mid-sentence.
	Synthesize(ctx context.Context, req Request) (Stream, error)
	Capabilities() Capabilities
	Close() error
}

// SpeakerSampler is implemented by engines whose seeds draw a speaker embedding (Kokoro's
// audio seeds, ChatTTS's sample_random_speaker): the embedding a seed gives, so a seed voice
// can be frozen into an embedding voice that survives changes to the installed voices.
type SpeakerSampler interface {
	SampleSpeaker(seed int64) ([]float32, error)
}

// SeedSuggester is implemented by engines whose model names seeds worth trying first: seed
// speakers measured to sound like a voice (not a whisper), from its lowest voice to its highest.
// Clones and fine-tunes search them for the closest speaker before other seeds; the server
// gives them to OpenAI's voice names, deep to high.
type SeedSuggester interface {
	SuggestedSeeds() []int64
}

// SuggestedSeeds is what eng suggests (a SeedSuggester), each seed once, in its order; nil
// where it suggests none.
func SuggestedSeeds(eng Engine) []int64 {
	sg, ok := eng.(SeedSuggester)
	if !ok {
		return nil
	}
	var seeds []int64
	for _, s := range sg.SuggestedSeeds() {
		if !slices.Contains(seeds, s) {
			seeds = append(seeds, s)
		}
	}
	return seeds
}

// Warnings collects what a request asked for that the engine could not do, plus control
// grammar warnings.
func Warnings(s *control.Script, caps Capabilities, req Request) []string {
	var w []string
	for _, x := range s.Warnings {
		w = append(w, x.String())
	}
	check := func(ok bool, c Control) {
		if ok && caps.Support(c) == Ignored {
			w = append(w, fmt.Sprintf("%s: %s is not supported and was ignored", caps.Engine, c))
		}
	}
	check(req.TopP != 0, CtlTopP)
	check(req.TopK != 0, CtlTopK)
	check(req.Temperature != 0, CtlTemperature)
	check(len(req.Embedding) > 0, CtlEmbedding)
	check(len(req.Mix) > 0, CtlMix)
	check(s.Oral >= 0, CtlOral)
	check(s.LaughLevel >= 0, CtlLaughLevel)
	seen := map[control.Kind]bool{}
	for _, it := range s.Items {
		seen[it.Kind] = true
		if it.Kind == control.Text && it.Emphasis {
			seen[-1] = true
		}
		if it.Kind == control.Text && it.Laughing {
			seen[-2] = true
		}
	}
	check(seen[control.Pause], CtlPause)
	check(seen[control.Laugh], CtlLaugh)
	check(seen[control.Breath], CtlBreath)
	check(seen[control.Cough], CtlCough)
	check(seen[control.Sigh], CtlSigh)
	check(seen[control.SpeedChange], CtlRate)
	check(seen[-1], CtlEmphasis)
	check(seen[-2], CtlLaughSpan)
	return w
}
