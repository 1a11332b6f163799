// Package kokoro runs Kokoro-82M ONNX exports (onnx-community's, with input "input_ids", and
// kokoro-onnx's, with input "tokens") with their voice packs: espeak-ng IPA phonemes mapped onto
// the model's vocabulary, ≤510-token chunks at sentence boundaries, voice blending, and audio
// seeds that draw a style from the installed packs' distribution.
package kokoro

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/audio/stretch"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/control"
)

// SampleRate is Kokoro's output rate.
const SampleRate = 24000

// ModelFiles are the model file names New looks for in the model directory, in order.
var ModelFiles = []string{"model.onnx", "onnx/model.onnx", "kokoro-v1.0.onnx", "model_quantized.onnx",
	"onnx/model_quantized.onnx", "kokoro-v1.0.int8.onnx", "model_fp16.onnx", "onnx/model_fp16.onnx"}

// Config configures the engine.
type Config struct {
	Model       string      // model file (default: the first of ModelFiles present in Dir)
	Voice       string      // default voice pack (default: af_heart if present, else the first by name)
	GPU         gpu.Options // session options
	Calibration control.Calibration
	Log         *slog.Logger // nil discards
}

// Engine is a loaded Kokoro model. Safe for concurrent use.
type Engine struct {
	dir    string // model directory
	cfg    Config
	sess   *gpu.Session
	input  string
	output string
	vocab  Vocab
	packs  map[string]*Pack
	stats  *Stats
	log    *slog.Logger
	closed chan struct{}
	once   sync.Once
	// speedInt: the model takes speed as int32 (kokoro-v1.1-zh): it runs at 1 and other
	// rates are applied to its audio (time-scaled, pitch kept)
	speedInt bool
}

// New loads and validates a Kokoro model directory.
func New(dir string, cfg Config) (*Engine, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Calibration.Strengths == nil {
		cfg.Calibration = control.DefaultCalibration()
	}
	path := cfg.Model
	if path == "" {
		for _, f := range ModelFiles {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				path = filepath.Join(dir, f)
				break
			}
		}
		if path == "" {
			return nil, fmt.Errorf("kokoro: no model in %s (looked for %s)", dir, strings.Join(ModelFiles, ", "))
		}
	} else if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	info, err := gpu.Inspect(path)
	if err != nil {
		return nil, err
	}
	in, out, err := signature(info)
	if err != nil {
		return nil, err
	}
	vocab, err := LoadVocab(dir)
	if err != nil {
		// kokoro-onnx's newer exports carry config.json in the graph metadata
		for k, val := range info.Metadata {
			if v, merr := VocabFromJSON(path+" metadata "+k, []byte(val)); merr == nil {
				vocab, err = v, nil
				break
			}
		}
		if errors.Is(err, errVocabMissing) {
			// kokoro-onnx's release (kokoro-v1.0.onnx, voices-v1.0.bin) has it nowhere
			cfg.Log.Info("kokoro: no vocabulary beside the model; using Kokoro v1.0's", "model", path)
			vocab, err = BuiltinV1Vocab(), nil
		}
		if err != nil {
			return nil, err
		}
	}
	packs, err := LoadPacks(dir)
	if err != nil {
		return nil, err
	}
	stats, err := ComputeStats(packs)
	if err != nil {
		return nil, fmt.Errorf("%w in %s (voices/*.bin or voices*.npz)", err, dir)
	}
	if cfg.Voice == "" {
		cfg.Voice = defaultVoice(packs)
	} else if packs[cfg.Voice] == nil {
		return nil, fmt.Errorf("%w: %q (have %s)", tts.ErrUnknownVoice, cfg.Voice, strings.Join(names(packs), ", "))
	}
	sess, err := gpu.OpenInfo(info, []string{in, "style", "speed"}, []string{out}, cfg.GPU)
	if err != nil {
		return nil, err
	}
	cfg.Log.Debug("kokoro loaded", "model", path, "input", in, "output", out, "voices", len(packs), "provider", sess.Provider)
	sp, _ := info.Input("speed")
	return &Engine{dir: dir, cfg: cfg, sess: sess, input: in, output: out, vocab: vocab, packs: packs, stats: stats,
		log: cfg.Log, closed: make(chan struct{}), speedInt: sp.Type == "int32"}, nil
}

// signature checks the model's I/O against Kokoro's and returns the token input and the
// waveform output names.
func signature(info *gpu.ModelInfo) (string, string, error) {
	var in string
	for _, n := range []string{"input_ids", "tokens"} {
		if _, ok := info.Input(n); ok {
			in = n
		}
	}
	if in == "" {
		return "", "", fmt.Errorf("%w: %s: no token input (want input_ids or tokens int64 (1, N))", gpu.ErrBadModel, info.Path)
	}
	if err := info.RequireInputs("style", "speed"); err != nil {
		return "", "", err
	}
	for n, typ := range map[string]string{in: "int64", "style": "float32"} {
		if err := info.RequireType(n, typ); err != nil {
			return "", "", err
		}
	}
	if t, _ := info.Input("speed"); t.Type != "float32" && t.Type != "int32" {
		return "", "", fmt.Errorf("%w: %s: speed is %s, want float32 (or int32, as kokoro-v1.1-zh)", gpu.ErrBadModel, info.Path, t.Type)
	}
	if t, _ := info.Input("style"); len(t.Shape) != 2 || (t.Shape[1] != StyleDim && t.Shape[1] >= 0) {
		return "", "", fmt.Errorf("%w: %s: style input shape %v (want (1, %d))", gpu.ErrBadModel, info.Path, t.Shape, StyleDim)
	}
	if len(info.Inputs) != 3 {
		return "", "", fmt.Errorf("%w: %s: %d inputs (want 3: %s, style, speed)", gpu.ErrBadModel, info.Path, len(info.Inputs), in)
	}
	if len(info.Outputs) < 1 || info.Outputs[0].Type != "float32" {
		return "", "", fmt.Errorf("%w: %s: first output must be a float32 waveform", gpu.ErrBadModel, info.Path)
	}
	return in, info.Outputs[0].Name, nil
}

func defaultVoice(p map[string]*Pack) string {
	if p["af_heart"] != nil {
		return "af_heart"
	}
	return names(p)[0]
}

func names(p map[string]*Pack) []string {
	n := make([]string, 0, len(p))
	for k := range p {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Voices lists the installed voice packs.
func (e *Engine) Voices() []string { return names(e.packs) }

// Pack returns an installed voice pack.
func (e *Engine) Pack(name string) (*Pack, bool) { p, ok := e.packs[name]; return p, ok }

// SeedPack is the voice an audio seed gives.
func (e *Engine) SeedPack(seed int64) *Pack { return e.stats.Sample(seed) }

// SampleSpeaker implements tts.SpeakerSampler: the whole pack (rows × 256) a seed gives.
func (e *Engine) SampleSpeaker(seed int64) ([]float32, error) { return e.stats.Sample(seed).Data, nil }

var _ tts.SpeakerSampler = (*Engine)(nil)

// Close releases the session.
func (e *Engine) Close() error {
	var err error
	e.once.Do(func() {
		close(e.closed)
		err = e.sess.Close()
	})
	return err
}

// Capabilities reports how each control is honoured.
func (e *Engine) Capabilities() tts.Capabilities {
	c := tts.Capabilities{
		Engine:     "kokoro",
		Model:      filepath.Base(filepath.Clean(e.dir)),
		SampleRate: SampleRate,
		Languages:  []string{"en-us", "en-gb", "es", "fr", "hi", "it", "pt-br"}, // not zh, ja: see needsMisaki
		Voices:     e.Voices(),
		Controls: map[tts.Control]tts.Support{
			tts.CtlSeed: tts.Emulated, tts.CtlTemperature: tts.Ignored, tts.CtlTopP: tts.Ignored, tts.CtlTopK: tts.Ignored,
			tts.CtlSpeed: tts.Native, tts.CtlEmbedding: tts.Native, tts.CtlMix: tts.Native, tts.CtlPause: tts.Emulated,
			tts.CtlLaugh: tts.Emulated, tts.CtlLaughSpan: tts.Ignored, tts.CtlBreath: tts.Ignored, tts.CtlCough: tts.Ignored,
			tts.CtlSigh: tts.Ignored, tts.CtlEmphasis: tts.Emulated, tts.CtlRate: tts.Native, tts.CtlOral: tts.Ignored,
			tts.CtlLaughLevel: tts.Ignored, tts.CtlLanguage: tts.Emulated, tts.CtlStreaming: tts.Emulated,
		},
		Notes: map[tts.Control]string{
			tts.CtlSeed:      "audio seed: a style vector drawn from the installed packs' per-dimension distribution",
			tts.CtlPause:     "silence of calibrated length between model calls",
			tts.CtlMix:       "weighted average of voice packs",
			tts.CtlLaugh:     "the voice says \"ha ha!\" 1.2× faster",
			tts.CtlEmphasis:  "emphasised words at 0.9× speed",
			tts.CtlLanguage:  "each language run phonemized by espeak-ng in its language",
			tts.CtlStreaming: "one chunk per ≤510-token model call",
		},
	}
	if e.speedInt {
		c.Controls[tts.CtlSpeed], c.Controls[tts.CtlRate] = tts.Emulated, tts.Emulated
		c.Notes[tts.CtlSpeed] = "this model takes whole-number speeds only: it speaks at 1×, the audio time-scaled (pitch kept)"
		c.Notes[tts.CtlRate] = c.Notes[tts.CtlSpeed]
	}
	return c
}

// voice resolves the request's voice to a pack.
func (e *Engine) voice(req tts.Request) (*Pack, error) {
	switch {
	case len(req.Embedding) > 0:
		if len(req.Embedding)%StyleDim != 0 {
			return nil, fmt.Errorf("%w: embedding of %d floats (want %d or rows×%d)", tts.ErrBadRequest, len(req.Embedding), StyleDim, StyleDim)
		}
		return newPack("embedding", len(req.Embedding)/StyleDim, req.Embedding)
	case len(req.Mix) > 0:
		var ps []*Pack
		var ws []float64
		for _, m := range req.Mix {
			p, ok := e.packs[m.Voice]
			if !ok {
				return nil, fmt.Errorf("%w: %q in mix (have %s)", tts.ErrUnknownVoice, m.Voice, strings.Join(e.Voices(), ", "))
			}
			ps, ws = append(ps, p), append(ws, m.Weight)
		}
		return Blend("mix", ps, ws)
	case req.HasSeed:
		return e.stats.Sample(req.Seed), nil
	case req.Voice != "":
		p, ok := e.packs[req.Voice]
		if !ok {
			return nil, fmt.Errorf("%w: %q (have %s)", tts.ErrUnknownVoice, req.Voice, strings.Join(e.Voices(), ", "))
		}
		return p, nil
	}
	return e.packs[e.cfg.Voice], nil
}

// packLang is the language of a Kokoro voice from its name's first letter (af_heart →
// en-us, bf_emma → en-gb, ef → es, ff → fr, hf → hi, if → it, jf → ja, pf → pt-br, zf → zh);
// other names (blends, seeds, embeddings) default to en-us.
func packLang(name string) string {
	if len(name) >= 3 && name[2] == '_' {
		switch name[0] {
		case 'b':
			return "en-gb"
		case 'e':
			return "es"
		case 'f':
			return "fr-fr"
		case 'h':
			return "hi"
		case 'i':
			return "it"
		case 'j':
			return "ja"
		case 'p':
			return "pt-br"
		case 'z':
			return "zh"
		}
	}
	return "en-us"
}

// needsMisaki refuses Chinese and Japanese text before any audio: Kokoro's voices for them
// learnt misaki's phonemes (its own G2P: pinyin-based for Chinese, kana-based for Japanese),
// and espeak-ng's, the only phonemizer Parley has, make them mispronounce every word.
func needsMisaki(plan *tts.Plan, reqLang string) error {
	for _, s := range plan.Sentences {
		for _, seg := range s.Segments {
			if seg.Kind != control.Text {
				continue
			}
			l := strings.ToLower(espeakVoice(seg.Lang, reqLang, ""))
			if strings.HasPrefix(l, "cmn") || strings.HasPrefix(l, "zh") || strings.HasPrefix(l, "ja") {
				return fmt.Errorf("%w: kokoro: Chinese and Japanese need misaki's phonemizer, which Parley does not have "+
					"(espeak-ng's phonemes make Kokoro mispronounce them); speak %q with ChatTTS, or espeak-ng", tts.ErrBadRequest, seg.Text)
			}
		}
	}
	return nil
}

// espeakVoice picks the phonemizer language for a run: the request's language when the run
// is in it, else the run's own.
func espeakVoice(runLang, reqLang, pack string) string {
	l := strings.ToLower(runLang)
	if reqLang != "" && strings.HasPrefix(strings.ToLower(reqLang), l) {
		l = strings.ToLower(reqLang)
	}
	switch {
	case l == "en" || l == "en-us":
		if strings.HasPrefix(pack, "b") { // Kokoro's British voices are b*_
			return "en-gb"
		}
		return "en-us"
	case strings.HasPrefix(l, "zh"):
		return "cmn-latn-pinyin" // see tts/espeak voiceFor
	case l == "pt":
		return "pt-br"
	}
	return l
}

// Synthesize streams one chunk per model call (a sentence, or a ≤510-token piece of one).
func (e *Engine) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	select {
	case <-e.closed:
		return nil, tts.ErrClosed
	default:
	}
	req, err := req.Validate()
	if err != nil {
		return nil, err
	}
	pack, err := e.voice(req)
	if err != nil {
		return nil, err
	}
	if req.Language == "" {
		req.Language = packLang(pack.Name)
	}
	plan := tts.Prepare(req, e.cfg.Calibration)
	if err := needsMisaki(plan, req.Language); err != nil {
		return nil, err
	}
	warn := tts.Warnings(plan.Script, e.Capabilities(), req)
	// Sentences are phonemized as they are reached, so the first audio does not wait for a
	// long text's phonemes; up front we only make sure there is something to say.
	type call struct {
		ids   []int64
		rate  float64
		pause time.Duration
	}
	prepare := func(s tts.Sentence) ([]call, int, error) {
		var calls []call
		dropped := 0
		for _, seg := range s.Segments {
			switch seg.Kind {
			case control.Text, control.Laugh:
				text, lang, rate := seg.Text, seg.Lang, seg.Rate
				if seg.Kind == control.Laugh {
					// emulated: the voice says "ha ha" (one more "ha" per level), a little faster
					text, lang, rate = strings.TrimSpace(strings.Repeat("ha ", 2+seg.Level))+"!", "en", rate*1.2
				} else if seg.Emphasis {
					rate *= 0.9 // emulated: emphasised words a little slower
				}
				ph, err := Phonemize(text, espeakVoice(lang, req.Language, pack.Name))
				if err != nil {
					return nil, 0, err
				}
				for _, c := range Chunks(ph, MaxTokens) {
					ids, d := e.vocab.Tokenize(c)
					dropped += d
					if len(ids) > 0 {
						calls = append(calls, call{ids: ids, rate: rate})
					}
				}
			case control.Pause:
				calls = append(calls, call{pause: seg.Pause})
			}
		}
		return calls, dropped, nil
	}
	first := map[int][]call{}
	firstDropped := 0
	words := false
	for i := 0; i < len(plan.Sentences) && !words; i++ {
		calls, d, err := prepare(plan.Sentences[i])
		if err != nil {
			return nil, err
		}
		first[i], firstDropped = calls, firstDropped+d
		for _, c := range calls {
			words = words || c.ids != nil
		}
	}
	if !words {
		return nil, fmt.Errorf("%w: no speakable phonemes", tts.ErrEmpty)
	}
	s := tts.NewStreamWarn(ctx, warn, func(ctx context.Context, emit func(tts.Chunk) error, warnf func(string)) error {
		dropped := firstDropped
		defer func() {
			if dropped > 0 {
				warnf(fmt.Sprintf("kokoro: %d phoneme characters not in the model's vocabulary were dropped", dropped))
			}
		}()
		for si, sent := range plan.Sentences {
			calls, ok := first[si]
			if !ok {
				var d int
				var err error
				if calls, d, err = prepare(sent); err != nil {
					return err
				}
				dropped += d
			}
			var pending []float32 // silences wait for the next audio chunk
			for ci, c := range calls {
				if c.ids == nil {
					pending = append(pending, tts.Silence(c.pause, SampleRate)...)
					if ci < len(calls)-1 {
						continue
					}
					if err := emit(tts.Chunk{Samples: pending, SampleRate: SampleRate, Sentence: si, Last: true}); err != nil {
						return err
					}
					continue
				}
				rate := float32(c.rate)
				if e.speedInt {
					rate = 1
				}
				pcm, err := e.run(ctx, c.ids, pack.Style(len(c.ids)), rate)
				if err != nil {
					return err
				}
				if e.speedInt && c.rate != 1 {
					st := stretch.New(SampleRate, c.rate)
					pcm = append(st.Push(pcm), st.Flush()...)
				}
				out := append(pending, pcm...)
				pending = nil
				if err := emit(tts.Chunk{Samples: out, SampleRate: SampleRate, Sentence: si, Text: sent.Text, Last: ci == len(calls)-1}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return tts.Resampled(s, req.SampleRate), nil
}

// ErrRun wraps ONNX Runtime failures.
var ErrRun = errors.New("kokoro: inference failed")

// run does one model call: [0, ids…, 0] with the style row and speed. Cancelling ctx
// terminates the call inside ONNX Runtime.
func (e *Engine) run(ctx context.Context, ids []int64, style []float32, speed float32) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tok := make([]int64, 0, len(ids)+2)
	tok = append(append(append(tok, 0), ids...), 0)
	ti, err := ort.NewTensor(ort.NewShape(1, int64(len(tok))), tok)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer ti.Destroy()
	ts, err := ort.NewTensor(ort.NewShape(1, StyleDim), append([]float32(nil), style...))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer ts.Destroy()
	var tp ort.Value
	if e.speedInt {
		tp, err = ort.NewTensor(ort.NewShape(1), []int32{int32(math.Round(float64(speed)))})
	} else {
		tp, err = ort.NewTensor(ort.NewShape(1), []float32{speed})
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer tp.Destroy()
	opts, release, err := gpu.RunOptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer release()
	outs := []ort.Value{nil}
	err = e.sess.RunWithOptions([]ort.Value{ti, ts, tp}, outs, opts)
	if ctx.Err() != nil {
		if outs[0] != nil {
			outs[0].Destroy()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer outs[0].Destroy()
	t, ok := outs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, fmt.Errorf("%w: output %s is not float32", ErrRun, e.output)
	}
	return append([]float32(nil), t.GetData()...), nil
}
