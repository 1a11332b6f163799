package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/parley-voice/parley/app/serve/wyoming"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/tts/espeak"
)

var parleyAttribution = wyoming.Attribution{Name: "Parley", URL: "https://github.com/parley-voice/parley"}

// newWyoming returns the Wyoming service for ASR (asrSide) or TTS.
func (s *Server) newWyoming(asrSide bool) *wyoming.Server {
	ws := &wyoming.Server{
		Log:               s.log.With("wyoming", map[bool]string{true: "asr", false: "tts"}[asrSide]),
		MaxAudioSeconds:   min(s.o.Config.MaxAudioSeconds, 300), // voice commands; bounds memory per connection
		MaxConns:          64,
		MaxConnsPerClient: 16,
		MinRate:           MinSampleRate,
		Budget:            s.audioMem,
		// Home Assistant sends small chunks; a 1 MiB payload is 32 s of 16 kHz audio, and
		// what a payload costs is multiplied by every connection at once
		Limits:       wyoming.Limits{MaxPayload: 1 << 20},
		WriteTimeout: s.o.WriteTimeout,
		ErrorCode:    wyomingCode,
		Info:         s.wyomingInfo(asrSide),
	}
	ws.Count = func(typ string) {
		s.metrics.Counter(fmt.Sprintf("parley_wyoming_events_total{type=%q}", label(typ))).Add(1)
	}
	if asrSide {
		ws.ASR = serverASR{s}
	} else {
		ws.TTS = wyTTS{s}
	}
	return ws
}

// NewWyomingASR returns the Wyoming ASR service alone (for tests and embedding).
func (s *Server) NewWyomingASR() *wyoming.Server { return s.newWyoming(true) }

// NewWyomingTTS returns the Wyoming TTS service alone.
func (s *Server) NewWyomingTTS() *wyoming.Server { return s.newWyoming(false) }

func wyomingCode(err error) string {
	var ae *APIError
	switch {
	case errors.Is(err, ErrBusy):
		return "busy"
	case errors.As(err, &ae):
		if ae.Code != nil {
			return *ae.Code
		}
		return ae.Type
	case errors.Is(err, tts.ErrUnknownVoice):
		return "unknown-voice"
	case errors.Is(err, asr.ErrInput), errors.Is(err, tts.ErrBadRequest), errors.Is(err, tts.ErrEmpty):
		return "bad-request"
	}
	return "error"
}

// kokoroLangs maps a Kokoro voice's first letter to its language.
var kokoroLangs = map[byte]string{'a': "en-us", 'b': "en-gb", 'e': "es", 'f': "fr", 'h': "hi", 'i': "it", 'j': "ja", 'p': "pt-br", 'z': "zh"}

func (s *Server) wyomingInfo(asrSide bool) wyoming.Info {
	info := wyoming.Info{ASR: []wyoming.AsrProgram{}, TTS: []wyoming.TtsProgram{}, Handle: []any{}, Intent: []any{}, Wake: []any{}}
	art := func(name, desc string) wyoming.Artifact {
		return wyoming.Artifact{Name: name, Attribution: parleyAttribution, Installed: true, Description: desc, Version: s.o.Version}
	}
	if asrSide && s.eng.ASR != nil {
		desc := "SenseVoice speech recognition"
		if s.eng.ASRNote != "" {
			desc += " (" + s.eng.ASRNote + ")"
		}
		info.ASR = append(info.ASR, wyoming.AsrProgram{
			Artifact:                    art("parley-asr", "Parley speech recognition"),
			Models:                      []wyoming.AsrModel{{Artifact: art(s.eng.ASRModel, desc), Languages: s.eng.ASRLanguages}},
			SupportsTranscriptStreaming: true,
		})
	}
	if !asrSide && s.eng.TTS != nil {
		info.TTS = append(info.TTS, wyoming.TtsProgram{
			Artifact:                    art("parley-tts", "Parley speech synthesis ("+s.eng.TTSEngine+")"),
			Voices:                      s.wyomingVoices(art),
			SupportsSynthesizeStreaming: true,
		})
	}
	return info
}

// wyomingVoices are the voices the TTS service offers Home Assistant, each with the fields
// its Wyoming integration reads (name, description, languages as BCP 47 tags, installed,
// attribution, speakers): espeak-ng's every language as a voice, an engine's presets, or
// for an engine of seeds alone (ChatTTS) the engine itself; then the library's voices for
// this engine. OpenAI's voice names are speakers (seeds), never voices or languages.
func (s *Server) wyomingVoices(art func(name, desc string) wyoming.Artifact) []wyoming.TtsVoice {
	caps := s.eng.TTS.Capabilities()
	var speakers []wyoming.Speaker
	for _, n := range sortedKeys(OpenAIVoices) {
		speakers = append(speakers, wyoming.Speaker{Name: n})
	}
	var vs []wyoming.TtsVoice
	switch {
	case caps.Engine == "espeak-ng":
		langs, _ := espeak.Languages()
		for _, l := range langs {
			vs = append(vs, wyoming.TtsVoice{Artifact: art(l.Tag, l.Name+" (espeak-ng)"), Languages: []string{bcp47(l.Tag)}, Speakers: speakers})
		}
	case caps.Support(tts.CtlSeed) == tts.Native:
		// an engine whose seeds draw its speakers (ChatTTS): its own voice, named by its
		// model, with the speakers; a preset beside "default" and "none" (ChatTTS's empty
		// speaker) is a voice too
		model := caps.Model
		if model == "" || model == "." {
			model = s.eng.TTSEngine
		}
		vs = append(vs, wyoming.TtsVoice{Artifact: art(s.eng.TTSEngine, model+" (a speaker per seed: pick a speaker)"),
			Languages: languageTags(caps.Languages), Speakers: speakers})
		for _, n := range caps.Voices {
			if n == "default" || n == "none" || n == s.eng.TTSEngine {
				continue
			}
			vs = append(vs, wyoming.TtsVoice{Artifact: art(n, fmt.Sprintf("%s voice %s", model, n)),
				Languages: languageTags(caps.Languages), Speakers: speakers})
		}
	case len(caps.Voices) > 0:
		for _, n := range caps.Voices {
			langs := languageTags(caps.Languages)
			if s.eng.TTSEngine == "kokoro" && n != "" && kokoroLangs[n[0]] != "" {
				langs = []string{bcp47(kokoroLangs[n[0]])}
			}
			vs = append(vs, wyoming.TtsVoice{Artifact: art(n, fmt.Sprintf("%s voice %s", s.eng.TTSEngine, n)), Languages: langs})
		}
	default:
		vs = append(vs, wyoming.TtsVoice{Artifact: art(s.eng.TTSEngine, s.eng.TTSEngine+" (a voice per speaker seed)"),
			Languages: languageTags(caps.Languages), Speakers: speakers})
	}
	if s.eng.Voices != nil {
		lib, _ := s.eng.Voices.List()
		for _, v := range lib {
			if v.Engine != s.eng.TTSEngine {
				continue
			}
			lang := v.Defaults.Language
			if lang == "" {
				lang = "en"
			}
			vs = append(vs, wyoming.TtsVoice{Artifact: art(v.Name, v.Description), Languages: []string{bcp47(lang)}})
		}
	}
	return vs
}

// languageTags keeps the entries of a language list that are tags, as BCP 47; "en" when none.
func languageTags(langs []string) []string {
	var out []string
	for _, l := range langs {
		if isTag(l) {
			out = append(out, bcp47(l))
		}
	}
	if len(out) == 0 {
		out = []string{"en"}
	}
	return out
}

func isTag(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// bcp47 writes a language tag the way BCP 47 (and Home Assistant) spell it: "en-gb" →
// "en-GB", "cmn-latn-pinyin" → "cmn-Latn-pinyin"; private-use parts after "x" are kept.
func bcp47(tag string) string {
	parts := strings.Split(strings.ReplaceAll(tag, "_", "-"), "-")
	parts[0] = strings.ToLower(parts[0])
	for i := 1; i < len(parts); i++ {
		p := parts[i]
		if strings.EqualFold(p, "x") {
			break
		}
		switch {
		case len(p) == 2:
			parts[i] = strings.ToUpper(p)
		case len(p) == 4 && i == 1:
			parts[i] = strings.ToUpper(p[:1]) + strings.ToLower(p[1:])
		}
	}
	return strings.Join(parts, "-")
}

type wyTTS struct{ s *Server }

func (t wyTTS) Synthesize(ctx context.Context, text string, v wyoming.Voice, emit func([]float32, int) error) error {
	s := t.s
	req := tts.Request{Text: text, Language: v.Language}
	if v.Speaker != "" {
		req.Seed, req.HasSeed = openAISeed(s.eng.TTS, v.Speaker)
	}
	name := v.Name
	if name == "default" || name == s.eng.TTSEngine {
		name = "" // the engine's own voice
	}
	if name != "" {
		var e *APIError
		req, e = s.applyVoice(req, name, engines.Explicit{Seed: req.HasSeed, Language: req.Language != ""})
		if e != nil {
			return wyError{e}
		}
	}
	if _, err := req.Validate(); err != nil {
		return err
	}
	e := s.pumpSpeech(ctx, speechJob{req: req, cost: utf8.RuneCountInString(req.Text), emit: emit,
		emitErr: func(err error) *APIError { return &APIError{Type: "error", Message: err.Error()} }})
	if e != nil {
		return wyomingErr(e)
	}
	return nil
}

// wyomingErr is an APIError for the Wyoming side: a 429 is ErrBusy (code "busy"), any
// other keeps its code (see wyError).
func wyomingErr(e *APIError) error {
	if e.Status == http.StatusTooManyRequests {
		return fmt.Errorf("%w: %s", ErrBusy, e.Message)
	}
	return wyError{e}
}

// wyError carries an APIError to the Wyoming side: its text is the message alone (an HTTP
// status means nothing there), and wyomingCode still finds its code.
type wyError struct{ e *APIError }

func (w wyError) Error() string { return w.e.Message }
func (w wyError) Unwrap() error { return w.e }
