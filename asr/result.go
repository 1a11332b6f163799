package asr

import (
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// FrameSeconds is the time between two LFR frames (10 ms × LFR shift 6).
const FrameSeconds = 0.06

// Result is what recognition gives for one input.
type Result struct {
	// Text is the transcript: the pieces after the four tags joined, a leading "▁" becoming
	// a space, surrounding spaces trimmed, stray tags left out.
	Text string `json:"text"`
	// Lang, Emotion and Event are the tags without their brackets, e.g. "en", "HAPPY",
	// "Laughter"; empty when the model gave none.
	Lang    string `json:"lang,omitempty"`
	Emotion string `json:"emotion,omitempty"`
	Event   string `json:"event,omitempty"`
	// Tokens are the text pieces (tags excluded), in their text form (" hello", "lo").
	Tokens []string `json:"tokens"`
	// TokenIDs are the ids of all decoded tokens, tags included.
	TokenIDs []int `json:"token_ids,omitempty"`
	// Timestamps holds, for each of Tokens, its start in seconds from the start of the audio.
	Timestamps []float64 `json:"timestamps"`
	// Duration is the length of the audio in seconds.
	Duration float64 `json:"duration"`
	// Segments are the pieces long audio was cut into (absolute times); one segment for
	// audio that fit in one call.
	Segments []Segment `json:"segments,omitempty"`
	// Timings are where the call's time went (for a TranscribeBatch call: the whole batch).
	Timings Timings `json:"-"`
}

// Timings break a recognition call down by stage.
type Timings struct {
	Wait     time.Duration // waiting for a free worker slot
	Features time.Duration // fbank, LFR and CMVN
	Model    time.Duration // the ONNX Runtime runs
	Decode   time.Duration // CTC search, tags, text
	Calls    int           // model calls
}

func (t *Timings) add(o Timings) {
	t.Wait += o.Wait
	t.Features += o.Features
	t.Model += o.Model
	t.Decode += o.Decode
	t.Calls += o.Calls
}

// Segment is one model call's share of a Result.
type Segment struct {
	// Start and End bound the audio the model heard: a piece less the quiet trimmed from
	// its ends (soundSpan), in seconds from the start of the input.
	Start      float64   `json:"start"`
	End        float64   `json:"end"`
	Text       string    `json:"text"`
	Lang       string    `json:"lang,omitempty"`
	Emotion    string    `json:"emotion,omitempty"`
	Event      string    `json:"event,omitempty"`
	Tokens     []string  `json:"tokens"`
	TokenIDs   []int     `json:"token_ids,omitempty"`
	Timestamps []float64 `json:"timestamps"`
}

// Word is a word with its time span, built from the tokens.
type Word struct {
	Word  string  `json:"word"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

type tagKind int

const (
	tagLang tagKind = iota
	tagEmotion
	tagEvent
	tagITN
)

// tagKinds classifies SenseVoice's tags. Tags not listed are accepted in any position.
var tagKinds = map[string]tagKind{
	"zh": tagLang, "en": tagLang, "yue": tagLang, "ja": tagLang, "ko": tagLang, "nospeech": tagLang,
	"HAPPY": tagEmotion, "SAD": tagEmotion, "ANGRY": tagEmotion, "NEUTRAL": tagEmotion,
	"FEARFUL": tagEmotion, "DISGUSTED": tagEmotion, "SURPRISED": tagEmotion, "EMO_UNKNOWN": tagEmotion,
	"Speech": tagEvent, "BGM": tagEvent, "Laughter": tagEvent, "Applause": tagEvent, "Cry": tagEvent,
	"Sneeze": tagEvent, "Breath": tagEvent, "Cough": tagEvent, "Event_UNK": tagEvent, "Sing": tagEvent,
	"Speech_Noise": tagEvent,
	"withitn":      tagITN, "woitn": tagITN,
}

// decodeSegment turns decoded ids and their LFR frames (of the logits, tags included) into
// a segment starting at offset seconds and lasting dur seconds. As sherpa-onnx does, the
// first four tokens are the language, emotion, event and ITN tags, and the text tokens'
// times are 0.06·(frame − 4) seconds. Unlike sherpa-onnx, a tag of the wrong kind in a tag
// position is not reported (Lang is never "HAPPY"), and tags decoded among the text tokens
// are left out of Text (they stay in Tokens); a well-trained model produces neither.
func decodeSegment(tok *Tokens, ids, frames []int32, offset, dur float64) Segment {
	s := Segment{Start: offset, End: offset + dur, Tokens: []string{}, Timestamps: []float64{}}
	s.TokenIDs = make([]int, len(ids))
	for i, id := range ids {
		s.TokenIDs[i] = int(id)
	}
	tag := func(i int, kind tagKind) string {
		if i >= len(ids) {
			return ""
		}
		name := tagName(tok.Piece(int(ids[i])))
		if k, known := tagKinds[name]; known && k != kind {
			return "" // a known tag of another kind: the model did not give this one
		}
		return name
	}
	s.Lang, s.Emotion, s.Event = tag(0, tagLang), tag(1, tagEmotion), tag(2, tagEvent)
	var b strings.Builder
	for i := 4; i < len(ids); i++ {
		id := int(ids[i])
		txt := ""
		if id >= 0 && id < len(tok.text) {
			txt = tok.text[id]
		}
		if !isTag(txt) { // a stray tag in the text (weak models) is kept as a token only
			b.WriteString(txt)
		}
		s.Tokens = append(s.Tokens, txt)
		ts := offset + FrameSeconds*float64(frames[i]-4)
		s.Timestamps = append(s.Timestamps, math.Round(ts*1000)/1000)
	}
	s.Text = cleanText(b.String())
	return s
}

// cleanText trims spaces and repairs bytes that do not form UTF-8 (byte-fallback pieces).
func cleanText(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.TrimSpace(s)
}

// merge builds a Result from the segments of one input of dur seconds.
func merge(segs []Segment, dur float64) *Result {
	r := &Result{Tokens: []string{}, Timestamps: []float64{}, Duration: dur, Segments: segs}
	if r.Segments == nil {
		r.Segments = []Segment{}
	}
	var b strings.Builder
	votes := map[[3]string]float64{}
	for _, s := range segs {
		if s.Text != "" {
			if b.Len() > 0 && needSpace(b.String(), s.Text) {
				b.WriteByte(' ')
			}
			b.WriteString(s.Text)
		}
		r.Tokens = append(r.Tokens, s.Tokens...)
		r.TokenIDs = append(r.TokenIDs, s.TokenIDs...)
		r.Timestamps = append(r.Timestamps, s.Timestamps...)
		if s.Lang != "" || s.Emotion != "" || s.Event != "" {
			w := s.End - s.Start
			if s.Text != "" {
				w += 1e6 // segments with words outvote silent ones
			}
			votes[[3]string{s.Lang, s.Emotion, s.Event}] += w
		}
	}
	r.Text = b.String()
	best := -1.0
	for k, w := range votes {
		// deterministic: highest weight, then lexical order
		if w > best || (w == best && k[0]+k[1]+k[2] < r.Lang+r.Emotion+r.Event) {
			best = w
			r.Lang, r.Emotion, r.Event = k[0], k[1], k[2]
		}
	}
	return r
}

// needSpace reports whether two segment texts need a space between them: not between
// Chinese, Japanese or Korean characters, which are written without spaces.
func needSpace(a, b string) bool {
	ra, _ := utf8.DecodeLastRuneInString(a)
	rb, _ := utf8.DecodeRuneInString(b)
	return !(isCJK(ra) || isCJK(rb))
}

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) ||
		(r >= 0x3000 && r <= 0x303F) || (r >= 0xFF00 && r <= 0xFFEF)
}

// Words groups the tokens into words with start and end times: a token whose text begins
// with a space starts a new word, and every CJK character is a word of its own. A word ends
// where the next one starts, the last one at the end of its segment.
func (r *Result) Words() []Word {
	var words []Word
	segEnd := func(t float64) float64 {
		for _, s := range r.Segments {
			if t >= s.Start && t <= s.End {
				return s.End
			}
		}
		return r.Duration
	}
	for i, tk := range r.Tokens {
		t := r.Timestamps[i]
		newWord := len(words) == 0 || strings.HasPrefix(tk, " ")
		if r0, _ := utf8.DecodeRuneInString(strings.TrimSpace(tk)); isCJK(r0) {
			newWord = true
		}
		if len(words) > 0 {
			if last, _ := utf8.DecodeLastRuneInString(words[len(words)-1].Word); isCJK(last) {
				newWord = true
			}
		}
		w := strings.TrimSpace(tk)
		if newWord {
			if w == "" {
				continue
			}
			if len(words) > 0 && words[len(words)-1].End > t {
				words[len(words)-1].End = t
			}
			words = append(words, Word{Word: w, Start: t, End: segEnd(t)})
			continue
		}
		words[len(words)-1].Word += w
	}
	return words
}
