// Package roles adapts the engines the factory (app/factory) opens to the roles package app
// defines (app.Transcriber, app.Brain, app.Synthesizer, app.WakeDetector), for every face
// that drives a turn loop: the assistant (app/wire) and the server's realtime sessions
// (app/serve). An adapter here wraps an engine and nothing else; one that needs a face's own
// state (the server's limiters and queues) stays with that face.
package roles

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio/wake"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/brain"
	"github.com/parley-voice/parley/llm/skills"
	"github.com/parley-voice/parley/tts"
)

// Transcriber adapts an asr.Recognizer.
type Transcriber struct{ R *asr.Recognizer }

// Transcribe implements app.Transcriber.
func (t Transcriber) Transcribe(ctx context.Context, pcm []float32, o app.TranscribeOptions) (app.Transcript, error) {
	opts := t.R.Options()
	if o.Language != "" {
		opts.Language = o.Language
	}
	res, err := t.R.TranscribeWith(ctx, pcm, opts)
	if err != nil {
		return app.Transcript{}, err
	}
	return factory.Heard(res, o)
}

// Brain adapts llm/brain (an LLM backend with tools and caps, or the offline skills). It keeps
// the conversation itself, so the loop's history is not passed on; cut-off answers reach it
// through Interrupted. Its failures arrive as an apology already streamed as text, so they are
// returned wrapped in app.ErrSpoken. A stop control ("stop", "be quiet") ends the answer with
// app.ErrStopSpeaking, which the loop carries out like a barge-in.
type Brain struct {
	B *brain.Brain
	// Action, when set, receives the other controls the brain asks for (voice, speed,
	// language).
	Action func(skills.Action)
	// Skills, when set, recognises stop requests heard over an answer (app.StopMatcher).
	Skills *skills.Engine
}

// IsStop implements app.StopMatcher: the skills' stop intent ("stop", "be quiet", 别说了).
func (b Brain) IsStop(text string) bool { return b.Skills != nil && b.Skills.Match(text) == "stop" }

// Answer implements app.Brain.
func (b Brain) Answer(ctx context.Context, in app.Transcript, _ []app.Message, fn func(string) error) error {
	spoke := false
	_, err := b.B.Turn(ctx, brain.Input{Text: in.Text, Listener: llm.Listener{Language: in.Lang, Emotion: in.Emotion, Event: in.Event}},
		func(e brain.Event) error {
			switch e.Kind {
			case brain.EventText:
				if e.Text != "" {
					spoke = true
					return fn(e.Text)
				}
			case brain.EventAction:
				if e.Action != nil && e.Action.Kind == skills.ActionStop {
					return app.ErrStopSpeaking
				}
				if b.Action != nil && e.Action != nil {
					b.Action(*e.Action)
				}
			}
			return nil
		})
	if err != nil && spoke && ctx.Err() == nil {
		return fmt.Errorf("%w: %w", app.ErrSpoken, err)
	}
	return err
}

// IsStop implements app.StopMatcher.
func (b SkillsBrain) IsStop(text string) bool { return b.E.Match(text) == "stop" }

// Interrupted implements app.Interruptible.
func (b Brain) Interrupted(spoken string) { b.B.Interrupted(spoken) }

// SkillsBrain answers with the offline skills only.
type SkillsBrain struct{ E *skills.Engine }

// Answer implements app.Brain.
func (b SkillsBrain) Answer(ctx context.Context, in app.Transcript, _ []app.Message, fn func(string) error) error {
	r, err := b.E.Handle(ctx, in.Text)
	if err != nil {
		return err
	}
	for _, act := range r.Actions {
		if act.Kind == skills.ActionStop {
			return app.ErrStopSpeaking
		}
	}
	return fn(r.Text)
}

// Voice adapts a tts.Engine with a request template (voice, seed, speed…).
// The brain's voice controls (speed, voice, language) change Req through Apply.
type Voice struct {
	E    tts.Engine
	Req  tts.Request
	Rate int // the engine's sample rate

	mu sync.Mutex // guards Req once the loop runs
}

// SampleRate implements app.Synthesizer.
func (v *Voice) SampleRate() int { return v.Rate }

// Apply carries out a voice control the brain asked for ("speak faster", "another voice",
// "speak Chinese"); it reports whether the action was one of the voice's.
func (v *Voice) Apply(a skills.Action) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch a.Kind {
	case skills.ActionSpeed:
		sp := v.Req.Speed
		if sp == 0 {
			sp = 1
		}
		v.Req.Speed = min(2.5, max(0.5, sp*(1+a.Amount)))
	case skills.ActionVoice:
		if a.Value == "next" || a.Value == "" {
			v.Req.Seed++ // seeded voices: the next one
			v.Req.HasSeed = true
		} else {
			v.Req.Voice = a.Value
		}
	case skills.ActionLanguage:
		v.Req.Language = a.Value
	default:
		return false
	}
	return true
}

// Synthesize implements app.Synthesizer.
func (v *Voice) Synthesize(ctx context.Context, text string, fn func([]float32) error) error {
	v.mu.Lock()
	req := v.Req
	v.mu.Unlock()
	req.Text = text
	st, err := v.E.Synthesize(ctx, req)
	if err != nil {
		if errors.Is(err, tts.ErrEmpty) {
			return nil
		}
		return err
	}
	defer st.Close()
	return tts.Each(ctx, st, func(c tts.Chunk) error {
		if c.SampleRate != 0 && c.SampleRate != v.Rate {
			return fmt.Errorf("roles: %s engine streamed %d Hz, announced %d Hz", v.E.Capabilities().Engine, c.SampleRate, v.Rate)
		}
		if len(c.Samples) > 0 {
			return fn(c.Samples)
		}
		return nil
	})
}

// Wake adapts the openWakeWord detector (audio/wake).
type Wake struct{ D *wake.Detector }

// Process implements app.WakeDetector.
func (w Wake) Process(p []float32) (bool, error) {
	ds, err := w.D.Accept(context.Background(), p)
	return len(ds) > 0, err
}

// Reset implements app.WakeDetector.
func (w Wake) Reset() { w.D.Reset() }

// TextBrain adapts llm/brain to app.Brain for a loop that carries out none of the brain's
// controls (the server's realtime sessions): only its text reaches fn, and its errors are
// returned as they are. The brain keeps its own history.
type TextBrain struct{ B *brain.Brain }

// Answer implements app.Brain.
func (t TextBrain) Answer(ctx context.Context, in app.Transcript, _ []app.Message, fn func(string) error) error {
	_, err := t.B.Turn(ctx, brain.Input{Text: in.Text, Listener: llm.Listener{Language: in.Lang, Emotion: in.Emotion, Event: in.Event}},
		func(e brain.Event) error {
			if e.Kind == brain.EventText && e.Text != "" {
				return fn(e.Text)
			}
			return nil
		})
	return err
}

// Interrupted tells the brain what was actually said of a cut-off answer.
func (t TextBrain) Interrupted(spoken string) { t.B.Interrupted(spoken) }
