package chattts

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/parley-voice/parley/audio/stretch"
	"github.com/parley-voice/parley/tts"
)

// MaxRunTokens bounds the text of one GPT call: a longer stretch without a sentence end is cut
// at word boundaries, so a run never outgrows the model's positions or max_new_tokens (ChatTTS
// speaks roughly 10–15 code frames per token).
const MaxRunTokens = 100

// maxEmptyRetries is how often a decode that ends on its first frame is redone (ChatTTS's
// ensure_non_empty), drawing on from the same RNG.
const maxEmptyRetries = 3

// SpeakerSample is ChatTTS's spk_smp: a recording's transcript and its DVAE codes (frames ×
// num_vq, row-major, from dvae_encoder.onnx). Every code pass then starts from
// [Stts][spk_emb]{Text}[speed_N]{text}[Ptts] followed by the sample's frames as audio
// positions, and continues the voice from there (zero-shot cloning).
type SpeakerSample struct {
	Text  string
	Codes []int32
	// Pitch shifts the voice by this many semitones (0: none, at most tts.MaxPitch either way):
	// a clone measures how far the model's voice is from its recording's pitch.
	Pitch float64
}

// Synthesize streams speech: per sentence one or more GPT calls, audio every StreamFrames code
// frames. The same request (text, voice or seed, settings) gives bit-identical samples.
func (e *Engine) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	if req.Sample != nil { // a clone voice's prompt
		if err := e.sampleFits(req.Sample); err != nil {
			return nil, err
		}
		return e.SynthesizeWithSample(ctx, req, &SpeakerSample{Text: req.Sample.Text, Codes: req.Sample.Codes, Pitch: req.Sample.Pitch})
	}
	return e.SynthesizeWithSample(ctx, req, nil)
}

// SynthesizeWithSample is Synthesize with a speaker sample prepended to every code pass (nil:
// none).
func (e *Engine) SynthesizeWithSample(ctx context.Context, req tts.Request, smp *SpeakerSample) (tts.Stream, error) {
	req, err := req.Validate()
	if err != nil {
		return nil, err
	}
	var sample *promptSample
	if smp != nil {
		if sample, err = e.prepareSample(smp); err != nil {
			return nil, err
		}
	}
	spk, err := e.speaker(req)
	if err != nil {
		return nil, err
	}
	plan := tts.Prepare(req, e.cfg.Calibration)
	sc := plan.Script
	asked := sc.Oral >= 0 || sc.LaughLevel >= 0 || sc.BreakLevel >= 0
	refine := e.refineAllowed() && (e.cfg.Refine == RefineOn || asked)
	tp := planText(plan, refine, e.mc.Frontend.Type != "espeak-ipa", e.cfg.Calibration, req.Speed)
	if len(tp.Runs) == 0 {
		return nil, fmt.Errorf("%w: nothing ChatTTS can say in %q", tts.ErrEmpty, truncate(req.Text, 60))
	}
	warn := append(tts.Warnings(sc, e.Capabilities(), req), tp.Warnings...)
	if asked && !e.refineAllowed() {
		warn = append(warn, "chattts: [oral_N]/[laugh_N]/[break_N] need the refine pass, which this model or configuration does not run")
	}
	sentText := map[int]string{}
	for _, s := range plan.Sentences {
		sentText[s.Index] = s.Text
	}
	rng := NewRNG(samplingSeed(req))
	codeSampler := NewSampler(e.codeParams(req), rng)
	var refSampler *Sampler
	if refine {
		refSampler = NewSampler(e.refineParams(req), rng)
	}
	rate := e.mc.Audio.SampleRate
	select {
	case <-e.closed:
		return nil, tts.ErrClosed
	default:
	}
	s := tts.NewStreamWarn(ctx, warn, func(ctx context.Context, emit func(tts.Chunk) error, warnf func(string)) error {
		ist, err := NewISTFT(e.mc.Audio.NFFT, e.mc.Audio.Hop)
		if err != nil {
			return err
		}
		seen := map[int]bool{}
		for _, r := range tp.Runs {
			pieces, err := e.splitRun(r.Text)
			if err != nil {
				return err
			}
			pending := tts.Silence(r.Before, rate)
			speed, scale := r.Speed, 1.0
			if e.timeScalesSpeed() && speed >= 0 && speed != normalSpeed {
				// the model says it at its normal tempo; the audio takes the speed
				speed, scale = normalSpeed, 0.5+0.1*float64(r.Speed)
			}
			for pi, text := range pieces {
				last := r.Last && pi == len(pieces)-1
				first := !seen[r.Sentence]
				var st *stretch.Stretcher
				if scale != 1 {
					st = stretch.New(rate, scale)
				}
				out := func(samples []float32, final bool) error {
					if st != nil {
						samples = st.Push(samples)
						if final {
							samples = append(samples, st.Flush()...)
						}
					}
					c := tts.Chunk{Samples: samples, SampleRate: rate, Sentence: r.Sentence, Last: last && final}
					if first {
						c.Text, first = sentText[r.Sentence], false
						seen[r.Sentence] = true
					}
					if len(pending) > 0 {
						c.Samples = append(pending, c.Samples...)
						pending = nil
					}
					return emit(c)
				}
				if err := e.speakRun(ctx, text, speed, spk, sample, tp.RefinePrompt, refSampler, codeSampler, ist, out, warnf); err != nil {
					return err
				}
			}
		}
		if tp.Trailing > 0 {
			return emit(tts.Chunk{Samples: tts.Silence(tp.Trailing, rate), SampleRate: rate, Sentence: -1, Last: true})
		}
		return nil
	})
	return tts.Resampled(s, req.SampleRate), nil
}

// sampleWeight is the share of a clone voice's prompted sequence in the code logits (1: the
// speaker sample alone).
func (e *Engine) sampleWeight() float64 {
	w := e.mc.Code.SampleWeight
	if e.cfg.SampleWeight > 0 {
		w = e.cfg.SampleWeight
	}
	if w <= 0 || w > 1 {
		return 1
	}
	return w
}

// splitRun cuts a run's text into pieces of at most MaxRunTokens tokens at word boundaries
// (each CJK character is a word).
func (e *Engine) splitRun(text string) ([]string, error) {
	ft, err := e.frontText(text)
	if err != nil {
		return nil, err
	}
	if len(e.tok.Encode(ft)) <= MaxRunTokens {
		return []string{text}, nil
	}
	var words []string
	for _, f := range strings.Fields(text) {
		var cur strings.Builder
		for _, r := range f {
			if isChineseChar(r) {
				if cur.Len() > 0 {
					words = append(words, cur.String())
					cur.Reset()
				}
				words = append(words, string(r))
				continue
			}
			cur.WriteRune(r)
		}
		if cur.Len() > 0 {
			words = append(words, cur.String())
		}
	}
	var out []string
	var cur []string
	n := 0
	for _, w := range words {
		ft, err := e.frontText(w)
		if err != nil {
			return nil, err
		}
		k := len(e.tok.Encode(ft))
		if n+k > MaxRunTokens && len(cur) > 0 {
			out = append(out, strings.Join(cur, " "))
			cur, n = nil, 0
		}
		cur, n = append(cur, w), n+k
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, " "))
	}
	return out, nil
}

// speakRun runs the refine pass (when on) and the code pass for one piece of text, streaming
// its audio through out every StreamFrames frames.
func (e *Engine) speakRun(ctx context.Context, text string, speed int, spk []float32, smp *promptSample, refinePrompt string,
	refSampler, codeSampler *Sampler, ist *ISTFT, out func([]float32, bool) error, warnf func(string)) error {
	ft, err := e.frontText(text)
	if err != nil {
		return err
	}
	ids := e.tok.Encode(ft)
	if refSampler != nil {
		refined, eos, err := e.refine(ctx, ids, refinePrompt, refSampler)
		if err != nil {
			return err
		}
		if !eos {
			warnf(fmt.Sprintf("chattts: the refine pass for %q stopped at its maximum length", truncate(text, 40)))
		}
		if len(refined) > 0 {
			ids = refined
		}
	}
	codeSampler.HoldEOS(int(e.mc.Code.MinFramesPerToken * float64(len(ids))))
	var prefix []int32
	var guide []int
	w := e.sampleWeight()
	var sampleText []int
	if smp != nil {
		if w < 1 {
			guide = e.codePrompt(ids, speed, spk != nil, nil)
		}
		sampleText, prefix = smp.text, smp.codes
	}
	prompt := e.codePrompt(ids, speed, spk != nil, sampleText)
	st := e.newStreamer(ist)
	if smp != nil {
		st.warp = smp.warp
	}
	var res *decodeResult
	for attempt := 0; ; attempt++ {
		st.emitted = 0
		// The decoder and Vocos run beside the GPT (overlap): the GPT goes on with the next
		// frames while a chunk is vocoded on another core.
		voc := st.overlap(ctx, out)
		res, err = e.decode(ctx, prompt, decodeOptions{mode: modeCode, sampler: codeSampler, maxNew: e.cfg.MaxNewTokens,
			spk: spk, prefix: prefix, guide: guide, guideWeight: float32(w), frames: voc.send})
		if werr := voc.wait(); werr != nil && (err == nil || errors.Is(err, errVocoder)) {
			err = werr
		}
		if err != nil {
			return err
		}
		if res.Frames > 0 || attempt >= maxEmptyRetries || codeSampler.Params().Greedy {
			break
		}
	}
	if !res.EOS {
		warnf(fmt.Sprintf("chattts: %q stopped at %d code frames (max_new_tokens) before the end token", truncate(text, 40), res.Frames))
	}
	if res.Frames == 0 {
		warnf(fmt.Sprintf("chattts: the model said nothing for %q", truncate(text, 40)))
		return out(nil, true)
	}
	pcm, err := st.end(ctx, res.Hiddens, res.Frames)
	if err != nil {
		return err
	}
	return out(pcm, true)
}

// streamer turns a growing sequence of GPT hidden states into audio chunks: every
// StreamFrames frames it decodes the frames since the last chunk with ContextFrames of left
// context and emits them except the last LookaheadFrames, whose audio still depends on frames
// to come (the decoder and Vocos are not causal); end emits the rest.
type streamer struct {
	e       *Engine
	ist     *ISTFT
	warp    *melWarp // a clone voice's pitch shift (nil: none)
	emitted int      // code frames whose audio has been sent
}

func (e *Engine) newStreamer(ist *ISTFT) *streamer { return &streamer{e: e, ist: ist} }

// vocoder runs a streamer's chunks in a goroutine of its own, in order, handing each chunk's
// audio to out; send queues the hidden states so far (the decode loop only ever appends past
// them, so the slice stays valid), wait ends the queue and returns the first error.
type vocoder struct {
	jobs chan vocJob
	done chan struct{}
	err  error // set by the goroutine before done closes
	fail chan struct{}
}

type vocJob struct {
	n       int
	hiddens []float32
}

func (s *streamer) overlap(ctx context.Context, out func([]float32, bool) error) *vocoder {
	v := &vocoder{jobs: make(chan vocJob, 4), done: make(chan struct{}), fail: make(chan struct{})}
	go func() {
		defer close(v.done)
		for j := range v.jobs {
			if v.err != nil {
				continue // drain after a failure
			}
			pcm, ok, err := s.at(ctx, j.hiddens, j.n)
			if err == nil && ok {
				err = out(pcm, false)
			}
			if err != nil {
				v.err = err
				close(v.fail)
			}
		}
	}()
	return v
}

// send is the decode loop's frames callback: it fails once the vocoder has failed (stopping
// the decode), and waits when the vocoder is 4 chunks behind.
func (v *vocoder) send(n int, hiddens []float32) error {
	select {
	case <-v.fail:
		return errVocoder
	case v.jobs <- vocJob{n: n, hiddens: hiddens}:
		return nil
	}
}

func (v *vocoder) wait() error {
	close(v.jobs)
	<-v.done
	return v.err
}

// errVocoder stops a decode whose vocoder failed; wait returns the vocoder's own error.
var errVocoder = errors.New("chattts: the vocoder stopped")

// at is called after n frames; ok says whether it is time for a chunk.
func (s *streamer) at(ctx context.Context, hiddens []float32, n int) ([]float32, bool, error) {
	c := s.e.cfg
	if n%c.StreamFrames != 0 || n-c.LookaheadFrames <= s.emitted {
		return nil, false, nil
	}
	pcm, err := s.window(ctx, hiddens, n-c.LookaheadFrames, n)
	return pcm, err == nil, err
}

// end returns the audio of every frame not yet sent (n frames in all).
func (s *streamer) end(ctx context.Context, hiddens []float32, n int) ([]float32, error) {
	return s.window(ctx, hiddens, n, n)
}

// window decodes frames [emitted−ContextFrames, frames) and returns the audio of
// [emitted, upto).
func (s *streamer) window(ctx context.Context, hiddens []float32, upto, frames int) ([]float32, error) {
	H := s.e.mc.GPT.Hidden
	perCode := s.e.mc.Audio.MelFramesPerCode * s.e.mc.Audio.Hop
	if upto <= s.emitted {
		return nil, nil
	}
	s0 := max(0, s.emitted-s.e.cfg.ContextFrames)
	pcm, err := s.e.vocode(ctx, hiddens[s0*H:frames*H], frames-s0, s.ist, s.warp)
	if err != nil {
		return nil, err
	}
	a := (s.emitted - s0) * perCode
	b := max(a, min(len(pcm), (upto-s0)*perCode))
	s.emitted = upto
	return append([]float32(nil), pcm[a:b]...), nil
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// promptSample is a SpeakerSample ready for the prompt: transcript ids and checked codes.
type promptSample struct {
	text  []int
	codes []int32
	warp  *melWarp // nil: the model's own pitch
}

func (e *Engine) prepareSample(s *SpeakerSample) (*promptSample, error) {
	Q, A := e.mc.GPT.NumVQ, e.mc.GPT.NumAudioTokens
	if len(s.Codes) == 0 || len(s.Codes)%Q != 0 {
		return nil, fmt.Errorf("%w: speaker sample of %d codes (want whole frames of %d)", tts.ErrBadRequest, len(s.Codes), Q)
	}
	for _, c := range s.Codes {
		if c < 0 || int(c) >= e.mc.EOSCode || int(c) >= A {
			return nil, fmt.Errorf("%w: speaker sample code %d outside 0..%d", tts.ErrBadRequest, c, e.mc.EOSCode-1)
		}
	}
	if len(s.Codes)/Q > e.mc.GPT.MaxPositions/2 {
		return nil, fmt.Errorf("%w: speaker sample of %d frames is longer than half the model's %d positions", tts.ErrBadRequest, len(s.Codes)/Q, e.mc.GPT.MaxPositions)
	}
	ft, err := e.frontText(s.Text)
	if err != nil {
		return nil, err
	}
	warp, err := newMelWarp(s.Pitch, e.mc.Audio.NMels, e.mc.Audio.SampleRate)
	if err != nil {
		return nil, err
	}
	codes := append([]int32(nil), s.Codes...)
	e.mc.Neutralize(codes) // a prompt encoded before the model's neutral streams were known
	return &promptSample{text: e.tok.Encode(ft), codes: codes, warp: warp}, nil
}

// sampleFits refuses a clone voice's codes made by another voice model: one whose identity
// differs from this export's, or, when this export declares an identity, one with none made
// under this model's name (an earlier version of it: every clone since records the
// identity). Those codes mean nothing to this model's GPT and would come out as noise.
func (e *Engine) sampleFits(s *tts.Sample) error {
	id, name := e.mc.ModelID, filepath.Base(filepath.Clean(e.dir))
	switch {
	case id == "" || s.ModelID == id:
		return nil
	case s.ModelID != "":
		return fmt.Errorf("%w: this clone voice was made with another voice model (%s, %s); %s (%s) cannot speak its recording's codes: clone it again from its recording",
			tts.ErrBadRequest, orUnnamed(s.Model), s.ModelID, name, id)
	case s.Model == name:
		return fmt.Errorf("%w: this clone voice was made with an earlier version of %s, before it was retrained; the new one cannot speak its recording's codes: clone it again from its recording",
			tts.ErrBadRequest, name)
	}
	return nil
}

func orUnnamed(s string) string {
	if s == "" {
		return "unnamed"
	}
	return s
}
