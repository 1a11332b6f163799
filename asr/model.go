package asr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/lang"
)

// Errors.
var (
	// ErrBadModel is wrapped by every model validation error (it is gpu.ErrBadModel).
	ErrBadModel = gpu.ErrBadModel
	// ErrClosed is returned by calls on a closed Recognizer.
	ErrClosed = errors.New("asr: recognizer closed")
	// ErrConfig is wrapped by errors in a Config.
	ErrConfig = errors.New("asr: bad config")
	// ErrModel is wrapped by failures of the model run itself.
	ErrModel = errors.New("asr: model run failed")
)

// Format names a model layout on disk.
type Format string

// Model formats.
const (
	// FormatSherpa is the sherpa-onnx SenseVoice export: model.onnx or model.int8.onnx with
	// inputs x, x_length, language, text_norm, output logits, CMVN and ids in its metadata,
	// plus tokens.txt.
	FormatSherpa Format = "sherpa-onnx"
	// FormatFunASR is the FunASR/ModelScope export: model.onnx or model_quant.onnx with inputs
	// speech, speech_lengths, language, textnorm, outputs ctc_logits, encoder_out_lens, plus
	// am.mvn and tokens.json.
	FormatFunASR Format = "funasr"
)

// Languages returns the language choices SenseVoice accepts: "auto" (the model decides) and
// lang.Codes ("zh", "en", "yue", "ja", "ko").
func Languages() []string { return append([]string{"auto"}, lang.Codes()...) }

// funasrIDs are the query ids FunASR's SenseVoiceSmall uses (its lid_dict / textnorm_dict);
// sherpa-onnx exports carry the same values in their metadata.
var funasrIDs = map[string]int32{
	"lang_auto": 0, "lang_zh": 3, "lang_en": 4, "lang_yue": 7, "lang_ja": 11, "lang_ko": 12,
	"lang_nospeech": 13, "with_itn": 14, "without_itn": 15,
}

// model is a loaded SenseVoice network with everything needed around it.
type model struct {
	sess       *gpu.Session
	path       string
	format     Format
	tokens     *Tokens
	cmvn       cmvn
	lfrM, lfrN int
	scale      float32 // 32768 (normalize_samples=0) or 1
	lang       map[string]int32
	withITN    int32
	withoutITN int32
	vocab      int
	blank      int
	emoUnknown int // id of <|EMO_UNKNOWN|>, -1 if none
	lenInt64   bool
	maxBatch   int           // 0 = any batch size
	maxSegment time.Duration // metadata max_segment_s: the longest piece to feed it; 0 = MaxSegment
	segment    time.Duration // metadata segment_s: the piece length to cut long audio into; 0 = maxSegment
	lm         *ngramLM      // nil: greedy CTC
	lmPath     string
	beam       BeamOptions // the LM's weights: its sidecar over the defaults
	lex        *lexicon    // the LM's word list (LexiconPath), nil if it has none
	isText     []bool      // ids that are pieces of words (not tags or specials), for the beam search
	inputs     []string
	outputs    []string
}

// modelCandidates are the file names looked for in a model directory, in order.
func modelCandidates(int8 bool) []string {
	if int8 {
		return []string{"model.int8.onnx", "model_quant.onnx", "model.onnx"}
	}
	return []string{"model.onnx", "model.int8.onnx", "model_quant.onnx"}
}

// findModel resolves a model directory (or a model file) to the ONNX file to load.
func findModel(path string, int8 bool) (file, dir string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrBadModel, err)
	}
	if !st.IsDir() {
		return path, filepath.Dir(path), nil
	}
	for _, name := range modelCandidates(int8) {
		p := filepath.Join(path, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, path, nil
		}
	}
	return "", "", fmt.Errorf("%w: %s: no SenseVoice model file (looked for %s)", ErrBadModel, path,
		strings.Join(modelCandidates(int8), ", "))
}

// loadModel inspects, validates and opens a model, loading it once.
func loadModel(path string, cfg Config) (*model, error) {
	file, dir, err := findModel(path, cfg.Int8)
	if err != nil {
		return nil, err
	}
	info, err := gpu.Inspect(file)
	if err != nil {
		return nil, err
	}
	m := &model{path: file, blank: 0, emoUnknown: -1}
	switch {
	case hasInput(info, "x"):
		err = m.initSherpa(info, dir)
	case hasInput(info, "speech"):
		err = m.initFunASR(info, dir)
	default:
		err = fmt.Errorf("%w: %s: not a SenseVoice model: inputs are %v; want x, x_length, language, text_norm (sherpa-onnx) or speech, speech_lengths, language, textnorm (FunASR)",
			ErrBadModel, file, info.Inputs)
	}
	if err != nil {
		return nil, err
	}
	if m.tokens.Len() != m.vocab {
		return nil, fmt.Errorf("%w: %s has %d tokens but %s has vocab_size %d", ErrBadModel,
			tokensFile(m.format, dir), m.tokens.Len(), file, m.vocab)
	}
	if out, ok := info.Output(m.outputs[0]); ok && len(out.Shape) == 3 && out.Shape[2] > 0 && int(out.Shape[2]) != m.vocab {
		return nil, fmt.Errorf("%w: %s: output %s has %d classes but the vocabulary has %d", ErrBadModel, file, out.Name, out.Shape[2], m.vocab)
	}
	if in, ok := info.Input(m.inputs[0]); ok && len(in.Shape) == 3 && in.Shape[2] > 0 && int(in.Shape[2]) != numMelBins*m.lfrM {
		return nil, fmt.Errorf("%w: %s: input %s has %d features per frame, want %d (80 mel bins × LFR %d)", ErrBadModel, file, in.Name, in.Shape[2], numMelBins*m.lfrM, m.lfrM)
	}
	// Some exports fix the batch dimension; never batch those beyond it.
	if in, ok := info.Input(m.inputs[0]); ok && len(in.Shape) == 3 && in.Shape[0] > 0 {
		m.maxBatch = int(in.Shape[0])
	}
	if m.blank < 0 || m.blank >= m.vocab {
		return nil, fmt.Errorf("%w: %s: blank_id %d outside the vocabulary (%d)", ErrBadModel, file, m.blank, m.vocab)
	}
	m.emoUnknown = m.tokens.ID("<|EMO_UNKNOWN|>")
	if err := m.loadLM(cfg.LM, dir); err != nil {
		return nil, err
	}
	m.sess, err = gpu.OpenInfo(info, m.inputs, m.outputs, cfg.GPU)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// loadLM loads the beam search's language model: spec "" = dir's lm.bin if there is one,
// "none" = none, else that file; and the weights tuned for it (its sidecar, LMWeightsPath).
func (m *model) loadLM(spec, dir string) error {
	path := spec
	switch spec {
	case "none":
		return nil
	case "":
		path = filepath.Join(dir, LMFile)
		if _, err := os.Stat(path); err != nil {
			return nil
		}
	}
	lm, err := loadLM(path, m.vocab)
	if err != nil {
		return err
	}
	beam, err := loadLMWeights(path)
	if err != nil {
		return err
	}
	lex, err := loadLexicon(path, m.tokens)
	if err != nil {
		return err
	}
	if beam.OOV > 0 && lex == nil {
		return fmt.Errorf("%w: %s charges unlisted words (oov %v) and there is no word list %s", ErrLM,
			LMWeightsPath(path), beam.OOV, LexiconPath(path))
	}
	m.lm, m.lmPath, m.beam, m.lex = lm, path, beam, lex
	m.isText = make([]bool, m.vocab)
	for id := range m.vocab {
		p := m.tokens.Piece(id)
		m.isText[id] = id != m.blank && p != "<s>" && p != "</s>" && p != "<unk>" &&
			!(strings.HasPrefix(p, "<|") && strings.HasSuffix(p, "|>"))
	}
	return nil
}

func tokensFile(f Format, dir string) string {
	if f == FormatFunASR {
		return filepath.Join(dir, "tokens.json")
	}
	return filepath.Join(dir, "tokens.txt")
}

func hasInput(info *gpu.ModelInfo, name string) bool { _, ok := info.Input(name); return ok }

func (m *model) initSherpa(info *gpu.ModelInfo, dir string) error {
	m.format = FormatSherpa
	m.inputs = []string{"x", "x_length", "language", "text_norm"}
	m.outputs = []string{"logits"}
	if err := info.RequireInputs(m.inputs...); err != nil {
		return err
	}
	if err := info.RequireOutputs(m.outputs...); err != nil {
		return err
	}
	for name, want := range map[string]string{"x": "float32", "language": "int32", "text_norm": "int32", "logits": "float32"} {
		if err := info.RequireType(name, want); err != nil {
			return err
		}
	}
	if in, _ := info.Input("x_length"); in.Type == "int64" {
		m.lenInt64 = true
	} else if err := info.RequireType("x_length", "int32"); err != nil {
		return err
	}
	if mt, ok := info.Meta("model_type"); ok && mt != "sense_voice_ctc" {
		return fmt.Errorf("%w: %s: metadata model_type is %q, want \"sense_voice_ctc\"", ErrBadModel, m.path, mt)
	}
	// Collect every missing key so one error names them all.
	required := []string{"vocab_size", "lfr_window_size", "lfr_window_shift", "normalize_samples",
		"with_itn", "without_itn", "lang_auto", "lang_zh", "lang_en", "lang_yue", "lang_ja", "lang_ko",
		"neg_mean", "inv_stddev"}
	var missing []string
	for _, k := range required {
		if _, ok := info.Meta(k); !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s: metadata missing: %s", ErrBadModel, m.path, strings.Join(missing, ", "))
	}
	ints := map[string]*int{}
	var vocab, lfrM, lfrN, norm int
	ints["vocab_size"], ints["lfr_window_size"], ints["lfr_window_shift"], ints["normalize_samples"] = &vocab, &lfrM, &lfrN, &norm
	for k, p := range ints {
		v, err := info.MetaInt(k)
		if err != nil {
			return err
		}
		*p = v
	}
	if vocab <= 0 || vocab > maxVocab {
		return fmt.Errorf("%w: %s: metadata vocab_size = %d", ErrBadModel, m.path, vocab)
	}
	if lfrM <= 0 || lfrM > 64 || lfrN <= 0 || lfrN > 64 {
		return fmt.Errorf("%w: %s: metadata lfr_window_size = %d, lfr_window_shift = %d", ErrBadModel, m.path, lfrM, lfrN)
	}
	m.vocab, m.lfrM, m.lfrN = vocab, lfrM, lfrN
	m.scale = sampleScale
	if norm != 0 {
		m.scale = 1
	}
	if _, ok := info.Meta("blank_id"); ok {
		b, err := info.MetaInt("blank_id")
		if err != nil {
			return err
		}
		m.blank = b
	}
	m.lang = map[string]int32{}
	for _, l := range append(Languages(), "nospeech") {
		if _, ok := info.Meta("lang_" + l); !ok {
			continue // lang_nospeech is optional
		}
		v, err := info.MetaInt("lang_" + l)
		if err != nil {
			return err
		}
		m.lang[l] = int32(v)
	}
	if v, ok := info.Meta("trained_languages"); ok {
		// the languages the model learnt (Parley's own models: English); the others keep
		// their ids but mean nothing to it
		trained := map[string]bool{}
		for _, l := range strings.Split(v, ",") {
			trained[strings.TrimSpace(l)] = true
		}
		for l := range m.lang {
			if l != "auto" && l != "nospeech" && !trained[l] {
				delete(m.lang, l)
			}
		}
	}
	// Parley's own models learnt from utterances of a few seconds and hear longer pieces far
	// worse (six sentences in one 27 s piece: 48 % WER, against 32 % one by one), so their
	// export says how long audio is cut: pieces of at most max_segment_s, cut near segment_s.
	for _, k := range []struct {
		key string
		to  *time.Duration
	}{{"max_segment_s", &m.maxSegment}, {"segment_s", &m.segment}} {
		v, ok := info.Meta(k.key)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f >= 1 && f <= MaxSegment.Seconds()) {
			return fmt.Errorf("%w: %s: metadata %q = %q: want seconds from 1 to %g", ErrBadModel,
				info.Path, k.key, v, MaxSegment.Seconds())
		}
		*k.to = time.Duration(f * float64(time.Second))
	}
	if m.maxSegment > 0 && m.segment > m.maxSegment {
		return fmt.Errorf("%w: %s: metadata segment_s (%v) is over max_segment_s (%v)", ErrBadModel, info.Path,
			m.segment, m.maxSegment)
	}
	w, err := info.MetaInt("with_itn")
	if err != nil {
		return err
	}
	wo, err := info.MetaInt("without_itn")
	if err != nil {
		return err
	}
	m.withITN, m.withoutITN = int32(w), int32(wo)
	nm, err := info.MetaFloats("neg_mean")
	if err != nil {
		return err
	}
	is, err := info.MetaFloats("inv_stddev")
	if err != nil {
		return err
	}
	if err := m.setCMVN(nm, is, "metadata neg_mean/inv_stddev"); err != nil {
		return err
	}
	tf := filepath.Join(dir, "tokens.txt")
	f, err := os.Open(tf)
	if err != nil {
		return fmt.Errorf("%w: tokens file for %s: %w", ErrBadModel, m.path, err)
	}
	defer f.Close()
	m.tokens, err = ParseTokensTxt(f, tf)
	return err
}

func (m *model) initFunASR(info *gpu.ModelInfo, dir string) error {
	m.format = FormatFunASR
	m.inputs = []string{"speech", "speech_lengths", "language", "textnorm"}
	m.outputs = []string{"ctc_logits", "encoder_out_lens"}
	if err := info.RequireInputs(m.inputs...); err != nil {
		return err
	}
	if err := info.RequireOutputs(m.outputs...); err != nil {
		return err
	}
	for name, want := range map[string]string{"speech": "float32", "language": "int32", "textnorm": "int32", "ctc_logits": "float32"} {
		if err := info.RequireType(name, want); err != nil {
			return err
		}
	}
	if in, _ := info.Input("speech_lengths"); in.Type == "int64" {
		m.lenInt64 = true
	} else if err := info.RequireType("speech_lengths", "int32"); err != nil {
		return err
	}
	// FunASR's frontend for SenseVoiceSmall: LFR 7/6, samples scaled to 16-bit amplitudes.
	m.lfrM, m.lfrN, m.scale = 7, 6, sampleScale
	m.lang = map[string]int32{}
	for _, l := range append(Languages(), "nospeech") {
		m.lang[l] = funasrIDs["lang_"+l]
	}
	m.withITN, m.withoutITN = funasrIDs["with_itn"], funasrIDs["without_itn"]
	mvn := filepath.Join(dir, "am.mvn")
	f, err := os.Open(mvn)
	if err != nil {
		return fmt.Errorf("%w: CMVN file for %s: %w", ErrBadModel, m.path, err)
	}
	nm, is, err := ParseAMMVN(f, mvn)
	f.Close()
	if err != nil {
		return err
	}
	if err := m.setCMVN(nm, is, mvn); err != nil {
		return err
	}
	tj := filepath.Join(dir, "tokens.json")
	tf, err := os.Open(tj)
	if err != nil {
		return fmt.Errorf("%w: tokens file for %s: %w", ErrBadModel, m.path, err)
	}
	defer tf.Close()
	if m.tokens, err = ParseTokensJSON(tf, tj); err != nil {
		return err
	}
	m.vocab = m.tokens.Len()
	return nil
}

func (m *model) setCMVN(negMean, invStd []float32, what string) error {
	want := numMelBins * m.lfrM
	if len(negMean) != want || len(invStd) != want {
		return fmt.Errorf("%w: %s: %s have %d and %d values, want %d (80 × LFR window %d)", ErrBadModel, m.path, what, len(negMean), len(invStd), want, m.lfrM)
	}
	m.cmvn = cmvn{negMean: negMean, invStd: invStd}
	return nil
}

// forward runs the network on a batch of feature matrices (each rows × 560, row-major,
// rows[i] frames) with per-item language and text-norm query ids, and calls fn with each
// item's logits (frames × vocab, frames = rows[i]+4) while the output tensor is alive: fn
// must not keep the slice. Items are zero-padded to the longest, as sherpa-onnx pads them.
func (m *model) forward(ctx context.Context, feats [][]float32, rows []int, langs, norms []int32, fn func(i int, logits []float32, frames int)) error {
	n := len(feats)
	if n == 0 {
		return nil
	}
	if len(rows) != n || len(langs) != n || len(norms) != n {
		return fmt.Errorf("%w: batch of %d with %d lengths, %d languages, %d text norms", ErrModel, n, len(rows), len(langs), len(norms))
	}
	dim := numMelBins * m.lfrM
	tmax := 0
	for _, r := range rows {
		tmax = max(tmax, r)
	}
	if tmax == 0 {
		return fmt.Errorf("%w: no feature frames", ErrModel)
	}
	var x []float32
	if n == 1 {
		x = feats[0][:rows[0]*dim]
	} else {
		x = make([]float32, n*tmax*dim)
		for i, f := range feats {
			copy(x[i*tmax*dim:], f[:rows[i]*dim])
		}
	}
	xt, err := ort.NewTensor(ort.NewShape(int64(n), int64(tmax), int64(dim)), x)
	if err != nil {
		return fmt.Errorf("%w: input tensor: %v", ErrModel, err)
	}
	defer xt.Destroy()
	var lt ort.Value
	if m.lenInt64 {
		l := make([]int64, n)
		for i, r := range rows {
			l[i] = int64(r)
		}
		t, err := ort.NewTensor(ort.NewShape(int64(n)), l)
		if err != nil {
			return fmt.Errorf("%w: length tensor: %v", ErrModel, err)
		}
		lt = t
	} else {
		l := make([]int32, n)
		for i, r := range rows {
			l[i] = int32(r)
		}
		t, err := ort.NewTensor(ort.NewShape(int64(n)), l)
		if err != nil {
			return fmt.Errorf("%w: length tensor: %v", ErrModel, err)
		}
		lt = t
	}
	defer lt.Destroy()
	langT, err := ort.NewTensor(ort.NewShape(int64(n)), langs)
	if err != nil {
		return fmt.Errorf("%w: language tensor: %v", ErrModel, err)
	}
	defer langT.Destroy()
	normT, err := ort.NewTensor(ort.NewShape(int64(n)), norms)
	if err != nil {
		return fmt.Errorf("%w: text_norm tensor: %v", ErrModel, err)
	}
	defer normT.Destroy()

	outs := make([]ort.Value, len(m.outputs))
	if err := m.run(ctx, []ort.Value{xt, lt, langT, normT}, outs); err != nil {
		return err
	}
	defer func() {
		for _, o := range outs {
			if o != nil {
				o.Destroy()
			}
		}
	}()
	lg, ok := outs[0].(*ort.Tensor[float32])
	if !ok {
		return fmt.Errorf("%w: %s: output %s is not a float32 tensor", ErrModel, m.path, m.outputs[0])
	}
	shape := lg.GetShape()
	if len(shape) != 3 || int(shape[0]) != n || int(shape[2]) != m.vocab {
		return fmt.Errorf("%w: %s: output %s has shape %v, want [%d T %d]", ErrModel, m.path, m.outputs[0], shape, n, m.vocab)
	}
	tout := int(shape[1])
	data := lg.GetData()
	for i := range n {
		// sherpa-onnx: the valid length is the feature length + 4 (the four query frames).
		t := min(rows[i]+4, tout)
		fn(i, data[i*tout*m.vocab:(i*tout+t)*m.vocab], t)
	}
	return nil
}

// run executes the session, terminating it early when ctx is cancelled.
func (m *model) run(ctx context.Context, in, out []ort.Value) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	opts, release, err := gpu.RunOptions(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrModel, err)
	}
	defer release()
	if err := m.sess.RunWithOptions(in, out, opts); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %s: %v", ErrModel, m.path, err)
	}
	return nil
}

func (m *model) close() error {
	if m.sess == nil {
		return nil
	}
	return m.sess.Close()
}

// languageID maps a Config language to the model's query id.
func (m *model) languageID(l string) (int32, error) {
	if l == "" {
		l = "auto"
	}
	if id, ok := m.lang[l]; ok {
		return id, nil
	}
	have := make([]string, 0, len(m.lang))
	for k := range m.lang {
		have = append(have, k)
	}
	sort.Strings(have)
	return 0, fmt.Errorf("%w: language %q (want one of %s)", ErrConfig, l, strings.Join(have, ", "))
}
