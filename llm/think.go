package llm

import (
	"strings"
	"unicode"
)

// ThinkFilter splits a streamed text into the answer and the reasoning that models wrap in
// <think>…</think> (DeepSeek-R1, Qwen3 and others served without a reasoning parser). It is
// streaming-safe: a tag split across deltas ("<th" + "ink>") is recognised, and text that might
// be the start of a tag is held back until the next delta decides it. The zero value is ready.
type ThinkFilter struct {
	inThink    bool
	pending    string // a possible tag prefix held back
	afterClose bool   // trim whitespace right after </think>
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// Push feeds one delta and returns the answer text and the reasoning text it releases.
func (f *ThinkFilter) Push(s string) (content, reasoning string) {
	if f.pending == "" && !f.inThink && !f.afterClose && strings.IndexByte(s, '<') < 0 {
		return s, "" // fast path: plain answer text
	}
	s = f.pending + s
	f.pending = ""
	var c, r strings.Builder
	for s != "" {
		tag := thinkOpen
		if f.inThink {
			tag = thinkClose
		}
		i := strings.Index(s, tag)
		if i >= 0 {
			f.emit(&c, &r, s[:i])
			s = s[i+len(tag):]
			f.inThink = !f.inThink
			f.afterClose = !f.inThink
			continue
		}
		// Hold back a suffix that could begin the tag.
		keep := partialSuffix(s, tag)
		f.emit(&c, &r, s[:len(s)-keep])
		f.pending = s[len(s)-keep:]
		break
	}
	return c.String(), r.String()
}

// Flush releases anything held back at the end of the stream.
func (f *ThinkFilter) Flush() (content, reasoning string) {
	var c, r strings.Builder
	f.emit(&c, &r, f.pending)
	f.pending = ""
	return c.String(), r.String()
}

// InThink reports whether the stream is inside a reasoning block.
func (f *ThinkFilter) InThink() bool { return f.inThink }

func (f *ThinkFilter) emit(c, r *strings.Builder, s string) {
	if s == "" {
		return
	}
	if f.inThink {
		r.WriteString(s)
		return
	}
	if f.afterClose {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return
		}
		f.afterClose = false
	}
	c.WriteString(s)
}

// partialSuffix returns the length of the longest suffix of s that is a proper prefix of tag.
func partialSuffix(s, tag string) int {
	n := len(tag) - 1
	if n > len(s) {
		n = len(s)
	}
	for ; n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
