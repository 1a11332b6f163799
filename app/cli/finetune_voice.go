package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
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
	d, r, st, err := openTraining(ctx, env, fs.Arg(0))
	if err != nil {
		return err
	}
	defer st.Close()
	job, resumed, err := findVoiceJob(ctx, r, d, *fresh, false)
	if err != nil {
		return err
	}
	if !resumed {
		if s := d.Summary(); s.UsableMinutes < tune.MinVoiceMinutes && !*force {
			return fmt.Errorf("%s has %.1f minutes of usable speech; a voice fine-tune wants at least %.0f (more recordings: parley finetune import %s FILE…, or read prompts with parley finetune take %s); --force trains anyway",
				d.Name, s.UsableMinutes, tune.MinVoiceMinutes, d.Name, d.Name)
		}
		dir := *model
		if dir == "" {
			if dir, _ = engines.FindChatTTS("", true); dir == "" {
				return errors.New("a voice fine-tune needs a ChatTTS voice model (an export of ChatTTS, or the demo voice)")
			}
		}
		if !flagSet(fs.FlagSet, "gpt") {
			*gpt = engines.IsChatTTSDemo(dir)
		}
		cfg := tune.TTSConfig{Model: dir, GPT: *gpt, Epochs: *epochs, LR: *lr, Procs: *procs}
		if *seeds > 0 {
			seed, sim, spk, err := tune.StartingSpeakerOf(ctx, env.factory(), d, dir, *seeds, nil)
			if err != nil {
				env.Log.Info("starting from the model's mean speaker", "reason", err)
			} else {
				fmt.Fprintf(env.Stdout, "starting speaker: seed:%d (similarity %.3f to your clips)\n", seed, sim)
				cfg.SpeakerInit = spk
			}
		}
		if job, err = tune.NewTTSJob(ctx, r, d, cfg); err != nil {
			return err
		}
		m, _ := tune.TTSMetaOf(job)
		what := "a speaker vector"
		if m.GPT {
			what = "the GPT, decoder and a speaker vector"
		}
		fmt.Fprintf(env.Stdout, "job %d: training %s of %s on %d clips of %s (%d held out)\n", job.ID, what, filepath.Base(dir), len(m.Train), d.Name, len(m.HeldOut))
	} else if job.Status == store.JobQueued {
		fmt.Fprintf(env.Stdout, "job %d: starting (made earlier)\n", job.ID)
	} else {
		fmt.Fprintf(env.Stdout, "job %d: resuming at step %d of %d (%s)\n", job.ID, job.Progress.Step, job.Progress.TotalSteps, job.Error)
	}
	fmt.Fprintf(env.Stdout, "logs: %s\n", filepath.Join(job.Spec.Dir, "logs"))
	job, err = r.Run(ctx, job.ID, progressPrinter(env.Stdout))
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
	fmt.Fprintf(env.Stdout, "trained; next: parley finetune install %s (then parley finetune evaluate %s --voice %s)\n", d.Name, d.Name, voiceNameFrom(d.Name))
	return nil
}

// findVoiceJob finds the dataset's newest voice job: one to resume (or, done, to install).
func findVoiceJob(ctx context.Context, r *tune.Runner, d *clone.Dataset, fresh, done bool) (tune.Job, bool, error) {
	if fresh {
		return tune.Job{}, false, nil
	}
	jobs, err := r.Jobs(ctx, tune.TTSKind)
	if err != nil {
		return tune.Job{}, false, err
	}
	for _, j := range jobs {
		m, err := tune.TTSMetaOf(j)
		if err != nil || m.Dataset != d.Dir() {
			continue
		}
		if done {
			return j, j.Status == store.JobDone, nil
		}
		return j, j.Resumable(), nil
	}
	return tune.Job{}, false, nil
}

func runFinetuneInstall(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "finetune install", `usage: parley finetune install NAME [--name V] [--force]

Adds the voice trained by parley finetune train NAME to the voice library (and, when the model
itself was trained, the model to the local models), usable by say, the server, the assistant
and the voice panel. A failure leaves nothing half-installed.`)
	name := fs.String("name", "", "voice name (default: the dataset's)")
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
	r, st, err := openTuneRunner(env)
	if err != nil {
		return err
	}
	defer st.Close()
	job, ok, err := findVoiceJob(ctx, r, d, false, true)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no finished voice training for %s (run `parley finetune train %s`)", d.Name, d.Name)
	}
	if *name == "" {
		*name = voiceNameFrom(d.Name)
	}
	lib, err := voices.Open(voices.DefaultDir())
	if err != nil {
		return err
	}
	mgr, err := assets.NewManager(nil, assets.Options{Log: env.Log})
	if err != nil {
		return err
	}
	modelID, err := tune.InstallVoice(ctx, mgr, lib, job, *name, *force)
	if err != nil {
		return err
	}
	r.SetResult(context.WithoutCancel(ctx), job.ID, "install", map[string]string{"voice": *name, "model": modelID})
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
