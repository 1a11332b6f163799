package tokenizer

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// tiny builds a byte-level BPE tokenizer.json with the given merges and pre-tokenizer.
func tiny(t testing.TB, merges []string, pre string) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteRune[b])] = b
	}
	for _, m := range merges {
		a, b, _ := strings.Cut(m, " ")
		if _, ok := vocab[a+b]; !ok {
			vocab[a+b] = len(vocab)
		}
	}
	doc := map[string]any{
		"added_tokens": []map[string]any{
			{"id": 1000, "content": "<|end|>", "special": true},
			{"id": 1001, "content": "<x>", "special": false, "lstrip": true, "rstrip": true},
		},
		"normalizer":    map[string]any{"type": "NFC"},
		"pre_tokenizer": json.RawMessage(pre),
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

const qwenPre = `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]}`

func TestSplitters(t *testing.T) {
	cases := []struct {
		split splitter
		in    string
		want  []string
	}{
		{splitters[qwen2Pattern], "Hello world's  end", []string{"Hello", " world", "'s", " ", " end"}},
		{splitters[qwen2Pattern], "I'M 12345", []string{"I", "'M", " ", "1", "2", "3", "4", "5"}},
		{splitters[qwen2Pattern], "a \n\n b", []string{"a", " \n\n", " b"}},
		{splitters[qwen2Pattern], "x!!\n\ny", []string{"x", "!!\n\n", "y"}},
		{splitters[qwen2Pattern], "end   ", []string{"end", "   "}},
		{splitters[llama3Pattern], "12345 x", []string{"123", "45", " x"}},
		{splitters[gpt2Pattern], "Hello  world's 123!!", []string{"Hello", " ", " world", "'s", " 123", "!!"}},
		{splitters[gpt2Pattern], "I'M", []string{"I", "'", "M"}},
	}
	for _, c := range cases {
		got := c.split(c.in)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("split(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The heap merge (long pieces) and the quadratic loop (short ones) agree.
func TestMergeHeapMatchesShort(t *testing.T) {
	tk, _ := qwen3(t)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{" ", "  ", "a", "b", "ab", "the", "\n", "!", "=", "中", "😀", "in", "er"}
	for range 300 {
		var b strings.Builder
		for range rng.IntN(200) + 1 {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		syms := func() []int {
			out := make([]int, len(s))
			for i := 0; i < len(s); i++ {
				out[i] = tk.byteID[s[i]]
			}
			return out
		}
		short, long := tk.mergeShort(syms()), tk.mergeHeap(syms())
		if !equalInts(short, long) {
			t.Fatalf("%q: short %v, heap %v", s, short, long)
		}
	}
}

func TestAddedTokensAndStrip(t *testing.T) {
	tk, err := Parse(tiny(t, []string{"a b"}, qwenPre))
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := tk.TokenID("ab")
	got := tk.Encode("ab<|end|>a  <x>  b")
	want := []int{ab, 1000, 'a', 1001, 'b'}
	if !equalInts(got, want) {
		t.Errorf("Encode = %v, want %v (lstrip/rstrip eat the spaces around <x>)", got, want)
	}
	if s := tk.Decode(got, true); s != "ab"+"a<x>b" {
		t.Errorf("Decode skipping specials = %q", s)
	}
	if !tk.IsSpecial(1000) || tk.IsSpecial(1001) {
		t.Error("IsSpecial wrong")
	}
}

// A character split across byte tokens is released whole, and the stream equals the
// one-shot decode.
func TestStreamingDecode(t *testing.T) {
	tk, err := Parse(tiny(t, nil, qwenPre))
	if err != nil {
		t.Fatal(err)
	}
	s := "a😀中é"
	ids := tk.Encode(s)
	if len(ids) != len(s) {
		t.Fatalf("no merges: want one id per byte, got %v", ids)
	}
	d := tk.NewDecoder(false)
	var parts []string
	for _, id := range ids {
		if p := d.Push(id); p != "" {
			parts = append(parts, p)
		}
	}
	if p := d.Flush(); p != "" {
		parts = append(parts, p)
	}
	if strings.Join(parts, "|") != "a|😀|中|é" {
		t.Errorf("streamed %q", parts)
	}
}

func TestInvalidUTF8(t *testing.T) {
	cases := map[string]string{
		"a\xffb":           "a\uFFFDb",
		"\xe2\x82":         "\uFFFD",             // truncated sequence: one replacement
		"\xe2\x82A":        "\uFFFDA",            // maximal subpart
		"\xed\xa0\x80":     "\uFFFD\uFFFD\uFFFD", // surrogate: each byte
		"\xf0\x9f\x98\x80": "😀",
		"\xc0\xaf":         "\uFFFD\uFFFD",
	}
	for in, want := range cases {
		if got := toValid([]byte(in)); got != want {
			t.Errorf("toValid(%q) = %q, want %q", in, got, want)
		}
	}
	tk, err := Parse(tiny(t, nil, qwenPre))
	if err != nil {
		t.Fatal(err)
	}
	ids := tk.Encode("ok\xff")
	if got := tk.Decode(ids, false); got != "ok\uFFFD" {
		t.Errorf("invalid UTF-8 input decodes to %q", got)
	}
	d := tk.NewDecoder(false)
	out := d.Push(int(0xe2)) + d.Push(int(0x82)) + d.Flush()
	if out != "\uFFFD" {
		t.Errorf("truncated stream flushes %q", out)
	}
}

func TestRefusesOtherLayouts(t *testing.T) {
	good := string(tiny(t, nil, qwenPre))
	cases := map[string]string{
		"wordpiece": strings.Replace(good, `"type":"BPE"`, `"type":"WordPiece"`, 1),
		"regex":     strings.Replace(good, `\\p{N}|`, `\\p{N}+|`, 1),
		"metaspace": string(tiny(t, nil, `{"type":"Metaspace","replacement":"▁"}`)),
		"json":      good[:len(good)/2],
	}
	for name, doc := range cases {
		_, err := Parse([]byte(doc))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if name != "json" && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v does not wrap ErrUnsupported", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(tiny(f, []string{"a b", "ab c"}, qwenPre))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":["a a"]}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := Parse(data)
		if err != nil {
			return
		}
		ids := tk.Encode("hello <|end|> wörld 😀\n\n")
		_ = tk.Decode(ids, false)
	})
}

func FuzzEncode(f *testing.F) {
	tk, err := Parse(tiny(f, []string{"a b", "ab c", "Ġ Ġ"}, qwenPre))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", "abc abc", "  \n\t x", "<|end|><x>", "I'M 123", "\xff\xfe", "é中😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tk.Encode(s)
		got := tk.Decode(ids, false)
		if !utf8.ValidString(got) {
			t.Fatalf("decode gave invalid UTF-8 %q", got)
		}
		if utf8.ValidString(s) && !strings.ContainsAny(s, "\u0300\u0301\u0303\u030a") && got != s && tk.Decode(tk.Encode(got), false) != got {
			t.Fatalf("round trip unstable: %q → %q", s, got)
		}
	})
}
