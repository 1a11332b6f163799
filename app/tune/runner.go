// Package tune runs Parley's fine-tune jobs: the Python trainer (train/) as a job recorded in
// the store's jobs table, with progress parsed from its JSON-line events, cancellation by
// context, resume after the app restarts, DDP when more than one process helps, and logs kept
// beside the job's files. The recipes (improve recognition of my voice, …) build on it.
//
// Nothing here prints: callers get events (Handler) and errors; the desktop wizard and the CLI
// are two faces of the same calls.
package tune

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/store"
)

var (
	// ErrBusy: another training job is running (one at a time: they would share the cores).
	ErrBusy = errors.New("tune: another training job is running")
	// ErrFinished: starting a job that is already done.
	ErrFinished = errors.New("tune: job already finished")
	// ErrBadSpec: a job description that cannot run.
	ErrBadSpec = errors.New("tune: bad job")
)

// Step is one Python module run of a job (prepare, train, export…).
type Step struct {
	Name   string   `json:"name"`
	Module string   `json:"module"` // e.g. train.sensevoice.train
	Args   []string `json:"args"`   // "{job}" in an argument is replaced by the job's directory
	// Train marks the training step: it runs through train.launch when the job has more than
	// one process, and with --resume auto, so a resumed job continues exactly where its last
	// checkpoint left it.
	Train bool `json:"train,omitempty"`
}

// Spec describes a job; it is stored as the job's config.
type Spec struct {
	Kind  string `json:"kind"`  // e.g. "asr-finetune"
	Title string `json:"title"` // what the wizard shows ("Improve recognition: anna")
	// Root is the directory under which the job gets its own directory (<root>/<kind>-<id>):
	// the steps' outputs and the logs (logs/<step>.out, logs/<step>.err).
	Root    string            `json:"root"`
	Steps   []Step            `json:"steps"`
	Procs   int               `json:"procs,omitempty"`   // trainer processes; 0 = Plan
	Threads int               `json:"threads,omitempty"` // torch threads per process; 0 = Plan
	Samples int               `json:"samples,omitempty"` // training samples (for Plan)
	Env     map[string]string `json:"env,omitempty"`     // extra environment
	// Meta is the caller's own record (e.g. which clips are held out); the runner keeps it.
	Meta json.RawMessage `json:"meta,omitempty"`
	// Dir is the job's directory, <root>/<kind>-<id> (filled in when a job is read).
	Dir string `json:"-"`
}

func (s *Spec) check() error {
	if s.Kind == "" || s.Root == "" || len(s.Steps) == 0 {
		return fmt.Errorf("%w: kind, root and at least one step are needed", ErrBadSpec)
	}
	seen := map[string]bool{}
	for _, st := range s.Steps {
		if st.Name == "" || st.Module == "" {
			return fmt.Errorf("%w: a step needs a name and a module", ErrBadSpec)
		}
		if seen[st.Name] {
			return fmt.Errorf("%w: two steps named %q", ErrBadSpec, st.Name)
		}
		seen[st.Name] = true
		if !moduleRE.MatchString(st.Module) {
			return fmt.Errorf("%w: module %q", ErrBadSpec, st.Module)
		}
	}
	return nil
}

var moduleRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// Event is what a running job reports.
type Event struct {
	Job  int64
	Kind string // "stage", a trainer event ("start", "train", "val", "checkpoint", "resume", "done"), "status"
	// Progress is a snapshot after the event.
	Progress Progress
	// Status is the job's new state (Kind "status"); Err says why it failed.
	Status store.JobStatus
	Err    string
}

// Handler receives a job's events, on the job's goroutine: return quickly.
type Handler func(Event)

// Options configure a Runner.
type Options struct {
	Env Env
	Log *slog.Logger
	// Grace is how long a cancelled trainer gets after SIGTERM before SIGKILL (default 10 s).
	Grace time.Duration
	// SaveEvery throttles progress writes to the store during training (default 2 s);
	// checkpoints, validation, stages and the end are always written.
	SaveEvery time.Duration
}

// Runner starts and supervises jobs. One job runs at a time per database.
type Runner struct {
	st    *store.Store
	opts  Options
	log   *slog.Logger
	mu    sync.Mutex
	live  map[int64]*Handle
	torch *Torch
}

// NewRunner returns a runner recording jobs in st.
func NewRunner(st *store.Store, opts Options) *Runner {
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	if opts.SaveEvery <= 0 {
		opts.SaveEvery = 2 * time.Second
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Runner{st: st, opts: opts, log: log, live: map[int64]*Handle{}}
}

// Check finds the trainer and checks Python and PyTorch once (the result is kept).
func (r *Runner) Check(ctx context.Context) (Torch, error) {
	r.mu.Lock()
	if r.torch != nil {
		t := *r.torch
		r.mu.Unlock()
		return t, nil
	}
	r.mu.Unlock()
	env, err := r.opts.Env.resolve()
	if err != nil {
		return Torch{}, err
	}
	t, err := CheckPython(ctx, env.Python)
	if err != nil {
		return Torch{}, err
	}
	r.mu.Lock()
	r.torch = &t
	r.mu.Unlock()
	return t, nil
}

// Job is a stored job with its spec and progress decoded.
type Job struct {
	store.Job
	Spec     Spec
	Progress Progress
}

// Resumable says whether Start can continue the job: it did not finish (failed, cancelled or
// interrupted) and its steps are still known.
func (j Job) Resumable() bool {
	return (j.Status == store.JobFailed || j.Status == store.JobCancelled || j.Status == store.JobQueued) && len(j.Spec.Steps) > 0
}

func decodeJob(sj store.Job) (Job, error) {
	j := Job{Job: sj}
	if err := json.Unmarshal(sj.Config, &j.Spec); err != nil {
		return j, fmt.Errorf("tune: job %d: config: %w", sj.ID, err)
	}
	p, err := ParseProgress(sj.Progress)
	if err != nil {
		return j, fmt.Errorf("tune: job %d: %w", sj.ID, err)
	}
	j.Progress = p
	j.Spec.Dir = jobDir(j.Spec.Root, sj.Kind, sj.ID)
	return j, nil
}

// Job reads one job.
func (r *Runner) Job(ctx context.Context, id int64) (Job, error) {
	sj, err := r.st.Job(ctx, id)
	if err != nil {
		return Job{}, err
	}
	return decodeJob(sj)
}

// Jobs lists jobs of a kind ("" = all), newest first.
func (r *Runner) Jobs(ctx context.Context, kind string) ([]Job, error) {
	sjs, err := r.st.Jobs(ctx, kind, store.ListOptions{Limit: 1000})
	if err != nil {
		return nil, err
	}
	out := make([]Job, 0, len(sjs))
	for _, sj := range sjs {
		j, err := decodeJob(sj)
		if err != nil {
			r.log.Warn("unreadable job", "id", sj.ID, "err", err)
			continue
		}
		out = append(out, j)
	}
	return out, nil
}

// Create records a queued job and makes its directory (<root>/<kind>-<id>), where the caller
// may write the job's inputs before Start.
func (r *Runner) Create(ctx context.Context, spec Spec) (Job, error) {
	if err := spec.check(); err != nil {
		return Job{}, err
	}
	spec.Dir = ""
	b, _ := json.Marshal(spec)
	sj, err := r.st.CreateJob(ctx, spec.Kind, b)
	if err != nil {
		return Job{}, err
	}
	dir := jobDir(spec.Root, spec.Kind, sj.ID)
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		r.st.SetJobStatus(ctx, sj.ID, store.JobFailed, "cannot make the job directory: "+err.Error())
		return Job{}, fmt.Errorf("tune: job %d: %w", sj.ID, err)
	}
	return r.Job(ctx, sj.ID)
}

// jobDir is where a job's files go.
func jobDir(root, kind string, id int64) string {
	return filepath.Join(root, fmt.Sprintf("%s-%d", kind, id))
}

// Recover marks jobs left "running" by a Parley that is gone (no live process) as failed and
// interrupted, so they can be resumed; it returns those jobs. Call it when the app starts.
func (r *Runner) Recover(ctx context.Context) ([]Job, error) {
	jobs, err := r.Jobs(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []Job
	for _, j := range jobs {
		if j.Status != store.JobRunning || r.isLive(j) {
			continue
		}
		if err := r.markInterrupted(ctx, &j); err != nil {
			return out, err
		}
		out = append(out, j)
	}
	return out, nil
}

func (r *Runner) isLive(j Job) bool {
	r.mu.Lock()
	_, mine := r.live[j.ID]
	r.mu.Unlock()
	return mine || (j.Progress.PID > 0 && processAlive(j.Progress.PID, j.Progress.PIDStart))
}

func (r *Runner) markInterrupted(ctx context.Context, j *Job) error {
	j.Progress.Interrupted = true
	j.Progress.PID, j.Progress.PIDStart, j.Progress.ETA = 0, 0, 0
	b, _ := json.Marshal(j.Progress)
	if err := r.st.UpdateJobProgress(ctx, j.ID, b); err != nil {
		return err
	}
	msg := fmt.Sprintf("interrupted at step %d of %d (Parley or the computer stopped while it ran); resume to continue from the last checkpoint", j.Progress.Step, j.Progress.TotalSteps)
	if err := r.st.SetJobStatus(ctx, j.ID, store.JobFailed, msg); err != nil {
		return err
	}
	j.Status, j.Error = store.JobFailed, msg
	return nil
}

// SetResult records a named result of a stopped job in its progress (Results[name]): what
// came of it after the trainer, e.g. the evaluation and what was installed.
func (r *Runner) SetResult(ctx context.Context, id int64, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	j, err := r.Job(ctx, id)
	if err != nil {
		return err
	}
	if j.Status == store.JobRunning && r.isLive(j) {
		return fmt.Errorf("%w: job %d is running", ErrBusy, id)
	}
	if j.Progress.Results == nil {
		j.Progress.Results = map[string]json.RawMessage{}
	}
	j.Progress.Results[name] = b
	pb, _ := json.Marshal(j.Progress)
	return r.st.UpdateJobProgress(ctx, id, pb)
}

// Handle is a started job.
type Handle struct {
	id      int64
	done    chan struct{}
	job     Job
	err     error
	lastPID int // the last trainer process (read after done)
}

// ID is the job's id.
func (h *Handle) ID() int64 { return h.id }

// Done is closed when the job has stopped.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Wait waits for the job to stop and returns its final record; the error is why it did not
// finish (nil when done; context.Canceled when cancelled).
func (h *Handle) Wait() (Job, error) {
	<-h.done
	return h.job, h.err
}

// Start runs a queued job, or resumes one that did not finish (steps already done are
// skipped; the training step continues from its newest checkpoint). Cancelling ctx stops the
// trainer (SIGTERM to its process group, SIGKILL after the grace period) and leaves the job
// cancelled and resumable.
func (r *Runner) Start(ctx context.Context, id int64, on Handler) (*Handle, error) {
	if on == nil {
		on = func(Event) {}
	}
	j, err := r.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.Status == store.JobDone {
		return nil, fmt.Errorf("%w: job %d", ErrFinished, id)
	}
	if err := j.Spec.check(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	for other := range r.live {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w (job %d)", ErrBusy, other)
	}
	r.mu.Unlock()
	others, err := r.Jobs(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, o := range others {
		if o.Status == store.JobRunning && r.isLive(o) {
			return nil, fmt.Errorf("%w (job %d, %s, process %d)", ErrBusy, o.ID, o.Spec.Title, o.Progress.PID)
		}
	}
	torch, err := r.Check(ctx)
	if err != nil {
		return nil, err
	}
	env, err := r.opts.Env.resolve()
	if err != nil {
		return nil, err
	}
	h := &Handle{id: id, done: make(chan struct{})}
	r.mu.Lock()
	if len(r.live) > 0 {
		r.mu.Unlock()
		return nil, ErrBusy
	}
	r.live[id] = h
	r.mu.Unlock()
	if j.Status != store.JobQueued {
		j.Progress.Resumed++
	}
	j.Progress.Interrupted = false
	if err := r.st.SetJobStatus(ctx, id, store.JobRunning, ""); err != nil {
		r.forget(id)
		return nil, err
	}
	run := &jobRun{r: r, h: h, env: env, torch: torch, job: j, on: on, p: j.Progress}
	go func() {
		defer close(h.done)
		defer r.forget(id)
		h.err = run.run(ctx)
		final, err := r.Job(context.WithoutCancel(ctx), id)
		if err != nil && h.err == nil {
			h.err = err
		}
		h.job = final
	}()
	return h, nil
}

// Run is Start then Wait.
func (r *Runner) Run(ctx context.Context, id int64, on Handler) (Job, error) {
	h, err := r.Start(ctx, id, on)
	if err != nil {
		return Job{}, err
	}
	return h.Wait()
}

func (r *Runner) forget(id int64) {
	r.mu.Lock()
	delete(r.live, id)
	r.mu.Unlock()
}

// Plan chooses trainer processes and threads per process: one process per GPU; on CPU, two
// threads per process once there are four cores or more (small models train faster as DDP
// ranks than as one process with many threads), else one process using every core; a dataset
// too small to split keeps one process.
func Plan(t Torch, samples int) (procs, threads int) {
	cores := max(1, t.Cores)
	switch {
	case t.GPUs >= 2:
		return min(t.GPUs, 8), max(1, cores/min(t.GPUs, 8))
	case t.GPUs == 1:
		return 1, min(cores, 8)
	case cores >= 4 && samples >= 32:
		p := min(cores/2, 8)
		return p, 2
	}
	return 1, min(cores, 8)
}

// jobRun is one attempt at a job.
type jobRun struct {
	r     *Runner
	h     *Handle
	env   Env
	torch Torch
	job   Job
	on    Handler
	p     Progress
	saved time.Time
}

func (x *jobRun) emit(ev Event) {
	ev.Job = x.job.ID
	ev.Progress = x.p.clone()
	x.on(ev)
}

// save writes the progress to the store (now, or throttled when lazy).
func (x *jobRun) save(lazy bool) {
	if lazy && time.Since(x.saved) < x.r.opts.SaveEvery {
		return
	}
	x.saved = time.Now()
	b, err := json.Marshal(x.p)
	if err == nil {
		err = x.r.st.UpdateJobProgress(context.Background(), x.job.ID, b)
	}
	if err != nil {
		x.r.log.Warn("saving job progress", "job", x.job.ID, "err", err)
	}
}

func (x *jobRun) finish(status store.JobStatus, msg string) {
	x.p.PID, x.p.PIDStart = 0, 0
	if status != store.JobDone {
		x.p.ETA = 0
	}
	x.save(false)
	if err := x.r.st.SetJobStatus(context.Background(), x.job.ID, status, msg); err != nil {
		x.r.log.Warn("setting job status", "job", x.job.ID, "err", err)
	}
	x.emit(Event{Kind: "status", Status: status, Err: msg})
}

func (x *jobRun) run(ctx context.Context) error {
	spec := x.job.Spec
	x.emit(Event{Kind: "status", Status: store.JobRunning})
	procs, threads := spec.Procs, spec.Threads
	if procs <= 0 || threads <= 0 {
		pp, pt := Plan(x.torch, spec.Samples)
		if procs <= 0 {
			procs = pp
		}
		if threads <= 0 {
			threads = pt
		}
	}
	for _, st := range spec.Steps {
		if slices.Contains(x.p.StagesDone, st.Name) {
			continue
		}
		x.p.Stage = st.Name
		x.save(false)
		x.emit(Event{Kind: "stage"})
		err := x.step(ctx, st, procs, threads)
		if err != nil {
			if ctx.Err() != nil {
				x.finish(store.JobCancelled, "cancelled during "+st.Name)
				return ctx.Err()
			}
			x.finish(store.JobFailed, err.Error())
			return err
		}
		x.p.StagesDone = append(x.p.StagesDone, st.Name)
		x.save(false)
	}
	x.finish(store.JobDone, "")
	return nil
}

// command builds the process for one step.
func (x *jobRun) command(st Step, procs, threads int) *exec.Cmd {
	args := make([]string, 0, len(st.Args)+8)
	for _, a := range st.Args {
		args = append(args, strings.ReplaceAll(a, "{job}", x.job.Spec.Dir))
	}
	if st.Train && !slices.Contains(args, "--resume") {
		args = append(args, "--resume", "auto")
	}
	var argv []string
	if st.Train && procs > 1 {
		argv = append([]string{"-u", "-m", "train.launch", "--nproc", strconv.Itoa(procs), "--threads", strconv.Itoa(threads), "-m", st.Module}, args...)
	} else {
		argv = append([]string{"-u", "-m", st.Module}, args...)
	}
	cmd := exec.Command(x.env.Python, argv...)
	cmd.Dir = x.job.Spec.Dir
	env := os.Environ()
	pp := x.env.root()
	if old := os.Getenv("PYTHONPATH"); old != "" {
		pp += string(os.PathListSeparator) + old
	}
	t := strconv.Itoa(threads)
	env = append(env, "PYTHONPATH="+pp, "PYTHONUNBUFFERED=1", "PARLEY_TORCH_THREADS="+t, "OMP_NUM_THREADS="+t, "MKL_NUM_THREADS="+t)
	for k, v := range x.job.Spec.Env {
		env = append(env, k+"="+v)
	}
	cmd.Env = env
	setProcessGroup(cmd)
	return cmd
}

// step runs one module to its end.
func (x *jobRun) step(ctx context.Context, st Step, procs, threads int) error {
	logs := filepath.Join(x.job.Spec.Dir, "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return fmt.Errorf("cannot write the job's logs: %w", err)
	}
	outLog, err := os.OpenFile(filepath.Join(logs, st.Name+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("cannot write the job's logs: %w", err)
	}
	defer outLog.Close()
	errPath := filepath.Join(logs, st.Name+".err")
	errLog, err := os.OpenFile(errPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("cannot write the job's logs: %w", err)
	}
	defer errLog.Close()
	cmd := x.command(st, procs, threads)
	header := fmt.Sprintf("=== %s attempt %d: %s\n", time.Now().Format(time.RFC3339), x.p.Resumed+1, strings.Join(cmd.Args, " "))
	outLog.WriteString(header)
	errLog.WriteString(header)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	tail := &tailBuffer{max: 16 << 10}
	cmd.Stderr = io.MultiWriter(errLog, tail)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", x.env.Python, err)
	}
	x.p.PID, x.p.PIDStart = cmd.Process.Pid, processStart(cmd.Process.Pid)
	x.h.lastPID = cmd.Process.Pid
	x.save(false)

	// Cancellation: SIGTERM to the whole process group (launcher and ranks), SIGKILL after
	// the grace period.
	stopped := make(chan struct{})
	var killWG sync.WaitGroup
	killWG.Add(1)
	go func() {
		defer killWG.Done()
		select {
		case <-stopped:
			return
		case <-ctx.Done():
		}
		signalGroup(cmd, false)
		select {
		case <-stopped:
		case <-time.After(x.r.opts.Grace):
			signalGroup(cmd, true)
		}
	}()

	var result json.RawMessage
	done := false
	rd := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := readLine(rd, maxLine)
		if len(line) > 0 || err == nil {
			outLog.Write(line)
			outLog.Write([]byte{'\n'})
			if ev, perr := ParseEvent(line); perr == nil {
				x.p.apply(ev)
				if ev.Event == "done" {
					done = true
				}
				switch ev.Event {
				case "train":
					x.save(true)
				default:
					x.save(false)
				}
				x.emit(Event{Kind: ev.Event})
			} else if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '{' {
				if !st.Train && json.Valid(t) {
					result = append(json.RawMessage(nil), t...)
				} else {
					x.p.BadLines++
					x.r.log.Warn("trainer printed a line that is not an event", "job", x.job.ID, "step", st.Name, "err", perr)
				}
			}
		}
		if err != nil {
			break
		}
	}
	werr := cmd.Wait()
	close(stopped)
	killWG.Wait()
	x.p.PID, x.p.PIDStart = 0, 0
	if result != nil {
		if x.p.Results == nil {
			x.p.Results = map[string]json.RawMessage{}
		}
		x.p.Results[st.Name] = result
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if werr != nil {
		return fmt.Errorf("%s failed (%v): %s (log: %s)", st.Name, exitText(werr), tail.reason(), errPath)
	}
	if st.Train && !done {
		return fmt.Errorf("%s ended without finishing (no \"done\" event): %s (log: %s)", st.Name, tail.reason(), errPath)
	}
	return nil
}

// readLine reads one line of at most max bytes; the rest of a longer line is skipped.
func readLine(rd *bufio.Reader, max int) ([]byte, error) {
	var out []byte
	for {
		frag, err := rd.ReadSlice('\n')
		if len(out) < max {
			n := min(len(frag), max-len(out))
			out = append(out, frag[:n]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(out, "\r\n"), err
	}
}

func exitText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if s := ee.ProcessState.String(); s != "" {
			return s
		}
	}
	return err.Error()
}

// tailBuffer keeps the end of a stream (the trainer's stderr) for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// reason picks the line that says why: the last "error: …" line, else the last line of a
// traceback, else the last line.
func (t *tailBuffer) reason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "error: ") || strings.HasPrefix(l, "train.launch: ") {
			return strings.TrimPrefix(l, "error: ")
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return "no message"
}
