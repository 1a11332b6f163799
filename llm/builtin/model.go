// Package builtin is Parley's in-process LLM: a decoder over ONNX Runtime for the chat models
// published in the onnx-community / transformers.js layout (Qwen3 first; Qwen2.5 and Llama 3.2
// share it), with the model's own tokenizer.json and Jinja chat template, a KV cache kept
// across the turns of a conversation, and sampling done here. It implements llm.Backend, so
// `llm.backend = builtin` needs no server.
package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/llm/tokenizer"
)

// ErrLayout means the ONNX graph is not the decoder layout this package runs.
var ErrLayout = errors.New("not an onnx-community decoder layout")

// ErrModel is wrapped by every other model-directory problem (missing or malformed files).
var ErrModel = errors.New("bad model directory")

// ModelConfig is what config.json and generation_config.json say about the model.
type ModelConfig struct {
	ModelType string
	Layers    int
	Heads     int
	KVHeads   int
	HeadDim   int
	Vocab     int
	MaxPos    int   // max_position_embeddings
	EOS       []int // every id that ends an answer
	BOS       int   // -1 when none
	// Generation defaults from generation_config.json (0 when absent).
	Temperature float64
	TopP        float64
	TopK        int
	MinP        float64
	RepPenalty  float64
}

// Variants in the order Auto prefers them on a CPU: 4-bit and 8-bit weights first (fast and
// small), then full precision, then float16 (which ONNX Runtime's CPU kernels mostly upcast).
var variantFiles = []struct{ name, file string }{
	{"q4", "model_q4.onnx"},
	{"int8", "model_int8.onnx"},
	{"quantized", "model_quantized.onnx"},
	{"uint8", "model_uint8.onnx"},
	{"fp32", "model.onnx"},
	{"q4f16", "model_q4f16.onnx"},
	{"fp16", "model_fp16.onnx"},
	{"bnb4", "model_bnb4.onnx"},
}

// Variants lists the variant names Options.Variant accepts (besides "auto" and a file name).
func Variants() []string {
	out := make([]string, len(variantFiles))
	for i, v := range variantFiles {
		out[i] = v.name
	}
	return out
}

// findModel picks the ONNX file: variant is "auto"/"", a variant name, or a file name.
func findModel(dir, variant string) (string, error) {
	onnxDir := filepath.Join(dir, "onnx")
	if _, err := os.Stat(onnxDir); err != nil {
		onnxDir = dir // a flat directory also works
	}
	exists := func(f string) bool {
		st, err := os.Stat(filepath.Join(onnxDir, f))
		return err == nil && !st.IsDir()
	}
	switch variant {
	case "", "auto":
		for _, v := range variantFiles {
			if exists(v.file) {
				return filepath.Join(onnxDir, v.file), nil
			}
		}
		return "", fmt.Errorf("%w: %s has no ONNX decoder (looked for %s)", ErrModel, onnxDir, strings.Join(fileNames(), ", "))
	}
	for _, v := range variantFiles {
		if v.name == variant {
			if !exists(v.file) {
				return "", fmt.Errorf("%w: variant %s wants %s, which is not in %s", ErrModel, variant, v.file, onnxDir)
			}
			return filepath.Join(onnxDir, v.file), nil
		}
	}
	if strings.HasSuffix(variant, ".onnx") && exists(variant) {
		return filepath.Join(onnxDir, variant), nil
	}
	return "", fmt.Errorf("%w: unknown variant %q (want auto, %s, or an .onnx file in %s)", ErrModel, variant, strings.Join(Variants(), ", "), onnxDir)
}

func fileNames() []string {
	out := make([]string, len(variantFiles))
	for i, v := range variantFiles {
		out[i] = v.file
	}
	return out
}

type configJSON struct {
	ModelType   string          `json:"model_type"`
	Layers      int             `json:"num_hidden_layers"`
	Heads       int             `json:"num_attention_heads"`
	KVHeads     int             `json:"num_key_value_heads"`
	HeadDim     int             `json:"head_dim"`
	Hidden      int             `json:"hidden_size"`
	Vocab       int             `json:"vocab_size"`
	MaxPos      int             `json:"max_position_embeddings"`
	EOS         json.RawMessage `json:"eos_token_id"`
	BOS         json.RawMessage `json:"bos_token_id"`
	Temperature float64         `json:"temperature"`
	TopP        float64         `json:"top_p"`
	TopK        int             `json:"top_k"`
	MinP        float64         `json:"min_p"`
	RepPenalty  float64         `json:"repetition_penalty"`
}

// ids reads an id or a list of ids.
func ids(raw json.RawMessage) ([]int, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("want an id or a list of ids, got %s", s)
	}
	return many, nil
}

// ReadModelConfig reads config.json (and generation_config.json when present) from dir.
func ReadModelConfig(dir string) (ModelConfig, error) {
	var c configJSON
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return ModelConfig{}, fmt.Errorf("%w: %w", ErrModel, err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return ModelConfig{}, fmt.Errorf("%w: %s: %v", ErrModel, path, err)
	}
	gen := configJSON{EOS: c.EOS, BOS: c.BOS}
	if data, err := os.ReadFile(filepath.Join(dir, "generation_config.json")); err == nil {
		if err := json.Unmarshal(data, &gen); err != nil {
			return ModelConfig{}, fmt.Errorf("%w: %s: %v", ErrModel, filepath.Join(dir, "generation_config.json"), err)
		}
	}
	out := ModelConfig{ModelType: c.ModelType, Layers: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		Vocab: c.Vocab, MaxPos: c.MaxPos, BOS: -1,
		Temperature: gen.Temperature, TopP: gen.TopP, TopK: gen.TopK, MinP: gen.MinP, RepPenalty: gen.RepPenalty}
	if out.KVHeads == 0 {
		out.KVHeads = out.Heads
	}
	if out.HeadDim == 0 && out.Heads > 0 {
		out.HeadDim = c.Hidden / out.Heads
	}
	if out.Layers <= 0 || out.KVHeads <= 0 || out.HeadDim <= 0 || out.Vocab <= 0 {
		return ModelConfig{}, fmt.Errorf("%w: %s: num_hidden_layers %d, num_key_value_heads %d, head_dim %d, vocab_size %d: all must be positive",
			ErrModel, path, out.Layers, out.KVHeads, out.HeadDim, out.Vocab)
	}
	eos := gen.EOS
	if len(bytes.TrimSpace(eos)) == 0 || string(bytes.TrimSpace(eos)) == "null" {
		eos = c.EOS
	}
	if out.EOS, err = ids(eos); err != nil {
		return ModelConfig{}, fmt.Errorf("%w: %s: eos_token_id: %v", ErrModel, path, err)
	}
	if b, err := ids(c.BOS); err == nil && len(b) > 0 {
		out.BOS = b[0]
	}
	return out, nil
}

// layout is what the graph declares, checked against config.json.
type layout struct {
	inputs, outputs []string // names in the order the session binds them
	hasPos          bool
	kvType          string // "float32" or "float16"
	logitsType      string
}

var kvName = regexp.MustCompile(`^(past_key_values|present)\.(\d+)\.(key|value)$`)

// checkLayout validates the graph's interface against the onnx-community decoder layout and
// config.json; anything else is refused with one line that says what was found.
func checkLayout(info *gpu.ModelInfo, cfg ModelConfig) (layout, error) {
	l := layout{kvType: "", logitsType: ""}
	found := func() string {
		var in, out []string
		for _, t := range info.Inputs {
			in = append(in, t.Name)
		}
		for _, t := range info.Outputs {
			out = append(out, t.Name)
		}
		return fmt.Sprintf("inputs %s; outputs %s", summarize(in), summarize(out))
	}
	refuse := func(why string) (layout, error) {
		return layout{}, fmt.Errorf("%w: %s: %s (found %s; want input_ids, attention_mask, position_ids, past_key_values.N.key/value → logits, present.N.key/value)",
			ErrLayout, filepath.Base(info.Path), why, found())
	}
	past := map[string]gpu.TensorInfo{}
	for _, t := range info.Inputs {
		switch {
		case t.Name == "input_ids" || t.Name == "attention_mask" || t.Name == "position_ids":
			if t.Type != "int64" {
				return refuse(fmt.Sprintf("%s is %s, want int64", t.Name, t.Type))
			}
			l.hasPos = l.hasPos || t.Name == "position_ids"
		case kvName.MatchString(t.Name) && strings.HasPrefix(t.Name, "past_key_values."):
			past[t.Name] = t
		default:
			return refuse("unexpected input " + t.Name)
		}
	}
	if _, ok := info.Input("input_ids"); !ok {
		return refuse("no input_ids")
	}
	if _, ok := info.Input("attention_mask"); !ok {
		return refuse("no attention_mask")
	}
	logits, ok := info.Output("logits")
	if !ok {
		return refuse("no logits output")
	}
	if logits.Type != "float32" && logits.Type != "float16" {
		return refuse("logits are " + logits.Type)
	}
	if n := len(logits.Shape); n != 3 || (logits.Shape[2] > 0 && int(logits.Shape[2]) != cfg.Vocab) {
		return refuse(fmt.Sprintf("logits shape %v, want [batch, sequence, %d]", logits.Shape, cfg.Vocab))
	}
	l.logitsType = logits.Type
	if len(past) != 2*cfg.Layers {
		return refuse(fmt.Sprintf("%d past_key_values inputs, but config.json has %d layers (want %d)", len(past), cfg.Layers, 2*cfg.Layers))
	}
	l.inputs = []string{"input_ids", "attention_mask"}
	if l.hasPos {
		l.inputs = append(l.inputs, "position_ids")
	}
	l.outputs = []string{"logits"}
	for i := range cfg.Layers {
		for _, kv := range []string{"key", "value"} {
			in := fmt.Sprintf("past_key_values.%d.%s", i, kv)
			out := fmt.Sprintf("present.%d.%s", i, kv)
			t, ok := past[in]
			if !ok {
				return refuse("missing " + in)
			}
			o, ok := info.Output(out)
			if !ok {
				return refuse("missing output " + out)
			}
			if t.Type != "float32" && t.Type != "float16" {
				return refuse(fmt.Sprintf("%s is %s", in, t.Type))
			}
			if l.kvType == "" {
				l.kvType = t.Type
			}
			if t.Type != l.kvType || o.Type != l.kvType {
				return refuse(fmt.Sprintf("%s is %s and %s is %s, want both %s", in, t.Type, out, o.Type, l.kvType))
			}
			for _, x := range []gpu.TensorInfo{t, o} {
				if len(x.Shape) != 4 || (x.Shape[1] > 0 && int(x.Shape[1]) != cfg.KVHeads) || (x.Shape[3] > 0 && int(x.Shape[3]) != cfg.HeadDim) {
					return layout{}, fmt.Errorf("%w: %s: %s has shape %v, but config.json says [batch, %d kv heads, sequence, %d head dim]",
						ErrLayout, filepath.Base(info.Path), x.Name, x.Shape, cfg.KVHeads, cfg.HeadDim)
				}
			}
			l.inputs = append(l.inputs, in)
			l.outputs = append(l.outputs, out)
		}
	}
	if len(info.Outputs) != len(l.outputs) {
		return refuse("unexpected outputs")
	}
	return l, nil
}

// summarize lists names, folding the per-layer KV names into one pattern.
func summarize(names []string) string {
	var out []string
	layers := map[string]int{}
	for _, n := range names {
		if m := kvName.FindStringSubmatch(n); m != nil {
			k := m[1] + ".N." + m[3]
			if _, seen := layers[k]; !seen {
				out = append(out, k)
			}
			layers[k]++
			continue
		}
		out = append(out, n)
	}
	for i, n := range out {
		if c, ok := layers[n]; ok {
			out[i] = n + "×" + strconv.Itoa(c)
		}
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// checkExternalData reports an external-data file the model refers to that is missing (or
// outside its directory) by name, before ONNX Runtime fails on it.
func checkExternalData(info *gpu.ModelInfo) error {
	path := info.Path
	for _, f := range info.ExternalData {
		if filepath.IsAbs(f) || strings.Contains(f, "..") {
			return fmt.Errorf("%w: %s refers to external data %q outside its directory", ErrModel, path, f)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), f)); err != nil {
			return fmt.Errorf("%w: %s keeps its weights in %s, which is missing (download it next to the .onnx file)", ErrModel, filepath.Base(path), f)
		}
	}
	return nil
}

// loadTokenizer reads tokenizer.json and the chat template (tokenizer_config.json's
// chat_template, or chat_template.jinja).
func loadTokenizer(dir string) (*tokenizer.Tokenizer, string, map[string]string, error) {
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, "", nil, fmt.Errorf("%w: %w", ErrModel, err)
	}
	var tc struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
	}
	specials := map[string]string{}
	if data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		if err := json.Unmarshal(data, &tc); err != nil {
			return nil, "", nil, fmt.Errorf("%w: %s: %v", ErrModel, filepath.Join(dir, "tokenizer_config.json"), err)
		}
		specials["bos_token"] = tokenString(tc.BOS)
		specials["eos_token"] = tokenString(tc.EOS)
	}
	template := ""
	if len(tc.ChatTemplate) > 0 {
		var s string
		if err := json.Unmarshal(tc.ChatTemplate, &s); err == nil {
			template = s
		} else {
			// a list of named templates: take "default"
			var named []struct{ Name, Template string }
			if err := json.Unmarshal(tc.ChatTemplate, &named); err == nil {
				for _, n := range named {
					if n.Name == "default" {
						template = n.Template
					}
				}
			}
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		template = string(data)
	}
	if strings.TrimSpace(template) == "" {
		return nil, "", nil, fmt.Errorf("%w: %s has no chat template (tokenizer_config.json chat_template or chat_template.jinja)", ErrModel, dir)
	}
	return tok, template, specials, nil
}

// tokenString reads "bos_token": "<s>" or {"content": "<s>", …}.
func tokenString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct{ Content string }
	if json.Unmarshal(raw, &o) == nil {
		return o.Content
	}
	return ""
}
