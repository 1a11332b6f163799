package chattts

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/parley-voice/parley/gpu"
)

// Format is the export set's config.json "format" value; FormatVersion the version this
// engine reads.
const (
	Format        = "parley-chattts-onnx"
	FormatVersion = 1
	ConfigFile    = "config.json"
)

// ErrModel wraps every problem with an export directory.
var ErrModel = errors.New("chattts: bad model")

// ModelConfig is config.json of an export set (train/chattts/CONTRACT.md).
type ModelConfig struct {
	Format    string            `json:"format"`
	Version   int               `json:"version"`
	ModelType string            `json:"model_type"`
	Size      string            `json:"size"`
	Comment   string            `json:"comment"`
	Files     map[string]string `json:"files"`
	Frontend  struct {
		Type  string `json:"type"`  // "wordpiece" | "espeak-ipa"
		Voice string `json:"voice"` // espeak-ng voice for espeak-ipa
	} `json:"frontend"`
	GPT struct {
		Hidden         int `json:"hidden"`
		Layers         int `json:"layers"`
		Heads          int `json:"heads"`
		HeadDim        int `json:"head_dim"`
		NumTextTokens  int `json:"num_text_tokens"`
		NumAudioTokens int `json:"num_audio_tokens"`
		NumVQ          int `json:"num_vq"`
		MaxPositions   int `json:"max_positions"`
	} `json:"gpt"`
	Tokens  map[string]int `json:"tokens"`
	EOSCode int            `json:"eos_code"`
	EOSText int            `json:"eos_text"`
	Speaker struct {
		Dim      int    `json:"dim"`
		Token    string `json:"token"`
		StatFile string `json:"stat_file"`
		// SeedFilter (optional) steers seed speakers away from a part of the speaker space
		// the model renders badly (the demo voice whispers there).
		SeedFilter *SeedFilter `json:"seed_filter,omitempty"`
		// SuggestedSeeds (optional): seeds measured to be voiced, from the lowest voice to the
		// highest (tts.SeedSuggester).
		SuggestedSeeds []int64 `json:"suggested_seeds,omitempty"`
	} `json:"speaker"`
	Audio struct {
		SampleRate       int     `json:"sample_rate"`
		NFFT             int     `json:"n_fft"`
		Hop              int     `json:"hop"`
		Window           string  `json:"window"`
		Center           bool    `json:"center"`
		NMels            int     `json:"n_mels"`
		MelFramesPerCode int     `json:"mel_frames_per_code"`
		MagMax           float64 `json:"mag_max"`
	} `json:"audio"`
	Refine          DecodeDefaults `json:"refine"`
	Code            DecodeDefaults `json:"code"`
	MinTokensToKeep int            `json:"min_tokens_to_keep"`
	DefaultSeed     *int64         `json:"default_seed"` // the model's own default voice, if it names one
	Card            *Card          `json:"card"`         // measured quality (Parley's own models)
	// Speed is how the voice takes a speed: "native" (its [speed_N] tokens) or "time-scale"
	// (spoken at normal tempo, the audio time-scaled). "" means native, except for the demo
	// sizes: Parley's demo voice barely moves its duration with [speed_N] on new sentences.
	Speed string      `json:"speed,omitempty"`
	DVAE  *DVAEConfig `json:"dvae"`
	// ModelID is the export's identity (the exporter writes it; older exports have none): a
	// clone voice records it, so that another model, or another version of this one under
	// the same name, refuses the voice's codes instead of speaking them as noise.
	ModelID string `json:"model_id,omitempty"`
}

// DVAEConfig describes the export's speech codes. A model trained with neutral streams never
// saw anything but NeutralCode in them (a small GPT cannot predict the second residual of
// each FSQ group), so the engine writes that code there instead of sampling, and a clone
// prompt is given the same.
type DVAEConfig struct {
	NeutralStreams []int `json:"neutral_streams"`
	NeutralCode    int   `json:"neutral_code"`
}

// neutral reports whether stream q is a neutral stream, and its code.
func (c *ModelConfig) neutral(q int) (int32, bool) {
	if c.DVAE == nil {
		return 0, false
	}
	for _, s := range c.DVAE.NeutralStreams {
		if s == q {
			return int32(c.DVAE.NeutralCode), true
		}
	}
	return 0, false
}

// Neutralize sets the neutral streams of codes (frames × num_vq, row-major) to the neutral code.
func (c *ModelConfig) Neutralize(codes []int32) {
	Q := c.GPT.NumVQ
	for q := 0; q < Q; q++ {
		if code, ok := c.neutral(q); ok {
			for i := q; i < len(codes); i += Q {
				codes[i] = code
			}
		}
	}
}

// Card is a model's measured quality, as its trainer recorded it in config.json.
type Card struct {
	Intelligibility *struct {
		Metric    string  `json:"metric"`
		Value     float64 `json:"value"`
		Goal      float64 `json:"goal"` // the value to meet: a ratio to espeak-ng's when Ratio is set
		Ratio     float64 `json:"ratio"`
		MeetsGoal bool    `json:"meets_goal"`
	} `json:"intelligibility"`
	Measured string `json:"measured"`
}

// MeetsGoal reports whether the export in dir carries a card saying it meets the
// intelligibility goal (Parley's demo voice becomes the default voice only then).
func MeetsGoal(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return false
	}
	var c ModelConfig
	if json.Unmarshal(b, &c) != nil || c.Card == nil || c.Card.Intelligibility == nil {
		return false
	}
	return c.Card.Intelligibility.MeetsGoal
}

// DecodeDefaults are the refine/code sampling settings an export ships with.
type DecodeDefaults struct {
	Enabled           *bool   `json:"enabled"`
	Temperature       float32 `json:"temperature"`
	TopP              float32 `json:"top_p"`
	TopK              int     `json:"top_k"`
	RepetitionPenalty float32 `json:"repetition_penalty"`
	RepetitionWindow  int     `json:"repetition_window"`
	MaxNewTokens      int     `json:"max_new_tokens"`
	MinNewTokens      int     `json:"min_new_tokens"`
	// MinFramesPerToken also holds the end token back for this many frames per text token
	// of the sentence (not of a clone prompt's text): a small GPT may otherwise end a
	// sentence at once or half-way, most often after a clone prompt. 0 = off (ChatTTS).
	MinFramesPerToken float64 `json:"min_frames_per_token"`
	// SampleWeight is the share of a clone voice's prompted sequence in the code logits;
	// the rest comes from the same text without the speaker sample (decodeOptions.guide).
	// 0 or 1 = the sample alone, as ChatTTS's spk_smp.
	SampleWeight float64 `json:"sample_weight,omitempty"`
	Prompt       string  `json:"prompt"`
	// SampleFormat is where a clone's sample text goes: "[Stts][spk_emb]{sample}{prompt}{text}[Ptts]"
	// (upstream ChatTTS) or "[Stts][spk_emb]{prompt}{sample}{text}[Ptts]" (Parley's demo
	// voice). "" = upstream's, except for the demo size, whose exports before the key have
	// Parley's.
	SampleFormat string `json:"sample_format,omitempty"`
}

const (
	sampleFirstFormat = "[Stts][spk_emb]{sample}{prompt}{text}[Ptts]"
	promptFirstFormat = "[Stts][spk_emb]{prompt}{sample}{text}[Ptts]"
)

// sampleFirst reports whether a clone's sample text comes before [speed_N] in the code prompt.
func (c *ModelConfig) sampleFirst() bool {
	switch c.Code.SampleFormat {
	case sampleFirstFormat:
		return true
	case promptFirstFormat:
		return false
	}
	return !c.demoFamily()
}

// demoFamily reports whether the model is Parley's demo voice in any of its sizes (demo, demo8,
// demo-dec12, …: one GPT recipe), for the behaviours older exports leave unstated.
func (c *ModelConfig) demoFamily() bool {
	return strings.HasPrefix(c.Size, "demo")
}

// Graph I/O names (train/chattts/CONTRACT.md).
var (
	gptInputs      = []string{"input_ids", "text_mask", "spk_emb", "attention_mask", "position_ids", "past_kv"}
	gptOutputs     = []string{"logits_text", "logits_code", "hidden", "present_kv"}
	decoderInputs  = []string{"hiddens"}
	decoderOutputs = []string{"mel"}
	vocosInputs    = []string{"mel"}
	vocosOutputs   = []string{"mag", "phase"}
)

// ReadModelConfig reads and checks config.json in dir. Every missing file it names is
// reported in one error.
func ReadModelConfig(dir string) (*ModelConfig, error) {
	path := filepath.Join(dir, ConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrModel, dir, err)
	}
	if len(b) > 16<<20 {
		return nil, fmt.Errorf("%w: %s is %d bytes", ErrModel, path, len(b))
	}
	c, err := ParseModelConfig(path, b)
	if err != nil {
		return nil, err
	}
	var missing []string
	required := []string{"gpt", "decoder", "vocos", "tokenizer", "spk_stat"}
	for _, part := range append(required, Int8File) {
		f := c.Files[part]
		if f == "" {
			if slices.Contains(required, part) {
				missing = append(missing, fmt.Sprintf("files.%s (not named in %s)", part, ConfigFile))
			}
			continue
		}
		if filepath.IsAbs(f) || strings.Contains(filepath.ToSlash(f), "..") {
			return nil, fmt.Errorf("%w: %s: files.%s %q must be a name inside the model directory", ErrModel, path, part, f)
		}
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s is missing %s", ErrModel, dir, strings.Join(missing, ", "))
	}
	return c, nil
}

// ParseModelConfig parses and checks config.json content (name is used in errors).
func ParseModelConfig(name string, b []byte) (*ModelConfig, error) {
	var c ModelConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrModel, name, err)
	}
	if err := c.check(name); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *ModelConfig) check(path string) error {
	var bad []string
	want := func(ok bool, f string, a ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(f, a...))
		}
	}
	want(c.Format == Format, "format %q (want %q)", c.Format, Format)
	want(c.Version == FormatVersion, "version %d (this Parley reads %d)", c.Version, FormatVersion)
	g := c.GPT
	want(g.Hidden > 0 && g.Hidden <= 1<<14, "gpt.hidden %d", g.Hidden)
	want(g.Layers > 0 && g.Layers <= 256, "gpt.layers %d", g.Layers)
	want(g.Heads > 0 && g.HeadDim > 0 && g.Heads*g.HeadDim == g.Hidden, "gpt.heads %d × head_dim %d ≠ hidden %d", g.Heads, g.HeadDim, g.Hidden)
	want(g.NumVQ > 0 && g.NumVQ <= 16, "gpt.num_vq %d", g.NumVQ)
	want(g.NumAudioTokens > 1 && g.NumAudioTokens <= 1<<16, "gpt.num_audio_tokens %d", g.NumAudioTokens)
	want(g.NumTextTokens > 1 && g.NumTextTokens <= 1<<20, "gpt.num_text_tokens %d", g.NumTextTokens)
	want(g.MaxPositions > 8, "gpt.max_positions %d", g.MaxPositions)
	want(c.EOSCode >= 0 && c.EOSCode < g.NumAudioTokens, "eos_code %d outside 0..%d", c.EOSCode, g.NumAudioTokens-1)
	want(c.EOSText >= 0 && c.EOSText < g.NumTextTokens, "eos_text %d outside 0..%d", c.EOSText, g.NumTextTokens-1)
	want(c.Speaker.Dim == g.Hidden, "speaker.dim %d ≠ gpt.hidden %d", c.Speaker.Dim, g.Hidden)
	want(len(c.Speaker.SuggestedSeeds) <= MaxSuggestedSeeds, "speaker.suggested_seeds holds %d seeds (at most %d)", len(c.Speaker.SuggestedSeeds), MaxSuggestedSeeds)
	for _, s := range c.Speaker.SuggestedSeeds {
		want(s != 0, "speaker.suggested_seeds holds seed 0 (no seed)")
	}
	if f := c.Speaker.SeedFilter; f != nil {
		if err := f.check(c.Speaker.Dim); err != nil {
			bad = append(bad, "speaker.seed_filter: "+err.Error())
		}
	}
	a := c.Audio
	want(a.SampleRate >= 8000 && a.SampleRate <= 192000, "audio.sample_rate %d", a.SampleRate)
	want(a.NFFT >= 4 && a.NFFT&(a.NFFT-1) == 0, "audio.n_fft %d (want a power of two)", a.NFFT)
	want(a.Hop > 0 && a.Hop <= a.NFFT/2, "audio.hop %d", a.Hop)
	want(a.Window == "" || a.Window == "hann_periodic", "audio.window %q (want hann_periodic)", a.Window)
	want(a.Center, "audio.center false (Vocos's ISTFT head is centred)")
	want(a.MelFramesPerCode > 0 && a.MelFramesPerCode <= 8, "audio.mel_frames_per_code %d", a.MelFramesPerCode)
	switch c.Frontend.Type {
	case "", "wordpiece", "espeak-ipa":
	default:
		want(false, "frontend.type %q (want wordpiece or espeak-ipa)", c.Frontend.Type)
	}
	for _, t := range []string{"[Stts]", "[Ptts]", "[spk_emb]", "[empty_spk]", "[Sbreak]", "[Pbreak]", "[Ebreak]", "[break_0]"} {
		id, ok := c.Tokens[t]
		want(ok && id >= 0 && id < g.NumTextTokens, "tokens[%q] missing or outside the text vocabulary", t)
	}
	for _, d := range []struct {
		name string
		v    float64
	}{{"code", c.Code.MinFramesPerToken}, {"refine", c.Refine.MinFramesPerToken}} {
		want(d.v >= 0 && d.v <= 64, "%s.min_frames_per_token %g (want 0..64)", d.name, d.v)
	}
	want(c.Code.SampleWeight >= 0 && c.Code.SampleWeight <= 1, "code.sample_weight %g (want 0..1)", c.Code.SampleWeight)
	if d := c.DVAE; d != nil && len(d.NeutralStreams) > 0 {
		want(d.NeutralCode >= 0 && d.NeutralCode < c.EOSCode, "dvae.neutral_code %d outside 0..%d", d.NeutralCode, c.EOSCode-1)
		for _, q := range d.NeutralStreams {
			want(q > 0 && q < g.NumVQ, "dvae.neutral_streams holds %d (want 1..%d: stream 0 carries the speech)", q, g.NumVQ-1)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrModel, path, strings.Join(bad, "; "))
	}
	return nil
}

// readSpkStat reads spk_stat.bin: float32 little-endian, std then mean (2·dim values).
func readSpkStat(path string, dim int) (SpkStat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return SpkStat{}, fmt.Errorf("%w: %w", ErrModel, err)
	}
	if len(b) != 8*dim {
		return SpkStat{}, fmt.Errorf("%w: %s holds %d bytes, want %d (float32 std and mean for %d dimensions)", ErrModel, path, len(b), 8*dim, dim)
	}
	v := make([]float32, 2*dim)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	s, err := NewSpkStat(v)
	if err != nil {
		return SpkStat{}, fmt.Errorf("%w: %s: %w", ErrModel, path, err)
	}
	return s, nil
}

// dimCheck compares a declared tensor shape with what the config implies (−1 in want: any).
func dimCheck(info *gpu.ModelInfo, name string, input bool, typ string, want ...int64) string {
	var t gpu.TensorInfo
	var ok bool
	if input {
		t, ok = info.Input(name)
	} else {
		t, ok = info.Output(name)
	}
	if !ok {
		return fmt.Sprintf("no tensor %s", name)
	}
	if t.Type != typ {
		return fmt.Sprintf("%s is %s, want %s", name, t.Type, typ)
	}
	if len(t.Shape) != len(want) {
		return fmt.Sprintf("%s has shape %v, want %d dimensions %v", name, t.Shape, len(want), want)
	}
	for i, w := range want {
		if w >= 0 && t.Shape[i] >= 0 && t.Shape[i] != w {
			return fmt.Sprintf("%s has shape %v, want %v", name, t.Shape, want)
		}
	}
	return ""
}

// checkGraphs verifies every graph's declared inputs and outputs against the config, naming
// every mismatch of one file in one line.
func (c *ModelConfig) checkGraphs(gptI, decI, vocI *gpu.ModelInfo) error {
	g := c.GPT
	H, L, A, V, Q := int64(g.Hidden), int64(g.Layers), int64(g.NumAudioTokens), int64(g.NumTextTokens), int64(g.NumVQ)
	bins, mels := int64(c.Audio.NFFT/2+1), int64(c.Audio.NMels)
	type chk struct {
		name  string
		input bool
		typ   string
		shape []int64
	}
	for _, x := range []struct {
		info *gpu.ModelInfo
		c    []chk
	}{
		{gptI, []chk{
			{"input_ids", true, "int64", []int64{-1, -1, Q}},
			{"text_mask", true, "bool", []int64{-1, -1}},
			{"spk_emb", true, "float32", []int64{-1, H}},
			{"attention_mask", true, "int64", []int64{-1, -1}},
			{"position_ids", true, "int64", []int64{-1, -1}},
			{"past_kv", true, "float32", []int64{L, 2, -1, int64(g.Heads), -1, int64(g.HeadDim)}},
			{"logits_text", false, "float32", []int64{-1, V}},
			{"logits_code", false, "float32", []int64{-1, Q, A}},
			{"hidden", false, "float32", []int64{-1, H}},
			{"present_kv", false, "float32", []int64{L, 2, -1, int64(g.Heads), -1, int64(g.HeadDim)}},
		}},
		{decI, []chk{
			{"hiddens", true, "float32", []int64{-1, -1, H}},
			{"mel", false, "float32", []int64{-1, mels, -1}},
		}},
		{vocI, []chk{
			{"mel", true, "float32", []int64{-1, mels, -1}},
			{"mag", false, "float32", []int64{-1, bins, -1}},
			{"phase", false, "float32", []int64{-1, bins, -1}},
		}},
	} {
		var bad []string
		for _, k := range x.c {
			if s := dimCheck(x.info, k.name, k.input, k.typ, k.shape...); s != "" {
				bad = append(bad, s)
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("%w: %s does not match %s: %s", gpu.ErrBadModel, x.info.Path, ConfigFile, strings.Join(bad, "; "))
		}
	}
	return nil
}
