package assets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrNotInstalled is returned by Path for a model whose files are not all in place.
var ErrNotInstalled = errors.New("model not installed")

// Options configures a Manager. Zero values mean the defaults.
type Options struct {
	Dir      string       // models directory; default ModelsDir()
	CacheDir string       // downloads cache (npm tarballs, archives); default CacheDir()
	Client   *http.Client // default: proxies from HTTP(S)_PROXY/NO_PROXY, 30 s to connect
	// Parts is how many ranged requests run in parallel per file (default 4); MinPartSize is
	// the smallest part (default 8 MiB), so small files go in one request.
	Parts       int
	MinPartSize int64
	// Retries is how many failed attempts in a row a transfer survives (default 5); attempts
	// that moved bytes reset the count. Backoff is the first delay (default 1 s), doubling up
	// to 30 s, with jitter.
	Retries int
	Backoff time.Duration
	// StallTimeout aborts and retries a request that received nothing for this long (default 30 s).
	StallTimeout time.Duration
	// Progress receives events (from several goroutines, one at a time) — the GUI hook.
	Progress         func(Event)
	ProgressInterval time.Duration // default 250 ms
	// FreeSpace reports the free bytes of the file system holding dir (default statfs).
	FreeSpace func(dir string) (uint64, error)
	// OpenFile opens a partial download for writing (default os.OpenFile O_RDWR|O_CREATE).
	OpenFile func(name string) (WriteFile, error)
	Getenv   func(string) string // default os.Getenv (HF_ENDPOINT, MODELSCOPE_ENDPOINT, NPM_CONFIG_REGISTRY)
	Log      *slog.Logger
}

// Manager installs, checks and removes models.
type Manager struct {
	reg    *Registry
	opts   Options
	flight flight

	emitMu   sync.Mutex
	lastEmit time.Time

	benchNoHash bool // benchmarks only: skip hashing to measure its cost
}

// NewManager returns a manager for reg (DefaultRegistry when nil).
func NewManager(reg *Registry, opts Options) (*Manager, error) {
	if opts.Dir == "" {
		opts.Dir = ModelsDir()
	}
	if reg == nil {
		var err error
		if reg, err = loadRegistry(OverridePath(), opts.Dir); err != nil {
			return nil, err
		}
	}
	if opts.CacheDir == "" {
		opts.CacheDir = CacheDir()
	}
	if opts.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = http.ProxyFromEnvironment
		tr.ResponseHeaderTimeout = 60 * time.Second
		opts.Client = &http.Client{Transport: tr}
	}
	if opts.Parts <= 0 {
		opts.Parts = 4
	}
	if opts.MinPartSize <= 0 {
		opts.MinPartSize = 8 << 20
	}
	if opts.Retries <= 0 {
		opts.Retries = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = 30 * time.Second
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = 250 * time.Millisecond
	}
	if opts.FreeSpace == nil {
		opts.FreeSpace = freeSpace
	}
	if opts.OpenFile == nil {
		opts.OpenFile = openFileRW
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Manager{reg: reg, opts: opts}, nil
}

// Registry is the manager's registry.
func (m *Manager) Registry() *Registry { return m.reg }

// Dir is the models directory.
func (m *Manager) Dir() string { return m.opts.Dir }

// ModelDir is where model id lives (whether or not it is installed).
func (m *Manager) ModelDir(id string) (string, error) {
	model, err := m.reg.Lookup(id)
	if err != nil {
		return "", err
	}
	return filepath.Join(m.opts.Dir, filepath.FromSlash(model.Dir)), nil
}

func (m *Manager) emit(ev Event) {
	if m.opts.Progress == nil {
		return
	}
	m.emitMu.Lock()
	defer m.emitMu.Unlock()
	m.lastEmit = time.Now()
	m.opts.Progress(ev)
}

func (m *Manager) emitThrottled(ev Event) {
	if m.opts.Progress == nil {
		return
	}
	m.emitMu.Lock()
	due := time.Since(m.lastEmit) >= m.opts.ProgressInterval
	m.emitMu.Unlock()
	if due {
		m.emit(ev)
	}
}

// flight deduplicates concurrent work on the same key within the process.
type flight struct {
	mu    sync.Mutex
	calls map[string]*flightCall
}

type flightCall struct {
	done chan struct{}
	err  error
}

// do runs fn unless a call with the same key is running, in which case it waits for that call
// and returns its result. shared says which happened.
func (f *flight) do(ctx context.Context, key string, fn func() error) (err error, shared bool) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]*flightCall{}
	}
	if c, ok := f.calls[key]; ok {
		f.mu.Unlock()
		select {
		case <-c.done:
			return c.err, true
		case <-ctx.Done():
			return ctx.Err(), true
		}
	}
	c := &flightCall{done: make(chan struct{})}
	f.calls[key] = c
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.calls, key)
		f.mu.Unlock()
		close(c.done)
	}()
	c.err = fn()
	return c.err, false
}

// withLock runs fn holding the model's cross-process lock file (flock on
// <models>/.locks/ID.lock), waiting for another process that holds it.
func (m *Manager) withLock(ctx context.Context, model *Model, fn func() error) error {
	dir := filepath.Join(m.opts.Dir, ".locks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("models directory %s is not writable (set PARLEY_MODELS): %w", m.opts.Dir, err)
	}
	l, err := lockFile(ctx, filepath.Join(dir, model.ID+".lock"), func() {
		m.emit(Event{Model: model.ID, Phase: "waiting", Message: "another parley process is working on this model; waiting for it"})
	})
	if err != nil {
		return err
	}
	defer l.unlock()
	return fn()
}

// Pull downloads and installs every missing or damaged file of model id. Concurrent pulls of
// the same model share one download, within the process and across processes. An embedded
// model is extracted instead.
func (m *Manager) Pull(ctx context.Context, id string) error {
	model, err := m.reg.Lookup(id)
	if err != nil {
		return err
	}
	for {
		err, shared := m.flight.do(ctx, model.ID, func() error {
			return m.withLock(ctx, model, func() error { return m.pull(ctx, model) })
		})
		// A shared call cancelled (or timed out) by its own caller's context says nothing
		// about ours.
		if shared && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil {
			continue
		}
		return err
	}
}

func (m *Manager) pull(ctx context.Context, model *Model) error {
	ctx = withDeadHosts(ctx)
	dir := filepath.Join(m.opts.Dir, filepath.FromSlash(model.Dir))
	m.cleanStaging(model)
	if model.Embedded != "" {
		return m.extractEmbedded(ctx, model)
	}
	rec := loadRecord(dir)
	var failed []File
	var errs []error
	for _, f := range model.Files {
		if f.Optional && len(f.URLs) == 0 {
			continue // only an import brings it
		}
		dest := filepath.Join(dir, filepath.FromSlash(f.Path))
		if ok, err := m.fileInstalled(ctx, f, rec, dir, dest); err != nil {
			return err
		} else if ok {
			m.emit(Event{Model: model.ID, File: f.Path, Phase: "present", Done: rec.Files[f.Path].Size, Total: rec.Files[f.Path].Size})
			continue
		}
		res, err := m.fetchFile(ctx, model, f, dest)
		if err != nil && f.Optional && errors.Is(err, ErrNotFound) {
			// the source does not have it (an ONNX export with its weights inside the graph
			// has no .onnx_data): nothing is missing
			m.emit(Event{Model: model.ID, File: f.Path, Phase: "absent"})
			continue
		}
		if err != nil {
			if fatal(ctx, err) {
				return fmt.Errorf("pulling %s: %s: %w", model.ID, f.Path, err)
			}
			failed = append(failed, f)
			errs = append(errs, fmt.Errorf("%s: %w", f.Path, err))
			continue
		}
		rec.set(f.Path, fileRecord{Size: res.Size, SHA256: res.SHA256, Source: res.HashSource, URL: res.URL, Time: time.Now().UTC()})
		if err := rec.save(dir); err != nil {
			return fmt.Errorf("pulling %s: %w", model.ID, err)
		}
	}
	if len(failed) > 0 && len(model.Archives) > 0 {
		err := m.pullArchive(ctx, model)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	if err := m.offlineError(model, failed, errs); err != nil {
		return err
	}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		if unreachable(err) {
			return fmt.Errorf("pulling %s: %w\n(no network? fetch the files on another machine and run `parley models import DIR` here)", model.ID, err)
		}
		return fmt.Errorf("pulling %s: %w", model.ID, err)
	}
	m.emit(Event{Model: model.ID, Phase: "done"})
	return nil
}

// fileInstalled decides whether a file can be kept as it is: present, the right size, and
// with the sha256 the registry pins or the install record holds (so a pull repairs files that
// verify finds corrupt). A present file with no known hash is kept only when the registry
// gives its size and it matches.
func (m *Manager) fileInstalled(ctx context.Context, f File, rec *modelRecord, dir, dest string) (bool, error) {
	st, err := os.Stat(dest)
	if err != nil || !st.Mode().IsRegular() {
		return false, nil
	}
	if f.Size > 0 && st.Size() != f.Size {
		return false, nil
	}
	r, recorded := rec.Files[f.Path]
	wantSum, source := f.SHA256, "pinned"
	if wantSum == "" && recorded && r.Size == st.Size() {
		wantSum, source = r.SHA256, r.Source
	}
	if wantSum == "" {
		return f.Size > 0, nil
	}
	sum, n, err := hashFile(ctx, dest, nil)
	if err != nil {
		return false, err
	}
	if sum != wantSum {
		m.opts.Log.Warn("installed file is corrupt; fetching it again", "file", dest, "sha256", sum, "want", wantSum)
		return false, nil
	}
	if !recorded || r.SHA256 != sum || r.Size != n {
		rec.set(f.Path, fileRecord{Size: n, SHA256: sum, Source: source, Time: time.Now().UTC()})
		return true, rec.save(dir)
	}
	return true, nil
}

// fetchFile tries each source of f in turn.
func (m *Manager) fetchFile(ctx context.Context, model *Model, f File, dest string) (fetchResult, error) {
	if len(f.URLs) == 0 {
		return fetchResult{}, errors.New("no download source (import it with `parley models import`)")
	}
	var errs []error
	for _, raw := range f.URLs {
		src, err := parseSource(raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ev := Event{Model: model.ID, File: f.Path}
		var res fetchResult
		if src.Scheme == "npm" {
			res, err = m.fetchNPM(ctx, ev, model, src, dest, want{Size: f.Size, SHA256: f.SHA256})
		} else {
			res, err = m.download(ctx, ev, src.httpURL(m.opts.Getenv), dest, want{Size: f.Size, SHA256: f.SHA256})
		}
		if err == nil {
			return res, nil
		}
		log := m.opts.Log.Warn
		if unreachable(err) {
			log = m.opts.Log.Debug // the pull's error says it once, with what to do
		}
		log("source failed", "model", model.ID, "file", f.Path, "source", src.describe(m.opts.Getenv), "err", err)
		if fatal(ctx, err) {
			return res, err
		}
		errs = append(errs, err)
	}
	return fetchResult{}, errors.Join(errs...)
}

// cleanStaging removes what interrupted imports of dead processes left.
func (m *Manager) cleanStaging(*Model) {
	m.cleanDeadStaging(filepath.Join(m.opts.Dir, ".staging"))
}

// Remove deletes an installed model (its directory, partial downloads included).
func (m *Manager) Remove(ctx context.Context, id string) error {
	model, err := m.reg.Lookup(id)
	if err != nil {
		return err
	}
	return m.withLock(ctx, model, func() error {
		m.cleanStaging(model)
		dir := filepath.Join(m.opts.Dir, filepath.FromSlash(model.Dir))
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s is not installed (%s does not exist)", model.ID, dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing %s: %w", model.ID, err)
		}
		if model.Origin == "local" {
			if _, err := m.removeLocal(model.ID); err != nil {
				return fmt.Errorf("removing %s from %s: %w", model.ID, LocalManifest, err)
			}
		}
		return nil
	})
}

// Path returns the directory of an installed model, extracting an embedded model on first use.
// A model that is not installed gives an error wrapping ErrNotInstalled that says how to get it.
func (m *Manager) Path(ctx context.Context, id string) (string, error) {
	model, err := m.reg.Lookup(id)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(m.opts.Dir, filepath.FromSlash(model.Dir))
	st := m.status(model, ctx, false)
	if st.State == StateInstalled && st.Extracted {
		return dir, nil
	}
	if model.Embedded != "" {
		if len(model.Files) == 0 {
			return "", fmt.Errorf("%w: %s is not part of this build (assets/demo holds no model files)", ErrNotInstalled, model.ID)
		}
		if err := m.Pull(ctx, id); err != nil {
			return "", err
		}
		return dir, nil
	}
	var missing []string
	for _, f := range st.Files {
		if f.State != StateInstalled {
			missing = append(missing, f.Path+" ("+string(f.State)+")")
		}
	}
	sort.Strings(missing)
	return "", fmt.Errorf("%w: %s in %s lacks %s; run `parley models pull %s` (or `parley models import DIR` offline)",
		ErrNotInstalled, model.ID, dir, strings.Join(missing, ", "), model.ID)
}
