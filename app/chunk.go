package app

import (
	"strings"
	"unicode/utf8"
)

// simpleChunker is the fallback sentence splitter: it cuts after . ! ? and their CJK forms
// when followed by a space (or, for CJK, at once). Parts usually get llm/chunk instead.
type simpleChunker struct{ buf strings.Builder }

func (c *simpleChunker) Push(d string) []string {
	c.buf.WriteString(d)
	s := c.buf.String()
	var out []string
	start := 0
	for i, r := range s {
		end := i + utf8.RuneLen(r)
		switch r {
		case '。', '！', '？':
		case '.', '!', '?':
			if end >= len(s) || (s[end] != ' ' && s[end] != '\n') {
				continue
			}
		default:
			continue
		}
		if t := strings.TrimSpace(s[start:end]); t != "" {
			out = append(out, t)
		}
		start = end
	}
	c.buf.Reset()
	c.buf.WriteString(s[start:])
	return out
}

func (c *simpleChunker) Flush() []string {
	s := strings.TrimSpace(c.buf.String())
	c.buf.Reset()
	if s == "" {
		return nil
	}
	return []string{s}
}
