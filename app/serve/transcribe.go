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
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
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
	File        []byte
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
// to maxFieldBytes, the file up to maxFile bytes (errTooLarge beyond).
func parseTranscribeForm(mr *multipart.Reader, maxFile int64) (*transcribeForm, error) {
	f := &transcribeForm{}
	hasFile := false
	for n := 0; ; n++ {
		if n >= maxParts {
			return nil, fmt.Errorf("%w: more than %d form fields", errUpload, maxParts)
		}
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: malformed multipart body: %v", errUpload, err)
		}
		name := p.FormName()
		if name == "file" {
			if hasFile {
				p.Close()
				return nil, fmt.Errorf("%w: more than one file", errUpload)
			}
			hasFile = true
			f.Filename = p.FileName()
			var buf bytes.Buffer
			n, err := io.Copy(&buf, io.LimitReader(p, maxFile+1))
			p.Close()
			if err != nil {
				return nil, uploadErr(err)
			}
			if n > maxFile {
				return nil, errTooLarge
			}
			f.File = buf.Bytes()
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
	if !hasFile {
		return nil, fmt.Errorf("%w: no file", errUpload)
	}
	return f, nil
}

var errTooLarge = errors.New("too large")

func uploadErr(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errTooLarge
	}
	return fmt.Errorf("%w: reading the upload: %v", errUpload, err)
}

func (s *Server) transcriptions(w http.ResponseWriter, r *http.Request) *APIError {
	if s.eng.ASR == nil {
		return unavailable("no speech recognition model is loaded; install one with `parley models pull sensevoice-small-int8`")
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return invalid("", "Invalid Content-Type header (%q): expected multipart/form-data with a `file` field", r.Header.Get("Content-Type"))
	}
	// Take a place in the queue before reading the body: bodies held in memory are bounded
	// by the queue.
	ticket, err := s.asrLim.Admit()
	if err != nil {
		return busy("asr", s.asrLim.RetryAfter())
	}
	defer ticket.Done()

	maxFile := int64(s.o.Config.MaxUploadMB) << 20
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.o.UploadTimeout))
	r.Body = http.MaxBytesReader(w, r.Body, maxFile+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		w.Header().Set("Connection", "close")
		return invalid("file", "malformed multipart body: %v", err)
	}
	form, err := parseTranscribeForm(mr, maxFile)
	if err != nil {
		// What is left of the body is not worth reading: close the connection after the answer.
		w.Header().Set("Connection", "close")
	} else {
		rc.SetReadDeadline(time.Time{})
	}
	switch {
	case errors.Is(err, errTooLarge):
		return tooLarge("the upload is larger than %d MB (serve.max_upload_mb)", s.o.Config.MaxUploadMB)
	case errors.Is(err, errUpload) && strings.Contains(err.Error(), "no file"):
		return missingParam("file", "you must provide a `file` field with the audio")
	case err != nil:
		return invalid("file", "%v", err)
	}
	opts, format, gran, apiErr := s.transcribeOptions(form)
	if apiErr != nil {
		return apiErr
	}
	if len(form.File) == 0 {
		return invalid("file", "the audio file is empty")
	}
	if err := ticket.Wait(r.Context()); err != nil {
		return gone("client went away while queued")
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.o.JobTimeout)
	defer cancel()
	// Audio is decoded only once a worker is free, so only running jobs hold decoded audio;
	// a recognizer that streams (asr.Recognizer) holds at most one 30 s window of it.
	res, apiErr := s.recognize(ctx, form.File, opts)
	ticket.Done()
	if apiErr != nil {
		if r.Context().Err() != nil {
			return gone("client went away")
		}
		return apiErr
	}
	if form.Stream && form.Model != "whisper-1" && (format == "json" || format == "text") {
		return writeTranscriptionStream(w, res)
	}
	return writeTranscription(w, res, format, gran)
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

// streamTranscriber is a recognizer that reads a stream with bounded memory
// (*asr.Recognizer is one).
type streamTranscriber interface {
	TranscribeStream(ctx context.Context, src asr.Source, o asr.Options, onSegment func(asr.Segment) error) (*asr.Result, error)
}

// errTooLong and errBadAudio mark source failures that are the upload's fault.
var (
	errTooLong  = errors.New("audio too long")
	errBadAudio = errors.New("bad audio")
)

// recognize decodes an upload and transcribes it: WAV (any layout) directly, anything else
// through ffmpeg; what the file is called does not matter, only what it holds.
func (s *Server) recognize(ctx context.Context, data []byte, o asr.Options) (*asr.Result, *APIError) {
	src, wait, err := openUpload(ctx, data)
	if err != nil {
		return nil, invalid("file", "could not read the audio: %v", err)
	}
	lim := &limitSource{src: src, max: int64(s.o.Config.MaxAudioSeconds) * asr.SampleRate}
	var res *asr.Result
	if st, ok := s.eng.ASR.(streamTranscriber); ok {
		res, err = st.TranscribeStream(ctx, lim, o, nil)
	} else {
		var b *audio.Buffer
		if b, err = audio.ReadAll(ctx, lim, 0); err == nil && len(b.Data) > 0 {
			res, err = s.eng.ASR.TranscribeWith(ctx, b.Data, o)
		}
	}
	if werr := wait(); werr != nil && !errors.Is(err, errTooLong) {
		return nil, invalid("file", "could not read the audio: %v", werr)
	}
	switch {
	case errors.Is(err, errTooLong):
		return nil, invalid("file", "the audio is longer than %d s (serve.max_audio_seconds)", s.o.Config.MaxAudioSeconds)
	case errors.Is(err, errBadAudio):
		return nil, invalid("file", "could not read the audio: %v", err)
	case err == nil && lim.n == 0:
		return nil, invalid("file", "the audio file holds no samples")
	case errors.Is(err, asr.ErrInput):
		return nil, invalid("file", "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, timedOut("transcription took longer than the server's job timeout")
	case errors.Is(err, context.Canceled):
		return nil, gone("client went away")
	case err != nil:
		return nil, internal("transcription failed: %v", err)
	}
	return res, nil
}

// limitSource counts samples and fails with errTooLong past max; read errors of the
// decoder become errBadAudio.
type limitSource struct {
	src audio.Source
	n   int64
	max int64
}

func (l *limitSource) Format() audio.Format { return audio.Mono16k }

func (l *limitSource) Read(ctx context.Context, p []float32) (int, error) {
	n, err := l.src.Read(ctx, p)
	l.n += int64(n)
	if l.n > l.max {
		return n, errTooLong
	}
	if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		err = fmt.Errorf("%w: %v", errBadAudio, err)
	}
	return n, err
}

func isWAV(h []byte) bool {
	return len(h) >= 12 && (bytes.Equal(h[:4], []byte("RIFF")) || bytes.Equal(h[:4], []byte("RF64"))) && bytes.Equal(h[8:12], []byte("WAVE"))
}

// openUpload returns the upload as a 16 kHz mono source, and a wait function that reports
// whether the decoder (ffmpeg) failed; wait must be called.
func openUpload(ctx context.Context, data []byte) (audio.Source, func() error, error) {
	if isWAV(data) {
		wr, err := audio.NewWAVReader(bytes.NewReader(data))
		if err != nil {
			return nil, nil, err
		}
		src, err := audio.Convert(wr, audio.Mono16k, audio.QualityHigh)
		if err != nil {
			return nil, nil, err
		}
		return src, func() error { return nil }, nil
	}
	return ffmpegSource(ctx, data)
}

// ffmpegSource decodes any other container/codec with ffmpeg (when installed).
func ffmpegSource(ctx context.Context, data []byte) (audio.Source, func() error, error) {
	bin, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, nil, fmt.Errorf("not a WAV file, and ffmpeg (needed for other formats) is not installed on the server")
	}
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, bin, "-nostdin", "-hide_banner", "-loglevel", "error",
		"-i", "pipe:0", "-vn", "-f", "s16le", "-acodec", "pcm_s16le", "-ac", "1", "-ar", "16000", "pipe:1")
	cmd.Stdin = bytes.NewReader(data)
	stderr := &limitedBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("ffmpeg: %w", err)
	}
	pr, err := audio.NewPCMReader(out, audio.Mono16k, audio.S16)
	if err != nil {
		cancel()
		cmd.Wait()
		return nil, nil, err
	}
	wait := func() error {
		cancel() // a reader that stopped early (too long) must not leave ffmpeg running
		werr := cmd.Wait()
		if werr == nil {
			return nil
		}
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg == "" {
			if ctx.Err() != nil {
				return nil // we stopped it
			}
			msg = werr.Error()
		}
		return fmt.Errorf("not audio that WAV or ffmpeg can decode (%s)", strings.TrimPrefix(msg, "pipe:0: "))
	}
	return pr, wait, nil
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct{ bytes.Buffer }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - l.Len(); room > 0 {
		l.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
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
