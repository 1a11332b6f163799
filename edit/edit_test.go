package edit

import (
	"testing"
	"unicode/utf8"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2},
		{"same", "same", 0}, {"añb", "anb", 1}, {"四十", "十四", 2},
	} {
		if got := Runes(c.a, c.b); got != c.want {
			t.Errorf("Runes(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	if got := Distance([]string{"set", "a", "timer"}, []string{"set", "the", "timer", "now"}); got != 2 {
		t.Errorf("word distance %d, want 2", got)
	}
}

// FuzzDistance checks the metric's properties on any pair of strings: zero only for equal
// strings, symmetric, bounded by the longer length and at least the length difference, and
// the triangle inequality through the empty string.
func FuzzDistance(f *testing.F) {
	f.Add("kitten", "sitting")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		d := Runes(a, b)
		la, lb := utf8.RuneCountInString(a), utf8.RuneCountInString(b)
		if (d == 0) != (a == b) {
			t.Fatalf("Runes(%q, %q) = %d", a, b, d)
		}
		if d != Runes(b, a) || d > max(la, lb) || d < max(la-lb, lb-la) || d > la+lb {
			t.Fatalf("Runes(%q, %q) = %d breaks a metric property", a, b, d)
		}
	})
}

func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"sense", "sensevoice-small", 0}, {"sensevoce", "sensevoice-small", 1}, {"", "x", 0}, {"abc", "", 3}, {"kokro", "kokoro-82m", 1},
	} {
		if got := Prefix(c.a, c.b); got != c.want {
			t.Errorf("Prefix(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
