package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/voices/clone"
)

func init() {
	finetuneVerbs["train"] = finetuneVerb{
		usage: `  train NAME [--gpt[=false]] [--epochs N] [--seeds K] [--model DIR] [--new] [--force]
                                    fine-tune the ChatTTS voice model on the clips: a speaker
                                    vector (--gpt: also the model; the demo voice's default)
                                    starting from the closest seed speaker; run it again to
                                    resume
`,
		run: runFinetuneTrain,
	}
	finetuneVerbs["install"] = finetuneVerb{
		usage: `  install NAME [--name V] [--force]  add the trained voice to the library
`,
		run: runFinetuneInstall,
	}
}

func runFinetuneTrain(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "finetune train", `usage: parley finetune train NAME [flags]

Fine-tunes the installed ChatTTS voice model on the dataset's clips (the held-out clips, the
same as the recogniser's, are never trained on; finetune evaluate scores against them). A
speaker vector is trained, starting from the seed speaker closest to the person (of --seeds
tried with the speaker encoder); with --gpt the model's GPT and decoder are trained with it,
making a new model that is installed beside the voice. --gpt is the default on the small demo
voice (the one fine-tune of it that moves towards the person) and --gpt=false elsewhere (a
full-size model). Ctrl-C stops it; running the command again resumes it. Then: parley
finetune install NAME.`)
	gpt := fs.Bool("gpt", false, "train the GPT, embeddings and decoder too (a new model; default on the demo voice)")
	epochs := fs.Int("epochs", 0, "training epochs (default 30, or 15 with --gpt)")
	lr := fs.Float64("lr", 0, "learning rate (default 3e-3, or 2e-4 with --gpt)")
	seeds := fs.Int("seeds", 8, "seed speakers tried for the starting speaker (0 = the model's mean speaker)")
	model := fs.String("model", "", "ChatTTS export directory (default: the installed one, else the demo voice)")
	procs := fs.Int("procs", 0, "trainer processes (default: one per GPU, or as the cores allow)")
	fresh := fs.Bool("new", false, "start a new fine-tune instead of resuming an unfinished one")
	force := fs.Bool("force", false, fmt.Sprintf("train on less than %.0f minutes of usable speech", tune.MinVoiceMinutes))
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("finetune train", "which dataset?")
	}
	d, ts, st, err := openTraining(ctx, env, fs.Arg(0))
	if err != nil {
		return err
	}
	defer st.Close()
	// the wizard's service: its job, its starting speaker, its start and stage events
	ts.Voice.CloneModel, ts.Procs = *model, *procs
	job, resumed, err := resumableJob(ctx, ts, d, tune.GoalVoice, *fresh)
	if err != nil {
		return err
	}
	if !resumed {
		if s := d.Summary(); s.UsableMinutes < tune.MinVoiceMinutes && !*force {
			return fmt.Errorf("%s has %.1f minutes of usable speech; a voice fine-tune wants at least %.0f (more recordings: parley finetune import %s FILE…, or read prompts with parley finetune take %s); --force trains anyway",
				d.Name, s.UsableMinutes, tune.MinVoiceMinutes, d.Name, d.Name)
		}
		opt, err := voiceJobOptions(ctx, ts, fs.FlagSet, *gpt, *epochs, *lr, *seeds)
		if err != nil {
			return err
		}
		if job, err = ts.Create(ctx, d, tune.GoalVoice, opt); err != nil {
			return err
		}
		m, _ := tune.TTSMetaOf(job)
		if m.StartSeed != 0 {
			fmt.Fprintf(env.Stdout, "starting speaker: seed:%d (similarity %.3f to your clips)\n", m.StartSeed, m.StartSimilarity)
		}
		what := "a speaker vector"
		if m.GPT {
			what = "the GPT, decoder and a speaker vector"
		}
		fmt.Fprintf(env.Stdout, "job %d: training %s of %s on %d clips of %s (%d held out)\n", job.ID, what, filepath.Base(m.Model), len(m.Train), d.Name, len(m.HeldOut))
	} else if job.Status == store.JobQueued {
		fmt.Fprintf(env.Stdout, "job %d: starting (made earlier)\n", job.ID)
	} else {
		fmt.Fprintf(env.Stdout, "job %d: resuming at step %d of %d (%s)\n", job.ID, job.Progress.Step, job.Progress.TotalSteps, job.Error)
	}
	fmt.Fprintf(env.Stdout, "logs: %s\n", filepath.Join(job.Spec.Dir, "logs"))
	job, err = ts.Run(ctx, job.ID, progressPrinter(env.Stdout))
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(env.Stdout, "stopped at step %d; `parley finetune train %s` resumes it\n", job.Progress.Step, d.Name)
		return err
	}
	if err != nil {
		if job.ID == 0 || job.Error == "" { // it did not start (another job runs, no Python…)
			return err
		}
		return fmt.Errorf("job %d: %s", job.ID, job.Error)
	}
	fmt.Fprintf(env.Stdout, "trained; next: parley finetune install %s (then parley finetune evaluate %s --voice %s)\n", d.Name, d.Name, tune.VoiceNameOf(d.Name))
	return nil
}

// voiceJobOptions are a new voice job's options from finetune train's flags: --gpt when
// given, else the whole model on the demo voice (as the wizard's train step defaults);
// --seeds 0 starts from the model's mean speaker.
func voiceJobOptions(ctx context.Context, ts *tune.TrainingService, fs *flag.FlagSet, gpt bool, epochs int, lr float64, seeds int) (tune.JobOptions, error) {
	_, demo, err := ts.Base(ctx, tune.GoalVoice)
	if errors.Is(err, tune.ErrNoCloneModel) {
		return tune.JobOptions{}, errors.New("a voice fine-tune needs a ChatTTS voice model (an export of ChatTTS, or the demo voice)")
	}
	if err != nil {
		return tune.JobOptions{}, err
	}
	if !flagSet(fs, "gpt") {
		gpt = demo
	}
	if seeds <= 0 {
		seeds = -1 // none: the model's mean speaker
	}
	return tune.JobOptions{WholeModel: gpt, Epochs: epochs, LR: lr, Seeds: seeds}, nil
}

// resumableJob is the dataset's newest job of goal when it can be resumed (the wizard's
// Latest); fresh: none, a new job is wanted.
func resumableJob(ctx context.Context, ts *tune.TrainingService, d *clone.Dataset, goal string, fresh bool) (tune.Job, bool, error) {
	if fresh {
		return tune.Job{}, false, nil
	}
	j, err := ts.Latest(ctx, d, goal)
	if err != nil || j == nil {
		return tune.Job{}, false, err
	}
	return *j, j.Resumable(), nil
}

func runFinetuneInstall(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "finetune install", `usage: parley finetune install NAME [--name V] [--force]

Adds the voice trained by parley finetune train NAME to the voice library (and, when the model
itself was trained, the model to the local models), usable by say, the server, the assistant
and the voice panel, as the wizard's install step does: named after the dataset, replacing the
dataset's own earlier fine-tune, or NAME-tuned when another voice has the dataset's name
(--name chooses the name; --force replaces another voice of it). A failure leaves nothing
half-installed.`)
	name := fs.String("name", "", "voice name (default: the dataset's, or NAME-tuned when another voice has it)")
	force := fs.Bool("force", false, "replace a voice of that name")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("finetune install", "which dataset?")
	}
	d, err := openDataset(fs.Arg(0))
	if err != nil {
		return err
	}
	ts, st, err := openTrainingService(env)
	if err != nil {
		return err
	}
	defer st.Close()
	job, err := ts.Latest(ctx, d, tune.GoalVoice)
	if err != nil {
		return err
	}
	if job == nil || job.Status != store.JobDone {
		return fmt.Errorf("no finished voice training for %s (run `parley finetune train %s`)", d.Name, d.Name)
	}
	if *name == "" && *force {
		*name = tune.VoiceNameOf(d.Name) // --force replaces the voice of the dataset's name
	}
	// the wizard's install step: with no --name, the dataset's name (its own earlier
	// fine-tune replaced), else NAME-tuned
	in, err := ts.AddVoice(ctx, *job, *name, *force)
	if err != nil {
		return err
	}
	modelID := in.Model
	*name = in.Voice
	if modelID == "" {
		fmt.Fprintf(env.Stdout, "voice %s installed\ntry it: parley say --engine chattts --voice %s \"Hello there.\"\ncompare: parley finetune evaluate %s --voice %s\n",
			*name, *name, d.Name, *name)
		return nil
	}
	// the voice speaks with the model trained along with it
	fmt.Fprintf(env.Stdout, "voice %s installed with its model %s\ntry it: parley say --engine chattts --model \"$(parley models path %s)\" --voice %s \"Hello there.\"\n"+
		"compare: parley finetune evaluate %s --voice %s@%s\n", *name, modelID, modelID, *name, d.Name, *name, modelID)
	return nil
}
