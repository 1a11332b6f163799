package chunk

import (
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// tokens splits s the way a tokenizer might: pieces of 1 to 4 runes that cut through words,
// numbers and punctuation.
func tokens(s string, pattern ...int) []string {
	if len(pattern) == 0 {
		pattern = []int{3, 1, 2, 4, 2}
	}
	rs := []rune(s)
	var out []string
	for i, k := 0, 0; i < len(rs); k++ {
		n := pattern[k%len(pattern)]
		if i+n > len(rs) {
			n = len(rs) - i
		}
		out = append(out, string(rs[i:i+n]))
		i += n
	}
	return out
}

func stream(opt Options, toks []string) []string {
	c := New(opt)
	var out []string
	for _, t := range toks {
		out = append(out, c.Push(t)...)
	}
	return append(out, c.Flush()...)
}

func noComma() Options { o := DefaultOptions(); o.FirstComma = false; return o }

var cases = []struct {
	name  string
	opt   Options
	in    string
	want  []string
	loose bool // rune by rune, a closing quote may arrive after its sentence was sent
}{
	{"en basic", DefaultOptions(), "Hello there! How are you today? I'm fine.",
		[]string{"Hello there!", "How are you today?", "I'm fine."}, false},
	{"en abbreviations and decimals", DefaultOptions(), "Mr. Smith met Dr. Jones at 3.30 today. They talked for 2.5 hours.",
		[]string{"Mr. Smith met Dr. Jones at 3.30 today.", "They talked for 2.5 hours."}, false},
	{"en e.g. i.e. with first comma", DefaultOptions(), "Use it, e.g. for tests, i.e. always. Done.",
		[]string{"Use it, e.g. for tests,", "i.e. always.", "Done."}, false},
	{"en etc", noComma(), "I like cats, dogs, etc. and birds. They are cute.",
		[]string{"I like cats, dogs, etc. and birds.", "They are cute."}, false},
	{"en initials", noComma(), "J. R. R. Tolkien wrote it. Read it.",
		[]string{"J. R. R. Tolkien wrote it.", "Read it."}, false},
	{"numbered list", DefaultOptions(), "Here are the steps:\n1. Open the app.\n2. Click start.\n3. Talk.",
		[]string{"Here are the steps:", "1. Open the app.", "2. Click start.", "3. Talk."}, false},
	{"url", DefaultOptions(), "Visit https://example.com/a.b?x=1! Then relax. Or www.go.dev. Fine.",
		[]string{"Visit https://example.com/a.b?x=1!", "Then relax.", "Or www.go.dev.", "Fine."}, false},
	{"code block", DefaultOptions(), "Run this:\n```go\nfmt.Println(\"hi. there\")\nos.Exit(1)\n```\nThat prints it.",
		[]string{"Run this:", "fmt.Println(\"hi. there\") os.Exit(1)", "That prints it."}, false},
	{"inline code", DefaultOptions(), "Call `os.Exit(1)` now. Bye now.",
		[]string{"Call os.Exit(1) now.", "Bye now."}, false},
	{"markdown", DefaultOptions(), "**Sure!** Here is a *quick* list:\n- apples\n- pears and plums\n\n## Summary\nThat's [the docs](https://x.y/z). Done.",
		[]string{"Sure!", "Here is a quick list:", "apples", "pears and plums", "Summary", "That's the docs.", "Done."}, false},
	{"control tokens", DefaultOptions(), "Oh really? [laugh] That is funny [uv_break] indeed. [break_3] Bye now.",
		[]string{"Oh really?", "[laugh] That is funny [uv_break] indeed.", "[break_3] Bye now."}, false},
	{"table", DefaultOptions(), "| Name | Age |\n|---|---|\n| Ann | 30 |\n| Bob | 4 |\n",
		[]string{"Name, Age", "Ann, 30", "Bob, 4"}, false},
	{"quotes", DefaultOptions(), `He said "stop." Then he left.`,
		[]string{`He said "stop."`, "Then he left."}, true},
	{"ellipsis", DefaultOptions(), "Well… let me think. Hmm…",
		[]string{"Well…", "let me think.", "Hmm…"}, false},
	{"tiny fragments merge", DefaultOptions(), "Hi! Ok. It works.",
		[]string{"Hi! Ok.", "It works."}, false},
	{"thousands", DefaultOptions(), "That costs 1,000 dollars, roughly. Sure.",
		[]string{"That costs 1,000 dollars,", "roughly.", "Sure."}, false},
	{"zh basic", DefaultOptions(), "你好！我是Parley，一个语音助手。今天天气很好；我们出去走走吧？",
		[]string{"你好！", "我是Parley，一个语音助手。", "今天天气很好；", "我们出去走走吧？"}, false},
	{"zh short first comma is held", DefaultOptions(), "好的，我来帮你查一下天气。稍等。",
		[]string{"好的，我来帮你查一下天气。", "稍等。"}, false},
	{"zh first comma", DefaultOptions(), "这个问题很有意思，我们可以从三个方面来看。第一，成本。",
		[]string{"这个问题很有意思，", "我们可以从三个方面来看。", "第一，成本。"}, false},
	{"zh numbers", DefaultOptions(), "圆周率约等于3.14。一共1,000元。",
		[]string{"圆周率约等于3.14。", "一共1,000元。"}, false},
	{"zh quotes", DefaultOptions(), "他说：“走吧。”然后离开了。",
		[]string{"他说：“走吧。”", "然后离开了。"}, true},
	{"mixed", DefaultOptions(), "OK，我明白了. Let's go! 走吧。Parley 说 hello。",
		[]string{"OK，我明白了.", "Let's go!", "走吧。", "Parley 说 hello。"}, false},
	{"raw mode keeps markdown", Options{}, "**Bold** text. `code` here.",
		[]string{"**Bold** text.", "`code` here."}, false},
}

func TestChunker(t *testing.T) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if got := Split(tt.in, tt.opt); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("whole:\n got %q\nwant %q", got, tt.want)
			}
			if got := stream(tt.opt, tokens(tt.in)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("tokens:\n got %q\nwant %q", got, tt.want)
			}
			got := stream(tt.opt, tokens(tt.in, 1))
			want := tt.want
			if tt.loose {
				want = nil
				for i := range tt.want {
					want = append(want, strings.TrimRightFunc(tt.want[i], isCloser))
				}
				for i := range got {
					got[i] = strings.TrimRightFunc(got[i], isCloser)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("rune by rune:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestEmissionIsImmediate(t *testing.T) {
	// Each sentence must come out of the Push of the token that completes it.
	toks := []string{"Hel", "lo", " there", ".", " How", " are", " you", "?", " I", " am", " fine", "!",
		" 你", "好", "。", "再", "见", "！", " Good", "bye", ";", " see", " you", "…", " Last", " one", "."}
	completing := map[int]bool{3: true, 7: true, 11: true, 14: true, 17: true, 20: true, 23: true, 26: true}
	c := New(DefaultOptions())
	for i, tok := range toks {
		out := c.Push(tok)
		if completing[i] != (len(out) == 1) {
			t.Errorf("token %d %q emitted %q; completes a sentence: %v", i, tok, out, completing[i])
		}
	}
	if rest := c.Flush(); len(rest) != 0 {
		t.Errorf("left at flush: %q", rest)
	}
}

func TestAmbiguousWaitsOneRune(t *testing.T) {
	tests := []struct {
		toks []string
		want [][]string // per push, then flush
	}{
		{[]string{"It is 3", ".", "14 now", ". Ok", " then."}, [][]string{nil, nil, nil, {"It is 3.14 now."}, {"Ok then."}, nil}},
		{[]string{"I have 3", ".", " Yes", "."}, [][]string{nil, nil, {"I have 3."}, {"Yes."}, nil}},
		{[]string{"See Dr", ".", " Who", "."}, [][]string{nil, nil, nil, {"See Dr. Who."}, nil}},
		{[]string{"Go to http://a.b", ".", "c now."}, [][]string{nil, nil, {"Go to http://a.b.c now."}, nil}},
		{[]string{"Well, it is", " ``", "`go", "\nx := 1.5\n", "```", " ok."}, [][]string{nil, nil, {"Well, it is"}, nil, {"x := 1.5"}, nil, {"ok."}}},
	}
	for _, tt := range tests {
		c := New(DefaultOptions())
		var got [][]string
		for _, tok := range tt.toks {
			got = append(got, c.Push(tok))
		}
		got = append(got, c.Flush())
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q:\n got %q\nwant %q", tt.toks, got, tt.want)
		}
	}
}

func TestMaxLength(t *testing.T) {
	en := strings.Repeat("word ", 120)
	zh := strings.Repeat("中文没有标点", 60)
	for _, in := range []string{en, zh, strings.Repeat("x", 1000), strings.Repeat("[uv_break]", 50)} {
		got := stream(DefaultOptions(), tokens(in))
		if len(got) < 2 {
			t.Errorf("no forced cut in %d runes: %d chunks", len([]rune(in)), len(got))
		}
		for _, ch := range got {
			if n := len([]rune(ch)); n > 220 {
				t.Errorf("chunk of %d runes", n)
			}
			if strings.Contains(ch, "[") != strings.Contains(ch, "]") {
				t.Errorf("control token split: %q", ch)
			}
		}
		if norm(strings.Join(got, "")) != norm(in) {
			t.Errorf("text lost")
		}
	}
}

func TestStrip(t *testing.T) {
	tests := []struct{ in, want string }{
		{"# Title", "Title"},
		{"### **Bold** and __under__", "Bold and under"},
		{"> quoted *text*", "quoted text"},
		{"- item\n* other\n+ third", "item other third"},
		{"See [docs](http://x) and ![img](a.png).", "See docs and img."},
		{"[laugh] ok [uv_break] [break_3]", "[laugh] ok [uv_break] [break_3]"},
		{"2 * 3 = 6 and 2*3", "2 * 3 = 6 and 2*3"},
		{"~~old~~ new", "old new"},
		{"| a | b |\n|:--|--:|\n| 1 | 2 |", "a, b 1, 2"},
		{"---", ""},
		{"```python\nprint(1)\n```", "print(1)"},
		{"snake_case_name", "snake_case_name"},
		{"#hashtag", "#hashtag"},
	}
	for _, tt := range tests {
		if got := Strip(tt.in); got != tt.want {
			t.Errorf("Strip(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestReset(t *testing.T) {
	c := New(DefaultOptions())
	c.Push("```\nhalf a code block")
	c.Reset()
	if got := c.Push("New answer. "); !reflect.DeepEqual(got, []string{"New answer."}) {
		t.Errorf("after reset: %q", got)
	}
}

func norm(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

func letters(s string) []rune {
	var out []rune
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			out = append(out, r)
		}
	}
	return out
}

func isSubsequence(sub, of []rune) bool {
	i := 0
	for _, r := range of {
		if i < len(sub) && sub[i] == r {
			i++
		}
	}
	return i == len(sub)
}

func FuzzChunker(f *testing.F) {
	for _, tt := range cases {
		f.Add(tt.in, uint8(3))
	}
	f.Add("a.b.c. 1.2.3 ``` x", uint8(1))
	f.Add("[[[[((( ](", uint8(2))
	f.Fuzz(func(t *testing.T, in string, step uint8) {
		if !utf8.ValidString(in) {
			return // deltas are decoded JSON strings: always valid UTF-8
		}
		pat := []int{int(step%5) + 1, 2, 1}
		// Raw mode: the chunks are exactly the input, modulo whitespace.
		raw := stream(Options{FirstComma: true}, tokens(in, pat...))
		if norm(strings.Join(raw, "")) != norm(in) {
			t.Fatalf("raw chunks %q lose text of %q", raw, in)
		}
		for _, ch := range raw {
			if ch == "" || ch != strings.TrimSpace(ch) {
				t.Fatalf("bad chunk %q", ch)
			}
		}
		// Speech mode: only removes, never invents.
		sp := stream(DefaultOptions(), tokens(in, pat...))
		for _, ch := range sp {
			if !speakable(ch) {
				t.Fatalf("unspeakable chunk %q", ch)
			}
		}
		if !isSubsequence(letters(strings.Join(sp, " ")), letters(in)) {
			t.Fatalf("speech chunks %q invent text from %q", sp, in)
		}
		// And they lose nothing that stripping the whole text keeps (short texts: a forced
		// cut may split a link; no backticks: a fence's language tag is dropped only when
		// the fence starts a chunk, as it does in real answers).
		if len([]rune(in)) < 200 && !strings.Contains(in, "`") && string(letters(strings.Join(sp, " "))) != string(letters(Strip(in))) {
			t.Fatalf("speech chunks %q != Strip %q of %q", sp, Strip(in), in)
		}
	})
}
