// Package lang names the languages Parley knows: the codes its recogniser (SenseVoice) tells
// apart, in which it listens and answers, and the English names people and language models
// use for them. It imports nothing from the project, so every layer may use it.
//
// Other tables about languages are other facts and live with what they describe: SenseVoice's
// query ids (asr), the espeak-ng voice for a language (tts/espeak), a voice model's own
// languages, the skills' Chinese words for languages and their replies (llm/skills).
package lang

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A language: its code, its English name, and the name of the spoken language where people
// say it otherwise.
type language struct {
	code   string // lowercase, as SenseVoice tags it ("zh", "yue") or ISO 639-1
	name   string // English name: "Chinese"
	spoken string // the spoken language where its name differs: "Mandarin" (as against Cantonese)
	heard  bool   // SenseVoice tells it apart: one of Codes
}

// languages: SenseVoice's, in its order (its lid_dict), then the others a language model may
// be asked to reply in.
var languages = []language{
	{code: "zh", name: "Chinese", spoken: "Mandarin", heard: true},
	{code: "en", name: "English", heard: true},
	{code: "yue", name: "Cantonese", heard: true},
	{code: "ja", name: "Japanese", heard: true},
	{code: "ko", name: "Korean", heard: true},
	{code: "de", name: "German"},
	{code: "fr", name: "French"},
	{code: "es", name: "Spanish"},
	{code: "it", name: "Italian"},
	{code: "ru", name: "Russian"},
}

// Codes returns the languages Parley hears and speaks, as SenseVoice tags them and in its
// order: "zh", "en", "yue", "ja", "ko". The slice is the caller's.
func Codes() []string {
	var out []string
	for _, l := range languages {
		if l.heard {
			out = append(out, l.code)
		}
	}
	return out
}

// Known says whether code is one of Codes, exactly as written there ("EN" is not).
func Known(code string) bool {
	l, ok := find(code)
	return ok && l.heard && l.code == code
}

// Name is the English name of a language code, in any case ("en" → "English", "ZH" →
// "Chinese", "de" → "German"); a code it does not know is returned as it is.
func Name(code string) string {
	if l, ok := find(code); ok {
		return l.name
	}
	return code
}

// SpokenName is Name, but names the spoken language where that differs: "zh" → "Mandarin",
// which is what SenseVoice's "zh" hears (Cantonese is "yue").
func SpokenName(code string) string {
	if l, ok := find(code); ok && l.spoken != "" {
		return l.spoken
	}
	return Name(code)
}

// FromName is the code for a language's English name or its spoken name, in any case and with
// space around ("English" → "en", "mandarin" → "zh", "German" → "de"). Codes are not names:
// FromName("en") is not ok. Callers that take only Parley's languages check Known.
func FromName(name string) (code string, ok bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, l := range languages {
		if n == strings.ToLower(l.name) || (l.spoken != "" && n == strings.ToLower(l.spoken)) {
			return l.code, true
		}
	}
	return "", false
}

// find looks a code up in any case.
func find(code string) (language, bool) {
	c := strings.ToLower(code)
	for _, l := range languages {
		if c == l.code {
			return l, true
		}
	}
	return language{}, false
}

// CheckWord refuses what cannot be one word of a recogniser's word list (asr.Config.Words,
// asr.words): nothing, text that is not UTF-8, white space or control characters inside, or no
// letter or digit at all (the list compares words without ASCII punctuation, so "..." would
// add nothing).
func CheckWord(w string) error {
	switch {
	case w == "":
		return errors.New("an empty word")
	case !utf8.ValidString(w):
		return fmt.Errorf("%q is not UTF-8 text", w)
	case strings.ContainsFunc(w, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Errorf("%q is not one word", w)
	case !strings.ContainsFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }):
		return fmt.Errorf("%q has no letter or digit", w)
	}
	return nil
}
