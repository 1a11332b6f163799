package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu/gputest"
)

func TestParseInterspersed(t *testing.T) {
	cases := []struct {
		args []string
		o    string
		v    bool
		pos  []string
	}{
		{[]string{"hello", "-o", "out.wav"}, "out.wav", false, []string{"hello"}},
		{[]string{"-o", "out.wav", "hello", "world", "-v"}, "out.wav", true, []string{"hello", "world"}},
		{[]string{"hello", "--", "-o", "x"}, "", false, []string{"hello", "-o", "x"}},
		{[]string{"-v", "--", "-"}, "", true, []string{"-"}},
		{[]string{"-", "--o=a.wav"}, "a.wav", false, []string{"-"}},
		{[]string{"--", "--"}, "", false, []string{"--"}},
	}
	for _, c := range cases {
		fs := newFlags(&cliEnv{Stdout: os.Stdout}, "test", "usage: test")
		o := fs.String("o", "", "")
		v := fs.Bool("v", false, "")
		if err := fs.parse(c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if *o != c.o || *v != c.v || !slices.Equal(fs.Args(), c.pos) {
			t.Errorf("%q: -o %q -v %v args %q; want %q %v %q", c.args, *o, *v, fs.Args(), c.o, c.v, c.pos)
		}
	}
}

func TestGlobalArgs(t *testing.T) {
	g, rest := globalArgs([]string{"--set", "a.b=1", "x", "--provider=cpu", "-o", "f", "--config", "c.toml", "--", "--set", "z"})
	if want := []string{"--set", "a.b=1", "--provider=cpu", "--config", "c.toml"}; !slices.Equal(g, want) {
		t.Errorf("globals %q, want %q", g, want)
	}
	if want := []string{"x", "-o", "f", "--", "--set", "z"}; !slices.Equal(rest, want) {
		t.Errorf("rest %q, want %q", rest, want)
	}
}

// Flags after positional arguments work in every subcommand, and the global flags after the
// subcommand.
func TestInterspersedFlagsCLI(t *testing.T) {
	dir := isolate(t)
	out := filepath.Join(dir, "out.wav")
	if code, _, errs := runCLI(t, "say", "hello", "-o", out); code != 0 {
		t.Fatalf("say hello -o out.wav: %d %s", code, errs)
	}
	if b, err := audio.ReadWAVFile(out); err != nil || b.Duration().Seconds() < 0.2 {
		t.Fatalf("say hello -o out.wav wrote %v, %v", b, err)
	}
	code, stdout, errs := runCLI(t, "config", "show", "--set", "tts.speed=1.5", "--log-level", "debug")
	if code != 0 || !strings.Contains(stdout, "speed = 1.5") || !strings.Contains(stdout, `level = "debug"`) {
		t.Errorf("config show --set …: %d %s %s", code, stdout, errs)
	}
	cfg := filepath.Join(dir, "alt.toml")
	os.WriteFile(cfg, []byte("[tts]\nspeed = 0.75\n"), 0o644)
	if code, stdout, _ := runCLI(t, "config", "show", "--config", cfg); code != 0 || !strings.Contains(stdout, "speed = 0.75") {
		t.Errorf("config show --config: %d %s", code, stdout)
	}
	if code, _, errs := runCLI(t, "config", "show", "--provider", "rocm"); code != 1 || !strings.Contains(errs, "runtime.provider") {
		t.Errorf("a global flag after the command is applied (and checked): %d %s", code, errs)
	}
	// chat takes --set after the command (it gave "flag provided but not defined")
	if code, stdout, errs := chatCLI(t, "what is 2 + 2\n", "chat", "--set", "llm.backend=skills", "--no-history"); code != 0 || !strings.Contains(stdout, "4") {
		t.Errorf("chat --set llm.backend=skills: %d %q %s", code, stdout, errs)
	}
	gputest.RequireORT(t)
	wav := speechWAV(t, dir, 16000, 1)
	code, stdout, errs = runCLI(t, "transcribe", wav, "--format", "srt", "--model", tinyASR, "--provider", "cpu")
	if code != 0 || !strings.Contains(stdout, " --> ") {
		t.Errorf("transcribe a.wav --format srt: %d %q %s", code, stdout, errs)
	}
}

// One help style: -h on every command and `parley help CMD` print the usage on standard
// output and exit 0; a bad flag is exit 2 naming it.
func TestHelpEverywhere(t *testing.T) {
	isolate(t)
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, args := range [][]string{{n, "-h"}, {n, "--help"}, {"help", n}} {
			code, stdout, stderr := runCLI(t, args...)
			if code != 0 || !strings.Contains(stdout, "usage: parley "+n) || stderr != "" {
				t.Errorf("parley %s: exit %d\nstdout: %.200s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
			}
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 || !strings.Contains(stdout, "Commands:") || !strings.Contains(stdout, "parley help [COMMAND]") || stderr != "" {
			t.Errorf("parley %s: %d %q %q", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	// A verb's help lists that verb's flags only.
	_, pull, _ := runCLI(t, "models", "pull", "-h")
	_, list, _ := runCLI(t, "help", "models", "list")
	if !strings.Contains(pull, "usage: parley models pull") || strings.Contains(pull, "-json") || strings.Contains(pull, "-model") {
		t.Errorf("models pull -h:\n%s", pull)
	}
	if !strings.Contains(list, "-json") || !strings.Contains(list, "-verify") || strings.Contains(list, "-model") {
		t.Errorf("models list -h:\n%s", list)
	}
	for _, args := range [][]string{{"vad", "--bogus"}, {"say", "hi", "--bogus"}, {"config", "--bogus", "show"}, {"models", "pull", "--json", "x"}} {
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, "flag provided but not defined") || !strings.Contains(stderr, "parley help") {
			t.Errorf("parley %s: exit %d, %q", strings.Join(args, " "), code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "help", "frobnicate"); code != 2 || !strings.Contains(stderr, "unknown command") {
		t.Errorf("help frobnicate: %d %q", code, stderr)
	}
	// Help works even when the configuration is broken.
	bad := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(bad, []byte("[llm]\nurll = 1\n"), 0o644)
	if code, stdout, _ := runCLI(t, "--config", bad, "say", "-h"); code != 0 || !strings.Contains(stdout, "usage: parley say") {
		t.Errorf("say -h with a broken config: %d", code)
	}
}

// Without network, `models pull` prints one line: the model, that the network is unreachable,
// and the files to fetch elsewhere for `parley models import`.
func TestModelsPullOffline(t *testing.T) {
	dir := isolate(t)
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
	t.Setenv("PARLEY_CACHE", filepath.Join(dir, "cache"))
	manifest := filepath.Join(dir, "models.toml")
	sum := sha256.Sum256([]byte("x"))
	os.WriteFile(manifest, []byte(`version = 1
[[model]]
id = "far-asr"
kind = "asr"
  [[model.file]]
  path = "model.onnx"
  urls = ["https://127.0.0.1:1/far/model.onnx"]
  sha256 = "`+hex.EncodeToString(sum[:])+`"
  [[model.file]]
  path = "tokens.txt"
  urls = ["https://127.0.0.1:1/far/tokens.txt"]
`), 0o644)
	t.Setenv("PARLEY_MODELS_MANIFEST", manifest)
	code, stdout, stderr := runCLI(t, "models", "pull", "far-asr")
	if code != 1 || stdout != "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	if lines := strings.Count(stderr, "\n"); lines != 1 {
		t.Errorf("%d lines on stderr, want 1:\n%s", lines, stderr)
	}
	for _, want := range []string{"far-asr", "network is unreachable", "https://127.0.0.1:1/far/model.onnx",
		"https://127.0.0.1:1/far/tokens.txt", "parley models import"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, stderr)
		}
	}
}

// `models import DIR` of a SenseVoice directory no registry entry describes installs it
// under a name of its own (derived or given), and transcribe finds it by that name.
func TestModelsImportLocal(t *testing.T) {
	gputest.RequireORT(t)
	dir := isolate(t)
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
	t.Setenv("PARLEY_MODELS_MANIFEST", filepath.Join(dir, "none.toml"))
	src := filepath.Join(dir, "My SenseVoice")
	os.MkdirAll(filepath.Join(src, "test_wavs"), 0o755)
	for _, f := range []string{"model.onnx", "tokens.txt"} {
		b, err := os.ReadFile(filepath.Join(tinyASR, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(src, f), b, 0o644)
	}
	os.WriteFile(filepath.Join(src, "test_wavs", "x.wav"), []byte("not needed"), 0o644)
	code, stdout, stderr := runCLI(t, "models", "import", src)
	if code != 0 || !strings.Contains(stdout, "my-sensevoice: asr model (SenseVoice (sherpa-onnx export))") {
		t.Fatalf("import: %d %s %s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "models", "my-sensevoice", "test_wavs")); err == nil {
		t.Error("files outside the layout were installed")
	}
	if code, stdout, stderr := runCLI(t, "models", "import", "--name", "second", src); code != 0 || !strings.Contains(stdout, "second:") {
		t.Errorf("import --name: %d %s %s", code, stdout, stderr)
	}
	if code, stdout, _ := runCLI(t, "models", "verify", "my-sensevoice"); code != 0 || !strings.Contains(stdout, "installed") {
		t.Errorf("verify: %d %s", code, stdout)
	}
	wav := speechWAV(t, dir, 16000, 1)
	_, want, _ := runCLI(t, "--provider", "cpu", "transcribe", "--model", tinyASR, wav)
	if code, got, stderr := runCLI(t, "--provider", "cpu", "transcribe", "--model", "my-sensevoice", wav); code != 0 || got != want {
		t.Errorf("transcribe --model my-sensevoice: %d %q (want %q) %s", code, got, want, stderr)
	}
	// A directory that is no model Parley runs says what it looked for.
	junk := filepath.Join(dir, "junk")
	os.MkdirAll(junk, 0o755)
	os.WriteFile(filepath.Join(junk, "notes.txt"), []byte("hi"), 0o644)
	if code, _, stderr := runCLI(t, "models", "import", junk); code != 1 || !strings.Contains(stderr, "SenseVoice") || !strings.Contains(stderr, "Kokoro") {
		t.Errorf("junk: %d %s", code, stderr)
	}
	// A SenseVoice layout that does not load names the problem.
	broken := filepath.Join(dir, "broken")
	os.MkdirAll(broken, 0o755)
	os.WriteFile(filepath.Join(broken, "model.onnx"), []byte("garbage"), 0o644)
	os.WriteFile(filepath.Join(broken, "tokens.txt"), []byte("<blk> 0\n"), 0o644)
	if code, _, stderr := runCLI(t, "models", "import", broken); code != 1 || !strings.Contains(stderr, "has the files of SenseVoice") {
		t.Errorf("broken: %d %s", code, stderr)
	}
}

func TestServeAsCommand(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"--serve", "--tls-cert", "c.pem"}, []string{"serve", "--tls-cert", "c.pem"}},
		{[]string{"--config", "x.toml", "--serve", "--addr", ":1"}, []string{"--config", "x.toml", "serve", "--addr", ":1"}},
		{[]string{"--set=a.b=1", "-serve"}, []string{"--set=a.b=1", "serve"}},
		{[]string{"say", "--serve"}, []string{"say", "--serve"}},     // a command's own arguments
		{[]string{"--set", "--serve"}, []string{"--set", "--serve"}}, // a flag's value
		{[]string{"--", "--serve"}, []string{"--", "--serve"}},
		{nil, nil},
	} {
		if got := serveAsCommand(c.in); !slices.Equal(got, c.want) {
			t.Errorf("serveAsCommand(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// `models import DIR` of an official ChatTTS release (safetensors) converts it in Go into the
// chattts voice; without its speaker statistics it says where they are; the built-in template
// refuses a release of another size by its config.
func TestModelsImportChatTTSRelease(t *testing.T) {
	gputest.RequireORT(t)
	dir := isolate(t)
	t.Setenv("PARLEY_MODELS", filepath.Join(dir, "models"))
	src := filepath.Join(dir, "ChatTTS checkout")
	if err := os.CopyFS(filepath.Join(src, "asset"), os.DirFS("../../testdata/chattts/tiny-release/asset")); err != nil {
		t.Fatal(err)
	}
	spk := "../../testdata/chattts/tiny-release/config.py"
	tpl := "../../testdata/chattts/template-tiny"
	if code, _, stderr := runCLI(t, "models", "import", "--template", tpl, src); code == 0 ||
		!strings.Contains(stderr, "ChatTTS/config/config.py") || !strings.Contains(stderr, "--spk-stat") {
		t.Fatalf("without speaker statistics: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "models", "import", "--spk-stat", spk, src); code == 0 || !strings.Contains(stderr, "this template's size has") {
		t.Fatalf("tiny release, official template: %d %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "models", "import", "--template", tpl, "--spk-stat", spk, src)
	if code != 0 || !strings.Contains(stdout, "chattts: converted") {
		t.Fatalf("import: %d %s %s", code, stdout, stderr)
	}
	out := filepath.Join(dir, "hello.wav")
	if code, _, stderr := runCLI(t, "say", "--engine", "chattts", "--seed", "3", "-o", out, "hello world"); code != 0 {
		t.Fatalf("say with the converted voice: %d %s", code, stderr)
	}
	if st, err := os.Stat(out); err != nil || st.Size() < 1000 {
		t.Fatalf("say wrote %v %v", st, err)
	}
	_, caps, _ := runCLI(t, "say", "--engine", "chattts", "--capabilities")
	if !strings.Contains(caps, `"model": "chattts"`) {
		t.Errorf("capabilities: %s", caps)
	}
}
