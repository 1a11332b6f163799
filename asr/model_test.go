package asr

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
)

var tinyDir = filepath.Join("..", "testdata", "sensevoice", "tiny")

// newTiny loads the project's tiny random SenseVoice model (testdata/sensevoice/tiny).
func newTiny(t testing.TB, cfg Config) *Recognizer {
	t.Helper()
	gputest.RequireORT(t)
	if cfg.GPU.IntraOpThreads == 0 {
		cfg.GPU.IntraOpThreads = 1
	}
	if cfg.GPU.Provider == "" {
		cfg.GPU.Provider = "cpu"
	}
	r, err := New(tinyDir, cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", tinyDir, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

type refCase struct {
	Name        string    `json:"name"`
	XShape      []int     `json:"x_shape"`
	X           []float32 `json:"x"`
	XLength     []int     `json:"x_length"`
	Language    []int32   `json:"language"`
	TextNorm    []int32   `json:"text_norm"`
	LogitsShape []int     `json:"logits_shape"`
	Logits      []float32 `json:"logits"`
}

// TestTinyMatchesPyTorch feeds reference.json's fixed features through our ONNX Runtime
// path (batched and padded where the case is) and compares with PyTorch's logits and with
// the greedy ids decoded from them.
func TestTinyMatchesPyTorch(t *testing.T) {
	for _, int8 := range []bool{false, true} {
		r := newTiny(t, Config{Int8: int8})
		b, err := os.ReadFile(filepath.Join(tinyDir, "reference.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ref struct {
			Cases []refCase `json:"cases"`
		}
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
		for _, c := range ref.Cases {
			n, tmax, dim := c.XShape[0], c.XShape[1], c.XShape[2]
			feats := make([][]float32, n)
			for i := range n {
				feats[i] = c.X[i*tmax*dim : (i+1)*tmax*dim]
			}
			logits, frames := make([][]float32, n), make([]int, n)
			err := r.m.forward(context.Background(), feats, c.XLength, c.Language, c.TextNorm, func(i int, l []float32, f int) {
				logits[i], frames[i] = append([]float32(nil), l...), f
			})
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			v, tout := c.LogitsShape[2], c.LogitsShape[1]
			for i := range n {
				if frames[i] != c.XLength[i]+4 {
					t.Fatalf("%s[%d]: %d logit frames, want %d", c.Name, i, frames[i], c.XLength[i]+4)
				}
				want := c.Logits[i*tout*v : (i*tout+frames[i])*v]
				d := maxAbsDiff(logits[i], want)
				tol := 1e-4
				if int8 {
					tol = 0.5 // quantised weights: compare decisions, not values
				}
				if d > tol {
					t.Errorf("int8=%v %s[%d]: logits differ from PyTorch by %g", int8, c.Name, i, d)
				}
				if !int8 {
					got, gf := greedyCTC(logits[i], frames[i], v, 0, -1, nil, nil)
					wid, wf := greedyCTC(want, frames[i], v, 0, -1, nil, nil)
					if !slices.Equal(got, wid) || !slices.Equal(gf, wf) {
						t.Errorf("%s[%d]: ids %v@%v, PyTorch %v@%v", c.Name, i, got, gf, wid, wf)
					}
				}
			}
		}
	}
}

type goldenCase struct {
	Audio    string `json:"audio"`
	Language string `json:"language"`
	ITN      bool   `json:"itn"`
	IDs      []int  `json:"ids"`
	Frames   []int  `json:"frames"`
}

func readGolden(t *testing.T) []goldenCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "tiny_golden.json"))
	if err != nil {
		t.Fatalf("%v (regenerate with /usr/bin/python3 asr/testdata/make_tiny_golden.py)", err)
	}
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g.Cases
}

// TestTinyGoldenIDs: audio → Go frontend → ONNX Runtime → greedy CTC gives the token ids
// PyTorch gives (torchaudio fbank, PyTorch model) for the same audio.
func TestTinyGoldenIDs(t *testing.T) {
	r := newTiny(t, Config{})
	for _, c := range readGolden(t) {
		pcm := readPCM16(t, filepath.Join("testdata", "fbank", c.Audio+".pcm"))
		res, err := r.TranscribeWith(context.Background(), pcm, Options{Language: c.Language, ITN: c.ITN})
		if err != nil {
			t.Fatalf("%s/%s: %v", c.Audio, c.Language, err)
		}
		if !slices.Equal(res.TokenIDs, c.IDs) {
			t.Errorf("%s lang=%s itn=%v:\n got %v\nwant %v", c.Audio, c.Language, c.ITN, res.TokenIDs, c.IDs)
			continue
		}
		if len(res.Segments) != 1 {
			t.Fatalf("%s: %d segments for %.1f s of audio", c.Audio, len(res.Segments), res.Duration)
		}
		for i := 4; i < len(c.Frames); i++ {
			want := math.Round(0.06*float64(c.Frames[i]-4)*1000) / 1000
			if got := res.Timestamps[i-4]; math.Abs(got-want) > 1e-9 {
				t.Errorf("%s: token %d at %.3f s, want %.3f", c.Audio, i, got, want)
			}
		}
		tok := r.Tokens()
		want := tagName(tok.Piece(c.IDs[0]))
		if k, known := tagKinds[want]; known && k != tagLang {
			want = ""
		}
		if res.Lang != want {
			t.Errorf("%s: Lang %q, want %q", c.Audio, res.Lang, want)
		}
	}
}

func loadCase(t testing.TB, name string) []float32 {
	return readPCM16(t, filepath.Join("testdata", "fbank", name+".pcm"))
}

// TestBatchEqualsSingle: zero-padded batches decode to the same tokens as one at a time.
func TestBatchEqualsSingle(t *testing.T) {
	r := newTiny(t, Config{BatchSize: 8})
	var inputs [][]float32
	for _, n := range []string{"speech_en", "speech_fast", "clipped", "noise_full", "short_560"} {
		inputs = append(inputs, loadCase(t, n))
	}
	inputs = append(inputs, loadCase(t, "speech_en")[:9000])
	ctx := context.Background()
	batch, err := r.TranscribeBatch(ctx, inputs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range inputs {
		one, err := r.Transcribe(ctx, x)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(one.TokenIDs, batch[i].TokenIDs) || !slices.Equal(one.Timestamps, batch[i].Timestamps) {
			t.Errorf("input %d: batched %v, alone %v", i, batch[i].TokenIDs, one.TokenIDs)
		}
	}
}

// TestDegenerateInputs: nothing, one sample, too short, silence and DC give empty results
// without calling into ONNX Runtime; clipping gives a result, not an error.
func TestDegenerateInputs(t *testing.T) {
	r := newTiny(t, Config{})
	cases := map[string][]float32{
		"nil":        nil,
		"one sample": {0.5},
		"399":        loadCase(t, "short_399"),
		"silence":    make([]float32, 16000),
		"dc":         loadCase(t, "dc"),
		"hiss":       loadCase(t, "noise_quiet"),
	}
	for name, x := range cases {
		res, err := r.Transcribe(context.Background(), x)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if res.Text != "" || len(res.Tokens) != 0 || len(res.TokenIDs) != 0 || res.Lang != "" {
			t.Errorf("%s: want an empty result, got %+v", name, res)
		}
		if res.Timings.Calls != 0 {
			t.Errorf("%s: %d model calls, want none", name, res.Timings.Calls)
		}
		if want := float64(len(x)) / 16000; res.Duration != want {
			t.Errorf("%s: duration %v, want %v", name, res.Duration, want)
		}
	}
	if res, err := r.Transcribe(context.Background(), loadCase(t, "clipped")); err != nil {
		t.Errorf("clipped: %v", err)
	} else if res.Timings.Calls != 1 || res.Timings.Model <= 0 || res.Timings.Features <= 0 {
		t.Errorf("clipped: timings %+v, want one model call with its stages timed", res.Timings)
	}
	if _, err := r.Transcribe(context.Background(), []float32{0, float32(math.NaN())}); err == nil {
		t.Error("NaN sample: no error")
	}
}

// TestLanguageOption: unknown languages are refused up front; known ones change the query.
func TestLanguageOption(t *testing.T) {
	r := newTiny(t, Config{})
	if _, err := r.TranscribeWith(context.Background(), loadCase(t, "speech_en"), Options{Language: "fr"}); err == nil {
		t.Error("language fr accepted")
	}
	gputest.RequireORT(t)
	if _, err := New(tinyDir, Config{Options: Options{Language: "klingon"}, GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}}); err == nil {
		t.Error("New accepted language klingon")
	}
}

// TestSuppressEmoUnknown: with the ban, <|EMO_UNKNOWN|> never appears among the ids.
func TestSuppressEmoUnknown(t *testing.T) {
	r := newTiny(t, Config{})
	emo := r.Tokens().ID("<|EMO_UNKNOWN|>")
	if emo < 0 {
		t.Fatal("tiny tokens.txt has no <|EMO_UNKNOWN|>")
	}
	for _, n := range []string{"speech_en", "speech_fast", "clipped", "noise_full"} {
		res, err := r.TranscribeWith(context.Background(), loadCase(t, n), Options{SuppressEmoUnknown: true})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(res.TokenIDs, emo) || res.Emotion == "EMO_UNKNOWN" {
			t.Errorf("%s: EMO_UNKNOWN decoded despite the ban: %v", n, res.TokenIDs)
		}
	}
}

// TestConcurrentCallers: many goroutines share one model through the worker pool and get
// what a lone caller gets.
func TestConcurrentCallers(t *testing.T) {
	r := newTiny(t, Config{Workers: 2})
	x := loadCase(t, "speech_fast")
	want, err := r.Transcribe(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	got := make(chan *Result, 8)
	for range 8 {
		go func() {
			res, err := r.Transcribe(context.Background(), x)
			errs <- err
			got <- res
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if res := <-got; !reflect.DeepEqual(res.TokenIDs, want.TokenIDs) {
			t.Errorf("concurrent result %v, alone %v", res.TokenIDs, want.TokenIDs)
		}
	}
}

func TestCancelledContext(t *testing.T) {
	r := newTiny(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Transcribe(ctx, loadCase(t, "speech_en")); err == nil {
		t.Fatal("cancelled context: no error")
	}
}

func TestClosed(t *testing.T) {
	r := newTiny(t, Config{})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Transcribe(context.Background(), loadCase(t, "speech_en")); err != ErrClosed {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
