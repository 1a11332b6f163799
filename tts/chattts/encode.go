package chattts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu"
)

// Zero-shot cloning's input: a recording turned into the DVAE codes of a SpeakerSample, as
// ChatTTS's sample-audio speaker does (CONTRACT.md, dvae_encoder.onnx and the log-mel).

// ErrNoEncoder: the export has no DVAE encoder (e.g. ChatTTS v0.1's decoder-only DVAE).
var ErrNoEncoder = errors.New("chattts: this voice model has no DVAE encoder (dvae_encoder.onnx), so it cannot clone from a clip")

// ErrSample wraps problems with the recording given to the encoder.
var ErrSample = errors.New("chattts: bad speaker sample")

// MaxSampleSeconds is the longest recording a speaker sample is made from: its codes sit in
// every code pass's prompt.
const MaxSampleSeconds = 30.0

// MelSpec is the log-mel of CONTRACT.md ("log-mel"): Vocos's MelSpectrogramFeatures.
type MelSpec struct {
	SampleRate int     // 24000
	NFFT       int     // 1024
	Hop        int     // 256
	NMels      int     // 100
	FMin, FMax float64 // 0, 12000 (HTK mel scale, triangles without area normalisation)
	LogFloor   float64 // 1e-5
}

// LogMel is the log-mel spectrogram of pcm (at s.SampleRate), bin-major: out[m*F+t] is mel
// bin m of frame t, F = 1 + len/Hop frames (centre padding by reflection, a periodic Hann
// window, magnitude spectrum). The recording must be longer than NFFT/2 samples.
func (s MelSpec) LogMel(pcm []float32) ([]float32, int, error) {
	n, hop, half := s.NFFT, s.Hop, s.NFFT/2
	if n < 4 || n&(n-1) != 0 || hop <= 0 || s.NMels <= 0 || s.SampleRate <= 0 || s.FMax <= s.FMin {
		return nil, 0, fmt.Errorf("chattts: mel spec %+v", s)
	}
	if len(pcm) <= half {
		return nil, 0, fmt.Errorf("%w: %d samples (reflection padding needs more than %d)", ErrSample, len(pcm), half)
	}
	frames := 1 + len(pcm)/hop
	// reflect-padded signal: x[-k] = x[k], x[L-1+k] = x[L-1-k]
	at := func(i int) float64 {
		L := len(pcm)
		if i < 0 {
			i = -i
		}
		if i >= L {
			i = 2*(L-1) - i
		}
		return float64(pcm[i])
	}
	window := make([]float64, n)
	for i := range window {
		window[i] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(i)/float64(n))
	}
	fb := s.filterbank()
	bins := half + 1
	plan := newFFTPlan(n)
	buf := make([]complex128, n)
	mag := make([]float64, bins)
	out := make([]float32, s.NMels*frames)
	floor := s.LogFloor
	if floor <= 0 {
		floor = 1e-5
	}
	for t := 0; t < frames; t++ {
		start := t*hop - half
		for i := 0; i < n; i++ {
			buf[i] = complex(at(start+i)*window[i], 0)
		}
		// |forward DFT| of a real frame equals |inverse DFT| (they are complex conjugates)
		plan.inverse(buf)
		for k := 0; k < bins; k++ {
			mag[k] = math.Hypot(real(buf[k]), imag(buf[k]))
		}
		for m, row := range fb {
			var v float64
			for k := row.lo; k < row.hi; k++ {
				v += row.w[k-row.lo] * mag[k]
			}
			out[m*frames+t] = float32(math.Log(math.Max(v, floor)))
		}
	}
	return out, frames, nil
}

type melRow struct {
	lo, hi int // bins with non-zero weight
	w      []float64
}

// filterbank is torchaudio's melscale_fbanks(norm=None, mel_scale="htk"), row per mel bin.
func (s MelSpec) filterbank() []melRow {
	bins := s.NFFT/2 + 1
	hz2mel := func(f float64) float64 { return 2595 * math.Log10(1+f/700) }
	mel2hz := func(m float64) float64 { return 700 * (math.Pow(10, m/2595) - 1) }
	mMin, mMax := hz2mel(s.FMin), hz2mel(s.FMax)
	pts := make([]float64, s.NMels+2)
	for i := range pts {
		pts[i] = mel2hz(mMin + (mMax-mMin)*float64(i)/float64(s.NMels+1))
	}
	rows := make([]melRow, s.NMels)
	for m := range rows {
		var w []float64
		lo, hi := -1, -1
		for k := 0; k < bins; k++ {
			f := float64(s.SampleRate) / 2 * float64(k) / float64(bins-1)
			down := (f - pts[m]) / (pts[m+1] - pts[m])
			up := (pts[m+2] - f) / (pts[m+2] - pts[m+1])
			v := math.Max(0, math.Min(down, up))
			if v > 0 {
				if lo < 0 {
					lo = k
				}
				hi = k + 1
			}
			if lo >= 0 && hi == k+1 {
				w = append(w, v)
			}
		}
		if lo < 0 {
			lo, hi = 0, 0
		}
		rows[m] = melRow{lo: lo, hi: hi, w: w[:max(0, hi-lo)]}
	}
	return rows
}

// SampleEncoder turns recordings into speaker-sample codes with an export's dvae_encoder.onnx.
// Safe for concurrent use.
type SampleEncoder struct {
	mc   *ModelConfig
	mel  MelSpec
	sess *gpu.Session
	path string
}

// ModelID is the export's identity, for the clone voices it makes ("" for older exports).
func (s *SampleEncoder) ModelID() string { return s.mc.ModelID }

// NewSampleEncoder loads the DVAE encoder of the export in dir (ErrNoEncoder when it has none).
func NewSampleEncoder(dir string, opts gpu.Options) (*SampleEncoder, error) {
	mc, err := ReadModelConfig(dir)
	if err != nil {
		return nil, err
	}
	name := mc.Files["dvae_encoder"]
	if name == "" {
		return nil, fmt.Errorf("%w (%s names none)", ErrNoEncoder, filepath.Join(dir, ConfigFile))
	}
	if filepath.IsAbs(name) || !filepath.IsLocal(name) {
		return nil, fmt.Errorf("%w: %s: files.dvae_encoder %q must be a name inside the model directory", ErrModel, dir, name)
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoEncoder, err)
	}
	var extra struct {
		Mel struct {
			FMin     *float64 `json:"f_min"`
			FMax     *float64 `json:"f_max"`
			MelScale string   `json:"mel_scale"`
			Power    *float64 `json:"power"`
			LogFloor *float64 `json:"log_floor"`
		} `json:"mel"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err := json.Unmarshal(b, &extra); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrModel, filepath.Join(dir, ConfigFile), err)
	}
	a := mc.Audio
	spec := MelSpec{SampleRate: a.SampleRate, NFFT: a.NFFT, Hop: a.Hop, NMels: a.NMels, FMin: 0, FMax: float64(a.SampleRate) / 2, LogFloor: 1e-5}
	if m := extra.Mel; m.FMin != nil || m.FMax != nil {
		if m.FMin != nil {
			spec.FMin = *m.FMin
		}
		if m.FMax != nil {
			spec.FMax = *m.FMax
		}
		if m.LogFloor != nil {
			spec.LogFloor = *m.LogFloor
		}
		if (m.MelScale != "" && m.MelScale != "htk") || (m.Power != nil && *m.Power != 1) {
			return nil, fmt.Errorf("%w: %s: mel scale %q power %v (the encoder supports htk, power 1)", ErrModel, dir, m.MelScale, m.Power)
		}
	}
	if spec.NFFT < 4 || spec.NFFT&(spec.NFFT-1) != 0 || spec.Hop <= 0 || spec.NMels <= 0 || spec.SampleRate <= 0 {
		return nil, fmt.Errorf("%w: %s: audio n_fft %d hop %d n_mels %d sample_rate %d", ErrModel, dir, spec.NFFT, spec.Hop, spec.NMels, spec.SampleRate)
	}
	sess, err := gpu.Open(path, []string{"mel"}, []string{"codes"}, opts)
	if err != nil {
		return nil, err
	}
	in, _ := sess.Info.Input("mel")
	out, _ := sess.Info.Output("codes")
	if len(in.Shape) != 3 || (in.Shape[1] > 0 && int(in.Shape[1]) != spec.NMels) || len(out.Shape) != 3 || (out.Shape[1] > 0 && int(out.Shape[1]) != mc.GPT.NumVQ) {
		sess.Destroy()
		return nil, fmt.Errorf("%w: %s: mel %v → codes %v, want (B,%d,F) → (B,%d,F/2)", ErrModel, path, in.Shape, out.Shape, spec.NMels, mc.GPT.NumVQ)
	}
	return &SampleEncoder{mc: mc, mel: spec, sess: sess, path: path}, nil
}

// Close releases the encoder.
func (e *SampleEncoder) Close() error {
	if e.sess != nil {
		e.sess.Destroy()
		e.sess = nil
	}
	return nil
}

// Mel is the log-mel the encoder computes.
func (e *SampleEncoder) Mel() MelSpec { return e.mel }

// Encode turns a recording (mono, at rate Hz) into speaker-sample codes: frames × num_vq,
// row-major, as SpeakerSample.Codes. The recording must hold 0.5..MaxSampleSeconds s.
func (e *SampleEncoder) Encode(ctx context.Context, pcm []float32, rate int) ([]int32, error) {
	secs := float64(len(pcm)) / float64(max(1, rate))
	if rate <= 0 || secs < 0.5 {
		return nil, fmt.Errorf("%w: %.2f s of audio; a clone needs 3–10 s of speech", ErrSample, secs)
	}
	if secs > MaxSampleSeconds {
		return nil, fmt.Errorf("%w: %.0f s of audio; a clone takes at most %.0f s (3–10 s of speech is best)", ErrSample, secs, MaxSampleSeconds)
	}
	if rate != e.mel.SampleRate {
		var err error
		if pcm, err = audio.Resample(pcm, rate, e.mel.SampleRate, 1); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSample, err)
		}
	}
	mel, frames, err := e.mel.LogMel(pcm)
	if err != nil {
		return nil, err
	}
	return e.EncodeMel(ctx, mel, frames)
}

// EncodeMel runs the encoder on a log-mel (bin-major, frames frames).
func (e *SampleEncoder) EncodeMel(ctx context.Context, mel []float32, frames int) ([]int32, error) {
	Q, M := e.mc.GPT.NumVQ, e.mel.NMels
	if len(mel) != M*frames || frames < 2 {
		return nil, fmt.Errorf("%w: %d mel values for %d frames of %d bins", ErrSample, len(mel), frames, M)
	}
	T := frames / 2
	in, err := ort.NewTensor(ort.NewShape(1, int64(M), int64(frames)), mel)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer in.Destroy()
	codes := make([]int64, Q*T)
	out, err := ort.NewTensor(ort.NewShape(1, int64(Q), int64(T)), codes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer out.Destroy()
	opts, done, err := gpu.RunOptions(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRun, err)
	}
	defer done()
	if err := e.sess.RunWithOptions([]ort.Value{in}, []ort.Value{out}, opts); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrRun, e.path, err)
	}
	flat := make([]int32, T*Q)
	for q := 0; q < Q; q++ {
		for t := 0; t < T; t++ {
			c := codes[q*T+t]
			if c < 0 || int(c) >= e.mc.EOSCode {
				return nil, fmt.Errorf("%w: %s gave code %d outside 0..%d", ErrRun, e.path, c, e.mc.EOSCode-1)
			}
			flat[t*Q+q] = int32(c)
		}
	}
	e.mc.Neutralize(flat) // as the model was trained: see DVAEConfig
	return flat, nil
}
