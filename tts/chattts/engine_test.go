package chattts

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
)

const tinyDir = "../../testdata/chattts/tiny"

// tinyRef is what the tests use of testdata/chattts/tiny/reference.json (train/chattts/CONTRACT.md).
type tinyRef struct {
	Tokenizer []struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	} `json:"tokenizer"`
	Speaker []float32 `json:"speaker"`
	Greedy  struct {
		PromptIDs []int     `json:"prompt_ids"`
		MaxNew    int       `json:"max_new_tokens"`
		Codes     [][]int32 `json:"codes"`
		RepPen    struct {
			Penalty float32   `json:"penalty"`
			Window  int       `json:"window"`
			Codes   [][]int32 `json:"codes"`
		} `json:"with_repetition_penalty"`
	} `json:"greedy"`
	Decoder struct {
		Hiddens [][][]float32 `json:"hiddens"`
	} `json:"decoder"`
	Vocos struct {
		Frames int       `json:"frames"`
		Mag    []float32 `json:"mag"`
		Phase  []float32 `json:"phase"`
	} `json:"vocos"`
	ISTFT struct {
		Audio []float32 `json:"audio"`
	} `json:"istft"`
}

func readTinyRef(t testing.TB) *tinyRef {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tinyDir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r tinyRef
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func tinyEngine(t testing.TB, mod ...func(*Config)) *Engine {
	t.Helper()
	return tinyEngineIn(t, tinyDir, mod...)
}

// tinyEngineIn opens dir (a copy or variant of the tiny model) as tinyEngine does.
func tinyEngineIn(t testing.TB, dir string, mod ...func(*Config)) *Engine {
	t.Helper()
	gputest.RequireORT(t)
	cfg := Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}}
	for _, m := range mod {
		m(&cfg)
	}
	e, err := New(dir, cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", dir, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func frames(codes []int32, q int) [][]int32 {
	var out [][]int32
	for i := 0; i+q <= len(codes); i += q {
		out = append(out, codes[i:i+q])
	}
	return out
}

// TestGreedyMatchesPyTorch: the Go decode loop with argmax instead of a draw gives PyTorch's
// code sequence exactly (the tiny random export's reference, 24 frames), without and with
// ChatTTS's repetition penalty; and the prompt tokenizes to the reference's ids.
func TestGreedyMatchesPyTorch(t *testing.T) {
	ref := readTinyRef(t)
	e := tinyEngine(t)
	prompt := e.tok.Encode("[Stts][spk_emb][speed_5]hello world[Ptts]")
	if !slices.Equal(prompt, ref.Greedy.PromptIDs) {
		t.Fatalf("prompt ids %v, reference %v", prompt, ref.Greedy.PromptIDs)
	}
	if got := e.codePrompt(e.tok.Encode("hello world"), 5, true, nil); !slices.Equal(got, ref.Greedy.PromptIDs) {
		t.Fatalf("codePrompt %v, reference %v", got, ref.Greedy.PromptIDs)
	}
	for _, c := range []struct {
		name    string
		penalty float32
		want    [][]int32
	}{{"argmax", 1, ref.Greedy.Codes}, {"argmax+penalty", ref.Greedy.RepPen.Penalty, ref.Greedy.RepPen.Codes}} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSampler(SampleParams{Greedy: true, Temperature: []float32{1}, RepetitionPenalty: c.penalty,
				Window: ref.Greedy.RepPen.Window, EOS: e.mc.EOSCode}, nil)
			res, err := e.decode(context.Background(), ref.Greedy.PromptIDs, decodeOptions{mode: modeCode, sampler: s,
				maxNew: ref.Greedy.MaxNew, spk: ref.Speaker})
			if err != nil {
				t.Fatal(err)
			}
			got := frames(res.Codes, e.mc.GPT.NumVQ)
			if len(got) != len(c.want) {
				t.Fatalf("%d frames, PyTorch %d", len(got), len(c.want))
			}
			for i := range got {
				if !slices.Equal(got[i], c.want[i]) {
					t.Fatalf("frame %d: %v, PyTorch %v", i, got[i], c.want[i])
				}
			}
			if len(res.Hiddens) != len(got)*e.mc.GPT.Hidden {
				t.Fatalf("%d hidden values for %d frames", len(res.Hiddens), len(got))
			}
		})
	}
}

func TestTokenizerMatchesReference(t *testing.T) {
	ref := readTinyRef(t)
	tok, err := LoadTokenizer(filepath.Join(tinyDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ref.Tokenizer {
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("%q: %v, reference %v", c.Text, got, c.IDs)
		}
	}
}

// TestVocodeMatchesReference: Go's ISTFT on the reference Vocos frames equals torch.istft, and
// the whole decoder → Vocos → ISTFT chain on the reference hidden states agrees with it where
// the later frames cannot reach.
func TestVocodeMatchesReference(t *testing.T) {
	ref := readTinyRef(t)
	e := tinyEngine(t)
	ist, err := NewISTFT(e.mc.Audio.NFFT, e.mc.Audio.Hop)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ist.Run(ref.Vocos.Mag, ref.Vocos.Phase, ref.Vocos.Frames)
	if err != nil {
		t.Fatal(err)
	}
	want := ref.ISTFT.Audio
	if len(got) != len(want) {
		t.Fatalf("%d samples, torch %d", len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*math.Max(1, math.Abs(float64(want[i]))) {
			t.Fatalf("sample %d: %g, torch %g", i, got[i], want[i])
		}
	}
	var hid []float32
	for _, f := range ref.Decoder.Hiddens[0] {
		hid = append(hid, f...)
	}
	n := len(ref.Decoder.Hiddens[0])
	pcm, err := e.vocode(context.Background(), hid, n, ist, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pcm) != e.mc.Audio.Hop*(2*n-1) {
		t.Fatalf("%d samples for %d frames", len(pcm), n)
	}
	// samples before the last 2 reference frames' reach (n_fft/2 = 2 hops) are final in both
	for i := 0; i < len(want)-e.mc.Audio.NFFT/2; i++ {
		if d := math.Abs(float64(pcm[i] - want[i])); d > 1e-4*math.Max(1, math.Abs(float64(want[i]))) {
			t.Fatalf("sample %d: %g, torch %g (|d| %g)", i, pcm[i], want[i], d)
		}
	}
}

// TestPrefixContinues: with the reference's own first k greedy frames given as a speaker
// sample's codes (audio positions after the prompt, ChatTTS's spk_smp), greedy decoding goes
// on exactly as the reference did — the prefix enters the cache as if generated.
func TestPrefixContinues(t *testing.T) {
	ref := readTinyRef(t)
	e := tinyEngine(t)
	const k = 5
	prefix := slices.Concat(ref.Greedy.Codes[:k]...)
	s := NewSampler(SampleParams{Greedy: true, Temperature: []float32{1}, EOS: e.mc.EOSCode}, nil)
	res, err := e.decode(context.Background(), ref.Greedy.PromptIDs, decodeOptions{mode: modeCode, sampler: s,
		maxNew: ref.Greedy.MaxNew - k, spk: ref.Speaker, prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	got := frames(res.Codes, e.mc.GPT.NumVQ)
	want := ref.Greedy.Codes[k:]
	if len(got) != len(want) {
		t.Fatalf("%d frames after the prefix, reference %d", len(got), len(want))
	}
	for i := range got {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("frame %d after the prefix: %v, reference %v", i, got[i], want[i])
		}
	}
	if _, err := e.decode(context.Background(), ref.Greedy.PromptIDs, decodeOptions{mode: modeCode, sampler: s,
		maxNew: 4, prefix: []int32{1, 2, 3}}); err == nil {
		t.Error("a prefix of 3 codes (not whole frames) accepted")
	}
	// through the engine: a speaker sample changes the audio and bad samples are refused
	a, _, _ := synthAll(t, e, tts.Request{Text: "hello", Seed: 2})
	st, err := e.SynthesizeWithSample(context.Background(), tts.Request{Text: "hello", Seed: 2}, &SpeakerSample{Text: "what time", Codes: prefix})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tts.ReadAll(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if hashPCM(a) == hashPCM(b.Data) {
		t.Error("the speaker sample changed nothing")
	}
	for _, bad := range []*SpeakerSample{{Codes: []int32{1, 2}}, {Codes: []int32{1, 2, 3, 625}}, {Codes: nil}} {
		if _, err := e.SynthesizeWithSample(context.Background(), tts.Request{Text: "hello"}, bad); err == nil {
			t.Errorf("sample %+v accepted", bad)
		}
	}
}

// TestGuidedDecode: a clone's decode guided by the same text without the sample draws from
// the weighted logits of the two sequences and speaks with the prompted one's hidden states.
// A weight near 0 gives the unprompted text's greedy codes, near 1 the prompted sequence's;
// either way the hidden states are the prompted sequence's (the sample's voice).
func TestGuidedDecode(t *testing.T) {
	ref := readTinyRef(t)
	e := tinyEngine(t)
	const k = 5
	prefix := slices.Concat(ref.Greedy.Codes[:k]...)
	prompted := append([]int{}, ref.Greedy.PromptIDs...)
	// a different, shorter text: the prompt's head ([Stts][spk_emb][speed_N]) and last 4 ids
	plain := append(append([]int{}, prompted[:3]...), prompted[len(prompted)-4:]...)
	greedy := func() *Sampler {
		return NewSampler(SampleParams{Greedy: true, Temperature: []float32{1}, EOS: e.mc.EOSCode}, nil)
	}
	run := func(prompt []int, pre []int32, guide []int, w float32) *decodeResult {
		t.Helper()
		res, err := e.decode(context.Background(), prompt, decodeOptions{mode: modeCode, sampler: greedy(), maxNew: 12,
			spk: ref.Speaker, prefix: pre, guide: guide, guideWeight: w})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	alone := run(prompted, prefix, nil, 0)
	unprompted := run(plain, nil, nil, 0)
	if slices.Equal(alone.Codes, unprompted.Codes) {
		t.Fatal("the test's two prompts decode alike: it could not tell them apart")
	}
	low := run(prompted, prefix, plain, 1e-6)
	if !slices.Equal(low.Codes, unprompted.Codes) {
		t.Errorf("weight 1e-6: codes %v, want the unprompted text's %v", low.Codes, unprompted.Codes)
	}
	if slices.Equal(low.Hiddens, unprompted.Hiddens) {
		t.Error("weight 1e-6: the hidden states are the unprompted sequence's, not the prompted one's")
	}
	high := run(prompted, prefix, plain, 1-1e-6)
	if !slices.Equal(high.Codes, alone.Codes) || !slices.Equal(high.Hiddens, alone.Hiddens) {
		t.Error("weight 1-1e-6: not the prompted sequence's own decode")
	}
	if one := run(prompted, prefix, plain, 1); !slices.Equal(one.Codes, alone.Codes) {
		t.Error("weight 1 (unguided) differs from no guide")
	}
	// through the engine: the model's code.sample_weight or Config.SampleWeight guides a clone
	smp := &SpeakerSample{Text: "what time", Codes: prefix}
	speak := func(eng *Engine) string {
		st, err := eng.SynthesizeWithSample(context.Background(), tts.Request{Text: "hello there", Seed: 2}, smp)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tts.ReadAll(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		return hashPCM(b.Data)
	}
	g, err := New(e.dir, Config{SampleWeight: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if speak(e) == speak(g) {
		t.Error("sample weight 0.3 changed nothing")
	}
	if _, err := New(e.dir, Config{SampleWeight: 1.5}); err == nil {
		t.Error("sample weight 1.5 accepted")
	}
	weighted := func(v any) func(map[string]any) {
		return func(m map[string]any) { m["code"].(map[string]any)["sample_weight"] = v }
	}
	m, err := New(tinyCopy(t, weighted(0.3)), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if speak(m) != speak(g) {
		t.Error("code.sample_weight 0.3 in config.json speaks unlike Config.SampleWeight 0.3")
	}
	for _, v := range []any{-0.5, 2.0} {
		if _, err := ReadModelConfig(tinyCopy(t, weighted(v))); err == nil || !strings.Contains(err.Error(), "code.sample_weight") {
			t.Errorf("sample_weight %v: %v", v, err)
		}
	}
}

// TestClonePromptOrder: upstream ChatTTS puts a clone's sample text before the [speed_N]
// prompt ([Stts][spk_emb]{sample}{prompt}{text}[Ptts], speaker.py decorate_code_prompts), as
// its official model learnt; Parley's demo voice learnt [speed_N] first.
func TestClonePromptOrder(t *testing.T) {
	dir := "../../assets/demo/chattts"
	mc, err := ReadModelConfig(dir)
	if err != nil {
		t.Skipf("no demo voice: %v", err)
	}
	tok, err := LoadTokenizer(filepath.Join(dir, mc.Files["tokenizer"]))
	if err != nil {
		t.Fatal(err)
	}
	text, sample := []int{101, 102}, []int{201, 202, 203}
	id := func(s string) int { return mc.Tokens[s] }
	for _, c := range []struct {
		size, format string
		want         []int
	}{
		{"official", "", []int{id("[Stts]"), id("[spk_emb]"), 201, 202, 203, id("[speed_5]"), 101, 102, id("[Ptts]")}},
		{"demo", "", []int{id("[Stts]"), id("[spk_emb]"), id("[speed_5]"), 201, 202, 203, 101, 102, id("[Ptts]")}},
		{"demo-dec12", "", []int{id("[Stts]"), id("[spk_emb]"), id("[speed_5]"), 201, 202, 203, 101, 102, id("[Ptts]")}},
		{"demo", sampleFirstFormat, []int{id("[Stts]"), id("[spk_emb]"), 201, 202, 203, id("[speed_5]"), 101, 102, id("[Ptts]")}},
		{"official", promptFirstFormat, []int{id("[Stts]"), id("[spk_emb]"), id("[speed_5]"), 201, 202, 203, 101, 102, id("[Ptts]")}},
	} {
		m := *mc
		m.Size, m.Code.SampleFormat = c.size, c.format
		e := &Engine{mc: &m, tok: tok}
		if got := e.codePrompt(text, 5, true, sample); !slices.Equal(got, c.want) {
			t.Errorf("size %s, format %q: %v, want %v", c.size, c.format, got, c.want)
		}
		if m.Speed = ""; e.timeScalesSpeed() != strings.HasPrefix(c.size, "demo") {
			t.Errorf("size %s without a speed: time-scales %v", c.size, e.timeScalesSpeed())
		}
		if got, want := e.codePrompt(text, 5, true, nil), []int{id("[Stts]"), id("[spk_emb]"), id("[speed_5]"), 101, 102, id("[Ptts]")}; !slices.Equal(got, want) {
			t.Errorf("no sample: %v, want %v", got, want)
		}
	}
}

// A clone voice's codes from another voice model, or from an earlier version of this one
// (the same name, no identity recorded), are refused with the reason, not spoken as noise;
// codes this model made speak; an export without an identity (older ones) takes any.
func TestCloneCodesFromAnotherModelRefused(t *testing.T) {
	dir := tinyCopy(t, func(m map[string]any) { m["model_id"] = "0123456789abcdef" })
	e, err := New(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	name := filepath.Base(dir)
	codes := make([]int32, 4*6)
	req := func(model, id string) tts.Request {
		return tts.Request{Text: "hello there", Seed: 3, HasSeed: true, Sample: &tts.Sample{Text: "hi", Codes: codes, Model: model, ModelID: id}}
	}
	for _, c := range []struct {
		name, model, id, want string
	}{
		{"another model", "chattts", "fedcba9876543210", "made with another voice model"},
		{"an earlier version of this one", name, "", "earlier version of " + name},
	} {
		if _, err := e.Synthesize(context.Background(), req(c.model, c.id)); !errors.Is(err, tts.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	s, err := e.Synthesize(context.Background(), req(name, "0123456789abcdef"))
	if err != nil {
		t.Fatalf("this model's own codes: %v", err)
	}
	s.Close()
	old, err := New(tinyCopy(t, nil), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if s, err := old.Synthesize(context.Background(), req("chattts", "fedcba9876543210")); err != nil {
		t.Errorf("an export without an identity refused a clone: %v", err)
	} else {
		s.Close()
	}
}
