package clone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/parley-voice/parley/audio"
)

// Limits on what the collect step takes. A voice needs minutes, not hours: bigger inputs are
// almost always a wrong folder, and they would take the other steps hours.
const (
	DefaultMaxFiles         = 2000
	DefaultMaxSourceSeconds = 3 * 3600
	minSourceSeconds        = 0.5
)

// audioExts are the file names a folder import picks up.
var audioExts = map[string]bool{".wav": true, ".mp3": true, ".flac": true, ".ogg": true, ".opus": true,
	".m4a": true, ".aac": true, ".webm": true, ".wma": true, ".aiff": true, ".aif": true}

// OpenFunc opens an audio file of any format as a source; done releases it.
type OpenFunc func(ctx context.Context, path string) (src audio.Source, done func(), err error)

// ImportOptions bound an import; zero values take the defaults.
type ImportOptions struct {
	MaxFiles         int     // files in one import (folders expanded)
	MaxSourceSeconds float64 // length of one recording
	// Progress, when set, is called before each file.
	Progress func(done, total int, file string)
}

// Problem is one input an import or a step could not use, with the reason.
type Problem struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

func (p Problem) String() string { return p.File + ": " + p.Reason }

// Import adds recordings: files, or folders (their audio files, recursively). Each becomes
// a 16 kHz mono WAV under raw/. A file that cannot be used is reported in the problems and
// the rest go on; the dataset is saved after every file, so an interrupted import keeps
// what it finished.
func (d *Dataset) Import(ctx context.Context, inputs []string, open OpenFunc, o ImportOptions) ([]Source, []Problem, error) {
	if o.MaxFiles <= 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.MaxSourceSeconds <= 0 {
		o.MaxSourceSeconds = DefaultMaxSourceSeconds
	}
	files, problems, err := expand(inputs, o.MaxFiles)
	if err != nil {
		return nil, problems, err
	}
	var added []Source
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return added, problems, err
		}
		if o.Progress != nil {
			o.Progress(i, len(files), f)
		}
		src, err := d.importFile(ctx, f, open, o.MaxSourceSeconds)
		if err != nil {
			if ctx.Err() != nil {
				return added, problems, ctx.Err()
			}
			var disk *diskError
			if errors.As(err, &disk) { // a full disk fails every file after it: stop here
				return added, problems, err
			}
			problems = append(problems, Problem{File: f, Reason: err.Error()})
			continue
		}
		added = append(added, src)
	}
	return added, problems, nil
}

// expand turns files and folders into the audio files to import.
func expand(inputs []string, maxFiles int) ([]string, []Problem, error) {
	var files []string
	var problems []Problem
	for _, in := range inputs {
		st, err := os.Stat(in)
		if err != nil {
			problems = append(problems, Problem{File: in, Reason: "cannot open: " + errText(err)})
			continue
		}
		if !st.IsDir() {
			files = append(files, in)
			continue
		}
		var found []string
		err = filepath.WalkDir(in, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				problems = append(problems, Problem{File: p, Reason: errText(err)})
				return nil
			}
			if !e.IsDir() && audioExts[strings.ToLower(filepath.Ext(p))] {
				found = append(found, p)
			}
			return nil
		})
		if err != nil {
			return nil, problems, err
		}
		if len(found) == 0 {
			problems = append(problems, Problem{File: in, Reason: "folder holds no audio files (" + extList() + ")"})
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	if len(files) > maxFiles {
		return nil, problems, fmt.Errorf("clone: %d audio files to import, at most %d at once: a voice needs 3–30 minutes of speech, so pick the recordings (or a smaller folder)", len(files), maxFiles)
	}
	return files, problems, nil
}

func extList() string {
	var es []string
	for e := range audioExts {
		es = append(es, e)
	}
	sort.Strings(es)
	return strings.Join(es, " ")
}

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// diskError is a failure to write the dataset itself (full disk, no permission).
type diskError struct{ err error }

func (e *diskError) Error() string { return "clone: cannot write the dataset: " + e.err.Error() }
func (e *diskError) Unwrap() error { return e.err }

// importFile converts one file into raw/<id>.wav and records it.
func (d *Dataset) importFile(ctx context.Context, file string, open OpenFunc, maxSeconds float64) (Source, error) {
	src, done, err := open(ctx, file)
	if err != nil {
		return Source{}, err
	}
	defer done()
	mono, err := audio.Convert(src, audio.Mono16k, audio.QualityHigh)
	if err != nil {
		return Source{}, err
	}
	id := d.nextSourceID()
	rel := filepath.Join("raw", id+".wav")
	n, err := d.writeWAVStream(ctx, rel, mono, int64(maxSeconds*float64(audio.Mono16k.SampleRate)))
	if err != nil {
		return Source{}, err
	}
	secs := float64(n) / float64(audio.Mono16k.SampleRate)
	if secs < minSourceSeconds {
		os.Remove(d.Abs(rel))
		return Source{}, fmt.Errorf("only %.2f s of audio", secs)
	}
	s := Source{ID: id, Origin: file, Path: rel, Seconds: secs, Imported: time.Now().UTC().Truncate(time.Second)}
	return s, d.addSource(s)
}

// AddRecording adds a recording made for a prompt (the guided recording step): pcm is 16 kHz
// mono, text what the person was asked to read.
func (d *Dataset) AddRecording(pcm []float32, text string) (Source, error) {
	if float64(len(pcm)) < minSourceSeconds*float64(audio.Mono16k.SampleRate) {
		return Source{}, fmt.Errorf("clone: the recording is only %.2f s", float64(len(pcm))/float64(audio.Mono16k.SampleRate))
	}
	id := d.nextSourceID()
	rel := filepath.Join("raw", id+".wav")
	if err := d.writeWAV(rel, pcm); err != nil {
		return Source{}, err
	}
	s := Source{ID: id, Origin: "recording", Path: rel, Seconds: float64(len(pcm)) / float64(audio.Mono16k.SampleRate),
		Imported: time.Now().UTC().Truncate(time.Second), Text: strings.TrimSpace(text)}
	return s, d.addSource(s)
}

func (d *Dataset) addSource(s Source) error {
	d.Sources = append(d.Sources, s)
	if err := d.Save(); err != nil {
		d.Sources = d.Sources[:len(d.Sources)-1]
		os.Remove(d.Abs(s.Path))
		return &diskError{err}
	}
	return nil
}

// Remove deletes a source, its clips and their audio.
func (d *Dataset) Remove(sourceID string) error {
	idx := -1
	for i, s := range d.Sources {
		if s.ID == sourceID {
			idx = i
		}
	}
	if idx < 0 {
		return fmt.Errorf("clone: no source %q", sourceID)
	}
	var files []string
	files = append(files, d.Sources[idx].Path)
	keep := d.Clips[:0:0]
	for _, c := range d.Clips {
		if c.Source == sourceID {
			files = append(files, c.Path)
			continue
		}
		keep = append(keep, c)
	}
	d.Sources = append(d.Sources[:idx:idx], d.Sources[idx+1:]...)
	d.Clips = keep
	if err := d.Save(); err != nil {
		return err
	}
	for _, f := range files { // after the record: a crash leaves unused files, never dangling records
		os.Remove(d.Abs(f))
	}
	return nil
}

// writeWAVStream copies src (16 kHz mono) into the dataset file rel through a temporary
// file, at most max samples (more is an error). It returns the samples written.
func (d *Dataset) writeWAVStream(ctx context.Context, rel string, src audio.Source, max int64) (int64, error) {
	path := d.Abs(rel)
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*.wav")
	if err != nil {
		return 0, &diskError{err}
	}
	tmp := f.Name()
	fail := func(err error) (int64, error) {
		f.Close()
		os.Remove(tmp)
		return 0, err
	}
	w, err := audio.NewWAVWriter(f, audio.Mono16k, audio.S16)
	if err != nil {
		return fail(err)
	}
	buf := make([]float32, 8192)
	var n int64
	for {
		k, rerr := src.Read(ctx, buf)
		if k > 0 {
			if n+int64(k) > max {
				return fail(fmt.Errorf("longer than %s: a voice needs minutes; cut the recording or import part of it", time.Duration(max/int64(audio.Mono16k.SampleRate))*time.Second))
			}
			if _, err := w.Write(ctx, buf[:k]); err != nil {
				return fail(&diskError{err})
			}
			n += int64(k)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return fail(rerr)
		}
	}
	if err := w.Close(); err != nil {
		return fail(&diskError{err})
	}
	if err := f.Sync(); err != nil {
		return fail(&diskError{err})
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return 0, &diskError{err}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return 0, &diskError{err}
	}
	return n, nil
}

// writeWAV writes pcm (16 kHz mono) as the dataset file rel.
func (d *Dataset) writeWAV(rel string, pcm []float32) error {
	_, err := d.writeWAVStream(context.Background(), rel, audio.NewBufferSource(&audio.Buffer{Format: audio.Mono16k, Data: pcm}), int64(len(pcm))+1)
	return err
}

// ReadClip reads a clip's (or source's) audio: 16 kHz mono samples.
func (d *Dataset) ReadClip(rel string) ([]float32, error) {
	b, err := audio.ReadWAVFile(d.Abs(rel))
	if err != nil {
		return nil, err
	}
	if b.Format != audio.Mono16k {
		return nil, fmt.Errorf("clone: %s is %v, want 16 kHz mono", rel, b.Format)
	}
	return b.Data, nil
}
