package asr

import (
	"encoding/binary"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// oneHot builds t×v logits whose argmax per frame is path[f].
func oneHot(path []int, v int) []float32 {
	l := make([]float32, len(path)*v)
	for f, id := range path {
		for i := range v {
			l[f*v+i] = -1
		}
		l[f*v+id] = 3
	}
	return l
}

func TestGreedyCTCVector(t *testing.T) {
	path := []int{1, 1, 0, 2, 3, 3, 0, 4, 5}
	ids, frames := greedyCTC(oneHot(path, 6), len(path), 6, 0, -1, nil, nil)
	if !slices.Equal(ids, []int32{1, 2, 3, 4, 5}) || !slices.Equal(frames, []int32{0, 3, 4, 7, 8}) {
		t.Fatalf("ids %v frames %v; want [1 2 3 4 5] at [0 3 4 7 8]", ids, frames)
	}
}

func TestGreedyCTCEdges(t *testing.T) {
	cases := []struct {
		name   string
		logits []float32
		t, v   int
		ban    int
		ids    []int32
		frames []int32
	}{
		{"tie takes the first maximum", []float32{0, 2, 2, 1, 1, 1}, 2, 3, -1, []int32{1}, []int32{0}},
		{"repeat after blank is kept", oneHot([]int{2, 0, 2}, 3), 3, 3, -1, []int32{2, 2}, []int32{0, 2}},
		{"ban moves to the runner-up", []float32{0, 5, 4, 0, 5, 4}, 2, 3, 1, []int32{2}, []int32{0}},
		{"ban blank", []float32{9, 1, 2}, 1, 3, 0, []int32{2}, []int32{0}},
		{"no frames", nil, 0, 3, -1, nil, nil},
		{"short logits are ignored", []float32{1, 2}, 2, 3, -1, nil, nil},
		{"NaN never wins", []float32{float32(math.NaN()), 1, 2}, 1, 3, -1, nil, nil},
	}
	for _, c := range cases {
		ids, frames := greedyCTC(c.logits, c.t, c.v, 0, c.ban, nil, nil)
		if !slices.Equal(ids, c.ids) || !slices.Equal(frames, c.frames) {
			t.Errorf("%s: ids %v frames %v, want %v %v", c.name, ids, frames, c.ids, c.frames)
		}
	}
}

const testTokens = `<blank> 0
<s> 1
</s> 2
<|en|> 3
<|zh|> 4
<|HAPPY|> 5
<|EMO_UNKNOWN|> 6
<|Speech|> 7
<|Laughter|> 8
<|woitn|> 9
<|withitn|> 10
▁hello 11
▁wor 12
ld 13
▁ 14
你 15
好 16
<0x41> 17
`

func mustTokens(t testing.TB) *Tokens {
	tok, err := ParseTokensTxt(strings.NewReader(testTokens), "tokens.txt")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestDecodeSegment(t *testing.T) {
	tok := mustTokens(t)
	// frames: tags at 0..3, words later
	ids := []int32{3, 5, 8, 9, 11, 12, 13}
	frames := []int32{0, 1, 2, 3, 6, 10, 11}
	s := decodeSegment(tok, ids, frames, 2.0, 1.5)
	if s.Text != "hello world" || s.Lang != "en" || s.Emotion != "HAPPY" || s.Event != "Laughter" {
		t.Fatalf("got %+v", s)
	}
	if !reflect.DeepEqual(s.Tokens, []string{" hello", " wor", "ld"}) {
		t.Errorf("tokens %q", s.Tokens)
	}
	if want := []float64{2.12, 2.36, 2.42}; !reflect.DeepEqual(s.Timestamps, want) {
		t.Errorf("timestamps %v, want %v", s.Timestamps, want)
	}
	r := merge([]Segment{s}, 4)
	words := r.Words()
	want := []Word{{"hello", 2.12, 2.36}, {"world", 2.36, 3.5}}
	if !reflect.DeepEqual(words, want) {
		t.Errorf("words %+v, want %+v", words, want)
	}
	// Fewer than four tokens: tags only, no text (sherpa-onnx skips the first four).
	s = decodeSegment(tok, []int32{3, 5}, []int32{0, 1}, 0, 1)
	if s.Text != "" || s.Lang != "en" || s.Emotion != "HAPPY" || s.Event != "" || len(s.Tokens) != 0 {
		t.Errorf("short: %+v", s)
	}
	// A non-tag piece in a tag position gives no tag; a known tag of another kind neither.
	s = decodeSegment(tok, []int32{11, 3, 8, 9}, []int32{0, 1, 2, 3}, 0, 1)
	if s.Lang != "" || s.Emotion != "" || s.Event != "Laughter" {
		t.Errorf("tags from wrong positions: %+v", s)
	}
	// Stray tags among the text stay tokens but not text.
	s = decodeSegment(tok, []int32{3, 5, 7, 9, 11, 8, 12, 13}, []int32{0, 1, 2, 3, 4, 5, 6, 7}, 0, 1)
	if s.Text != "hello world" || len(s.Tokens) != 4 {
		t.Errorf("stray tag: text %q tokens %q", s.Text, s.Tokens)
	}
}

func TestMergeSegments(t *testing.T) {
	a := Segment{Start: 0, End: 30, Text: "hello there", Lang: "en", Emotion: "NEUTRAL", Event: "Speech", Tokens: []string{" hello", " there"}, Timestamps: []float64{0.1, 0.5}}
	b := Segment{Start: 30, End: 40, Text: "你好", Lang: "zh", Emotion: "HAPPY", Event: "Speech", Tokens: []string{"你", "好"}, Timestamps: []float64{30.2, 30.3}}
	c := Segment{Start: 40, End: 41, Text: "ok", Lang: "en", Emotion: "NEUTRAL", Event: "Speech", Tokens: []string{" ok"}, Timestamps: []float64{40.1}}
	r := merge([]Segment{a, b, c}, 41)
	if r.Text != "hello there你好ok" {
		t.Errorf("text %q", r.Text)
	}
	if r.Lang != "en" || r.Emotion != "NEUTRAL" {
		t.Errorf("tags %q %q: want the longest speech's", r.Lang, r.Emotion)
	}
	if len(r.Tokens) != 5 || len(r.Timestamps) != 5 || !slices.IsSorted(r.Timestamps) {
		t.Errorf("tokens %q at %v", r.Tokens, r.Timestamps)
	}
	ws := r.Words()
	got := []string{}
	for _, w := range ws {
		got = append(got, w.Word)
	}
	if !slices.Equal(got, []string{"hello", "there", "你", "好", "ok"}) {
		t.Errorf("words %q", got)
	}
	if e := merge(nil, 3); e.Text != "" || e.Duration != 3 || e.Tokens == nil || e.Segments == nil {
		t.Errorf("empty merge %+v", e)
	}
}

func TestParseTokensTxt(t *testing.T) {
	tok := mustTokens(t)
	if tok.Len() != 18 || tok.ID("<|woitn|>") != 9 || tok.Piece(11) != "▁hello" || tok.Piece(99) != "" {
		t.Fatalf("parsed wrong: len %d", tok.Len())
	}
	if tok.text[14] != " " || tok.text[17] != "<0x41>" || tok.text[11] != " hello" {
		t.Errorf("text forms %q %q %q", tok.text[14], tok.text[17], tok.text[11])
	}
	// Byte fallback applies only where the id says so (id = 3 + byte), as in sherpa-onnx.
	if got := pieceText(68, "<0x41>"); got != "A" {
		t.Errorf("byte piece at its id: %q", got)
	}
	bad := map[string]string{
		"empty":       "",
		"no id":       "hello\n",
		"bad id":      "a x\n",
		"negative":    "a -1\n",
		"duplicate":   "a 0\nb 0\n",
		"gap":         "a 0\nb 2\n",
		"huge id":     "a 99999999999\n",
		"blank piece": " 0\n",
	}
	for name, in := range bad {
		if _, err := ParseTokensTxt(strings.NewReader(in), "tokens.txt"); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "tokens.txt") {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
	}
}

func TestParseTokensJSON(t *testing.T) {
	tok, err := ParseTokensJSON(strings.NewReader(`["<blank>","<s>","</s>","▁hi"]`), "tokens.json")
	if err != nil || tok.Len() != 4 || tok.text[3] != " hi" {
		t.Fatalf("%v %v", tok, err)
	}
	for _, in := range []string{"", "[]", "{}", `["a",1]`, "[", `"a"`} {
		if _, err := ParseTokensJSON(strings.NewReader(in), "tokens.json"); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzParseTokensTxt(f *testing.F) {
	f.Add([]byte(testTokens))
	f.Add([]byte("a 0\nb 1\r\n\n"))
	f.Add([]byte("<0x41> 68\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := ParseTokensTxt(strings.NewReader(string(b)), "tokens.txt")
		if err != nil {
			return
		}
		for id := range tok.Len() {
			if tok.Piece(id) == "" {
				t.Fatalf("id %d has an empty piece", id)
			}
		}
	})
}

func FuzzParseTokensJSON(f *testing.F) {
	f.Add([]byte(`["<blank>","▁a"]`))
	f.Add([]byte(`[""]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseTokensJSON(strings.NewReader(string(b)), "tokens.json")
	})
}

// FuzzDecode drives the decoding path from raw bytes: the bytes are logits (float32, any
// values including NaN and Inf) for a random frame count, decoded to a Result.
func FuzzDecode(f *testing.F) {
	tok := mustTokens(f)
	v := tok.Len()
	seed := oneHot([]int{3, 5, 7, 9, 0, 11, 11, 0, 12, 13, 15, 16, 17}, v)
	b := make([]byte, 4*len(seed))
	for i, x := range seed {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	f.Add(b, 0.0, true)
	f.Add([]byte{0, 0, 0x80, 0x7f}, 12.5, false)
	f.Add([]byte{}, -1.0, false)
	f.Fuzz(func(t *testing.T, b []byte, offset float64, ban bool) {
		if math.IsNaN(offset) || math.IsInf(offset, 0) {
			offset = 0
		}
		logits := make([]float32, len(b)/4)
		for i := range logits {
			logits[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		frames := len(logits) / v
		banID := -1
		if ban {
			banID = tok.ID("<|EMO_UNKNOWN|>")
		}
		ids, fr := greedyCTC(logits, frames, v, 0, banID, nil, nil)
		if len(ids) != len(fr) || len(ids) > frames {
			t.Fatalf("%d ids, %d frames, %d logit frames", len(ids), len(fr), frames)
		}
		for i, id := range ids {
			if id <= 0 || int(id) >= v || (ban && int(id) == banID) {
				t.Fatalf("bad id %d", id)
			}
			if i > 0 && fr[i] <= fr[i-1] {
				t.Fatalf("frames not increasing: %v", fr)
			}
		}
		s := decodeSegment(tok, ids, fr, offset, float64(frames)*FrameSeconds)
		r := merge([]Segment{s}, s.End)
		if len(r.Tokens) != len(r.Timestamps) || !slices.IsSorted(r.Timestamps) {
			t.Fatalf("%d tokens, %d timestamps %v", len(r.Tokens), len(r.Timestamps), r.Timestamps)
		}
		if !utf8.ValidString(r.Text) {
			t.Fatalf("invalid UTF-8 text %q", r.Text)
		}
		_ = r.Words()
	})
}

// Scores no decoder can rank (NaN, +Inf: a damaged model) are refused, naming the frame and
// token; -Inf (a token the model rules out) and finite scores pass.
func TestCheckLogits(t *testing.T) {
	inf := float32(math.Inf(1))
	if err := checkLogits([]float32{0, -inf, 3, -1e30, 1e30, 2}, 3); err != nil {
		t.Errorf("finite and -Inf scores: %v", err)
	}
	for _, c := range []struct {
		logits []float32
		want   string
	}{
		{[]float32{0, 1, 2, 3, float32(math.NaN()), 5}, "NaN (frame 1, token 1)"},
		{[]float32{inf, 1, 2}, "+Inf (frame 0, token 0)"},
	} {
		if err := checkLogits(c.logits, 3); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.logits, err, c.want)
		}
	}
}
