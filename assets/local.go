package assets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// LocalManifest is the file in the models directory that lists the models installed from disk
// that no registry entry describes (`parley models import DIR` of a layout Parley can run).
// It has manifest.toml's format; each file carries the size and sha256 recorded at import,
// and no download source.
const LocalManifest = "local-models.toml"

// ErrExists means a model of that name is already known.
var ErrExists = errors.New("model already exists")

// LocalModel describes a model to install from a directory: its files (slash-separated paths
// relative to the directory) and what it is.
type LocalModel struct {
	ID          string
	Kind        string
	Description string
	Files       []string
}

// InstallLocal copies a model the registry does not know from the directory src into the
// models directory under lm.ID, hashing every file, and records it in LocalManifest so that
// every command finds it by name and `parley models verify` checks it. It returns the
// installed directory.
func (m *Manager) InstallLocal(ctx context.Context, src string, lm LocalModel) (string, error) {
	if err := checkID(lm.ID); err != nil {
		return "", fmt.Errorf("model name: %w", err)
	}
	if !validKinds[lm.Kind] {
		return "", fmt.Errorf("model kind %q is not one of asr, vad, wake, tts, llm, speaker", lm.Kind)
	}
	if len(lm.Files) == 0 {
		return "", fmt.Errorf("%s: no files to install", src)
	}
	if _, err := m.reg.Lookup(lm.ID); err == nil {
		return "", fmt.Errorf("%w: %q (choose another name with --name, or `parley models rm %s` first)", ErrExists, lm.ID, lm.ID)
	}
	dir := filepath.Join(m.opts.Dir, lm.ID)
	if _, err := os.Stat(dir); err == nil {
		return "", fmt.Errorf("%w: %s is in the way (choose another name with --name)", ErrExists, dir)
	}
	model := &Model{ID: lm.ID, Kind: lm.Kind, Description: lm.Description, Dir: lm.ID, Origin: "local"}
	var err error
	err = m.withLock(ctx, model, func() error {
		st, err := m.newStaging()
		if err != nil {
			return err
		}
		defer st.cleanup()
		staged := filepath.Join(st.dir, lm.ID)
		rec := &modelRecord{Files: map[string]fileRecord{}}
		now := time.Now().UTC()
		for _, rel := range lm.Files {
			if err := checkRel(rel); err != nil {
				return fmt.Errorf("file %s: %w", rel, err)
			}
			size, sum, err := copyFileHashed(ctx, filepath.Join(src, filepath.FromSlash(rel)), filepath.Join(staged, filepath.FromSlash(rel)))
			if err != nil {
				return err
			}
			rec.set(rel, fileRecord{Size: size, SHA256: sum, Source: "import", URL: src, Time: now})
			model.Files = append(model.Files, File{Path: rel, Size: size, SHA256: sum})
			m.emit(Event{Model: lm.ID, File: rel, Phase: "installed", Done: size, Total: size})
		}
		if err := rec.save(staged); err != nil {
			return err
		}
		if err := m.addLocal(model); err != nil {
			return err
		}
		if err := os.Rename(staged, dir); err != nil {
			m.removeLocal(lm.ID)
			return fmt.Errorf("installing %s: %w", lm.ID, err)
		}
		syncDir(m.opts.Dir)
		return nil
	})
	if err != nil {
		return "", err
	}
	m.emit(Event{Model: lm.ID, Phase: "done", Message: "imported from " + src})
	return dir, nil
}

// copyFileHashed copies the file src to dst (created with its directories).
func copyFileHashed(ctx context.Context, src, dst string) (int64, string, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, "", err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, "", err
	}
	sum, n, err := copyHashed(ctx, in, dst)
	return n, sum, err
}

// localModels reads the local manifest of a models directory (none: no models).
func localModels(modelsDir string) ([]*Model, error) {
	p := filepath.Join(modelsDir, LocalManifest)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	models, err := ParseManifest(p, data)
	for _, m := range models {
		m.Origin = "local"
	}
	return models, err
}

// addLocal adds (or replaces) a model in the local manifest.
func (m *Manager) addLocal(model *Model) error {
	models, err := localModels(m.opts.Dir)
	if err != nil {
		return err
	}
	out := []*Model{model}
	for _, o := range models {
		if o.ID != model.ID {
			out = append(out, o)
		}
	}
	return writeLocal(m.opts.Dir, out)
}

// removeLocal drops a model from the local manifest; it reports whether it was there.
func (m *Manager) removeLocal(id string) (bool, error) {
	models, err := localModels(m.opts.Dir)
	if err != nil {
		return false, err
	}
	var out []*Model
	for _, o := range models {
		if o.ID != id {
			out = append(out, o)
		}
	}
	if len(out) == len(models) {
		return false, nil
	}
	return true, writeLocal(m.opts.Dir, out)
}

func writeLocal(dir string, models []*Model) error {
	mf := manifestFile{Version: 1}
	for _, m := range models {
		e := manifestModel{ID: m.ID, Kind: m.Kind, Description: m.Description}
		for _, f := range m.Files {
			e.File = append(e.File, manifestFileEnt{Path: f.Path, Size: f.Size, SHA256: f.SHA256})
		}
		mf.Model = append(mf.Model, e)
	}
	var b bytes.Buffer
	b.WriteString("# Models installed with `parley models import DIR` that no registry entry describes.\n" +
		"# Written by parley; the sizes and hashes are those recorded at import.\n")
	if err := toml.NewEncoder(&b).Encode(mf); err != nil {
		return err
	}
	p := filepath.Join(dir, LocalManifest)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// withLocal adds the local models of modelsDir to a registry's models (a local model never
// replaces a registry entry).
func withLocal(models []*Model, modelsDir string) ([]*Model, error) {
	local, err := localModels(modelsDir)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, m := range models {
		known[m.ID] = true
	}
	for _, l := range local {
		if !known[l.ID] && !strings.HasPrefix(l.ID, ".") {
			models = append(models, l)
		}
	}
	return models, nil
}
