package factory

import (
	"log/slog"

	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/audio/wake"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/llm/builtin"
	"github.com/parley-voice/parley/tts/chattts"
	"github.com/parley-voice/parley/tts/kokoro"
	"github.com/parley-voice/parley/voices/speaker"
)

// The probes open a model the way its engine does, on one CPU thread and quietly, and close
// it again: `parley models import` checks a directory with them before installing it, so a
// model that would not load is refused with its engine's own reason (the file and what is
// wrong), not installed.

var probeCPU = gpu.Options{Provider: gpu.ProviderCPU, IntraOpThreads: 1}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// ProbeASR loads a SenseVoice model directory.
func ProbeASR(dir string) error {
	r, err := asr.New(dir, asr.Config{GPU: probeCPU, VAD: "none", Log: quiet()})
	if err == nil {
		r.Close()
	}
	return err
}

// ProbeWake loads an openWakeWord directory with the given wake-word models.
func ProbeWake(dir string, models []string) error {
	d, err := wake.New(dir, wake.Config{Models: models, GPU: probeCPU})
	if err == nil {
		d.Close()
	}
	return err
}

// ProbeKokoro loads a Kokoro model directory.
func ProbeKokoro(dir string) error {
	e, err := kokoro.New(dir, kokoro.Config{GPU: probeCPU, Log: quiet()})
	if err == nil {
		e.Close()
	}
	return err
}

// ProbeChatTTS loads a ChatTTS export.
func ProbeChatTTS(dir string) error {
	e, err := chattts.New(dir, chattts.Config{GPU: probeCPU, Log: quiet()})
	if err == nil {
		e.Close()
	}
	return err
}

// ProbeLLM loads an onnx-community decoder LLM directory.
func ProbeLLM(dir string) error {
	m, err := builtin.OpenModel(dir, builtin.Config{GPU: probeCPU, Log: quiet()})
	if err == nil {
		m.Close()
	}
	return err
}

// ProbeVAD loads a Silero VAD model file.
func ProbeVAD(path string) error {
	m, err := vad.OpenModel(path, 16000, probeCPU)
	if err == nil {
		m.Close()
	}
	return err
}

// ProbeSpeaker loads a speaker encoder directory.
func ProbeSpeaker(dir string) error {
	e, err := speaker.New(dir, speaker.Config{GPU: probeCPU})
	if err == nil {
		e.Close()
	}
	return err
}
