package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/asr"
)

// transcriptionModels are the model names a transcription request may give: OpenAI's (so
// clients work unchanged) and Parley's own. All of them mean the loaded recognizer.
var transcriptionModels = []string{"whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe", "sensevoice", "parley"}

var transcriptionFormats = []string{"json", "text", "srt", "verbose_json", "vtt"}

// maxFieldBytes bounds each non-file multipart field (prompt included).
const maxFieldBytes = 64 << 10

// maxParts bounds the number of multipart parts.
const maxParts = 64

// transcribeForm is a parsed transcription request.
type transcribeForm struct {
	File        *spool
	Filename    string
	Model       string
	Language    string
	Prompt      string
	Format      string
	Granularity []string
	Temperature string
	Stream      bool
}

// errUpload is a multipart problem, turned into a 400.
var errUpload = errors.New("bad upload")

// parseTranscribeForm reads a multipart transcription request with bounded memory: fields up
// to maxFieldBytes, the file up to maxFile bytes (errTooLarge beyond) into a spool (memory up
// to uploadMemMax, then a temporary file in tmpDir). On success the caller closes form.File.
func parseTranscribeForm(mr *multipart.Reader, maxFile int64, tmpDir string) (_ *transcribeForm, err error) {
	f := &transcribeForm{}
	defer func() {
		if err != nil && f.File != nil {
			f.File.Close()
		}
	}()
	for n := 0; ; n++ {
		if n >= maxParts {
			return nil, fmt.Errorf("%w: more than %d form fields", errUpload, maxParts)
		}
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, uploadErr(err)
		}
		name := p.FormName()
		if name == "file" {
			if f.File != nil {
				p.Close()
				return nil, fmt.Errorf("%w: more than one file", errUpload)
			}
			f.Filename = p.FileName()
			f.File = newSpool(uploadMemMax, tmpDir)
			n, err := io.Copy(f.File, io.LimitReader(p, maxFile+1))
			p.Close()
			if err != nil {
				return nil, uploadErr(err)
			}
			if n > maxFile {
				return nil, errTooLarge
			}
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p, maxFieldBytes+1))
		p.Close()
		if err != nil {
			return nil, uploadErr(err)
		}
		if len(b) > maxFieldBytes {
			return nil, fmt.Errorf("%w: field %q is longer than %d bytes", errUpload, name, maxFieldBytes)
		}
		v := strings.TrimSpace(string(b))
		switch name {
		case "model":
			f.Model = v
		case "language":
			f.Language = v
		case "prompt":
			f.Prompt = v
		case "response_format":
			f.Format = v
		case "temperature":
			f.Temperature = v
		case "timestamp_granularities[]", "timestamp_granularities":
			f.Granularity = append(f.Granularity, v)
		case "stream":
			f.Stream = v == "true" || v == "1"
		}
	}
	if f.File == nil {
		return nil, fmt.Errorf("%w: no file", errUpload)
	}
	return f, nil
}

// uploadMemMax is how much of an upload stays in memory before it goes to a temporary file.
const uploadMemMax = 1 << 20

var errTooLarge = errors.New("too large")

func uploadErr(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return errTooLarge
	case errors.Is(err, errSlowUpload):
		return errSlowUpload
	}
	if strings.Contains(err.Error(), "spooling the upload") {
		return err // the server's disk, not the client
	}
	return fmt.Errorf("%w: reading the upload: %v", errUpload, err)
}

func (s *Server) transcriptions(w http.ResponseWriter, r *http.Request) *APIError {
	return s.audioRequest(w, r, false)
}

// audioRequest serves a transcription (or, with translate, a translation). The upload is read
// in full (under a rate floor and a deadline, with bounded memory) and decoded before the
// job takes its place in the recogniser's queue, so slow clients hold no place others need,
// and the place is sized by the audio's real duration at 16 kHz.
func (s *Server) audioRequest(w http.ResponseWriter, r *http.Request, translate bool) *APIError {
	if s.eng.ASR == nil {
		return unavailable("no speech recognition model is loaded; install one with `parley models pull sensevoice-small-int8`")
	}
	if translate && !s.canTranslate() {
		w.Header().Set("Connection", "close")
		return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: str("model"), Code: str("translation_not_supported"),
			Message: "SenseVoice transcribes but cannot translate, and no LLM backend is configured to translate with (set llm.url, or run Ollama): use /v1/audio/transcriptions"}
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return invalidCode("", "invalid_content_type", "Invalid Content-Type header (%q): expected multipart/form-data with a `file` field", r.Header.Get("Content-Type"))
	}
	leave, ok := s.uploads.enter(clientHost(r.RemoteAddr))
	if !ok {
		w.Header().Set("Connection", "close")
		e := busy("upload", 2*time.Second)
		e.Message = "too many uploads are being received (from this client or in all); retry after 2 s"
		return e
	}
	defer leave()

	maxFile := int64(s.o.Config.MaxUploadMB) << 20
	fr := newFloorReader(w, r.Body, s.o.UploadGrace, s.o.MinUploadRate, s.o.UploadTimeout)
	r.Body = http.MaxBytesReader(w, io.NopCloser(fr), maxFile+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		w.Header().Set("Connection", "close")
		return invalidCode("file", "invalid_multipart", "malformed multipart body: %v", err)
	}
	form, err := parseTranscribeForm(mr, maxFile, s.o.TempDir)
	if err != nil && fr.failed {
		// the rate floor broke while multipart read a part's headers: textproto reports that
		// as a malformed header, but the client was slow, not malformed
		err = errSlowUpload
	}
	if err != nil {
		// What is left of the body is not worth reading: close the connection after the answer.
		w.Header().Set("Connection", "close")
	} else {
		fr.done()
		defer form.File.Close()
	}
	switch {
	case errors.Is(err, errTooLarge):
		return tooLarge("the upload is larger than %d MB (serve.max_upload_mb)", s.o.Config.MaxUploadMB)
	case errors.Is(err, errSlowUpload):
		return &APIError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: str("upload_too_slow"),
			Message: fmt.Sprintf("the upload arrived too slowly (under %.0f KB/s after %v, or not within %v)", s.o.MinUploadRate/1000, s.o.UploadGrace, s.o.UploadTimeout)}
	case errors.Is(err, errUpload) && strings.Contains(err.Error(), "no file"):
		return missingParam("file", "you must provide a `file` field with the audio")
	case errors.Is(err, errUpload):
		return invalidCode("file", "invalid_multipart", "%v", err)
	case err != nil:
		return internal("%v", err)
	}
	opts, format, gran, apiErr := s.transcribeOptions(form)
	if apiErr != nil {
		return apiErr
	}
	if form.File.Len() == 0 {
		return invalidCode("file", "empty_file", "the audio file is empty")
	}
	dec, apiErr := s.decode(r.Context(), form.File)
	form.File.Close() // the upload is decoded: its spool goes now, not after the job
	if apiErr != nil {
		return apiErr
	}
	defer dec.Close()
	leave() // decoded: the upload's place is free, the job's queue place is next
	res, apiErr := s.recognize(r.Context(), asrInput{dec: dec}, opts)
	if apiErr != nil {
		return apiErr
	}
	if translate {
		if apiErr := s.translate(r.Context(), res); apiErr != nil {
			return apiErr
		}
	}
	if form.Stream && form.Model != "whisper-1" && (format == "json" || format == "text") {
		return writeTranscriptionStream(w, res)
	}
	return writeTranscription(w, res, format, gran)
}

// decode decodes an upload under the decoder semaphore, mapping failures to 400s.
func (s *Server) decode(ctx context.Context, up *spool) (*decoded, *APIError) {
	select {
	case s.decoders <- struct{}{}:
	case <-ctx.Done():
		return nil, gone("client went away")
	}
	defer func() { <-s.decoders }()
	dec, err := decodeUpload(ctx, up, s.o.Config.MaxAudioSeconds, s.o.TempDir)
	switch {
	case err == nil:
		if dec.samples == 0 {
			dec.Close()
			return nil, invalidCode("file", "empty_audio", "the audio file holds no samples")
		}
		return dec, nil
	case errors.Is(err, errTooLong):
		return nil, invalidCode("file", "audio_too_long", "the audio is longer than %d s (serve.max_audio_seconds)", s.o.Config.MaxAudioSeconds)
	case errors.Is(err, errBadAudio):
		return nil, invalidCode("file", "invalid_audio", "could not read the audio: %s", strings.TrimPrefix(err.Error(), errBadAudio.Error()+": "))
	case ctx.Err() != nil:
		return nil, gone("client went away")
	}
	return nil, internal("decoding the upload: %v", err)
}

// writeTranscriptionStream answers stream=true as OpenAI's gpt-4o-transcribe models do:
// server-sent transcript.text.delta events (one per recognised segment), then
// transcript.text.done. whisper-1 ignores stream, and so does Parley for it.
func writeTranscriptionStream(w http.ResponseWriter, res *asr.Result) *APIError {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	event := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	for i, seg := range res.Segments {
		d := seg.Text
		if i > 0 {
			d = " " + d
		}
		if seg.Text != "" {
			event(map[string]any{"type": "transcript.text.delta", "delta": d})
		}
	}
	event(map[string]any{"type": "transcript.text.done", "text": res.Text,
		"usage": map[string]any{"type": "duration", "seconds": roundUp(res.Duration)}})
	return nil
}

func (s *Server) transcribeOptions(f *transcribeForm) (asr.Options, string, []string, *APIError) {
	o := s.eng.ASR.Options()
	if f.Model == "" {
		return o, "", nil, missingParam("model", "you must provide a model parameter")
	}
	if !slices.Contains(transcriptionModels, f.Model) && f.Model != s.eng.ASRModel {
		return o, "", nil, modelNotFound(f.Model)
	}
	format := f.Format
	if format == "" {
		format = "json"
	}
	if !slices.Contains(transcriptionFormats, format) {
		return o, "", nil, invalid("response_format", "Invalid value %q for response_format: expected one of %s", format, strings.Join(transcriptionFormats, ", "))
	}
	for _, g := range f.Granularity {
		if g != "word" && g != "segment" {
			return o, "", nil, invalid("timestamp_granularities", "Invalid value %q for timestamp_granularities[]: expected word or segment", g)
		}
	}
	// OpenAI refuses word timestamps outside verbose_json and ignores a bare "segment".
	if slices.Contains(f.Granularity, "word") && format != "verbose_json" {
		return o, "", nil, invalid("timestamp_granularities", "timestamp_granularities[]=word is only supported with response_format=verbose_json")
	}
	if f.Language != "" {
		l := strings.ToLower(f.Language)
		if l == "auto" || slices.Contains(s.eng.ASRLanguages, l) {
			o.Language = l
		} else {
			return o, "", nil, invalid("language", "Unsupported language %q: this model knows %s (ISO-639-1), or leave it out to detect the language", f.Language, strings.Join(s.eng.ASRLanguages, ", "))
		}
	}
	if f.Temperature != "" {
		var t float64
		if _, err := fmt.Sscan(f.Temperature, &t); err != nil || t < 0 || t > 1 {
			return o, "", nil, invalid("temperature", "temperature must be a number between 0 and 1")
		}
	}
	return o, format, f.Granularity, nil
}

func writeTranscription(w http.ResponseWriter, res *asr.Result, format string, gran []string) *APIError {
	switch format {
	case "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, res.Text+"\n")
	case "srt", "vtt":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		var buf bytes.Buffer
		if format == "srt" {
			asr.WriteSRT(&buf, res.Cues())
		} else {
			asr.WriteVTT(&buf, res.Cues())
		}
		w.Write(buf.Bytes())
	case "verbose_json":
		b, err := json.Marshal(res.Verbose())
		if err != nil {
			return internal("encoding: %v", err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		// Segments always come (they cost nothing); words only when asked for, as OpenAI does.
		if !slices.Contains(gran, "word") {
			delete(m, "words")
		}
		m["usage"] = map[string]any{"type": "duration", "seconds": roundUp(res.Duration)}
		writeJSON(w, m)
	default:
		writeJSON(w, map[string]any{"text": res.Text, "usage": map[string]any{"type": "duration", "seconds": roundUp(res.Duration)}})
	}
	return nil
}

func roundUp(sec float64) int {
	n := int(sec)
	if float64(n) < sec {
		n++
	}
	return n
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, internal("encoding: %v", err))
		return
	}
	w.Write(append(b, '\n'))
}
