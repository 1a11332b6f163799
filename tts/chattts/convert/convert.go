// Package convert turns an official ChatTTS release (2noise/ChatTTS's asset/ safetensors and
// the speaker statistics of ChatTTS/config/config.py) into the engine's export set
// (train/chattts/CONTRACT.md) without Python: the graphs come from templates the exporter made
// for the release's size (train/chattts/template.py), the weights from the release, made as the
// exporter makes them (weight norm folded, fp16 widened, transposed for MatMul, int8 per column).
package convert

import (
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/tts/chattts"
)

//go:embed template/official
var officialFS embed.FS

// Official is the template for the published model's size (GPT 20 × 768).
func Official() fs.FS {
	sub, err := fs.Sub(officialFS, "template/official")
	if err != nil {
		panic(err) // the embedded directory is part of the build
	}
	return sub
}

// Release files, per part of the model, relative to the asset directory.
var releaseFiles = map[string]string{
	"gpt":     "gpt/model.safetensors",
	"embed":   "Embed.safetensors",
	"decoder": "Decoder.safetensors",
	"dvae":    "DVAE.safetensors",
	"vocos":   "Vocos.safetensors",
}

// ReleaseFiles are the files of a release Convert reads, relative to its asset directory.
var ReleaseFiles = []string{"gpt/config.json", "gpt/model.safetensors", "Embed.safetensors", "Decoder.safetensors",
	"DVAE.safetensors", "Vocos.safetensors", "tokenizer/tokenizer.json"}

// AssetDir finds the asset directory of a release: dir itself or dir/asset.
func AssetDir(dir string) (string, bool) {
	for _, d := range []string{dir, filepath.Join(dir, "asset")} {
		if _, err := os.Stat(filepath.Join(d, "gpt", "model.safetensors")); err == nil {
			return d, true
		}
	}
	return "", false
}

// Options are a conversion's inputs.
type Options struct {
	Assets   string // the release's asset directory (AssetDir)
	SpkStat  string // ChatTTS/config/config.py, or a file holding its spk_stat string
	Template fs.FS  // nil = Official()
	Log      *slog.Logger
}

type templateRecipes struct {
	Size     string                       `json:"size"`
	Int8Bits int                          `json:"int8_bits"`
	Tensors  map[string][]int64           `json:"tensors"`
	Graphs   map[string]map[string]recipe `json:"graphs"`
}

type recipe struct {
	Op        string   `json:"op"` // copy | wn
	Src       []string `json:"src"`
	Transpose bool     `json:"transpose"`
	Quantize  int      `json:"quantize"` // bits: the int8 weights of this matrix
	Scale     int      `json:"scale"`    // bits: the scales of that quantization
	DType     string   `json:"dtype"`
	Shape     []int64  `json:"shape"`
}

// The release's names, mapped onto ours as train/chattts/checkpoint.py _rename does.
var (
	gammaRe    = regexp.MustCompile(`(decoder_block\.\d+)\.gamma$`)
	weightGRe  = regexp.MustCompile(`\.weight_g$`)
	weightVRe  = regexp.MustCompile(`\.weight_v$`)
	optionalRe = regexp.MustCompile(`(^|\.)(mel_spec\.spectrogram\.window|mel_spec\.mel_scale\.fb|istft\.window|` +
		`rotary_emb\.inv_freq)$|^embed_tokens\.weight$|^preprocessor_mel\.`)
)

func ourName(part, name string) string {
	if part == "decoder" || part == "dvae" {
		name = gammaRe.ReplaceAllString(name, "$1.weight")
	}
	name = weightGRe.ReplaceAllString(name, ".parametrizations.weight.original0")
	return weightVRe.ReplaceAllString(name, ".parametrizations.weight.original1")
}

// release is a release's tensors under our names.
type release struct {
	files map[string]*safetensors
	where map[string][2]string // our name -> part, release name
	shape map[string][]int64
}

func (r *release) Close() {
	for _, f := range r.files {
		f.Close()
	}
}

func (r *release) tensor(name string) ([]float32, []int64, error) {
	w, ok := r.where[name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: no tensor %s", ErrRelease, name)
	}
	v, err := r.files[w[0]].float32s(w[1])
	return v, r.shape[name], err
}

func openRelease(dir string, tpl *templateRecipes) (*release, error) {
	r := &release{files: map[string]*safetensors{}, where: map[string][2]string{}, shape: map[string][]int64{}}
	var problems []string
	for _, part := range []string{"gpt", "embed", "decoder", "dvae", "vocos"} {
		p := filepath.Join(dir, filepath.FromSlash(releaseFiles[part]))
		f, err := openSafetensors(p)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.files[part] = f
		var extra []string
		for _, k := range f.names() {
			ours := ourName(part, k)
			full := part + "." + ours
			if _, known := tpl.Tensors[full]; !known {
				if !optionalRe.MatchString(ours) {
					extra = append(extra, k)
				}
				continue
			}
			r.where[full] = [2]string{part, k}
			r.shape[full] = f.tensors[k].Shape
		}
		if len(extra) > 0 {
			problems = append(problems, fmt.Sprintf("%s: unexpected tensor(s) %s", p, short(extra)))
		}
	}
	var missing, misshaped []string
	for _, name := range sortedKeys(tpl.Tensors) {
		want := tpl.Tensors[name]
		got, ok := r.shape[name]
		switch {
		case !ok:
			missing = append(missing, name)
		case !slices.Equal(got, want):
			misshaped = append(misshaped, fmt.Sprintf("%s is %v, the %s size needs %v", name, got, tpl.Size, want))
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "missing tensor(s) "+short(missing))
	}
	problems = append(problems, misshaped...)
	if len(problems) > 0 {
		r.Close()
		return nil, fmt.Errorf("%w: %s: %s", ErrRelease, dir, strings.Join(problems, "; "))
	}
	return r, nil
}

func short(names []string) string {
	if len(names) > 8 {
		return strings.Join(names[:8], ", ") + fmt.Sprintf(" … (%d in all)", len(names))
	}
	return strings.Join(names, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// matrix is the float weight a recipe makes before any quantization: the source as it is, or
// torch's weight norm g · v / ‖v‖ per row (pairs concatenated by rows), then transposed.
func (r *release) matrix(rc recipe) ([]float32, []int64, error) {
	var data []float32
	var shape []int64
	switch rc.Op {
	case "copy":
		if len(rc.Src) != 1 {
			return nil, nil, fmt.Errorf("template: copy of %d tensors", len(rc.Src))
		}
		var err error
		if data, shape, err = r.tensor(rc.Src[0]); err != nil {
			return nil, nil, err
		}
	case "wn":
		if len(rc.Src) == 0 || len(rc.Src)%2 != 0 {
			return nil, nil, fmt.Errorf("template: weight norm of %d tensors", len(rc.Src))
		}
		var in int64 = -1
		var rows int64
		for i := 0; i < len(rc.Src); i += 2 {
			g, gs, err := r.tensor(rc.Src[i])
			if err != nil {
				return nil, nil, err
			}
			v, vs, err := r.tensor(rc.Src[i+1])
			if err != nil {
				return nil, nil, err
			}
			if len(vs) != 2 || int64(len(g)) != vs[0] || (in >= 0 && vs[1] != in) {
				return nil, nil, fmt.Errorf("%w: weight norm %s %v with %s %v", ErrRelease, rc.Src[i], gs, rc.Src[i+1], vs)
			}
			in = vs[1]
			for o := int64(0); o < vs[0]; o++ {
				row := v[o*in : (o+1)*in]
				var ss float64
				for _, x := range row {
					ss += float64(x) * float64(x)
				}
				norm := float32(math.Sqrt(ss))
				for _, x := range row {
					data = append(data, g[o]*x/norm)
				}
			}
			rows += vs[0]
		}
		shape = []int64{rows, in}
	default:
		return nil, nil, fmt.Errorf("template: unknown recipe %q", rc.Op)
	}
	if rc.Transpose {
		if len(shape) != 2 {
			return nil, nil, fmt.Errorf("template: transpose of a %d-D tensor %v", len(shape), rc.Src)
		}
		R, C := shape[0], shape[1]
		t := make([]float32, len(data))
		for i := int64(0); i < R; i++ {
			for j := int64(0); j < C; j++ {
				t[j*R+i] = data[i*C+j]
			}
		}
		data, shape = t, []int64{C, R}
	}
	return data, shape, nil
}

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// quantize is train/onnxquant.py quantize_per_channel: per column of a [K, N] matrix,
// symmetric, scale = max|w| / qmax (qmax 63 for 7 bits, 127 for 8), round half to even.
func quantize(w []float32, K, N int64, bits int) ([]int8, []float32) {
	qmax, qmin := 127.0, -127.0
	if bits == 7 {
		qmax, qmin = 63, -64
	}
	scale := make([]float64, N)
	for n := int64(0); n < N; n++ {
		var amax float64
		for k := int64(0); k < K; k++ {
			amax = max(amax, math.Abs(float64(w[k*N+n])))
		}
		scale[n] = 1
		if amax > 0 {
			scale[n] = amax / qmax
		}
	}
	q := make([]int8, len(w))
	for k := int64(0); k < K; k++ {
		for n := int64(0); n < N; n++ {
			q[k*N+n] = int8(min(qmax, max(qmin, math.RoundToEven(float64(w[k*N+n])/scale[n]))))
		}
	}
	s := make([]float32, N)
	for n := range s {
		s[n] = float32(scale[n])
	}
	return q, s
}

// bytesOf makes an initializer's raw data by its recipe.
func (r *release) bytesOf(name string, rc recipe) ([]byte, error) {
	m, shape, err := r.matrix(rc)
	if err != nil {
		return nil, err
	}
	if rc.Quantize > 0 || rc.Scale > 0 {
		if len(shape) != 2 {
			return nil, fmt.Errorf("template: %s quantizes a %d-D tensor", name, len(shape))
		}
		q, s := quantize(m, shape[0], shape[1], max(rc.Quantize, rc.Scale))
		if rc.Quantize > 0 {
			if !slices.Equal(shape, rc.Shape) {
				return nil, fmt.Errorf("%w: %s is %v, the template wants %v", ErrRelease, name, shape, rc.Shape)
			}
			b := make([]byte, len(q))
			for i, x := range q {
				b[i] = byte(x)
			}
			return b, nil
		}
		m, shape = s, []int64{int64(len(s))}
	}
	if int64(len(m)) != numel(rc.Shape) {
		return nil, fmt.Errorf("%w: %s has %d values (%v), the template wants %v", ErrRelease, name, len(m), shape, rc.Shape)
	}
	b := make([]byte, 4*len(m))
	for i, x := range m {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b, nil
}

func (rc recipe) size() int64 {
	if rc.DType == "int8" {
		return numel(rc.Shape)
	}
	return 4 * numel(rc.Shape)
}

// Convert writes the export set of the release in o to out (which must not exist: it is
// written as out+".partial" and renamed when whole). It returns the files written.
func Convert(ctx context.Context, o Options, out string) ([]string, error) {
	if o.Template == nil {
		o.Template = Official()
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tpl templateRecipes
	if b, err := fs.ReadFile(o.Template, "recipes.json"); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	} else if err := json.Unmarshal(b, &tpl); err != nil {
		return nil, fmt.Errorf("template: recipes.json: %w", err)
	}
	var conf map[string]any
	if b, err := fs.ReadFile(o.Template, chattts.ConfigFile); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	} else if err := json.Unmarshal(b, &conf); err != nil {
		return nil, fmt.Errorf("template: %s: %w", chattts.ConfigFile, err)
	}
	mc, err := chattts.ParseModelConfig("template config.json", mustJSON(conf))
	if err != nil {
		return nil, err
	}
	if err := checkGPTConfig(filepath.Join(o.Assets, "gpt", "config.json"), mc); err != nil {
		return nil, err
	}
	spkText, err := os.ReadFile(o.SpkStat)
	if err != nil {
		return nil, fmt.Errorf("%w: speaker statistics: %w", ErrRelease, err)
	}
	spk, err := parseSpkStat(o.SpkStat, string(spkText), mc.GPT.Hidden)
	if err != nil {
		return nil, err
	}
	tokPath := filepath.Join(o.Assets, "tokenizer", "tokenizer.json")
	tok, err := chattts.LoadTokenizer(tokPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRelease, err)
	}
	if tok.Len() != mc.GPT.NumTextTokens {
		return nil, fmt.Errorf("%w: %s has %d ids, the %s size %d", ErrRelease, tokPath, tok.Len(), tpl.Size, mc.GPT.NumTextTokens)
	}
	tokens := map[string]any{}
	for name := range mc.Tokens {
		id, ok := tok.ID(name)
		if !ok {
			return nil, fmt.Errorf("%w: %s has no token %s", ErrRelease, tokPath, name)
		}
		tokens[name] = id
	}
	rel, err := openRelease(o.Assets, &tpl)
	if err != nil {
		return nil, err
	}
	defer rel.Close()

	if _, err := os.Stat(out); err == nil {
		return nil, fmt.Errorf("%s exists", out)
	}
	tmp := out + ".partial"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	var written []string
	for _, g := range sortedKeys(tpl.Graphs) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tb, err := fs.ReadFile(o.Template, g)
		if err != nil {
			return nil, fmt.Errorf("template: %w", err)
		}
		weights := map[string]weight{}
		for name, rc := range tpl.Graphs[g] {
			weights[name] = weight{size: rc.size(), make: func() ([]byte, error) {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				return rel.bytesOf(name, rc)
			}}
		}
		f, err := os.Create(filepath.Join(tmp, g))
		if err != nil {
			return nil, err
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		n, err := fillModel(bw, tb, weights)
		if err == nil {
			err = bw.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && n != len(weights) {
			err = fmt.Errorf("template %s: %d of %d weights found in the graph", g, n, len(weights))
		}
		if err != nil {
			return nil, fmt.Errorf("writing %s: %w", g, err)
		}
		written = append(written, g)
		log.Info("chattts convert: graph written", "graph", g, "weights", n)
	}
	tb, err := os.ReadFile(tokPath)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "tokenizer.json"), tb, 0o644); err != nil {
		return nil, err
	}
	sb := make([]byte, 4*len(spk))
	for i, x := range spk {
		binary.LittleEndian.PutUint32(sb[4*i:], math.Float32bits(x))
	}
	if err := os.WriteFile(filepath.Join(tmp, "spk_stat.bin"), sb, 0o644); err != nil {
		return nil, err
	}
	written = append(written, "tokenizer.json", "spk_stat.bin")

	files := map[string]any{"gpt": "gpt.onnx", "decoder": "decoder.onnx", "vocos": "vocos.onnx",
		"tokenizer": "tokenizer.json", "spk_stat": "spk_stat.bin"}
	if _, ok := tpl.Graphs["dvae_encoder.onnx"]; ok {
		files["dvae_encoder"] = "dvae_encoder.onnx"
	}
	if _, ok := tpl.Graphs["gpt.int8.onnx"]; ok {
		files[chattts.Int8File] = "gpt.int8.onnx"
	}
	conf["files"] = files
	conf["tokens"] = tokens
	conf["eos_text"] = tokens["[Ebreak]"]
	conf["comment"] = "2noise/ChatTTS converted by parley (Go, " + tpl.Size + " template)"
	id, err := modelID(tmp, "spk_stat.bin", "dvae_encoder.onnx")
	if err != nil {
		return nil, err
	}
	conf["model_id"] = id
	cb, _ := json.MarshalIndent(conf, "", " ")
	if err := os.WriteFile(filepath.Join(tmp, chattts.ConfigFile), append(cb, '\n'), 0o644); err != nil {
		return nil, err
	}
	written = append(written, chattts.ConfigFile)
	if err := verify(tmp); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, err
	}
	ok = true
	return written, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// modelID is the exporter's model_id (train/chattts/export.py): the speaker statistics and the
// DVAE encoder hashed, the files that give seeds and clone codes their meaning.
func modelID(dir string, names ...string) (string, error) {
	h := sha256.New()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// verify reads the written set as the engine will: its config, each graph's declarations and
// the int8 GPT's scales.
func verify(dir string) error {
	mc, err := chattts.ReadModelConfig(dir)
	if err != nil {
		return err
	}
	for key, f := range mc.Files {
		if path.Ext(f) != ".onnx" {
			continue
		}
		info, err := gpu.Inspect(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if key == chattts.Int8File {
			if n, err := info.QuantizedMatMuls(); err != nil || n == 0 {
				return fmt.Errorf("%s: %d quantized MatMuls: %v", f, n, err)
			}
		}
	}
	return nil
}

// checkGPTConfig compares asset/gpt/config.json (a LlamaConfig) with the template's size, as
// train/chattts/checkpoint.py check_gpt_config does; a key that is absent or null says nothing.
func checkGPTConfig(p string, mc *chattts.ModelConfig) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRelease, err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrRelease, p, err)
	}
	g := mc.GPT
	want := map[string]int{"hidden_size": g.Hidden, "num_attention_heads": g.Heads,
		"num_hidden_layers": g.Layers, "num_audio_tokens": g.NumAudioTokens, "num_text_tokens": g.NumTextTokens, "num_vq": g.NumVQ}
	for _, k := range sortedKeys(want) {
		want := want[k]
		v, ok := c[k]
		if !ok || v == nil {
			continue
		}
		f, isNum := v.(float64)
		if !isNum || f != math.Trunc(f) {
			return fmt.Errorf("%w: %s: %s is %v, not a whole number", ErrRelease, p, k, v)
		}
		if int(f) != want {
			return fmt.Errorf("%w: %s: %s is %d, this template's size has %d", ErrRelease, p, k, int(f), want)
		}
	}
	return nil
}
