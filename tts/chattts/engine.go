package chattts

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/control"
	"github.com/parley-voice/parley/tts/espeak"
	"github.com/parley-voice/parley/voices"
)

// DefaultSeed is the speaker a model without a default_seed speaks with when a request names no
// voice: ChatTTS without a speaker ([empty_spk]) changes voice from sentence to sentence, which
// no assistant wants. Parley's choice, like any seed.
const DefaultSeed = 1

// Streaming defaults (in code frames, 46.875 per second): the first audio after
// DefaultStreamFrames frames and then every DefaultStreamFrames, as ChatTTS streams; each chunk
// is re-decoded with DefaultContextFrames frames of left context and holds back
// DefaultLookaheadFrames frames until the next chunk. On the official-size decoder and Vocos
// with layer scales of trained magnitude (BenchmarkStreamingJoins) the lookahead is what
// matters: 8 frames leave joins within 2.3 % of the RMS of one-shot audio, 12 within 0.09 %
// (−61 dB), 16 within 0.0025 %; 24 frames of context are as good as 48.
const (
	DefaultStreamFrames    = 24
	DefaultContextFrames   = 24
	DefaultLookaheadFrames = 12
)

// Refine policies.
const (
	RefineAuto = "auto" // refine when the text asks for [oral_N]/[laugh_N]/[break_N] and the model allows it
	RefineOn   = "on"
	RefineOff  = "off"
)

// Config configures the engine.
type Config struct {
	GPU gpu.Options // ONNX Runtime session options
	// Voice is the default voice: "" (the model's default_seed, else DefaultSeed), "seed:N",
	// "none" (ChatTTS's [empty_spk]) or a ChatTTS speaker string.
	Voice           string
	Refine          string // RefineAuto (default), RefineOn, RefineOff
	StreamFrames    int    // 0 = DefaultStreamFrames
	ContextFrames   int    // 0 = DefaultContextFrames; <0 = none
	LookaheadFrames int    // 0 = DefaultLookaheadFrames; <0 = the minimum, 1
	MaxNewTokens    int    // 0 = the model's code.max_new_tokens
	// SampleWeight overrides the model's code.sample_weight for clone voices (0 = the
	// model's; 1 = the speaker sample alone).
	SampleWeight float64
	// Precision is the GPT's: PrecisionAuto ("" too), PrecisionFP32 or PrecisionInt8.
	Precision   string
	Calibration control.Calibration
	Log         *slog.Logger // nil discards
}

// Engine is a loaded ChatTTS export. Safe for concurrent use.
type Engine struct {
	dir   string // the export directory (config.json, gpt.onnx, …)
	cfg   Config
	mc    *ModelConfig
	files map[string]string // part → path
	gpt   *gpu.Session
	dec   *gpu.Session
	voc   *gpu.Session
	tok   *Tokenizer
	stat  SpkStat
	// precision is the GPT's in use (PrecisionFP32 or PrecisionInt8)
	precision string
	log       *slog.Logger
	mu        sync.Mutex // orders closed against busy.Add
	kvMu      sync.Mutex
	kvFree    []*kvBuffer // KV cache backing stores kept for the next decode
	closed    chan struct{}
	busy      sync.WaitGroup // model calls in flight; Close waits for them after cancelling them
	stop      context.CancelFunc
	life      context.Context // cancelled by Close: model calls in flight stop
	once      sync.Once
}

// New loads and validates an export directory: config.json, then each graph once with its
// inputs and outputs checked against the config, the tokenizer and spk_stat.bin.
func New(dir string, cfg Config) (*Engine, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Calibration.Strengths == nil {
		cfg.Calibration = control.DefaultCalibration()
	}
	switch cfg.Refine {
	case "":
		cfg.Refine = RefineAuto
	case RefineAuto, RefineOn, RefineOff:
	default:
		return nil, fmt.Errorf("chattts: refine %q (want auto, on or off)", cfg.Refine)
	}
	switch cfg.Precision {
	case "":
		cfg.Precision = PrecisionAuto
	case PrecisionAuto, PrecisionFP32, PrecisionInt8:
	default:
		return nil, fmt.Errorf("chattts: precision %q (want auto, fp32 or int8)", cfg.Precision)
	}
	if cfg.SampleWeight < 0 || cfg.SampleWeight > 1 || math.IsNaN(cfg.SampleWeight) {
		return nil, fmt.Errorf("chattts: sample weight %g (want 0..1; 0 = the model's)", cfg.SampleWeight)
	}
	if cfg.StreamFrames <= 0 {
		cfg.StreamFrames = DefaultStreamFrames
	}
	if cfg.ContextFrames == 0 {
		cfg.ContextFrames = DefaultContextFrames
	}
	if cfg.LookaheadFrames == 0 {
		cfg.LookaheadFrames = DefaultLookaheadFrames
	}
	// a chunk's last samples need the next frame (the ISTFT's final half window), so at least
	// one frame is always held back
	cfg.ContextFrames, cfg.LookaheadFrames = max(0, cfg.ContextFrames), max(1, cfg.LookaheadFrames)
	mc, err := ReadModelConfig(dir)
	if err != nil {
		return nil, err
	}
	if cfg.MaxNewTokens <= 0 {
		cfg.MaxNewTokens = mc.Code.MaxNewTokens
		if cfg.MaxNewTokens <= 0 {
			cfg.MaxNewTokens = DefaultMaxNewCodeTokens
		}
	}
	e := &Engine{dir: dir, cfg: cfg, mc: mc, files: map[string]string{}, log: cfg.Log, closed: make(chan struct{})}
	e.life, e.stop = context.WithCancel(context.Background())
	for k, f := range mc.Files {
		e.files[k] = filepath.Join(dir, f)
	}
	if e.tok, err = LoadTokenizer(e.files["tokenizer"]); err != nil {
		return nil, err
	}
	if e.tok.Len() != mc.GPT.NumTextTokens {
		return nil, fmt.Errorf("%w: %s has %d ids but gpt.num_text_tokens is %d", ErrModel, e.files["tokenizer"], e.tok.Len(), mc.GPT.NumTextTokens)
	}
	for name, id := range mc.Tokens {
		if got, ok := e.tok.ID(name); !ok || got != id {
			return nil, fmt.Errorf("%w: %s: token %s is id %d in %s but %d (found %v) in the tokenizer", ErrModel, dir, name, id, ConfigFile, got, ok)
		}
	}
	if e.stat, err = readSpkStat(e.files["spk_stat"], mc.GPT.Hidden); err != nil {
		return nil, err
	}
	e.stat.Filter = mc.Speaker.SeedFilter
	if mc.Frontend.Type == "espeak-ipa" {
		if _, err := espeak.Phonemes("a", e.espeakVoice()); err != nil {
			return nil, fmt.Errorf("chattts: %s wants espeak-ng phonemes (%s): %w", dir, e.espeakVoice(), err)
		}
	}
	open := func(part string, in, out []string) (*gpu.Session, error) {
		return gpu.Open(e.files[part], in, out, cfg.GPU)
	}
	part, precision, why, int8Info, err := e.pickGPT()
	if err != nil {
		return nil, err
	}
	if why != "" {
		cfg.Log.Warn("chattts: the GPT runs at fp32", "asked", cfg.Precision, "reason", why)
	}
	if int8Info != nil {
		e.gpt, err = gpu.OpenInfo(int8Info, gptInputs, gptOutputs, cfg.GPU)
	} else {
		e.gpt, err = open(part, gptInputs, gptOutputs)
	}
	if err != nil {
		return nil, err
	}
	e.precision = precision
	if e.dec, err = open("decoder", decoderInputs, decoderOutputs); err != nil {
		e.Close()
		return nil, err
	}
	if e.voc, err = open("vocos", vocosInputs, vocosOutputs); err != nil {
		e.Close()
		return nil, err
	}
	if err := mc.checkGraphs(e.gpt.Info, e.dec.Info, e.voc.Info); err != nil {
		e.Close()
		return nil, err
	}
	if _, err := e.voice(cfg.Voice); err != nil {
		e.Close()
		return nil, err
	}
	cfg.Log.Debug("chattts loaded", "dir", dir, "size", mc.Size, "frontend", mc.Frontend.Type,
		"layers", mc.GPT.Layers, "hidden", mc.GPT.Hidden, "provider", e.gpt.Provider, "precision", precision)
	return e, nil
}

// Close stops every stream still synthesizing, waits for them to let go of the sessions and
// releases the sessions; safe to call more than once.
func (e *Engine) Close() error {
	var errs []error
	e.once.Do(func() {
		e.mu.Lock()
		close(e.closed)
		e.mu.Unlock()
		e.stop()
		e.busy.Wait()
		for _, s := range []*gpu.Session{e.gpt, e.dec, e.voc} {
			if s != nil {
				errs = append(errs, s.Close())
			}
		}
	})
	return errors.Join(errs...)
}

// acquire registers a model call (a decode or a vocode) and returns its context, cancelled by
// ctx or by Close; release with the returned func. Calls after Close get tts.ErrClosed.
func (e *Engine) acquire(ctx context.Context) (context.Context, func(), error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.closed:
		return nil, nil, tts.ErrClosed
	default:
	}
	e.busy.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.life, cancel)
	return ctx, func() {
		stop()
		cancel()
		e.busy.Done()
	}, nil
}

// Model is the export's config.json.
func (e *Engine) Model() *ModelConfig { return e.mc }

// Tokenizer is the export's tokenizer.
func (e *Engine) Tokenizer() *Tokenizer { return e.tok }

// SampleRate is the output rate.
func (e *Engine) SampleRate() int { return e.mc.Audio.SampleRate }

// SampleSpeaker implements tts.SpeakerSampler: ChatTTS's sample_random_speaker for a seed
// (SpkStat.Sample: with the model's seed filter, the draw it keeps).
func (e *Engine) SampleSpeaker(seed int64) ([]float32, error) { return e.stat.Sample(seed), nil }

// SuggestedSeeds implements tts.SeedSuggester: the model's speaker.suggested_seeds (none for
// most models).
func (e *Engine) SuggestedSeeds() []int64 { return slices.Clone(e.mc.Speaker.SuggestedSeeds) }

var _ tts.SpeakerSampler = (*Engine)(nil)

func (e *Engine) espeakVoice() string {
	if v := e.mc.Frontend.Voice; v != "" {
		return v
	}
	return "en-us"
}

// Capabilities reports ChatTTS's controls: the sampling knobs, seeds and inline tokens are the
// model's own.
func (e *Engine) Capabilities() tts.Capabilities {
	refine := e.refineAllowed()
	lvl := tts.Native
	if !refine {
		lvl = tts.Ignored
	}
	c := tts.Capabilities{
		Engine:         "chattts",
		Model:          filepath.Base(filepath.Clean(e.dir)),
		Precision:      e.precision,
		SampleRate:     e.mc.Audio.SampleRate,
		Languages:      []string{"zh", "en"},
		Voices:         []string{"default", "none"}, // also seed:N and ChatTTS speaker strings
		SuggestedSeeds: tts.SuggestedSeeds(e),
		Controls: map[tts.Control]tts.Support{
			tts.CtlSeed: tts.Native, tts.CtlTemperature: tts.Native, tts.CtlTopP: tts.Native, tts.CtlTopK: tts.Native,
			tts.CtlSpeed: tts.Native, tts.CtlEmbedding: tts.Native, tts.CtlMix: tts.Native, tts.CtlPause: tts.Native,
			tts.CtlLaugh: tts.Native, tts.CtlLaughSpan: tts.Ignored, tts.CtlBreath: tts.Emulated, tts.CtlCough: tts.Ignored,
			tts.CtlSigh: tts.Ignored, tts.CtlEmphasis: tts.Ignored, tts.CtlRate: tts.Native, tts.CtlOral: lvl,
			tts.CtlLaughLevel: lvl, tts.CtlLanguage: tts.Native, tts.CtlStreaming: tts.Native,
		},
		Notes: map[tts.Control]string{
			tts.CtlSeed:      "speaker drawn from the model's spk_stat (randn·std + mean); sampling seeded too",
			tts.CtlSpeed:     "[speed_0]…[speed_9] in the prompt (0.5×…1.4×; beyond is clamped)",
			tts.CtlPause:     "[uv_break] [v_break] [lbreak] are model tokens; [break_N] is the refine prompt's level; other pauses are silences between model calls",
			tts.CtlBreath:    "[uv_break] (ChatTTS's unvoiced break)",
			tts.CtlMix:       "interpolated speaker vectors",
			tts.CtlStreaming: fmt.Sprintf("audio every %d code frames, re-decoded with %d frames of context", e.cfg.StreamFrames, e.cfg.ContextFrames),
		},
	}
	if !refine {
		c.Notes[tts.CtlOral] = "this model has no refine pass ([oral_N]/[laugh_N] need it)"
	}
	if e.timeScalesSpeed() {
		c.Controls[tts.CtlSpeed], c.Controls[tts.CtlRate] = tts.Emulated, tts.Emulated
		c.Notes[tts.CtlSpeed] = "spoken at normal tempo, the audio time-scaled without changing its pitch (WSOLA), 0.5×…1.4×: this model does not act on [speed_N]"
		c.Notes[tts.CtlRate] = c.Notes[tts.CtlSpeed]
	}
	if e.mc.Frontend.Type == "espeak-ipa" {
		c.Languages = []string{e.espeakVoice()}
		c.Controls[tts.CtlLanguage] = tts.Ignored
	}
	return c
}

func (e *Engine) refineAllowed() bool {
	if e.cfg.Refine == RefineOff {
		return false
	}
	return e.mc.Refine.Enabled == nil || *e.mc.Refine.Enabled
}

// voice resolves a voice name to a speaker vector (nil: no speaker, [empty_spk]).
func (e *Engine) voice(name string) ([]float32, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "" || name == "default":
		seed := int64(DefaultSeed)
		if e.mc.DefaultSeed != nil {
			seed = *e.mc.DefaultSeed
		}
		return e.stat.Sample(seed), nil
	case name == "none":
		return nil, nil
	case strings.HasPrefix(name, "seed:"):
		n, err := strconv.ParseInt(strings.TrimPrefix(name, "seed:"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: %q (want seed:N with an integer N)", tts.ErrUnknownVoice, name)
		}
		return e.stat.Sample(n), nil
	case voices.IsChatTTSSpeaker(name) || strings.HasPrefix(name, "spk1:"):
		v, err := voices.DecodeAnySpeaker(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", tts.ErrUnknownVoice, err)
		}
		if len(v) != e.stat.Dim() {
			return nil, fmt.Errorf("%w: speaker string holds %d values; this model's speakers have %d", tts.ErrUnknownVoice, len(v), e.stat.Dim())
		}
		return v, nil
	}
	return nil, fmt.Errorf("%w: %q (have default, none, seed:N or a ChatTTS speaker string)", tts.ErrUnknownVoice, name)
}

// speaker picks the request's speaker vector.
func (e *Engine) speaker(req tts.Request) ([]float32, error) {
	switch {
	case len(req.Embedding) > 0:
		if len(req.Embedding) != e.stat.Dim() {
			return nil, fmt.Errorf("%w: embedding of %d floats (this model's speakers have %d)", tts.ErrBadRequest, len(req.Embedding), e.stat.Dim())
		}
		return req.Embedding, nil
	case len(req.Mix) > 0:
		var vs [][]float32
		var ws []float64
		for _, m := range req.Mix {
			v, err := e.voice(m.Voice)
			if err != nil {
				return nil, err
			}
			if v == nil {
				return nil, fmt.Errorf("%w: %q cannot be mixed (it has no speaker vector)", tts.ErrBadRequest, m.Voice)
			}
			vs, ws = append(vs, v), append(ws, m.Weight)
		}
		return Mix(vs, ws)
	case req.HasSeed:
		return e.stat.Sample(req.Seed), nil
	case req.Voice != "":
		return e.voice(req.Voice)
	}
	return e.voice(e.cfg.Voice)
}

// samplingSeed is the decode RNG's seed: the request's seed when it has one, else a constant,
// so the same request always sounds the same.
func samplingSeed(req tts.Request) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "chattts-sampling:%v:%d", req.HasSeed, req.Seed)
	return h.Sum64()
}

// codeParams are the code pass's sampling settings: the request's, else the model's defaults.
func (e *Engine) codeParams(req tts.Request) SampleParams {
	d := e.mc.Code
	p := SampleParams{
		Temperature:       []float32{orF(float32(req.Temperature), d.Temperature, DefaultCodeTemperature)},
		TopP:              orF(float32(req.TopP), d.TopP, DefaultTopP),
		TopK:              int(orF(float32(req.TopK), float32(d.TopK), DefaultTopK)),
		RepetitionPenalty: orF(0, d.RepetitionPenalty, DefaultCodePenalty),
		Window:            d.RepetitionWindow,
		MinKeep:           e.mc.MinTokensToKeep,
		EOS:               e.mc.EOSCode,
		MinNewTokens:      d.MinNewTokens,
	}
	return p
}

func (e *Engine) refineParams(req tts.Request) SampleParams {
	d := e.mc.Refine
	return SampleParams{
		Temperature:       []float32{orF(0, d.Temperature, DefaultTextTemperature)},
		TopP:              orF(0, d.TopP, DefaultTopP),
		TopK:              int(orF(0, float32(d.TopK), DefaultTopK)),
		RepetitionPenalty: orF(0, d.RepetitionPenalty, DefaultTextPenalty),
		Window:            d.RepetitionWindow,
		MinKeep:           e.mc.MinTokensToKeep,
		EOS:               e.mc.EOSText,
		MinNewTokens:      d.MinNewTokens,
	}
}

func orF(vals ...float32) float32 {
	for _, v := range vals {
		if v != 0 {
			return v
		}
	}
	return 0
}

var controlToken = regexp.MustCompile(`\[[A-Za-z]+(?:_[A-Za-z0-9]+)*\]`)

// frontText turns a run's text into what the tokenizer gets: the text itself (wordpiece), or
// espeak-ng IPA phonemes with the control tokens and , . ; : ! ? kept (espeak-ipa).
func (e *Engine) frontText(text string) (string, error) {
	if e.mc.Frontend.Type != "espeak-ipa" {
		return text, nil
	}
	var parts []string
	last := 0
	phon := func(s string) error {
		for s != "" {
			i := strings.IndexAny(s, ",.;:!?")
			piece, mark := s, ""
			if i >= 0 {
				piece, mark, s = s[:i], s[i:i+1], s[i+1:]
			} else {
				s = ""
			}
			if strings.TrimSpace(piece) != "" {
				p, err := espeak.Phonemes(piece, e.espeakVoice())
				if err != nil {
					return err
				}
				if p = strings.TrimSpace(p); p != "" {
					parts = append(parts, p)
				}
			}
			if mark != "" {
				parts = append(parts, mark)
			}
		}
		return nil
	}
	for _, loc := range controlToken.FindAllStringIndex(text, -1) {
		if err := phon(text[last:loc[0]]); err != nil {
			return "", err
		}
		parts = append(parts, text[loc[0]:loc[1]])
		last = loc[1]
	}
	if err := phon(text[last:]); err != nil {
		return "", err
	}
	return strings.Join(parts, " "), nil
}

// tokenID returns a control token's id from config.json.
func (e *Engine) tokenID(name string) int { return e.mc.Tokens[name] }

// normalSpeed is [speed_5], 1×.
const normalSpeed = 5

// timeScalesSpeed reports whether a speed is applied to the audio rather than through the
// model's [speed_N] (see ModelConfig.Speed).
func (e *Engine) timeScalesSpeed() bool {
	switch e.mc.Speed {
	case "time-scale":
		return true
	case "native":
		return false
	}
	return e.mc.demoFamily()
}

// codePrompt is [Stts][spk_emb|empty_spk]{sample}[speed_N]{text}[Ptts] as ids: a clone's
// sample text comes before the speed, as upstream ChatTTS builds it (decorate_code_prompts:
// the prompt [speed_N] is part of the text) and its official model learnt; Parley's demo
// voice learnt [speed_N] first (ModelConfig.sampleFirst).
func (e *Engine) codePrompt(text []int, speed int, hasSpeaker bool, sample []int) []int {
	spk := "[spk_emb]"
	if !hasSpeaker {
		spk = "[empty_spk]"
	}
	ids := []int{e.tokenID("[Stts]"), e.tokenID(spk)}
	first := e.mc.sampleFirst()
	if first {
		ids = append(ids, sample...)
	}
	if id, ok := e.mc.Tokens["[speed_"+strconv.Itoa(speed)+"]"]; ok {
		ids = append(ids, id)
	}
	if !first {
		ids = append(ids, sample...)
	}
	ids = append(ids, text...)
	return append(ids, e.tokenID("[Ptts]"))
}

// refine runs ChatTTS's refine pass over a run's text ids and returns the refined ids (those
// below [break_0]).
func (e *Engine) refine(ctx context.Context, text []int, prompt string, s *Sampler) ([]int, bool, error) {
	ids := append([]int{e.tokenID("[Sbreak]")}, text...)
	ids = append(ids, e.tokenID("[Pbreak]"))
	ids = append(ids, e.tok.Encode(prompt)...)
	max := e.mc.Refine.MaxNewTokens
	if max <= 0 {
		max = DefaultMaxNewTextTokens
	}
	res, err := e.decode(ctx, ids, decodeOptions{mode: modeText, sampler: s, maxNew: max})
	if err != nil {
		return nil, false, err
	}
	keep := e.tokenID("[break_0]")
	var out []int
	for _, id := range res.Text {
		if id < keep {
			out = append(out, id)
		}
	}
	return out, res.EOS, nil
}

// vocode turns frames×hidden GPT states into audio: decoder → mel (pitch-shifted by warp, nil:
// not) → Vocos → magnitude and phase → ISTFT. It returns Hop·(2·frames−1) samples
// (mel_frames_per_code = 2).
func (e *Engine) vocode(ctx context.Context, hiddens []float32, frames int, ist *ISTFT, warp *melWarp) ([]float32, error) {
	ctx, release, err := e.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	H, M := e.mc.GPT.Hidden, e.mc.Audio.NMels
	F := frames * e.mc.Audio.MelFramesPerCode
	bins := ist.Bins()
	in, err := ort.NewTensor(ort.NewShape(1, int64(frames), int64(H)), hiddens[:frames*H])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer in.Destroy()
	mel := make([]float32, M*F)
	tMel, err := ort.NewTensor(ort.NewShape(1, int64(M), int64(F)), mel)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer tMel.Destroy()
	opts, done, err := gpu.RunOptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer done()
	if err := e.dec.RunWithOptions([]ort.Value{in}, []ort.Value{tMel}, opts); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrRun, e.files["decoder"], err)
	}
	warp.apply(mel, F) // tMel reads mel's memory
	mag := make([]float32, bins*F)
	ph := make([]float32, bins*F)
	tMag, err := ort.NewTensor(ort.NewShape(1, int64(bins), int64(F)), mag)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer tMag.Destroy()
	tPh, err := ort.NewTensor(ort.NewShape(1, int64(bins), int64(F)), ph)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer tPh.Destroy()
	if err := e.voc.RunWithOptions([]ort.Value{tMel}, []ort.Value{tMag, tPh}, opts); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrRun, e.files["vocos"], err)
	}
	return ist.Run(mag, ph, F)
}
