package assets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuiltinRegistry(t *testing.T) {
	reg, err := LoadRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sensevoice-small-int8", "sensevoice-small", "sensevoice-small-funasr", "kokoro-82m", "silero-vad-v5", "openwakeword", "qwen3-tokenizer", "sensevoice-demo"} {
		m, err := reg.Lookup(id)
		if err != nil {
			t.Errorf("Lookup(%q): %v", id, err)
			continue
		}
		if m.Kind == "" || m.Description == "" || m.Licence == "" {
			t.Errorf("%s: kind/description/licence missing: %+v", id, m)
		}
		if m.Embedded == "" && len(m.Files) == 0 {
			t.Errorf("%s: no files", id)
		}
	}
	// bundled.tsv rows become npm sources with their pinned hashes.
	vad, _ := reg.Lookup("silero-vad-v5")
	if len(vad.Files) != 1 || vad.Files[0].Path != "silero_vad.onnx" || !strings.HasPrefix(vad.Files[0].URLs[0], "npm:@ricky0123/vad-web@0.0.31#") || len(vad.Files[0].SHA256) != 64 {
		t.Errorf("silero-vad-v5 from bundled.tsv: %+v", vad.Files)
	}
	oww, _ := reg.Lookup("openwakeword")
	if len(oww.Files) != 7 {
		t.Errorf("openwakeword has %d files, want 7", len(oww.Files))
	}
	if _, err := reg.Lookup("onnxruntime"); err == nil {
		t.Error("the ONNX Runtime library (a cache: row) must not be a model")
	}
	demo, _ := reg.Lookup("sensevoice-demo")
	if !demo.Demo {
		t.Error("sensevoice-demo must be demo-grade")
	}
}

func TestLookupSuggests(t *testing.T) {
	reg, err := LoadRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"sensevoice-smal-int8", "sensevoice-small-int8"},
		{"kokoro", "kokoro-82m"},
		{"silero", "silero-vad-v5"},
		{"openwakewrd", "openwakeword"},
		// A misspelt prefix of a family of ids still gets a suggestion.
		{"sensevoce", "sensevoice-demo"},
		{"kokro", "kokoro-82m"},
		{"sensevoice-smal", "sensevoice-small"},
		{"silro", "silero-vad-v5"},
	}
	for _, tt := range tests {
		_, err := reg.Lookup(tt.in)
		if !errors.Is(err, ErrUnknownModel) {
			t.Fatalf("Lookup(%q) = %v, want ErrUnknownModel", tt.in, err)
		}
		if !strings.Contains(err.Error(), `did you mean "`+tt.want+`"`) {
			t.Errorf("Lookup(%q) = %v, want a suggestion of %q", tt.in, err, tt.want)
		}
	}
	for _, far := range []string{"zzzzzzzzzzzzzzzzzzzzzzzzz", "whisper", "x"} {
		if _, err := reg.Lookup(far); err == nil || strings.Contains(err.Error(), "did you mean") {
			t.Errorf("a far-off name %q must not get a suggestion: %v", far, err)
		}
	}
}

func TestOverride(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "models.toml")
	os.WriteFile(p, []byte(`version = 1
[[model]]
id = "kokoro-82m"
kind = "tts"
description = "my mirror"
licence = "Apache-2.0"
  [[model.file]]
  path = "model.onnx"
  urls = ["https://mirror.example/kokoro.onnx"]
  size = 10

[[model]]
id = "my-asr"
kind = "asr"
description = "mine"
licence = "MIT"
  [[model.file]]
  path = "m.onnx"
  urls = ["hf://me/asr/m.onnx"]
`), 0o644)
	reg, err := LoadRegistry(p)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := reg.Lookup("kokoro-82m")
	if k.Description != "my mirror" || len(k.Files) != 1 || k.Origin != p {
		t.Errorf("override did not replace kokoro-82m: %+v", k)
	}
	if _, err := reg.Lookup("my-asr"); err != nil {
		t.Errorf("override did not add my-asr: %v", err)
	}
}

func TestMalformedOverride(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"syntax", "version = 1\n[[model]]\nid = \"x\n", "models.toml:3"},
		{"unknown key", "version = 1\n[[model]]\nid = \"x\"\nkind = \"asr\"\ncolour = 1\n", `models.toml:5: unknown key "model.colour"`},
		{"bad kind", "version = 1\n\n[[model]]\nid = \"x\"\nkind = \"video\"\n", `models.toml:3: model 1 ("x"): kind "video"`},
		{"bad hash", "[[model]]\nid = \"x\"\nkind = \"asr\"\n[[model.file]]\npath = \"a\"\nsha256 = \"abc\"\n", "sha256 \"abc\" is not 64 hex digits"},
		{"escaping path", "[[model]]\nid = \"x\"\nkind = \"asr\"\n[[model.file]]\npath = \"../etc/passwd\"\n", "not a clean relative path"},
		{"bad url", "[[model]]\nid = \"x\"\nkind = \"asr\"\n[[model.file]]\npath = \"a\"\nurls = [\"ftp://x/y\"]\n", `bad source "ftp://x/y"`},
		{"no files", "[[model]]\nid = \"x\"\nkind = \"asr\"\n", "no files"},
		{"second model", "[[model]]\nid = \"a\"\nkind = \"asr\"\n[[model.file]]\npath = \"a\"\n\n[[model]]\nid = \"A B\"\n", `models.toml:7: model 2 ("A B"): id`},
		{"version", "version = 7\n", "models.toml:1: unsupported version 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "models.toml")
			os.WriteFile(p, []byte(tt.src), 0o644)
			_, err := LoadRegistry(p)
			if !errors.Is(err, ErrBadManifest) {
				t.Fatalf("err = %v, want ErrBadManifest", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestSources(t *testing.T) {
	env := func(k string) string {
		return map[string]string{"HF_ENDPOINT": "https://hf-mirror.com/"}[k]
	}
	tests := []struct{ raw, want string }{
		{"hf://a/b/c/d.onnx", "https://hf-mirror.com/a/b/resolve/main/c/d.onnx"},
		{"hf://a/b@v1.0/x.bin", "https://hf-mirror.com/a/b/resolve/v1.0/x.bin"},
		{"ms://iic/SenseVoiceSmall-onnx/model_quant.onnx", "https://modelscope.cn/models/iic/SenseVoiceSmall-onnx/resolve/master/model_quant.onnx"},
		{"https://example.com/a.tar.bz2", "https://example.com/a.tar.bz2"},
	}
	for _, tt := range tests {
		s, err := parseSource(tt.raw)
		if err != nil {
			t.Fatalf("parseSource(%q): %v", tt.raw, err)
		}
		if got := s.httpURL(env); got != tt.want {
			t.Errorf("%s → %s, want %s", tt.raw, got, tt.want)
		}
	}
	s, err := parseSource("npm:@ricky0123/vad-web@0.0.31#package/dist/silero_vad_v5.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.npmTarballURL(env); got != "https://registry.npmjs.org/@ricky0123/vad-web/-/vad-web-0.0.31.tgz" {
		t.Errorf("npm tarball URL %s", got)
	}
	if s.npmCacheName() != "ricky0123-vad-web-0.0.31.tgz" {
		t.Errorf("npm cache name %s (must match build/setup.sh)", s.npmCacheName())
	}
	for _, bad := range []string{"hf://a", "hf://a/b/../../x", "npm:pkg#x", "npm:pkg@1#", "ftp://x", "npm:a/b@1#x"} {
		if _, err := parseSource(bad); err == nil {
			t.Errorf("parseSource(%q) accepted", bad)
		}
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add(builtinManifest)
	f.Add([]byte("version = 1\n[[model]]\nid = \"x\"\nkind = \"asr\"\n[[model.file]]\npath = \"a\"\nurls = [\"npm:p@1#a\"]\n"))
	f.Add([]byte("[[model]]\nid = \"\"\n"))
	f.Add([]byte("[[model]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		models, err := ParseManifest("fuzz.toml", data)
		if err != nil {
			if !errors.Is(err, ErrBadManifest) || !strings.Contains(err.Error(), "fuzz.toml") {
				t.Fatalf("error %v does not wrap ErrBadManifest or name the file", err)
			}
			return
		}
		for _, m := range models {
			if checkID(m.ID) != nil {
				t.Fatalf("accepted bad id %q", m.ID)
			}
			for _, fl := range m.Files {
				if checkRel(fl.Path) != nil {
					t.Fatalf("accepted bad path %q", fl.Path)
				}
			}
		}
	})
}

func FuzzParseBundled(f *testing.F) {
	f.Add(bundledTSV)
	f.Add([]byte("a\tp@1\tx\tmodels:a/b\t" + strings.Repeat("0", 64) + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := ParseBundled("fuzz.tsv", data)
		if err != nil {
			if !errors.Is(err, ErrBadManifest) {
				t.Fatalf("error %v does not wrap ErrBadManifest", err)
			}
			return
		}
		for _, r := range rows {
			if !isSHA256(r.SHA256) {
				t.Fatalf("accepted bad hash %q", r.SHA256)
			}
		}
	})
}

// The CUDA runtime is chosen only when it is installed whole: every file at its pinned size.
func TestRuntimeLibrary(t *testing.T) {
	reg, err := LoadRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := reg.Lookup(CUDARuntime)
	if err != nil || m.Kind != KindRuntime || len(m.Files) != 3 {
		t.Fatalf("%s in the registry: %+v, %v", CUDARuntime, m, err)
	}
	dir := t.TempDir()
	if got := RuntimeLibrary(reg, dir); got != "" {
		t.Errorf("nothing installed, yet %q", got)
	}
	mdir := filepath.Join(dir, filepath.FromSlash(m.Dir))
	os.MkdirAll(mdir, 0o755)
	for i, f := range m.Files {
		size := f.Size
		if i == len(m.Files)-1 {
			size-- // the last one cut short, as by an interrupted download
		}
		if err := os.WriteFile(filepath.Join(mdir, f.Path), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Truncate(filepath.Join(mdir, f.Path), size)
	}
	if got := RuntimeLibrary(reg, dir); got != "" {
		t.Errorf("a file short of its size, yet %q", got)
	}
	last := m.Files[len(m.Files)-1]
	os.Truncate(filepath.Join(mdir, last.Path), last.Size)
	if got, want := RuntimeLibrary(reg, dir), filepath.Join(mdir, "libonnxruntime.so.1"); got != want {
		t.Errorf("installed whole: %q, want %q", got, want)
	}
}

// SenseVoice's BPE tokenizer is fetched first from the repositories that hold it, the PyTorch
// model's (iic/SenseVoiceSmall, FunAudioLLM/SenseVoiceSmall), not from an ONNX export's.
func TestSenseVoiceBPEFromTheModelRepository(t *testing.T) {
	reg, err := LoadRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := reg.Lookup("sensevoice-small-funasr")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		if !strings.HasSuffix(f.Path, ".bpe.model") {
			continue
		}
		if len(f.URLs) < 2 || f.URLs[0] != "ms://iic/SenseVoiceSmall/chn_jpn_yue_eng_ko_spectok.bpe.model" ||
			f.URLs[1] != "hf://FunAudioLLM/SenseVoiceSmall/chn_jpn_yue_eng_ko_spectok.bpe.model" {
			t.Errorf("bpe.model sources %v", f.URLs)
		}
		return
	}
	t.Fatal("no bpe.model in sensevoice-small-funasr")
}
