package asr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
)

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFunASRLayout loads the FunASR/ModelScope export of the same tiny network and demands
// the ids the sherpa-onnx export gives.
func TestFunASRLayout(t *testing.T) {
	gputest.RequireORT(t)
	fr, err := New(filepath.Join("testdata", "funasr-tiny"), Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	if info := fr.Info(); info.Format != FormatFunASR || info.Vocab != 55 || !slices.Contains(info.Languages, "yue") {
		t.Fatalf("info %+v", info)
	}
	sr := newTiny(t, Config{})
	for _, c := range readGolden(t) {
		x := loadCase(t, c.Audio)
		o := Options{Language: c.Language, ITN: c.ITN}
		a, err := fr.TranscribeWith(context.Background(), x, o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := sr.TranscribeWith(context.Background(), x, o)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.TokenIDs, b.TokenIDs) || !slices.Equal(a.TokenIDs, c.IDs) {
			t.Errorf("%s: FunASR layout %v, sherpa-onnx layout %v, golden %v", c.Audio, a.TokenIDs, b.TokenIDs, c.IDs)
		}
	}
}

func TestInt8Preference(t *testing.T) {
	r := newTiny(t, Config{Int8: true})
	if p := r.Info().Path; filepath.Base(p) != "model.int8.onnx" {
		t.Fatalf("Int8 loaded %s", p)
	}
	r = newTiny(t, Config{})
	if p := r.Info().Path; filepath.Base(p) != "model.onnx" {
		t.Fatalf("default loaded %s", p)
	}
	f, err := New(filepath.Join(tinyDir, "model.int8.onnx"), Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		t.Fatalf("a model file path: %v", err)
	}
	f.Close()
}

// TestBadModels: every broken model is refused with an error naming the file and the fault.
func TestBadModels(t *testing.T) {
	gputest.RequireORT(t)
	tmp := t.TempDir()
	mk := func(name string, files map[string]string) string {
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for dst, src := range files {
			if strings.HasPrefix(src, "=") {
				if err := os.WriteFile(filepath.Join(d, dst), []byte(src[1:]), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			copyFile(t, src, filepath.Join(d, dst))
		}
		return d
	}
	sherpaModel := filepath.Join(tinyDir, "model.onnx")
	funasr := filepath.Join("testdata", "funasr-tiny")
	cases := []struct {
		name string
		dir  string
		want []string
	}{
		{"missing directory", filepath.Join(tmp, "nope"), []string{"nope"}},
		{"empty directory", mk("empty", nil), []string{"no SenseVoice model file", "model.onnx"}},
		{"no metadata", filepath.Join("testdata", "bad", "no-meta"), []string{"model.onnx", "metadata missing", "vocab_size", "neg_mean", "lang_auto"}},
		{"partial metadata", filepath.Join("testdata", "bad", "partial-meta"), []string{"model.onnx", "metadata missing: with_itn, neg_mean, inv_stddev"}},
		{"wrong inputs", filepath.Join("testdata", "bad", "wrong-inputs"), []string{"model.onnx", "not a SenseVoice model", "features"}},
		{"wrong input type", filepath.Join("testdata", "bad", "wrong-type"), []string{"model.onnx", "language"}},
		{"segment under a second", filepath.Join("testdata", "bad", "short-segment"), []string{"model.onnx", `"segment_s" = "0.5"`, "from 1 to 30"}},
		{"segment over its maximum", filepath.Join("testdata", "bad", "segment-over-max"), []string{"model.onnx", "segment_s (12s) is over max_segment_s (10s)"}},
		{"no tokens.txt", mk("notokens", map[string]string{"model.onnx": sherpaModel}), []string{"tokens.txt"}},
		{"short tokens.txt", mk("short", map[string]string{"model.onnx": sherpaModel, "tokens.txt": "=<unk> 0\na 1\n"}), []string{"tokens.txt has 2 tokens", "vocab_size 55"}},
		{"corrupt tokens.txt", mk("corrupt", map[string]string{"model.onnx": sherpaModel, "tokens.txt": "=<unk> zero\n"}), []string{"tokens.txt line 1"}},
		{"not ONNX", mk("garbage", map[string]string{"model.onnx": "=this is not a model", "tokens.txt": "=a 0\n"}), []string{"model.onnx"}},
		{"FunASR without am.mvn", mk("noam", map[string]string{"model.onnx": filepath.Join(funasr, "model.onnx"), "tokens.json": filepath.Join(funasr, "tokens.json")}), []string{"am.mvn"}},
		{"FunASR bad am.mvn", mk("badam", map[string]string{"model.onnx": filepath.Join(funasr, "model.onnx"), "tokens.json": filepath.Join(funasr, "tokens.json"), "am.mvn": "=<Nnet> </Nnet>"}), []string{"am.mvn", "<AddShift>"}},
		{"FunASR without tokens.json", mk("nojson", map[string]string{"model.onnx": filepath.Join(funasr, "model.onnx"), "am.mvn": filepath.Join(funasr, "am.mvn")}), []string{"tokens.json"}},
	}
	for _, c := range cases {
		r, err := New(c.dir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
		if err == nil {
			r.Close()
			t.Errorf("%s: loaded", c.name)
			continue
		}
		if !errors.Is(err, ErrBadModel) {
			t.Errorf("%s: error does not wrap ErrBadModel: %v", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
}

func TestBadConfig(t *testing.T) {
	gputest.RequireORT(t)
	for _, cfg := range []Config{{Workers: -1}, {MaxSegment: MaxSegment + 1}, {MaxSegment: 1}, {BatchSize: -2}, {VAD: "/nonexistent/silero.onnx"},
		{Segment: -time.Second}, {Segment: time.Second / 2}} {
		if r, err := New(tinyDir, cfg); err == nil {
			r.Close()
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// Each model is loaded once: its declarations are read from the file, and the one session is
// the one that runs (it was five loads: two inspections of two sessions each, then the real one).
func TestModelLoadedOnce(t *testing.T) {
	gputest.RequireORT(t)
	for _, dir := range []string{tinyDir, filepath.Join("testdata", "funasr-tiny")} {
		before := gpu.Loads()
		r, err := New(dir, Config{GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}, VAD: "none"}) // the VAD is its own model
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		if n := gpu.Loads() - before; n != 1 {
			t.Errorf("%s: loaded %d times, want once", dir, n)
		}
	}
}
