package chunk

import (
	"strings"
	"unicode"
)

// Strip removes markdown that should not be spoken: fence and rule lines, heading marks,
// bullets and quote marks, emphasis (**, __, ~~, *), backticks, table pipes, and link and
// image targets ([text](url) → text). Bracketed TTS control tokens ([laugh], [uv_break],
// [break_3]) are kept. Whitespace is collapsed.
func Strip(s string) string {
	if s == "" {
		return s
	}
	if !strings.ContainsAny(s, "\n#>-*+•|`_~[") {
		return strings.Join(strings.Fields(s), " ") // plain text: nothing to strip
	}
	var lines []string
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "```"), isRule(t), isTableSep(t):
			continue
		}
		t = stripLinePrefix(t)
		if strings.Contains(t, "|") && strings.Count(t, "|") >= 2 {
			t = tableRow(t)
		}
		lines = append(lines, t)
	}
	s = strings.Join(lines, " ")
	s = stripLinks(s)
	s = emphasis.Replace(s)
	s = stripStars(s)
	return strings.Join(strings.Fields(s), " ")
}

// emphasis removes paired emphasis marks and backticks (a Replacer is immutable and safe
// for concurrent use).
var emphasis = strings.NewReplacer("**", "", "__", "", "~~", "", "`", "")

func isRule(t string) bool {
	if len(t) < 3 {
		return false
	}
	c := t[0]
	if c != '-' && c != '*' && c != '_' && c != '=' {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] != c && t[i] != ' ' {
			return false
		}
	}
	return true
}

func isTableSep(t string) bool {
	if !strings.Contains(t, "-") || !strings.Contains(t, "|") {
		return false
	}
	for _, r := range t {
		if r != '|' && r != '-' && r != ':' && r != ' ' {
			return false
		}
	}
	return true
}

func stripLinePrefix(t string) string {
	for {
		switch {
		case strings.HasPrefix(t, "#"):
			u := strings.TrimLeft(t, "#")
			if len(t)-len(u) > 6 || (u != "" && u[0] != ' ') {
				return t
			}
			t = strings.TrimSpace(u)
		case strings.HasPrefix(t, "> "), t == ">":
			t = strings.TrimSpace(t[1:])
		case len(t) >= 2 && (t[0] == '-' || t[0] == '*' || t[0] == '+') && t[1] == ' ':
			t = strings.TrimSpace(t[2:])
		case strings.HasPrefix(t, "• "):
			t = strings.TrimSpace(strings.TrimPrefix(t, "•"))
		default:
			return t
		}
	}
}

func tableRow(t string) string {
	var cells []string
	for _, c := range strings.Split(t, "|") {
		if c = strings.TrimSpace(c); c != "" {
			cells = append(cells, c)
		}
	}
	return strings.Join(cells, ", ")
}

// stripLinks turns [text](target) and ![alt](target) into text/alt. A bracket not followed
// by "(" is left alone, so control tokens survive.
func stripLinks(s string) string {
	if !strings.Contains(s, "](") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "](")
		if i < 0 {
			break
		}
		open := strings.LastIndex(s[:i], "[")
		end := strings.IndexByte(s[i+2:], ')')
		if open < 0 || end < 0 {
			b.WriteString(s[:i+2])
			s = s[i+2:]
			continue
		}
		pre := s[:open]
		pre = strings.TrimSuffix(pre, "!")
		b.WriteString(pre)
		b.WriteString(s[open+1 : i])
		s = s[i+2+end+1:]
	}
	b.WriteString(s)
	return b.String()
}

// stripStars drops emphasis asterisks but keeps "2 * 3" and "2*3".
func stripStars(s string) string {
	if !strings.Contains(s, "*") {
		return s
	}
	rs := []rune(s)
	out := rs[:0:0]
	for i, r := range rs {
		if r == '*' {
			var prev, next rune = ' ', ' '
			if i > 0 {
				prev = rs[i-1]
			}
			if i+1 < len(rs) {
				next = rs[i+1]
			}
			arith := (unicode.IsDigit(prev) || prev == ' ' || prev == ')') && (unicode.IsDigit(next) || next == ' ' || next == '(')
			if !arith || (prev == ' ' && next == ' ' && !nearDigits(rs, i)) {
				continue
			}
		}
		out = append(out, r)
	}
	return string(out)
}

func nearDigits(rs []rune, i int) bool {
	return i >= 2 && i+2 < len(rs) && (unicode.IsDigit(rs[i-2]) || rs[i-2] == ')') && (unicode.IsDigit(rs[i+2]) || rs[i+2] == '(')
}
