package control

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// render is a compact, readable form of a script for table tests.
func render(s *Script) string {
	var parts []string
	for _, it := range s.Items {
		switch it.Kind {
		case Text:
			m := ""
			if it.Emphasis {
				m += "!"
			}
			if it.Laughing {
				m += "~"
			}
			if it.Rate != 1 {
				m += fmt.Sprintf("@%g", it.Rate)
			}
			parts = append(parts, fmt.Sprintf("%q%s", strings.Join(strings.Fields(it.Text), " "), m))
		case Pause:
			if it.Strength != "" {
				parts = append(parts, "pause:"+string(it.Strength))
			} else {
				parts = append(parts, "pause:"+it.Pause.String())
			}
		case SpeedChange:
			parts = append(parts, fmt.Sprintf("speed:%g", it.Rate))
		case Laugh:
			parts = append(parts, "laugh")
		default:
			parts = append(parts, it.Kind.String())
		}
	}
	return strings.Join(parts, " ")
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, in, want string
		warnings       int
	}{
		{"plain", "Hello world.", `"Hello world."`, 0},
		{"chattts word level", "Hi [uv_break] there [v_break] you [lbreak] ok [laugh] ha",
			`"Hi" pause:uv_break "there" pause:v_break "you" pause:lbreak "ok" laugh "ha"`, 0},
		{"chattts sentence level", "[oral_2][laugh_0][break_6] Hello [break_3] there",
			`pause:break_6 "Hello" pause:break_3 "there"`, 0},
		{"speed token", "slow [speed_0] now [speed_9] fast", `"slow" speed:0.5 "now"@0.5 speed:1.4 "fast"@1.4`, 0},
		{"uppercase token", "a [UV_BREAK] b", `"a" pause:uv_break "b"`, 0},
		{"cosyvoice tokens", "[breath] so [laughter] then [cough] and [sigh] end", `breath "so" laugh "then" cough "and" sigh "end"`, 0},
		{"cosyvoice strong", "this is <strong>very</strong> good", `"this is" "very"! "good"`, 0},
		{"cosyvoice laughter span", "<laughter>so funny</laughter> right", `"so funny"~ "right"`, 0},
		{"nesting", "<laughter>a <strong>b</strong> c</laughter>", `"a"~ "b"!~ "c"~`, 0},
		{"ssml break time", `<speak>one<break time="300ms"/>two<break time='1.5s'/>three</speak>`, `"one" pause:300ms "two" pause:1.5s "three"`, 0},
		{"ssml break strength", `a<break strength="strong"/>b<break/>c`, `"a" pause:strong "b" pause:medium "c"`, 0},
		{"ssml prosody", `a <prosody rate="slow">b <prosody rate="200%">c</prosody> d</prosody> e`,
			`"a" speed:0.75 "b"@0.75 speed:1.5 "c"@1.5 speed:0.75 "d"@0.75 speed:1 "e"`, 0},
		{"prosody relative", `<prosody rate="+50%">x</prosody>`, `speed:1.5 "x"@1.5 speed:1`, 0},
		{"entities", `<speak>Tom &amp; Jerry &lt;3</speak>`, `"Tom & Jerry <3"`, 0},
		{"literal less-than", "1 < 2 and a [ b", `"1 < 2 and a b"`, 0},
		{"unknown token", "a [foo] b", `"a b"`, 1},
		{"unknown tag", "a <blink>b</blink> c", `"a b c"`, 2},
		{"malformed token", "a [laugh b", `"a b"`, 1},
		{"malformed tag", "a <strong b", `"a b"`, 1},
		{"out of range level", "[break_9] [speed_12] x", `"x"`, 2},
		{"bad break time", `a <break time="soon"/> b`, `"a b"`, 1},
		{"huge break clipped", `a<break time="99s"/>b`, `"a" pause:10s "b"`, 1},
		{"unclosed", "<strong>a", `"a"!`, 1},
		{"stray close", "a </strong>b", `"a b"`, 1},
		{"crossed nesting", "<laughter>a<strong>b</laughter>c</strong>", `"a"~ "b"!~ "c"`, 2},
		{"prosody pitch warns", `<prosody pitch="high">x</prosody>`, `"x"`, 1},
		{"bad rate", `<prosody rate="9000%">x</prosody>`, `"x"`, 1},
		{"comment skipped", "a <!-- hidden --> b", `"a b"`, 0},
		{"sentence tags", "<s>one</s><s>two</s>", `"one" pause:sentence "two" pause:sentence`, 0},
		{"chinese", "你好[laugh]世界", `"你好" laugh "世界"`, 0},
		{"self-closing laughter", "ha<laughter/>ha", `"ha" laugh "ha"`, 0},
		{"prefixed ssml", `a<ssml:break time="1s"/>b`, `"a" pause:1s "b"`, 0},
		{"empty", "", ``, 0},
		{"sub alias", `the <sub alias="World Wide Web">WWW</sub> is big`, `"the World Wide Web is big"`, 0},
		{"say-as characters", `code <say-as interpret-as="characters">ab12</say-as>.`, `"code a b 1 2 ."`, 0},
		{"say-as digits", `call <say-as interpret-as="telephone">555-1234</say-as>`, `"call 5 5 5 1 2 3 4"`, 0},
		{"say-as unknown", `<say-as interpret-as="ordinal">3</say-as>`, `"3"`, 1},
		{"voice warns", `<voice name="x">hi</voice>`, `"hi"`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Parse(tt.in)
			if got := render(s); got != tt.want {
				t.Errorf("Parse(%q)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if len(s.Warnings) != tt.warnings {
				t.Errorf("Parse(%q): %d warnings %v, want %d", tt.in, len(s.Warnings), s.Warnings, tt.warnings)
			}
		})
	}
}

func TestSentenceLevels(t *testing.T) {
	s := Parse("[oral_2][laugh_1][break_4]Hello.")
	if s.Oral != 2 || s.LaughLevel != 1 || s.BreakLevel != 4 {
		t.Errorf("levels = %d %d %d, want 2 1 4", s.Oral, s.LaughLevel, s.BreakLevel)
	}
	if s2 := Parse("Hello."); s2.Oral != -1 || s2.LaughLevel != -1 || s2.BreakLevel != -1 {
		t.Errorf("absent levels = %d %d %d, want -1", s2.Oral, s2.LaughLevel, s2.BreakLevel)
	}
}

func TestSentences(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"One. Two! Three?", []string{"One.", "Two!", "Three?"}},
		{"Pi is 3.14 today. Yes.", []string{"Pi is 3.14 today.", "Yes."}},
		{"He said \"hi.\" Then left.", []string{"He said \"hi.\"", "Then left."}},
		{"你好。世界！", []string{"你好。", "世界！"}},
		{"e.g. this... and that", []string{"e.g. this...", "and that"}},
		{"a [uv_break] b. c", []string{"a|b.", "c"}},
		{"", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, sent := range Parse(tt.in).Sentences() {
			var ws []string
			for _, it := range sent {
				if it.Kind == Text {
					ws = append(ws, strings.TrimSpace(it.Text))
				}
			}
			got = append(got, strings.Join(ws, "|"))
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Sentences(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCalibration(t *testing.T) {
	c := DefaultCalibration()
	prev := time.Duration(-1)
	for n := 0; n <= 7; n++ {
		s := Parse(fmt.Sprintf("a [break_%d] b", n))
		d := c.Duration(s.Items[1])
		if d != time.Duration(n)*100*time.Millisecond || d <= prev {
			t.Errorf("break_%d = %v", n, d)
		}
		prev = d
	}
	if c.Duration(Item{Kind: Pause, Pause: 300 * time.Millisecond}) != 300*time.Millisecond {
		t.Error("explicit pause not honoured")
	}
	if !(c.Strengths[UVBreak] < c.Strengths[VBreak] && c.Strengths[VBreak] < c.Strengths[LBreak]) {
		t.Error("uv_break < v_break < lbreak must hold")
	}
}

// FuzzParse checks that any input parses without panicking, that no control syntax survives
// into spoken text, and that the output is valid UTF-8.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"Hi [uv_break] there [laugh] [break_3] [speed_2]",
		`<speak><prosody rate="slow">a<break time="300ms"/><strong>b</strong></prosody></speak>`,
		"<laughter>x<strong>y</laughter>z", "[laugh", "<strong", "a < b > c", "&amp;&lt;",
		"[oral_9][laugh_2][break_7]", "<!-- x", "<break time=\"1e309s\"/>", "[\xff]", "<a b=\"",
		strings.Repeat("<strong>", 100), `<sub alias="[laugh]">x</sub>`, `<say-as interpret-as="characters">[uv_break]</say-as>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s := Parse(in)
		for _, it := range s.Items {
			if !utf8.ValidString(it.Text) {
				t.Fatalf("invalid UTF-8 in %q", it.Text)
			}
			if it.Kind == Text {
				// a well-formed known token never reaches the spoken text
				for _, tok := range []string{"[uv_break]", "[laugh]", "[lbreak]", "<break", "</strong>", "<strong>"} {
					if strings.Contains(strings.ToLower(it.Text), tok) && !strings.Contains(in, "&lt;") {
						t.Fatalf("control %s spoken in %q (input %q)", tok, it.Text, in)
					}
				}
			}
			if it.Kind == Pause && (it.Pause < 0 || it.Pause > MaxPause) {
				t.Fatalf("pause %v out of range", it.Pause)
			}
			if it.Rate < 0 || it.Rate > 100 {
				t.Fatalf("rate %v out of range", it.Rate)
			}
		}
		if len(s.Warnings) > maxWarn+1 {
			t.Fatalf("%d warnings", len(s.Warnings))
		}
		_ = s.Sentences()
	})
}
