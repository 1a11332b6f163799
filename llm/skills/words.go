package skills

import (
	"strconv"
	"strings"
	"unicode"
)

var enSmall = map[string]int{
	"zero": 0, "oh": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
	"fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
	"twenty": 20, "thirty": 30, "forty": 40, "fourty": 40, "fifty": 50, "sixty": 60,
	"seventy": 70, "eighty": 80, "ninety": 90,
	// frequent ASR confusions
	"to": -2, "too": -2, "for": -4, "won": -1, "ate": -8,
}

var enScale = map[string]int{"hundred": 100, "thousand": 1000, "million": 1000000}

// wordsToDigits rewrites English number words as digits: "twenty five" → "25",
// "one hundred and five" → "105", "three point five" → "3.5". Homophones of numbers ("to",
// "for", "won", "ate") are never read as numbers.
func wordsToDigits(words []string) []string {
	var out []string
	for i := 0; i < len(words); {
		v, n := numberAt(words, i)
		if n == 0 {
			out = append(out, words[i])
			i++
			continue
		}
		out = append(out, FormatNumber(v))
		i += n
	}
	return out
}

// numberAt reads a number written in words (or digits) at words[i]; n is the words used.
func numberAt(words []string, i int) (v float64, n int) {
	if i >= len(words) {
		return 0, 0
	}
	if f, err := strconv.ParseFloat(words[i], 64); err == nil {
		return f, 1
	}
	total, cur := 0, 0
	j := i
	seen := false
	for j < len(words) {
		w := words[j]
		if s, ok := enSmall[w]; ok {
			if s < 0 {
				// a homophone: only inside a number ("twenty to" is not 22 either)
				break
			}
			if seen && cur%10 == 0 && cur%100 != 0 && s < 10 && s > 0 {
				cur += s // twenty five
			} else if seen && cur != 0 && cur%100 != 0 {
				break // "five six" are two numbers
			} else {
				cur += s
			}
			seen = true
			j++
			continue
		}
		if sc, ok := enScale[w]; ok && seen {
			if cur == 0 {
				cur = 1
			}
			if sc == 100 {
				cur *= 100
			} else {
				total += cur * sc
				cur = 0
			}
			j++
			continue
		}
		if w == "and" && seen && j+1 < len(words) {
			if _, ok := enSmall[words[j+1]]; ok && (cur%100 == 0 || total > 0) {
				j++
				continue
			}
		}
		break
	}
	if !seen {
		return 0, 0
	}
	v = float64(total + cur)
	// "three point five"
	if j+1 < len(words) && words[j] == "point" {
		if d, ok := enSmall[words[j+1]]; ok && d >= 0 && d < 10 {
			frac := ""
			k := j + 1
			for k < len(words) {
				d, ok := enSmall[words[k]]
				if !ok || d < 0 || d > 9 {
					break
				}
				frac += strconv.Itoa(d)
				k++
			}
			f, _ := strconv.ParseFloat("0."+frac, 64)
			v += f
			j = k
		}
	}
	return v, j - i
}

var zhDigit = map[rune]int{'零': 0, '〇': 0, '一': 1, '幺': 1, '二': 2, '两': 2, '俩': 2, '三': 3, '四': 4, '五': 5, '六': 6, '七': 7, '八': 8, '九': 9}
var zhUnit = map[rune]int{'十': 10, '百': 100, '千': 1000, '万': 10000}

// zhToDigits rewrites runs of Chinese numerals as digits: "二十五" → "25", "一百零五" → "105",
// "两" → "2". "点" is left alone (it is both the decimal point and o'clock).
func zhToDigits(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) {
			_, d := zhDigit[rs[j]]
			_, u := zhUnit[rs[j]]
			if !d && !u {
				break
			}
			j++
		}
		if j == i {
			b.WriteRune(rs[i])
			i++
			continue
		}
		run := rs[i:j]
		// "一下", "一个" and friends stay words only when "一" stands alone before a measure word
		// that is not about quantity; converting them is harmless for matching.
		b.WriteString(strconv.Itoa(zhNumber(run)))
		i = j
	}
	return b.String()
}

func zhNumber(run []rune) int {
	// Digit strings like 二零二六 read digit by digit.
	allDigits := true
	for _, r := range run {
		if _, ok := zhDigit[r]; !ok {
			allDigits = false
		}
	}
	if allDigits && len(run) > 1 {
		n := 0
		for _, r := range run {
			n = n*10 + zhDigit[r]
		}
		return n
	}
	total, section, cur := 0, 0, 0
	for _, r := range run {
		if d, ok := zhDigit[r]; ok {
			cur = d
			continue
		}
		u := zhUnit[r]
		if u == 10000 {
			section += cur
			total += section * 10000
			section, cur = 0, 0
			continue
		}
		if cur == 0 {
			cur = 1 // 十五 = 15
		}
		section += cur * u
		cur = 0
	}
	return total + section + cur
}

// normalize lowercases, expands contractions, turns number words into digits and keeps the
// characters arithmetic needs. CJK text keeps its characters (numerals become digits).
func normalize(s string) string {
	s = strings.ToLower(s)
	s = strings.NewReplacer("a.m.", "am", "p.m.", "pm", "a.m", "am", "p.m", "pm", "what's", "what is", "whats", "what is", "it's", "it is", "i'm", "i am",
		"’", "'", "can't", "cannot", "don't", "do not", "-", " - ", "，", " ", "。", " ", "？", " ", "！", " ",
		"、", " ", "：", ":").Replace(s)
	s = zhToDigits(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(".:%+*/^()×÷!'", r):
			b.WriteRune(r)
		case r == '-':
			b.WriteString(" - ")
		case r == '?' || r == ',' || r == ';' || r == '"':
			b.WriteByte(' ')
		default:
			b.WriteByte(' ')
		}
	}
	words := strings.Fields(b.String())
	for i, w := range words {
		if fix, ok := asrFixes[w]; ok {
			words[i] = fix
		}
	}
	// "twenty - five" → "twenty five" when both sides are number words.
	for i := 1; i+1 < len(words); i++ {
		if words[i] == "-" {
			if _, ok := enSmall[words[i-1]]; ok {
				if _, ok := enSmall[words[i+1]]; ok {
					words = append(words[:i], words[i+1:]...)
				}
			}
		}
	}
	// Trailing sentence dots ("it is 5.") are not decimals.
	for i, w := range words {
		words[i] = strings.TrimRight(w, ".")
		if words[i] == "" {
			words[i] = "."
		}
	}
	return strings.Join(wordsToDigits(words), " ")
}

// asrFixes maps frequent speech-recognition misspellings onto the words the matchers expect.
var asrFixes = map[string]string{
	"minuets": "minutes", "minuet": "minute", "minuts": "minutes", "minits": "minutes", "minets": "minutes",
	"secends": "seconds", "seconts": "seconds", "hourz": "hours", "ours": "hours",
	"tomorow": "tomorrow", "tommorow": "tomorrow", "tommorrow": "tomorrow",
	"izit": "is it", "wats": "what is", "wat": "what", "whut": "what", "alarum": "alarm",
	"celcius": "celsius", "farenheit": "fahrenheit",
	"fahrenheight": "fahrenheit",
}

// hasHan reports whether s contains Chinese characters.
func hasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}
