package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime/multipart"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/parley-voice/parley/app/config"
)

// FuzzTranscriptionForm feeds arbitrary multipart bodies (and, when they carry a WAV-looking
// file, its bytes) through the upload parser and the WAV decoder: never a panic, errors
// are typed, limits hold.
func FuzzTranscriptionForm(f *testing.F) {
	ct, body := multipartBody(f, wavBytes(f, 8000, 1, 0.05), [2]string{"model", "whisper-1"}, [2]string{"response_format", "verbose_json"}, [2]string{"timestamp_granularities[]", "word"})
	_, boundary, _ := bytes.Cut([]byte(ct), []byte("boundary="))
	f.Add(boundary, body)
	f.Add([]byte("zz"), []byte("--zz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF\x00\x00\x00\x00WAVEfmt \r\n--zz--\r\n"))
	f.Add([]byte("zz"), []byte("--zz\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--zz--\r\n"))
	f.Add([]byte("zz"), []byte("--zz--"))
	s, err := New(Options{Config: config.Default().Serve, Engines: Engines{ASR: &fakeASR{}}})
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, boundary, body []byte) {
		if len(boundary) == 0 || len(boundary) > 70 {
			return
		}
		mr := multipart.NewReader(bytes.NewReader(body), string(boundary))
		form, err := parseTranscribeForm(mr, 1<<16, dir)
		if err != nil {
			if !errors.Is(err, errUpload) && !errors.Is(err, errTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		defer form.File.Close()
		if form.File.Len() > 1<<16 {
			t.Fatalf("file of %d bytes passed a 64 KiB limit", form.File.Len())
		}
		if _, _, _, e := s.transcribeOptions(form); e != nil && e.Status/100 != 4 {
			t.Fatalf("options error status %d", e.Status)
		}
		b, _ := form.File.Bytes()
		if isWAV(b) {
			d, err := decodeUpload(context.Background(), form.File, 2, dir)
			if err == nil {
				if d.Seconds() > 2.001 {
					t.Fatalf("%g s passed the 2 s limit", d.Seconds())
				}
				d.Close()
			} else if !errors.Is(err, errBadAudio) && !errors.Is(err, errTooLong) {
				t.Fatalf("untyped decode error %v", err)
			}
		}
	})
}

// FuzzFLACWriter checks the encoder on arbitrary samples: frames are whole and sized as
// verbatim at worst.
func FuzzFLACWriter(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add(bytes.Repeat([]byte{0xff, 0x7f, 0x00, 0x80}, 3000))
	f.Fuzz(func(t *testing.T, b []byte) {
		x := make([]float32, len(b)/2)
		for i := range x {
			x[i] = float32(int16(uint16(b[2*i])|uint16(b[2*i+1])<<8)) / 32768
		}
		var out bytes.Buffer
		w, _ := NewFLACWriter(&out, 24000)
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
		w.Close()
		frames := (len(x) + flacBlock - 1) / flacBlock
		if max := 42 + frames*(32+2*flacBlock+3) + 2*len(x); out.Len() > max {
			t.Fatalf("%d bytes for %d samples (verbatim bound %d)", out.Len(), len(x), max)
		}
	})
}

// FuzzJSONRequests sends arbitrary bodies to the JSON endpoints (speech and chat): each gets
// a 2xx, or a 4xx in OpenAI's error shape; never a 5xx, which is what a handler's panic
// becomes.
func FuzzJSONRequests(f *testing.F) {
	f.Add(false, `{"model":"tts-1","input":"Hello there.","voice":"alloy","response_format":"wav","speed":1.5}`)
	f.Add(false, `{"model":"fake","input":"Hi. Again.","voice":{"id":"v1"},"response_format":"pcm","stream_format":"sse","seed":7,"temperature":0.3,"top_p":0.7,"top_k":20,"language":"en"}`)
	f.Add(false, `{"model":"tts-1","input":"x","voice":"nobody","response_format":"flac","speed":"fast"}`)
	f.Add(true, `{"model":"parley-skills","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"what is 2 plus 2"}]}`)
	f.Add(true, `{"model":"parley","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":5,"n":1}`)
	f.Add(true, `{"model":"parley","messages":[{"role":"tool","tool_call_id":"1","content":null}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`)
	f.Add(true, `{"messages":[]} trailing`)
	s, err := New(Options{Config: config.Default().Serve, Engines: Engines{TTS: &fakeTTS{}}})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, chat bool, body string) {
		if len(body) > 64<<10 {
			return
		}
		path := "/v1/audio/speech"
		if chat {
			path = "/v1/chat/completions"
		} else if ffmpegFormat(body) {
			return // a process per input is too slow to fuzz
		}
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s %q: status %d: %s", path, body, w.Code, w.Body)
		}
		if w.Code >= 400 {
			var e struct {
				Error struct{ Message, Type string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("%s %q: status %d without an OpenAI error: %s", path, body, w.Code, w.Body)
			}
		}
	})
}

// ffmpegFormat says whether a speech request's body asks for a format ffmpeg encodes (mp3
// is the default), read as the server reads it.
func ffmpegFormat(body string) bool {
	var req struct {
		Format any `json:"response_format"`
	}
	if json.Unmarshal([]byte(body), &req) != nil {
		return false
	}
	switch f := req.Format.(type) {
	case nil:
		return true
	case string:
		return f == "" || f == "mp3" || f == "opus" || f == "aac"
	}
	return false
}
