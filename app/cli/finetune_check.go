package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/gpu"
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
	// Slice is what cutting recordings into clips (finetune slice, the wizard's first
	// step) lacks: ONNX Runtime, the Silero VAD model ("" when it can run).
	Slice []string `json:"slice_missing,omitempty"`
}

// sliceMissing says what `finetune slice` would fail on: it runs the Silero VAD through ONNX
// Runtime, before any Python.
func sliceMissing() []string {
	var miss []string
	if err := gpu.Init(); err != nil {
		miss = append(miss, "ONNX Runtime ("+err.Error()+"; `make setup` or the packaged install provides it)")
	}
	if _, err := os.Stat(vad.DefaultModel()); err != nil {
		miss = append(miss, "the Silero VAD model ("+vad.DefaultModel()+" is missing; `parley doctor --fetch` gets it)")
	}
	return miss
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
	r.Slice = sliceMissing()
	if err == nil && len(r.Slice) > 0 {
		err = fmt.Errorf("slicing recordings into clips needs %s", strings.Join(r.Slice, " and "))
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
		}
		for _, m := range r.Slice {
			show("missing", m)
		}
		if r.Torch != nil && len(r.Slice) == 0 {
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
