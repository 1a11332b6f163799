// Package clone prepares a person's recordings for cloning their voice: the dataset the
// fine-tune wizard builds step by step (collect, slice, label, proofread) and every step's
// checks. A dataset is a directory:
//
//	dataset.json   what the steps decided: sources, clips, texts, rejections, edits
//	raw/           each imported recording as 16 kHz mono WAV
//	clips/         the 2–15 s clips cut from them at pauses
//
// dataset.json is replaced atomically after every change, so an interrupted step leaves
// the last good state; the audio is written before the record that names it.
package clone

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Version is the dataset.json format version.
const Version = 1

const datasetFile = "dataset.json"

var (
	// ErrNotDataset: the directory holds no (readable) dataset.json.
	ErrNotDataset = errors.New("clone: not a dataset")
	// ErrExists: creating a dataset where one already is.
	ErrExists = errors.New("clone: dataset exists")
	// ErrNoClip: a clip id that the dataset does not have.
	ErrNoClip = errors.New("clone: no such clip")
	// ErrBadName: a dataset name with characters a directory name should not have.
	ErrBadName = errors.New("clone: bad dataset name")
)

// Source is one imported recording.
type Source struct {
	ID       string    `json:"id"`       // "s0001"
	Origin   string    `json:"origin"`   // the file the user gave
	Path     string    `json:"path"`     // raw/<id>.wav, relative to the dataset
	Seconds  float64   `json:"seconds"`  // length of the raw audio
	Sliced   bool      `json:"sliced"`   // clips have been cut from it
	Imported time.Time `json:"imported"` // when
	// Text is the transcript the user gave with a recording made for a prompt.
	Text string `json:"text,omitempty"`
}

// Clip is one cut of a source, the unit that is labelled, proofread and trained on.
type Clip struct {
	ID      string  `json:"id"`     // "s0001-003"
	Source  string  `json:"source"` // Source.ID
	Path    string  `json:"path"`   // clips/<id>.wav
	Start   float64 `json:"start"`  // seconds in the source
	End     float64 `json:"end"`
	Seconds float64 `json:"seconds"`
	// Quality measured when the clip was cut.
	PeakDB   float64 `json:"peak_db"`   // dBFS
	SpeechDB float64 `json:"speech_db"` // RMS of the voiced frames, dBFS
	SNR      float64 `json:"snr_db"`    // speech level over the recording's noise floor
	Clipped  float64 `json:"clipped"`   // fraction of samples at full scale
	// Rejected says why the clip is not usable (too short, clipped, too quiet, too noisy);
	// "" for a usable clip. Set by Slice; the user cannot clear it, only drop clips.
	Rejected string `json:"rejected,omitempty"`
	// Text and Lang come from the recogniser (Label) or the user (SetText).
	Text   string `json:"text,omitempty"`
	Lang   string `json:"lang,omitempty"`
	Edited bool   `json:"edited,omitempty"` // the user wrote or confirmed Text
	// Warning is something the user should look at while proofreading (a language other than
	// the dataset's, an empty transcript, very fast or slow speech).
	Warning string `json:"warning,omitempty"`
	Dropped bool   `json:"dropped,omitempty"` // the user took it out
}

// Usable says whether the clip goes into training.
func (c *Clip) Usable() bool {
	return c.Rejected == "" && !c.Dropped && strings.TrimSpace(c.Text) != ""
}

// Dataset is a voice-clone dataset on disk. Not safe for concurrent use.
type Dataset struct {
	dir     string
	Version int       `json:"version"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Lang    string    `json:"lang,omitempty"` // the speaker's language, from the clips' majority
	Sources []Source  `json:"sources"`
	Clips   []Clip    `json:"clips"`
}

var nameRE = regexp.MustCompile(`^[\p{L}\p{N}][\p{L}\p{N} _.-]{0,63}$`)

// ValidName says whether name can name a dataset (and its directory).
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: %q (letters, digits, space, '_', '.', '-'; at most 64)", ErrBadName, name)
	}
	return nil
}

// Create makes a new, empty dataset in dir (created; must not hold a dataset).
func Create(dir, name string) (*Dataset, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, datasetFile)); err == nil {
		return nil, fmt.Errorf("%w: %s", ErrExists, dir)
	}
	for _, sub := range []string{"", "raw", "clips"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("clone: %w", err)
		}
	}
	d := &Dataset{dir: dir, Version: Version, Name: name, Created: time.Now().UTC().Truncate(time.Second)}
	return d, d.Save()
}

// Open reads the dataset in dir.
func Open(dir string) (*Dataset, error) {
	b, err := os.ReadFile(filepath.Join(dir, datasetFile))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotDataset, dir, err)
	}
	d := &Dataset{}
	if err := json.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotDataset, filepath.Join(dir, datasetFile), err)
	}
	if d.Version != Version {
		return nil, fmt.Errorf("%w: %s is format %d, this Parley reads %d", ErrNotDataset, dir, d.Version, Version)
	}
	d.dir = dir
	for _, p := range d.paths() {
		if !local(p) {
			return nil, fmt.Errorf("%w: %s names %q outside the dataset", ErrNotDataset, dir, p)
		}
	}
	return d, nil
}

// local says whether a recorded path stays inside the dataset directory.
func local(p string) bool { return p != "" && filepath.IsLocal(p) }

func (d *Dataset) paths() []string {
	var ps []string
	for _, s := range d.Sources {
		ps = append(ps, s.Path)
	}
	for _, c := range d.Clips {
		ps = append(ps, c.Path)
	}
	return ps
}

// Dir is the dataset's directory.
func (d *Dataset) Dir() string { return d.dir }

// Abs turns a dataset-relative path into one to open.
func (d *Dataset) Abs(rel string) string { return filepath.Join(d.dir, rel) }

// Save writes dataset.json atomically (temporary file, fsync, rename).
func (d *Dataset) Save() error {
	b, err := json.MarshalIndent(d, "", " ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(d.dir, datasetFile), append(b, '\n'))
}

func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("clone: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("clone: writing %s: %w", path, werr)
	}
	return nil
}

// Clip returns the clip with id.
func (d *Dataset) Clip(id string) (*Clip, error) {
	for i := range d.Clips {
		if d.Clips[i].ID == id {
			return &d.Clips[i], nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrNoClip, id)
}

// SetText sets a clip's transcript as the user wrote it and saves.
func (d *Dataset) SetText(id, text string) error {
	c, err := d.Clip(id)
	if err != nil {
		return err
	}
	c.Text, c.Edited = strings.TrimSpace(text), true
	c.Warning = ""
	return d.Save()
}

// ConfirmAll marks the text of every usable clip as checked by the person (the proofread
// step's "the rest look right") and saves once; it returns how many it marked.
func (d *Dataset) ConfirmAll() (int, error) {
	n := 0
	for i := range d.Clips {
		c := &d.Clips[i]
		if c.Usable() && !c.Edited {
			c.Edited = true
			c.Warning = ""
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	return n, d.Save()
}

// Drop takes a clip out of training (or puts it back) and saves.
func (d *Dataset) Drop(id string, dropped bool) error {
	c, err := d.Clip(id)
	if err != nil {
		return err
	}
	c.Dropped = dropped
	return d.Save()
}

// Summary is what the proofread step shows at the bottom of the table.
type Summary struct {
	Sources       int            `json:"sources"`
	Clips         int            `json:"clips"`
	Usable        int            `json:"usable"`
	UsableMinutes float64        `json:"usable_minutes"`
	Unlabelled    int            `json:"unlabelled"`
	Dropped       int            `json:"dropped"`
	Rejected      map[string]int `json:"rejected,omitempty"` // reason → count
	Warnings      int            `json:"warnings"`
	Unsliced      int            `json:"unsliced"` // sources not yet cut into clips
	// Unchecked counts usable clips whose text nobody confirmed: the recogniser's, not yet
	// corrected, confirmed ("Looks right", ConfirmAll) or read from a prompt.
	Unchecked int `json:"unchecked"`
}

// RejectedText lists the kinds of rejection with their counts, " (2 too short, 1 too noisy)",
// or "" when nothing was rejected.
func (s Summary) RejectedText() string {
	if len(s.Rejected) == 0 {
		return ""
	}
	var parts []string
	for k, v := range s.Rejected {
		parts = append(parts, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(parts)
	return " (" + strings.Join(parts, ", ") + ")"
}

// Summary counts what the dataset holds.
func (d *Dataset) Summary() Summary {
	s := Summary{Sources: len(d.Sources), Clips: len(d.Clips), Rejected: map[string]int{}}
	for _, src := range d.Sources {
		if !src.Sliced {
			s.Unsliced++
		}
	}
	for i := range d.Clips {
		c := &d.Clips[i]
		switch {
		case c.Rejected != "":
			s.Rejected[reasonKind(c.Rejected)]++
		case c.Dropped:
			s.Dropped++
		case strings.TrimSpace(c.Text) == "":
			s.Unlabelled++
		default:
			s.Usable++
			s.UsableMinutes += c.Seconds / 60
			if !c.Edited {
				s.Unchecked++
			}
		}
		if c.Warning != "" && c.Rejected == "" && !c.Dropped {
			s.Warnings++
		}
	}
	if len(s.Rejected) == 0 {
		s.Rejected = nil
	}
	return s
}

// reasonKind is the first words of a rejection ("too noisy (9 dB SNR)" → "too noisy").
func reasonKind(r string) string {
	if i := strings.Index(r, " ("); i > 0 {
		return r[:i]
	}
	return r
}

// nextSourceID is the next free "sNNNN".
func (d *Dataset) nextSourceID() string {
	n := 0
	for _, s := range d.Sources {
		var k int
		if _, err := fmt.Sscanf(s.ID, "s%d", &k); err == nil && k > n {
			n = k
		}
	}
	return fmt.Sprintf("s%04d", n+1)
}

// sortClips keeps clips in source then time order.
func (d *Dataset) sortClips() {
	sort.SliceStable(d.Clips, func(i, j int) bool {
		a, b := &d.Clips[i], &d.Clips[j]
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		return a.Start < b.Start
	})
}
