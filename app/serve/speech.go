package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
)

// SpeechRate is the sample rate of /v1/audio/speech output, as OpenAI's (24 kHz).
const SpeechRate = 24000

// MaxSpeechInput is OpenAI's limit on input, in characters.
const MaxSpeechInput = 4096

// maxJSONBody bounds JSON request bodies.
const maxJSONBody = 4 << 20

// speechModels are the model names /v1/audio/speech accepts besides the engine's own name.
var speechModels = []string{"tts-1", "tts-1-hd", "gpt-4o-mini-tts", "parley"}

// SpeechFormats are the response formats Parley produces itself; mp3, opus and aac come
// through ffmpeg when it is installed (SpeechFormatsHere).
var SpeechFormats = []string{"wav", "pcm", "flac"}

// openAIFormats are the formats OpenAI offers.
var openAIFormats = []string{"mp3", "opus", "aac", "flac", "wav", "pcm"}

// SpeechFormatsHere are the response formats this server can produce: its own and those
// the installed ffmpeg encodes.
func SpeechFormatsHere() []string {
	out := append([]string(nil), SpeechFormats...)
	for _, f := range []string{"mp3", "opus", "aac"} {
		if encodable()[f] {
			out = append(out, f)
		}
	}
	return out
}

// defaultSpeechFormat is OpenAI's default, mp3, when ffmpeg can make it; else wav.
func defaultSpeechFormat() string {
	if encodable()["mp3"] {
		return "mp3"
	}
	return "wav"
}

// OpenAIVoices maps OpenAI's voice names to a Kokoro preset and a seed (used by engines
// without that preset, e.g. espeak-ng, whose seeds pick variant, pitch, range and rate), and
// where each voice sits between the deepest (0) and the highest (1): an engine that suggests
// seeds from its lowest voice to its highest (the demo ChatTTS voice, on which fixed seeds such
// as alloy's 101 whisper) speaks the names with its suggested seeds in that order (openAISeed),
// so onyx is deep and shimmer high.
var OpenAIVoices = map[string]struct {
	Kokoro   string
	Seed     int64
	Register float64
}{
	"alloy": {"af_alloy", 101, 0.55}, "ash": {"am_adam", 102, 0.15}, "ballad": {"bm_george", 103, 0.3},
	"coral": {"af_heart", 104, 0.75}, "echo": {"am_echo", 105, 0.2}, "fable": {"bm_fable", 106, 0.45},
	"onyx": {"am_onyx", 107, 0}, "nova": {"af_nova", 108, 0.9}, "sage": {"af_sarah", 109, 0.7},
	"shimmer": {"af_bella", 110, 1}, "verse": {"am_michael", 111, 0.35}, "marin": {"af_kore", 112, 0.8},
	"cedar": {"am_liam", 113, 0.25},
}

// openAIRanks orders OpenAI's voice names from the deepest register to the highest.
var openAIRanks = func() map[string]int {
	names := sortedKeys(OpenAIVoices)
	sort.SliceStable(names, func(i, j int) bool { return OpenAIVoices[names[i]].Register < OpenAIVoices[names[j]].Register })
	ranks := map[string]int{}
	for i, n := range names {
		ranks[n] = i
	}
	return ranks
}()

// openAISeed is the seed OpenAI's voice name speaks with on an engine that draws speakers from
// seeds: where the engine suggests seeds, the names in register order spread over them (13
// names on fewer seeds share some), else the name's own seed.
func openAISeed(eng tts.Engine, name string) (int64, bool) {
	name = strings.ToLower(name)
	ov, ok := OpenAIVoices[name]
	if !ok {
		return 0, false
	}
	seeds := tts.SuggestedSeeds(eng)
	if len(seeds) == 0 {
		return ov.Seed, true
	}
	pos := float64(openAIRanks[name]) / float64(max(1, len(OpenAIVoices)-1))
	return seeds[int(math.Round(pos*float64(len(seeds)-1)))], true
}

// speechRequest is OpenAI's /v1/audio/speech body plus Parley's sampling extras.
type speechRequest struct {
	Model          string          `json:"model"`
	Input          *string         `json:"input"`
	Voice          json.RawMessage `json:"voice"`
	ResponseFormat string          `json:"response_format"`
	Speed          *float64        `json:"speed"`
	Instructions   string          `json:"instructions"`
	StreamFormat   string          `json:"stream_format"`
	Seed           *int64          `json:"seed"`
	Temperature    *float64        `json:"temperature"`
	TopP           *float64        `json:"top_p"`
	TopK           *int            `json:"top_k"`
	Language       string          `json:"language"`
}

// decodeJSON reads a bounded JSON body into v, mapping problems to OpenAI errors.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) *APIError {
	fr := newFloorReader(w, r.Body, s.o.UploadGrace, s.o.MinUploadRate, time.Minute)
	r.Body = http.MaxBytesReader(w, io.NopCloser(fr), maxJSONBody)
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		w.Header().Set("Connection", "close")
		var mbe *http.MaxBytesError
		var te *json.UnmarshalTypeError
		switch {
		case errors.Is(err, errSlowUpload):
			return &APIError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: str("upload_too_slow"), Message: "the request body arrived too slowly"}
		case errors.As(err, &mbe):
			return tooLarge("the request body is larger than %d bytes", maxJSONBody)
		case errors.As(err, &te):
			return invalidCode(te.Field, "invalid_type", "Invalid type for '%s': expected %s, got %s", te.Field, te.Type, te.Value)
		case errors.Is(err, io.EOF):
			return invalidCode("", "invalid_json", "We could not parse the JSON body of your request: the body is empty. (HINT: send a JSON object with Content-Type: application/json.)")
		}
		return invalidCode("", "invalid_json", "We could not parse the JSON body of your request: %v. (HINT: This likely means you aren't using your HTTP library correctly.)", err)
	}
	if dec.More() {
		w.Header().Set("Connection", "close")
		return invalidCode("", "invalid_json", "We could not parse the JSON body of your request: trailing data after the JSON object.")
	}
	fr.done()
	return nil
}

func (s *Server) speech(w http.ResponseWriter, r *http.Request) *APIError {
	if s.eng.TTS == nil {
		return unavailable("no speech synthesis engine is loaded")
	}
	var in speechRequest
	if e := s.decodeJSON(w, r, &in); e != nil {
		return e
	}
	req, format, e := s.speechTTSRequest(&in)
	if e != nil {
		return e
	}
	sse := in.StreamFormat == "sse"
	return s.job(r.Context(), s.ttsLim, float64(utf8.RuneCountInString(req.Text)), func(ctx context.Context) *APIError {
		return s.streamSpeech(ctx, w, req, format, sse)
	})
}

// speechTTSRequest validates an OpenAI speech request and turns it into a tts.Request.
func (s *Server) speechTTSRequest(in *speechRequest) (tts.Request, string, *APIError) {
	var req tts.Request
	if in.Model == "" {
		return req, "", missingParam("model", "you must provide a model parameter")
	}
	if !slices.Contains(speechModels, in.Model) && in.Model != s.eng.TTSEngine {
		return req, "", modelNotFound(in.Model)
	}
	if in.Input == nil {
		return req, "", missingParam("input", "Missing required parameter: 'input'.")
	}
	text := *in.Input
	if strings.TrimSpace(text) == "" {
		return req, "", invalid("input", "'input' is empty: give the text to speak.")
	}
	if n := utf8.RuneCountInString(text); n > MaxSpeechInput {
		return req, "", invalidCode("input", "string_above_max_length", "Invalid 'input': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", MaxSpeechInput, n)
	}
	format := in.ResponseFormat
	if format == "" {
		format = defaultSpeechFormat()
	}
	if here := SpeechFormatsHere(); !slices.Contains(here, format) {
		what := "is not a known format"
		if slices.Contains(openAIFormats, format) {
			what = "cannot be produced by this server (ffmpeg, which encodes it, is not installed)"
		}
		return req, "", invalidCode("response_format", "unsupported_format", "response_format %q %s: this server produces %s (24 kHz mono)", format, what, strings.Join(here, ", "))
	}
	if in.StreamFormat != "" && in.StreamFormat != "audio" && in.StreamFormat != "sse" {
		return req, "", invalid("stream_format", "Invalid value %q for stream_format: expected audio or sse", in.StreamFormat)
	}
	req.Text = text
	req.SampleRate = SpeechRate
	req.Language = in.Language
	ex := engines.Explicit{}
	if in.Speed != nil {
		if math.IsNaN(*in.Speed) || *in.Speed < 0.25 || *in.Speed > 4 {
			return req, "", invalid("speed", "Invalid 'speed': %g is outside 0.25–4.0.", *in.Speed)
		}
		req.Speed, ex.Speed = *in.Speed, true
	}
	if in.Temperature != nil {
		if math.IsNaN(*in.Temperature) || *in.Temperature < 0 || *in.Temperature > 2 {
			return req, "", invalid("temperature", "Invalid 'temperature': %g is outside 0–2.", *in.Temperature)
		}
		req.Temperature, ex.Temperature = *in.Temperature, true
	}
	if in.TopP != nil {
		if math.IsNaN(*in.TopP) || *in.TopP < 0 || *in.TopP > 1 {
			return req, "", invalid("top_p", "Invalid 'top_p': %g is outside 0–1.", *in.TopP)
		}
		req.TopP, ex.TopP = *in.TopP, true
	}
	if in.TopK != nil {
		if *in.TopK < 0 || *in.TopK > 1000 {
			return req, "", invalid("top_k", "Invalid 'top_k': %d is outside 0–1000.", *in.TopK)
		}
		req.TopK, ex.TopK = *in.TopK, true
	}
	if in.Seed != nil {
		req.Seed, req.HasSeed, ex.Seed = *in.Seed, true, true
	}
	ex.Language = in.Language != ""
	voice, e := parseVoice(in.Voice)
	if e != nil {
		return req, "", e
	}
	req, e = s.applyVoice(req, voice, ex)
	if e != nil {
		return req, "", e
	}
	if _, err := req.Validate(); err != nil {
		return req, "", invalid("", "%v", err)
	}
	return req, format, nil
}

// parseVoice reads voice as a string or OpenAI's {"id": "..."} object.
func parseVoice(raw json.RawMessage) (string, *APIError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", missingParam("voice", "Missing required parameter: 'voice'.")
	}
	var v string
	if err := json.Unmarshal(raw, &v); err == nil {
		if v == "" {
			return "", missingParam("voice", "Missing required parameter: 'voice'.")
		}
		return v, nil
	}
	var obj struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &obj); err == nil && obj.ID != "" {
		return obj.ID, nil
	}
	return "", invalid("voice", "Invalid 'voice': expected a voice name or {\"id\": NAME}.")
}

// applyVoice resolves a voice: a library voice, an OpenAI voice name, or an engine preset.
func (s *Server) applyVoice(req tts.Request, name string, ex engines.Explicit) (tts.Request, *APIError) {
	if s.eng.Voices != nil && voices.ValidName(name) == nil {
		v, err := s.eng.Voices.Get(name)
		switch {
		case err == nil:
			out, err := engines.ApplyVoice(req, v, s.eng.TTSEngine, ex)
			if err != nil {
				return req, invalid("voice", "voice %q: %v", name, err)
			}
			return out, nil
		case !errors.Is(err, voices.ErrNotFound):
			return req, invalid("voice", "voice %q: %v", name, err)
		}
	}
	if ov, ok := OpenAIVoices[strings.ToLower(name)]; ok {
		if slices.Contains(s.eng.TTS.Capabilities().Voices, ov.Kokoro) {
			req.Voice = ov.Kokoro
		} else if !req.HasSeed {
			req.Seed, req.HasSeed = openAISeed(s.eng.TTS, name)
		}
		return req, nil
	}
	req.Voice = name // an engine preset; the engine rejects names it does not know
	return req, nil
}

// ttsError maps a synthesis error to an API error.
func ttsError(err error) *APIError {
	switch {
	case errors.Is(err, tts.ErrUnknownVoice):
		return invalidCode("voice", "invalid_voice", "%v", err)
	case errors.Is(err, tts.ErrEmpty), errors.Is(err, tts.ErrTooLong), errors.Is(err, tts.ErrBadRequest):
		return invalid("input", "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return timedOut("synthesis took longer than the server's job timeout")
	case errors.Is(err, context.Canceled):
		return gone("client went away")
	}
	return internal("synthesis failed: %v", err)
}

// streamSpeech synthesises req and sends it in format as it comes. The first chunk is
// pulled before any header is written, so a request the engine refuses still gets a clean
// error; after that, a failure cuts the stream. pcm, flac, mp3, opus and aac stream chunk by
// chunk; wav is sent whole, with its true sizes and a Content-Length (a streamed WAV header
// can only say "unknown length", which many players and libraries refuse), its samples held
// in a spool meanwhile.
// With sse, the audio (in format) goes out as server-sent speech.audio.delta events with
// base64 data, then speech.audio.done, as OpenAI's stream_format=sse does.
func (s *Server) streamSpeech(ctx context.Context, w http.ResponseWriter, req tts.Request, format string, sse bool) *APIError {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := s.eng.TTS.Synthesize(ctx, req)
	if err != nil {
		return ttsError(err)
	}
	defer st.Close()
	first, err := st.Next(ctx)
	if err != nil && !errors.Is(err, io.EOF) {
		return ttsError(err)
	}
	ended := errors.Is(err, io.EOF)
	rate := SpeechRate
	if first.SampleRate > 0 {
		rate = first.SampleRate
	}
	rc := http.NewResponseController(w)
	var wmu sync.Mutex // an ffmpeg encoder emits from its own goroutine
	start := func(ctype string, length int64) {
		if sse {
			ctype = "text/event-stream"
			w.Header().Set("Cache-Control", "no-cache")
		} else if length >= 0 {
			w.Header().Set("Content-Length", strconv.FormatInt(length, 10))
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("X-Parley-Sample-Rate", strconv.Itoa(rate))
		w.WriteHeader(http.StatusOK)
		rc.Flush() // the client knows at once that audio is coming
	}
	event := func(v any) error {
		b, _ := json.Marshal(v)
		_, err := fmt.Fprintf(w, "data: %s\n\n", b)
		return err
	}
	// emit sends encoded bytes to the client: as they are, or as one SSE delta event.
	emit := func(b []byte) error {
		if len(b) == 0 {
			return nil
		}
		wmu.Lock()
		defer wmu.Unlock()
		rc.SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
		var err error
		if sse {
			err = event(map[string]any{"type": "speech.audio.delta", "audio": base64.StdEncoding.EncodeToString(b)})
		} else {
			_, err = w.Write(b)
		}
		if err != nil {
			return err
		}
		return rc.Flush()
	}
	each := func(f func(samples []float32) error) error {
		if ended {
			return nil
		}
		if err := f(first.Samples); err != nil {
			return err
		}
		return tts.Each(ctx, st, func(c tts.Chunk) error { return f(c.Samples) })
	}
	done := func() *APIError {
		if sse {
			wmu.Lock()
			rc.SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
			event(map[string]any{"type": "speech.audio.done", "usage": map[string]int{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}})
			rc.Flush()
			wmu.Unlock()
		}
		return nil
	}

	switch format {
	case "wav":
		pcm := newSpool(uploadMemMax, s.o.TempDir)
		defer pcm.Close()
		var buf []byte
		if err := each(func(x []float32) error {
			buf = audio.EncodePCM(buf[:0], x, audio.S16)
			_, err := pcm.Write(buf)
			return err
		}); err != nil {
			return ttsError(err)
		}
		h, err := audio.WAVHeader(audio.Format{SampleRate: rate, Channels: 1}, audio.S16, pcm.Len())
		if err != nil {
			return internal("%v", err)
		}
		length := int64(len(h)) + pcm.Len()
		if sse {
			length = -1
		}
		start("audio/wav", length)
		if err := emit(h); err != nil {
			return ttsError(err)
		}
		r, err := pcm.Reader()
		if err != nil {
			return internal("%v", err)
		}
		chunk := make([]byte, 64<<10)
		for {
			n, rerr := r.Read(chunk)
			if err := emit(chunk[:n]); err != nil {
				return ttsError(err)
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return internal("%v", rerr)
			}
		}
		return done()
	case "mp3", "opus", "aac":
		enc, err := newFFmpegEncoder(ctx, format, rate, emit)
		if err != nil {
			return internal("%v", err)
		}
		start(speechTypes[format], -1)
		err = each(enc.Write)
		if cerr := enc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return ttsError(err)
		}
		return done()
	}
	// pcm and flac: encoded here, chunk by chunk
	var pending bytes.Buffer
	var enc speechEncoder = &pcmEncoder{w: &pending}
	if format == "flac" {
		f, err := NewFLACWriter(&pending, rate)
		if err != nil {
			return internal("%v", err)
		}
		enc = f
	}
	start(speechTypes[format], -1)
	flush := func() error {
		err := emit(pending.Bytes())
		pending.Reset()
		return err
	}
	if err := each(func(x []float32) error {
		if err := enc.Write(x); err != nil {
			return err
		}
		return flush()
	}); err != nil {
		return ttsError(err)
	}
	if err := enc.Close(); err != nil {
		return ttsError(err)
	}
	if err := flush(); err != nil {
		return ttsError(err)
	}
	return done()
}

// speechTypes are the formats' Content-Types.
var speechTypes = map[string]string{"wav": "audio/wav", "pcm": "audio/pcm", "flac": "audio/flac",
	"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac"}

// speechEncoder writes audio in one response format.
type speechEncoder interface {
	Write(samples []float32) error
	Close() error
}

// pcmEncoder writes signed 16-bit little-endian samples (OpenAI's pcm: raw, no header).
type pcmEncoder struct {
	w   io.Writer
	buf []byte
}

func (p *pcmEncoder) Write(samples []float32) error {
	p.buf = audio.EncodePCM(p.buf[:0], samples, audio.S16)
	_, err := p.w.Write(p.buf)
	return err
}

func (p *pcmEncoder) Close() error { return nil }
