package textnorm

import (
	"regexp"
	"strconv"
	"strings"
)

var (
	enOnes = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
		"ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"}
	enTens   = []string{"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"}
	enScales = []string{"", "thousand", "million", "billion", "trillion"}
	enMonths = []string{"January", "February", "March", "April", "May", "June", "July", "August",
		"September", "October", "November", "December"}
	enOrdIrregular = map[string]string{"one": "first", "two": "second", "three": "third", "five": "fifth",
		"eight": "eighth", "nine": "ninth", "twelve": "twelfth"}
)

// EnglishCardinal spells a non-negative integer: 123 → "one hundred twenty-three". Numbers of
// 16 digits or more are read digit by digit.
func EnglishCardinal(digits string) string {
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "zero"
	}
	if len(digits) > 15 {
		return EnglishDigits(digits)
	}
	n, _ := strconv.ParseUint(digits, 10, 64)
	var groups []string
	for scale := 0; n > 0; scale++ {
		g := n % 1000
		n /= 1000
		if g == 0 {
			continue
		}
		w := enBelow1000(int(g))
		if enScales[scale] != "" {
			w += " " + enScales[scale]
		}
		groups = append([]string{w}, groups...)
	}
	return strings.Join(groups, " ")
}

func enBelow1000(n int) string {
	var parts []string
	if n >= 100 {
		parts = append(parts, enOnes[n/100]+" hundred")
		n %= 100
	}
	if n >= 20 {
		w := enTens[n/10]
		if n%10 != 0 {
			w += "-" + enOnes[n%10]
		}
		parts = append(parts, w)
	} else if n > 0 {
		parts = append(parts, enOnes[n])
	}
	return strings.Join(parts, " ")
}

// EnglishDigits reads digits one by one: "0042" → "zero zero four two".
func EnglishDigits(digits string) string {
	var w []string
	for _, c := range digits {
		if c >= '0' && c <= '9' {
			w = append(w, enOnes[c-'0'])
		}
	}
	return strings.Join(w, " ")
}

// EnglishOrdinal: 21 → "twenty-first".
func EnglishOrdinal(digits string) string {
	c := EnglishCardinal(digits)
	i := strings.LastIndexAny(c, " -")
	last := c[i+1:]
	var o string
	switch {
	case enOrdIrregular[last] != "":
		o = enOrdIrregular[last]
	case strings.HasSuffix(last, "y"):
		o = last[:len(last)-1] + "ieth"
	default:
		o = last + "th"
	}
	return c[:i+1] + o
}

// enYear reads a year the way people say it: 1984 → "nineteen eighty-four", 2005 → "two
// thousand five", 2024 → "twenty twenty-four".
func enYear(y int) string {
	switch {
	case y >= 2000 && y < 2010:
		return EnglishCardinal(strconv.Itoa(y))
	case y >= 1000 && y < 10000 && y%100 == 0:
		return EnglishCardinal(strconv.Itoa(y/100)) + " hundred"
	case y >= 1000 && y < 10000:
		hi, lo := y/100, y%100
		s := EnglishCardinal(strconv.Itoa(hi)) + " "
		if lo < 10 {
			s += "oh "
		}
		return s + EnglishCardinal(strconv.Itoa(lo))
	}
	return EnglishCardinal(strconv.Itoa(y))
}

// enNumber spells a number as written: "1,234.5" → "one thousand two hundred thirty-four point
// five", "-3" → "minus three".
func enNumber(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	s = strings.ReplaceAll(s, ",", "")
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var w string
	if len(intPart) > 1 && intPart[0] == '0' {
		w = EnglishDigits(intPart)
	} else {
		w = EnglishCardinal(intPart)
	}
	if hasFrac && frac != "" {
		w += " point " + EnglishDigits(frac)
	}
	if neg {
		w = "minus " + w
	}
	return w
}

var (
	reENISODate  = regexp.MustCompile(`\b(\d{4})-(\d{1,2})-(\d{1,2})\b`)
	reENSlash    = regexp.MustCompile(`\b(\d{1,2})/(\d{1,2})/(\d{4})\b`)
	reENTime     = regexp.MustCompile(`(?i)\b(\d{1,2}):(\d{2})(?:\s*([ap])\.?m\.?\b)?`)
	reENAmPm     = regexp.MustCompile(`(?i)\b(\d{1,2})\s*([ap])\.?m\.?(?:\s|$|[,;!?])`)
	reENCurrency = regexp.MustCompile(`([$€£¥])\s?(\d[\d,]*)(?:\.(\d{1,2}))?(?:\s?(thousand|million|billion|trillion|[kKmMbB])\b)?`)
	reENPercent  = regexp.MustCompile(`(-?\d[\d,]*(?:\.\d+)?)\s?%`)
	reENUnit     = regexp.MustCompile(`(-?\d[\d,]*(?:\.\d+)?)\s?(km/h|mph|km|kg|cm|mm|ml|mg|GB|MB|KB|TB|kHz|Hz|°C|°F|ms|min|kW|m|g|l|s|h)\b`)
	reENDegree   = regexp.MustCompile(`(-?\d[\d,]*(?:\.\d+)?)\s?(°C|°F|°)`)
	reENOrdinal  = regexp.MustCompile(`\b(\d+)(st|nd|rd|th)\b`)
	reENYearCtx  = regexp.MustCompile(`(?i)\b(in|since|by|from|until|till|before|after|around|circa|year|of)\s+(1[1-9]\d\d|20\d\d)\b`)
	reENDecade   = regexp.MustCompile(`\b(1[1-9]\d0|20\d0)s\b`)
	reENNumber   = regexp.MustCompile(`-?\d[\d,]*(?:\.\d+)?|-?\.\d+`)
	reENAbbrev   = regexp.MustCompile(`\b(Dr|Mr|Mrs|Ms|Prof|St|Jr|Sr|vs|etc|approx|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|No|Mt|Ave|Dept|Inc|Ltd|Co)\.`)
	reENLatin    = regexp.MustCompile(`\b(e\.g\.|i\.e\.|a\.k\.a\.)`)
)

var enAbbrev = map[string]string{
	"Dr": "Doctor", "Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Prof": "Professor", "St": "Saint",
	"Jr": "Junior", "Sr": "Senior", "vs": "versus", "etc": "et cetera", "approx": "approximately",
	"Jan": "January", "Feb": "February", "Mar": "March", "Apr": "April", "Jun": "June", "Jul": "July",
	"Aug": "August", "Sep": "September", "Sept": "September", "Oct": "October", "Nov": "November",
	"Dec": "December", "No": "number", "Mt": "Mount", "Ave": "Avenue", "Dept": "Department",
	"Inc": "Incorporated", "Ltd": "Limited", "Co": "Company",
	"e.g.": "for example", "i.e.": "that is", "a.k.a.": "also known as",
}

var enUnits = map[string][2]string{
	"km/h": {"kilometer per hour", "kilometers per hour"}, "mph": {"mile per hour", "miles per hour"},
	"km": {"kilometer", "kilometers"}, "kg": {"kilogram", "kilograms"}, "cm": {"centimeter", "centimeters"},
	"mm": {"millimeter", "millimeters"}, "ml": {"milliliter", "milliliters"}, "mg": {"milligram", "milligrams"},
	"GB": {"gigabyte", "gigabytes"}, "MB": {"megabyte", "megabytes"}, "KB": {"kilobyte", "kilobytes"},
	"TB": {"terabyte", "terabytes"}, "kHz": {"kilohertz", "kilohertz"}, "Hz": {"hertz", "hertz"},
	"°C": {"degree Celsius", "degrees Celsius"}, "°F": {"degree Fahrenheit", "degrees Fahrenheit"},
	"°": {"degree", "degrees"}, "ms": {"millisecond", "milliseconds"}, "min": {"minute", "minutes"},
	"kW": {"kilowatt", "kilowatts"}, "m": {"meter", "meters"}, "g": {"gram", "grams"}, "l": {"liter", "liters"},
	"s": {"second", "seconds"}, "h": {"hour", "hours"},
}

var enCurrency = map[string][2]string{
	"$": {"dollar", "cent"}, "€": {"euro", "cent"}, "£": {"pound", "penny"}, "¥": {"yen", ""},
}

func plural(n string, w [2]string) string {
	if n == "one" {
		return w[0]
	}
	return w[1]
}

func normalizeEN(s string) string {
	s = reENLatin.ReplaceAllStringFunc(s, func(m string) string { return enAbbrev[m] })
	s = reENAbbrev.ReplaceAllStringFunc(s, func(m string) string { return enAbbrev[m[:len(m)-1]] })
	s = reENISODate.ReplaceAllStringFunc(s, func(m string) string {
		p := reENISODate.FindStringSubmatch(m)
		y, _ := strconv.Atoi(p[1])
		mo, _ := strconv.Atoi(p[2])
		d, _ := strconv.Atoi(p[3])
		if mo < 1 || mo > 12 || d < 1 || d > 31 {
			return m
		}
		return enMonths[mo-1] + " " + EnglishOrdinal(strconv.Itoa(d)) + ", " + enYear(y)
	})
	s = reENSlash.ReplaceAllStringFunc(s, func(m string) string {
		p := reENSlash.FindStringSubmatch(m)
		mo, _ := strconv.Atoi(p[1])
		d, _ := strconv.Atoi(p[2])
		y, _ := strconv.Atoi(p[3])
		if mo < 1 || mo > 12 || d < 1 || d > 31 {
			return m
		}
		return enMonths[mo-1] + " " + EnglishOrdinal(strconv.Itoa(d)) + ", " + enYear(y)
	})
	s = reENTime.ReplaceAllStringFunc(s, func(m string) string {
		p := reENTime.FindStringSubmatch(m)
		h, _ := strconv.Atoi(p[1])
		mi, _ := strconv.Atoi(p[2])
		if h > 24 || mi > 59 {
			return m
		}
		w := EnglishCardinal(p[1])
		switch {
		case mi == 0 && p[3] == "":
			w += " o'clock"
		case mi == 0:
		case mi < 10:
			w += " oh " + EnglishCardinal(p[2])
		default:
			w += " " + EnglishCardinal(p[2])
		}
		if p[3] != "" {
			w += " " + strings.ToUpper(p[3]) + "M" // "AM": espeak-ng (also Kokoro's phonemiser) reads "A M" as "uh em"
		}
		return w
	})
	s = reENAmPm.ReplaceAllStringFunc(s, func(m string) string {
		p := reENAmPm.FindStringSubmatch(m)
		tail := m[len(strings.TrimRight(m, " ,;!?")):]
		return EnglishCardinal(p[1]) + " " + strings.ToUpper(p[2]) + "M" + tail
	})
	s = reENDecade.ReplaceAllStringFunc(s, func(m string) string {
		y, _ := strconv.Atoi(m[:4])
		w := enYear(y)
		if strings.HasSuffix(w, "y") {
			return w[:len(w)-1] + "ies"
		}
		return w + "s"
	})
	s = reENYearCtx.ReplaceAllStringFunc(s, func(m string) string {
		p := reENYearCtx.FindStringSubmatch(m)
		y, _ := strconv.Atoi(p[2])
		return p[1] + " " + enYear(y)
	})
	s = reENCurrency.ReplaceAllStringFunc(s, func(m string) string {
		p := reENCurrency.FindStringSubmatch(m)
		cur := enCurrency[p[1]]
		whole := EnglishCardinal(strings.ReplaceAll(p[2], ",", ""))
		if p[4] != "" {
			scale := map[string]string{"k": "thousand", "K": "thousand", "m": "million", "M": "million", "b": "billion", "B": "billion"}[p[4]]
			if scale == "" {
				scale = p[4]
			}
			if p[3] != "" {
				whole += " point " + EnglishDigits(p[3])
			}
			return whole + " " + scale + " " + cur[0] + "s"
		}
		w := whole + " " + plural(whole, [2]string{cur[0], cur[0] + "s"})
		if cur[0] == "yen" {
			w = whole + " yen"
		}
		if p[3] != "" && cur[1] != "" {
			c := p[3]
			if len(c) == 1 {
				c += "0"
			}
			cw := EnglishCardinal(c)
			if cw != "zero" {
				cents := cur[1] + "s"
				if cur[1] == "penny" {
					cents = "pence"
				}
				w += " and " + cw + " " + plural(cw, [2]string{cur[1], cents})
			}
		}
		return w
	})
	s = reENPercent.ReplaceAllStringFunc(s, func(m string) string {
		return enNumber(reENPercent.FindStringSubmatch(m)[1]) + " percent"
	})
	s = reENDegree.ReplaceAllStringFunc(s, func(m string) string {
		p := reENDegree.FindStringSubmatch(m)
		n := enNumber(p[1])
		return n + " " + plural(n, enUnits[p[2]])
	})
	s = reENUnit.ReplaceAllStringFunc(s, func(m string) string {
		p := reENUnit.FindStringSubmatch(m)
		n := enNumber(p[1])
		return n + " " + plural(n, enUnits[p[2]])
	})
	s = reENOrdinal.ReplaceAllStringFunc(s, func(m string) string {
		return EnglishOrdinal(reENOrdinal.FindStringSubmatch(m)[1])
	})
	s = reENNumber.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "-.") || strings.HasPrefix(m, ".") {
			return strings.Replace(m, ".", "point ", 1)
		}
		return enNumber(m)
	})
	s = strings.ReplaceAll(s, "&", " and ")
	return tidy(s)
}

func tidy(s string) string {
	// collapse runs of spaces introduced by expansions, keep newlines
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == ' ' || r == '\t' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	if space && b.Len() > 0 {
		b.WriteByte(' ')
	}
	return b.String()
}
