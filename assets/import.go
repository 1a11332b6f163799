package assets

import (
	"archive/tar"
	"archive/zip"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrNothingToImport is returned when a source holds no complete known model.
var ErrNothingToImport = errors.New("no complete model found")

// archiveFormat is "tar.gz", "tar.bz2", "tar", "zip" or "" from a file name or URL.
func archiveFormat(name string) string {
	n := strings.ToLower(name)
	if i := strings.IndexAny(n, "?#"); i >= 0 {
		n = n[:i]
	}
	switch {
	case strings.HasSuffix(n, ".tar.gz"), strings.HasSuffix(n, ".tgz"):
		return "tar.gz"
	case strings.HasSuffix(n, ".tar.bz2"), strings.HasSuffix(n, ".tbz2"), strings.HasSuffix(n, ".tbz"):
		return "tar.bz2"
	case strings.HasSuffix(n, ".tar"):
		return "tar"
	case strings.HasSuffix(n, ".zip"):
		return "zip"
	}
	return ""
}

// hashWriter hashes what it writes through.
type hashWriter struct {
	w io.Writer
	h hash.Hash
}

func newHashWriter(w io.Writer) *hashWriter { return &hashWriter{w: w, h: sha256.New()} }

func (h *hashWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	h.h.Write(p[:n])
	return n, err
}

func (h *hashWriter) sum() string { return hex.EncodeToString(h.h.Sum(nil)) }

// staging collects verified files for models before they are moved into place. It lives under
// <models>/.staging/import.PID.N so the final renames stay on one file system, and a crashed
// import's leftovers are recognised (dead PID) and removed.
type staging struct {
	dir   string
	files map[string]map[string]stagedFile // model id → file path → staged
}

type stagedFile struct {
	path   string // on disk, in the staging dir
	size   int64
	sha256 string
	member string // where it came from in the source
}

func (m *Manager) newStaging() (*staging, error) {
	root := filepath.Join(m.opts.Dir, ".staging")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("models directory %s is not writable: %w", m.opts.Dir, err)
	}
	m.cleanDeadStaging(root)
	dir, err := os.MkdirTemp(root, "import."+strconv.Itoa(os.Getpid())+".")
	if err != nil {
		return nil, err
	}
	return &staging{dir: dir, files: map[string]map[string]stagedFile{}}, nil
}

func (s *staging) cleanup() { os.RemoveAll(s.dir) }

// cleanDeadStaging removes staging directories of processes that no longer run.
func (m *Manager) cleanDeadStaging(root string) {
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		parts := strings.Split(e.Name(), ".")
		if len(parts) < 3 || parts[0] != "import" {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || !processAlive(pid) {
			os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// matcher maps member paths of a source to the model files they provide.
type matcher struct {
	models []*Model
}

type target struct {
	model *Model
	file  File
}

// match finds the files that a member path provides: the member is the file's path, or ends
// with "/" + the file's path (archives usually have a top directory).
func (mt matcher) match(member string) []target {
	member = strings.TrimPrefix(path.Clean("/"+member), "/")
	var out []target
	for _, mod := range mt.models {
		for _, f := range mod.Files {
			if member == f.Path || strings.HasSuffix(member, "/"+f.Path) {
				out = append(out, target{mod, f})
			}
		}
	}
	return out
}

// stageFrom reads src (a directory or archive) and stages every file of the candidate models it
// finds, checking sizes and pinned hashes.
func (m *Manager) stageFrom(ctx context.Context, src string, models []*Model, st *staging) error {
	mt := matcher{models: models}
	add := func(member string, size int64, r io.Reader) error {
		targets := mt.match(member)
		var pending []target
		for _, t := range targets {
			if _, dup := st.files[t.model.ID][t.file.Path]; !dup {
				pending = append(pending, t)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if free, err := m.opts.FreeSpace(st.dir); err == nil && size >= 0 && free < uint64(size) {
			return fmt.Errorf("%w to import %s: it needs %s, %s has %s free", ErrNoSpace, member, humanBytes(size), m.opts.Dir, humanBytes(int64(free)))
		}
		first := pending[0]
		dest := filepath.Join(st.dir, first.model.ID, filepath.FromSlash(first.file.Path))
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return err
		}
		m.emit(Event{Model: first.model.ID, File: first.file.Path, Phase: "extract", Total: size})
		sum, n, err := copyHashed(ctx, r, dest)
		if err != nil {
			return fmt.Errorf("importing %s: %w", member, err)
		}
		for i, t := range pending {
			p := dest
			if i > 0 { // the same bytes serve another model (e.g. a shared tokens.txt)
				p = filepath.Join(st.dir, t.model.ID, filepath.FromSlash(t.file.Path))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return err
				}
				if err := linkOrCopy(dest, p); err != nil {
					return err
				}
			}
			if st.files[t.model.ID] == nil {
				st.files[t.model.ID] = map[string]stagedFile{}
			}
			st.files[t.model.ID][t.file.Path] = stagedFile{path: p, size: n, sha256: sum, member: member}
		}
		return nil
	}
	info, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("import source: %w", err)
	}
	if info.IsDir() {
		return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			rel, _ := filepath.Rel(src, p)
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			st, _ := f.Stat()
			return add(filepath.ToSlash(rel), st.Size(), f)
		})
	}
	switch archiveFormat(src) {
	case "zip":
		zr, err := zip.OpenReader(src)
		if err != nil {
			return fmt.Errorf("%s is not a readable zip archive: %w", src, err)
		}
		defer zr.Close()
		for _, zf := range zr.File {
			if !zf.Mode().IsRegular() {
				continue
			}
			if len(mt.match(zf.Name)) == 0 {
				continue
			}
			r, err := zf.Open()
			if err != nil {
				return fmt.Errorf("%s: %s: %w", src, zf.Name, err)
			}
			err = add(zf.Name, int64(zf.UncompressedSize64), r)
			r.Close()
			if err != nil {
				return fmt.Errorf("%s: %s: %w", src, zf.Name, err)
			}
		}
		return nil
	case "tar.gz", "tar.bz2", "tar":
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		var r io.Reader = f
		switch archiveFormat(src) {
		case "tar.gz":
			gz, err := gzip.NewReader(f)
			if err != nil {
				return fmt.Errorf("%s is not a gzip file: %w", src, err)
			}
			r = gz
		case "tar.bz2":
			r = bzip2.NewReader(f)
		}
		tr := tar.NewReader(ctxReader{ctx, r})
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("%s is damaged or not a tar archive: %w", src, err)
			}
			if hdr.Typeflag != tar.TypeReg {
				continue
			}
			if err := add(hdr.Name, hdr.Size, tr); err != nil {
				return fmt.Errorf("%s: %w", src, err)
			}
		}
	}
	return fmt.Errorf("%s: not a directory or a .tar.gz, .tgz, .tar.bz2, .tar or .zip archive", src)
}

func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// checkStaged reports what model lacks or has wrong in the staging.
func checkStaged(model *Model, files map[string]stagedFile) (missing []string, bad []error) {
	for _, f := range model.Files {
		s, ok := files[f.Path]
		if !ok {
			if !f.Optional {
				missing = append(missing, f.Path)
			}
			continue
		}
		if f.Size > 0 && s.size != f.Size {
			bad = append(bad, fmt.Errorf("%w: %s (from %s) is %d bytes, want %d", ErrWrongSize, f.Path, s.member, s.size, f.Size))
		}
		if f.SHA256 != "" && s.sha256 != f.SHA256 {
			bad = append(bad, fmt.Errorf("%w: %s (from %s) has sha256 %s, want %s (pinned in the registry)", ErrChecksum, f.Path, s.member, s.sha256, f.SHA256))
		}
	}
	return missing, bad
}

// installStaged moves a model's staged files into its directory (call holding the model lock).
// When the directory does not exist yet the whole staged directory is renamed at once.
func (m *Manager) installStaged(model *Model, st *staging, source, origin string) error {
	files := st.files[model.ID]
	dir := filepath.Join(m.opts.Dir, filepath.FromSlash(model.Dir))
	srcDir := filepath.Join(st.dir, model.ID)
	rec := loadRecord(dir)
	now := time.Now().UTC()
	for _, f := range model.Files {
		s, ok := files[f.Path]
		if !ok { // an optional file the source lacks
			continue
		}
		hs := source
		if f.SHA256 != "" {
			hs = "pinned"
		}
		rec.set(f.Path, fileRecord{Size: s.size, SHA256: s.sha256, Source: hs, URL: origin, Time: now})
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := rec.save(srcDir); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		if err := os.Rename(srcDir, dir); err != nil {
			return fmt.Errorf("installing %s: %w", model.ID, err)
		}
		syncDir(filepath.Dir(dir))
		return nil
	}
	for _, f := range model.Files {
		if _, ok := files[f.Path]; !ok {
			continue
		}
		dest := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			return err
		}
		if err := os.Rename(files[f.Path].path, dest); err != nil {
			return fmt.Errorf("installing %s/%s: %w", model.ID, f.Path, err)
		}
		m.discardPartial(dest)
	}
	syncDir(dir)
	return rec.save(dir)
}

// Import installs models from a local directory or archive (.tar.gz, .tgz, .tar.bz2, .tar,
// .zip) for machines without network: the files are found by their registry paths (under any
// top directory), checked against the registry's sizes and pinned hashes, staged, and moved into
// place only when a model is complete. With ids, only those models are imported (and each must
// be complete); without, every complete model found is. It returns the ids installed.
func (m *Manager) Import(ctx context.Context, src string, ids ...string) ([]string, error) {
	var models []*Model
	if len(ids) > 0 {
		for _, id := range ids {
			model, err := m.reg.Lookup(id)
			if err != nil {
				return nil, err
			}
			if model.Embedded != "" {
				return nil, fmt.Errorf("%s is embedded in parley; it needs no import", model.ID)
			}
			models = append(models, model)
		}
	} else {
		for _, model := range m.reg.Models() {
			if model.Embedded == "" {
				models = append(models, model)
			}
		}
	}
	st, err := m.newStaging()
	if err != nil {
		return nil, err
	}
	defer st.cleanup()
	if err := m.stageFrom(ctx, src, models, st); err != nil {
		return nil, err
	}
	var installed []string
	var errs []error
	type near struct {
		id      string
		have    int
		missing []string
	}
	var best near
	for _, model := range models {
		missing, bad := checkStaged(model, st.files[model.ID])
		if len(bad) > 0 {
			errs = append(errs, fmt.Errorf("%s: %w", model.ID, errors.Join(bad...)))
			continue
		}
		if len(missing) > 0 {
			have := len(model.Files) - len(missing)
			if len(ids) > 0 {
				errs = append(errs, fmt.Errorf("%w: %s in %s lacks %s", ErrNothingToImport, model.ID, src, strings.Join(missing, ", ")))
			} else if have > best.have {
				best = near{model.ID, have, missing}
			}
			continue
		}
		err := m.withLock(ctx, model, func() error { return m.installStaged(model, st, "import", src) })
		if err != nil {
			return installed, err
		}
		m.emit(Event{Model: model.ID, Phase: "done", Message: "imported from " + src})
		installed = append(installed, model.ID)
	}
	sort.Strings(installed)
	if len(errs) > 0 {
		return installed, errors.Join(errs...)
	}
	if len(installed) == 0 {
		if best.id != "" {
			if len(best.missing) > 5 {
				best.missing = append(best.missing[:5], fmt.Sprintf("and %d more", len(best.missing)-5))
			}
			return nil, fmt.Errorf("%w in %s: the closest is %s, which lacks %s", ErrNothingToImport, src, best.id, strings.Join(best.missing, ", "))
		}
		return nil, fmt.Errorf("%w in %s: none of its files is one the registry knows", ErrNothingToImport, src)
	}
	return installed, nil
}

// pullArchive installs model from one of its archives (call holding the model lock).
func (m *Manager) pullArchive(ctx context.Context, model *Model) error {
	var errs []error
	for _, a := range model.Archives {
		for _, raw := range a.URLs {
			src, err := parseSource(raw)
			if err != nil || src.Scheme == "npm" {
				continue
			}
			url := src.httpURL(m.opts.Getenv)
			name := path.Base(strings.SplitN(url, "?", 2)[0])
			local := filepath.Join(m.opts.CacheDir, "archives", name)
			if _, err := os.Stat(local); err != nil {
				if _, err := m.download(ctx, Event{Model: model.ID, File: name}, url, local, want{Size: a.Size, SHA256: a.SHA256}); err != nil {
					if fatal(ctx, err) {
						return err
					}
					errs = append(errs, fmt.Errorf("archive: %w", err))
					continue
				}
			}
			st, err := m.newStaging()
			if err != nil {
				return err
			}
			err = m.stageFrom(ctx, local, []*Model{model}, st)
			if err == nil {
				missing, bad := checkStaged(model, st.files[model.ID])
				switch {
				case len(bad) > 0:
					err = errors.Join(bad...)
				case len(missing) > 0:
					err = fmt.Errorf("%w: %s lacks %s", ErrNothingToImport, name, strings.Join(missing, ", "))
				default:
					err = m.installStaged(model, st, "download", url)
				}
			}
			st.cleanup()
			if err == nil {
				m.emit(Event{Model: model.ID, Phase: "done"})
				return nil
			}
			if fatal(ctx, err) {
				return err
			}
			os.Remove(local) // a bad archive must not stick in the cache
			errs = append(errs, fmt.Errorf("archive %s: %w", url, err))
		}
	}
	return errors.Join(errs...)
}
