package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/chattts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
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
	seeds := fs.Int("seeds", 8, "seed speakers the zero-shot clone tries for the closest one, as voices clone does")
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
	dir := *model
	if dir == "" {
		if dir, _ = engines.FindChatTTS("", true); dir == "" {
			return errors.New("evaluating voices needs a ChatTTS voice model (an export of ChatTTS, or the demo voice)")
		}
	}
	fac := env.factory()
	eng, err := fac.ChatTTS(dir)
	if err != nil {
		return err
	}
	defer eng.Close()
	se, sm, err := fac.SpeakerEncoder(ctx, "")
	if err != nil {
		return err
	}
	defer se.Close()
	rec, rm, err := fac.Recognizer(ctx, *asrModel, asr.Config{})
	if err != nil {
		return err
	}
	defer rec.Close()
	ear := factory.CloneTranscriber(rec)

	var heldIDs, trainIDs, texts []string
	for _, c := range held {
		heldIDs = append(heldIDs, c.ID)
		if len(texts) < *sentences {
			texts = append(texts, c.Text)
		}
	}
	for _, c := range train {
		trainIDs = append(trainIDs, c.ID)
	}
	ref, err := tune.ReferenceEmbedding(ctx, d, heldIDs, se)
	if err != nil {
		return err
	}

	// random seeds from the dataset's name, kept apart from the clone's candidates 1..--seeds
	h := fnv.New32a()
	h.Write([]byte(d.Name))
	var cands []tune.VoiceCandidate
	for i := range *randoms {
		seed := int64(1001 + (h.Sum32()+uint32(i)*7919)%9000)
		cands = append(cands, tune.VoiceCandidate{Name: fmt.Sprintf("random seed (seed:%d)", seed), Request: tts.Request{Seed: seed, HasSeed: true}})
	}

	clip, err := tune.ClipNear(d, trainIDs, *cloneSecs)
	if err != nil {
		return err
	}
	pcm, err := d.ReadClip(clip.Path)
	if err != nil {
		return err
	}
	det, err := fac.VAD("", vad.Config{MinSilence: tune.CloneVADMinSilence})
	if err != nil {
		return fmt.Errorf("voice activity detection: %w", err)
	}
	defer det.Close()
	enc, err := fac.SampleEncoder(dir)
	if err != nil {
		return err
	}
	defer enc.Close()
	// the clone a user gets from `parley voices clone`: prompt codes and the closest seed speaker
	cl, err := tune.Clone(ctx, pcm, 16000, tune.CloneOptions{Name: "zero-shot", Text: clip.Text, Prompter: enc, NumVQ: eng.Model().GPT.NumVQ,
		Langs: eng.Capabilities().Languages, Speech: det, Seeds: *seeds, Embedder: se, Voice: eng})
	if err != nil {
		return fmt.Errorf("zero-shot clone from clip %s: %w", clip.ID, err)
	}
	req, err := engines.ApplyVoice(tts.Request{}, cl.Voice, "chattts", engines.Explicit{})
	if err != nil {
		return err
	}
	cands = append(cands, tune.VoiceCandidate{Name: fmt.Sprintf("zero-shot clone (%.1f s clip %s, seed:%d)", cl.Seconds, clip.ID, cl.Seed), Request: req})
	// library voices: spoken by the base model, or NAME@MODEL by a model of their own (a
	// fine-tune that trained the GPT installs one)
	var own []ownModelVoice
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
			c := tune.VoiceCandidate{Name: arg, Request: req}
			if model == "" {
				cands = append(cands, c)
				continue
			}
			mdir, err := chatTTSModelDir(ctx, env, model)
			if err != nil {
				return fmt.Errorf("--voice %s: %w", arg, err)
			}
			own = append(own, ownModelVoice{c, mdir})
		}
	}
	scores, err := tune.EvaluateVoices(ctx, eng, cands, texts, ref, se, ear)
	if err != nil {
		return err
	}
	for _, o := range own {
		oe, err := fac.ChatTTS(o.dir)
		if err != nil {
			return fmt.Errorf("--voice %s: %w", o.cand.Name, err)
		}
		sc, err := tune.EvaluateVoices(ctx, oe, []tune.VoiceCandidate{o.cand}, texts, ref, se, ear)
		oe.Close()
		if err != nil {
			return err
		}
		scores = append(scores, sc...)
	}
	if *asJSON {
		return json.NewEncoder(env.Stdout).Encode(map[string]any{"dataset": d.Name, "model": dir, "speaker_encoder": sm.ID,
			"recogniser": rm.ID, "sentences": len(texts), "held_out_clips": len(heldIDs), "voices": scores})
	}
	fmt.Fprintf(env.Stdout, "%d held-out sentences of %s; voice model %s, speaker encoder %s, recogniser %s\n",
		len(texts), d.Name, filepath.Base(dir), sm.ID, rm.ID)
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VOICE\tSIMILARITY\tCER\tAUDIO\tSYNTH TIME")
	for _, s := range scores {
		fmt.Fprintf(tw, "%s\t%.3f\t%.1f%%\t%.1f s\t%.1f s\n", s.Name, s.Similarity, 100*s.CER, s.AudioSeconds, s.SynthSeconds)
	}
	return tw.Flush()
}

// ownModelVoice is a library voice scored with a model of its own.
type ownModelVoice struct {
	cand tune.VoiceCandidate
	dir  string
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
