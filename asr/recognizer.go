// Package asr is Parley's speech recognizer: SenseVoice (sherpa-onnx or FunASR ONNX exports)
// with a Kaldi-compatible frontend, greedy CTC decoding, SenseVoice's language, emotion and
// event tags, token timestamps, and long-audio segmentation.
package asr

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/fbank"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/lang"
)

// Options are per-call decoding choices.
type Options struct {
	// Language is "auto" (or ""), "zh", "en", "yue", "ja" or "ko" (also "nospeech" when the
	// model declares it).
	Language string
	// ITN asks the model for inverse text normalisation (digits, punctuation, casing).
	ITN bool
	// SuppressEmoUnknown never decodes <|EMO_UNKNOWN|>, so the best real emotion is reported
	// (FunASR's ban_emo_unk).
	SuppressEmoUnknown bool
}

// Config configures a Recognizer.
type Config struct {
	Options
	// Int8 prefers model.int8.onnx (or model_quant.onnx) when a directory has both.
	Int8 bool
	// GPU is the model's ONNX Runtime session options (execution provider, intra-op threads).
	GPU gpu.Options
	// Workers bounds how many model calls run at once (default 1); more callers wait.
	Workers int
	// BatchSize is how many pieces one model call may take in TranscribeBatch (default 8).
	BatchSize int
	// MaxSegment is the longest audio fed to one model call (default: the model's metadata
	// max_segment_s, else 30 s, the most there is); audio that fits stays whole.
	MaxSegment time.Duration
	// Segment is the piece length audio longer than MaxSegment is cut into, at pauses: 0 = the
	// model's own (metadata segment_s; SenseVoice-Small has none: MaxSegment). A piece runs past
	// it, up to MaxSegment, only to end at a pause rather than inside a word, so the pieces of
	// 10.5 s with 3 and 10 s may be 3 s and 7.5 s.
	Segment time.Duration
	// VAD is the Silero VAD model used to find pauses in long audio: "" = the installed
	// silero-vad-v5 when there is one (else energy-based cuts), "none" = energy-based cuts
	// always, anything else a model file that must load.
	VAD string
	// LM is the token language model for the beam search: "" = the model directory's lm.bin
	// when it has one (else greedy CTC), "none" = greedy CTC always, anything else a file that
	// must load. The beam's weights tuned for an LM travel beside it: the LM's path with the
	// extension ".json" instead of its own (lm.bin → lm.json, o5.bin → o5.json; see
	// LMWeightsPath), JSON such as {"alpha": 0.5, "beta": 2.5, "width": 32} (fields alpha,
	// beta, width, top, prune, oov, each optional; any other, a value out of range or bad JSON is an
	// error naming the file). No sidecar: the defaults (BeamOptions). A word list may travel
	// beside it too (LexiconPath: lm.bin → lm.words.txt), which oov needs.
	LM string
	// Beam tunes the beam search: its non-zero fields win over the LM's sidecar, which wins
	// over the defaults.
	Beam BeamOptions
	// Words join the LM's word list for this recogniser (a person's names, their jargon), so
	// the search does not charge them (BeamOptions.OOV); one word each. With no list beside
	// the LM, or no charge, they change nothing.
	Words []string
	// Log receives debug timings; nil discards them.
	Log *slog.Logger
}

// MaxSegment is the longest stretch of audio sent to the model in one call.
const MaxSegment = 30 * time.Second

// ErrInput is wrapped by errors about the audio given.
var ErrInput = errors.New("asr: bad input")

// Source is a stream of 16 kHz mono samples; an audio.Source in that format is one. Read
// returns io.EOF at the end.
type Source interface {
	Read(ctx context.Context, p []float32) (int, error)
}

// Recognizer transcribes speech with one loaded model. It is safe for concurrent use; at most
// Config.Workers model calls run at once.
type Recognizer struct {
	m      *model
	cfg    Config
	lex    *lexicon // the model's word list with Config.Words, nil without a list
	tables *fbank.Tables
	slots  chan *worker
	maxLen int // the longest piece (Config.MaxSegment, else the model's max_segment_s, else 30 s)
	segLen int // the piece length aimed at (Config.Segment, else the model's segment_s, else maxLen)
	log    *slog.Logger

	vadPath string          // "" when cutting by energy
	vads    chan *vad.Model // idle VAD streams for reuse

	mu     sync.RWMutex
	closed bool
}

// worker is the scratch state of one model call.
type worker struct {
	fb     *fbank.Fbank
	fbank  []float32
	ids    []int32
	frames []int32
}

// ModelInfo describes a loaded model.
type ModelInfo struct {
	Path      string
	Format    Format
	Provider  string
	Vocab     int
	Languages []string
	// LM is the beam search's language model file, "" when decoding greedily; Beam the
	// weights it decodes with (Config.Beam over the LM's sidecar over the defaults).
	LM   string
	Beam BeamOptions
}

// New loads a SenseVoice model from a directory (or a model file) and validates it: the
// sherpa-onnx export (model.onnx / model.int8.onnx + tokens.txt) or the FunASR one
// (model.onnx / model_quant.onnx + am.mvn + tokens.json).
func New(modelPath string, cfg Config) (*Recognizer, error) {
	if cfg.Workers < 0 || cfg.BatchSize < 0 || cfg.MaxSegment < 0 || cfg.Segment < 0 || cfg.GPU.IntraOpThreads < 0 {
		return nil, fmt.Errorf("%w: negative Workers, BatchSize, GPU.IntraOpThreads, MaxSegment or Segment", ErrConfig)
	}
	if cfg.Segment > 0 && (cfg.Segment < time.Second || cfg.Segment > MaxSegment) {
		return nil, fmt.Errorf("%w: Segment %v is not between a second and %v", ErrConfig, cfg.Segment, MaxSegment)
	}
	if err := cfg.Beam.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	for _, w := range cfg.Words {
		if err := lang.CheckWord(w); err != nil {
			return nil, fmt.Errorf("%w: Words: %w", ErrConfig, err)
		}
	}
	if cfg.MaxSegment > MaxSegment {
		return nil, fmt.Errorf("%w: MaxSegment %v is over the model's %v", ErrConfig, cfg.MaxSegment, MaxSegment)
	}
	if cfg.MaxSegment > 0 && cfg.MaxSegment < time.Second {
		return nil, fmt.Errorf("%w: MaxSegment %v is under a second", ErrConfig, cfg.MaxSegment)
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 8
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m, err := loadModel(modelPath, cfg)
	if err != nil {
		return nil, err
	}
	cfg.Beam = cfg.Beam.or(m.beam)
	if m.lm != nil && cfg.Beam.OOV > 0 && m.lex == nil {
		m.close()
		return nil, fmt.Errorf("%w: beam oov %v charges words no list holds: %s has no word list %s",
			ErrConfig, cfg.Beam.OOV, m.lmPath, LexiconPath(m.lmPath))
	}
	// the model's own lengths (metadata) unless the config sets them
	cfg.MaxSegment = cmp.Or(cfg.MaxSegment, m.maxSegment, MaxSegment)
	cfg.Segment = min(cmp.Or(cfg.Segment, m.segment, cfg.MaxSegment), cfg.MaxSegment)
	r := &Recognizer{m: m, cfg: cfg, lex: m.lex.with(cfg.Words), tables: newFbankTables(), log: cfg.Log,
		maxLen: int(cfg.MaxSegment.Seconds() * SampleRate), segLen: int(cfg.Segment.Seconds() * SampleRate)}
	if _, err := m.languageID(cfg.Language); err != nil {
		m.close()
		return nil, err
	}
	if err := r.initVAD(); err != nil {
		m.close()
		return nil, err
	}
	if m.maxBatch > 0 && r.cfg.BatchSize > m.maxBatch {
		r.cfg.BatchSize = m.maxBatch
	}
	r.slots = make(chan *worker, cfg.Workers)
	for range cfg.Workers {
		r.slots <- &worker{fb: newFbank(r.tables, m.scale)}
	}
	r.log.Debug("asr model loaded", "path", m.path, "format", m.format, "provider", m.sess.Provider,
		"vocab", m.vocab, "workers", cfg.Workers)
	if m.lm != nil {
		b := r.cfg.Beam
		r.log.Debug("asr beam search", "lm", m.lmPath, "order", m.lm.order, "alpha", b.Alpha, "beta", b.Beta,
			"width", b.Width, "top", b.Top, "prune", b.Prune, "oov", b.OOV, "words", m.lex != nil, "own_words", r.ownWords())
	}
	if len(cfg.Words) > 0 && (m.lex == nil || r.cfg.Beam.OOV == 0 || m.lm == nil) {
		r.log.Debug("asr own words unused: no word list beside the LM, or no charge for words it lacks", "words", len(cfg.Words))
	}
	return r, nil
}

// ownWords is how many words Config.Words added to the model's list (0 without a list).
func (r *Recognizer) ownWords() int {
	if r.lex == nil || r.m.lex == nil {
		return 0
	}
	return len(r.lex.words) - len(r.m.lex.words)
}

// Info describes the loaded model.
func (r *Recognizer) Info() ModelInfo {
	langs := make([]string, 0, len(r.m.lang))
	for _, l := range append(Languages(), "nospeech") {
		if _, ok := r.m.lang[l]; ok {
			langs = append(langs, l)
		}
	}
	info := ModelInfo{Path: r.m.path, Format: r.m.format, Provider: r.m.sess.Provider, Vocab: r.m.vocab, Languages: langs}
	if r.m.lm != nil {
		info.LM, info.Beam = r.m.lmPath, r.cfg.Beam
	}
	return info
}

// Options are the decoding options from the Config, the ones Transcribe uses.
func (r *Recognizer) Options() Options { return r.cfg.Options }

// Tokens is the model's symbol table.
func (r *Recognizer) Tokens() *Tokens { return r.m.tokens }

// Close waits for calls in progress and releases the model. Later calls return ErrClosed.
func (r *Recognizer) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	for len(r.vads) > 0 { // no call is in flight: nobody else touches the channel
		(<-r.vads).Close()
	}
	return r.m.close()
}

// initVAD resolves Config.VAD.
func (r *Recognizer) initVAD() error {
	r.vads = make(chan *vad.Model, 4)
	switch r.cfg.VAD {
	case "none":
		return nil
	case "":
		p := vad.DefaultModel()
		if _, err := os.Stat(p); err != nil {
			r.log.Debug("asr: no Silero VAD installed; long audio is cut by energy", "looked", p)
			return nil
		}
		r.vadPath = p
	default:
		r.vadPath = r.cfg.VAD
	}
	v, err := vad.OpenModel(r.vadPath, SampleRate, gpu.Options{Provider: gpu.ProviderCPU, IntraOpThreads: 1})
	if err != nil {
		if r.cfg.VAD == "" {
			r.log.Warn("asr: Silero VAD unusable; long audio is cut by energy", "err", err)
			r.vadPath = ""
			return nil
		}
		return fmt.Errorf("%w: VAD %s: %w", ErrConfig, r.cfg.VAD, err)
	}
	r.vads <- v
	return nil
}

// newCutter returns a cutter for one stream or long input, with a VAD stream when one is
// configured; release it with putCutter.
func (r *Recognizer) newCutter() *cutter {
	c := &cutter{log: r.log}
	if r.vadPath == "" {
		return c
	}
	select {
	case v := <-r.vads:
		c.vad = v
	default:
		v, err := vad.OpenModel(r.vadPath, SampleRate, gpu.Options{Provider: gpu.ProviderCPU, IntraOpThreads: 1})
		if err != nil {
			r.log.Warn("asr: cannot open the VAD; cutting by energy", "err", err)
			return c
		}
		c.vad = v
	}
	c.vad.Reset()
	c.win = c.vad.Window()
	return c
}

func (r *Recognizer) putCutter(c *cutter) {
	if c.vad == nil {
		return
	}
	select {
	case r.vads <- c.vad:
	default:
		c.vad.Close()
	}
}

// UsesVAD reports whether long audio is cut with the Silero VAD (else by energy).
func (r *Recognizer) UsesVAD() bool { return r.vadPath != "" }

func (r *Recognizer) enter() error {
	r.mu.RLock()
	if r.closed {
		r.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (r *Recognizer) leave() { r.mu.RUnlock() }

// Transcribe recognises 16 kHz mono samples in [-1, 1] with the Config's options.
func (r *Recognizer) Transcribe(ctx context.Context, samples []float32) (*Result, error) {
	return r.TranscribeWith(ctx, samples, r.cfg.Options)
}

// TranscribeWith recognises 16 kHz mono samples with the given options. Audio longer than
// MaxSegment is cut at silences and the pieces' results merged with absolute timestamps.
func (r *Recognizer) TranscribeWith(ctx context.Context, samples []float32, o Options) (*Result, error) {
	res, err := r.TranscribeBatch(ctx, [][]float32{samples}, o)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// piece is a stretch of one input sent to the model.
type piece struct {
	input  int
	offset int // samples from the start of the input
	x      []float32
}

// trimmed drops the quiet beyond keepQuiet at either end (soundSpan); timestamps stay
// those of the whole input.
func (p piece) trimmed() piece {
	a, b := soundSpan(p.x)
	p.offset += a
	p.x = p.x[a:b]
	return p
}

// checkLogits refuses scores that would decode to nothing or to noise: NaN or +Inf (-Inf is a
// token the model rules out, which both decoders take as it is).
func checkLogits(logits []float32, vocab int) error {
	for i, v := range logits {
		if v != v || v > math.MaxFloat32 {
			return fmt.Errorf("the model gave a score of %v (frame %d, token %d)", v, i/vocab, i%vocab)
		}
	}
	return nil
}

func checkSamples(x []float32) error {
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%w: sample %d is %v", ErrInput, i, v)
		}
	}
	return nil
}

// TranscribeBatch recognises several inputs, running up to Config.BatchSize pieces per
// model call (zero-padded to the longest, as sherpa-onnx batches). Results are in input
// order and equal to transcribing each input alone.
func (r *Recognizer) TranscribeBatch(ctx context.Context, inputs [][]float32, o Options) ([]*Result, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	lang, norm, err := r.queries(o)
	if err != nil {
		return nil, err
	}
	var pieces []piece
	for i, x := range inputs {
		if err := checkSamples(x); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		var c *cutter
		for off := 0; off < len(x); {
			n := len(x) - off
			if n > r.maxLen { // what fits in one piece stays whole: cutting a sentence costs more
				if c == nil {
					c = r.newCutter()
				}
				c.feed(ctx, x[off:off+r.maxLen])
				n = c.cut(x[off:], r.segLen, r.maxLen)
				if n <= 0 || n > r.maxLen { // cannot happen; never loop forever
					n = r.segLen
				}
				c.advance(n)
			}
			pieces = append(pieces, piece{input: i, offset: off, x: x[off : off+n]}.trimmed())
			off += n
		}
		if c != nil {
			r.putCutter(c)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	segs := make([]Segment, len(pieces))
	// Shortest first, so a batch pads little; silent and too-short pieces need no model.
	order := make([]int, 0, len(pieces))
	for i, p := range pieces {
		segs[i] = emptySegment(p)
		if NumFrames(len(p.x)) > 0 && !isSilent(p.x) {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(pieces[a].x) - len(pieces[b].x) })
	// Batches run concurrently, as many at once as there are free worker slots.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var errOnce sync.Once
	var firstErr error
	var tmu sync.Mutex
	var total Timings
	for start := 0; start < len(order); start += r.cfg.BatchSize {
		batch := order[start:min(start+r.cfg.BatchSize, len(order))]
		ps := make([]piece, len(batch))
		for j, k := range batch {
			ps[j] = pieces[k]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, tm, err := r.run(ctx, ps, lang, norm, o.SuppressEmoUnknown)
			if err != nil {
				errOnce.Do(func() { firstErr = err; cancel() })
				return
			}
			tmu.Lock()
			total.add(tm)
			tmu.Unlock()
			for j, k := range batch {
				segs[k] = out[j] // distinct indices per goroutine
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	results := make([]*Result, len(inputs))
	for i, x := range inputs {
		var mine []Segment
		for k, p := range pieces {
			if p.input == i && (segs[k].Text != "" || len(segs[k].TokenIDs) > 0) {
				mine = append(mine, segs[k])
			}
		}
		results[i] = merge(mine, seconds(len(x)))
		results[i].Timings = total
	}
	return results, nil
}

func emptySegment(p piece) Segment {
	return Segment{Start: seconds(p.offset), End: seconds(p.offset + len(p.x)), Tokens: []string{}, Timestamps: []float64{}}
}

func seconds(samples int) float64 { return float64(samples) / SampleRate }

func (r *Recognizer) queries(o Options) (lang, norm int32, err error) {
	lang, err = r.m.languageID(o.Language)
	if err != nil {
		return 0, 0, err
	}
	norm = r.m.withoutITN
	if o.ITN {
		norm = r.m.withITN
	}
	return lang, norm, nil
}

// acquire takes a worker slot, waiting while all are busy.
func (r *Recognizer) acquire(ctx context.Context) (*worker, error) {
	select {
	case w := <-r.slots:
		return w, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run computes features for pieces, runs them as one batch and decodes each.
func (r *Recognizer) run(ctx context.Context, ps []piece, lang, norm int32, banEmo bool) ([]Segment, Timings, error) {
	var tm Timings
	t0 := time.Now()
	w, err := r.acquire(ctx)
	if err != nil {
		return nil, tm, err
	}
	defer func() { r.slots <- w }()
	t1 := time.Now()
	tm.Wait = t1.Sub(t0)
	m := r.m
	dim := numMelBins * m.lfrM
	feats := make([][]float32, len(ps))
	rows := make([]int, len(ps))
	for i, p := range ps {
		w.fbank = w.fb.Compute(w.fbank[:0], p.x)
		feats[i] = lfrCMVN(nil, w.fbank, numMelBins, m.lfrM, m.lfrN, &m.cmvn)
		rows[i] = len(feats[i]) / dim
	}
	langs, norms := make([]int32, len(ps)), make([]int32, len(ps))
	for i := range ps {
		langs[i], norms[i] = lang, norm
	}
	ban := -1
	if banEmo {
		ban = m.emoUnknown
	}
	out := make([]Segment, len(ps))
	t2 := time.Now()
	tm.Features = t2.Sub(t1)
	var bad error // the first segment whose scores no decoder can rank
	err = m.forward(ctx, feats, rows, langs, norms, func(i int, logits []float32, frames int) {
		d0 := time.Now()
		if err := checkLogits(logits, m.vocab); err != nil {
			if bad == nil {
				bad = fmt.Errorf("%w: %s: %w (a damaged model file, or one that does not fit this input)", ErrBadModel, m.path, err)
			}
			return
		}
		if m.lm != nil && frames > numQueries {
			// the tags from the query positions, the words from a beam search with the LM
			w.ids, w.frames = greedyCTC(logits, numQueries, m.vocab, m.blank, ban, w.ids[:0], w.frames[:0])
			w.ids, w.frames = beamCTC(logits, frames, m.vocab, numQueries, m.blank, m.isText, m.lm, r.lex, r.cfg.Beam, w.ids, w.frames)
		} else {
			w.ids, w.frames = greedyCTC(logits, frames, m.vocab, m.blank, ban, w.ids[:0], w.frames[:0])
		}
		out[i] = decodeSegment(m.tokens, w.ids, w.frames, seconds(ps[i].offset), seconds(len(ps[i].x)))
		tm.Decode += time.Since(d0)
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return nil, tm, err
	}
	tm.Model = time.Since(t2) - tm.Decode
	tm.Calls = 1
	return out, tm, nil
}

// TranscribeSource recognises an audio.Source of any rate and channel count: it is mixed
// down to mono and resampled to 16 kHz on the fly, then streamed as TranscribeStream does.
func (r *Recognizer) TranscribeSource(ctx context.Context, src audio.Source, o Options, onSegment func(Segment) error) (*Result, error) {
	conv, err := audio.Convert(src, audio.Mono16k, audio.QualityHigh)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	return r.TranscribeStream(ctx, conv, o, onSegment)
}

// TranscribeStream recognises a 16 kHz mono stream of any length with bounded memory: it
// holds at most MaxSegment of audio, cuts it at silences, and transcribes each piece as it
// comes. onSegment, if not nil, gets each non-empty segment as soon as it is decoded; an
// error from it stops the stream.
func (r *Recognizer) TranscribeStream(ctx context.Context, src Source, o Options, onSegment func(Segment) error) (*Result, error) {
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	lang, norm, err := r.queries(o)
	if err != nil {
		return nil, err
	}
	buf := make([]float32, 0, r.maxLen+16000)
	c := r.newCutter()
	defer r.putCutter(c)
	var segs []Segment
	var total Timings
	consumed := 0 // samples consumed into pieces
	eof := false
	emit := func(x []float32) error {
		p := piece{offset: consumed, x: x}.trimmed()
		consumed += len(x)
		if NumFrames(len(p.x)) == 0 || isSilent(p.x) { // as TranscribeBatch judges its pieces
			return nil
		}
		out, tm, err := r.run(ctx, []piece{p}, lang, norm, o.SuppressEmoUnknown)
		if err != nil {
			return err
		}
		total.add(tm)
		s := out[0]
		if s.Text == "" && len(s.TokenIDs) == 0 {
			return nil
		}
		segs = append(segs, s)
		if onSegment != nil {
			return onSegment(s)
		}
		return nil
	}
	for !eof || len(buf) > 0 {
		for !eof && len(buf) < cap(buf) {
			n, err := src.Read(ctx, buf[len(buf):cap(buf)])
			if n < 0 || n > cap(buf)-len(buf) {
				return nil, fmt.Errorf("%w: source returned %d samples for a %d-sample buffer", ErrInput, n, cap(buf)-len(buf))
			}
			if err := checkSamples(buf[len(buf) : len(buf)+n]); err != nil {
				return nil, err
			}
			buf = buf[:len(buf)+n]
			if errors.Is(err, io.EOF) {
				eof = true
			} else if err != nil {
				return nil, err
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if len(buf) == 0 {
			break
		}
		cut := len(buf)
		if len(buf) > r.maxLen || !eof {
			c.feed(ctx, buf[:min(len(buf), r.maxLen)])
			cut = c.cut(buf, r.segLen, r.maxLen)
			c.advance(cut)
		}
		if err := emit(buf[:cut]); err != nil {
			return nil, err
		}
		buf = buf[:copy(buf, buf[cut:])]
	}
	res := merge(segs, seconds(consumed))
	res.Timings = total
	return res, nil
}
