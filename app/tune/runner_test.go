package tune

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/store"
)

var (
	torchOnce sync.Once
	torchInfo Torch
	torchErr  error
)

// requireTorch checks Debian's python3-torch once for the whole test binary.
func requireTorch(t *testing.T) Torch {
	t.Helper()
	torchOnce.Do(func() { torchInfo, torchErr = CheckPython(context.Background(), DefaultPython) })
	if torchErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the trainer's Python is set up on CI: %v", torchErr)
		}
		t.Skipf("no PyTorch: %v", torchErr)
	}
	return torchInfo
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "parley.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fakeRunner runs the fake trainer (testdata/fake/train/fake.py).
func fakeRunner(t *testing.T, st *store.Store) *Runner {
	t.Helper()
	tr := requireTorch(t)
	dir, _ := filepath.Abs(filepath.Join("testdata", "fake", "train"))
	r := NewRunner(st, Options{Env: Env{Python: DefaultPython, TrainDir: dir}, Grace: 3 * time.Second, SaveEvery: time.Millisecond})
	r.torch = &tr
	return r
}

func fakeSpec(root string, args ...string) Spec {
	return Spec{Kind: "fake", Title: "fake job", Root: root, Procs: 1, Threads: 1,
		Steps: []Step{{Name: "train", Module: "train.fake", Train: true, Args: append([]string{"--out", "{job}/run"}, args...)}}}
}

type recorder struct {
	mu  sync.Mutex
	evs []Event
}

func (r *recorder) on(ev Event) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

func (r *recorder) kinds(kind string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func create(t *testing.T, r *Runner, spec Spec) Job {
	t.Helper()
	j, err := r.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestFakeJobDone(t *testing.T) {
	st := openStore(t)
	r := fakeRunner(t, st)
	root := t.TempDir()
	j := create(t, r, fakeSpec(root, "--steps", "10"))
	if j.Status != store.JobQueued || j.Spec.Dir != filepath.Join(root, "fake-1") {
		t.Fatalf("created %v in %s", j.Status, j.Spec.Dir)
	}
	var rec recorder
	got, err := r.Run(context.Background(), j.ID, rec.on)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.JobDone || got.Error != "" {
		t.Fatalf("status %s %q", got.Status, got.Error)
	}
	p := got.Progress
	if p.Step != 10 || p.TotalSteps != 10 || p.Fraction() != 1 || len(p.Losses) != 10 || p.Losses[9].Loss != 1.0 {
		t.Fatalf("progress %+v", p)
	}
	if p.Val["cer"] != 0.25 || !strings.HasSuffix(p.Checkpoint, "ckpt-00000010.txt") || p.PID != 0 {
		t.Fatalf("val %v checkpoint %q pid %d", p.Val, p.Checkpoint, p.PID)
	}
	if len(rec.kinds("train")) != 10 || len(rec.kinds("checkpoint")) != 5 {
		t.Fatalf("events: %d train, %d checkpoint", len(rec.kinds("train")), len(rec.kinds("checkpoint")))
	}
	tr := rec.kinds("train")
	if e := tr[4]; e.Progress.Step != 5 || e.Progress.ETA != 5 || e.Progress.Loss != 2 {
		t.Fatalf("5th train event progress %+v", e.Progress)
	}
	st2 := rec.kinds("status")
	if len(st2) != 2 || st2[0].Status != store.JobRunning || st2[1].Status != store.JobDone {
		t.Fatalf("status events %+v", st2)
	}
	// logs kept in the job's directory
	b, err := os.ReadFile(filepath.Join(j.Spec.Dir, "logs", "train.out"))
	if err != nil || !strings.Contains(string(b), `"event": "done"`) {
		t.Fatalf("stdout log: %v %q", err, b)
	}
	if _, err := r.Start(context.Background(), j.ID, nil); !errors.Is(err, ErrFinished) {
		t.Fatalf("starting a done job: %v", err)
	}
}

func TestFakeJobCrash(t *testing.T) {
	st := openStore(t)
	r := fakeRunner(t, st)
	j := create(t, r, fakeSpec(t.TempDir(), "--steps", "10", "--crash-at", "5"))
	got, err := r.Run(context.Background(), j.ID, nil)
	if err == nil || got.Status != store.JobFailed {
		t.Fatalf("crash: %v, status %s", err, got.Status)
	}
	if !strings.Contains(got.Error, "out of memory at step 5") || !strings.Contains(got.Error, "train.err") {
		t.Fatalf("error message %q should carry the trainer's reason and the log", got.Error)
	}
	if got.Progress.Step != 4 || !strings.HasSuffix(got.Progress.Checkpoint, "ckpt-00000004.txt") {
		t.Fatalf("progress after crash %+v", got.Progress)
	}
	if !got.Resumable() {
		t.Fatal("a crashed job is resumable")
	}
}

func TestFakeJobBadOutput(t *testing.T) {
	st := openStore(t)
	r := fakeRunner(t, st)
	j := create(t, r, fakeSpec(t.TempDir(), "--steps", "4", "--bad-json"))
	got, err := r.Run(context.Background(), j.ID, nil)
	if err != nil || got.Status != store.JobDone {
		t.Fatalf("garbage lines must not fail the job: %v %s", err, got.Status)
	}
	// "{not json", the 200 kB line and the NaN line; the plain text line is just logged
	if got.Progress.BadLines != 3 || got.Progress.Step != 4 {
		t.Fatalf("bad lines %d, step %d", got.Progress.BadLines, got.Progress.Step)
	}
}

func TestFakeJobNoDone(t *testing.T) {
	st := openStore(t)
	r := fakeRunner(t, st)
	j := create(t, r, fakeSpec(t.TempDir(), "--steps", "3", "--no-done"))
	got, err := r.Run(context.Background(), j.ID, nil)
	if err == nil || got.Status != store.JobFailed || !strings.Contains(got.Error, "without finishing") {
		t.Fatalf("%v %s %q", err, got.Status, got.Error)
	}
}

func TestFakeJobCancelThenResume(t *testing.T) {
	st := openStore(t)
	r := fakeRunner(t, st)
	j := create(t, r, fakeSpec(t.TempDir(), "--steps", "40", "--sleep", "0.05", "--save-every", "3"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := r.Start(ctx, j.ID, func(ev Event) {
		if ev.Kind == "checkpoint" && ev.Progress.Step == 6 {
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.Wait()
	if !errors.Is(err, context.Canceled) || got.Status != store.JobCancelled {
		t.Fatalf("cancel: %v %s", err, got.Status)
	}
	if got.Progress.Step < 6 || got.Progress.Step >= 40 || got.Progress.PID != 0 {
		t.Fatalf("cancelled at %+v", got.Progress)
	}
	if !processGone(h) {
		t.Fatal("the trainer outlived the cancel")
	}
	// resume continues from the newest checkpoint
	var rec recorder
	got, err = r.Run(context.Background(), j.ID, rec.on)
	if err != nil || got.Status != store.JobDone {
		t.Fatalf("resume: %v %s", err, got.Status)
	}
	res := rec.kinds("resume")
	if len(res) != 1 || res[0].Progress.Step%3 != 0 || res[0].Progress.Step < 6 {
		t.Fatalf("resume events %+v", res)
	}
	from := res[0].Progress.Step
	if tr := rec.kinds("train"); len(tr) != 40-from || tr[0].Progress.Step != from+1 {
		t.Fatalf("after resume from %d: %d train events", from, len(tr))
	}
	if got.Progress.Resumed != 1 || got.Progress.Step != 40 {
		t.Fatalf("final %+v", got.Progress)
	}
	// the loss history has each step once, in order
	for i, lp := range got.Progress.Losses {
		if lp.Step != i+1 {
			t.Fatalf("loss history %v", got.Progress.Losses)
		}
	}
}

// processGone reports whether the job's process group is gone.
func processGone(h *Handle) bool {
	pid := h.lastPID
	if pid == 0 {
		return true
	}
	return syscall.Kill(-pid, 0) != nil
}

func readFile(p string) string { b, _ := os.ReadFile(p); return string(b) }

func TestRecoverInterrupted(t *testing.T) {
	st := openStore(t)
	r := fakeRunner(t, st)
	j := create(t, r, fakeSpec(t.TempDir(), "--steps", "6"))
	ctx := context.Background()
	// a job some earlier Parley left "running", its process long gone
	st.SetJobStatus(ctx, j.ID, store.JobRunning, "")
	p := Progress{Stage: "train", Step: 4, TotalSteps: 6, PID: 1 << 22, PIDStart: 12345}
	b, _ := json.Marshal(p)
	st.UpdateJobProgress(ctx, j.ID, b)
	// and one that is live (this test process stands in for its trainer)
	j2 := create(t, r, fakeSpec(t.TempDir()))
	st.SetJobStatus(ctx, j2.ID, store.JobRunning, "")
	b, _ = json.Marshal(Progress{PID: os.Getpid(), PIDStart: processStart(os.Getpid())})
	st.UpdateJobProgress(ctx, j2.ID, b)

	if _, err := r.Start(ctx, j.ID, nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("a live job elsewhere must keep others from starting: %v", err)
	}
	got, err := r.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != j.ID || got[0].Status != store.JobFailed || !got[0].Progress.Interrupted || !got[0].Resumable() {
		t.Fatalf("recovered %+v", got)
	}
	if !strings.Contains(got[0].Error, "interrupted at step 4 of 6") {
		t.Fatalf("message %q", got[0].Error)
	}
	if j2now, _ := r.Job(ctx, j2.ID); j2now.Status != store.JobRunning {
		t.Fatalf("the live job was touched: %s", j2now.Status)
	}
	st.SetJobStatus(ctx, j2.ID, store.JobCancelled, "")
	done, err := r.Run(ctx, j.ID, nil)
	if err != nil || done.Status != store.JobDone || done.Progress.Interrupted || done.Progress.Resumed != 1 {
		t.Fatalf("resumed interrupted job: %v %+v", err, done)
	}
}

func TestStepsSkippedOnResume(t *testing.T) {
	st := openStore(t)
	r := fakeRunner(t, st)
	spec := fakeSpec(t.TempDir(), "--steps", "3", "--crash-at", "2")
	spec.Steps = append([]Step{{Name: "prepare", Module: "train.fake", Args: []string{"--out", "{job}/init", "--result"}}}, spec.Steps...)
	j := create(t, r, spec)
	got, err := r.Run(context.Background(), j.ID, nil)
	if err == nil {
		t.Fatal("want the crash")
	}
	var res struct{ Init, Size string }
	if err := json.Unmarshal(got.Progress.Results["prepare"], &res); err != nil || res.Size != "tiny" || res.Init != filepath.Join(j.Spec.Dir, "init", "init.pt") {
		t.Fatalf("prepare result %s: %v", got.Progress.Results["prepare"], err)
	}
	if len(got.Progress.StagesDone) != 1 {
		t.Fatalf("stages done %v", got.Progress.StagesDone)
	}
	// the resume runs only the training step (prepare's log has one attempt)
	r.Run(context.Background(), j.ID, nil)
	if n := strings.Count(readFile(filepath.Join(j.Spec.Dir, "logs", "prepare.out")), "=== "); n != 1 {
		t.Fatalf("prepare ran %d times", n)
	}
	if n := strings.Count(readFile(filepath.Join(j.Spec.Dir, "logs", "train.out")), "=== "); n != 2 {
		t.Fatalf("train ran %d times", n)
	}
}

func TestBadSpecs(t *testing.T) {
	st := openStore(t)
	r := fakeRunner(t, st)
	for _, s := range []Spec{
		{},
		{Kind: "x", Root: t.TempDir()},
		{Kind: "x", Root: t.TempDir(), Steps: []Step{{Name: "a", Module: "os; rm -rf"}}},
		{Kind: "x", Root: t.TempDir(), Steps: []Step{{Name: "a", Module: "m"}, {Name: "a", Module: "m"}}},
	} {
		if _, err := r.Create(context.Background(), s); !errors.Is(err, ErrBadSpec) {
			t.Errorf("%+v: %v", s, err)
		}
	}
	if _, err := r.Start(context.Background(), 999, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
}

func TestCheckPython(t *testing.T) {
	dir := t.TempDir()
	if _, err := CheckPython(context.Background(), filepath.Join(dir, "python3")); !errors.Is(err, ErrNoPython) || !strings.Contains(err.Error(), InstallLine) {
		t.Errorf("missing interpreter: %v", err)
	}
	noTorch := filepath.Join(dir, "notorch")
	os.WriteFile(noTorch, []byte("#!/bin/sh\necho '{\"torch\": null, \"error\": \"ModuleNotFoundError: No module named torch\", \"missing\": [\"torchaudio\"]}'\n"), 0o755)
	if _, err := CheckPython(context.Background(), noTorch); !errors.Is(err, ErrNoTorch) || !strings.Contains(err.Error(), InstallLine) || !strings.Contains(err.Error(), "No module named torch") {
		t.Errorf("no torch: %v", err)
	}
	partial := filepath.Join(dir, "partial")
	os.WriteFile(partial, []byte("#!/bin/sh\necho '{\"torch\": \"1.13.1\", \"cuda\": false, \"gpus\": 0, \"cores\": 2, \"missing\": [\"sentencepiece\"]}'\n"), 0o755)
	if _, err := CheckPython(context.Background(), partial); !errors.Is(err, ErrNoTorch) || !strings.Contains(err.Error(), "lacks sentencepiece") {
		t.Errorf("missing sentencepiece: %v", err)
	}
	broken := filepath.Join(dir, "broken")
	os.WriteFile(broken, []byte("#!/bin/sh\necho 'Fatal Python error: init_fs_encoding' >&2\nexit 1\n"), 0o755)
	if _, err := CheckPython(context.Background(), broken); !errors.Is(err, ErrNoPython) || !strings.Contains(err.Error(), "init_fs_encoding") {
		t.Errorf("broken interpreter: %v", err)
	}
	tr := requireTorch(t)
	if tr.Version == "" || tr.Cores < 1 {
		t.Errorf("torch %+v", tr)
	}
}

func TestFindTrainDir(t *testing.T) {
	got, err := FindTrainDir() // from the package directory: the repository's train/
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.Abs(filepath.Join("..", "..", "train"))
	if got != want {
		t.Errorf("found %s, want %s", got, want)
	}
	t.Setenv("PARLEY_TRAIN_DIR", t.TempDir())
	if _, err := FindTrainDir(); !errors.Is(err, ErrNoTrainer) || !strings.Contains(err.Error(), "PARLEY_TRAIN_DIR") {
		t.Errorf("empty PARLEY_TRAIN_DIR: %v", err)
	}
	fake, _ := filepath.Abs(filepath.Join("testdata", "fake", "train"))
	t.Setenv("PARLEY_TRAIN_DIR", fake)
	if got, err := FindTrainDir(); err != nil || got != fake {
		t.Errorf("PARLEY_TRAIN_DIR: %s %v", got, err)
	}
}

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		t              Torch
		samples        int
		procs, threads int
	}{
		{Torch{Cores: 2}, 1000, 1, 2},
		{Torch{Cores: 8}, 1000, 4, 2},
		{Torch{Cores: 8}, 10, 1, 8},
		{Torch{Cores: 64}, 1000, 8, 2},
		{Torch{Cores: 16, GPUs: 1, CUDA: true}, 1000, 1, 8},
		{Torch{Cores: 16, GPUs: 4, CUDA: true}, 1000, 4, 4},
		{Torch{}, 0, 1, 1},
	} {
		p, th := Plan(c.t, c.samples)
		if p != c.procs || th != c.threads {
			t.Errorf("Plan(%+v, %d) = %d, %d; want %d, %d", c.t, c.samples, p, th, c.procs, c.threads)
		}
	}
}
