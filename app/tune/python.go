package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The Python side: Parley's trainer is the `train` package (train/ in the source tree,
// PREFIX/share/parley/train when installed), run by Debian's python3-torch.

// DefaultPython is the interpreter Debian's python3-torch installs into. The `python3` first on
// PATH may be another interpreter without torch, so it is only the fallback.
const DefaultPython = "/usr/bin/python3"

// InstallLine is what installs the trainer's Python packages on Debian and Ubuntu.
const InstallLine = "sudo apt-get install python3-torch python3-torchaudio python3-onnx python3-numpy python3-scipy python3-sentencepiece python3-soundfile"

var (
	// ErrNoPython: the Python interpreter does not run.
	ErrNoPython = errors.New("tune: Python 3 not found")
	// ErrNoTorch: Python runs but lacks PyTorch or another package the trainer needs.
	ErrNoTorch = errors.New("tune: PyTorch is not installed")
	// ErrNoTrainer: the `train` package (Parley's trainer) was not found.
	ErrNoTrainer = errors.New("tune: Parley's trainer (the train/ Python package) not found")
)

// Env says where the trainer lives and which Python runs it.
type Env struct {
	// Python is the interpreter ("" = DefaultPython, else python3 on PATH).
	Python string
	// TrainDir is the directory of the `train` package (it holds trainer.py); "" = FindTrainDir.
	TrainDir string
}

// trainerMarker is a file every copy of the train package has.
const trainerMarker = "trainer.py"

// FindTrainDir locates the train package: $PARLEY_TRAIN_DIR, then beside the executable
// (BIN/../train in a source checkout, whose binary is bin/parley; BIN/../share/parley/train
// when installed under a prefix), then /usr/share/parley/train and /usr/local/share/parley/train,
// then train/ in the working directory or one of its parents (go test, go run).
func FindTrainDir() (string, error) {
	var tried []string
	try := func(d string) bool {
		if d == "" {
			return false
		}
		tried = append(tried, d)
		st, err := os.Stat(filepath.Join(d, trainerMarker))
		return err == nil && st.Mode().IsRegular()
	}
	if d := os.Getenv("PARLEY_TRAIN_DIR"); d != "" {
		if try(d) {
			return filepath.Abs(d)
		}
		return "", fmt.Errorf("%w: PARLEY_TRAIN_DIR=%s has no %s", ErrNoTrainer, d, trainerMarker)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		bin := filepath.Dir(exe)
		for _, d := range []string{filepath.Join(bin, "..", "train"), filepath.Join(bin, "..", "share", "parley", "train")} {
			if try(d) {
				return filepath.Abs(d)
			}
		}
	}
	for _, d := range []string{"/usr/share/parley/train", "/usr/local/share/parley/train"} {
		if try(d) {
			return d, nil
		}
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if try(filepath.Join(d, "train")) {
				return filepath.Join(d, "train"), nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("%w (looked in %s); set train.dir in the configuration or PARLEY_TRAIN_DIR", ErrNoTrainer, strings.Join(tried, ", "))
}

// Resolve fills in the defaults (the interpreter, FindTrainDir) and checks that the train
// package is there: what a job will run.
func (e Env) Resolve() (Env, error) { return e.resolve() }

// resolve fills in the defaults and checks that the train package is there.
func (e Env) resolve() (Env, error) {
	if e.Python == "" {
		e.Python = DefaultPython
		if _, err := os.Stat(DefaultPython); err != nil {
			if p, err := exec.LookPath("python3"); err == nil {
				e.Python = p
			}
		}
	}
	if e.TrainDir == "" {
		d, err := FindTrainDir()
		if err != nil {
			return e, err
		}
		e.TrainDir = d
	} else if _, err := os.Stat(filepath.Join(e.TrainDir, trainerMarker)); err != nil {
		return e, fmt.Errorf("%w: %s has no %s", ErrNoTrainer, e.TrainDir, trainerMarker)
	}
	abs, err := filepath.Abs(e.TrainDir)
	if err != nil {
		return e, err
	}
	e.TrainDir = abs
	return e, nil
}

// root is the directory to put on PYTHONPATH (the train package's parent).
func (e Env) root() string { return filepath.Dir(e.TrainDir) }

// Torch describes the PyTorch the trainer will run on.
type Torch struct {
	Python  string `json:"python"`  // interpreter path
	Version string `json:"version"` // torch.__version__
	CUDA    bool   `json:"cuda"`    // CUDA available
	GPUs    int    `json:"gpus"`    // CUDA devices
	Cores   int    `json:"cores"`   // CPU cores Python sees
}

// checkScript imports what the trainer needs and prints what it found as JSON.
const checkScript = `
import json, os, sys
missing = []
for m in ("numpy", "scipy", "soundfile", "sentencepiece", "torchaudio", "onnx"):
    try:
        __import__(m)
    except Exception as e:
        missing.append(m)
try:
    import torch
except Exception as e:
    print(json.dumps({"torch": None, "error": "%s: %s" % (type(e).__name__, e), "missing": missing}))
    sys.exit(0)
cuda = bool(torch.cuda.is_available())
print(json.dumps({"torch": torch.__version__, "cuda": cuda, "gpus": torch.cuda.device_count() if cuda else 0,
                  "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
                  "missing": missing}))
`

// CheckPython runs the interpreter once and reports PyTorch, or an error that says exactly
// what to install.
func CheckPython(ctx context.Context, python string) (Torch, error) {
	if python == "" {
		e, _ := Env{}.resolve()
		python = e.Python
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", checkScript)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil && err != nil {
		return Torch{}, fmt.Errorf("tune: checking %s: %w", python, ctx.Err())
	}
	var execErr *exec.Error
	var pathErr *os.PathError
	if errors.As(err, &execErr) || errors.As(err, &pathErr) {
		return Torch{}, fmt.Errorf("%w: %s does not run (%v); install it with: %s", ErrNoPython, python, err, InstallLine)
	}
	var got struct {
		Torch   *string  `json:"torch"`
		Error   string   `json:"error"`
		CUDA    bool     `json:"cuda"`
		GPUs    int      `json:"gpus"`
		Cores   int      `json:"cores"`
		Missing []string `json:"missing"`
	}
	line := lastLine(out.String())
	if jerr := json.Unmarshal([]byte(line), &got); jerr != nil {
		msg := lastLine(errb.String())
		if msg == "" && err != nil {
			msg = err.Error()
		}
		return Torch{}, fmt.Errorf("%w: %s is not a working Python 3 (%s); install it with: %s", ErrNoPython, python, msg, InstallLine)
	}
	if got.Torch == nil {
		return Torch{}, fmt.Errorf("%w for %s (%s); install it with: %s", ErrNoTorch, python, got.Error, InstallLine)
	}
	if len(got.Missing) > 0 {
		return Torch{}, fmt.Errorf("%w: %s has PyTorch %s but lacks %s; install them with: %s", ErrNoTorch, python, *got.Torch, strings.Join(got.Missing, ", "), InstallLine)
	}
	return Torch{Python: python, Version: *got.Torch, CUDA: got.CUDA, GPUs: got.GPUs, Cores: got.Cores}, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}
