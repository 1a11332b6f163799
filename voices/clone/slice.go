package clone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/vad"
)

// Segmenter finds speech in a recording: *vad.Detector (Silero) is one.
type Segmenter interface {
	Segments(ctx context.Context, src audio.Source) ([]vad.Segment, error)
}

// SliceOptions are the clip rules; zero values take the defaults.
type SliceOptions struct {
	MinSeconds  float64 // shorter clips are rejected: 2
	MaxSeconds  float64 // pieces of speech are joined up to this: 15
	MaxGap      float64 // a pause longer than this always ends a clip: 1.0 s
	MinSpeechDB float64 // quieter speech (RMS of voiced frames, dBFS) is rejected: -40
	MinSNR      float64 // speech less than this over the noise floor is rejected: 15 dB
	MaxClipped  float64 // a larger fraction of samples at full scale is rejected: 0.001
	// Progress, when set, is called before each source.
	Progress func(done, total int, source string)
}

func (o *SliceOptions) fill() {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MinSeconds, 2)
	def(&o.MaxSeconds, 15)
	def(&o.MaxGap, 1.0)
	def(&o.MinSpeechDB, -40)
	def(&o.MinSNR, 15)
	def(&o.MaxClipped, 0.001)
}

const (
	rate       = 16000
	frameLen   = rate / 50 // 20 ms level frames
	clipPad    = rate / 10 // 100 ms kept around the speech
	floorDB    = -100.0    // digital silence
	fullScale  = 0.999
	noiseQuant = 0.2 // the noise floor is this quantile of the non-speech frames' levels
)

// Slice cuts every source not yet sliced into clips at its pauses (the segmenter's
// utterances, joined up to MaxSeconds), measures each clip (peak, speech level, SNR against
// the recording's noise floor, clipping) and records why a clip is not usable. A source with
// no speech is reported as a problem. Sources already sliced are left as they are; Reslice
// cuts one again.
func (d *Dataset) Slice(ctx context.Context, seg Segmenter, o SliceOptions) ([]Problem, error) {
	o.fill()
	var problems []Problem
	todo := 0
	for _, s := range d.Sources {
		if !s.Sliced {
			todo++
		}
	}
	done := 0
	for i := range d.Sources {
		s := &d.Sources[i]
		if s.Sliced {
			continue
		}
		if o.Progress != nil {
			o.Progress(done, todo, s.Origin)
		}
		done++
		clips, err := d.sliceSource(ctx, s, seg, o)
		if err != nil {
			if ctx.Err() != nil {
				return problems, ctx.Err()
			}
			var disk *diskError
			if errors.As(err, &disk) {
				return problems, err
			}
			problems = append(problems, Problem{File: s.Origin, Reason: err.Error()})
		}
		if len(clips) == 0 && err == nil {
			problems = append(problems, Problem{File: s.Origin, Reason: "no speech found (silence, music or noise?)"})
		}
		s.Sliced = true
		d.Clips = append(d.Clips, clips...)
		d.sortClips()
		if err := d.Save(); err != nil {
			return problems, &diskError{err}
		}
	}
	return problems, nil
}

// Reslice forgets a source's clips (texts and edits included) so the next Slice cuts it again.
func (d *Dataset) Reslice(sourceID string) error {
	for i := range d.Sources {
		if d.Sources[i].ID != sourceID {
			continue
		}
		var files []string
		d.Clips = slices.DeleteFunc(d.Clips, func(c Clip) bool {
			if c.Source == sourceID {
				files = append(files, c.Path)
				return true
			}
			return false
		})
		d.Sources[i].Sliced = false
		if err := d.Save(); err != nil {
			return err
		}
		for _, f := range files {
			os.Remove(d.Abs(f))
		}
		return nil
	}
	return fmt.Errorf("clone: no source %q", sourceID)
}

// span is a stretch of a source in samples.
type span struct{ start, end int64 }

// sliceSource reads a source twice, streaming: once through the segmenter while measuring
// 20 ms levels, once to cut the clips out.
func (d *Dataset) sliceSource(ctx context.Context, s *Source, seg Segmenter, o SliceOptions) ([]Clip, error) {
	levels := &levelSource{}
	if err := d.withSource(s, func(src audio.Source) error {
		levels.src = src
		segs, err := seg.Segments(ctx, levels)
		if err != nil {
			return err
		}
		// drain what the segmenter did not read, so the levels cover the whole recording
		buf := make([]float32, 4096)
		for {
			if _, err := levels.Read(ctx, buf); err != nil {
				break
			}
		}
		levels.segs = segs
		return nil
	}); err != nil {
		return nil, err
	}
	if len(levels.segs) == 0 {
		return nil, nil
	}
	total := levels.n
	speech := make([]span, len(levels.segs))
	for i, g := range levels.segs {
		speech[i] = span{g.Start, g.End}
	}
	noise := levels.noiseFloor(speech)
	groups := group(levels.segs, o)
	var clips []Clip
	err := d.withSource(s, func(src audio.Source) error {
		var pos int64
		buf := make([]float32, 4096)
		for gi, g := range groups {
			from, to := max(0, g.start-clipPad), min(total, g.end+clipPad)
			// skip to the clip
			for pos < from {
				n, err := src.Read(ctx, buf[:min(int64(len(buf)), from-pos)])
				pos += int64(n)
				if err != nil {
					return err
				}
			}
			pcm := make([]float32, 0, to-from)
			for pos < to {
				n, err := src.Read(ctx, buf[:min(int64(len(buf)), to-pos)])
				pcm = append(pcm, buf[:n]...)
				pos += int64(n)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return err
				}
			}
			c := Clip{
				ID: fmt.Sprintf("%s-%03d", s.ID, gi+1), Source: s.ID,
				Start: float64(from) / rate, End: float64(from+int64(len(pcm))) / rate,
				Seconds: float64(len(pcm)) / rate,
			}
			c.Path = filepath.Join("clips", c.ID+".wav")
			measure(&c, pcm, levels.speechLevel(speech, span{from, to}), noise)
			c.Rejected = reject(&c, o)
			if s.Text != "" && len(groups) == 1 {
				c.Text, c.Edited = s.Text, true // the prompt the person read
			}
			if g.forced {
				c.Warning = "cut in the middle of speech (no pause within " + fmt.Sprint(o.MaxSeconds) + " s)"
			}
			if err := d.writeWAV(c.Path, pcm); err != nil {
				return err
			}
			clips = append(clips, c)
		}
		return nil
	})
	if err != nil {
		for _, c := range clips {
			os.Remove(d.Abs(c.Path))
		}
		return nil, err
	}
	return clips, nil
}

// withSource opens a source's raw WAV for one streaming pass.
func (d *Dataset) withSource(s *Source, fn func(audio.Source) error) error {
	f, err := os.Open(d.Abs(s.Path))
	if err != nil {
		return fmt.Errorf("recording missing from the dataset: %w", err)
	}
	defer f.Close()
	r, err := audio.NewWAVReader(f)
	if err != nil {
		return err
	}
	if r.Format() != audio.Mono16k {
		return fmt.Errorf("%s is %v, want 16 kHz mono", s.Path, r.Format())
	}
	return fn(r)
}

// group joins the segmenter's utterances into clips of at most MaxSeconds, cutting at
// pauses longer than MaxGap; an utterance longer than MaxSeconds is cut into equal parts.
type clipSpan struct {
	span
	forced bool
}

func group(segs []vad.Segment, o SliceOptions) []clipSpan {
	maxLen := int64(o.MaxSeconds * rate)
	gap := int64(o.MaxGap * rate)
	var out []clipSpan
	for _, g := range segs {
		start, end := g.Start, g.End
		if end-start > maxLen { // one long run of speech: equal parts no longer than the maximum
			parts := (end - start + maxLen - 1) / maxLen
			step := (end - start) / parts
			for p := int64(0); p < parts; p++ {
				e := start + (p+1)*step
				if p == parts-1 {
					e = end
				}
				out = append(out, clipSpan{span{start + p*step, e}, true})
			}
			continue
		}
		if n := len(out); n > 0 && !out[n-1].forced && start-out[n-1].end <= gap && end-out[n-1].start <= maxLen {
			out[n-1].end = end
			continue
		}
		out = append(out, clipSpan{span{start, end}, false})
	}
	return out
}

// levelSource passes audio through while recording 20 ms RMS levels (dBFS).
type levelSource struct {
	src   audio.Source
	n     int64
	acc   float64
	k     int
	db    []float64
	segs  []vad.Segment
	eofed bool
}

func (l *levelSource) Format() audio.Format { return l.src.Format() }

func (l *levelSource) Read(ctx context.Context, p []float32) (int, error) {
	if l.eofed {
		return 0, io.EOF
	}
	n, err := l.src.Read(ctx, p)
	for _, v := range p[:n] {
		l.acc += float64(v) * float64(v)
		l.k++
		if l.k == frameLen {
			l.db = append(l.db, dbOf(l.acc/frameLen))
			l.acc, l.k = 0, 0
		}
	}
	l.n += int64(n)
	if errors.Is(err, io.EOF) {
		l.eofed = true
	}
	return n, err
}

func dbOf(meanSquare float64) float64 {
	if meanSquare <= 1e-10 {
		return floorDB
	}
	return 10 * math.Log10(meanSquare)
}

// noiseFloor is a low quantile of the levels of frames outside speech (all frames when
// speech leaves too few): the level of the room, hum and hiss.
func (l *levelSource) noiseFloor(speech []span) float64 {
	var quiet []float64
	for i, db := range l.db {
		at := int64(i * frameLen)
		if !inside(speech, at, at+frameLen) {
			quiet = append(quiet, db)
		}
	}
	if len(quiet) < 10 {
		quiet = append([]float64(nil), l.db...)
	}
	if len(quiet) == 0 {
		return floorDB
	}
	slices.Sort(quiet)
	return quiet[int(noiseQuant*float64(len(quiet)-1))]
}

// speechLevel is the power-mean level of the voiced frames (inside speech) of a stretch.
func (l *levelSource) speechLevel(speech []span, in span) float64 {
	var sum float64
	var n int
	for i, db := range l.db {
		at := int64(i * frameLen)
		if at < in.start || at+frameLen > in.end || !inside(speech, at, at+frameLen) || db <= floorDB {
			continue
		}
		sum += math.Pow(10, db/10)
		n++
	}
	if n == 0 {
		return floorDB
	}
	return dbOf(sum / float64(n))
}

func inside(spans []span, from, to int64) bool {
	for _, s := range spans {
		if from >= s.start && to <= s.end {
			return true
		}
	}
	return false
}

func measure(c *Clip, pcm []float32, speechDB, noiseDB float64) {
	var peak float64
	clipped := 0
	for _, v := range pcm {
		a := math.Abs(float64(v))
		peak = max(peak, a)
		if a >= fullScale {
			clipped++
		}
	}
	c.PeakDB = round1(dbOf(peak * peak))
	c.SpeechDB = round1(speechDB)
	c.SNR = round1(min(speechDB-noiseDB, 99))
	if len(pcm) > 0 {
		c.Clipped = float64(clipped) / float64(len(pcm))
	}
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

func reject(c *Clip, o SliceOptions) string {
	switch {
	case c.Seconds < o.MinSeconds:
		return fmt.Sprintf("too short (%.1f s, need %.0f)", c.Seconds, o.MinSeconds)
	case c.Clipped > o.MaxClipped:
		return fmt.Sprintf("clipped (%.2f%% of samples at full scale; lower the input gain)", 100*c.Clipped)
	case c.SpeechDB < o.MinSpeechDB:
		return fmt.Sprintf("too quiet (speech at %.0f dBFS; move closer or raise the gain)", c.SpeechDB)
	case c.SNR < o.MinSNR:
		return fmt.Sprintf("too noisy (%.0f dB SNR, need %.0f)", c.SNR, o.MinSNR)
	}
	return ""
}
