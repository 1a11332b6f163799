package tune

import (
	"context"
	"fmt"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/tts"
)

// WhisperVoiced is the voiced share under which a voice whispers: speech is about 60 %
// voiced, a whisper under 1 %, a breathy voice in between (train.chattts.evaluate's
// WHISPER_SHARE).
const WhisperVoiced = 0.15

// SeedTexts are what SeedVoice has a seed speaker say when no text is given: one question,
// one statement, about 5 s together.
var SeedTexts = []string{"Good evening, how can I help you tonight?", "The weather tomorrow will be sunny with a light breeze."}

// SeedReport is how a seed speaker sounds: its median pitch over its voiced frames (0: none)
// and the share of its sounding frames that are voiced.
type SeedReport struct {
	Seed   int64   `json:"seed"`
	F0     float64 `json:"f0_hz"`
	Voiced float64 `json:"voiced_share"`
}

// Whispers says whether the seed's speech is too little voiced to be heard as a voice.
func (r SeedReport) Whispers() bool { return r.Voiced < WhisperVoiced }

// SeedVoice has seed speaker seed say texts (SeedTexts if none) and measures its pitch and
// voicing, as ClosestSeed does for each seed it tries.
func SeedVoice(ctx context.Context, eng tts.Engine, seed int64, texts []string) (SeedReport, error) {
	if len(texts) == 0 {
		texts = SeedTexts
	}
	var p pitchStats
	for _, text := range texts {
		pcm, err := synth16k(ctx, eng, tts.Request{Text: text, Seed: seed, HasSeed: true})
		if err != nil {
			return SeedReport{}, fmt.Errorf("seed %d: %w", seed, err)
		}
		p.add(pcm)
	}
	r := SeedReport{Seed: seed, Voiced: p.voiced()}
	if len(p.f0s) > 0 {
		r.F0 = audio.Median(p.f0s)
	}
	return r, nil
}
