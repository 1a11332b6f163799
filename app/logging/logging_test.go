package logging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLevel(t *testing.T) {
	for in, ok := range map[string]bool{"debug": true, "INFO": true, " warn ": true, "error": true, "loud": false, "": false} {
		if _, err := ParseLevel(in); (err == nil) != ok {
			t.Errorf("ParseLevel(%q) err = %v", in, err)
		}
	}
}

func TestRotatingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "logs", "parley.log")
	r, err := OpenRotating(p, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 39) + "\n" // 40 bytes
	for i := 0; i < 10; i++ {
		if _, err := r.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	for _, name := range []string{p, p + ".1", p + ".2"} {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.Size() > 100 {
			t.Errorf("%s is %d bytes, over the limit", name, st.Size())
		}
	}
	if _, err := os.Stat(p + ".3"); err == nil {
		t.Error("kept more than 2 old files")
	}
	if _, err := r.Write([]byte("late")); err == nil {
		t.Error("write after close succeeded")
	}
}
