package chattts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
)

type melRef struct {
	Mel struct {
		Audio  []float32 `json:"audio"`
		LogMel []float32 `json:"log_mel"`
		Shape  []int     `json:"shape"`
	} `json:"mel"`
	DVAE struct {
		Codes [][][]int64 `json:"codes"`
		Shape []int       `json:"shape"`
	} `json:"dvae"`
}

func readMelRef(t *testing.T) melRef {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tinyDir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r melRef
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

var contractMel = MelSpec{SampleRate: 24000, NFFT: 1024, Hop: 256, NMels: 100, FMin: 0, FMax: 12000, LogFloor: 1e-5}

// TestLogMelReference: Go's log-mel equals torchaudio's (reference.json → mel).
func TestLogMelReference(t *testing.T) {
	r := readMelRef(t)
	got, frames, err := contractMel.LogMel(r.Mel.Audio)
	if err != nil {
		t.Fatal(err)
	}
	if frames != r.Mel.Shape[2] || len(got) != len(r.Mel.LogMel) {
		t.Fatalf("%d frames (%d values), want %v", frames, len(got), r.Mel.Shape)
	}
	worst := 0.0
	for i, w := range r.Mel.LogMel {
		d := math.Abs(float64(got[i]-w)) / math.Max(1, math.Abs(float64(w)))
		worst = math.Max(worst, d)
	}
	if worst > 1e-4 {
		t.Fatalf("log-mel differs from torchaudio's by %.2g (relative)", worst)
	}
	t.Logf("max relative difference %.2g", worst)
	if _, _, err := contractMel.LogMel(make([]float32, 300)); !errors.Is(err, ErrSample) {
		t.Errorf("300 samples: %v", err)
	}
}

func tinyEncoder(t *testing.T) *SampleEncoder {
	t.Helper()
	gputest.RequireORT(t)
	e, err := NewSampleEncoder(tinyDir, gpu.Options{Provider: "cpu", IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestSampleEncoderReference: the DVAE encoder on the reference log-mel gives the reference
// codes, laid out frames × num_vq; the whole path from audio gives the same.
func TestSampleEncoderReference(t *testing.T) {
	r := readMelRef(t)
	e := tinyEncoder(t)
	if e.Mel() != contractMel {
		t.Fatalf("mel spec from config.json %+v", e.Mel())
	}
	want := r.DVAE.Codes[0]
	Q, T := len(want), len(want[0])
	check := func(what string, got []int32) {
		t.Helper()
		if len(got) != Q*T {
			t.Fatalf("%s: %d codes, want %d×%d", what, len(got), T, Q)
		}
		// codes are rounded floats: on another CPU a value on a rounding boundary may land on
		// the neighbouring code, so a few differences (≤ 2 %) are allowed, not a different encoding
		var diff []string
		for q := range Q {
			for f := range T {
				if int64(got[f*Q+q]) != want[q][f] {
					diff = append(diff, fmt.Sprintf("frame %d stream %d: %d, want %d", f, q, got[f*Q+q], want[q][f]))
				}
			}
		}
		if len(diff) > 0 {
			t.Logf("%s: %d of %d codes differ from PyTorch's: %v", what, len(diff), Q*T, diff[:min(len(diff), 5)])
		}
		if 50*len(diff) > Q*T {
			t.Fatalf("%s: %d of %d codes differ from PyTorch's: %v", what, len(diff), Q*T, diff[:min(len(diff), 5)])
		}
	}
	codes, err := e.EncodeMel(context.Background(), r.Mel.LogMel, r.Mel.Shape[2])
	if err != nil {
		t.Fatal(err)
	}
	check("from the reference mel", codes)
	codes, err = e.Encode(context.Background(), r.Mel.Audio, 24000)
	if !errors.Is(err, ErrSample) {
		t.Fatalf("0.1 s of audio: %v", err)
	}
	// from audio: 2 s of the reference signal repeated
	long := slices.Repeat(r.Mel.Audio, 20)
	codes, err = e.Encode(context.Background(), long, 24000)
	if err != nil || len(codes) != (1+len(long)/256)/2*Q {
		t.Fatalf("2 s: %d codes, %v", len(codes), err)
	}
	if _, err := e.Encode(context.Background(), make([]float32, 16000*31), 16000); !errors.Is(err, ErrSample) {
		t.Errorf("31 s: %v", err)
	}
}

func TestSampleEncoderMissing(t *testing.T) {
	gputest.RequireORT(t)
	dir := t.TempDir()
	b, _ := os.ReadFile(filepath.Join(tinyDir, ConfigFile))
	var cfg map[string]any
	json.Unmarshal(b, &cfg)
	delete(cfg["files"].(map[string]any), "dvae_encoder")
	b, _ = json.Marshal(cfg)
	os.WriteFile(filepath.Join(dir, ConfigFile), b, 0o644)
	for _, f := range []string{"gpt.onnx", "decoder.onnx", "vocos.onnx", "tokenizer.json", "spk_stat.bin"} {
		src, _ := os.ReadFile(filepath.Join(tinyDir, f))
		os.WriteFile(filepath.Join(dir, f), src, 0o644)
	}
	if _, err := NewSampleEncoder(dir, gpu.Options{Provider: "cpu"}); !errors.Is(err, ErrNoEncoder) {
		t.Fatalf("no encoder: %v", err)
	}
}

// TestRequestSample: a request's Sample (a clone voice's prompt, set by engines.ApplyVoice) is
// the speaker sample of SynthesizeWithSample.
func TestRequestSample(t *testing.T) {
	e := tinyEngine(t)
	enc := tinyEncoder(t)
	r := readMelRef(t)
	codes, err := enc.Encode(context.Background(), slices.Repeat(r.Mel.Audio, 10), 24000)
	if err != nil {
		t.Fatal(err)
	}
	req := tts.Request{Text: "hello", Seed: 2, HasSeed: true}
	plain, _, _ := synthAll(t, e, req)
	req.Sample = &tts.Sample{Text: "what time", Codes: codes}
	viaReq, _, _ := synthAll(t, e, req)
	st, err := e.SynthesizeWithSample(context.Background(), tts.Request{Text: "hello", Seed: 2, HasSeed: true}, &SpeakerSample{Text: "what time", Codes: codes})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tts.ReadAll(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if hashPCM(viaReq) != hashPCM(b.Data) || hashPCM(viaReq) == hashPCM(plain) {
		t.Fatal("Request.Sample is not the speaker sample")
	}
}
