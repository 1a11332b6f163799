// Package voices is Parley's voice library: a voice is a preset, a seed, an embedding, a mix of
// voices or (later) a clone, with default controls. Each voice is one self-describing JSON file
// under <data dir>/voices/. The package also holds the speaker-string codec (compact text form
// of a speaker embedding, like ChatTTS's speaker strings).
package voices

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/parley-voice/parley/tts"
	"io"
	"math"
	"regexp"
	"strings"
	"time"
)

// Errors.
var (
	ErrInvalid  = errors.New("voices: invalid voice")
	ErrNotFound = errors.New("voices: no such voice")
	ErrExists   = errors.New("voices: voice already exists")
)

// Format and Version identify voice files.
const (
	Format  = "parley-voice"
	Version = 1
	// MaxFileBytes bounds a voice file (a 510×256 embedding in JSON fits comfortably).
	MaxFileBytes = 8 << 20
	MaxMixParts  = 16
)

// Kinds of voice.
const (
	KindPreset    = "preset"    // an engine's named voice (espeak "en-us+f3", Kokoro "af_heart")
	KindSeed      = "seed"      // a seed the engine maps to a voice
	KindEmbedding = "embedding" // a stored speaker/style embedding
	KindMix       = "mix"       // a weighted blend of presets
	KindClone     = "clone"     // a recording's transcript and DVAE codes, the in-context prompt (ChatTTS)
)

// Clone voices' prompt limits. ChatTTS's audio codes are 0..624 (625 is the end of speech) in
// every stream; a prompt is at most MaxSampleFrames frames (30 s at 46.875 frames/s).
const (
	PromptCodes     = 625
	MaxSampleFrames = 1408
	MaxSampleText   = 2000
)

// AnyDim is EngineDim's answer for engines whose embedding size depends on the installed
// model (ChatTTS: 768 for the official model, the GPT's hidden size for others); the engine
// checks the size when it synthesizes.
const AnyDim = -1

// EngineDim is the embedding size an engine takes (per row, for Kokoro; 0 for engines that
// take none; AnyDim when it depends on the model); ok is false for engines the library does
// not know.
func EngineDim(engine string) (dim int, ok bool) {
	switch engine {
	case "kokoro":
		return 256, true
	case "chattts":
		return AnyDim, true
	case "espeak":
		return 0, true
	}
	return 0, false
}

// Defaults are the controls a voice applies unless the request overrides them.
type Defaults struct {
	Temperature float64 `json:"temperature,omitempty"`
	TopP        float64 `json:"top_p,omitempty"`
	TopK        int     `json:"top_k,omitempty"`
	Speed       float64 `json:"speed,omitempty"`
	Language    string  `json:"language,omitempty"`
}

// Part is one component of a mix.
type Part struct {
	Voice  string  `json:"voice"`
	Weight float64 `json:"weight"`
}

// Embedding is a stored vector: Rows × Dim floats.
type Embedding struct {
	Dim  int       `json:"dim"`
	Rows int       `json:"rows,omitempty"` // 0 or 1 = one vector
	Data []float32 `json:"data,omitempty"`
	// Speaker is the same data as a speaker string (Parley's "spk1:…" or a ChatTTS speaker
	// string); either it or Data may be given.
	Speaker string `json:"speaker,omitempty"`
}

// Voice is one voice in the library.
type Voice struct {
	Format      string     `json:"format"`
	Version     int        `json:"version"`
	Name        string     `json:"name"`
	Engine      string     `json:"engine"`
	Kind        string     `json:"kind"`
	Description string     `json:"description,omitempty"`
	Preset      string     `json:"preset,omitempty"`
	Seed        *int64     `json:"seed,omitempty"`
	Embedding   *Embedding `json:"embedding,omitempty"`
	Mix         []Part     `json:"mix,omitempty"`
	Sample      *Sample    `json:"sample,omitempty"`
	Defaults    Defaults   `json:"defaults"`
	Created     time.Time  `json:"created"`
}

// Sample is a clone voice's prompt: what the person said in the recording the voice was
// cloned from and that recording's DVAE codes (not the audio). The engine puts both before
// every sentence, as ChatTTS's sample-audio speaker does. A clone voice may also carry a Seed:
// the seed speaker closest to the recording, used as its speaker vector.
type Sample struct {
	Text    string  `json:"text"`
	NumVQ   int     `json:"num_vq"`             // code streams (ChatTTS: 4)
	Codes   []int32 `json:"codes"`              // frames × NumVQ, row-major
	Model   string  `json:"model,omitempty"`    // the voice model the codes were made with
	ModelID string  `json:"model_id,omitempty"` // that model's identity (its config.json model_id), when it declares one
	Seconds float64 `json:"seconds,omitempty"`  // of the recording
	// Pitch is the shift in semitones the voice is spoken with (0: none): how far the
	// model's voice came out from the recording's median pitch when the clone was made.
	Pitch float64 `json:"pitch,omitempty"`
}

// check validates a prompt: shape, length and every code's range.
func (s *Sample) check() error {
	if strings.TrimSpace(s.Text) == "" || len(s.Text) > MaxSampleText {
		return fmt.Errorf("clone prompt needs the recording's transcript (at most %d bytes)", MaxSampleText)
	}
	if s.NumVQ < 1 || s.NumVQ > 16 {
		return fmt.Errorf("clone prompt has %d code streams", s.NumVQ)
	}
	if len(s.Codes) == 0 || len(s.Codes)%s.NumVQ != 0 {
		return fmt.Errorf("clone prompt of %d codes is not whole frames of %d", len(s.Codes), s.NumVQ)
	}
	if f := len(s.Codes) / s.NumVQ; f > MaxSampleFrames {
		return fmt.Errorf("clone prompt of %d frames (at most %d)", f, MaxSampleFrames)
	}
	for i, c := range s.Codes {
		if c < 0 || c >= PromptCodes {
			return fmt.Errorf("clone prompt code %d at frame %d, stream %d is outside 0..%d (a damaged or foreign voice file)", c, i/s.NumVQ, i%s.NumVQ, PromptCodes-1)
		}
	}
	if math.IsNaN(s.Seconds) || s.Seconds < 0 {
		return fmt.Errorf("clone prompt length %v s", s.Seconds)
	}
	if math.IsNaN(s.Pitch) || math.Abs(s.Pitch) > tts.MaxPitch {
		return fmt.Errorf("clone pitch shift %v semitones (at most %v either way)", s.Pitch, tts.MaxPitch)
	}
	return nil
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// ValidName reports whether n can name a voice: lower-case letters, digits, '_', '.', '-',
// starting with a letter or digit, at most 64 characters, and no "..". Names never contain
// path separators.
func ValidName(n string) error {
	if !nameRE.MatchString(n) || strings.Contains(n, "..") {
		return fmt.Errorf("%w: name %q (use a-z, 0-9, '_', '.', '-', start with a letter or digit, ≤64 characters)", ErrInvalid, n)
	}
	return nil
}

// Validate checks a voice completely: format, name, engine, kind-specific fields, embedding
// size for the engine, finite numbers, sane defaults.
func (v *Voice) Validate() error {
	if v.Format != Format {
		return fmt.Errorf("%w: format %q (want %q)", ErrInvalid, v.Format, Format)
	}
	if v.Version < 1 || v.Version > Version {
		return fmt.Errorf("%w: version %d (this Parley reads up to %d)", ErrInvalid, v.Version, Version)
	}
	if err := ValidName(v.Name); err != nil {
		return err
	}
	dim, ok := EngineDim(v.Engine)
	if !ok {
		return fmt.Errorf("%w: %s: unknown engine %q (have espeak, kokoro, chattts)", ErrInvalid, v.Name, v.Engine)
	}
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, v.Name, fmt.Sprintf(f, a...))
	}
	switch v.Kind {
	case KindPreset:
		if v.Preset == "" || len(v.Preset) > 128 || strings.ContainsAny(v.Preset, "/\\\x00") {
			return bad("preset voice needs a preset name without path characters")
		}
	case KindSeed:
		if v.Seed == nil {
			return bad("seed voice needs a seed")
		}
	case KindEmbedding:
		if v.Embedding == nil {
			return bad("embedding voice needs an embedding")
		}
		if dim == 0 {
			return bad("engine %s takes no embeddings", v.Engine)
		}
		if err := v.Embedding.normalize(); err != nil {
			return bad("%v", err)
		}
		if dim != AnyDim && v.Embedding.Dim != dim {
			return bad("embedding of dimension %d, engine %s needs %d", v.Embedding.Dim, v.Engine, dim)
		}
	case KindMix:
		if len(v.Mix) < 1 || len(v.Mix) > MaxMixParts {
			return bad("mix needs 1..%d parts", MaxMixParts)
		}
		var sum float64
		for _, p := range v.Mix {
			if p.Voice == "" || p.Voice == v.Name || strings.ContainsAny(p.Voice, "/\\\x00") || len(p.Voice) > 128 {
				return bad("mix part %q is not a voice name", p.Voice)
			}
			if math.IsNaN(p.Weight) || math.IsInf(p.Weight, 0) || p.Weight < 0 {
				return bad("mix weight %v for %s", p.Weight, p.Voice)
			}
			sum += p.Weight
		}
		if sum <= 0 {
			return bad("mix weights sum to zero")
		}
	case KindClone:
		if v.Engine != "chattts" {
			return bad("clone voices are ChatTTS voices, not %s", v.Engine)
		}
		if v.Sample == nil {
			return bad("clone voice needs its prompt (sample)")
		}
		if err := v.Sample.check(); err != nil {
			return bad("%v", err)
		}
	default:
		return bad("unknown kind %q (have preset, seed, embedding, mix, clone)", v.Kind)
	}
	if v.Sample != nil && v.Kind != KindClone {
		return bad("only clone voices carry a prompt (sample)")
	}
	d := v.Defaults
	for name, x := range map[string]float64{"temperature": d.Temperature, "top_p": d.TopP, "speed": d.Speed} {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return bad("default %s %v", name, x)
		}
	}
	if d.Temperature > 2 || d.TopP > 1 || d.TopK < 0 || d.TopK > 1000 || (d.Speed != 0 && (d.Speed < 0.25 || d.Speed > 4)) {
		return bad("defaults out of range (temperature ≤2, top_p ≤1, top_k 0..1000, speed 0.25..4)")
	}
	if len(d.Language) > 16 || len(v.Description) > 1024 {
		return bad("language or description too long")
	}
	return nil
}

// normalize fills Data from Speaker (or checks they agree) and validates the numbers.
func (e *Embedding) normalize() error {
	if e.Speaker != "" {
		data, err := DecodeAnySpeaker(e.Speaker)
		if err != nil {
			return err
		}
		if len(e.Data) > 0 && len(e.Data) != len(data) {
			return fmt.Errorf("embedding data and speaker string disagree")
		}
		if len(e.Data) == 0 {
			e.Data = data
		}
	}
	rows := max(e.Rows, 1)
	if e.Dim <= 0 || e.Dim > 8192 || rows > 4096 {
		return fmt.Errorf("embedding shape %d×%d", rows, e.Dim)
	}
	if len(e.Data) != rows*e.Dim {
		return fmt.Errorf("embedding holds %d floats, shape says %d×%d", len(e.Data), rows, e.Dim)
	}
	for i, x := range e.Data {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("embedding value %d is NaN or Inf", i)
		}
	}
	return nil
}

// Parse reads and validates one voice file. It rejects files over MaxFileBytes, unknown
// fields, trailing data and invalid voices, naming what is wrong.
func Parse(r io.Reader) (*Voice, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("voices: read: %w", err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%w: file larger than %d bytes", ErrInvalid, MaxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var v Voice
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: empty file, not a voice", ErrInvalid)
	}
	if err := dec.Decode(&v); err != nil {
		var syn *json.SyntaxError
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("%w: the voice JSON is cut short", ErrInvalid)
		case errors.As(err, &syn) && syn.Offset <= 1:
			return nil, fmt.Errorf("%w: not a JSON voice file (%v)", ErrInvalid, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the voice object", ErrInvalid)
	}
	if err := v.Validate(); err != nil {
		return nil, err
	}
	return &v, nil
}

// Marshal validates a voice and renders it as indented JSON (embedding data kept exact, as
// float32 numbers; the speaker string form is for sharing).
func (v *Voice) Marshal() ([]byte, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	out := *v
	if e := v.Embedding; e != nil && len(e.Data) > 0 {
		c := *e
		c.Speaker = ""
		out.Embedding = &c
	}
	b, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// New returns a voice with format, version and creation time filled in.
func New(name, engine, kind string) *Voice {
	return &Voice{Format: Format, Version: Version, Name: name, Engine: engine, Kind: kind, Created: time.Now().UTC().Truncate(time.Second)}
}

// Preview is a sentence to audition a voice in a language, exercising pauses and a laugh.
func Preview(lang string) string {
	switch {
	case strings.HasPrefix(lang, "zh"):
		return "你好，我是 Parley。[uv_break] 今天天气不错，[laugh] 我们聊聊吧。"
	default:
		return "Hi, I'm Parley. [uv_break] This is how I sound [laugh] when I read a sentence with a pause [break_3] and a number: 42."
	}
}
