package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadDefaultsWhenNoFile(t *testing.T) {
	absent := filepath.Join(t.TempDir(), "absent.toml")
	c, err := Load(absent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.File != absent {
		t.Errorf("File = %q, want the path looked at, %q", c.File, absent)
	}
	if c.Path != "" || c.Runtime.Provider != "auto" || c.Serve.Addr != "127.0.0.1:8780" {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestPrecedenceFileEnvFlags(t *testing.T) {
	p := write(t, `
[llm]
url = "http://127.0.0.1:11434"
model = "from-file"
[tts]
speed = 1.5
`)
	t.Setenv("PARLEY_LLM_MODEL", "from-env")
	t.Setenv("PARLEY_TTS_SEED", "42")
	c, err := Load(p, []string{"llm.url=http://127.0.0.1:9999", "tts.top_k=5"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != p {
		t.Errorf("Path = %q", c.Path)
	}
	if c.LLM.URL != "http://127.0.0.1:9999" {
		t.Errorf("flag did not win: url = %q", c.LLM.URL)
	}
	if c.LLM.Model != "from-env" {
		t.Errorf("env did not win over file: model = %q", c.LLM.Model)
	}
	if c.TTS.Speed != 1.5 || c.TTS.Seed != 42 || c.TTS.TopK != 5 {
		t.Errorf("tts = %+v", c.TTS)
	}
	if c.TTS.Engine != "auto" {
		t.Errorf("default lost under a partial section: engine = %q", c.TTS.Engine)
	}
}

// asr.words: a list in the file, comma-separated from a variable or a flag (blank entries
// dropped), the flag winning; a file that holds it round-trips through Save.
func TestASRWords(t *testing.T) {
	p := write(t, "[asr]\nwords = [\"Anouk\", \"kubernetes\"]\n")
	c, err := Load(p, nil)
	if err != nil || !slices.Equal(c.ASR.Words, []string{"Anouk", "kubernetes"}) {
		t.Fatalf("from the file: %q, %v", c.ASR.Words, err)
	}
	t.Setenv("PARLEY_ASR_WORDS", " o'neill, ,zoë ")
	if c, err = Load(p, nil); err != nil || !slices.Equal(c.ASR.Words, []string{"o'neill", "zoë"}) {
		t.Fatalf("from the variable: %q, %v", c.ASR.Words, err)
	}
	if c, err = Load(p, []string{"asr.words=jarvis"}); err != nil || !slices.Equal(c.ASR.Words, []string{"jarvis"}) {
		t.Fatalf("from a flag: %q, %v", c.ASR.Words, err)
	}
	saved := filepath.Join(t.TempDir(), "config.toml")
	if err := c.Save(saved); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("PARLEY_ASR_WORDS")
	if c, err = Load(saved, nil); err != nil || !slices.Equal(c.ASR.Words, []string{"jarvis"}) {
		t.Fatalf("saved and loaded: %q, %v", c.ASR.Words, err)
	}
}

func TestErrorsNameFileKeyAndExpectation(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"unknown key", "[llm]\nurll = \"x\"\n", []string{"llm.urll", "keys in [llm]", "url"}},
		{"unknown section", "[lmm]\nurl = \"x\"\n", []string{"lmm", "sections:", "llm"}},
		{"malformed toml", "[llm]\nurl = \"unterminated\n", []string{":2:"}},
		{"wrong type", "[tts]\nspeed = \"fast\"\n", []string{"speed"}},
		{"bad provider", "[runtime]\nprovider = \"rocm\"\n", []string{"runtime.provider", "rocm", "cuda:N"}},
		{"out of range", "[tts]\ntop_p = 1.5\n", []string{"tts.top_p", "0..1"}},
		{"bad enum", "[assistant]\nbarge_in = \"sometimes\"\n", []string{"assistant.barge_in", "off, on, min-speech"}},
		{"bad asr language", "[asr]\nlanguage = \"de\"\n", []string{"asr.language", `"de" is not one of auto, zh, en, yue, ja, ko`}},
		{"nan speed", "[tts]\nspeed = nan\n", []string{"tts.speed", "NaN"}},
		{"nan temperature", "[tts]\ntemperature = nan\n", []string{"tts.temperature", "NaN"}},
		{"nan top_p", "[tts]\ntop_p = nan\n", []string{"tts.top_p", "NaN"}},
		{"negative barge-in minimum", "[assistant]\nbarge_in_min_seconds = -5.0\n", []string{"assistant.barge_in_min_seconds", "≥ 0"}},
		{"nan barge-in minimum", "[assistant]\nbarge_in_min_seconds = nan\n", []string{"assistant.barge_in_min_seconds"}},
		{"echo residual zero", "[assistant]\necho_residual = 0.0\n", []string{"assistant.echo_residual", "above 0 and below 0.9", "negative"}},
		{"echo residual too high", "[assistant]\necho_residual = 0.95\n", []string{"assistant.echo_residual", "0.95"}},
		{"echo residual nan", "[assistant]\necho_residual = nan\n", []string{"assistant.echo_residual", "NaN"}},
		{"echo delay too short", "[assistant]\necho_max_delay_ms = 10\n", []string{"assistant.echo_max_delay_ms", "50..5000"}},
		{"echo delay too long", "[assistant]\necho_max_delay_ms = 60000\n", []string{"assistant.echo_max_delay_ms", "60000"}},
		{"device latency zero", "[audio]\nlatency_ms = 0\n", []string{"audio.latency_ms", "10..2000"}},
		{"device latency too long", "[audio]\nlatency_ms = 5000\n", []string{"audio.latency_ms", "5000"}},
		{"asr words not words", "[asr]\nwords = [\"anouk\", \"two words\"]\n", []string{"asr.words", `"two words" is not one word`}},
		{"asr words not a list", "[asr]\nwords = \"anouk\"\n", []string{`"asr.words"`}},
		{"asr words punctuation", "[asr]\nwords = [\"...\"]\n", []string{"asr.words", `"..." has no letter or digit`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, tc.body)
			_, err := Load(p, nil)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("Load = %v, want ErrConfig", err)
			}
			msg := err.Error()
			for _, w := range append(tc.want, p) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestEchoAndLatencyKeys(t *testing.T) {
	c, err := Load(filepath.Join(t.TempDir(), "none.toml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Assistant.EchoResidual != 0.35 || c.Assistant.EchoMaxDelayMs != 600 || c.Audio.LatencyMs != 100 {
		t.Errorf("defaults: echo_residual %g, echo_max_delay_ms %d, latency_ms %d; want 0.35, 600, 100",
			c.Assistant.EchoResidual, c.Assistant.EchoMaxDelayMs, c.Audio.LatencyMs)
	}
	if c.Store.SaveAudio {
		t.Error("store.save_audio is on by default; recordings of the user must be asked for")
	}
	p := write(t, "[assistant]\necho_residual = -1.0\necho_max_delay_ms = 900\n[audio]\nlatency_ms = 40\n")
	t.Setenv("PARLEY_AUDIO_LATENCY_MS", "60")
	c, err = Load(p, []string{"assistant.echo_residual=0.5"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Assistant.EchoResidual != 0.5 || c.Assistant.EchoMaxDelayMs != 900 || c.Audio.LatencyMs != 60 {
		t.Errorf("got echo_residual %g, echo_max_delay_ms %d, latency_ms %d; want 0.5 (flag), 900 (file), 60 (env)",
			c.Assistant.EchoResidual, c.Assistant.EchoMaxDelayMs, c.Audio.LatencyMs)
	}
	// negative turns echo rejection off and is valid
	if c, err := Load(p, nil); err != nil || c.Assistant.EchoResidual != -1 {
		t.Errorf("echo_residual = -1 (rejection off): Load = %v, %v", c, err)
	}
}

func TestEnvAndFlagErrors(t *testing.T) {
	t.Setenv("PARLEY_TTS_TOP_K", "many")
	_, err := Load(filepath.Join(t.TempDir(), "none.toml"), nil)
	if err == nil || !strings.Contains(err.Error(), "PARLEY_TTS_TOP_K") || !strings.Contains(err.Error(), "whole number") {
		t.Errorf("bad env = %v", err)
	}
	t.Setenv("PARLEY_TTS_TOP_K", "")
	os.Unsetenv("PARLEY_TTS_TOP_K")
	for _, o := range []string{"nokey", "llm.nope=1", "tts.seed=abc"} {
		if _, err := Load(filepath.Join(t.TempDir(), "none.toml"), []string{o}); err == nil {
			t.Errorf("--set %s accepted", o)
		}
	}
}

func TestNonConfigEnvIgnored(t *testing.T) {
	t.Setenv("PARLEY_MODELS", "/somewhere")
	t.Setenv("PARLEY_ORT_LIB", "/x.so")
	if _, err := Load(filepath.Join(t.TempDir(), "none.toml"), nil); err != nil {
		t.Fatal(err)
	}
}

func TestUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir, nil); !errors.Is(err, ErrConfig) { // a directory, not a file
		t.Errorf("Load(dir) = %v", err)
	}
}

func TestSaveRoundTrip(t *testing.T) {
	c := Default()
	c.LLM.Model = "qwen3:4b"
	c.TTS.Seed = 1234
	p := filepath.Join(t.TempDir(), "sub", "config.toml")
	if err := c.Save(p); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.LLM.Model != "qwen3:4b" || got.TTS.Seed != 1234 {
		t.Errorf("round trip lost values: %+v", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestSaveUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		// root ignores permissions; use a path under a regular file instead
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, nil, 0o644)
		if err := Default().Save(filepath.Join(f, "config.toml")); !errors.Is(err, ErrConfig) {
			t.Errorf("Save under a file = %v", err)
		}
		return
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o500)
	if err := Default().Save(filepath.Join(dir, "config.toml")); !errors.Is(err, ErrConfig) {
		t.Errorf("Save to read-only dir = %v", err)
	}
}

func TestKeysHaveEnvNames(t *testing.T) {
	keys := Keys()
	if len(keys) < 30 {
		t.Fatalf("only %d keys", len(keys))
	}
	if EnvName("llm.api_key") != "PARLEY_LLM_API_KEY" {
		t.Errorf("EnvName = %s", EnvName("llm.api_key"))
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("[llm]\nurl = \"http://x\"\n"))
	f.Add([]byte("[tts]\nspeed = 2.0\nseed = -1\n"))
	f.Add([]byte("garbage = [ \n"))
	f.Add([]byte("[[llm]]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Default()
		if err := c.decode(data, "fuzz.toml"); err != nil {
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "fuzz.toml") {
				t.Fatalf("error without ErrConfig or file name: %v", err)
			}
			return
		}
		_ = c.Validate()
	})
}

func TestIsSet(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	// tts.speed is set to its default value in the file: still "set"
	if err := os.WriteFile(path, []byte("[tts]\nspeed = 1.0\nengine = \"espeak\"\n[llm]\nurl = \"http://x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PARLEY_TTS_TOP_K", "7")
	c, err := Load(path, []string{"tts.temperature=0.3", "llm.url=http://y"})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]Source{
		"tts.speed": SourceFile, "tts.engine": SourceFile, "tts.top_k": SourceEnv,
		"tts.temperature": SourceFlag, "llm.url": SourceFlag, "tts.top_p": "", "runtime.provider": "",
	} {
		if got := c.SourceOf(key); got != want || c.IsSet(key) != (want != "") {
			t.Errorf("%s: source %q (IsSet %v), want %q", key, got, c.IsSet(key), want)
		}
	}
	if err := c.Set("tts.top_p", "0.5"); err != nil || c.SourceOf("tts.top_p") != SourceSet {
		t.Errorf("Set: %v, source %q", err, c.SourceOf("tts.top_p"))
	}
	if Default().IsSet("tts.speed") {
		t.Error("a default configuration reports tts.speed as set")
	}
}
