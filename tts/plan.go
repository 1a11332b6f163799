package tts

import (
	"math"
	"strings"
	"time"

	"github.com/parley-voice/parley/tts/control"
	"github.com/parley-voice/parley/tts/textnorm"
)

// Segment is one unit of work for an engine adapter inside a sentence.
type Segment struct {
	Kind     control.Kind  // Text, Pause, Laugh, Breath, Cough, Sigh
	Text     string        // Text: normalized words
	Lang     string        // Text: language of this run
	Emphasis bool          // Text
	Laughing bool          // Text
	Rate     float64       // Text/Laugh: speed factor including the request's speed
	Pause    time.Duration // Pause: calibrated length (already scaled by speed for named strengths)
	Level    int           // Laugh intensity
	Item     control.Item  // the control item it came from
}

// MaxTotalPause bounds the pauses (explicit and named) of one request, sentence gaps aside:
// a few bytes of markup (`<break time="10s"/>`) must not make an engine render hours of
// silence into memory. Pauses past it are shortened or dropped, with a warning.
const MaxTotalPause = time.Minute

// Sentence is what engines synthesize and stream as a unit.
type Sentence struct {
	Index    int
	Text     string // spoken text of the sentence (normalized)
	Segments []Segment
}

// Plan is a request turned into sentences ready for an engine.
type Plan struct {
	Script    *control.Script
	Sentences []Sentence
}

// Prepare parses the request's controls, splits sentences, splits mixed-language text into
// runs and normalizes each run, resolving pauses through cal. Between sentences it appends a
// "sentence" pause to every sentence but the last. lang is the default language ("en" when
// empty).
func Prepare(req Request, cal control.Calibration) *Plan {
	lang := req.Language
	if lang == "" {
		lang = "en"
	}
	speed := req.Speed
	if speed <= 0 {
		speed = 1
	}
	sc := control.Parse(req.Text)
	p := &Plan{Script: sc}
	var pauses time.Duration
	pauseWarned := false
	at := 0 // where to look for the next pause's source text, for warnings
	for _, items := range sc.Sentences() {
		s := Sentence{Index: len(p.Sentences)}
		var words []string
		for _, it := range items {
			rate := it.Rate
			if rate == 0 {
				rate = 1
			}
			rate *= speed
			switch it.Kind {
			case control.Text:
				for _, run := range textnorm.Runs(it.Text, lang) {
					t := strings.TrimSpace(textnorm.Normalize(run.Text, run.Lang))
					if t == "" || !hasSpeakable(t) {
						continue
					}
					words = append(words, t)
					s.Segments = append(s.Segments, Segment{Kind: control.Text, Text: t, Lang: run.Lang,
						Emphasis: it.Emphasis, Laughing: it.Laughing, Rate: rate, Item: it})
				}
			case control.Pause:
				d := cal.Duration(it)
				if it.Strength != "" {
					d = time.Duration(float64(d) / speed)
				}
				if i := strings.Index(req.Text[at:], it.Source); i >= 0 && it.Source != "" {
					at += i
				}
				if d > MaxTotalPause-pauses {
					d = MaxTotalPause - pauses
					if !pauseWarned {
						pauseWarned = true
						sc.Warnings = append(sc.Warnings, control.Warning{Offset: at, Token: it.Source,
							Reason: "pauses add up to more than " + MaxTotalPause.String() + "; the rest are shortened or dropped"})
					}
				}
				pauses += d
				if d > 0 {
					s.Segments = append(s.Segments, Segment{Kind: control.Pause, Pause: d, Item: it})
				}
			case control.SpeedChange:
				// carried on the text items' Rate
			default:
				s.Segments = append(s.Segments, Segment{Kind: it.Kind, Level: it.Level, Rate: rate, Item: it})
			}
		}
		if len(s.Segments) == 0 {
			continue
		}
		s.Text = strings.Join(words, " ")
		p.Sentences = append(p.Sentences, s)
	}
	gap := time.Duration(float64(cal.Strengths[control.Sentence]) / speed)
	for i := 0; i+1 < len(p.Sentences); i++ {
		p.Sentences[i].Segments = append(p.Sentences[i].Segments, Segment{Kind: control.Pause, Pause: gap,
			Item: control.Item{Kind: control.Pause, Strength: control.Sentence}})
	}
	return p
}

func hasSpeakable(s string) bool {
	for _, r := range s {
		if r > 127 || (r >= '0' && r <= '9') || (r|0x20 >= 'a' && r|0x20 <= 'z') {
			if !strings.ContainsRune("。，、！？：；（）《》“”…—", r) {
				return true
			}
		}
	}
	return false
}

// Silence returns n samples of silence for d at rate.
func Silence(d time.Duration, rate int) []float32 {
	n := int(d.Seconds()*float64(rate) + 0.5)
	if n < 0 {
		n = 0
	}
	return make([]float32, n)
}

// frameRMS is the RMS level in dBFS of a 10 ms frame starting at i.
func frameDB(x []float32, i, n int) float64 {
	if i+n > len(x) {
		n = len(x) - i
	}
	if n <= 0 {
		return -200
	}
	var e float64
	for _, v := range x[i : i+n] {
		e += float64(v) * float64(v)
	}
	e /= float64(n)
	if e <= 0 {
		return -200
	}
	return 10 * math.Log10(e)
}

// Trim cuts leading and trailing silence (10 ms frames below thresholdDB dBFS), keeping margin
// around the speech. All-silent input returns an empty slice.
func Trim(x []float32, rate int, thresholdDB float64, margin time.Duration) []float32 {
	fl := rate / 100
	if fl <= 0 || len(x) == 0 {
		return x
	}
	first, last := -1, -1
	for i := 0; i < len(x); i += fl {
		if frameDB(x, i, fl) > thresholdDB {
			if first < 0 {
				first = i
			}
			last = i + fl
		}
	}
	if first < 0 {
		return x[:0]
	}
	m := int(margin.Seconds() * float64(rate))
	first = max(0, first-m)
	last = min(len(x), last+m)
	return x[first:last]
}

// Gap is a stretch of silence found in audio.
type Gap struct {
	Start, End time.Duration
}

// Len is the gap's duration.
func (g Gap) Len() time.Duration { return g.End - g.Start }

// Silences finds internal silences (10 ms frames below thresholdDB dBFS) of at least minLen,
// ignoring leading and trailing silence. It is how tests and benchmarks measure pauses in the
// audio itself.
func Silences(x []float32, rate int, thresholdDB float64, minLen time.Duration) []Gap {
	fl := rate / 100
	if fl <= 0 {
		return nil
	}
	var gaps []Gap
	start := -1
	seenSpeech := false
	for i := 0; i < len(x); i += fl {
		quiet := frameDB(x, i, fl) <= thresholdDB
		switch {
		case quiet && start < 0 && seenSpeech:
			start = i
		case !quiet:
			if start >= 0 {
				g := Gap{Start: dur(start, rate), End: dur(i, rate)}
				if g.Len() >= minLen {
					gaps = append(gaps, g)
				}
				start = -1
			}
			seenSpeech = true
		}
	}
	return gaps
}

func dur(samples, rate int) time.Duration {
	return time.Duration(int64(samples) * int64(time.Second) / int64(rate))
}
