package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/voices/clone"
)

// The guided recording from the command line: the sentences to read, and a recording of one
// kept as its take (record with any program, then `take`). The desktop wizard records them
// itself, with a level meter; both keep takes through clone.Dataset.AddTake.

func init() {
	finetuneVerbs["prompts"] = finetuneVerb{
		usage: `  prompts NAME [--lang L] [--all]   the sentences to read aloud (guided recording), numbered;
                                    the ones already recorded are left out (--all: marked)
`,
		run: runFinetunePrompts,
	}
	finetuneVerbs["take"] = finetuneVerb{
		usage: `  take NAME N FILE [--lang L]       keep FILE (any format) as your reading of sentence N;
                                    another take of N replaces it
`,
		run: runFinetuneTake,
	}
}

// promptLang is the language of a dataset's sentences: --lang, else the language its clips
// are in when it has sentences of its own, else English.
func promptLang(flag string, d *clone.Dataset) (string, error) {
	if flag != "" {
		if !slices.Contains(clone.PromptLanguages(), flag) {
			return "", fmt.Errorf("%w: --lang %q: sentences exist in %s", errUsage, flag, strings.Join(clone.PromptLanguages(), ", "))
		}
		return flag, nil
	}
	if slices.Contains(clone.PromptLanguages(), d.Lang) {
		return d.Lang, nil
	}
	return "en", nil
}

func runFinetunePrompts(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "finetune prompts", `usage: parley finetune prompts NAME [--lang en|zh] [--all]

The sentences to read aloud for a dataset, numbered, written to vary the sounds and the ways
people talk (questions, numbers, names, exclamations). Record each (any program; speak
naturally, a moment of silence before and after), then keep it with
parley finetune take NAME N FILE.`)
	lang := fs.String("lang", "", "language of the sentences (en, zh; default the dataset's, else en)")
	all := fs.Bool("all", false, "also the sentences already recorded (marked with *)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("finetune prompts", "which dataset?")
	}
	d, err := openDataset(fs.Arg(0))
	if err != nil {
		return err
	}
	l, err := promptLang(*lang, d)
	if err != nil {
		return err
	}
	ps := clone.Prompts(l)
	done := d.Recorded(ps)
	n := 0
	for i, p := range ps {
		switch {
		case done[i] && *all:
			fmt.Fprintf(env.Stdout, "%3d* %s\n", i+1, p)
		case !done[i]:
			fmt.Fprintf(env.Stdout, "%3d  %s\n", i+1, p)
		}
		if done[i] {
			n++
		}
	}
	fmt.Fprintf(env.Stdout, "%d of %d recorded; keep a recording with: parley finetune take %s N FILE\n", n, len(ps), d.Name)
	return nil
}

// maxTakeSamples bounds a take read from a file: a sentence takes seconds.
const maxTakeSamples = 60 * 16000

func runFinetuneTake(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "finetune take", `usage: parley finetune take NAME N FILE [--lang en|zh]

Keep FILE (WAV, or any format ffmpeg reads; at most a minute) as your reading of sentence N
of `+"`parley finetune prompts NAME`"+`: its transcript is the sentence. A take that is too short or
silent is refused; a second take of N replaces the first.`)
	lang := fs.String("lang", "", "language of the sentences (en, zh; default the dataset's, else en)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 3 {
		return usageError("finetune take", "finetune take NAME N FILE")
	}
	d, err := openDataset(fs.Arg(0))
	if err != nil {
		return err
	}
	l, err := promptLang(*lang, d)
	if err != nil {
		return err
	}
	ps := clone.Prompts(l)
	n, err := strconv.Atoi(fs.Arg(1))
	if err != nil || n < 1 || n > len(ps) {
		return usageError("finetune take", "sentence %q: a number from 1 to %d", fs.Arg(1), len(ps))
	}
	src, done, err := openAudio(ctx, env, fs.Arg(2))
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(2), err)
	}
	defer done()
	pcm, err := readTake(ctx, src)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(2), err)
	}
	s, warn, err := d.AddTake(pcm, ps[n-1])
	if errors.Is(err, clone.ErrBadTake) {
		return fmt.Errorf("%s: %s", fs.Arg(2), strings.TrimPrefix(err.Error(), clone.ErrBadTake.Error()+": "))
	}
	if err != nil && s.ID == "" {
		return err
	}
	fmt.Fprintf(env.Stdout, "sentence %d: kept %.1f s as %s\n", n, s.Seconds, s.ID)
	if warn != "" {
		fmt.Fprintf(env.Stdout, "  %s\n", warn)
	}
	return err
}

// readTake reads a take as 16 kHz mono, refusing more than a minute.
func readTake(ctx context.Context, src audio.Source) ([]float32, error) {
	mono, err := audio.Convert(src, audio.Mono16k, audio.QualityHigh)
	if err != nil {
		return nil, err
	}
	var pcm []float32
	buf := make([]float32, 8192)
	for {
		k, err := mono.Read(ctx, buf)
		pcm = append(pcm, buf[:k]...)
		if len(pcm) > maxTakeSamples {
			return nil, errors.New("longer than a minute: a take is one sentence (use `parley finetune import` for long recordings)")
		}
		if errors.Is(err, io.EOF) {
			return pcm, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
