package serve

import (
	"bytes"
	"context"
	"errors"
	"mime/multipart"
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
