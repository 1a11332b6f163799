package factory

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/brain"
	"github.com/parley-voice/parley/llm/discover"
	"github.com/parley-voice/parley/llm/skills"
)

// SelectLLM picks the language model llm.* names: the configured server (llm.url), else a
// local one found by probing (Ollama, llama.cpp's server, LM Studio), else an installed
// built-in model run in-process with runtime.*'s provider and threads; no backend means the
// offline skills. A model that cannot be used is an error (`parley chat` reports it); the
// assistant and the server use LLM instead.
func (f *Factory) SelectLLM(ctx context.Context) (discover.Choice, error) {
	c := f.cfg.LLM
	return discover.Select(ctx, discover.Options{Kind: c.Backend, URL: c.URL, Model: c.Model, APIKey: c.APIKey,
		Log: f.log, GPU: f.GPU()})
}

// LLM is SelectLLM for the faces that come up with whatever works, the assistant and the
// server, so that both choose the same brain for the same configuration: a language model
// that cannot be used leaves the offline skills, and the notes say why (a configured server
// that did not answer but is used anyway is a warning). Only a cancelled ctx is an error.
func (f *Factory) LLM(ctx context.Context) (discover.Choice, []app.Note, error) {
	choice, err := f.SelectLLM(ctx)
	if err != nil && ctx.Err() != nil {
		return discover.Choice{}, nil, ctx.Err()
	}
	var notes []app.Note
	if choice.Warning != "" && err == nil {
		notes = append(notes, app.Note{Part: app.PartBrain, Kind: app.NoteWarning, Message: "brain: " + choice.Warning})
	}
	switch {
	case err != nil:
		f.log.Warn("no language model; the offline skills answer", "err", err)
		choice = discover.Choice{Name: discover.KindSkills, Found: choice.Found}
		notes = append(notes, app.Note{Part: app.PartBrain, Kind: app.NoteFallback, Err: err,
			Message: "brain: offline skills only (" + err.Error() + ")"})
	case choice.Backend == nil && strings.EqualFold(f.cfg.LLM.Backend, discover.KindSkills):
		notes = append(notes, app.Note{Part: app.PartBrain, Kind: app.NoteFallback,
			Message: "brain: offline skills only (llm.backend is skills)"})
	case choice.Backend == nil:
		notes = append(notes, app.Note{Part: app.PartBrain, Kind: app.NoteFallback,
			Message: "brain: offline skills only (no LLM server found; set llm.url)"})
	}
	return choice, notes, nil
}

// Skills opens the offline skills, replying in assistant.language's language, with timers
// kept in dataDir/timers.json ("" = kept in memory: a headless server has nobody to ring).
// A timers file that cannot be read is kept as it is (never overwritten) and the timers of
// this run live in memory; the error says so, and the skills work anyway.
func (f *Factory) Skills(dataDir string) (*skills.Engine, error) { return f.SkillsAt(dataDir, nil) }

// SkillsAt is Skills on the clock now (nil: time.Now): the time the skills tell and set
// timers by (tests fix it).
func (f *Factory) SkillsAt(dataDir string, now func() time.Time) (*skills.Engine, error) {
	o := skills.Options{Log: f.log, Language: ReplyLanguage(f.cfg.Assistant.Language), Timers: skills.NoTimers{}, Now: now}
	var terr error
	if dataDir != "" {
		ft, err := skills.OpenFileTimers(filepath.Join(dataDir, "timers.json"))
		if err != nil {
			terr = err
			o.Timers = &skills.MemTimers{}
		} else {
			o.Timers = ft
		}
	}
	sk, err := skills.New(o)
	if err != nil {
		return nil, err
	}
	return sk, terr
}

// ServerSkills is the server's offline skills: headless, so no timers (one would run out
// with nothing to ring it, and the skills say so), in the skills' own reply language (the
// server's clients ask in theirs).
func (f *Factory) ServerSkills() (*skills.Engine, error) {
	return skills.New(skills.Options{Log: f.log, Timers: skills.NoTimers{}})
}

// Brain is what Brain builds on.
type Brain struct {
	Choice     discover.Choice
	Skills     *skills.Engine
	LocalFirst bool          // answer what the skills know without the model
	NoTools    bool          // offer the model no tools
	Spoken     bool          // answers are spoken (the persona keeps them short and plain)
	Timeout    time.Duration // wall-clock cap of a turn; 0 = the brain's own
}

// Brain opens llm/brain over b's language model (none: the skills alone), with the persona
// and answer cap of llm.*.
func (f *Factory) Brain(b Brain) (*brain.Brain, error) {
	if b.Skills == nil {
		return nil, errors.New("factory: Brain needs the skills")
	}
	return brain.New(brain.Config{Backend: b.Choice.Backend, Model: b.Choice.Model, Skills: b.Skills,
		LocalFirst: b.LocalFirst, NoTools: b.NoTools, MaxDuration: b.Timeout,
		Persona:   llm.Persona{Prompt: f.cfg.LLM.Persona, Spoken: b.Spoken},
		MaxTokens: f.cfg.LLM.MaxTokens, Log: f.log})
}

// ReplyLanguage maps assistant.language onto the skills' reply language.
func ReplyLanguage(lang string) string {
	switch strings.ToLower(lang) {
	case "zh", "yue":
		return "zh"
	}
	return "en"
}
