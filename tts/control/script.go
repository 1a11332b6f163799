// Package control parses the inline controls users put in text to be spoken (ChatTTS tokens,
// CosyVoice tokens and tags, a small SSML subset) into an engine-neutral Script.
//
// A Script is a flat list of items: text spans carrying emphasis/laughing marks and the speed
// in effect, pauses (a named strength or an explicit duration), non-verbal events (laugh,
// breath, cough, sigh) and speed changes. Unknown or malformed tags are never spoken: they are
// dropped and reported in Script.Warnings.
package control

import (
	"fmt"
	"strings"
	"time"
)

// Kind is the kind of a script item.
type Kind int

// Item kinds.
const (
	Text        Kind = iota // spoken text (Item.Text)
	Pause                   // silence (Item.Pause, Item.Strength)
	Laugh                   // a laugh (Item.Level 0..2 intensity)
	Breath                  // an audible breath
	Cough                   // a cough
	Sigh                    // a sigh
	SpeedChange             // the speed factor changes to Item.Rate from here on
)

var kindNames = [...]string{"text", "pause", "laugh", "breath", "cough", "sigh", "speed"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Strength names a pause by how strong it is rather than by its length; engines map strengths
// to durations (Calibration) or to native tokens.
type Strength string

// Pause strengths. The ChatTTS ones keep their token names so an engine that knows them natively
// can re-emit them.
const (
	StrengthNone    Strength = "none"
	StrengthXWeak   Strength = "x-weak"
	StrengthWeak    Strength = "weak"
	StrengthMedium  Strength = "medium"
	StrengthStrong  Strength = "strong"
	StrengthXStrong Strength = "x-strong"
	UVBreak         Strength = "uv_break" // ChatTTS unvoiced (short) break
	VBreak          Strength = "v_break"  // ChatTTS voiced break
	LBreak          Strength = "lbreak"   // ChatTTS long break
	Sentence        Strength = "sentence" // the gap between two sentences
)

// Item is one element of a Script.
type Item struct {
	Kind     Kind
	Text     string        // Text: the words (plain text, tags removed, entities decoded)
	Emphasis bool          // Text: inside <strong>/<emphasis>
	Laughing bool          // Text: inside <laughter>
	Rate     float64       // Text and SpeedChange: speed factor in effect (1 = normal)
	Pause    time.Duration // Pause: explicit duration (0 when given by Strength)
	Strength Strength      // Pause: named strength (empty when Pause is explicit)
	Level    int           // Laugh: intensity; Pause from [break_N]: N
	Source   string        // the control as written, e.g. "[uv_break]" or "<break time=\"300ms\"/>"
}

// Warning reports a control that was dropped or only partly understood.
type Warning struct {
	Offset int    // byte offset in the input
	Token  string // the offending text (truncated)
	Reason string
}

func (w Warning) String() string { return fmt.Sprintf("at %d: %s: %s", w.Offset, w.Token, w.Reason) }

// Script is the engine-neutral form of a request's text.
type Script struct {
	Items []Item
	// ChatTTS sentence-level levels from [oral_N], [laugh_N], [break_N]; -1 when absent.
	Oral, LaughLevel, BreakLevel int
	Warnings                     []Warning
}

// Plain returns the spoken text of the script with controls removed, spans joined by spaces.
func (s *Script) Plain() string {
	var b strings.Builder
	for _, it := range s.Items {
		if it.Kind != Text {
			continue
		}
		if b.Len() > 0 && !strings.HasSuffix(b.String(), " ") && !strings.HasPrefix(it.Text, " ") {
			b.WriteByte(' ')
		}
		b.WriteString(it.Text)
	}
	return strings.TrimSpace(b.String())
}

// Calibration maps pause strengths and ChatTTS break levels to silence lengths for engines that
// emulate pauses. The values are Parley's own choice (documented in tts/README.md): they were
// picked to sound like the corresponding ChatTTS/SSML pauses, and tests check that synthesized
// audio matches them.
type Calibration struct {
	Strengths map[Strength]time.Duration
	BreakStep time.Duration // [break_N] → N × BreakStep
}

// DefaultCalibration is the table engines use unless configured otherwise.
func DefaultCalibration() Calibration {
	return Calibration{
		Strengths: map[Strength]time.Duration{
			StrengthNone:    0,
			StrengthXWeak:   100 * time.Millisecond,
			StrengthWeak:    200 * time.Millisecond,
			StrengthMedium:  400 * time.Millisecond,
			StrengthStrong:  700 * time.Millisecond,
			StrengthXStrong: 1200 * time.Millisecond,
			UVBreak:         150 * time.Millisecond,
			VBreak:          250 * time.Millisecond,
			LBreak:          600 * time.Millisecond,
			Sentence:        250 * time.Millisecond,
		},
		BreakStep: 100 * time.Millisecond,
	}
}

// Duration is the silence length for a pause item.
func (c Calibration) Duration(it Item) time.Duration {
	if it.Kind != Pause {
		return 0
	}
	if it.Strength == "" {
		return it.Pause
	}
	if strings.HasPrefix(string(it.Strength), "break_") {
		return time.Duration(it.Level) * c.BreakStep
	}
	return c.Strengths[it.Strength]
}

// SpeedLevel maps ChatTTS [speed_N] (0..9, 5 = normal) to a speed factor: 0.5 + 0.1·N.
func SpeedLevel(n int) float64 { return 0.5 + 0.1*float64(n) }

// Sentences splits the script's items into sentences: text is cut after sentence-final
// punctuation (. ! ? … and their CJK forms; a period between digits is not an end) and each
// sentence keeps the pauses and events that fall inside it. Empty sentences are dropped.
func (s *Script) Sentences() [][]Item {
	var out [][]Item
	var cur []Item
	flush := func() {
		for _, it := range cur {
			if it.Kind != Text || strings.TrimSpace(it.Text) != "" {
				out = append(out, cur)
				break
			}
		}
		cur = nil
	}
	for _, it := range s.Items {
		if it.Kind != Text {
			cur = append(cur, it)
			continue
		}
		rest := it.Text
		for rest != "" {
			i := sentenceEnd(rest)
			if i < 0 {
				t := it
				t.Text = rest
				cur = append(cur, t)
				break
			}
			t := it
			t.Text = rest[:i]
			cur = append(cur, t)
			flush()
			rest = strings.TrimLeft(rest[i:], " \t\r\n")
		}
	}
	flush()
	return out
}

// sentenceEnd returns the byte index just after the first sentence end in s, or -1.
func sentenceEnd(s string) int {
	rs := []rune(s)
	pos := 0
	for i, r := range rs {
		pos += len(string(r))
		switch r {
		case '。', '！', '？', '…', '\n':
		case '.', '!', '?':
			if r == '.' && i > 0 && i+1 < len(rs) && isDigit(rs[i-1]) && isDigit(rs[i+1]) {
				continue
			}
			if i+1 < len(rs) && !isSpace(rs[i+1]) && !isCloser(rs[i+1]) && rs[i+1] != '.' && rs[i+1] != '!' && rs[i+1] != '?' {
				continue // e.g. "e.g." or "3.5" or "a.m."
			}
		default:
			continue
		}
		// swallow following closers/punctuation of the same sentence end
		j := i + 1
		for j < len(rs) && (isCloser(rs[j]) || rs[j] == '.' || rs[j] == '!' || rs[j] == '?') {
			pos += len(string(rs[j]))
			j++
		}
		return pos
	}
	return -1
}

func isDigit(r rune) bool  { return r >= '0' && r <= '9' }
func isSpace(r rune) bool  { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }
func isCloser(r rune) bool { return strings.ContainsRune("\"')]”’」』）", r) }
