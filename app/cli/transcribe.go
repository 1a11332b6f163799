package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/lang"
)

func init() {
	register(&command{
		name:  "transcribe",
		usage: "transcribe FILE…|-  transcribe audio files (WAV; other formats through ffmpeg)",
		run:   runTranscribe,
	})
}

const transcribeUsage = `usage: parley transcribe [flags] FILE…|-

Transcribes each FILE ("-" is standard input) with SenseVoice. WAV files of any layout
(PCM 8–32 bit, float, any rate and channel count) are read directly; anything else is
decoded with ffmpeg when it is installed. Long recordings are cut at pauses and streamed.

With a language model (the model's lm.bin, or --lm FILE) the words come from a beam search
weighted as the JSON beside the LM says (lm.bin: lm.json); --beam-alpha, --beam-beta,
--beam-width, --beam-top and --beam-oov override it for experiments. A word list beside the
LM (lm.bin: lm.words.txt, one word a line) lets the search charge words it does not hold.

Formats: text (default), json ({"text": …}), verbose_json (OpenAI's shape plus lang,
emotion, event and word timings), srt, vtt (one FILE only).`

var transcribeFormats = []string{"text", "json", "verbose_json", "srt", "vtt"}

func runTranscribe(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "transcribe", transcribeUsage)
	lang, itn, model := "auto", true, ""
	if env.Config != nil {
		lang, itn, model = env.Config.ASR.Language, env.Config.ASR.ITN, env.Config.ASR.Model
	}
	fs.StringVar(&lang, "lang", lang, "language: auto | zh | en | yue | ja | ko")
	fs.BoolVar(&itn, "itn", itn, "inverse text normalisation (digits, punctuation); --itn=false for raw words")
	fs.StringVar(&model, "model", model, "a model `DIR`, or a model id from parley models list; empty = best installed")
	format := fs.String("format", "text", "output: "+strings.Join(transcribeFormats, " | "))
	noUnk := fs.Bool("no-emo-unknown", false, "never report the EMO_UNKNOWN emotion; pick the likeliest real one")
	int8 := fs.Bool("int8", false, "prefer the int8 model file when the model directory has both")
	lm := fs.String("lm", "", "token language model for a beam search: none = greedy decoding, or a file (default: asr.lm, else the model's lm.bin); its weights come from the JSON beside it (lm.bin: lm.json), else the defaults")
	var beam asr.BeamOptions
	fs.Float64Var(&beam.Alpha, "beam-alpha", 0, fmt.Sprintf("beam search: the language model's weight, 0..%v (unset: the LM's lm.json, else 0.4)", asr.MaxBeamAlpha))
	fs.Float64Var(&beam.Beta, "beam-beta", 0, "beam search: bonus per token (unset: the LM's lm.json, else 2)")
	fs.IntVar(&beam.Width, "beam-width", 0, "beam search: prefixes kept per frame (unset or 0: the LM's lm.json, else 32)")
	fs.IntVar(&beam.Top, "beam-top", 0, "beam search: likeliest tokens tried per frame (unset or 0: the LM's lm.json, else 8)")
	words := fs.String("words", "", "your own words for the word list, comma-separated (names, jargon: not charged by --beam-oov; unset: asr.words; empty: none)")
	fs.Float64Var(&beam.OOV, "beam-oov", 0, fmt.Sprintf("beam search: cost of a word the LM's word list (lm.words.txt) lacks, 0..%v (unset: the LM's lm.json, else 0)", asr.MaxBeamOOV))
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := beamFlags(fs, &beam, *lm); err != nil {
		return err
	}
	own, err := ownWords(fs, *words, *lm)
	if err != nil {
		return err
	}
	files := fs.Args()
	if len(files) == 0 {
		return usageError("transcribe", "no input files (give FILE… or - for standard input)")
	}
	if !contains(transcribeFormats, *format) {
		return fmt.Errorf("%w: --format %q: want one of %s", errUsage, *format, strings.Join(transcribeFormats, ", "))
	}
	if !contains(asr.Languages(), lang) {
		return fmt.Errorf("%w: --lang %q: want one of %s", errUsage, lang, strings.Join(asr.Languages(), ", "))
	}
	if (*format == "srt" || *format == "vtt") && len(files) > 1 {
		return fmt.Errorf("%w: --format %s takes one file, got %d", errUsage, *format, len(files))
	}
	stdin := 0
	for _, f := range files {
		if f == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return fmt.Errorf("%w: standard input (-) given %d times", errUsage, stdin)
	}

	rec, _, err := env.factory().Recognizer(ctx, model, asr.Config{
		Options: asr.Options{Language: lang, ITN: itn, SuppressEmoUnknown: *noUnk}, Int8: *int8, LM: *lm, Beam: beam,
		Words: own})
	if errors.Is(err, factory.ErrNoASR) {
		return fmt.Errorf("%w (or give --model DIR)", err)
	}
	if err != nil {
		return err
	}
	defer rec.Close()

	failed := 0
	for _, name := range files {
		res, err := transcribeFile(ctx, env, rec, name)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failed++
			fmt.Fprintf(env.Stderr, "parley transcribe: %s: %v\n", name, err)
			continue
		}
		if err := writeTranscript(env.Stdout, *format, name, len(files) > 1, res); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d files failed", failed, len(files))
	}
	return nil
}

// beamFlags refuses beam weights no search can use, and beam flags without a beam search
// (--lm none); --beam-alpha 0, --beam-beta 0 and --beam-oov 0, given on the command line, become the zero
// weights they ask for (asr.BeamZero), not "inherit the LM's weights".
func beamFlags(fs *cmdFlags, b *asr.BeamOptions, lm string) error {
	set := []string{}
	fs.Visit(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Name, "beam-") {
			return
		}
		set = append(set, "--"+f.Name)
		switch {
		case f.Name == "beam-alpha" && b.Alpha == 0:
			b.Alpha = asr.BeamZero
		case f.Name == "beam-beta" && b.Beta == 0:
			b.Beta = asr.BeamZero
		case f.Name == "beam-oov" && b.OOV == 0:
			b.OOV = asr.BeamZero
		}
	})
	if len(set) > 0 && lm == "none" {
		return fmt.Errorf("%w: %s with --lm none: greedy decoding has no beam", errUsage, strings.Join(set, ", "))
	}
	if err := b.Validate(); err != nil { // the ranges Config.Beam and lm.json take
		return fmt.Errorf("%w: %s", errUsage, beamFlagNames.Replace(err.Error()))
	}
	return nil
}

// ownWords reads --words: nil when it is not given (asr.words then), else its comma-separated
// entries (none when empty), each one word; with --lm none there is no list to join.
func ownWords(fs *cmdFlags, flagValue, lm string) ([]string, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "words" })
	if !given {
		return nil, nil
	}
	if lm == "none" {
		return nil, fmt.Errorf("%w: --words with --lm none: greedy decoding has no word list", errUsage)
	}
	words := config.SplitList(flagValue) // as asr.words reads from a variable
	for _, w := range words {
		if err := lang.CheckWord(w); err != nil {
			return nil, fmt.Errorf("%w: --words: %v", errUsage, err)
		}
	}
	return words, nil
}

// beamFlagNames names asr.BeamOptions.Validate's fields as the flags that set them.
var beamFlagNames = strings.NewReplacer("beam alpha", "--beam-alpha", "beam beta", "--beam-beta", "beam width", "--beam-width",
	"beam top", "--beam-top", "beam oov", "--beam-oov")

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// transcribeFile streams one input through the recognizer: WAV directly, anything else
// through ffmpeg.
func transcribeFile(ctx context.Context, env *cliEnv, rec *asr.Recognizer, name string) (*asr.Result, error) {
	src, done, err := openAudio(ctx, env, name)
	if err != nil {
		return nil, err
	}
	defer done()
	return rec.TranscribeSource(ctx, src, rec.Options(), nil)
}

// openAudio opens a file ("-" for standard input) as an audio source: WAV directly in its
// own format, any other format through ffmpeg (16 kHz mono, MP3 priming removed), through
// the one decode path every command shares (audio.Decode). done releases what it opened and
// prints a warning when a damaged WAV file was read as far as it goes.
func openAudio(ctx context.Context, env *cliEnv, name string) (src audio.Source, done func(), err error) {
	in := env.Stdin
	var f *os.File
	if name != "-" {
		if f, err = os.Open(name); err != nil {
			return nil, nil, err
		}
		if st, err := f.Stat(); err == nil && st.IsDir() {
			f.Close()
			return nil, nil, fmt.Errorf("is a directory")
		}
		in = f
	}
	d, err := audio.Decode(ctx, in)
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, nil, err
	}
	return d, func() {
		d.Close()
		if f != nil {
			f.Close()
		}
		if w := d.Warning(); w != nil {
			fmt.Fprintf(env.Stderr, "parley: warning: %s: %v\n", name, w)
		}
	}, nil
}

func writeTranscript(w io.Writer, format, name string, many bool, r *asr.Result) error {
	switch format {
	case "text":
		if many {
			_, err := fmt.Fprintf(w, "%s: %s\n", name, r.Text)
			return err
		}
		_, err := fmt.Fprintln(w, r.Text)
		return err
	case "json":
		v := map[string]any{"text": r.Text}
		if many {
			v["file"] = name
		}
		return newJSONEncoder(w, false).Encode(v)
	case "verbose_json":
		v := r.Verbose()
		if many {
			return newJSONEncoder(w, false).Encode(struct {
				File string `json:"file"`
				asr.Verbose
			}{name, v})
		}
		return newJSONEncoder(w, true).Encode(v)
	case "srt":
		return asr.WriteSRT(w, r.Cues())
	case "vtt":
		return asr.WriteVTT(w, r.Cues())
	}
	return fmt.Errorf("%w: unknown format %q", errUsage, format)
}

func newJSONEncoder(w io.Writer, indent bool) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	return enc
}
