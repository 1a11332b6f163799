package chattts

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const tokDir = "testdata/tokenizer"

func readJSONLines[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s:%d: %v", path, len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTokenizerMatchesTokenizersJS checks the Go WordPiece tokenizer id for id against
// tokenizers.js (npm @huggingface/tokenizers) on 3007 mixed lines, for a cased ChatTTS-like
// tokenizer.json and an uncased one (train/tts/chattts_tokenizer.py makes both and the corpus;
// train/tts/chattts_tokenizer_ref.mjs the reference ids).
func TestTokenizerMatchesTokenizersJS(t *testing.T) {
	lines := readJSONLines[string](t, filepath.Join(tokDir, "corpus.jsonl"))
	if len(lines) < 3000 {
		t.Fatalf("corpus has %d lines", len(lines))
	}
	for _, variant := range []string{"chattts-like", "uncased"} {
		t.Run(variant, func(t *testing.T) {
			tok, err := LoadTokenizer(filepath.Join(tokDir, variant+".json"))
			if err != nil {
				t.Fatal(err)
			}
			want := readJSONLines[[]int](t, filepath.Join(tokDir, variant+".ids.jsonl"))
			if len(want) != len(lines) {
				t.Fatalf("%d reference lines for %d corpus lines", len(want), len(lines))
			}
			bad := 0
			for i, line := range lines {
				got := tok.Encode(line)
				if !slices.Equal(got, want[i]) && len(got)+len(want[i]) > 0 {
					bad++
					if bad <= 5 {
						t.Errorf("line %d %q:\n got %v\nwant %v\n got %q\nwant %q", i+1, line, got, want[i], toks(tok, got), toks(tok, want[i]))
					}
				}
			}
			if bad > 0 {
				t.Fatalf("%d of %d lines differ", bad, len(lines))
			}
		})
	}
}

func toks(t *Tokenizer, ids []int) []string {
	var s []string
	for _, id := range ids {
		s = append(s, t.Token(id))
	}
	return s
}

// peersDir is where build/setup.sh installs the npm test peers ($PARLEY_PEERS overrides), as
// llm/internal/peer finds them.
func peersDir() string {
	if d := os.Getenv("PARLEY_PEERS"); d != "" {
		return d
	}
	c := os.Getenv("PARLEY_CACHE")
	if c == "" {
		if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
			c = filepath.Join(x, "parley")
		} else if h, err := os.UserHomeDir(); err == nil {
			c = filepath.Join(h, ".cache", "parley")
		}
	}
	return filepath.Join(c, "peers", "current")
}

// TestTokenizerLiveJS reruns the reference with the installed tokenizers.js (build/setup.sh
// peers), so the committed ids are checked against the package itself, not only a file.
func TestTokenizerLiveJS(t *testing.T) {
	dir := peersDir()
	if _, err := os.Stat(filepath.Join(dir, "node_modules/@huggingface/tokenizers")); err != nil {
		t.Skipf("npm test peers not installed in %s (run `build/setup.sh peers`); the committed tokenizers.js ids are checked by TestTokenizerMatchesTokenizersJS", dir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH")
	}
	tmp := t.TempDir()
	for _, f := range []string{"corpus.jsonl", "chattts-like.json", "uncased.json"} {
		b, err := os.ReadFile(filepath.Join(tokDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("node", "../../train/tts/chattts_tokenizer_ref.mjs", dir, tmp).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	for _, v := range []string{"chattts-like", "uncased"} {
		a, _ := os.ReadFile(filepath.Join(tmp, v+".ids.jsonl"))
		b, _ := os.ReadFile(filepath.Join(tokDir, v+".ids.jsonl"))
		if string(a) != string(b) {
			t.Errorf("%s: tokenizers.js now gives other ids than the committed goldens", v)
		}
	}
}

// TestTokenizerRustSemantics covers the inputs where tokenizers.js differs from the Rust
// tokenizers that ChatTTS runs: CJK outside the BMP gets spaces (tokenizers.js looks at UTF-16
// units), and lowercase maps character by character (no final-sigma rule).
func TestTokenizerRustSemantics(t *testing.T) {
	tok, err := LoadTokenizer(filepath.Join(tokDir, "uncased.json"))
	if err != nil {
		t.Fatal(err)
	}
	n := tok.norm
	if got := n.apply("a𠀀b"); got != "a 𠀀 b" {
		t.Errorf("astral CJK: %q", got)
	}
	if got := n.apply("ΟΔΟΣ"); got != "οδοσ" {
		t.Errorf("lowercase: %q", got)
	}
	if got := n.apply("İ"); got != "i" {
		t.Errorf("İ: %q (lowercase to i̇, accent stripped)", got)
	}
}

func TestTokenizerAddedTokens(t *testing.T) {
	for _, v := range []string{"chattts-like", "uncased"} {
		tok, err := LoadTokenizer(filepath.Join(tokDir, v+".json"))
		if err != nil {
			t.Fatal(err)
		}
		ids := tok.Encode("[Stts][spk_emb][speed_5]a[uv_break]b[laugh][Ptts]")
		var names []string
		for _, id := range ids {
			names = append(names, tok.Token(id))
		}
		want := "[Stts] [spk_emb] [speed_5] a [uv_break] b [laugh] [Ptts]"
		if strings.Join(names, " ") != want {
			t.Errorf("%s: %v, want %s", v, names, want)
		}
		if id, ok := tok.ID("[break_0]"); !ok || tok.Token(id) != "[break_0]" {
			t.Errorf("%s: [break_0] → %d %v", v, id, ok)
		}
		if tok.Len() != 6041+50 {
			t.Errorf("%s: %d ids", v, tok.Len())
		}
	}
}

func TestTokenizerBadFiles(t *testing.T) {
	cases := map[string]string{
		"not json":      `{"model":`,
		"bpe":           `{"model":{"type":"BPE","vocab":{"a":0}}}`,
		"empty vocab":   `{"model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{}}}`,
		"no unk":        `{"model":{"type":"WordPiece","unk_token":"[UNK]","vocab":{"a":0}}}`,
		"dup id":        `{"model":{"type":"WordPiece","unk_token":"a","vocab":{"a":0,"b":0}}}`,
		"negative id":   `{"model":{"type":"WordPiece","unk_token":"a","vocab":{"a":-1}}}`,
		"normalizer":    `{"normalizer":{"type":"NFKC"},"model":{"type":"WordPiece","unk_token":"a","vocab":{"a":0}}}`,
		"pre-tokenizer": `{"pre_tokenizer":{"type":"Metaspace"},"model":{"type":"WordPiece","unk_token":"a","vocab":{"a":0}}}`,
		"added empty":   `{"added_tokens":[{"id":1,"content":""}],"model":{"type":"WordPiece","unk_token":"a","vocab":{"a":0}}}`,
	}
	for name, doc := range cases {
		if _, err := ParseTokenizer(name+".json", []byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), name+".json") {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
	}
	if _, err := LoadTokenizer("testdata/nope.json"); err == nil {
		t.Error("missing file accepted")
	}
}

func FuzzTokenizer(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(tokDir, "uncased.json"))
	if err != nil {
		f.Fatal(err)
	}
	tok, err := ParseTokenizer("uncased.json", b)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", "[uv_break]", "Hello, 世界! [laugh_2]", "\x00\xff\xfe", "[MASK] x", strings.Repeat("ab", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, id := range tok.Encode(s) {
			if id < 0 || id >= tok.Len() {
				t.Fatalf("id %d outside 0..%d", id, tok.Len())
			}
		}
	})
}

func FuzzParseTokenizer(f *testing.F) {
	f.Add([]byte(`{"model":{"type":"WordPiece","unk_token":"a","vocab":{"a":0,"##b":1}},"added_tokens":[{"id":2,"content":"[x]"}]}`))
	f.Add([]byte(`{"normalizer":{"type":"BertNormalizer","lowercase":true},"pre_tokenizer":{"type":"BertPreTokenizer"},"model":{"type":"WordPiece","unk_token":"a","vocab":{"a":0}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := ParseTokenizer("fuzz.json", b)
		if err != nil {
			return
		}
		for _, id := range tok.Encode("a ab [x] 中b") {
			if id < 0 || id >= tok.Len() {
				t.Fatalf("id %d outside 0..%d", id, tok.Len())
			}
		}
	})
}
