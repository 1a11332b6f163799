package textnorm

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormalizeEN(t *testing.T) {
	tests := []struct{ in, want string }{
		{"123", "one hundred twenty-three"},
		{"0", "zero"},
		{"1,000,001", "one million one"},
		{"-42", "minus forty-two"},
		{"3.14", "three point one four"},
		{"I have 2 cats.", "I have two cats."},
		{"the 21st and 3rd", "the twenty-first and third"},
		{"on 2024-03-05", "on March fifth, twenty twenty-four"},
		{"on 12/25/1999", "on December twenty-fifth, nineteen ninety-nine"},
		{"at 14:30", "at fourteen thirty"},
		{"at 9:05 pm", "at nine oh five PM"},
		{"at 7:00", "at seven o'clock"},
		{"at 3pm, ok", "at three PM, ok"},
		{"$12.50", "twelve dollars and fifty cents"},
		{"$1", "one dollar"},
		{"€5", "five euros"},
		{"£2.01", "two pounds and one penny"},
		{"$3.5M", "three point five million dollars"},
		{"50%", "fifty percent"},
		{"5 km", "five kilometers"},
		{"1kg", "one kilogram"},
		{"20°C", "twenty degrees Celsius"},
		{"100 km/h", "one hundred kilometers per hour"},
		{"Dr. Smith vs. Mr. Jones", "Doctor Smith versus Mister Jones"},
		{"e.g. this", "for example this"},
		{"Tom & Jerry", "Tom and Jerry"},
		{"born in 1984", "born in nineteen eighty-four"},
		{"since 2005", "since two thousand five"},
		{"in the 1990s", "in the nineteen nineties"},
		{"by 2100", "by two thousand one hundred"},
		{"1984 people", "one thousand nine hundred eighty-four people"},
		{"1234567890123456789", "one two three four five six seven eight nine zero one two three four five six seven eight nine"},
	}
	for _, tt := range tests {
		if got := Normalize(tt.in, "en-us"); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNormalizeZH(t *testing.T) {
	tests := []struct{ in, want string }{
		{"123", "一百二十三"},
		{"10", "十"},
		{"15", "十五"},
		{"105", "一百零五"},
		{"1005", "一千零五"},
		{"10000", "一万"},
		{"10086", "一万零八十六"},
		{"100000000", "一亿"},
		{"120000", "十二万"},
		{"3.5", "三点五"},
		{"-7", "负七"},
		{"我有2个苹果", "我有两个苹果"},
		{"2024年3月5日", "二零二四年三月五日"},
		{"2024-03-05", "二零二四年三月五日"},
		{"14:30", "十四点三十分"},
		{"8:05", "八点零五分"},
		{"9:00", "九点整"},
		{"¥12.5", "十二点五元"},
		{"$5", "五美元"},
		{"50%", "百分之五十"},
		{"5km", "五公里"},
		{"30℃", "三十摄氏度"},
	}
	for _, tt := range tests {
		if got := Normalize(tt.in, "zh"); got != tt.want {
			t.Errorf("Normalize(%q, zh) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRuns(t *testing.T) {
	tests := []struct {
		in, def string
		want    string
	}{
		{"Hello world", "en", "en:Hello world"},
		{"我喜欢Python编程", "zh", "zh:我喜欢|en:Python|zh:编程"},
		{"Hello 你好 world", "en", "en:Hello|zh: 你好|en: world"},
		{"我有3个apple", "zh", "zh:我有3个|en:apple"},
		{"123 go", "en", "en:123 go"},
		{"Привет, world", "en", "ru:Привет,|en: world"},
		{"こんにちは世界", "en", "ja:こんにちは世界"},
		{"", "en", ""},
	}
	for _, tt := range tests {
		var parts []string
		for _, r := range Runs(tt.in, tt.def) {
			parts = append(parts, r.Lang+":"+r.Text)
		}
		if got := strings.Join(parts, "|"); got != tt.want {
			t.Errorf("Runs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNormalizeMixed(t *testing.T) {
	got := NormalizeMixed("我有3个apple and 2 pears", "zh")
	s := fmt.Sprint(got)
	if !strings.Contains(s, "三个") || !strings.Contains(s, "two pears") {
		t.Errorf("NormalizeMixed = %s", s)
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"$12.50 on 2024-03-05 at 9:05 pm", "我有2个苹果，¥12.5，50%", "1,2,3", "99999999999999999999", "-.5", "5 km/h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, lang := range []string{"en", "zh"} {
			out := Normalize(s, lang)
			if utf8.ValidString(s) && !utf8.ValidString(out) {
				t.Fatalf("invalid UTF-8 out of %q", s)
			}
			if len(out) > 64*len(s)+64 {
				t.Fatalf("output blew up: %d bytes from %d", len(out), len(s))
			}
		}
		_ = Runs(s, "en")
	})
}
