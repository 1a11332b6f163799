package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/chattts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/clone"
)

func init() {
	finetuneVerbs["evaluate"] = finetuneVerb{
		usage: `  evaluate NAME [--voice V[@MODEL]]… [--clone-seconds S] [--sentences N] [--json]
                                    how alike and how clear voices sound against your
                                    held-out clips: random seed voices, a zero-shot clone
                                    from one S-second clip, and library voices (--voice;
                                    @MODEL: spoken by that model, e.g. a fine-tuned one)
`,
		run: runFinetuneEvaluate,
	}
}

func runFinetuneEvaluate(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "finetune evaluate", `usage: parley finetune evaluate NAME [flags]

Scores ChatTTS voices against the person of dataset NAME: the sentences of the held-out clips
(never trained on) are synthesised with each voice; the speaker encoder says how alike each
sounds to the held-out clips (cosine similarity, 1 = same) and the recogniser how clear it is
(character error rate). The voices: --random random seed speakers, a zero-shot clone made from
one training clip of about --clone-seconds (as voices clone makes it: the clip's codes and the
closest of --seeds seed speakers), and the library voices named by --voice, spoken by the
voice model (--model) or, written NAME@MODEL, by MODEL (an installed model id or an export
directory: the model a fine-tune with --gpt installed).`)
	var extra stringList
	fs.Var(&extra, "voice", "a library voice to score too, NAME or NAME@MODEL (repeatable)")
	cloneSecs := fs.Float64("clone-seconds", 3, "length of the clip the zero-shot clone is made from")
	sentences := fs.Int("sentences", 8, "held-out sentences to synthesise")
	randoms := fs.Int("random", 3, "random seed voices to score (one draw is luck; compare with their mean)")
	seeds := fs.Int("seeds", tune.CloneSeeds, "seed speakers the zero-shot clone tries for the closest one, as voices clone does")
	model := fs.String("model", "", "ChatTTS export directory (default: the installed one, else the demo voice)")
	asrModel := fs.String("asr", "", "recogniser that scores clarity (default: asr.model, else the best installed)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("finetune evaluate", "which dataset?")
	}
	if *randoms < 1 || *randoms > 100 {
		return usageError("finetune evaluate", "--random %d: want 1..100 random seed voices", *randoms)
	}
	if *seeds > 1000 {
		return usageError("finetune evaluate", "--seeds %d: want at most 1000", *seeds)
	}
	d, err := openDataset(fs.Arg(0))
	if err != nil {
		return err
	}
	train, held, err := tune.SplitClips(d, 0.2)
	if err != nil {
		return err
	}
	dir, err := chatttsDir(*model, "evaluating voices")
	if err != nil {
		return err
	}
	// the comparison the wizard's evaluate step runs (tune.CompareVoices), with the command's
	// voices: several random seeds, a clone that must be made, library voices
	c := tune.VoiceComparison{Dataset: d, Model: dir, ASRModel: *asrModel, Sentences: *sentences,
		Clone: &tune.ZeroShot{Seconds: *cloneSecs, Seeds: *seeds, Name: func(cl tune.CloneResult, clip *clone.Clip) string {
			return fmt.Sprintf("zero-shot clone (%.1f s clip %s, seed:%d)", cl.Seconds, clip.ID, cl.Seed)
		}}}
	for _, cl := range held {
		c.HeldOut = append(c.HeldOut, cl.ID)
	}
	for _, cl := range train {
		c.Clone.From = append(c.Clone.From, cl.ID)
	}
	for _, seed := range tune.RandomSeeds(d.Name, *randoms) {
		c.Voices = append(c.Voices, tune.VoiceCandidate{Name: fmt.Sprintf("random seed (seed:%d)", seed), Request: tts.Request{Seed: seed, HasSeed: true}})
	}
	// library voices: spoken by the base model, or NAME@MODEL by a model of their own (a
	// fine-tune that trained the GPT installs one)
	var own []tune.ModelVoice
	if len(extra) > 0 {
		lib, err := voices.Open(voices.DefaultDir())
		if err != nil {
			return err
		}
		for _, arg := range extra {
			name, model, _ := strings.Cut(arg, "@")
			v, err := lib.Get(name)
			if err != nil {
				return err
			}
			req, err := engines.ApplyVoice(tts.Request{}, v, "chattts", engines.Explicit{})
			if err != nil {
				return err
			}
			mv := tune.ModelVoice{VoiceCandidate: tune.VoiceCandidate{Name: arg, Request: req}, Label: "--voice " + arg}
			if model == "" {
				c.After = append(c.After, mv)
				continue
			}
			if mv.Model, err = chatTTSModelDir(ctx, env, model); err != nil {
				return fmt.Errorf("--voice %s: %w", arg, err)
			}
			own = append(own, mv)
		}
	}
	c.After = append(c.After, own...) // those the base model speaks first
	res, err := tune.CompareVoices(ctx, env.factory(), c)
	if err != nil {
		return err
	}
	scores, texts := res.Scores, res.Texts
	if *asJSON {
		return json.NewEncoder(env.Stdout).Encode(map[string]any{"dataset": d.Name, "model": dir, "speaker_encoder": res.SpeakerEncoder,
			"recogniser": res.Recogniser, "sentences": len(texts), "held_out_clips": res.HeldOut, "voices": scores})
	}
	fmt.Fprintf(env.Stdout, "%d held-out sentences of %s; voice model %s, speaker encoder %s, recogniser %s\n",
		len(texts), d.Name, filepath.Base(dir), res.SpeakerEncoder, res.Recogniser)
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VOICE\tSIMILARITY\tCER\tAUDIO\tSYNTH TIME")
	for _, s := range scores {
		fmt.Fprintf(tw, "%s\t%.3f\t%.1f%%\t%.1f s\t%.1f s\n", s.Name, s.Similarity, 100*s.CER, s.AudioSeconds, s.SynthSeconds)
	}
	return tw.Flush()
}

// chatTTSModelDir resolves a ChatTTS model given as an export directory or an installed id.
func chatTTSModelDir(ctx context.Context, env *cliEnv, model string) (string, error) {
	if _, err := os.Stat(filepath.Join(model, chattts.ConfigFile)); err == nil {
		return model, nil
	}
	mgr, err := assets.NewManager(nil, assets.Options{Log: env.Log})
	if err != nil {
		return "", err
	}
	dir, err := mgr.Path(ctx, model)
	if err != nil {
		return "", fmt.Errorf("no ChatTTS model %q (an installed model id or an export directory): %w", model, err)
	}
	if _, err := os.Stat(filepath.Join(dir, chattts.ConfigFile)); err != nil {
		return "", fmt.Errorf("%s (%s) is not a ChatTTS export: no %s", model, dir, chattts.ConfigFile)
	}
	return dir, nil
}
