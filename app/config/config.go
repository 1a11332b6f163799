// Package config is Parley's configuration: one TOML file in the XDG config directory,
// overridden by PARLEY_* environment variables, overridden by flags. Unknown keys and bad
// values are errors that name the file (or variable), the key and what was expected.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/parley-voice/parley/lang"
)

// Config is the whole configuration. Field tags name the TOML keys; the environment variable
// for a key is PARLEY_<SECTION>_<KEY> in upper case (e.g. PARLEY_LLM_URL for llm.url).
type Config struct {
	Runtime   Runtime   `toml:"runtime"`
	Audio     Audio     `toml:"audio"`
	ASR       ASR       `toml:"asr"`
	LLM       LLM       `toml:"llm"`
	TTS       TTS       `toml:"tts"`
	Assistant Assistant `toml:"assistant"`
	Serve     Serve     `toml:"serve"`
	Store     Store     `toml:"store"`
	Log       Log       `toml:"log"`
	Train     Train     `toml:"train"`

	// Path is the file this configuration was read from ("" when none existed).
	Path string `toml:"-"`
	// File is the file Load looked for (--config, $PARLEY_CONFIG or the default), whether or
	// not it existed (what `parley config path` and `parley doctor` show).
	File string `toml:"-"`

	// set records the keys given explicitly and where (SourceFile, SourceEnv, SourceFlag,
	// SourceSet), so callers never guess from a value whether the user chose it.
	set map[string]Source
}

// Source is where an explicitly set key came from.
type Source string

// Sources of explicit values.
const (
	SourceFile Source = "file"      // the TOML file
	SourceEnv  Source = "env"       // a PARLEY_* variable
	SourceFlag Source = "flag"      // --set (and the flags that stand for keys, like --provider)
	SourceSet  Source = "programme" // Config.Set by the program (the desktop app's settings)
)

// IsSet reports whether key ("section.name") was given explicitly rather than left at its
// default. A key set to its default value explicitly is set.
func (c *Config) IsSet(key string) bool {
	_, ok := c.set[key]
	return ok
}

// SourceOf says where an explicitly set key came from ("" when it was not set).
func (c *Config) SourceOf(key string) Source { return c.set[key] }

func (c *Config) markSet(key string, s Source) {
	if c.set == nil {
		c.set = map[string]Source{}
	}
	c.set[key] = s
}

// Runtime configures ONNX Runtime for every engine.
type Runtime struct {
	Provider       string `toml:"provider" help:"auto | cpu | cuda[:N] | tensorrt[:N]"`
	IntraOpThreads int    `toml:"intra_op_threads" help:"0 = physical cores less one (at least 1), left for audio and the UI"`
	InterOpThreads int    `toml:"inter_op_threads" help:"0 = 1"`
	Library        string `toml:"ort_library" help:"path of libonnxruntime; empty = PARLEY_ORT_LIB, the set-up cache, system paths"`
}

// Audio chooses devices.
type Audio struct {
	Input  string `toml:"input" help:"input device name or index; empty = system default"`
	Output string `toml:"output" help:"output device name or index; empty = system default"`
	// LatencyMs is the latency asked of the device streams: low enough that stopping the
	// speaker is quick and the echo reference stays close to what is heard, high enough not
	// to underrun on a busy machine.
	LatencyMs int `toml:"latency_ms" help:"device stream latency in ms (10..2000)"`
}

// ASR configures speech recognition.
type ASR struct {
	Model    string   `toml:"model" help:"model id or directory; empty = best installed"`
	Language string   `toml:"language" help:"auto | zh | en | yue | ja | ko"`
	ITN      bool     `toml:"itn" help:"inverse text normalisation (numbers as digits, punctuation); off by default as in sherpa-onnx"`
	LM       string   `toml:"lm" help:"token language model for a beam search: empty = the model's lm.bin when it has one, none = greedy decoding, or a file; its weights (lm.json) and word list (lm.words.txt) sit beside it"`
	Words    []string `toml:"words" help:"your own words (names, jargon) for the recogniser's word list, so that its beam search does not charge them as unknown; one word each"`
}

// LLM configures the brain.
type LLM struct {
	Backend   string `toml:"backend" help:"auto | openai | ollama | builtin | skills (builtin: an installed onnx-community model run in-process; llm.model names it)"`
	URL       string `toml:"url" help:"server base URL; empty = discover local servers"`
	Model     string `toml:"model"`
	APIKey    string `toml:"api_key"`
	Persona   string `toml:"persona" help:"system prompt persona; empty = Parley's default"`
	MaxTokens int    `toml:"max_tokens"`
}

// TTS configures the voice.
type TTS struct {
	Engine      string  `toml:"engine" help:"auto (an installed ChatTTS export, else the demo voice when its card meets its goal, else espeak-ng) | espeak | kokoro | chattts"`
	Voice       string  `toml:"voice"`
	Seed        int64   `toml:"seed"`
	Temperature float64 `toml:"temperature"`
	TopP        float64 `toml:"top_p"`
	TopK        int     `toml:"top_k"`
	Speed       float64 `toml:"speed"`
	Precision   string  `toml:"precision" help:"auto (a ChatTTS voice's int8 GPT on a CPU that runs it well) | fp32 | int8"`
}

// Assistant configures the turn loop.
type Assistant struct {
	Mode          string  `toml:"mode" help:"push-to-talk | hands-free | wake-word"`
	BargeIn       string  `toml:"barge_in" help:"off | on | min-speech"`
	BargeInMinSec float64 `toml:"barge_in_min_seconds"`
	WakeWord      string  `toml:"wake_word"`
	Language      string  `toml:"language"`
	// EchoResidual is the self-echo threshold (app.Options.EchoResidual): a capture whose
	// energy is explained by Parley's own played voice up to this residual fraction is
	// rejected as echo.
	EchoResidual   float64 `toml:"echo_residual" help:"self-echo threshold, above 0 and below 0.9; negative = no echo rejection"`
	EchoMaxDelayMs int     `toml:"echo_max_delay_ms" help:"longest speaker-to-microphone delay searched for self-echo, ms (50..5000)"`
}

// Serve configures the headless server.
type Serve struct {
	Addr             string `toml:"addr"`
	APIKey           string `toml:"api_key"`
	AllowNoAuth      bool   `toml:"allow_unauthenticated" help:"listen beyond loopback without an API key"`
	WyomingASRAddr   string `toml:"wyoming_asr_addr"`
	WyomingTTSAddr   string `toml:"wyoming_tts_addr"`
	MaxUploadMB      int    `toml:"max_upload_mb"`
	MaxAudioSeconds  int    `toml:"max_audio_seconds"`
	MaxConcurrentASR int    `toml:"max_concurrent_asr"`
	MaxConcurrentTTS int    `toml:"max_concurrent_tts"`
	TLSCert          string `toml:"tls_cert" help:"PEM certificate: serve HTTPS and wss:// (with tls_key)"`
	TLSKey           string `toml:"tls_key" help:"PEM private key for tls_cert"`
}

// Store configures history.
type Store struct {
	RetentionDays int    `toml:"retention_days" help:"keep saved audio this many days; 0 = forever"`
	Path          string `toml:"path" help:"database file; empty = data dir/parley.db"`
	// SaveAudio keeps each turn's audio (what the user said, what Parley played) as WAV files
	// next to the database, under audio/<conversation id>/. Off unless asked: it is a
	// recording of the user's voice.
	SaveAudio bool `toml:"save_audio" help:"save each turn's audio as WAV under the data dir's audio/ (kept retention_days)"`
}

// Log configures logging.
type Log struct {
	Level string `toml:"level" help:"debug | info | warn | error"`
	File  string `toml:"file" help:"log file for the GUI; empty = state dir/parley.log"`
}

// Train configures fine-tuning: the Python trainer the voice-clone wizard runs.
type Train struct {
	Python string `toml:"python" help:"Python 3 with PyTorch that runs the trainer; empty = /usr/bin/python3 (Debian's python3-torch)"`
	Dir    string `toml:"dir" help:"directory of Parley's train/ Python package; empty = found beside the program (PREFIX/share/parley/train, or train/ in a source checkout)"`
}

// Default is the configuration Parley runs with when nothing is configured.
func Default() *Config {
	return &Config{
		Runtime: Runtime{Provider: "auto"},
		ASR:     ASR{Language: "auto", Words: []string{}}, // ITN off, as in sherpa-onnx; the demo model was trained without it
		LLM:     LLM{Backend: "auto", MaxTokens: 512},
		TTS:     TTS{Engine: "auto", Temperature: 0.3, TopP: 0.7, TopK: 20, Speed: 1.0, Precision: "auto"},
		Audio:   Audio{LatencyMs: 100},
		Assistant: Assistant{Mode: "push-to-talk", BargeIn: "on", BargeInMinSec: 0.3, WakeWord: "hey_jarvis", Language: "auto",
			EchoResidual: 0.35, EchoMaxDelayMs: 600},
		Serve: Serve{
			Addr: "127.0.0.1:8780", WyomingASRAddr: "127.0.0.1:10300", WyomingTTSAddr: "127.0.0.1:10200",
			MaxUploadMB: 50, MaxAudioSeconds: 3600, MaxConcurrentASR: 2, MaxConcurrentTTS: 2,
		},
		Store: Store{RetentionDays: 30},
		Log:   Log{Level: "info"},
	}
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("config")

// Dir is the configuration directory: $XDG_CONFIG_HOME/parley or ~/.config/parley.
func Dir() string {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "parley")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".config", "parley")
	}
	return filepath.Join(os.TempDir(), "parley-config")
}

// DefaultPath is the configuration file: $PARLEY_CONFIG, else Dir()/config.toml.
func DefaultPath() string {
	if p := os.Getenv("PARLEY_CONFIG"); p != "" {
		return p
	}
	return filepath.Join(Dir(), "config.toml")
}

// Load reads the configuration: defaults, then the file at path (a missing file is fine; ""
// means DefaultPath), then PARLEY_* environment variables, then overrides ("section.key=value"
// from flags). The result is validated.
func Load(path string, overrides []string) (*Config, error) {
	if path == "" {
		path = DefaultPath()
	}
	c := Default()
	c.File = path
	if err := c.readFile(path); err != nil {
		return nil, err
	}
	if err := c.applyEnv(os.Environ()); err != nil {
		return nil, err
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			return nil, fmt.Errorf("%w: --set %q: want section.key=value", ErrConfig, o)
		}
		if err := c.Set(strings.TrimSpace(k), v); err != nil {
			return nil, fmt.Errorf("%w: --set %s: %w", ErrConfig, k, err)
		}
		c.markSet(strings.TrimSpace(k), SourceFlag)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) readFile(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := c.decode(data, path); err != nil {
		return err
	}
	c.Path = path
	return nil
}

// decode merges TOML data (from the file named path) over c.
func (c *Config) decode(data []byte, path string) error {
	md, err := toml.Decode(string(data), c)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return fmt.Errorf("%w: %s:%d: %s", ErrConfig, path, perr.Position.Line, perr.Message)
		}
		return fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		var msgs []string
		for _, k := range und {
			msgs = append(msgs, unknownKey(k.String()))
		}
		return fmt.Errorf("%w: %s: %s", ErrConfig, path, strings.Join(msgs, "; "))
	}
	for _, k := range md.Keys() {
		if len(k) == 2 {
			c.markSet(k.String(), SourceFile)
		}
	}
	return nil
}

func unknownKey(key string) string {
	section, _, hasDot := strings.Cut(key, ".")
	known := Keys()
	var inSection []string
	for _, k := range known {
		if s, name, _ := strings.Cut(k, "."); s == section {
			inSection = append(inSection, name)
		}
	}
	if !hasDot && len(inSection) == 0 {
		var sections []string
		for _, k := range known {
			s, _, _ := strings.Cut(k, ".")
			if !slices.Contains(sections, s) {
				sections = append(sections, s)
			}
		}
		return fmt.Sprintf("unknown section or key %q (sections: %s)", key, strings.Join(sections, ", "))
	}
	if len(inSection) == 0 {
		return fmt.Sprintf("unknown key %q (no section [%s])", key, section)
	}
	return fmt.Sprintf("unknown key %q (keys in [%s]: %s)", key, section, strings.Join(inSection, ", "))
}

// field is one settable key.
type field struct {
	key  string // section.name
	help string
	v    reflect.Value
}

func (c *Config) fields() []field {
	var out []field
	rv := reflect.ValueOf(c).Elem()
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		sf := rt.Field(i)
		section := sf.Tag.Get("toml")
		if section == "" || section == "-" || sf.Type.Kind() != reflect.Struct {
			continue
		}
		sv := rv.Field(i)
		for j := 0; j < sf.Type.NumField(); j++ {
			ff := sf.Type.Field(j)
			out = append(out, field{key: section + "." + ff.Tag.Get("toml"), help: ff.Tag.Get("help"), v: sv.Field(j)})
		}
	}
	return out
}

// Keys lists every configuration key as section.key.
func Keys() []string {
	var out []string
	for _, f := range Default().fields() {
		out = append(out, f.key)
	}
	return out
}

// EnvName is the environment variable for a key.
func EnvName(key string) string {
	return "PARLEY_" + strings.ToUpper(strings.NewReplacer(".", "_").Replace(key))
}

// Set assigns a value given as text to a key and records the key as set explicitly.
func (c *Config) Set(key, value string) error {
	for _, f := range c.fields() {
		if f.key == key {
			if err := setValue(f.v, value); err != nil {
				return err
			}
			if c.set[key] == "" {
				c.markSet(key, SourceSet)
			}
			return nil
		}
	}
	return errors.New(unknownKey(key))
}

// SplitList reads a list key's value as a variable or a flag gives it: comma-separated, each
// entry trimmed, blank ones dropped; never nil.
func SplitList(s string) []string {
	items := []string{}
	for _, it := range strings.Split(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	return items
}

func setValue(v reflect.Value, s string) error {
	s = strings.TrimSpace(s)
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		v.SetFloat(f)
	case reflect.Slice: // of strings: a comma-separated list from a variable or a flag
		if v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported kind %s", v.Kind())
		}
		v.Set(reflect.ValueOf(SplitList(s)))
	default:
		return fmt.Errorf("unsupported kind %s", v.Kind())
	}
	return nil
}

// applyEnv applies PARLEY_<SECTION>_<KEY> variables. Variables that are Parley's but not
// configuration keys (PARLEY_MODELS, PARLEY_ORT_LIB, …) are left alone.
func (c *Config) applyEnv(environ []string) error {
	byName := map[string]field{}
	for _, f := range c.fields() {
		byName[EnvName(f.key)] = f
	}
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		f, ok := byName[name]
		if !ok {
			continue
		}
		if err := setValue(f.v, val); err != nil {
			return fmt.Errorf("%w: environment %s (%s): %w", ErrConfig, name, f.key, err)
		}
		c.markSet(f.key, SourceEnv)
	}
	return nil
}

// Validate checks values that have a fixed set or range.
func (c *Config) Validate() error {
	var errs []string
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	oneOf := func(key, v string, allowed ...string) {
		if !slices.Contains(allowed, v) {
			bad(key, "%q is not one of %s", v, strings.Join(allowed, ", "))
		}
	}
	p := strings.ToLower(c.Runtime.Provider)
	kind, dev, hasDev := strings.Cut(p, ":")
	switch {
	case p == "" || p == "auto" || p == "cpu":
	case (kind == "cuda" || kind == "tensorrt") && !hasDev:
	case (kind == "cuda" || kind == "tensorrt") && hasDev:
		if n, err := strconv.Atoi(dev); err != nil || n < 0 {
			bad("runtime.provider", "%q: device index must be a number ≥ 0", c.Runtime.Provider)
		}
	default:
		bad("runtime.provider", "%q: want auto, cpu, cuda, cuda:N, tensorrt or tensorrt:N", c.Runtime.Provider)
	}
	if c.Runtime.IntraOpThreads < 0 || c.Runtime.InterOpThreads < 0 {
		bad("runtime", "thread counts must be ≥ 0")
	}
	oneOf("asr.language", c.ASR.Language, append([]string{"auto"}, lang.Codes()...)...)
	for _, w := range c.ASR.Words {
		if err := lang.CheckWord(w); err != nil {
			bad("asr.words", "%v", err)
		}
	}
	oneOf("llm.backend", c.LLM.Backend, "auto", "openai", "ollama", "builtin", "skills")
	if c.LLM.MaxTokens < 0 {
		bad("llm.max_tokens", "must be ≥ 0")
	}
	// Written as !(in range) so that NaN (valid TOML, and accepted by ParseFloat) is rejected.
	if !(c.TTS.Temperature >= 0 && c.TTS.Temperature <= 2) {
		bad("tts.temperature", "%g is outside 0..2", c.TTS.Temperature)
	}
	if !(c.TTS.TopP >= 0 && c.TTS.TopP <= 1) {
		bad("tts.top_p", "%g is outside 0..1", c.TTS.TopP)
	}
	if c.TTS.TopK < 0 {
		bad("tts.top_k", "must be ≥ 0")
	}
	if !(c.TTS.Speed >= 0.25 && c.TTS.Speed <= 4) {
		bad("tts.speed", "%g is outside 0.25..4", c.TTS.Speed)
	}
	oneOf("tts.precision", c.TTS.Precision, "auto", "fp32", "int8")
	oneOf("assistant.mode", c.Assistant.Mode, "push-to-talk", "hands-free", "wake-word")
	oneOf("assistant.barge_in", c.Assistant.BargeIn, "off", "on", "min-speech")
	if !(c.Assistant.BargeInMinSec >= 0) || math.IsInf(c.Assistant.BargeInMinSec, 1) {
		bad("assistant.barge_in_min_seconds", "%g: must be a number of seconds ≥ 0", c.Assistant.BargeInMinSec)
	}
	if r := c.Assistant.EchoResidual; !(r < 0 || r > 0 && r < 0.9) {
		bad("assistant.echo_residual", "%g: want a fraction above 0 and below 0.9, or a negative number to turn echo rejection off", r)
	}
	if d := c.Assistant.EchoMaxDelayMs; d < 50 || d > 5000 {
		bad("assistant.echo_max_delay_ms", "%d is outside 50..5000 ms", d)
	}
	if l := c.Audio.LatencyMs; l < 10 || l > 2000 {
		bad("audio.latency_ms", "%d is outside 10..2000 ms", l)
	}
	oneOf("log.level", strings.ToLower(c.Log.Level), "debug", "info", "warn", "error")
	if c.Serve.MaxUploadMB <= 0 || c.Serve.MaxAudioSeconds <= 0 || c.Serve.MaxConcurrentASR <= 0 || c.Serve.MaxConcurrentTTS <= 0 {
		bad("serve", "limits must be > 0")
	}
	if (c.Serve.TLSCert == "") != (c.Serve.TLSKey == "") {
		bad("serve.tls_cert", "tls_cert and tls_key go together")
	}
	if c.Store.RetentionDays < 0 {
		bad("store.retention_days", "must be ≥ 0")
	}
	if len(errs) == 0 {
		return nil
	}
	src := c.Path
	if src == "" {
		src = "configuration"
	}
	sort.Strings(errs)
	return fmt.Errorf("%w: %s: %s", ErrConfig, src, strings.Join(errs, "; "))
}

// Encode writes the configuration as TOML.
func (c *Config) Encode() ([]byte, error) {
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(c); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// Save writes the configuration to path atomically (temporary file, then rename), so a full
// disk or a crash never leaves a half-written config behind.
func (c *Config) Save(path string) error {
	data, err := c.Encode()
	if err != nil {
		return fmt.Errorf("%w: encode: %w", ErrConfig, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.toml")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("%w: write %s: %w", ErrConfig, path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("%w: write %s: %w", ErrConfig, path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%w: write %s: %w", ErrConfig, path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.Path, c.File = path, path
	return nil
}
