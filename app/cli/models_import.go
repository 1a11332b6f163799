package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/tts/chattts"
	"github.com/parley-voice/parley/tts/kokoro"
)

// modelLayout is a model layout Parley can run, found in a directory.
type modelLayout struct {
	format string   // what it is, for people: "SenseVoice (sherpa-onnx export)"
	kind   string   // registry kind
	files  []string // what to install, relative to the directory
}

// layoutProbe recognises one layout by its files (ok) and then loads it with its engine, which
// validates inputs, outputs and metadata as at every start.
type layoutProbe struct {
	name  string // the layout as the error lists it
	match func(dir string) (l *modelLayout, ok bool)
	load  func(dir string) error
}

// layoutProbes are the layouts `parley models import DIR` recognises, in the order tried.
var layoutProbes = []layoutProbe{
	{
		name: "SenseVoice, sherpa-onnx export (model.onnx or model.int8.onnx, tokens.txt)",
		match: func(dir string) (*modelLayout, bool) {
			files := present(dir, "model.onnx", "model.int8.onnx")
			if len(files) == 0 || !exists(dir, "tokens.txt") {
				return nil, false
			}
			return &modelLayout{format: "SenseVoice (sherpa-onnx export)", kind: assets.KindASR, files: append(files, "tokens.txt")}, true
		},
		load: loadASR,
	},
	{
		name: "SenseVoice, FunASR export (model.onnx or model_quant.onnx, tokens.json, am.mvn)",
		match: func(dir string) (*modelLayout, bool) {
			files := present(dir, "model.onnx", "model_quant.onnx")
			if len(files) == 0 || !exists(dir, "tokens.json") || !exists(dir, "am.mvn") {
				return nil, false
			}
			files = append(files, "tokens.json", "am.mvn")
			return &modelLayout{format: "SenseVoice (FunASR export)", kind: assets.KindASR,
				files: append(files, present(dir, "config.yaml", "configuration.json")...)}, true
		},
		load: loadASR,
	},
	{
		name: "openWakeWord (melspectrogram.onnx, embedding_model.onnx, wake models *.onnx)",
		match: func(dir string) (*modelLayout, bool) {
			if !exists(dir, "melspectrogram.onnx") || !exists(dir, "embedding_model.onnx") {
				return nil, false
			}
			return &modelLayout{format: "openWakeWord", kind: assets.KindWake, files: onnxFiles(dir)}, true
		},
		load: func(dir string) error {
			var models []string
			for _, f := range onnxFiles(dir) {
				if f != "melspectrogram.onnx" && f != "embedding_model.onnx" {
					models = append(models, filepath.Join(dir, f))
				}
			}
			if len(models) == 0 {
				return errors.New("no wake model (*.onnx besides melspectrogram.onnx and embedding_model.onnx)")
			}
			return factory.ProbeWake(dir, models)
		},
	},
	{
		name: "Kokoro (" + kokoro.ModelFiles[0] + " or another Kokoro ONNX file, voices, config.json or tokenizer.json)",
		match: func(dir string) (*modelLayout, bool) {
			if len(present(dir, kokoro.ModelFiles...)) == 0 {
				return nil, false
			}
			return &modelLayout{format: "Kokoro", kind: assets.KindTTS, files: allFiles(dir)}, true
		},
		load: func(dir string) error {
			return factory.ProbeKokoro(dir)
		},
	},
	{
		name: "ChatTTS, Parley's ONNX export (" + chattts.ConfigFile + ", gpt.onnx, decoder, Vocos)",
		match: func(dir string) (*modelLayout, bool) {
			if !exists(dir, chattts.ConfigFile) || !exists(dir, "gpt.onnx") {
				return nil, false
			}
			return &modelLayout{format: "ChatTTS", kind: assets.KindTTS, files: allFiles(dir)}, true
		},
		load: func(dir string) error {
			return factory.ProbeChatTTS(dir)
		},
	},
	{
		name: "decoder LLM, onnx-community layout (config.json, tokenizer.json, onnx/model*.onnx)",
		match: func(dir string) (*modelLayout, bool) {
			if !exists(dir, "config.json") || !exists(dir, "tokenizer.json") || len(onnxFiles(dir)) == 0 {
				return nil, false
			}
			return &modelLayout{format: "decoder LLM (onnx-community)", kind: assets.KindLLM, files: allFiles(dir)}, true
		},
		load: func(dir string) error {
			return factory.ProbeLLM(dir)
		},
	},
	{
		name: "Silero VAD v5 (one .onnx with inputs input, state, sr)",
		match: func(dir string) (*modelLayout, bool) {
			if f := onnxFiles(dir); len(f) == 1 {
				return &modelLayout{format: "Silero VAD", kind: assets.KindVAD, files: f}, true
			}
			return nil, false
		},
		load: func(dir string) error {
			return factory.ProbeVAD(filepath.Join(dir, onnxFiles(dir)[0]))
		},
	},
	{
		name: "speaker encoder, CAM++ signature (one .onnx)",
		match: func(dir string) (*modelLayout, bool) {
			if f := onnxFiles(dir); len(f) == 1 {
				return &modelLayout{format: "speaker encoder (CAM++)", kind: assets.KindSpeaker, files: f}, true
			}
			return nil, false
		},
		load: func(dir string) error {
			return factory.ProbeSpeaker(dir)
		},
	},
}

func loadASR(dir string) error { return factory.ProbeASR(dir) }

// detectLayout finds the layout of a model directory that Parley can run, loading it to be
// sure. The error lists what was looked for, and why a layout whose files were there failed.
func detectLayout(dir string) (*modelLayout, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory (an unregistered model is imported from its directory)", dir)
	}
	var failed []string
	for _, p := range layoutProbes {
		l, ok := p.match(dir)
		if !ok {
			continue
		}
		if err := p.load(dir); err != nil {
			failed = append(failed, fmt.Sprintf("it has the files of %s, but: %v", p.name, err))
			continue
		}
		return l, nil
	}
	if len(failed) > 0 {
		return nil, fmt.Errorf("%s: not a model Parley can run: %s", dir, strings.Join(failed, "; "))
	}
	var names []string
	for _, p := range layoutProbes {
		names = append(names, p.name)
	}
	return nil, fmt.Errorf("%s: not a model layout Parley knows; it looked for %s", dir, strings.Join(names, "; "))
}

// localName derives a model name from a directory's name: lower case, and only the characters
// model names allow.
func localName(dir string) string {
	base := strings.ToLower(filepath.Base(filepath.Clean(dir)))
	base = regexp.MustCompile(`[^a-z0-9._-]+`).ReplaceAllString(base, "-")
	return strings.TrimLeft(strings.Trim(base, "-"), ".")
}

func exists(dir, f string) bool {
	st, err := os.Stat(filepath.Join(dir, f))
	return err == nil && st.Mode().IsRegular()
}

func present(dir string, names ...string) []string {
	var out []string
	for _, n := range names {
		if exists(dir, n) {
			out = append(out, n)
		}
	}
	return out
}

// onnxFiles lists the .onnx files in dir and in dir/onnx.
func onnxFiles(dir string) []string {
	var out []string
	for _, sub := range []string{"", "onnx"} {
		m, _ := filepath.Glob(filepath.Join(dir, sub, "*.onnx"))
		for _, p := range m {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
	}
	sort.Strings(out)
	return out
}

// allFiles lists every regular file under dir that is not hidden (for layouts whose config
// names their own files).
func allFiles(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") && p != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	return out
}
