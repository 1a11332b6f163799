package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/chattts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/speaker"
)

// Zero-shot cloning: `parley voices clone CLIP` makes a ChatTTS clone voice from 3–10 s of
// speech. The clip's transcript (SenseVoice's, or --text) and its DVAE codes become the voice's
// prompt, put before every sentence as ChatTTS's sample-audio speaker does; the voice file keeps
// the codes and the text, not the audio.

const (
	cloneMaxRead    = 60   // seconds read of CLIP; longer files are refused
	cloneMaxSpeech  = 20.0 // seconds of speech a prompt may hold
	cloneMinSpeech  = 1.5  // seconds of speech a prompt needs
	clonePadSeconds = 0.2  // kept around the speech
)

const voicesCloneHelp = `usage: parley voices clone CLIP [--text "…"] [--name N] [--seeds K] [--model DIR] [--force]

Makes a ChatTTS voice from a recording of 3–10 s of one person speaking (WAV, or any format
ffmpeg reads). The transcript comes from the speech recogniser unless --text gives it; the
recording is encoded into the voice model's audio codes, which the voice keeps with the text
(not the audio) and puts before every sentence it says. With a speaker encoder installed the
seed speaker closest to the recording (of --seeds tried) becomes the voice's speaker too.
For a closer voice from minutes of speech, see parley finetune.`

func voicesClone(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "voices clone", voicesCloneHelp)
	text := fs.String("text", "", "what is said in CLIP (default: the recogniser's transcript)")
	name := fs.String("name", "", "voice name (default: from the file name)")
	seeds := fs.Int("seeds", 8, "seed speakers to try for the closest one (0 = none)")
	model := fs.String("model", "", "ChatTTS export directory (default: the installed one, else the demo voice)")
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
	dir := *model
	if dir == "" {
		if dir, _ = engines.FindChatTTS("", true); dir == "" {
			return errors.New("cloning needs a ChatTTS voice model: `parley models import DIR` an export of ChatTTS (train/chattts), or install the demo voice")
		}
	}
	fac := env.factory()

	// the recording: refuse what is not a short clip of speech
	pcm, rate, err := readClip(ctx, env, clip)
	if err != nil {
		return err
	}
	p16, err := audio.Resample(pcm, rate, 16000, 1)
	if err != nil {
		return err
	}
	start, end, err := speechSpan(ctx, fac, p16)
	if err != nil {
		return fmt.Errorf("%s: %w", clip, err)
	}
	p16 = p16[start:end]
	pcm = pcm[start*rate/16000 : min(len(pcm), end*rate/16000)]
	secs := float64(len(p16)) / 16000

	enc, err := chattts.NewSampleEncoder(dir, fac.GPU())
	if err != nil {
		return err
	}
	defer enc.Close()
	eng, err := chattts.New(chattts.Config{Dir: dir, Options: fac.GPU(), Log: env.Log})
	if err != nil {
		return err
	}
	defer eng.Close()
	voiceLangs := eng.Capabilities().Languages

	// the transcript, in a language the voice model speaks
	heard, lang := "", ""
	if rec, _, err := fac.Recognizer(ctx, "", asr.Config{}); err == nil {
		res, terr := rec.Transcribe(ctx, p16)
		rec.Close()
		if terr != nil {
			return terr
		}
		heard, lang = strings.TrimSpace(res.Text), res.Lang
		if res.Event != "" && res.Event != "Speech" {
			env.Log.Warn("the recogniser hears more than speech in the clip; a clean recording clones better", "event", res.Event)
		}
	} else if *text == "" {
		return fmt.Errorf("no transcript: give --text (the recogniser: %v)", err)
	}
	if lang != "" && !speaks(voiceLangs, lang) {
		return fmt.Errorf("%s is speech in %s; this voice model speaks %s", clip, asr.LanguageName(lang), strings.Join(voiceLangs, ", "))
	}
	transcript := strings.TrimSpace(*text)
	if transcript == "" {
		if heard == "" {
			return fmt.Errorf("%s: the recogniser heard no words; give the transcript with --text", clip)
		}
		transcript = heard
	} else {
		if s := textScript(transcript); s != "" && !scriptFits(s, voiceLangs) {
			return fmt.Errorf("the transcript is written in %s script; this voice model speaks %s", s, strings.Join(voiceLangs, ", "))
		}
		if lang != "" && textScript(heard) != "" && textScript(transcript) != textScript(heard) {
			return fmt.Errorf("the transcript is not in the language of %s (the recogniser heard %s: %q)", clip, asr.LanguageName(lang), heard)
		}
	}

	codes, err := enc.Encode(ctx, pcm, rate)
	if err != nil {
		return fmt.Errorf("%s: %w", clip, err)
	}
	v := voices.New(*name, "chattts", voices.KindClone)
	v.Description = fmt.Sprintf("cloned from %s (%.1f s)", filepath.Base(clip), secs)
	v.Sample = &voices.Sample{Text: transcript, NumVQ: eng.Model().GPT.NumVQ, Codes: codes, Model: filepath.Base(filepath.Clean(dir)), Seconds: secs}

	// the closest seed speaker as the voice's speaker vector
	var best struct {
		Seed int64   `json:"seed"`
		Sim  float64 `json:"similarity"`
	}
	if *seeds > 0 {
		se, _, err := fac.SpeakerEncoder(ctx, "")
		if err != nil {
			env.Log.Info("no speaker encoder: the clone keeps the model's default speaker", "err", err)
		} else {
			best.Seed, best.Sim, err = closestSeed(ctx, eng, se, p16, transcript, *seeds)
			se.Close()
			if err != nil {
				return err
			}
			v.Seed = &best.Seed
		}
	}
	if err := lib.Save(v, *force); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(env.Stdout).Encode(map[string]any{"name": v.Name, "text": transcript, "frames": len(codes) / v.Sample.NumVQ,
			"seconds": secs, "seed": v.Seed, "seed_similarity": best.Sim, "model": dir})
	}
	fmt.Fprintf(env.Stdout, "voice %s: %.1f s of speech, %d code frames, %q\n", v.Name, secs, len(codes)/v.Sample.NumVQ, transcript)
	if v.Seed != nil {
		fmt.Fprintf(env.Stdout, "closest seed speaker: seed:%d (similarity %.3f)\n", best.Seed, best.Sim)
	}
	fmt.Fprintf(env.Stdout, "try it: parley say --engine chattts --voice %s \"Hello there.\"\n", v.Name)
	return nil
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

// speechSpan finds the speech in a 16 kHz clip with Silero VAD: the samples from the first
// word to the last (padded), or an error when there is too little or too much speech.
func speechSpan(ctx context.Context, fac *factory.Factory, p16 []float32) (int, int, error) {
	det, err := fac.VAD(vad.Config{})
	if err != nil {
		return 0, 0, fmt.Errorf("voice activity detection: %w", err)
	}
	defer det.Close()
	segs, err := det.Segments(ctx, audio.NewBufferSource(&audio.Buffer{Format: audio.Mono16k, Data: p16}))
	if err != nil {
		return 0, 0, err
	}
	var speech float64
	for _, s := range segs {
		speech += s.EndSec - s.StartSec
	}
	if len(segs) == 0 || speech < cloneMinSpeech {
		return 0, 0, fmt.Errorf("%.1f s of speech found (silence, music or noise?); a clone needs 3–10 s of one person speaking", speech)
	}
	pad := int64(clonePadSeconds * 16000)
	start, end := max(0, segs[0].Start-pad), min(int64(len(p16)), segs[len(segs)-1].End+pad)
	if float64(end-start)/16000 > cloneMaxSpeech {
		return 0, 0, fmt.Errorf("%.0f s of speech: a clone takes 3–10 s (cut the clip, or use `parley finetune` for long recordings)", float64(end-start)/16000)
	}
	return int(start), int(end), nil
}

// closestSeed synthesizes text with seed speakers 1..n and returns the one whose speaker
// embedding is closest to the clip's.
func closestSeed(ctx context.Context, eng *chattts.Engine, se *speaker.Encoder, p16 []float32, text string, n int) (int64, float64, error) {
	want, err := se.Embed(ctx, p16)
	if err != nil {
		return 0, 0, err
	}
	bestSeed, bestSim := int64(1), -2.0
	for seed := int64(1); seed <= int64(n); seed++ {
		st, err := eng.Synthesize(ctx, tts.Request{Text: text, Seed: seed, HasSeed: true})
		if err != nil {
			return 0, 0, err
		}
		buf, err := tts.ReadAll(ctx, st)
		st.Close()
		if err != nil {
			return 0, 0, err
		}
		mono, err := audio.Resample(buf.Data, buf.Format.SampleRate, speaker.SampleRate, 1)
		if err != nil {
			return 0, 0, err
		}
		if len(mono) < speaker.MinSamples {
			continue
		}
		emb, err := se.Embed(ctx, mono)
		if err != nil {
			return 0, 0, err
		}
		if sim := speaker.Cosine(want, emb); sim > bestSim {
			bestSeed, bestSim = seed, sim
		}
	}
	return bestSeed, bestSim, nil
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

// speaks says whether a voice model's languages ("en-us", "zh", "en") cover a recogniser's
// language tag ("en", "zh", "yue", …).
func speaks(langs []string, lang string) bool {
	for _, l := range langs {
		if l == lang || strings.HasPrefix(l, lang+"-") || (lang == "yue" && l == "zh") {
			return true
		}
	}
	return len(langs) == 0
}

// textScript is the main script of a text: "Latin", "Han", "Kana", "Hangul" or "".
func textScript(s string) string {
	counts := map[string]int{}
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r):
			counts["Kana"]++
		case unicode.Is(unicode.Han, r):
			counts["Han"]++
		case unicode.Is(unicode.Hangul, r):
			counts["Hangul"]++
		case unicode.Is(unicode.Latin, r):
			counts["Latin"]++
		}
	}
	if counts["Kana"] > 0 {
		return "Kana"
	}
	best, n := "", 0
	for k, v := range counts {
		if v > n || (v == n && k < best) {
			best, n = k, v
		}
	}
	return best
}

// scriptFits says whether text in script s can be said by a model speaking langs.
func scriptFits(s string, langs []string) bool {
	for _, l := range langs {
		switch {
		case strings.HasPrefix(l, "zh") || l == "yue":
			if s == "Han" || s == "Latin" {
				return true
			}
		case strings.HasPrefix(l, "ja"):
			if s == "Kana" || s == "Han" {
				return true
			}
		case strings.HasPrefix(l, "ko"):
			if s == "Hangul" {
				return true
			}
		default:
			if s == "Latin" {
				return true
			}
		}
	}
	return len(langs) == 0
}
