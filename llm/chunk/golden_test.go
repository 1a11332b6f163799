package chunk

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGolden streams each testdata/golden/*.txt answer in 3-rune tokens and compares the
// chunks (one per line, "|" marking the token that emitted them) with the .golden file.
// Regenerate with: go test ./llm/chunk -run TestGolden -update
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/golden/*.txt")
	if len(files) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		c := New(DefaultOptions())
		for i, tok := range tokens(string(in), 3) {
			for _, ch := range c.Push(tok) {
				b.WriteString(strconv.Itoa(i) + "|" + ch + "\n")
			}
		}
		for _, ch := range c.Flush() {
			b.WriteString("flush|" + ch + "\n")
		}
		golden := strings.TrimSuffix(f, ".txt") + ".golden"
		if *update {
			if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if b.String() != string(want) {
			t.Errorf("%s:\n got:\n%s\nwant:\n%s", f, b.String(), want)
		}
	}
}
