package textnorm

import (
	"regexp"
	"strconv"
	"strings"
)

var zhDigits = []string{"零", "一", "二", "三", "四", "五", "六", "七", "八", "九"}

// ChineseCardinal spells a non-negative integer in Chinese: 123 → 一百二十三, 10 → 十,
// 1005 → 一千零五, 20000 → 两万 is not used (一 forms are read-aloud neutral: 二万). Numbers
// of 17 digits or more are read digit by digit.
func ChineseCardinal(digits string) string {
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return "零"
	}
	if len(digits) > 16 {
		return ChineseDigits(digits)
	}
	n, _ := strconv.ParseUint(digits, 10, 64)
	// split into 4-digit groups: 亿 (10^8), 万 (10^4)
	units := []string{"", "万", "亿", "万亿"}
	var groups []uint64
	for n > 0 {
		groups = append(groups, n%10000)
		n /= 10000
	}
	var b strings.Builder
	zero := false
	for i := len(groups) - 1; i >= 0; i-- {
		g := groups[i]
		if g == 0 {
			zero = b.Len() > 0
			continue
		}
		if zero || (b.Len() > 0 && g < 1000) {
			b.WriteString("零")
		}
		zero = false
		b.WriteString(zhBelow10000(int(g)))
		b.WriteString(units[i])
	}
	s := b.String()
	if strings.HasPrefix(s, "一十") {
		s = strings.TrimPrefix(s, "一")
	}
	return s
}

func zhBelow10000(n int) string {
	pos := []string{"千", "百", "十", ""}
	div := []int{1000, 100, 10, 1}
	var b strings.Builder
	zero := false
	started := false
	for i, d := range div {
		q := n / d % 10
		if q == 0 {
			if started {
				zero = true
			}
			continue
		}
		if zero {
			b.WriteString("零")
			zero = false
		}
		b.WriteString(zhDigits[q])
		b.WriteString(pos[i])
		started = true
	}
	return b.String()
}

// ChineseDigits reads digits one by one: 2024 → 二零二四.
func ChineseDigits(digits string) string {
	var b strings.Builder
	for _, c := range digits {
		if c >= '0' && c <= '9' {
			b.WriteString(zhDigits[c-'0'])
		}
	}
	return b.String()
}

func zhNumber(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.ReplaceAll(strings.TrimPrefix(s, "-"), ",", "")
	intPart, frac, hasFrac := strings.Cut(s, ".")
	var w string
	if len(intPart) > 1 && intPart[0] == '0' {
		w = ChineseDigits(intPart)
	} else {
		w = ChineseCardinal(intPart)
	}
	if hasFrac && frac != "" {
		w += "点" + ChineseDigits(frac)
	}
	if neg {
		w = "负" + w
	}
	return w
}

var (
	reZHISODate  = regexp.MustCompile(`\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b`)
	reZHYear     = regexp.MustCompile(`(\d{2,4})年`)
	reZHTime     = regexp.MustCompile(`\b(\d{1,2})[:：](\d{2})\b`)
	reZHCurrency = regexp.MustCompile(`([¥￥$€£])\s?(\d[\d,]*(?:\.\d+)?)`)
	reZHPercent  = regexp.MustCompile(`(-?\d[\d,]*(?:\.\d+)?)\s?[%％]`)
	reZHUnit     = regexp.MustCompile(`(-?\d[\d,]*(?:\.\d+)?)\s?(km/h|km|kg|cm|mm|ml|GB|MB|°C|℃|m|g|kW|h)\b`)
	reZHUnitC    = regexp.MustCompile(`(-?\d[\d,]*(?:\.\d+)?)\s?(℃|°C)`)
	reZHTwo      = regexp.MustCompile(`\b2([个位只本次件条张])`)
	reZHNumber   = regexp.MustCompile(`-?\d[\d,]*(?:\.\d+)?`)
)

var zhUnits = map[string]string{
	"km/h": "公里每小时", "km": "公里", "kg": "公斤", "cm": "厘米", "mm": "毫米", "ml": "毫升",
	"GB": "G B", "MB": "M B", "°C": "摄氏度", "℃": "摄氏度", "m": "米", "g": "克", "kW": "千瓦", "h": "小时",
}

var zhCurrency = map[string]string{"¥": "元", "￥": "元", "$": "美元", "€": "欧元", "£": "英镑"}

func normalizeZH(s string) string {
	s = reZHISODate.ReplaceAllStringFunc(s, func(m string) string {
		p := reZHISODate.FindStringSubmatch(m)
		mo, _ := strconv.Atoi(p[2])
		d, _ := strconv.Atoi(p[3])
		if mo < 1 || mo > 12 || d < 1 || d > 31 {
			return m
		}
		return ChineseDigits(p[1]) + "年" + ChineseCardinal(p[2]) + "月" + ChineseCardinal(p[3]) + "日"
	})
	s = reZHYear.ReplaceAllStringFunc(s, func(m string) string {
		return ChineseDigits(reZHYear.FindStringSubmatch(m)[1]) + "年"
	})
	s = reZHTime.ReplaceAllStringFunc(s, func(m string) string {
		p := reZHTime.FindStringSubmatch(m)
		h, _ := strconv.Atoi(p[1])
		mi, _ := strconv.Atoi(p[2])
		if h > 24 || mi > 59 {
			return m
		}
		w := ChineseCardinal(p[1]) + "点"
		switch {
		case mi == 0:
			w += "整"
		case mi < 10:
			w += "零" + ChineseCardinal(p[2]) + "分"
		default:
			w += ChineseCardinal(p[2]) + "分"
		}
		return w
	})
	s = reZHCurrency.ReplaceAllStringFunc(s, func(m string) string {
		p := reZHCurrency.FindStringSubmatch(m)
		return zhNumber(p[2]) + zhCurrency[p[1]]
	})
	s = reZHPercent.ReplaceAllStringFunc(s, func(m string) string {
		return "百分之" + zhNumber(reZHPercent.FindStringSubmatch(m)[1])
	})
	s = reZHUnitC.ReplaceAllStringFunc(s, func(m string) string {
		p := reZHUnitC.FindStringSubmatch(m)
		return zhNumber(p[1]) + zhUnits[p[2]]
	})
	s = reZHUnit.ReplaceAllStringFunc(s, func(m string) string {
		p := reZHUnit.FindStringSubmatch(m)
		return zhNumber(p[1]) + zhUnits[p[2]]
	})
	s = reZHTwo.ReplaceAllString(s, "两$1")
	s = reZHNumber.ReplaceAllStringFunc(s, zhNumber)
	return s
}
