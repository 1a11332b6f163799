package audiotest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/parley-voice/parley/audio"
)

// Speak synthesises text with espeak-ng (voice like "en-us", "en+f3", "en-gb+m2"; speed in
// words per minute, 0 = default) and returns it as 16 kHz mono.
func Speak(ctx context.Context, text, voice string, speed int) (*audio.Buffer, error) {
	args := []string{"--stdout"}
	if voice != "" {
		args = append(args, "-v", voice)
	}
	if speed > 0 {
		args = append(args, "-s", fmt.Sprint(speed))
	}
	args = append(args, text)
	cmd := exec.CommandContext(ctx, "espeak-ng", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("audiotest: espeak-ng %q: %v: %s", text, err, stderr.String())
	}
	b, err := audio.ReadWAV(bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("audiotest: espeak-ng output: %w", err)
	}
	if b.Channels != 1 {
		b = &audio.Buffer{Format: audio.Format{SampleRate: b.SampleRate, Channels: 1}, Data: audio.DownMix(nil, b.Data, b.Channels)}
	}
	return audio.ResampleBuffer(b, 16000)
}

// RequireSpeech is Speak for tests: it skips without espeak-ng (fails under CI=true).
func RequireSpeech(t testing.TB, text, voice string, speed int) *audio.Buffer {
	t.Helper()
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		missing(t, "espeak-ng is not installed (build/setup.sh packages installs it)")
	}
	b, err := Speak(context.Background(), text, voice, speed)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Trim returns the part of p between the first and last sample above thresh (in magnitude),
// and the index where it starts.
func Trim(p []float32, thresh float32) ([]float32, int) {
	first, last := -1, -1
	for i, v := range p {
		if v > thresh || v < -thresh {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return nil, 0
	}
	return p[first : last+1], first
}

// WhiteNoise returns n samples of Gaussian white noise with the given RMS.
func WhiteNoise(n int, rms float64, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64() * rms)
	}
	return out
}

// Babble returns n samples of babble-like noise: many espeak-ng talkers (six texts, each read
// by three voices at different speeds and pitches, 18 in all) reading at once from random
// offsets, scaled to the given RMS. Like cafeteria babble it has speech's spectrum and
// rhythm, but no single intelligible talker. It needs espeak-ng.
func Babble(ctx context.Context, n int, rms float64, seed uint64) ([]float32, error) {
	texts := []string{
		"the quarterly report shows steady growth across all of the northern regions this year",
		"please remember to water the plants and feed the cat before you leave for the airport",
		"in the beginning there was only the sea and the long grey line of the distant hills",
		"our committee will meet again on thursday to discuss the budget and the new building",
		"she said the train was late again because of the snow on the tracks near the bridge",
		"numbers like seventeen forty two and nine hundred are easy to say but hard to hear",
	}
	voices := []string{"en-us", "en+f3", "en-gb+m3", "en+f2", "en-us+m5", "en+f4", "en+m2", "en-gb+f5", "en+m7"}
	rng := rand.New(rand.NewPCG(seed, 0xbabb1e))
	out := make([]float32, n)
	for i, text := range texts {
		for k := 0; k < 3; k++ {
			b, err := Speak(ctx, text, voices[(i*3+k)%len(voices)], 140+rng.IntN(60))
			if err != nil {
				return nil, err
			}
			x, _ := Trim(b.Data, 0.01)
			g := float32(1 / math.Max(audio.RMS(x), 1e-9))
			off := rng.IntN(len(x))
			for j := range out {
				out[j] += g * x[(off+j)%len(x)]
			}
		}
	}
	g := float32(rms / math.Max(audio.RMS(out), 1e-9))
	audio.Gain(out, g)
	return out, nil
}

// MixAtSNR adds noise to signal (in place) scaled so that the signal's RMS over its active
// part (|x| > 1e-3 … trimmed) is snr dB above the noise RMS. It returns the noise gain.
func MixAtSNR(signal, noise []float32, snr float64) float32 {
	active, _ := Trim(signal, 1e-3)
	sr := audio.RMS(active)
	nr := audio.RMS(noise)
	if nr == 0 {
		return 0
	}
	g := float32(sr / nr / math.Pow(10, snr/20))
	n := min(len(signal), len(noise))
	for i := 0; i < n; i++ {
		signal[i] += noise[i] * g
	}
	return g
}
