package lang

import (
	"slices"
	"strings"
	"testing"
)

func TestCodes(t *testing.T) {
	want := []string{"zh", "en", "yue", "ja", "ko"} // SenseVoice's, in its order
	if got := Codes(); !slices.Equal(got, want) {
		t.Fatalf("Codes() = %q, want %q", got, want)
	}
	c := Codes()
	c[0] = "xx"
	if Codes()[0] != "zh" {
		t.Error("Codes shares its slice with the caller")
	}
}

func TestTable(t *testing.T) {
	for _, c := range []struct {
		code, name, spoken string
		known              bool
	}{
		{"zh", "Chinese", "Mandarin", true},
		{"en", "English", "English", true},
		{"yue", "Cantonese", "Cantonese", true},
		{"ja", "Japanese", "Japanese", true},
		{"ko", "Korean", "Korean", true},
		{"de", "German", "German", false},
		{"fr", "French", "French", false},
		{"es", "Spanish", "Spanish", false},
		{"it", "Italian", "Italian", false},
		{"ru", "Russian", "Russian", false},
	} {
		if got := Name(c.code); got != c.name {
			t.Errorf("Name(%q) = %q, want %q", c.code, got, c.name)
		}
		if got := Name(strings.ToUpper(c.code)); got != c.name {
			t.Errorf("Name(%q) = %q, want %q", strings.ToUpper(c.code), got, c.name)
		}
		if got := SpokenName(c.code); got != c.spoken {
			t.Errorf("SpokenName(%q) = %q, want %q", c.code, got, c.spoken)
		}
		if got := Known(c.code); got != c.known {
			t.Errorf("Known(%q) = %v, want %v", c.code, got, c.known)
		}
		if Known(strings.ToUpper(c.code)) {
			t.Errorf("Known(%q): codes are lowercase", strings.ToUpper(c.code))
		}
		// every name and spoken name round-trips, in any case and with space around
		for _, n := range []string{c.name, c.spoken, strings.ToLower(c.name), strings.ToUpper(c.spoken), " " + c.name + "\t"} {
			if code, ok := FromName(n); !ok || code != c.code {
				t.Errorf("FromName(%q) = %q, %v, want %q", n, code, ok, c.code)
			}
		}
	}
	for _, code := range Codes() {
		if !Known(code) {
			t.Errorf("Known(%q) = false for one of Codes", code)
		}
		if back, ok := FromName(Name(code)); !ok || back != code {
			t.Errorf("FromName(Name(%q)) = %q, %v", code, back, ok)
		}
		if back, ok := FromName(SpokenName(code)); !ok || back != code {
			t.Errorf("FromName(SpokenName(%q)) = %q, %v", code, back, ok)
		}
	}
}

func TestUnknown(t *testing.T) {
	for _, s := range []string{"", "auto", "nospeech", "xx", "EN-US", "zh-CN", "cmn", "中文", "Klingon", " en"} {
		if got := Name(s); got != s {
			t.Errorf("Name(%q) = %q, want it as it is", s, got)
		}
		if got := SpokenName(s); got != s {
			t.Errorf("SpokenName(%q) = %q, want it as it is", s, got)
		}
		if Known(s) {
			t.Errorf("Known(%q)", s)
		}
	}
	for _, s := range []string{"", "en", "zh", "yue", "english language", "chinese!", "mandarin chinese", "中文", "英语", "Eng"} {
		if code, ok := FromName(s); ok {
			t.Errorf("FromName(%q) = %q, want not ok", s, code)
		}
	}
}

// FuzzFromName: names come from people and language models (a tool call's argument).
func FuzzFromName(f *testing.F) {
	for _, s := range []string{"English", "mandarin", " KOREAN ", "en", "", "中文", "\xff", "german"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if code, ok := FromName(s); ok {
			n := strings.ToLower(strings.TrimSpace(s))
			if n != strings.ToLower(Name(code)) && n != strings.ToLower(SpokenName(code)) {
				t.Errorf("FromName(%q) = %q, whose names are %q and %q", s, code, Name(code), SpokenName(code))
			}
		}
		if name := Name(s); name != s {
			if code, ok := FromName(name); !ok || code != strings.ToLower(s) {
				t.Errorf("Name(%q) = %q, which FromName takes to %q, %v", s, name, code, ok)
			}
		}
		if Known(s) && !slices.Contains(Codes(), s) {
			t.Errorf("Known(%q) but not in Codes", s)
		}
	})
}

func TestCheckWord(t *testing.T) {
	for _, w := range []string{"anouk", "O'Neill", "zoë", "42", "e-mail", "北京"} {
		if err := CheckWord(w); err != nil {
			t.Errorf("%q: %v", w, err)
		}
	}
	for w, want := range map[string]string{
		"":          "an empty word",
		"two words": "not one word",
		"tab\there": "not one word",
		"nul\x00":   "not one word",
		"a\u00a0b":  "not one word",
		"...":       "no letter or digit",
		"’":         "no letter or digit",
		"caf\xe9":   "not UTF-8",
	} {
		if err := CheckWord(w); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", w, err, want)
		}
	}
}
