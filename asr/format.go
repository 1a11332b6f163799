package asr

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/parley-voice/parley/lang"
)

// Cue is one subtitle: a span of time and its text.
type Cue struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Text  string  `json:"text"`
}

// Cue limits: a subtitle shows at most this long and this many characters, and a pause
// this long between two words always starts a new one.
const (
	cueMaxSeconds = 6.0
	cueMaxChars   = 84
	cueMaxGap     = 1.0
)

// Cues groups the words into subtitles, never across segments.
func (r *Result) Cues() []Cue {
	var cues []Cue
	var cur *Cue
	lastEnd := 0.0
	segOf := func(t float64) int {
		for i, s := range r.Segments {
			if t >= s.Start && t <= s.End {
				return i
			}
		}
		return -1
	}
	curSeg := -2
	for _, w := range r.Words() {
		seg := segOf(w.Start)
		if cur != nil && (seg != curSeg || w.End-cur.Start > cueMaxSeconds ||
			utf8.RuneCountInString(cur.Text)+1+utf8.RuneCountInString(w.Word) > cueMaxChars || w.Start-lastEnd > cueMaxGap) {
			cues = append(cues, *cur)
			cur = nil
		}
		if cur == nil {
			cur = &Cue{Start: w.Start, End: w.End, Text: w.Word}
			curSeg = seg
		} else {
			if needSpace(cur.Text, w.Word) {
				cur.Text += " "
			}
			cur.Text += w.Word
			cur.End = w.End
		}
		lastEnd = w.End
	}
	if cur != nil {
		cues = append(cues, *cur)
	}
	return cues
}

// WriteSRT writes cues as SubRip.
func WriteSRT(w io.Writer, cues []Cue) error {
	bw := bufio.NewWriter(w)
	for i, c := range cues {
		fmt.Fprintf(bw, "%d\n%s --> %s\n%s\n\n", i+1, stamp(c.Start, ','), stamp(c.End, ','), oneLine(c.Text))
	}
	return bw.Flush()
}

// WriteVTT writes cues as WebVTT.
func WriteVTT(w io.Writer, cues []Cue) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("WEBVTT\n\n")
	for _, c := range cues {
		fmt.Fprintf(bw, "%s --> %s\n%s\n\n", stamp(c.Start, '.'), stamp(c.End, '.'), oneLine(strings.ReplaceAll(c.Text, "-->", "->")))
	}
	return bw.Flush()
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	return strings.ReplaceAll(s, "\n", " ")
}

// stamp formats seconds as HH:MM:SS,mmm (sep ',') or HH:MM:SS.mmm (sep '.').
func stamp(sec float64, sep byte) string {
	if math.IsNaN(sec) || sec < 0 {
		sec = 0
	}
	ms := int64(math.Round(sec * 1000))
	return fmt.Sprintf("%02d:%02d:%02d%c%03d", ms/3600000, ms/60000%60, ms/1000%60, sep, ms%1000)
}

// LanguageName is the name OpenAI's verbose_json uses for a SenseVoice language tag ("en" →
// "english": lang.Name in lowercase); other tags are returned as they are.
func LanguageName(tag string) string {
	if lang.Known(tag) {
		return strings.ToLower(lang.Name(tag))
	}
	return tag
}

// Verbose is OpenAI's verbose_json transcription shape, with SenseVoice's tags added
// (lang, emotion, event at the top and per segment).
type Verbose struct {
	Task     string           `json:"task"`
	Language string           `json:"language"`
	Duration float64          `json:"duration"`
	Text     string           `json:"text"`
	Lang     string           `json:"lang,omitempty"`
	Emotion  string           `json:"emotion,omitempty"`
	Event    string           `json:"event,omitempty"`
	Segments []VerboseSegment `json:"segments"`
	Words    []Word           `json:"words"`
}

// VerboseSegment is one segment of Verbose.
type VerboseSegment struct {
	ID      int     `json:"id"`
	Seek    int     `json:"seek"`
	Start   float64 `json:"start"`
	End     float64 `json:"end"`
	Text    string  `json:"text"`
	Tokens  []int   `json:"tokens"`
	Lang    string  `json:"lang,omitempty"`
	Emotion string  `json:"emotion,omitempty"`
	Event   string  `json:"event,omitempty"`
}

// Verbose returns r in OpenAI's verbose_json shape.
func (r *Result) Verbose() Verbose {
	v := Verbose{Task: "transcribe", Language: LanguageName(r.Lang), Duration: r.Duration, Text: r.Text,
		Lang: r.Lang, Emotion: r.Emotion, Event: r.Event, Segments: []VerboseSegment{}, Words: r.Words()}
	if v.Words == nil {
		v.Words = []Word{}
	}
	for i, s := range r.Segments {
		ids := s.TokenIDs
		if len(ids) > 4 {
			ids = ids[4:]
		} else {
			ids = []int{}
		}
		v.Segments = append(v.Segments, VerboseSegment{ID: i, Seek: int(s.Start * 100), Start: s.Start, End: s.End,
			Text: s.Text, Tokens: ids, Lang: s.Lang, Emotion: s.Emotion, Event: s.Event})
	}
	return v
}
