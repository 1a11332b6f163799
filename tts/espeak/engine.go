package espeak

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/control"
)

// Config configures the engine.
type Config struct {
	Voice       string              // default voice, e.g. "en-us" (default)
	Calibration control.Calibration // pause lengths; zero value = control.DefaultCalibration()
}

// Engine is the espeak-ng engine. It is safe for concurrent use (calls are serialised on the
// library lock, sentence by sentence).
type Engine struct {
	cfg  Config
	rate int
}

// Variants are the espeak-ng voice variants a seed chooses from (all ship with espeak-ng-data).
var Variants = []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5",
	"klatt", "klatt2", "klatt3", "croak", "whisperf", "Andy", "Annie", "Denis", "Gene", "Jacky",
	"Lee", "Michael", "Mr serious", "Tweaky", "aunty", "belinda", "boris", "david", "edward",
	"grandma", "grandpa", "iven", "john", "linda", "max", "norbert", "paul", "steph", "travis", "zac"}

// Voice is the prosodic identity a seed maps to.
type Voice struct {
	Variant string // "" = the language's default voice
	Pitch   int    // base pitch 0..100 (50 = normal)
	Range   int    // pitch range 0..100 (50 = normal)
	Rate    int    // words per minute at speed 1 (175 = normal)
}

// SeedVoice maps a seed reproducibly to a voice: variant, base pitch 25..75, range 30..90, rate
// 155..195 wpm. Seed 0 without HasSeed is the plain default voice.
func SeedVoice(seed int64) Voice {
	r := rand.New(rand.NewPCG(uint64(seed), 0x7061726c6579)) // "parley"
	return Voice{
		Variant: Variants[r.IntN(len(Variants))],
		Pitch:   25 + r.IntN(51),
		Range:   30 + r.IntN(61),
		Rate:    155 + r.IntN(41),
	}
}

// New checks that libespeak-ng works and returns the engine.
func New(cfg Config) (*Engine, error) {
	rate, err := initLib()
	if err != nil {
		return nil, err
	}
	if cfg.Voice == "" {
		cfg.Voice = "en-us"
	}
	if cfg.Calibration.Strengths == nil {
		cfg.Calibration = control.DefaultCalibration()
	}
	if _, err := Phonemes("a", cfg.Voice); err != nil {
		return nil, fmt.Errorf("espeak: default voice: %w", err)
	}
	return &Engine{cfg: cfg, rate: rate}, nil
}

// Close releases nothing (the library stays loaded for the process) and exists for the
// Engine interface.
func (e *Engine) Close() error { return nil }

// Capabilities reports how each control is honoured.
func (e *Engine) Capabilities() tts.Capabilities {
	c := tts.Capabilities{
		Engine:     "espeak-ng",
		SampleRate: e.rate,
		Languages:  languageTags(),
		Controls: map[tts.Control]tts.Support{
			tts.CtlSeed:        tts.Emulated,
			tts.CtlTemperature: tts.Emulated,
			tts.CtlTopP:        tts.Ignored,
			tts.CtlTopK:        tts.Ignored,
			tts.CtlSpeed:       tts.Native,
			tts.CtlEmbedding:   tts.Ignored,
			tts.CtlMix:         tts.Ignored,
			tts.CtlPause:       tts.Emulated,
			tts.CtlLaugh:       tts.Emulated,
			tts.CtlLaughSpan:   tts.Emulated,
			tts.CtlBreath:      tts.Emulated,
			tts.CtlCough:       tts.Emulated,
			tts.CtlSigh:        tts.Emulated,
			tts.CtlEmphasis:    tts.Emulated,
			tts.CtlRate:        tts.Native,
			tts.CtlOral:        tts.Ignored,
			tts.CtlLaughLevel:  tts.Ignored,
			tts.CtlLanguage:    tts.Native,
			tts.CtlStreaming:   tts.Emulated,
		},
		Notes: map[tts.Control]string{
			tts.CtlSeed:        "seed → voice variant, base pitch, pitch range and rate",
			tts.CtlTemperature: "widens random pitch/range/rate variation between sentences (seeded)",
			tts.CtlPause:       "silence of calibrated length (see tts/README.md)",
			tts.CtlLaugh:       "synthesized \"ha ha\" at raised pitch",
			tts.CtlLaughSpan:   "raised pitch with a 6 Hz tremolo",
			tts.CtlBreath:      "350 ms of soft shaped noise",
			tts.CtlCough:       "two short noise bursts",
			tts.CtlSigh:        "600 ms falling breathy noise",
			tts.CtlEmphasis:    "higher pitch, wider range, louder, slightly slower",
			tts.CtlStreaming:   "one chunk per sentence",
		},
	}
	return c
}

var langTags struct {
	once sync.Once
	tags []string
}

// languageTags are the tags of every language libespeak-ng speaks (read once).
func languageTags() []string {
	langTags.once.Do(func() {
		ls, _ := Languages()
		for _, l := range ls {
			langTags.tags = append(langTags.tags, l.Tag)
		}
	})
	return langTags.tags
}

// prepare resolves the base voice and the text's language and plans the sentences.
func (e *Engine) prepare(req tts.Request) (tts.Request, string, *tts.Plan, error) {
	base := e.cfg.Voice
	if req.Voice != "" {
		base = req.Voice
	}
	if req.Language != "" && req.Voice == "" {
		base = voiceFor(req.Language)
	}
	if err := checkVoice(base); err != nil {
		return req, "", nil, err
	}
	if req.Language == "" {
		// the voice names the language ("fr", "en-gb+f2", "cmn-latn-pinyin"): text in Latin
		// script is normalised and spoken in it
		req.Language = voiceLang(base)
	}
	plan := tts.Prepare(req, e.cfg.Calibration)
	if !hasWords(plan) {
		return req, "", nil, fmt.Errorf("%w: only controls, no words", tts.ErrEmpty)
	}
	return req, base, plan, nil
}

// Synthesize streams one chunk per sentence at the engine's rate (or req.SampleRate).
func (e *Engine) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	req, err := req.Validate()
	if err != nil {
		return nil, err
	}
	req, base, plan, err := e.prepare(req)
	if err != nil {
		return nil, err
	}
	warn := tts.Warnings(plan.Script, e.Capabilities(), req)
	v := Voice{Pitch: 50, Range: 50, Rate: 175}
	if req.HasSeed {
		v = SeedVoice(req.Seed)
	}
	temp := req.Temperature
	if temp == 0 {
		temp = 0.3 // ChatTTS's default temperature
	}
	reqLang := baseLang(req.Language)
	s := tts.NewStream(ctx, warn, func(ctx context.Context, emit func(tts.Chunk) error) error {
		jit := rand.New(rand.NewPCG(uint64(req.Seed), 0x6a6974746572)) // "jitter"
		for _, sent := range plan.Sentences {
			// per-sentence prosodic variation, drawn even at temperature 0 so sentence k gets the
			// same draw whatever the temperature
			dp, dr, dw := jit.NormFloat64(), jit.NormFloat64(), jit.NormFloat64()
			sv := v
			sv.Pitch += int(math.Round(dp * 10 * temp))
			sv.Range += int(math.Round(dr * 20 * temp))
			sv.Rate = int(math.Round(float64(sv.Rate) * (1 + 0.08*temp*dw)))
			pcm, err := e.sentence(ctx, sent, base, reqLang, sv, jit)
			if err != nil {
				return err
			}
			if err := emit(tts.Chunk{Samples: pcm, SampleRate: e.rate, Sentence: sent.Index, Text: sent.Text, Last: true}); err != nil {
				return err
			}
		}
		return nil
	})
	return tts.Resampled(s, req.SampleRate), nil
}

const (
	trimDB     = -50.0
	trimMargin = 15 * time.Millisecond
	wordGap    = 30 * time.Millisecond
)

func (e *Engine) sentence(ctx context.Context, sent tts.Sentence, base, reqLang string, v Voice, rng *rand.Rand) ([]float32, error) {
	var out []float32
	prevText := false
	for _, seg := range sent.Segments {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch seg.Kind {
		case control.Text:
			voice := base
			if l := baseLang(seg.Lang); l != "" && l != reqLang {
				voice = voiceFor(seg.Lang)
			}
			p := params{voice: withVariant(voice, v.Variant), rate: int(float64(v.Rate) * seg.Rate), pitch: v.Pitch, rng: v.Range, volume: 100, seed: rng.Uint32()}
			if seg.Emphasis {
				p.pitch += 12
				p.rng += 25
				p.volume = 140
				p.rate = p.rate * 9 / 10
			}
			if seg.Laughing {
				p.pitch += 15
			}
			pcm, err := synth(ctx, seg.Text, p)
			if err != nil {
				return nil, err
			}
			pcm = tts.Trim(pcm, e.rate, trimDB, trimMargin)
			if seg.Laughing {
				tremolo(pcm, e.rate, 6, 0.5)
			}
			if prevText {
				out = append(out, tts.Silence(wordGap, e.rate)...)
			}
			out = append(out, pcm...)
			prevText = true
		case control.Pause:
			out = append(out, tts.Silence(seg.Pause, e.rate)...)
			prevText = false
		case control.Laugh:
			n := 2 + seg.Level
			laugh := strings.TrimSpace(strings.Repeat("ha ", n))
			p := params{voice: withVariant(base, v.Variant), rate: int(float64(v.Rate) * 1.3 * seg.Rate), pitch: v.Pitch + 25, rng: min(100, v.Range+30), volume: 110, seed: rng.Uint32()}
			pcm, err := synth(ctx, laugh, p)
			if err != nil {
				return nil, err
			}
			out = append(out, tts.Silence(wordGap, e.rate)...)
			out = append(out, tts.Trim(pcm, e.rate, trimDB, trimMargin)...)
			out = append(out, tts.Silence(wordGap, e.rate)...)
			prevText = false
		case control.Breath:
			out = append(out, noise(rng, e.rate, 350*time.Millisecond, 0.02, envBreath)...)
			prevText = false
		case control.Cough:
			out = append(out, noise(rng, e.rate, 90*time.Millisecond, 0.25, envBurst)...)
			out = append(out, tts.Silence(60*time.Millisecond, e.rate)...)
			out = append(out, noise(rng, e.rate, 70*time.Millisecond, 0.18, envBurst)...)
			prevText = false
		case control.Sigh:
			out = append(out, noise(rng, e.rate, 600*time.Millisecond, 0.04, envSigh)...)
			prevText = false
		}
	}
	return out, nil
}

// voiceFor names the espeak-ng voice for a language tag.
func voiceFor(lang string) string {
	switch l := strings.ToLower(lang); {
	case l == "en" || l == "en-us" || l == "en_us":
		return "en-us"
	case l == "en-gb" || l == "en_gb":
		return "en-gb"
	case strings.HasPrefix(l, "zh") || l == "cmn":
		// Debian's espeak-ng 1.51 "cmn" voice reads its own pinyin ("you3") as English
		// letters and digits; the pinyin-latin variant pronounces Hanzi correctly.
		return "cmn-latn-pinyin"
	case l == "yue":
		return "yue"
	default:
		return l
	}
}

func baseLang(l string) string {
	l = strings.ToLower(l)
	if i := strings.IndexAny(l, "-_+"); i >= 0 {
		l = l[:i]
	}
	if l == "cmn" || l == "yue" {
		return "zh"
	}
	return l
}

// voiceLang is the language tag of an espeak voice name: "en-gb+f2" → "en-gb",
// "cmn-latn-pinyin" → "zh".
func voiceLang(voice string) string {
	l, _, _ := strings.Cut(strings.ToLower(voice), "+")
	if strings.HasPrefix(l, "cmn") {
		return "zh"
	}
	return l
}

// withVariant appends "+variant" unless the voice already names one.
func withVariant(voice, variant string) string {
	if variant == "" || strings.Contains(voice, "+") {
		return voice
	}
	return voice + "+" + variant
}

func checkVoice(name string) error {
	if _, err := Phonemes("a", name); err != nil {
		return fmt.Errorf("%w: %q is not an espeak-ng voice", tts.ErrUnknownVoice, name)
	}
	return nil
}

// tremolo modulates amplitude at hz with the given depth (the "laughing" colour).
func tremolo(x []float32, rate int, hz, depth float64) {
	for i := range x {
		m := 1 - depth*0.5*(1+math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
		x[i] *= float32(m)
	}
}

type envelope func(t float64) float64 // t in [0,1]

func envBreath(t float64) float64 { return math.Sin(math.Pi * t) }
func envBurst(t float64) float64  { return math.Exp(-5 * t) }
func envSigh(t float64) float64   { return math.Sin(math.Pi*math.Min(1, t*3)) * (1 - t) }

// noise renders low-passed noise with an envelope: the emulated breath, cough and sigh.
func noise(r *rand.Rand, rate int, d time.Duration, amp float64, env envelope) []float32 {
	n := int(d.Seconds() * float64(rate))
	out := make([]float32, n)
	var lp float64
	for i := range out {
		lp += 0.25 * (r.NormFloat64() - lp)
		out[i] = float32(amp * 3 * lp * env(float64(i)/float64(n)))
	}
	return out
}

func hasWords(p *tts.Plan) bool {
	for _, s := range p.Sentences {
		for _, seg := range s.Segments {
			if seg.Kind == control.Text {
				return true
			}
		}
	}
	return false
}
