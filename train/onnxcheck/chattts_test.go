package onnxcheck

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
)

// ChatTTS bundles made by train/chattts/export.py (see train/chattts/CONTRACT.md).
var chatttsDirs = []string{
	"../../testdata/chattts/tiny",
	"../../assets/demo/chattts",
}

type ctConfig struct {
	Files map[string]string `json:"files"`
	GPT   struct {
		Hidden, Layers, Heads int
		HeadDim               int `json:"head_dim"`
		NumTextTokens         int `json:"num_text_tokens"`
		NumAudioTokens        int `json:"num_audio_tokens"`
		NumVQ                 int `json:"num_vq"`
	} `json:"gpt"`
	EOSCode int `json:"eos_code"`
	Audio   struct {
		NMels int `json:"n_mels"`
		NFFT  int `json:"n_fft"`
	} `json:"audio"`
}

type ctGPTCase struct {
	InputIDs      [][][]int64 `json:"input_ids"`
	TextMask      [][]bool    `json:"text_mask"`
	SpkEmb        [][]float64 `json:"spk_emb"`
	AttentionMask [][]int64   `json:"attention_mask"`
	PositionIDs   [][]int64   `json:"position_ids"`
	PastKVShape   []int64     `json:"past_kv_shape"`
	LogitsText    [][]float64 `json:"logits_text"`
	LogitsCode    [][][]float64
	Hidden        [][]float64 `json:"hidden"`
	PresentShape  []int64     `json:"present_kv_shape"`
	KVSamples     [][]float64 `json:"present_kv_samples"`
}

type ctReference struct {
	Tolerance float64 `json:"tolerance"`
	Speaker   []float64
	GPT       struct {
		Prefill ctGPTCase `json:"prefill"`
		Step    ctGPTCase `json:"step"`
	} `json:"gpt"`
	Greedy struct {
		PromptIDs []int64   `json:"prompt_ids"`
		MaxNew    int       `json:"max_new_tokens"`
		Codes     [][]int64 `json:"codes"`
		RepPen    struct {
			Penalty float64   `json:"penalty"`
			Window  int       `json:"window"`
			Codes   [][]int64 `json:"codes"`
		} `json:"with_repetition_penalty"`
	} `json:"greedy"`
	Decoder struct {
		Hiddens  [][][]float64 `json:"hiddens"`
		Mel      []float64     `json:"mel"`
		MelShape []int64       `json:"mel_shape"`
	} `json:"decoder"`
	Vocos struct {
		Shape     []int64   `json:"shape"`
		Frames    int       `json:"frames"`
		Mag       []float64 `json:"mag"`
		Phase     []float64 `json:"phase"`
		MagStats  ctStats   `json:"mag_stats"`
		PhaseStat ctStats   `json:"phase_stats"`
	} `json:"vocos"`
	Mel struct {
		LogMel []float64 `json:"log_mel"`
		Shape  []int64   `json:"shape"`
	} `json:"mel"`
	DVAE *struct {
		Codes [][][]int64 `json:"codes"`
		Shape []int64     `json:"shape"`
	} `json:"dvae"`
}

type ctStats struct {
	Mean, Std, Min, Max, L2 float64
}

// UnmarshalJSON maps logits_code (the one field whose Go name differs in more than case).
func (c *ctGPTCase) UnmarshalJSON(b []byte) error {
	type plain ctGPTCase
	var aux struct {
		plain
		LogitsCode [][][]float64 `json:"logits_code"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*c = ctGPTCase(aux.plain)
	c.LogitsCode = aux.LogitsCode
	return nil
}

type ctBundle struct {
	dir string
	cfg ctConfig
	ref ctReference
}

func chatttsBundles(t *testing.T) []ctBundle {
	t.Helper()
	var out []ctBundle
	for _, d := range chatttsDirs {
		if _, err := os.Stat(filepath.Join(d, "config.json")); err != nil {
			continue
		}
		var b ctBundle
		b.dir = d
		readJSON(t, filepath.Join(d, "config.json"), &b.cfg)
		rp, ok := referencePath(d)
		if !ok {
			t.Fatalf("%s: no reference.json", d)
		}
		readJSON(t, rp, &b.ref)
		if b.ref.Tolerance <= 0 {
			t.Fatalf("%s: reference has no tolerance", rp)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		t.Fatal("no ChatTTS bundle found; run `make -C train test-models`")
	}
	return out
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func (b ctBundle) open(t *testing.T, part string, inputs, outputs []string) *gpu.Session {
	t.Helper()
	name, ok := b.cfg.Files[part]
	if !ok {
		t.Fatalf("%s/config.json: files has no %q", b.dir, part)
	}
	s, err := gpu.Open(filepath.Join(b.dir, name), inputs, outputs, gpu.Options{Provider: "cpu", IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func tensor[T ort.TensorData](t *testing.T, data []T, shape ...int64) *ort.Tensor[T] {
	t.Helper()
	x, err := ort.NewTensor(ort.NewShape(shape...), data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Destroy() })
	return x
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// closeTo applies the reference's rule: |got - want| <= tol * max(1, |want|).
func closeTo(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) < len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i, w := range want {
		d := math.Abs(float64(got[i])-w) / math.Max(1, math.Abs(w))
		if d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	if !(worst <= tol) {
		t.Errorf("%s: worst relative difference %.3g at %d (onnx %v, torch %v), want <= %g",
			what, worst, at, got[at], want[at], tol)
	} else {
		t.Logf("%s: worst relative difference %.2g", what, worst)
	}
}

func flat2(v [][]float64) []float64 {
	var out []float64
	for _, r := range v {
		out = append(out, r...)
	}
	return out
}

func flat3(v [][][]float64) []float64 {
	var out []float64
	for _, r := range v {
		out = append(out, flat2(r)...)
	}
	return out
}

var gptInputs = []string{"input_ids", "text_mask", "spk_emb", "attention_mask", "position_ids", "past_kv"}
var gptOutputs = []string{"logits_text", "logits_code", "hidden", "present_kv"}

type gptOut struct {
	text, code, hidden []float32
	present            *ort.Tensor[float32]
}

// runGPT runs one prefill or step; past may be nil (an empty cache).
func runGPT(t *testing.T, s *gpu.Session, cfg ctConfig, ids []int64, mask []bool, spk []float32, att, pos []int64,
	batch, seq int64, past *ort.Tensor[float32]) gptOut {
	t.Helper()
	g := cfg.GPT
	if past == nil {
		past = tensor(t, []float32{}, int64(g.Layers), 2, batch, int64(g.Heads), 0, int64(g.HeadDim))
	}
	total := int64(len(att)) / batch
	ins := []ort.Value{
		tensor(t, ids, batch, seq, int64(g.NumVQ)), tensor(t, mask, batch, seq), tensor(t, spk, batch, int64(g.Hidden)),
		tensor(t, att, batch, total), tensor(t, pos, batch, seq), past,
	}
	outs := make([]ort.Value, 4)
	if err := s.Run(ins, outs); err != nil {
		t.Fatalf("gpt run: %v", err)
	}
	for _, o := range outs[:3] {
		defer o.Destroy()
	}
	get := func(v ort.Value) []float32 {
		x, ok := v.(*ort.Tensor[float32])
		if !ok {
			t.Fatalf("gpt output is %T, want float32", v)
		}
		return append([]float32(nil), x.GetData()...)
	}
	pres, ok := outs[3].(*ort.Tensor[float32])
	if !ok {
		t.Fatalf("present_kv is %T", outs[3])
	}
	t.Cleanup(func() { pres.Destroy() })
	return gptOut{text: get(outs[0]), code: get(outs[1]), hidden: get(outs[2]), present: pres}
}

func gptCaseInputs(c ctGPTCase) (ids []int64, mask []bool, att, pos []int64) {
	for _, r := range c.InputIDs {
		for _, p := range r {
			ids = append(ids, p...)
		}
	}
	for _, r := range c.TextMask {
		mask = append(mask, r...)
	}
	for _, r := range c.AttentionMask {
		att = append(att, r...)
	}
	for _, r := range c.PositionIDs {
		pos = append(pos, r...)
	}
	return
}

// TestChatTTSGPTParity: a left-padded batch of two prompts (one with [spk_emb]) prefilled, then
// one cached step; logits, hidden state and cache must match PyTorch.
func TestChatTTSGPTParity(t *testing.T) {
	gputest.RequireORT(t)
	for _, b := range chatttsBundles(t) {
		t.Run(filepath.Base(b.dir), func(t *testing.T) {
			s := b.open(t, "gpt", gptInputs, gptOutputs)
			tol := b.ref.Tolerance
			pre := b.ref.GPT.Prefill
			ids, mask, att, pos := gptCaseInputs(pre)
			batch, seq := int64(len(pre.InputIDs)), int64(len(pre.InputIDs[0]))
			o := runGPT(t, s, b.cfg, ids, mask, f32(flat2(pre.SpkEmb)), att, pos, batch, seq, nil)
			closeTo(t, "prefill logits_text", o.text, flat2(pre.LogitsText), tol)
			closeTo(t, "prefill logits_code", o.code, flat3(pre.LogitsCode), tol)
			closeTo(t, "prefill hidden", o.hidden, flat2(pre.Hidden), tol)
			if got := fmt.Sprint(o.present.GetShape()); got != fmt.Sprint(pre.PresentShape) {
				t.Fatalf("present_kv shape %s, want %v", got, pre.PresentShape)
			}
			kv, shape := o.present.GetData(), o.present.GetShape()
			var gotKV []float32
			var wantKV []float64
			for _, smp := range pre.KVSamples { // [layer, k/v, batch, head, position, dim, value]
				idx := 0
				for d := 0; d < 6; d++ {
					idx = idx*int(shape[d]) + int(smp[d])
				}
				gotKV, wantKV = append(gotKV, kv[idx]), append(wantKV, smp[6])
			}
			closeTo(t, "present_kv samples", gotKV, wantKV, tol)
			st := b.ref.GPT.Step
			ids, mask, att, pos = gptCaseInputs(st)
			o2 := runGPT(t, s, b.cfg, ids, mask, f32(flat2(pre.SpkEmb)), att, pos, batch, 1, o.present)
			closeTo(t, "step logits_text", o2.text, flat2(st.LogitsText), tol)
			closeTo(t, "step logits_code", o2.code, flat3(st.LogitsCode), tol)
			closeTo(t, "step hidden", o2.hidden, flat2(st.Hidden), tol)
			if got := fmt.Sprint(o2.present.GetShape()); got != fmt.Sprint(st.PresentShape) {
				t.Errorf("step present_kv shape %s, want %v", got, st.PresentShape)
			}
		})
	}
}

// greedy is the engine's code loop with argmax: stop when any stream picks EOS.
func greedy(t *testing.T, s *gpu.Session, cfg ctConfig, prompt []int64, spk []float32, maxNew int,
	penalty float64, window int) ([][]int64, [][]float32) {
	t.Helper()
	g := cfg.GPT
	nvq, na := g.NumVQ, g.NumAudioTokens
	ids := make([]int64, 0, len(prompt)*nvq)
	mask := make([]bool, len(prompt))
	pos := make([]int64, len(prompt))
	for i, p := range prompt {
		for q := 0; q < nvq; q++ {
			ids = append(ids, p)
		}
		mask[i] = true
		pos[i] = int64(i)
	}
	total := len(prompt)
	var past *ort.Tensor[float32]
	var codes [][]int64
	var hiddens [][]float32
	for step := 0; step < maxNew; step++ {
		att := make([]int64, total)
		for i := range att {
			att[i] = 1
		}
		o := runGPT(t, s, cfg, ids, mask, spk, att, pos, 1, int64(len(mask)), past)
		past = o.present
		next := make([]int64, nvq)
		eos := false
		for q := 0; q < nvq; q++ {
			l := o.code[q*na : (q+1)*na]
			if penalty != 1 && len(codes) > 0 {
				freq := make([]int, na)
				from := max(0, len(codes)-window)
				for _, c := range codes[from:] {
					freq[c[q]]++
				}
				l = append([]float32(nil), l...)
				for k, n := range freq {
					if n == 0 {
						continue
					}
					a := float32(math.Pow(penalty, float64(n)))
					if l[k] < 0 {
						l[k] *= a
					} else {
						l[k] /= a
					}
				}
			}
			best := 0
			for k := range l {
				if l[k] > l[best] {
					best = k
				}
			}
			next[q] = int64(best)
			eos = eos || best == cfg.EOSCode
		}
		if eos {
			break
		}
		codes = append(codes, next)
		hiddens = append(hiddens, o.hidden)
		ids, mask, pos = next, []bool{false}, []int64{int64(total)}
		total++
	}
	return codes, hiddens
}

// TestChatTTSGreedyCodes: ONNX Runtime's greedy decode (with and without the repetition
// penalty) gives exactly PyTorch's code sequence.
func TestChatTTSGreedyCodes(t *testing.T) {
	gputest.RequireORT(t)
	for _, b := range chatttsBundles(t) {
		t.Run(filepath.Base(b.dir), func(t *testing.T) {
			s := b.open(t, "gpt", gptInputs, gptOutputs)
			gr := b.ref.Greedy
			got, _ := greedy(t, s, b.cfg, gr.PromptIDs, f32(b.ref.Speaker), gr.MaxNew, 1, 16)
			if fmt.Sprint(got) != fmt.Sprint(gr.Codes) {
				t.Errorf("greedy codes differ:\nonnx  %v\ntorch %v", got, gr.Codes)
			}
			got, _ = greedy(t, s, b.cfg, gr.PromptIDs, f32(b.ref.Speaker), gr.MaxNew, gr.RepPen.Penalty, gr.RepPen.Window)
			if fmt.Sprint(got) != fmt.Sprint(gr.RepPen.Codes) {
				t.Errorf("greedy codes with repetition penalty differ:\nonnx  %v\ntorch %v", got, gr.RepPen.Codes)
			}
			t.Logf("%d code frames match", len(gr.Codes))
		})
	}
}

func runOne(t *testing.T, s *gpu.Session, in ort.Value, nOut int) []ort.Value {
	t.Helper()
	outs := make([]ort.Value, nOut)
	if err := s.Run([]ort.Value{in}, outs); err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		t.Cleanup(func() { o.Destroy() })
	}
	return outs
}

// TestChatTTSDecoderVocosDVAE: decoder (hidden states -> log-mel), Vocos (log-mel -> magnitude,
// phase) and the DVAE encoder (log-mel -> codes) against PyTorch.
func TestChatTTSDecoderVocosDVAE(t *testing.T) {
	gputest.RequireORT(t)
	for _, b := range chatttsBundles(t) {
		t.Run(filepath.Base(b.dir), func(t *testing.T) {
			tol := b.ref.Tolerance
			d := b.ref.Decoder
			dec := b.open(t, "decoder", []string{"hiddens"}, []string{"mel"})
			h := d.Hiddens[0]
			melOut := runOne(t, dec, tensor(t, f32(flat2(h)), 1, int64(len(h)), int64(b.cfg.GPT.Hidden)), 1)[0].(*ort.Tensor[float32])
			if fmt.Sprint(melOut.GetShape()) != fmt.Sprint(d.MelShape) {
				t.Fatalf("mel shape %v, want %v", melOut.GetShape(), d.MelShape)
			}
			closeTo(t, "decoder mel", melOut.GetData(), d.Mel, tol)

			v := b.ref.Vocos
			voc := b.open(t, "vocos", []string{"mel"}, []string{"mag", "phase"})
			outs := runOne(t, voc, tensor(t, f32(d.Mel), d.MelShape...), 2)
			mag, phase := outs[0].(*ort.Tensor[float32]), outs[1].(*ort.Tensor[float32])
			if fmt.Sprint(mag.GetShape()) != fmt.Sprint(v.Shape) || fmt.Sprint(phase.GetShape()) != fmt.Sprint(v.Shape) {
				t.Fatalf("mag/phase shapes %v %v, want %v", mag.GetShape(), phase.GetShape(), v.Shape)
			}
			bins, frames := int(v.Shape[1]), int(v.Shape[2])
			first := func(x []float32) []float32 { // the first v.Frames frames of (1, bins, frames)
				out := make([]float32, 0, bins*v.Frames)
				for k := 0; k < bins; k++ {
					out = append(out, x[k*frames:k*frames+v.Frames]...)
				}
				return out
			}
			closeTo(t, "vocos mag", first(mag.GetData()), v.Mag, tol)
			closeTo(t, "vocos phase", first(phase.GetData()), v.Phase, tol)
			var sum float64
			for _, x := range mag.GetData() {
				sum += float64(x)
			}
			closeTo(t, "vocos mag mean", []float32{float32(sum / float64(len(mag.GetData())))}, []float64{v.MagStats.Mean}, tol)

			if b.ref.DVAE == nil {
				return
			}
			enc := b.open(t, "dvae_encoder", []string{"mel"}, []string{"codes"})
			c := runOne(t, enc, tensor(t, f32(b.ref.Mel.LogMel), b.ref.Mel.Shape...), 1)[0]
			ct, ok := c.(*ort.Tensor[int64])
			if !ok {
				t.Fatalf("codes is %T, want int64", c)
			}
			var want []int64
			for _, r := range b.ref.DVAE.Codes {
				for _, q := range r {
					want = append(want, q...)
				}
			}
			if fmt.Sprint(ct.GetShape()) != fmt.Sprint(b.ref.DVAE.Shape) || fmt.Sprint(ct.GetData()) != fmt.Sprint(want) {
				t.Errorf("dvae codes %v %v, want %v %v", ct.GetShape(), ct.GetData(), b.ref.DVAE.Shape, want)
			}
		})
	}
}

// TestChatTTSSignature: every graph declares the contract's names, element types and ranks.
func TestChatTTSSignature(t *testing.T) {
	gputest.RequireORT(t)
	type sig struct {
		part     string
		in, out  map[string]string
		inRank   map[string]int
		optional bool
	}
	sigs := []sig{
		{part: "gpt",
			in: map[string]string{"input_ids": "int64", "text_mask": "bool", "spk_emb": "float32",
				"attention_mask": "int64", "position_ids": "int64", "past_kv": "float32"},
			out:    map[string]string{"logits_text": "float32", "logits_code": "float32", "hidden": "float32", "present_kv": "float32"},
			inRank: map[string]int{"input_ids": 3, "text_mask": 2, "spk_emb": 2, "attention_mask": 2, "position_ids": 2, "past_kv": 6}},
		{part: "decoder", in: map[string]string{"hiddens": "float32"}, out: map[string]string{"mel": "float32"},
			inRank: map[string]int{"hiddens": 3}},
		{part: "vocos", in: map[string]string{"mel": "float32"}, out: map[string]string{"mag": "float32", "phase": "float32"},
			inRank: map[string]int{"mel": 3}},
		{part: "dvae_encoder", in: map[string]string{"mel": "float32"}, out: map[string]string{"codes": "int64"},
			inRank: map[string]int{"mel": 3}, optional: true},
	}
	for _, b := range chatttsBundles(t) {
		for _, sg := range sigs {
			name, ok := b.cfg.Files[sg.part]
			if !ok {
				if !sg.optional {
					t.Errorf("%s: config.json files lacks %s", b.dir, sg.part)
				}
				continue
			}
			info, err := gpu.Inspect(filepath.Join(b.dir, name))
			if err != nil {
				t.Fatal(err)
			}
			for n, typ := range sg.in {
				if err := info.RequireType(n, typ); err != nil {
					t.Errorf("%s/%s: %v", b.dir, name, err)
				}
				if ti, ok := info.Input(n); ok && len(ti.Shape) != sg.inRank[n] {
					t.Errorf("%s/%s: input %s has rank %d, want %d", b.dir, name, n, len(ti.Shape), sg.inRank[n])
				}
			}
			for n, typ := range sg.out {
				if err := info.RequireType(n, typ); err != nil {
					t.Errorf("%s/%s: %v", b.dir, name, err)
				}
			}
		}
	}
}
