package app

import (
	"time"

	"github.com/parley-voice/parley/audio"
)

// EnergyVAD is a simple level-threshold voice activity detector: speech starts after
// MinSpeech of frames above ThresholdDB and ends after HangOver below it. It is the fallback
// when the Silero model is missing, and the detector of the loop's unit tests.
type EnergyVAD struct {
	ThresholdDB float64       // frame RMS in dBFS counted as speech; default -40
	MinSpeech   time.Duration // default 60 ms
	HangOver    time.Duration // default 400 ms

	frame      []float32
	pos        int64 // samples consumed
	inSpeech   bool
	run        int   // consecutive speech frames (before start) or silence frames (during speech)
	runFrom    int64 // first sample of the current run
	lastVoiced int64
}

const vadFrame = 320 // 20 ms

// Process implements VAD.
func (v *EnergyVAD) Process(p []float32) ([]VADEvent, error) {
	thr := v.ThresholdDB
	if thr == 0 {
		thr = -40
	}
	minSpeech := int(max(v.MinSpeech, 0) / (20 * time.Millisecond))
	if v.MinSpeech == 0 {
		minSpeech = 3
	}
	hang := int(v.HangOver / (20 * time.Millisecond))
	if v.HangOver == 0 {
		hang = 20
	}
	var evs []VADEvent
	for len(p) > 0 {
		take := min(vadFrame-len(v.frame), len(p))
		v.frame = append(v.frame, p[:take]...)
		p = p[take:]
		if len(v.frame) < vadFrame {
			break
		}
		start := v.pos
		v.pos += vadFrame
		voiced := audio.DB(audio.RMS(v.frame)) > thr
		v.frame = v.frame[:0]
		if !v.inSpeech {
			if !voiced {
				v.run = 0
				continue
			}
			if v.run == 0 {
				v.runFrom = start
			}
			v.run++
			if v.run >= minSpeech {
				v.inSpeech, v.run = true, 0
				v.lastVoiced = v.pos
				evs = append(evs, VADEvent{Kind: SpeechStart, Sample: v.runFrom})
			}
			continue
		}
		if voiced {
			v.run = 0
			v.lastVoiced = v.pos
			continue
		}
		v.run++
		if v.run >= hang {
			v.inSpeech, v.run = false, 0
			evs = append(evs, VADEvent{Kind: SpeechEnd, Sample: v.lastVoiced})
		}
	}
	return evs, nil
}

// Reset implements VAD.
func (v *EnergyVAD) Reset() {
	*v = EnergyVAD{ThresholdDB: v.ThresholdDB, MinSpeech: v.MinSpeech, HangOver: v.HangOver}
}
