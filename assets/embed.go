package assets

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
)

// demoFS holds Parley's own demo models. The pattern embeds the whole directory, which always
// holds at least its README, so the build never depends on a model having landed there.
//
//go:embed demo
var demoFS embed.FS

// embedSource is where embedded models come from (an fs.FS so tests can supply their own).
type embedSource struct{ fsys fs.FS }

func builtinEmbed() embedSource { return embedSource{fsys: demoFS} }

// skipEmbedded reports files in an embedded model directory that are documentation, not model.
func skipEmbedded(name string) bool {
	base := path.Base(name)
	return strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_") ||
		strings.EqualFold(path.Ext(base), ".md") || base == "Makefile"
}

// files lists the model files under dir, with sizes and sha256 computed from the embedded bytes.
func (e embedSource) files(dir string) ([]File, error) {
	if e.fsys == nil {
		return nil, errors.New("no embedded files")
	}
	if st, err := fs.Stat(e.fsys, dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil // not in this build: the model is listed as unavailable
	} else if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%q among the embedded files is not a directory", dir)
	}
	var out []File
	err := fs.WalkDir(e.fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || skipEmbedded(p) {
			return nil
		}
		f, err := e.fsys.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return err
		}
		out = append(out, File{Path: strings.TrimPrefix(p, dir+"/"), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
		return nil
	})
	return out, err
}

func (e embedSource) open(dir, rel string) (fs.File, error) { return e.fsys.Open(dir + "/" + rel) }
