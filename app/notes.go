package app

import (
	"errors"
)

// Part names a piece of Parley that notes and errors are about. The faces route by it (the
// desktop app's banner opens the panel that fixes that part), never by a message's words.
type Part string

// Parts.
const (
	PartASR     Part = "asr"     // speech recognition
	PartBrain   Part = "brain"   // the language model or the offline skills
	PartVoice   Part = "voice"   // speech synthesis
	PartAudio   Part = "audio"   // microphone and speaker
	PartVAD     Part = "vad"     // voice activity detection
	PartWake    Part = "wake"    // the wake word
	PartHistory Part = "history" // the history database and saved audio
)

// NoteKind says what a note tells of its part.
type NoteKind string

// Note kinds.
const (
	NoteInfo        NoteKind = "info"        // what runs (the brain's source, text-only mode)
	NoteDemo        NoteKind = "demo"        // runs on a demo-grade model; Model is the real one
	NoteMissing     NoteKind = "missing"     // not installed; Model is what fetches it
	NoteUnavailable NoteKind = "unavailable" // could not be opened; Err says why
	NoteFallback    NoteKind = "fallback"    // a simpler stand-in runs (the offline skills, an energy detector)
	NoteWarning     NoteKind = "warning"     // runs, with a caveat
	NoteFailed      NoteKind = "failed"      // something the user asked for failed (NoteOf an error)
)

// Note is what the faces tell the user about a part of Parley: that it is demo-grade,
// missing or stood in for, or that something failed. The command line prints Message; the
// desktop app shows it with the button that fixes Part.
type Note struct {
	Part    Part     `json:"part,omitempty"` // "" = no part in particular
	Kind    NoteKind `json:"kind"`
	Message string   `json:"message"` // for people, naming the part ("speech recognition: …")
	// Model is the registry id of the model that fixes it (`parley models pull Model`);
	// "" = none.
	Model string `json:"model,omitempty"`
	Err   error  `json:"-"` // the cause, for errors.Is; nil = none
}

func (n Note) String() string { return n.Message }

// NoteOf describes an error the loop reported (Event.Err, Exchange.Err) as a note of kind
// NoteFailed, with the part that failed.
func NoteOf(err error) Note {
	return Note{Part: PartOf(err), Kind: NoteFailed, Message: err.Error(), Err: err}
}

// PartOf says which part an error of the loop comes from ("" when it does not tell).
func PartOf(err error) Part {
	var es *StageError
	switch {
	case errors.As(err, &es):
		return es.Part
	case errors.Is(err, ErrNoEar):
		return PartAudio
	case errors.Is(err, ErrNoVoice):
		return PartVoice
	case errors.Is(err, ErrAudioNotSaved):
		return PartHistory
	}
	return ""
}
