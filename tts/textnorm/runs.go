// Package textnorm prepares text for speech: it splits mixed-language text into runs of one
// language and expands numbers, dates, times, currencies, units and abbreviations into words
// (English and Chinese).
package textnorm

import (
	"strings"
	"unicode"
)

// Run is a stretch of text in one language.
type Run struct {
	Lang string // BCP-47-ish: "en", "zh", "ja", "ko", "ru", "el", "ar", "he", "hi", "th" or the default
	Text string
}

// scriptLang names the language a letter's script implies, or "" for neutral characters
// (digits, spaces, punctuation, symbols) and Latin letters (which take the default language).
func scriptLang(r rune) string {
	switch {
	case unicode.Is(unicode.Han, r):
		return "zh"
	case unicode.In(r, unicode.Hiragana, unicode.Katakana):
		return "ja"
	case unicode.Is(unicode.Hangul, r):
		return "ko"
	case unicode.Is(unicode.Cyrillic, r):
		return "ru"
	case unicode.Is(unicode.Greek, r):
		return "el"
	case unicode.Is(unicode.Arabic, r):
		return "ar"
	case unicode.Is(unicode.Hebrew, r):
		return "he"
	case unicode.Is(unicode.Devanagari, r):
		return "hi"
	case unicode.Is(unicode.Thai, r):
		return "th"
	case unicode.IsLetter(r):
		return "latin"
	}
	switch r {
	case '。', '，', '、', '！', '？', '：', '；', '（', '）', '《', '》', '“', '”':
		return "zh"
	}
	return ""
}

// Runs splits text into language runs. Latin letters take defaultLang unless defaultLang is a
// language with its own script (e.g. "zh"), in which case they are "en". Neutral characters
// (digits, punctuation, spaces) stay with the run before them, or the one after at the start.
// Japanese text mixing kanji and kana stays one "ja" run.
func Runs(text, defaultLang string) []Run {
	if defaultLang == "" {
		defaultLang = "en"
	}
	latin := defaultLang
	if l := baseLang(defaultLang); l == "zh" || l == "ja" || l == "ko" || l == "ru" || l == "el" || l == "ar" || l == "he" || l == "hi" || l == "th" {
		latin = "en"
	}
	hasKana := strings.IndexFunc(text, func(r rune) bool { return unicode.In(r, unicode.Hiragana, unicode.Katakana) }) >= 0
	var runs []Run
	var cur strings.Builder
	curLang := ""
	for _, r := range text {
		l := scriptLang(r)
		switch l {
		case "latin":
			l = latin
		case "zh":
			if hasKana {
				l = "ja"
			}
		}
		if l == "" || l == curLang || curLang == "" {
			if curLang == "" {
				curLang = l
			}
			cur.WriteRune(r)
			continue
		}
		// digits glued to a Chinese unit stay together ("3个") by virtue of attaching left; a
		// language switch starts a new run, moving trailing spaces with it.
		s := cur.String()
		trimmed := strings.TrimRight(s, " ")
		runs = append(runs, Run{Lang: curLang, Text: trimmed})
		cur.Reset()
		cur.WriteString(s[len(trimmed):])
		cur.WriteRune(r)
		curLang = l
	}
	if cur.Len() > 0 {
		if curLang == "" {
			curLang = latin
		}
		runs = append(runs, Run{Lang: curLang, Text: cur.String()})
	}
	// a run that starts neutral (curLang "") took the first letter's language; fix the case of
	// leading neutrals in the very first run having been assigned correctly already.
	out := runs[:0]
	for _, r := range runs {
		if r.Text == "" {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Lang == r.Lang {
			out[n-1].Text += r.Text
			continue
		}
		out = append(out, r)
	}
	return out
}

func baseLang(l string) string {
	l = strings.ToLower(l)
	if i := strings.IndexAny(l, "-_"); i >= 0 {
		l = l[:i]
	}
	switch l {
	case "cmn", "yue", "zho", "chi":
		return "zh"
	}
	return l
}

// Normalize expands numbers, dates, times, currencies, units and abbreviations in text of one
// language. English ("en…") and Chinese ("zh", "cmn", "yue") are supported; text in other
// languages is returned with whitespace tidied.
func Normalize(text, lang string) string {
	switch baseLang(lang) {
	case "zh":
		return normalizeZH(text)
	case "en":
		return normalizeEN(text)
	}
	return text
}

// NormalizeMixed splits text into runs and normalizes each in its own language.
func NormalizeMixed(text, defaultLang string) []Run {
	runs := Runs(text, defaultLang)
	for i := range runs {
		runs[i].Text = Normalize(runs[i].Text, runs[i].Lang)
	}
	return runs
}
