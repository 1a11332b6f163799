package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/store"
	"github.com/parley-voice/parley/voices/clone"
)

func init() {
	finetuneVerbs["asr"] = finetuneVerb{
		usage: `  asr NAME [--base MODEL] [--official DIR] [--epochs N] [--new]
                                    improve recognition of your voice: fine-tune the
                                    recogniser on the clips (some held out to score it),
                                    installed as sensevoice-NAME only if it got better;
                                    run it again to resume an unfinished one
`,
		run: runFinetuneASR,
	}
	finetuneVerbs["jobs"] = finetuneVerb{
		usage: `  jobs [--json]                     training jobs: state, progress, errors
`,
		run: runFinetuneJobs,
	}
}

// openTrainingService opens the store and the fine-tune service the desktop wizard uses
// (tune.TrainingService, with the voice goal's models: tune.CloneService), on the command's
// factory.
func openTrainingService(env *cliEnv) (*tune.TrainingService, *store.Store, error) {
	st, err := env.factory().Store("")
	if err != nil {
		return nil, nil, err
	}
	ts := tune.NewTrainingService(st, env.factory())
	ts.Voice = tune.NewCloneService(env.factory())
	return ts, st, nil
}

// openTraining opens dataset name and the fine-tune service for a new or resumed training
// job: jobs left running by a Parley that died are recovered, and Python and PyTorch are
// checked first (TrainingService.Prepare).
func openTraining(ctx context.Context, env *cliEnv, name string) (*clone.Dataset, *tune.TrainingService, *store.Store, error) {
	d, err := openDataset(name)
	if err != nil {
		return nil, nil, nil, err
	}
	ts, st, err := openTrainingService(env)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := ts.Prepare(ctx); err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	return d, ts, st, nil
}

func runFinetuneASR(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "finetune asr", `usage: parley finetune asr NAME [flags]

Improve recognition of your voice: the dataset's usable clips are split into training and
held-out clips (never trained on), the installed recogniser is fine-tuned on the training
clips, and its character error rate on the held-out clips is measured before and after. The
result is installed as the local model sensevoice-NAME only when it is better. Ctrl-C stops
the training; running the command again resumes it from its last checkpoint.`)
	base := fs.String("base", "", "recogniser to start from (id or directory; default the best installed)")
	official := fs.String("official", "", "start from FunASR's SenseVoiceSmall directory (model.pt, am.mvn, *.bpe.model)")
	epochs := fs.Int("epochs", 0, "training epochs (default: about 300 steps)")
	lr := fs.Float64("lr", 0, "learning rate (default 3e-4)")
	procs := fs.Int("procs", 0, "trainer processes (default: one per GPU, or as the cores allow)")
	fresh := fs.Bool("new", false, "start a new fine-tune instead of resuming an unfinished one")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("finetune asr", "which dataset?")
	}
	d, ts, st, err := openTraining(ctx, env, fs.Arg(0))
	if err != nil {
		return err
	}
	defer st.Close()
	// the wizard's service: its starting point, job, start and stage events, evaluation and
	// install
	ts.ASRModel, ts.Procs = *base, *procs
	job, resumed, err := findASRJob(ctx, ts, d, *fresh)
	if err != nil {
		return err
	}
	if !resumed {
		job, err = ts.Create(ctx, d, tune.GoalRecognition, tune.JobOptions{Official: *official, Epochs: *epochs, LR: *lr})
		if err != nil {
			return asrBaseError(err)
		}
		m, _ := tune.ASRMetaOf(job)
		fmt.Fprintf(env.Stdout, "job %d: fine-tuning %s on %d clips of %s, %d held out to score it\n", job.ID, m.BaseID, len(m.Train), d.Name, len(m.HeldOut))
		for clip, why := range m.Skipped {
			fmt.Fprintf(env.Stdout, "  left out %s: %s\n", clip, why)
		}
	} else if job.Status == store.JobQueued {
		fmt.Fprintf(env.Stdout, "job %d: starting (made earlier)\n", job.ID)
	} else {
		fmt.Fprintf(env.Stdout, "job %d: resuming at step %d of %d (%s)\n", job.ID, job.Progress.Step, job.Progress.TotalSteps, job.Error)
	}
	if job.Status != store.JobDone {
		fmt.Fprintf(env.Stdout, "logs: %s\n", filepath.Join(job.Spec.Dir, "logs"))
		job, err = ts.Run(ctx, job.ID, progressPrinter(env.Stdout))
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(env.Stdout, "stopped at step %d; `parley finetune asr %s` resumes it\n", job.Progress.Step, d.Name)
			return err
		}
		if err != nil {
			if job.ID == 0 || job.Error == "" { // it did not start (another job runs, no Python…)
				return err
			}
			return fmt.Errorf("job %d: %s", job.ID, job.Error)
		}
	}
	return finishASR(ctx, env, ts, job)
}

// asrBaseError words why a recogniser job has no starting point for the command line (the
// service words it for the wizard).
func asrBaseError(err error) error {
	var be *tune.BaseError
	switch {
	case !errors.As(err, &be):
		return err
	case errors.Is(be.Err, factory.ErrNoASR):
		return fmt.Errorf("%w (or give --base DIR)", be.Err)
	case errors.Is(be.Err, tune.ErrNoFloatModel):
		return fmt.Errorf("%s has no float model.onnx that Parley exported, so it cannot be fine-tuned from; "+
			"get FunASR's SenseVoiceSmall (model.pt, am.mvn, *.bpe.model) and give --official DIR", be.Model)
	}
	return be.Err
}

func openDataset(name string) (*clone.Dataset, error) {
	d, err := clone.Open(filepath.Join(finetuneDir(), name))
	if errors.Is(err, clone.ErrNotDataset) {
		return nil, fmt.Errorf("no dataset %q (see `parley finetune list`, or `parley finetune new %s`)", name, name)
	}
	return d, err
}

// findASRJob finds this dataset's newest recogniser job (the wizard's Latest) when it can be
// resumed or is done but not yet evaluated.
func findASRJob(ctx context.Context, ts *tune.TrainingService, d *clone.Dataset, fresh bool) (tune.Job, bool, error) {
	if fresh {
		return tune.Job{}, false, nil
	}
	j, err := ts.Latest(ctx, d, tune.GoalRecognition)
	if err != nil || j == nil {
		return tune.Job{}, false, err
	}
	_, evaluated := j.Progress.Results["evaluate"]
	if j.Resumable() || (j.Status == store.JobDone && !evaluated) {
		return *j, true, nil
	}
	return tune.Job{}, false, nil // the newest one finished: start afresh
}

// progressPrinter prints a job's stages and, every few seconds, its training progress.
func progressPrinter(w io.Writer) tune.Handler {
	var last time.Time
	return func(ev tune.Event) {
		p := ev.Progress
		switch ev.Kind {
		case "stage":
			what := map[string]string{"prepare": "preparing the starting point", "train": "training", "export": "exporting the model"}[p.Stage]
			if what == "" {
				what = p.Stage
			}
			fmt.Fprintf(w, "%s…\n", what)
		case "resume":
			fmt.Fprintf(w, "  continuing from the checkpoint at step %d\n", p.Step)
		case "train":
			if time.Since(last) < 10*time.Second && p.Step != p.TotalSteps {
				return
			}
			last = time.Now()
			eta := ""
			if p.ETA > 0 {
				eta = ", about " + (time.Duration(p.ETA) * time.Second).String() + " left"
			}
			fmt.Fprintf(w, "  step %d/%d (%.0f%%), loss %.3f%s\n", p.Step, p.TotalSteps, 100*p.Fraction(), p.Loss, eta)
		}
	}
}

// finishASR is the wizard's steps 6 and 7 for a trained recogniser job: the evaluation
// (stored with the job) and, when the fine-tune did better, the install.
func finishASR(ctx context.Context, env *cliEnv, ts *tune.TrainingService, job tune.Job) error {
	fmt.Fprintln(env.Stdout, "scoring the held-out clips…")
	if _, err := ts.Evaluate(ctx, job); err != nil {
		return err
	}
	job, err := ts.Runner().Job(context.WithoutCancel(ctx), job.ID) // with its evaluation
	if err != nil {
		return err
	}
	var res tune.ASRResult
	if err := json.Unmarshal(job.Progress.Results["evaluate"], &res); err != nil {
		return fmt.Errorf("job %d: the evaluation: %w", job.ID, err)
	}
	m, _ := tune.ASRMetaOf(job)
	fmt.Fprintf(env.Stdout, "held-out clips: %d; character error rate %.1f%% before, %.1f%% after\n",
		len(res.After.Clips), 100*res.Before.CER, 100*res.After.CER)
	if !res.Improved {
		return fmt.Errorf("not installed: on your %d held-out clips the fine-tuned recogniser makes %d character errors, %s made %d; "+
			"record more (about 10 minutes helps), check the transcripts with `parley finetune clips %s`, or train longer (--epochs)",
			len(res.After.Clips), res.After.Errors, m.BaseID, res.Before.Errors, m.Name)
	}
	id, dir, err := ts.AddRecogniser(ctx, job)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "installed as %s (%s)\nParley uses it when asr.model is empty and no better model is installed; to be sure:\n  parley config set asr.model %s\n",
		id, dir, id)
	return nil
}

func runFinetuneJobs(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "finetune jobs", "usage: parley finetune jobs [--json]\n\nThe training jobs, newest first.")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.parse(args); err != nil {
		return err
	}
	ts, st, err := openTrainingService(env)
	if err != nil {
		return err
	}
	defer st.Close()
	r := ts.Runner()
	if _, err := r.Recover(ctx); err != nil {
		return err
	}
	jobs, err := r.Jobs(ctx, "")
	if err != nil {
		return err
	}
	if *asJSON {
		type row struct {
			ID       int64           `json:"id"`
			Kind     string          `json:"kind"`
			Title    string          `json:"title"`
			Status   store.JobStatus `json:"status"`
			Error    string          `json:"error,omitempty"`
			Dir      string          `json:"dir"`
			Progress tune.Progress   `json:"progress"`
			Created  time.Time       `json:"created"`
		}
		rows := []row{}
		for _, j := range jobs {
			rows = append(rows, row{j.ID, j.Kind, j.Spec.Title, j.Status, j.Error, j.Spec.Dir, j.Progress, j.Created})
		}
		return json.NewEncoder(env.Stdout).Encode(rows)
	}
	if len(jobs) == 0 {
		fmt.Fprintln(env.Stdout, "no training jobs")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tWHAT\tSTATE\tPROGRESS\tNOTE")
	for _, j := range jobs {
		note := j.Error
		if raw, ok := j.Progress.Results["evaluate"]; ok {
			var res tune.ASRResult
			if json.Unmarshal(raw, &res) == nil {
				note = res.Message
			}
		}
		if len(note) > 100 {
			note = note[:97] + "…"
		}
		prog := fmt.Sprintf("%d/%d", j.Progress.Step, j.Progress.TotalSteps)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", j.ID, j.Spec.Title, j.Status, prog, strings.ReplaceAll(note, "\n", " "))
	}
	return tw.Flush()
}
