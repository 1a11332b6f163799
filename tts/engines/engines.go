// Package engines opens a TTS engine by name and applies library voices to requests: the
// glue the CLI, the assistant and the server share.
package engines

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/chattts"
	"github.com/parley-voice/parley/tts/espeak"
	"github.com/parley-voice/parley/tts/kokoro"
	"github.com/parley-voice/parley/voices"
)

// Names lists the engines Open knows ("auto" picks one, see Default).
var Names = []string{"auto", "espeak", "kokoro", "chattts"}

// KokoroModels are the registry ids searched (in order) under the models dir for Kokoro.
var KokoroModels = []string{"kokoro-82m", "kokoro-82m-fp32"}

// ChatTTSModels are the registry ids of ChatTTS exports a user installs (searched in order);
// ChatTTSDemo is Parley's own demo voice, embedded in the binary.
var (
	ChatTTSModels = []string{"chattts"}
	ChatTTSDemo   = "chattts-demo"
)

// ErrUnknownEngine is returned for engine names Open does not know.
var ErrUnknownEngine = errors.New("tts: unknown engine")

// Options selects and configures an engine.
type Options struct {
	Engine    string      // "auto" | "espeak" (default) | "kokoro" | "chattts"
	ModelDir  string      // model directory for ONNX engines; "" = the installed one
	ModelsDir string      // "" = assets.ModelsDir()
	GPU       gpu.Options // session options for ONNX engines
	Voice     string      // engine default voice
	Precision string      // ChatTTS's GPT: "auto" (or "") | "fp32" | "int8" (chattts.Config.Precision)
	Log       *slog.Logger
}

// Resolve is the engine Open opens for name with models as the models directory ("" for the
// default): "auto" is Default's choice, "" and "espeak-ng" are "espeak", any case. It is the one
// place a tts.engine value is turned into an engine, so what is named is what plays.
func Resolve(name, models string) string {
	switch name = strings.ToLower(strings.TrimSpace(name)); name {
	case "auto":
		return Default(models)
	case "", "espeak-ng":
		return "espeak"
	}
	return name
}

// Open returns the named engine; "auto" opens Default's choice (Resolve).
func Open(o Options) (tts.Engine, error) {
	name := Resolve(o.Engine, o.ModelsDir)
	switch name {
	case "espeak":
		return espeak.New(espeak.Config{Voice: o.Voice})
	case "kokoro":
		dir := o.ModelDir
		if dir == "" {
			dir = FindKokoro(o.ModelsDir)
			if dir == "" {
				return nil, fmt.Errorf("kokoro is not installed (looked for %s under %s): run `parley models pull kokoro-82m`", strings.Join(KokoroModels, ", "), modelsDir(o.ModelsDir))
			}
		}
		return kokoro.New(dir, kokoro.Config{Voice: o.Voice, GPU: o.GPU, Log: o.Log})
	case "chattts":
		dir := o.ModelDir
		if dir == "" {
			var demo bool
			if dir, demo = FindChatTTS(o.ModelsDir, true); dir == "" {
				return nil, fmt.Errorf("no ChatTTS model is installed (looked for %s under %s): export 2noise/ChatTTS with `python3 -m train.chattts.export --official ASSET_DIR --int8 --out DIR` and install it with `parley models import DIR chattts`", strings.Join(ChatTTSModels, ", "), modelsDir(o.ModelsDir))
			} else if demo && o.Log != nil {
				o.Log.Debug("chattts: using Parley's demo voice; install a real ChatTTS export for full quality", "dir", dir)
			}
		}
		return chattts.New(dir, chattts.Config{Voice: o.Voice, GPU: o.GPU, Precision: o.Precision, Log: o.Log})
	}
	return nil, fmt.Errorf("%w: %q (have %s)", ErrUnknownEngine, o.Engine, strings.Join(Names, ", "))
}

func modelsDir(d string) string {
	if d == "" {
		return assets.ModelsDir()
	}
	return d
}

// Default is the engine "auto" means: ChatTTS when a ChatTTS export is installed, or when
// Parley's demo voice is there and its card says it meets the intelligibility goal; espeak-ng
// otherwise (it is always there, and stays the fallback).
func Default(models string) string {
	if dir, demo := FindChatTTS(models, false); dir != "" && !demo {
		return "chattts"
	}
	if dir, demo := FindChatTTS(models, true); dir != "" && demo && chattts.MeetsGoal(dir) {
		return "chattts"
	}
	return "espeak"
}

// FindChatTTS returns the directory of the first installed ChatTTS export, or (withDemo) of
// Parley's demo voice (demo = true), or "".
func FindChatTTS(models string, withDemo bool) (dir string, demo bool) {
	for _, id := range ChatTTSModels {
		d := filepath.Join(modelsDir(models), id)
		if _, err := os.Stat(filepath.Join(d, chattts.ConfigFile)); err == nil {
			return d, false
		}
	}
	if !withDemo {
		return "", false
	}
	if models == "" {
		if d, err := assets.Path(context.Background(), ChatTTSDemo); err == nil {
			if _, err := os.Stat(filepath.Join(d, chattts.ConfigFile)); err == nil {
				return d, true
			}
		}
		return "", false
	}
	d := filepath.Join(models, ChatTTSDemo)
	if _, err := os.Stat(filepath.Join(d, chattts.ConfigFile)); err == nil {
		return d, true
	}
	return "", false
}

// IsChatTTSDemo says whether dir is the demo voice (embedded or installed under its id): a
// small demo-grade model, whose voice fine-tune trains the whole model by default.
func IsChatTTSDemo(dir string) bool {
	return dir != "" && filepath.Base(filepath.Clean(dir)) == ChatTTSDemo
}

// FindKokoro returns the first installed Kokoro model directory, or "".
func FindKokoro(models string) string {
	for _, id := range KokoroModels {
		dir := filepath.Join(modelsDir(models), id)
		for _, f := range kokoro.ModelFiles {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				return dir
			}
		}
	}
	return ""
}

// Explicit marks which request fields the caller set on purpose; voice defaults fill the rest.
type Explicit struct {
	Temperature, TopP, TopK, Speed, Language, Seed bool
}

// ApplyVoice fills a request from a library voice: its preset, seed, embedding or mix, and its
// default controls for the fields the caller did not set explicitly. engine is the engine the
// request goes to; a voice made for another engine is an error.
func ApplyVoice(req tts.Request, v *voices.Voice, engine string, set Explicit) (tts.Request, error) {
	if e := Resolve(engine, ""); v.Engine != e {
		return req, fmt.Errorf("voice %q is a %s voice; use --engine %s", v.Name, v.Engine, v.Engine)
	}
	switch v.Kind {
	case voices.KindPreset:
		req.Voice = v.Preset
	case voices.KindSeed:
		if !set.Seed {
			req.Seed, req.HasSeed = *v.Seed, true
		}
	case voices.KindEmbedding:
		req.Embedding = v.Embedding.Data
	case voices.KindMix:
		req.Mix = nil
		for _, p := range v.Mix {
			req.Mix = append(req.Mix, tts.VoiceWeight{Voice: p.Voice, Weight: p.Weight})
		}
	case voices.KindClone:
		req.Sample = &tts.Sample{Text: v.Sample.Text, Codes: v.Sample.Codes, Model: v.Sample.Model, ModelID: v.Sample.ModelID,
			Pitch: v.Sample.Pitch}
		if v.Seed != nil && !set.Seed { // the seed speaker closest to the recording
			req.Seed, req.HasSeed = *v.Seed, true
		}
	default:
		return req, fmt.Errorf("voice %q: kind %s is not supported", v.Name, v.Kind)
	}
	d := v.Defaults
	if !set.Temperature && d.Temperature != 0 {
		req.Temperature = d.Temperature
	}
	if !set.TopP && d.TopP != 0 {
		req.TopP = d.TopP
	}
	if !set.TopK && d.TopK != 0 {
		req.TopK = d.TopK
	}
	if !set.Speed && d.Speed != 0 {
		req.Speed = d.Speed
	}
	if !set.Language && d.Language != "" {
		req.Language = d.Language
	}
	return req, nil
}
