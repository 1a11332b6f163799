package assets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// State of a model or a file on disk.
type State string

const (
	StateInstalled   State = "installed"   // every file present and checked
	StateMissing     State = "missing"     // nothing on disk
	StatePartial     State = "partial"     // some files, or interrupted downloads (resumable)
	StateCorrupt     State = "corrupt"     // a file has the wrong size (cheap check) or hash (full check)
	StateUnavailable State = "unavailable" // an embedded model this build does not carry
)

// Check says how thoroughly a status was established.
type Check string

const (
	// CheckSize: files exist with the size the registry or the install record expects. Cheap.
	CheckSize Check = "size"
	// CheckHash: every file hashed and compared with the pinned, server-published or recorded
	// sha256. Reads every byte.
	CheckHash Check = "sha256"
)

// FileStatus is the state of one file.
type FileStatus struct {
	Path       string `json:"path"`
	State      State  `json:"state"`
	Size       int64  `json:"size"`                  // on disk (the partial's size when partial)
	WantSize   int64  `json:"want_size,omitempty"`   // 0 when unknown
	SHA256     string `json:"sha256,omitempty"`      // computed (full check only)
	WantSHA256 string `json:"want_sha256,omitempty"` // pinned, else recorded
	HashSource string `json:"hash_source,omitempty"` // "pinned", "server", "download", "import", "embedded"
	Problem    string `json:"problem,omitempty"`
}

// ModelStatus is the state of one model.
type ModelStatus struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	Description string `json:"description"`
	Licence     string `json:"licence"`
	Demo        bool   `json:"demo"`
	Embedded    bool   `json:"embedded"`
	Extracted   bool   `json:"extracted"` // an embedded model's files are on disk
	State       State  `json:"state"`
	Check       Check  `json:"check"`
	Dir         string `json:"dir"`
	Bytes       int64  `json:"bytes"` // on disk
	Total       int64  `json:"total"` // expected, 0 when any file's size is unknown
	InUse       bool   `json:"in_use"`
	// Downloadable: pull can fetch it (every file has a source, or an archive holds them, or
	// it is embedded); otherwise it is installed by import alone (the description says how).
	Downloadable bool         `json:"downloadable"`
	Files        []FileStatus `json:"files"`
}

// Problems lists the files that are not installed, with why.
func (s ModelStatus) Problems() []string {
	var out []string
	for _, f := range s.Files {
		if f.State != StateInstalled {
			msg := f.Path + ": " + string(f.State)
			if f.Problem != "" {
				msg += " (" + f.Problem + ")"
			}
			out = append(out, msg)
		}
	}
	return out
}

// Status is the cheap, size-based state of a model (CheckSize).
func (m *Manager) Status(id string) (ModelStatus, error) {
	model, err := m.reg.Lookup(id)
	if err != nil {
		return ModelStatus{}, err
	}
	return m.status(model, context.Background(), false), nil
}

// Verify is the full, hash-based state of a model (CheckHash): every file is read.
func (m *Manager) Verify(ctx context.Context, id string) (ModelStatus, error) {
	model, err := m.reg.Lookup(id)
	if err != nil {
		return ModelStatus{}, err
	}
	st := m.status(model, ctx, true)
	if err := ctx.Err(); err != nil {
		return st, err
	}
	return st, nil
}

// List returns the state of every model, cheap (CheckSize) or full (CheckHash, stops when ctx
// is cancelled); inUse marks the ids the configuration uses.
func (m *Manager) List(ctx context.Context, check Check, inUse ...string) ([]ModelStatus, error) {
	use := map[string]bool{}
	for _, id := range inUse {
		use[id] = true
	}
	var out []ModelStatus
	for _, model := range m.reg.Models() {
		st := m.status(model, ctx, check == CheckHash)
		st.InUse = use[model.ID]
		out = append(out, st)
		if err := ctx.Err(); err != nil {
			return out, err
		}
	}
	return out, nil
}

// status checks model's files by size, and with full by hash too.
func (m *Manager) status(model *Model, ctx context.Context, full bool) ModelStatus {
	dir := filepath.Join(m.opts.Dir, filepath.FromSlash(model.Dir))
	st := ModelStatus{ID: model.ID, Kind: model.Kind, Description: model.Description, Licence: model.Licence, Demo: model.Demo,
		Embedded: model.Embedded != "", Dir: dir, Check: CheckSize, Downloadable: downloadable(model)}
	if full {
		st.Check = CheckHash
	}
	if model.Embedded != "" && len(model.Files) == 0 {
		st.State = StateUnavailable
		return st
	}
	rec := loadRecord(dir)
	counts := map[State]int{}
	totalKnown := true
	n := 0
	for _, f := range model.Files {
		fs := m.fileStatus(ctx, full, model, f, rec, dir)
		if f.Optional && fs.State == StateMissing {
			continue // the model is whole without it
		}
		n++
		st.Files = append(st.Files, fs)
		counts[fs.State]++
		if fs.State != StateMissing {
			st.Bytes += fs.Size
		}
		switch {
		case f.Size > 0:
			st.Total += f.Size
		case rec.Files[f.Path].Size > 0:
			st.Total += rec.Files[f.Path].Size
		default:
			totalKnown = false
		}
	}
	if !totalKnown {
		st.Total = 0
	}
	switch {
	case counts[StateCorrupt] > 0:
		st.State = StateCorrupt
	case n == 0:
		st.State = StateMissing
	case counts[StateInstalled] == n:
		st.State = StateInstalled
	case counts[StateMissing] == n:
		st.State = StateMissing
	default:
		st.State = StatePartial
	}
	if model.Embedded != "" {
		// An embedded model is always available: its files reach the disk on first use, and a
		// copy another build of parley extracted (a different model: an upgrade) or a damaged
		// one is written again from this binary by Path.
		st.Extracted = st.State == StateInstalled
		st.State = StateInstalled
	} else {
		st.Extracted = st.State == StateInstalled
	}
	return st
}

func (m *Manager) fileStatus(ctx context.Context, full bool, model *Model, f File, rec *modelRecord, dir string) FileStatus {
	dest := filepath.Join(dir, filepath.FromSlash(f.Path))
	fs := FileStatus{Path: f.Path, WantSize: f.Size, WantSHA256: f.SHA256, HashSource: "pinned"}
	r, recorded := rec.Files[f.Path]
	if fs.WantSHA256 == "" && recorded {
		fs.WantSHA256, fs.HashSource = r.SHA256, r.Source
	}
	if fs.WantSHA256 == "" {
		fs.HashSource = ""
	}
	if model.Embedded != "" {
		fs.HashSource = "embedded"
	}
	if fs.WantSize == 0 && recorded {
		fs.WantSize = r.Size
	}
	info, err := os.Stat(dest)
	if err != nil {
		if p, perr := os.Stat(dest + ".partial"); perr == nil {
			fs.State, fs.Size, fs.Problem = StatePartial, p.Size(), "interrupted download; `parley models pull` resumes it"
			if sc := loadSidecar(dest + ".partial.json"); sc != nil {
				fs.Size = sc.done()
			}
			return fs
		}
		fs.State = StateMissing
		return fs
	}
	fs.Size = info.Size()
	if !info.Mode().IsRegular() {
		fs.State, fs.Problem = StateCorrupt, "not a regular file"
		return fs
	}
	if fs.WantSize > 0 && fs.Size != fs.WantSize {
		fs.State, fs.Problem = StateCorrupt, fmt.Sprintf("size %d, want %d", fs.Size, fs.WantSize)
		return fs
	}
	if model.Embedded != "" && (!recorded || r.SHA256 != f.SHA256) {
		// the size matches, but the copy was not written from this build's bytes
		fs.State, fs.Problem = StatePartial, "extracted by another build of parley; written again on first use"
		return fs
	}
	fs.State = StateInstalled
	if !full {
		return fs
	}
	sum, _, err := hashFile(ctx, dest, nil)
	if err != nil {
		if ctx.Err() == nil {
			fs.State, fs.Problem = StateCorrupt, err.Error()
		}
		return fs
	}
	fs.SHA256 = sum
	switch {
	case fs.WantSHA256 == "":
		fs.Problem = "no known hash to check against (size only)"
	case sum != fs.WantSHA256:
		fs.State = StateCorrupt
		fs.Problem = fmt.Sprintf("sha256 %s, want %s (%s)", sum, fs.WantSHA256, describeSource(fs.HashSource))
	}
	return fs
}

func describeSource(s string) string {
	switch s {
	case "pinned":
		return "pinned in the registry"
	case "server":
		return "published by the server, recorded at first download"
	case "download":
		return "recorded at first download"
	case "import":
		return "recorded at import"
	case "embedded":
		return "the copy embedded in parley"
	}
	return s
}

// extractEmbedded writes an embedded model's files to its directory (call holding the lock).
func (m *Manager) extractEmbedded(ctx context.Context, model *Model) error {
	if len(model.Files) == 0 {
		return fmt.Errorf("%w: %s is not part of this build", ErrNotInstalled, model.ID)
	}
	dir := filepath.Join(m.opts.Dir, filepath.FromSlash(model.Dir))
	rec := loadRecord(dir)
	for _, f := range model.Files {
		dest := filepath.Join(dir, filepath.FromSlash(f.Path))
		if st, err := os.Stat(dest); err == nil && st.Size() == f.Size {
			if r, ok := rec.Files[f.Path]; ok && r.SHA256 == f.SHA256 {
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		m.emit(Event{Model: model.ID, File: f.Path, Phase: "extract", Total: f.Size})
		src, err := m.reg.embed.open(model.Embedded, f.Path)
		if err != nil {
			return fmt.Errorf("embedded %s/%s: %w", model.ID, f.Path, err)
		}
		_, _, err = copyVerified(ctx, src, dest, f.SHA256)
		src.Close()
		if err != nil {
			return fmt.Errorf("extracting %s/%s: %w", model.ID, f.Path, err)
		}
		rec.set(f.Path, fileRecord{Size: f.Size, SHA256: f.SHA256, Source: "embedded"})
		if err := rec.save(dir); err != nil {
			return err
		}
	}
	m.emit(Event{Model: model.ID, Phase: "done"})
	return nil
}

// Status is the cheap (size-based) state of model id in the default registry and models
// directory, for `parley doctor` and the GUI.
func Status(id string) (ModelStatus, error) {
	m, err := NewManager(nil, Options{})
	if err != nil {
		return ModelStatus{}, err
	}
	return m.Status(id)
}

// List is the cheap state of every model in the default registry and models directory.
func List(inUse ...string) ([]ModelStatus, error) {
	m, err := NewManager(nil, Options{})
	if err != nil {
		return nil, err
	}
	return m.List(context.Background(), CheckSize, inUse...)
}

// Path is the directory of installed model id in the default models directory, extracting an
// embedded model on first use; engines use it to turn a model id into a directory.
func Path(ctx context.Context, id string) (string, error) {
	m, err := NewManager(nil, Options{})
	if err != nil {
		return "", err
	}
	return m.Path(ctx, id)
}

// BestInstalled picks the model of a kind to use when the configuration names none: the first
// installed non-demo model in registry order (manifest.toml lists the preferred first), else
// an available demo model.
func (m *Manager) BestInstalled(kind string) (string, bool) {
	demo := ""
	for _, model := range m.reg.models {
		if model.Kind != kind {
			continue
		}
		if m.status(model, context.Background(), false).State != StateInstalled {
			continue
		}
		if !model.Demo {
			return model.ID, true
		}
		if demo == "" {
			demo = model.ID
		}
	}
	return demo, demo != ""
}

// Resolve turns a configured model (a path to a model directory or file, a registry id, or ""
// for the best installed model of kind) into the path to load and the id to report. Every
// face (CLI, server, assistant) resolves models through it, so they pick the same one.
func (m *Manager) Resolve(ctx context.Context, kind, spec string) (path, id string, err error) {
	if spec != "" {
		if _, err := os.Stat(spec); err == nil {
			return spec, filepath.Base(filepath.Clean(spec)), nil
		}
	}
	if spec == "" {
		best, ok := m.BestInstalled(kind)
		if !ok {
			return "", "", fmt.Errorf("%w: no %s model is installed (see `parley models list`)", ErrNotInstalled, kind)
		}
		spec = best
	}
	p, err := m.Path(ctx, spec)
	if err != nil {
		return "", "", fmt.Errorf("%s model %q: %w", kind, spec, err)
	}
	return p, spec, nil
}

// downloadable reports whether pull can fetch model: it is embedded, an archive holds its
// files, or every file has a source.
func downloadable(model *Model) bool {
	if model.Embedded != "" || len(model.Archives) > 0 {
		return true
	}
	n := 0
	for _, f := range model.Files {
		if len(f.URLs) == 0 && !f.Optional {
			return false
		}
		n += len(f.URLs)
	}
	return n > 0
}
