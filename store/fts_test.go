package store

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var searchCorpus = []struct {
	role Role
	text string
}{
	{RoleUser, "What's the weather like in Paris tomorrow?"},
	{RoleAssistant, "Tomorrow in Paris: sunny, 21 degrees. Lovely weather for a walk."},
	{RoleUser, "今天天气怎么样？"},
	{RoleAssistant, "今天北京晴，气温二十度，天气很好。"},
	{RoleUser, "明天会下雨吗"},
	{RoleUser, "今日の天気はどうですか"},
	{RoleUser, "오늘 날씨가 어때요?"},
	{RoleUser, "Set a timer for the café, crème brûlée in 10 minutes"},
	{RoleUser, "NOT AND OR NEAR(\"quotes\") col:umn * ^start"},
	{RoleUser, "今天點呀？廣東話天氣"},
}

func seedSearch(t testing.TB, s *Store) map[string]int64 {
	t.Helper()
	c := mustConv(t, s, "search")
	ids := map[string]int64{}
	for _, x := range searchCorpus {
		ids[x.text] = mustTurn(t, s, c.ID, x.role, x.text).ID
	}
	return ids
}

func TestSearch(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	ids := seedSearch(t, s)
	c := searchCorpus
	tests := []struct {
		query string
		want  []string // texts expected, any order
		hl    []string // highlighted substrings expected in the first hit
	}{
		{"weather", []string{c[0].text, c[1].text}, []string{"weather"}},
		{"WEATHER paris", []string{c[0].text, c[1].text}, nil},
		{"weath*", []string{c[0].text, c[1].text}, nil},
		{"天气", []string{c[2].text, c[3].text}, []string{"天气"}},
		{"天", []string{c[2].text, c[3].text, c[4].text, c[5].text, c[9].text}, nil},
		{"天气 北京", []string{c[3].text}, nil},
		{"下雨", []string{c[4].text}, []string{"下雨"}},
		{"天気", []string{c[5].text}, []string{"天気"}},
		{"날씨", []string{c[6].text}, []string{"날씨"}},
		{"cafe", []string{c[7].text}, []string{"café"}},
		{"creme brulee", []string{c[7].text}, nil},
		{"NEAR(\"quotes\")", []string{c[8].text}, nil},
		{"col:umn", []string{c[8].text}, nil},
		{"AND", []string{c[8].text}, nil},
		{"天氣", []string{c[9].text}, nil}, // traditional characters are different tokens
		{"snow", nil, nil},
		{"weather 天气", nil, nil}, // terms are ANDed
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			hits, err := s.Search(ctx, tc.query, SearchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, h := range hits {
				got = append(got, h.TurnID)
			}
			var want []int64
			for _, w := range tc.want {
				want = append(want, ids[w])
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("hits %v, want %v (%+v)", got, want, hits)
			}
			if len(hits) > 0 {
				h := hits[0]
				var marked []string
				for _, r := range h.Highlights {
					marked = append(marked, h.Snippet[r[0]:r[1]])
				}
				for _, w := range tc.hl {
					if !slices.ContainsFunc(marked, func(m string) bool { return equalFold(m, w) }) {
						t.Errorf("highlights %q of %q lack %q", marked, h.Snippet, w)
					}
				}
				for _, r := range []rune(h.Snippet) {
					if r == zwsp || r == markOn || r == markOff {
						t.Errorf("snippet %q leaks internal rune %U", h.Snippet, r)
					}
				}
				if h.Title != "search" || h.ConversationID == 0 || h.Role == "" {
					t.Errorf("hit = %+v", h)
				}
			}
		})
	}
	// Snippets keep the original text: no separators between Chinese characters.
	hits, _ := s.Search(ctx, "天气", SearchOptions{})
	for _, h := range hits {
		if h.TurnID == ids[c[3].text] && Highlight(h.Snippet, h.Highlights, "[", "]") != "今天北京晴，气温二十度，[天气]很好。" {
			t.Errorf("snippet = %q", Highlight(h.Snippet, h.Highlights, "[", "]"))
		}
	}
	// Scoping and paging.
	other := mustConv(t, s, "other")
	mustTurn(t, s, other.ID, RoleUser, "weather again")
	if hits, _ := s.Search(ctx, "weather", SearchOptions{ConversationID: other.ID}); len(hits) != 1 {
		t.Errorf("scoped search: %d hits", len(hits))
	}
	if hits, _ := s.Search(ctx, "weather", SearchOptions{Limit: 2, Offset: 2}); len(hits) != 1 {
		t.Errorf("paged search: %d hits", len(hits))
	}
	// Editing a turn reindexes it.
	tr, _ := s.Turn(ctx, ids[c[4].text])
	tr.Text = "明天会下雪吗"
	if err := s.UpdateTurn(ctx, &tr); err != nil {
		t.Fatal(err)
	}
	if hits, _ := s.Search(ctx, "下雨", SearchOptions{}); len(hits) != 0 {
		t.Errorf("old text still indexed: %+v", hits)
	}
	if hits, _ := s.Search(ctx, "下雪", SearchOptions{}); len(hits) != 1 {
		t.Errorf("new text not indexed: %+v", hits)
	}
}

func equalFold(a, b string) bool {
	return len(a) == len(b) && (a == b || lower(a) == lower(b))
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

func TestFTSQuery(t *testing.T) {
	tests := []struct{ in, want string }{
		{"weather", `"weather"`},
		{"  hello   world ", `"hello" "world"`},
		{`say "hi"`, `"say" """hi"""`},
		{"weath*", `"weath"*`},
		{"天气", "\"天\u200b气\""},
		{"AND OR", `"AND" "OR"`},
		{"a\x00b", `"a" "b"`},
		{"!!! ???", ""},
		{"***", ""},
		{"", ""},
	}
	for _, tc := range tests {
		got, err := FTSQuery(tc.in)
		if tc.want == "" {
			if !errors.Is(err, ErrEmptyQuery) {
				t.Errorf("FTSQuery(%q) = %q, %v; want ErrEmptyQuery", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("FTSQuery(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzSearch: no user input may produce an SQL or FTS5 syntax error.
func FuzzSearch(f *testing.F) {
	s, err := Open(filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	seedSearch(f, s)
	for _, q := range []string{
		"weather", `"`, `""`, `"""`, "*", "a*", "*a", "^a", "a:b", "(", ")", "a OR b", "NOT a", "NEAR(a b, 2)",
		"天气", "今天*", "\x00", "\xff\xfe", "-a", "+a", "a-b", "{a b}", "'", "`", "\u200b", "\ue000x\ue001",
		"a\u0301", "\u0301", "ﬁ", "١٢٣", "😀", "a AND", "AND", "a\"*b", "\"*", "\t\n", "e\u0300*", "ٱ",
	} {
		f.Add(q)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, q string) {
		for _, o := range []SearchOrder{SearchNewest, SearchRelevance} {
			hits, err := s.Search(ctx, q, SearchOptions{Limit: 3, Order: o})
			if err != nil && !errors.Is(err, ErrEmptyQuery) {
				t.Fatalf("Search(%q): %v", q, err)
			}
			for _, h := range hits {
				last := 0
				for _, r := range h.Highlights {
					if r[0] < last || r[1] <= r[0] || r[1] > len(h.Snippet) ||
						!utf8.ValidString(h.Snippet[r[0]:r[1]]) || !utf8.ValidString(h.Snippet[:r[0]]) {
						t.Fatalf("Search(%q): bad highlight %v in %q", q, r, h.Snippet)
					}
					last = r[1]
				}
			}
		}
	})
}

// FuzzFTSText: the indexed copy differs from the text only by the zero-width separators (and
// the internal runes it blanks), so snippets map back to the original text exactly.
func FuzzFTSText(f *testing.F) {
	for _, s := range []string{"", "hello world", "今天天气很好", "今日の天気", "날씨가 좋아", "mixed 中文 text", "\u200b", "\ue000\ue001", "a\x00b", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		idx := ftsText(s)
		if !utf8.ValidString(idx) {
			t.Fatalf("ftsText(%q) = %q is not UTF-8", s, idx)
		}
		clean, hl := cleanSnippet(idx)
		if len(hl) != 0 {
			t.Fatalf("highlights from unmarked text %q", s)
		}
		want := strings.Map(func(r rune) rune {
			switch r {
			case zwsp, markOn, markOff, 0:
				return ' '
			}
			return r
		}, strings.ToValidUTF8(s, "\ufffd"))
		if clean != want {
			t.Fatalf("round trip of %q = %q, want %q", s, clean, want)
		}
		// Highlight never panics or cuts outside the snippet.
		_ = Highlight(clean, [][2]int{{0, len(clean)}, {len(clean) + 1, len(clean) + 2}}, "[", "]")
	})
}
