package chattts

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/control"
)

// ChatTTS's Normalizer keeps Han characters, Latin letters, spaces and ，。、,. — the
// characters its GPT was trained on — maps other punctuation to those (its
// character_simplifier) and drops the rest; Chinese text gets full-width punctuation first.
// Parley's text normaliser (tts/textnorm) has already spelled out numbers, dates and units.
// ChatTTS's homophone table (a character substitution list for misread Chinese characters) is
// third-party data and not applied.

var halfToFull = map[rune]rune{
	'!': '！', '"': '“', '\'': '‘', '#': '＃', '$': '＄', '%': '％', '&': '＆', '(': '（', ')': '）',
	',': '，', '-': '－', '*': '＊', '+': '＋', '.': '。', '/': '／', ':': '：', ';': '；', '<': '＜',
	'=': '＝', '>': '＞', '?': '？', '@': '＠', '\\': '＼', '^': '＾', '`': '｀', '{': '｛', '|': '｜',
	'}': '｝', '~': '～',
}

var simplify = map[rune]rune{
	'：': '，', '；': '，', '！': '。', '（': '，', '）': '，', '【': '，', '】': '，', '『': '，', '』': '，',
	'「': '，', '」': '，', '《': '，', '》': '，', '－': '，', ':': ',', ';': ',', '!': '.', '(': ',',
	')': ',', '>': ',', '<': ',', '-': ',',
}

func chatttsKeeps(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') ||
		r == '，' || r == '。' || r == '、' || r == ',' || r == '.' || r == ' '
}

// isZH is ChatTTS's language guess: more Han characters than English words.
func isZH(s string) bool {
	han, words := 0, 0
	inWord := false
	for _, r := range s {
		if r >= 0x4E00 && r <= 0x9FFF {
			han++
		}
		latin := (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if latin && !inWord {
			words++
		}
		inWord = latin
	}
	return han > words
}

// chatttsChars applies ChatTTS's character rules to one sentence's text.
func chatttsChars(s string, zh bool) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsSpace(r) {
			r = ' '
		}
		if zh {
			if f, ok := halfToFull[r]; ok {
				r = f
			}
		}
		if !chatttsKeeps(r) {
			if m, ok := simplify[r]; ok {
				r = m
			} else {
				continue
			}
		}
		b.WriteRune(r)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// run is one GPT call: a stretch of one sentence with inline ChatTTS tokens, the [speed_N]
// level of its prompt, and the silence Parley inserts before it (for pauses ChatTTS has no
// token for).
type run struct {
	Sentence int
	Text     string // e.g. "hello [uv_break] world [laugh]"
	Speed    int    // 0..9
	Before   time.Duration
	Last     bool // last run of its sentence
}

// textPlan is a request turned into GPT calls plus the sentence-level refine prompt.
type textPlan struct {
	Runs         []run
	RefinePrompt string // "[oral_N][laugh_N][break_N]" as the request gave them, "" if none
	Warnings     []string
	Trailing     time.Duration // silence after the last run
}

// speedLevel maps a speed factor onto ChatTTS's [speed_N] (0.5 + 0.1·N, 5 = normal).
func speedLevel(rate float64) (int, bool) {
	n := int(math.Round((rate - 0.5) / 0.1))
	if n < 0 {
		return 0, false
	}
	if n > 9 {
		return 9, false
	}
	return n, true
}

// planText turns a prepared request into GPT runs. Pauses ChatTTS has a token for
// ([uv_break], [v_break], [lbreak]) and laughs stay in the text as tokens; a breath becomes
// [uv_break] (ChatTTS's unvoiced break is its breath-like pause); [break_N], [oral_N] and
// [laugh_N] go to the refine prompt when refine runs — otherwise an inline [break_N] is a
// silence of its calibrated length, like every pause ChatTTS has no token for (SSML breaks,
// the gap between sentences), inserted between GPT runs. A change of speed inside a sentence
// starts a new run, as the prompt's [speed_N] holds for a whole call.
//
// rules applies ChatTTS's character rules to the text (the WordPiece front-end); the
// espeak-ipa front-end keeps the normalised text, punctuation included, for espeak-ng.
func planText(p *tts.Plan, refine, rules bool, cal control.Calibration, speed float64) textPlan {
	var tp textPlan
	sc := p.Script
	var pr strings.Builder
	if sc.Oral >= 0 {
		pr.WriteString("[oral_" + strconv.Itoa(sc.Oral) + "]")
	}
	if sc.LaughLevel >= 0 {
		pr.WriteString("[laugh_" + strconv.Itoa(sc.LaughLevel) + "]")
	}
	if sc.BreakLevel >= 0 {
		pr.WriteString("[break_" + strconv.Itoa(sc.BreakLevel) + "]")
	}
	tp.RefinePrompt = pr.String()
	clamped := false
	var pending time.Duration
	for _, s := range p.Sentences {
		var cur []string
		curSpeed := -1
		flush := func() {
			text := strings.TrimSpace(strings.Join(cur, " "))
			cur = nil
			if !speakable(text) {
				return
			}
			sp := curSpeed
			if sp < 0 {
				sp, _ = speedLevel(speed)
			}
			tp.Runs = append(tp.Runs, run{Sentence: s.Index, Text: text, Speed: sp, Before: pending})
			pending = 0
		}
		for _, seg := range s.Segments {
			switch seg.Kind {
			case control.Text:
				lvl, ok := speedLevel(seg.Rate)
				clamped = clamped || !ok
				if curSpeed >= 0 && lvl != curSpeed && len(cur) > 0 {
					flush()
				}
				curSpeed = lvl
				t := strings.TrimSpace(seg.Text)
				if rules {
					t = chatttsChars(seg.Text, seg.Lang == "zh" || isZH(seg.Text))
				}
				if t != "" {
					cur = append(cur, t)
				}
			case control.Laugh:
				cur = append(cur, "[laugh]")
			case control.Breath:
				cur = append(cur, "[uv_break]")
			case control.Pause:
				switch st := seg.Item.Strength; {
				case st == control.UVBreak || st == control.VBreak || st == control.LBreak:
					cur = append(cur, "["+string(st)+"]")
				case strings.HasPrefix(string(st), "break_") && refine:
					// the refine pass places breaks at this level
				default:
					if len(cur) > 0 {
						flush()
					}
					pending += seg.Pause
				}
			}
		}
		flush()
		if n := len(tp.Runs); n > 0 && tp.Runs[n-1].Sentence == s.Index {
			tp.Runs[n-1].Last = true
		}
	}
	tp.Trailing = pending
	if clamped {
		tp.Warnings = append(tp.Warnings, "chattts: speed outside [speed_0] (0.5×) … [speed_9] (1.4×) was clamped")
	}
	return tp
}

// speakable reports whether model text holds words or a laugh (ChatTTS voices a lone
// [laugh]); pauses and punctuation alone are not worth a GPT call.
func speakable(s string) bool {
	if strings.Contains(s, "[laugh]") {
		return true
	}
	depth := 0
	for _, r := range s {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0 && unicode.IsLetter(r):
			return true
		}
	}
	return false
}
