package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/voices/speaker"
)

// maxCompareSeconds bounds what compare reads of each file: a voice is clear well before it.
const maxCompareSeconds = 600

// voicesCompare is `parley voices compare A B`: how alike two recordings' voices are, by the
// cosine of their speaker embeddings (the model of kind "speaker": CAM++ when installed,
// else Parley's demo encoder).
func voicesCompare(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "voices compare", "usage: parley voices compare A B [--model M] [--json]\n\nHow alike the voices of two recordings are (cosine similarity of speaker embeddings,\n1 = same direction). Files are WAV, or any format ffmpeg reads.")
	model := fs.String("model", "", "speaker encoder: a model id (campplus, speaker-demo) or directory")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("voices compare", "compare takes two files")
	}
	enc, m, err := env.factory().SpeakerEncoder(ctx, *model)
	if err != nil {
		return err
	}
	defer enc.Close()
	var embs [2][]float32
	var secs [2]float64
	for i, name := range fs.Args() {
		pcm, err := readSpeech(ctx, env, name, speaker.SampleRate, maxCompareSeconds)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		secs[i] = float64(len(pcm)) / speaker.SampleRate
		if embs[i], err = enc.Embed(ctx, pcm); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	sim := speaker.Cosine(embs[0], embs[1])
	if *asJSON {
		return json.NewEncoder(env.Stdout).Encode(map[string]any{
			"a": fs.Arg(0), "b": fs.Arg(1), "similarity": sim, "model": m.ID, "seconds": secs,
		})
	}
	fmt.Fprintf(env.Stdout, "%.3f\n", sim)
	if m.Demo {
		env.Log.Info("the speaker encoder is demo-grade (trained on synthetic voices); `parley models pull campplus` gets CAM++")
	}
	return nil
}

// readSpeech reads up to maxSeconds of an audio file as mono samples at rate.
func readSpeech(ctx context.Context, env *cliEnv, name string, rate int, maxSeconds int) ([]float32, error) {
	src, done, err := openAudio(ctx, env, name)
	if err != nil {
		return nil, err
	}
	defer done()
	f := src.Format()
	buf, err := audio.ReadAll(ctx, audio.LimitSource(src, maxSeconds*f.SampleRate*f.Channels), 0)
	if err != nil {
		return nil, err
	}
	mono := audio.DownMix(nil, buf.Data, f.Channels)
	if f.SampleRate == rate {
		return mono, nil
	}
	return audio.Resample(mono, f.SampleRate, rate, 1)
}
