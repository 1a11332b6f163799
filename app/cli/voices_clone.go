package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
)

// Zero-shot cloning: `parley voices clone CLIP` makes a ChatTTS clone voice from 3–10 s of
// speech. The clip's transcript (SenseVoice's, or --text) and its DVAE codes become the voice's
// prompt, put before every sentence as ChatTTS's sample-audio speaker does; the voice file keeps
// the codes and the text, not the audio.

// cloneMaxRead is the longest CLIP read, in seconds; longer files are refused.
const cloneMaxRead = 60

var voicesCloneHelp = fmt.Sprintf(`usage: parley voices clone CLIP [--text "…"] [--name N] [--seeds K] [--keep-pitch] [--model DIR] [--force]

Makes a ChatTTS voice from a recording of 3–10 s of one person speaking (WAV, or any format
ffmpeg reads). The transcript comes from the speech recogniser unless --text gives it; the
recording is encoded into the voice model's audio codes, which the voice keeps with the text
(not the audio) and puts before every sentence it says. With a speaker encoder installed the
seed speaker closest to the recording (of --seeds tried, the model's suggested seeds first; in
voice, pitch and voicing) becomes the voice's speaker too. The clone is then said once and,
where its pitch is off the recording's, shifted by the difference (at most %g semitones; --keep-pitch: not). For a closer
voice from minutes of speech, see parley finetune.`, tune.ClonePitchMax)

func voicesClone(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "voices clone", voicesCloneHelp)
	text := fs.String("text", "", "what is said in CLIP (default: the recogniser's transcript)")
	name := fs.String("name", "", "voice name (default: from the file name)")
	seeds := fs.Int("seeds", tune.CloneSeeds, "seed speakers to try for the closest one (0 = none)")
	model := fs.String("model", "", "ChatTTS export directory (default: the installed one, else the demo voice)")
	keepPitch := fs.Bool("keep-pitch", false, "keep the model's pitch instead of matching the recording's")
	force := fs.Bool("force", false, "replace a voice of that name")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("voices clone", "clone takes one CLIP")
	}
	clip := fs.Arg(0)
	if *name == "" {
		*name = voiceNameFrom(clip)
	}
	if err := voices.ValidName(*name); err != nil {
		return fmt.Errorf("%w (give --name)", err)
	}
	lib, err := voices.Open(voices.DefaultDir())
	if err != nil {
		return err
	}
	if _, err := lib.Get(*name); err == nil && !*force {
		return fmt.Errorf("voice %q exists (--force replaces it, --name picks another)", *name)
	}
	dir, err := chatttsDir(*model, "cloning")
	if err != nil {
		return err
	}
	fac := env.factory()
	pcm, rate, err := readClip(ctx, env, clip)
	if err != nil {
		return err
	}
	enc, err := fac.SampleEncoder(dir)
	if err != nil {
		return err
	}
	defer enc.Close()
	eng, err := fac.ChatTTS(dir)
	if err != nil {
		return err
	}
	defer eng.Close()
	det, err := fac.VAD("", vad.Config{MinSilence: tune.CloneVADMinSilence})
	if err != nil {
		return fmt.Errorf("voice activity detection: %w", err)
	}
	defer det.Close()
	o := tune.CloneOptions{Name: *name, Text: *text, Prompter: enc, NumVQ: eng.Model().GPT.NumVQ,
		Model: filepath.Base(filepath.Clean(dir)), Langs: eng.Capabilities().Languages, Speech: det, Seeds: *seeds, Voice: eng, KeepPitch: *keepPitch}
	if rec, _, err := fac.Recognizer(ctx, "", asr.Config{}); err == nil {
		defer rec.Close()
		o.Ear = factory.CloneTranscriber(rec)
	} else if *text == "" {
		return fmt.Errorf("no transcript: give --text (the recogniser: %v)", err)
	}
	if *seeds > 0 {
		if se, _, err := fac.SpeakerEncoder(ctx, ""); err == nil {
			defer se.Close()
			o.Embedder = se
		} else {
			env.Log.Info("no speaker encoder: the clone keeps the model's default speaker", "err", err)
		}
	}
	res, err := tune.Clone(ctx, pcm, rate, o)
	if err != nil {
		return fmt.Errorf("%s: %w", clip, err)
	}
	for _, w := range res.Warnings {
		env.Log.Warn(w)
	}
	v := res.Voice
	v.Description = fmt.Sprintf("cloned from %s (%.1f s)", filepath.Base(clip), res.Seconds)
	if err := lib.Save(v, *force); err != nil {
		return err
	}
	frames := len(v.Sample.Codes) / v.Sample.NumVQ
	if *asJSON {
		return json.NewEncoder(env.Stdout).Encode(map[string]any{"name": v.Name, "text": v.Sample.Text, "heard": res.Heard, "frames": frames,
			"seconds": res.Seconds, "seed": v.Seed, "seed_similarity": res.SeedSimilarity, "model": dir,
			"clip_f0": res.ClipF0, "voice_f0": res.VoiceF0, "pitch": v.Sample.Pitch})
	}
	fmt.Fprintf(env.Stdout, "voice %s: %.1f s of speech, %d code frames, %q\n", v.Name, res.Seconds, frames, v.Sample.Text)
	if v.Seed != nil {
		fmt.Fprintf(env.Stdout, "closest seed speaker: seed:%d (similarity %.3f)\n", res.Seed, res.SeedSimilarity)
	}
	if res.VoiceF0 > 0 {
		fmt.Fprintf(env.Stdout, "pitch: the recording %.0f Hz, the clone %.0f Hz: shifted %+.1f semitones\n", res.ClipF0, res.VoiceF0, v.Sample.Pitch)
	}
	fmt.Fprintf(env.Stdout, "try it: parley say --engine chattts --voice %s \"Hello there.\"\n", v.Name)
	return nil
}

// chatttsDir is the ChatTTS export a command uses: model if given, else the installed one,
// else the demo voice; what names the command's work in the error when there is none.
func chatttsDir(model, what string) (string, error) {
	if model != "" {
		return model, nil
	}
	if dir, _ := engines.FindChatTTS("", true); dir != "" {
		return dir, nil
	}
	return "", fmt.Errorf("%s needs a ChatTTS voice model: `parley models import DIR` an export of ChatTTS (train/chattts), or install the demo voice", what)
}

// readClip reads a clip as mono samples at its own rate, refusing long files.
func readClip(ctx context.Context, env *cliEnv, name string) ([]float32, int, error) {
	src, done, err := openAudio(ctx, env, name)
	if err != nil {
		return nil, 0, err
	}
	defer done()
	f := src.Format()
	limit := cloneMaxRead * f.SampleRate * f.Channels
	buf, err := audio.ReadAll(ctx, audio.LimitSource(src, limit+f.Channels), 0)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", name, err)
	}
	if len(buf.Data) > limit {
		return nil, 0, fmt.Errorf("%s is longer than %d s: a clone takes 3–10 s of speech (`parley finetune` learns a voice from long recordings)", name, cloneMaxRead)
	}
	return audio.DownMix(nil, buf.Data, f.Channels), f.SampleRate, nil
}

// voiceNameFrom makes a voice name from a file name ("My Voice.wav" → "my-voice").
func voiceNameFrom(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-._")
	if s == "" {
		s = "clone"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}
