package voices

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/parley-voice/parley/assets"
)

// DefaultDir is <data dir>/voices.
func DefaultDir() string { return filepath.Join(assets.DataDir(), "voices") }

// Library is a directory of voice files, one <name>.json each.
type Library struct {
	dir string
}

// Open opens (creating if needed) a library directory.
func Open(dir string) (*Library, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("voices: %w", err)
	}
	return &Library{dir: dir}, nil
}

// Dir is the library's directory.
func (l *Library) Dir() string { return l.dir }

func (l *Library) path(name string) (string, error) {
	if err := ValidName(name); err != nil {
		return "", err
	}
	return filepath.Join(l.dir, name+".json"), nil
}

// Get loads a voice by name.
func (l *Library) Get(name string) (*Voice, error) {
	p, err := l.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("voices: %w", err)
	}
	defer f.Close()
	v, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if v.Name != name {
		return nil, fmt.Errorf("%w: %s names itself %q", ErrInvalid, p, v.Name)
	}
	return v, nil
}

// List loads every voice; files that fail to parse are returned as errors alongside the good
// voices (one bad file never hides the rest).
func (l *Library) List() ([]*Voice, []error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, []error{fmt.Errorf("voices: %w", err)}
	}
	var vs []*Voice
	var errs []error
	for _, e := range ents {
		n, ok := strings.CutSuffix(e.Name(), ".json")
		if e.IsDir() || !ok || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		v, err := l.Get(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].Name < vs[j].Name })
	return vs, errs
}

// Save writes a voice atomically (temporary file + rename). It refuses to replace an existing
// voice unless overwrite is set.
func (l *Library) Save(v *Voice, overwrite bool) error {
	b, err := v.Marshal()
	if err != nil {
		return err
	}
	p, err := l.path(v.Name)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); err == nil && !overwrite {
		return fmt.Errorf("%w: %s", ErrExists, v.Name)
	}
	tmp, err := os.CreateTemp(l.dir, ".voice-*.partial")
	if err != nil {
		return fmt.Errorf("voices: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("voices: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("voices: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("voices: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("voices: %w", err)
	}
	return nil
}

// Remove deletes a voice.
func (l *Library) Remove(name string) error {
	p, err := l.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	} else if err != nil {
		return fmt.Errorf("voices: %w", err)
	}
	return nil
}

// Export writes a voice file to w.
func (l *Library) Export(name string, w io.Writer) error {
	v, err := l.Get(name)
	if err != nil {
		return err
	}
	b, err := v.Marshal()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Import reads a voice file (validated like any other) and saves it, under rename when given.
func (l *Library) Import(r io.Reader, rename string, overwrite bool) (*Voice, error) {
	v, err := Parse(r)
	if err != nil {
		return nil, err
	}
	if rename != "" {
		if err := ValidName(rename); err != nil {
			return nil, err
		}
		v.Name = rename
	}
	return v, l.Save(v, overwrite)
}

// MixOf builds a mix voice from library voices and/or engine presets: a part naming a library
// preset voice contributes its preset; a part naming a library mix is flattened; for ChatTTS a
// library seed voice contributes "seed:N" (the engine interpolates the speaker vectors);
// anything else is taken as an engine preset name.
func (l *Library) MixOf(name, engine string, parts []Part) (*Voice, error) {
	var flat []Part
	for _, p := range parts {
		if ValidName(p.Voice) == nil {
			if v, err := l.Get(p.Voice); err == nil {
				if v.Engine != engine {
					return nil, fmt.Errorf("%w: %s is a %s voice, the mix is for %s", ErrInvalid, v.Name, v.Engine, engine)
				}
				switch {
				case v.Kind == KindPreset:
					flat = append(flat, Part{Voice: v.Preset, Weight: p.Weight})
					continue
				case v.Kind == KindSeed && engine == "chattts":
					// ChatTTS mixes interpolate speaker vectors; the engine knows a seed's as "seed:N"
					flat = append(flat, Part{Voice: "seed:" + strconv.FormatInt(*v.Seed, 10), Weight: p.Weight})
					continue
				case v.Kind == KindMix:
					var sum float64
					for _, q := range v.Mix {
						sum += q.Weight
					}
					for _, q := range v.Mix {
						flat = append(flat, Part{Voice: q.Voice, Weight: p.Weight * q.Weight / sum})
					}
					continue
				default:
					return nil, fmt.Errorf("%w: %s is a %s voice; mixes take presets and mixes", ErrInvalid, v.Name, v.Kind)
				}
			}
		}
		flat = append(flat, p)
	}
	v := New(name, engine, KindMix)
	v.Mix = flat
	return v, v.Validate()
}

// Bytes is a helper for tests and the CLI: the marshalled voice.
func Bytes(v *Voice) []byte {
	b, err := v.Marshal()
	if err != nil {
		return nil
	}
	return bytes.Clone(b)
}
