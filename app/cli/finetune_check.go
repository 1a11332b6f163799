package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/parley-voice/parley/app/tune"
)

func init() {
	finetuneVerbs["check"] = finetuneVerb{
		usage: `  check [--json]                    can this computer fine-tune? where Parley's trainer
                                    (the train/ Python package) is, Python and PyTorch,
                                    or exactly what to install
`,
		run: runFinetuneCheck,
	}
}

// trainerReport is what `parley finetune check` finds.
type trainerReport struct {
	TrainDir string      `json:"train_dir"` // the train package jobs run ("" = not found)
	Python   string      `json:"python"`    // the interpreter jobs run
	Torch    *tune.Torch `json:"torch"`     // nil when PyTorch (or a package beside it) is missing
	Error    string      `json:"error,omitempty"`
	Install  string      `json:"install,omitempty"` // the apt line that installs what is missing
}

func runFinetuneCheck(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "finetune check", `usage: parley finetune check [--json]

Says whether the fine-tune jobs (finetune asr, finetune train, the wizard's training step)
can run here: which copy of Parley's trainer they use (config train.dir or PARLEY_TRAIN_DIR,
else beside the program: PREFIX/share/parley/train when installed, train/ in a source
checkout), and the Python 3 with PyTorch that runs it. Exits 1 with what to install when
something is missing.`)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.parse(args); err != nil {
		return err
	}
	var e tune.Env
	if env.Config != nil {
		e = tune.Env{Python: env.Config.Train.Python, TrainDir: env.Config.Train.Dir}
	}
	var r trainerReport
	resolved, err := e.Resolve()
	r.Python = resolved.Python
	if err == nil {
		r.TrainDir = resolved.TrainDir
		var t tune.Torch
		if t, err = tune.CheckPython(ctx, resolved.Python); err == nil {
			r.Torch = &t
		} else {
			r.Install = tune.InstallLine
		}
	}
	if err != nil {
		r.Error = err.Error()
	}
	if *asJSON {
		if jerr := json.NewEncoder(env.Stdout).Encode(r); jerr != nil {
			return jerr
		}
	} else {
		show := func(k, v string) { fmt.Fprintf(env.Stdout, "%-9s %s\n", k+":", v) }
		show("trainer", orNone(r.TrainDir))
		show("python", r.Python)
		if t := r.Torch; t != nil {
			dev := fmt.Sprintf("CPU, %d cores", t.Cores)
			if t.CUDA {
				dev = fmt.Sprintf("CUDA, %d GPU(s)", t.GPUs)
			}
			show("pytorch", fmt.Sprintf("%s (%s)", t.Version, dev))
			fmt.Fprintln(env.Stdout, "Fine-tuning can run here.")
		}
	}
	if err != nil {
		if *asJSON {
			return fmt.Errorf("fine-tuning cannot run here: %w", err)
		}
		return err
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
