package clone

import (
	"fmt"
	"math"

	"github.com/parley-voice/parley/audio"
)

// MinTakeSeconds is the shortest guided recording kept: a prompt takes seconds to read.
const MinTakeSeconds = 1.0

// CheckTake says why a guided recording (16 kHz mono) cannot be kept (problem), or what the
// person should watch (warn: kept, but the slice step will likely set it aside).
func CheckTake(pcm []float32) (problem, warn string) {
	secs := float64(len(pcm)) / rate
	if secs < MinTakeSeconds {
		return fmt.Sprintf("The take is only %.1f s: press Record, read the whole sentence, then Stop.", secs), ""
	}
	loudest := math.Inf(-1)
	const win = rate / 20
	for i := 0; i+win <= len(pcm); i += win {
		loudest = max(loudest, audio.DB(audio.RMS(pcm[i:i+win])))
	}
	clipped := 0
	for _, v := range pcm {
		if v >= fullScale || v <= -fullScale {
			clipped++
		}
	}
	switch {
	case loudest < -50:
		return fmt.Sprintf("Parley heard almost nothing (loudest %.0f dBFS): is the microphone muted, or another one chosen? The take was not kept.", loudest), ""
	case float64(clipped)/float64(len(pcm)) > 0.001:
		return "", "Parts of it are too loud (clipped): move back from the microphone or lower its gain, then Retake."
	case loudest < -35:
		return "", fmt.Sprintf("It is quiet (loudest %.0f dBFS): move closer to the microphone or raise its gain, then Retake.", loudest)
	}
	return "", ""
}

// AddTake keeps a guided recording of prompt (checked by CheckTake) as a source with the
// prompt as its transcript, replacing the prompt's earlier take. The new take is saved
// before the old one is removed, so a failure never loses both.
func (d *Dataset) AddTake(pcm []float32, prompt string) (src Source, warn string, err error) {
	problem, warn := CheckTake(pcm)
	if problem != "" {
		return Source{}, "", fmt.Errorf("%w: %s", ErrBadTake, problem)
	}
	old := d.PromptSource(prompt)
	src, err = d.AddRecording(pcm, prompt)
	if err != nil {
		return Source{}, "", err
	}
	if old != "" {
		if err := d.Remove(old); err != nil {
			return src, warn, fmt.Errorf("clone: the new take is saved, but the old one could not be removed: %w", err)
		}
	}
	return src, warn, nil
}

// ErrBadTake: a guided recording that cannot be kept (too short, silent).
var ErrBadTake = fmt.Errorf("clone: take not kept")
