package skills

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Percentages as people say them: "20% of 50", "the percent change from 40 to 50", "what
// percent is 15 of 60", "increase 80 by 15%", "15% off 80", "80 plus 15%", and tips ("tip of
// 18% on 45 dollars", "what's a 20 percent tip on $60"). A % glued to a number is a percent,
// never the modulo operator (that one needs a number after it: 17 % 5).

const (
	pctNumInner = `-?\d+(?:\.\d+)?`
	pctNum      = `(` + pctNumInner + `)`
)

var (
	rePercentSign = regexp.MustCompile(`(\d)\s*%`)
	rePctChange   = regexp.MustCompile(`from ` + pctNum + ` (?:dollars )?(?:to|and) ` + pctNum)
	rePctBetween  = regexp.MustCompile(`between ` + pctNum + ` (?:dollars )?and ` + pctNum)
	reWhatPctOf   = []*regexp.Regexp{ // (part, whole) or (whole, part) by group name
		regexp.MustCompile(`what percent (?:is|are) (?P<part>` + pctNumInner + `) (?:of|out of) (?P<whole>` + pctNumInner + `)`),
		regexp.MustCompile(`(?P<part>` + pctNumInner + `) (?:is|are) what percent of (?P<whole>` + pctNumInner + `)`),
		regexp.MustCompile(`what percent of (?P<whole>` + pctNumInner + `) (?:is|are) (?P<part>` + pctNumInner + `)`),
		regexp.MustCompile(`(?P<part>` + pctNumInner + `) (?:out of|of) (?P<whole>` + pctNumInner + `) (?:as|in) (?:a )?percent`),
	}
	rePctUp = []*regexp.Regexp{
		regexp.MustCompile(`(?:increase|raise|grow|add to|mark up|markup) ` + pctNum + ` by ` + pctNum + ` percent`),
		regexp.MustCompile(`^` + pctNum + ` (?:increased by|raised by|plus|\+|marked up by|with) ` + pctNum + ` percent$`),
		regexp.MustCompile(`^` + pctNum + ` percent (?:more than|above|on top of|over) ` + pctNum + `$`),
	}
	rePctDown = []*regexp.Regexp{
		regexp.MustCompile(`(?:decrease|reduce|lower|cut|discount|mark down|markdown) ` + pctNum + ` by ` + pctNum + ` percent`),
		regexp.MustCompile(`^` + pctNum + ` (?:decreased by|reduced by|minus|-|less|discounted by|marked down by|cut by) ` + pctNum + ` percent$`),
		regexp.MustCompile(`^` + pctNum + ` percent (?:less than|below|off|off of|discount on) ` + pctNum + `$`),
	}
	reTipPercent = regexp.MustCompile(pctNum + ` percent`)
	reNumber     = regexp.MustCompile(pctNum)
	rePctFiller  = regexp.MustCompile(`\b(?:what is|what are|calculate|compute|please|tell me|the|hey|parley|how much is|how much|can you|work out|give me|a|an)\b`)
)

// percentText is in.norm with every way of saying "percent" spelled "percent", "$" and
// currency words gone, and single spaces. money reports whether dollars were mentioned.
func percentText(in input) (s string, money bool) {
	s = " " + in.norm + " "
	money = strings.Contains(in.raw, "$") || in.has("dollar", "dollars", "bucks")
	s = percentGlued(strings.ReplaceAll(s, "+", " + "))
	var keep []string
	for _, w := range strings.Fields(s) {
		switch w {
		case "dollar", "dollars", "bucks", "$":
			continue
		}
		keep = append(keep, w)
	}
	return strings.Join(keep, " "), money
}

// percentGlued turns a % glued to a number into "percent" unless a number or "(" follows
// (then it is modulo: 17 % 5, 17%(2+3)), and "per cent", "percentage" into "percent".
func percentGlued(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range rePercentSign.FindAllStringIndex(s, -1) {
		rest := strings.TrimLeft(s[m[1]:], " ")
		if rest != "" && (rest[0] >= '0' && rest[0] <= '9' || rest[0] == '(' || rest[0] == '.') {
			continue
		}
		b.WriteString(s[last : m[1]-1])
		b.WriteString(" percent ")
		last = m[1]
	}
	b.WriteString(s[last:])
	s = " " + strings.Join(strings.Fields(b.String()), " ") + " "
	s = strings.NewReplacer(" per cent ", " percent ", " percentage points ", " percent ", " percentage ", " percent ",
		" pct ", " percent ").Replace(s)
	return strings.TrimSpace(s)
}

func atof(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

// money formats an amount of money: whole amounts without cents, others with two decimals.
func moneyText(v float64, dollars bool) string {
	c := math.Round(v * 100)
	s := strconv.FormatFloat(c/100, 'f', 2, 64)
	if math.Mod(c, 100) == 0 {
		s = strconv.FormatFloat(c/100, 'f', 0, 64)
	}
	if dollars {
		if strings.HasPrefix(s, "-") {
			return "-$" + s[1:]
		}
		return "$" + s
	}
	return s
}

func pct(v float64) string { return FormatNumber(roundNice(v)) + "%" }

// percentReply answers the percentage questions that plain arithmetic gets wrong or cannot
// say well; ok is false for everything else (then "20 percent of 50" is ordinary arithmetic).
func percentReply(in input) (en, zh string, ok bool) {
	if hasHan(in.raw) {
		return "", "", false
	}
	s, dollars := percentText(in)
	hasPct := strings.Contains(" "+s+" ", " percent ")
	amount := func(v float64) string {
		if dollars {
			return moneyText(v, true)
		}
		return FormatNumber(roundNice(v))
	}

	// tips
	if in.has("tip", "tips", "tipping", "gratuity") {
		nums := reNumber.FindAllStringSubmatchIndex(s, -1)
		var bill, rate []float64
		for _, m := range nums {
			v := atof(s[m[2]:m[3]])
			if strings.HasPrefix(s[m[1]:], " percent") {
				rate = append(rate, v)
			} else {
				bill = append(bill, v)
			}
		}
		if len(bill) != 1 || len(rate) > 1 || bill[0] < 0 {
			return "", "", false
		}
		b := bill[0]
		if len(rate) == 0 {
			en = fmt.Sprintf("On %s, a 15%% tip is %s, 18%% is %s and 20%% is %s.", moneyText(b, dollars),
				moneyText(b*0.15, dollars), moneyText(b*0.18, dollars), moneyText(b*0.20, dollars))
			zh = fmt.Sprintf("%s的小费：15%%是%s，18%%是%s，20%%是%s。", moneyText(b, false), moneyText(b*0.15, false),
				moneyText(b*0.18, false), moneyText(b*0.20, false))
			return en, zh, true
		}
		r := rate[0]
		tip := b * r / 100
		article := "A"
		if anNumber(r) {
			article = "An"
		}
		en = fmt.Sprintf("%s %s tip on %s is %s, for a total of %s.", article, pct(r), moneyText(b, dollars),
			moneyText(tip, dollars), moneyText(b+tip, dollars))
		zh = fmt.Sprintf("%s的%s小费是%s，总共%s。", moneyText(b, false), pct(r), moneyText(tip, false), moneyText(b+tip, false))
		return en, zh, true
	}
	if !hasPct {
		return "", "", false
	}

	// percent change from A to B
	if in.has("change", "increase", "decrease", "difference", "growth", "grow", "grew", "rise", "rose",
		"fall", "fell", "drop", "dropped", "go", "went", "gone", "increased", "decreased") {
		m := rePctChange.FindStringSubmatch(s)
		if m == nil {
			m = rePctBetween.FindStringSubmatch(s)
		}
		if m != nil {
			a, b := atof(m[1]), atof(m[2])
			if a == 0 {
				return "A percent change from 0 is not defined.", "从0开始的百分比变化没有定义。", true
			}
			c := (b - a) / math.Abs(a) * 100
			switch {
			case c > 0:
				en = fmt.Sprintf("From %s to %s is an increase of %s.", amount(a), amount(b), pct(c))
				zh = fmt.Sprintf("从%s到%s增加了%s。", FormatNumber(a), FormatNumber(b), pct(c))
			case c < 0:
				en = fmt.Sprintf("From %s to %s is a decrease of %s.", amount(a), amount(b), pct(-c))
				zh = fmt.Sprintf("从%s到%s减少了%s。", FormatNumber(a), FormatNumber(b), pct(-c))
			default:
				en = fmt.Sprintf("From %s to %s is no change (0%%).", amount(a), amount(b))
				zh = "没有变化（0%）。"
			}
			return en, zh, true
		}
	}

	// what percent is A of B
	for _, re := range reWhatPctOf {
		m := re.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		part, whole := atof(m[re.SubexpIndex("part")]), atof(m[re.SubexpIndex("whole")])
		if whole == 0 {
			return "", "", false // division by zero: arithmetic says so
		}
		p := part / whole * 100
		return fmt.Sprintf("%s is %s of %s.", amount(part), pct(p), amount(whole)),
			fmt.Sprintf("%s是%s的%s。", FormatNumber(part), FormatNumber(whole), pct(p)), true
	}

	// A increased / decreased by P%
	core := strings.Join(strings.Fields(rePctFiller.ReplaceAllString(s, " ")), " ")
	for _, dir := range []struct {
		sign float64
		res  []*regexp.Regexp
	}{{1, rePctUp}, {-1, rePctDown}} {
		sign, res := dir.sign, dir.res
		for k, re := range res {
			m := re.FindStringSubmatch(core)
			if m == nil {
				continue
			}
			a, p := atof(m[1]), atof(m[2])
			if k == 2 { // "P percent more than A": the percentage comes first
				a, p = p, a
			}
			v := a * (1 + sign*p/100)
			if sign > 0 {
				return fmt.Sprintf("%s plus %s is %s.", amount(a), pct(p), amount(v)),
					fmt.Sprintf("%s增加%s是%s。", FormatNumber(a), pct(p), FormatNumber(roundNice(v))), true
			}
			return fmt.Sprintf("%s minus %s is %s.", amount(a), pct(p), amount(v)),
				fmt.Sprintf("%s减少%s是%s。", FormatNumber(a), pct(p), FormatNumber(roundNice(v))), true
		}
	}
	return "", "", false
}

// anNumber reports whether a percentage is said with "an": 8, 11, 18, 80, 800, 8.5, 11000…
func anNumber(v float64) bool {
	s := FormatNumber(v)
	if strings.HasPrefix(s, "8") {
		return true
	}
	i := strings.IndexByte(s, '.')
	if i < 0 {
		i = len(s)
	}
	whole := s[:i]
	switch len(whole) {
	case 2, 5, 8: // eleven, eleven thousand, eleven million (and eighteen …)
		return strings.HasPrefix(whole, "11") || strings.HasPrefix(whole, "18")
	}
	return false
}
