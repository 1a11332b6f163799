// Package engines opens a TTS engine by name and applies library voices to requests: the
// glue the CLI, the assistant and the server share.
package engines

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/espeak"
	"github.com/parley-voice/parley/tts/kokoro"
	"github.com/parley-voice/parley/voices"
)

// Names lists the engines Open knows.
var Names = []string{"espeak", "kokoro"}

// KokoroModels are the registry ids searched (in order) under the models dir for Kokoro.
var KokoroModels = []string{"kokoro-82m", "kokoro-82m-fp32"}

// ErrUnknownEngine is returned for engine names Open does not know.
var ErrUnknownEngine = errors.New("tts: unknown engine")

// Options selects and configures an engine.
type Options struct {
	Engine    string      // "espeak" (default) | "kokoro"
	ModelDir  string      // Kokoro model directory; "" = the first installed of KokoroModels
	ModelsDir string      // "" = assets.ModelsDir()
	GPU       gpu.Options // session options for ONNX engines
	Voice     string      // engine default voice
	Log       *slog.Logger
}

// Open returns the named engine.
func Open(o Options) (tts.Engine, error) {
	switch strings.ToLower(o.Engine) {
	case "", "espeak", "espeak-ng":
		return espeak.New(espeak.Config{Voice: o.Voice})
	case "kokoro":
		dir := o.ModelDir
		if dir == "" {
			dir = FindKokoro(o.ModelsDir)
			if dir == "" {
				return nil, fmt.Errorf("kokoro is not installed (looked for %s under %s): run `parley models pull kokoro-82m`", strings.Join(KokoroModels, ", "), modelsDir(o.ModelsDir))
			}
		}
		return kokoro.New(kokoro.Config{Dir: dir, Voice: o.Voice, Options: o.GPU, Log: o.Log})
	case "chattts":
		return nil, fmt.Errorf("%w: chattts is planned (a later issue); use espeak or kokoro", ErrUnknownEngine)
	}
	return nil, fmt.Errorf("%w: %q (have %s)", ErrUnknownEngine, o.Engine, strings.Join(Names, ", "))
}

func modelsDir(d string) string {
	if d == "" {
		return assets.ModelsDir()
	}
	return d
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
	if e := normEngine(engine); v.Engine != e {
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

func normEngine(e string) string {
	switch strings.ToLower(e) {
	case "", "espeak", "espeak-ng":
		return "espeak"
	}
	return strings.ToLower(e)
}
