package serve

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/tts"
)

// fakeASR returns a fixed transcript; block, when set, holds each call until it is closed
// or ctx ends.
type fakeASR struct {
	delay time.Duration
	block chan struct{}
	calls atomic.Int64
	lang  atomic.Value
}

func (f *fakeASR) Options() asr.Options { return asr.Options{Language: "auto", ITN: true} }

func (f *fakeASR) TranscribeWith(ctx context.Context, pcm []float32, o asr.Options) (*asr.Result, error) {
	f.calls.Add(1)
	f.lang.Store(o.Language)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.delay > 0 {
		select {
		case <-time.After(f.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if len(pcm) < 400 {
		return nil, fmt.Errorf("%w: %d samples is too short", asr.ErrInput, len(pcm))
	}
	d := float64(len(pcm)) / asr.SampleRate
	return &asr.Result{
		Text: "hello world", Lang: "en", Emotion: "HAPPY", Event: "Speech",
		Tokens: []string{" hello", " world"}, Timestamps: []float64{0.1, 0.5}, TokenIDs: []int{1, 2, 3, 4, 5, 6},
		Duration: d,
		Segments: []asr.Segment{{Start: 0, End: d, Text: "hello world", Lang: "en", Emotion: "HAPPY", Event: "Speech",
			Tokens: []string{" hello", " world"}, Timestamps: []float64{0.1, 0.5}}},
	}, nil
}

// fakeTTS speaks a 440 Hz tone per sentence (split at '.'), 0.1 s per word.
type fakeTTS struct {
	block chan struct{}
	pace  time.Duration // a pause before each sentence, as a slow voice takes
	calls atomic.Int64
	last  atomic.Value // tts.Request
}

func (f *fakeTTS) Capabilities() tts.Capabilities {
	return tts.Capabilities{Engine: "fake", SampleRate: 22050, Languages: []string{"en"}, Voices: []string{"af_alloy", "bm_fable", "v1"}}
}
func (f *fakeTTS) Close() error { return nil }

func (f *fakeTTS) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	f.calls.Add(1)
	req, err := req.Validate()
	if err != nil {
		return nil, err
	}
	f.last.Store(req)
	if req.Voice != "" && req.Voice != "af_alloy" && req.Voice != "bm_fable" && req.Voice != "v1" {
		return nil, fmt.Errorf("%w: %q", tts.ErrUnknownVoice, req.Voice)
	}
	rate := req.SampleRate
	if rate == 0 {
		rate = 22050
	}
	var sentences []string
	for _, s := range strings.Split(req.Text, ".") {
		if strings.TrimSpace(s) != "" {
			sentences = append(sentences, s)
		}
	}
	return tts.NewStream(ctx, nil, func(ctx context.Context, emit func(tts.Chunk) error) error {
		if f.block != nil {
			select {
			case <-f.block:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for i, s := range sentences {
			if f.pace > 0 {
				select {
				case <-time.After(f.pace):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			n := len(strings.Fields(s)) * rate / 10
			x := make([]float32, n)
			for j := range x {
				x[j] = float32(0.3 * math.Sin(2*math.Pi*440*float64(j)/float64(rate)))
			}
			if err := emit(tts.Chunk{Samples: x, SampleRate: rate, Sentence: i, Text: s, Last: true}); err != nil {
				return err
			}
		}
		return nil
	}), nil
}

// testServer runs a Server on loopback and returns its base URL; it stops with the test.
func testServer(t testing.TB, e Engines, mod func(*Options)) (*Server, string) {
	t.Helper()
	o := Options{Config: config.Default().Serve, Engines: e, Version: "test"}
	o.Config.Addr = "127.0.0.1:0"
	if mod != nil {
		mod(&o)
	}
	s, addr, stop, done := runServer(t, o)
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("server did not stop")
		}
	})
	return s, "http://" + addr
}

// runServer serves o on a loopback listener until stop, which starts the server's shutdown;
// done then gives Serve's result. The caller (a shutdown test) drives both.
func runServer(t testing.TB, o Options) (s *Server, addr string, stop context.CancelFunc, done <-chan error) {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, Listeners{HTTP: ln}) }()
	return s, ln.Addr().String(), cancel, served
}

// wavBytes is a 16-bit WAV of a tone.
func wavBytes(t testing.TB, rate, channels int, seconds float64) []byte {
	t.Helper()
	n := int(float64(rate) * seconds)
	b := &audio.Buffer{Format: audio.Format{SampleRate: rate, Channels: channels}, Data: make([]float32, n*channels)}
	for i := 0; i < n; i++ {
		for c := 0; c < channels; c++ {
			b.Data[i*channels+c] = float32(0.2 * math.Sin(2*math.Pi*300*float64(i)/float64(rate)))
		}
	}
	var buf bytes.Buffer
	if err := audio.WriteWAV(&buf, b, audio.S16); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// multipartBody builds a transcription form; fields with key "file" are the file.
func multipartBody(t testing.TB, file []byte, fields ...[2]string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range fields {
		mw.WriteField(f[0], f[1])
	}
	if file != nil {
		fw, err := mw.CreateFormFile("file", "speech.wav")
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(file)
	}
	mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

func post(t testing.TB, url, ctype string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// apiErr decodes OpenAI's error shape, failing the test when the body is not one.
func apiErr(t testing.TB, body []byte) (msg, typ, param, code string) {
	t.Helper()
	var e struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
		t.Fatalf("not an OpenAI error: %v: %s", err, body)
	}
	if e.Error.Message == "" || e.Error.Type == "" || e.Error.Code == nil || *e.Error.Code == "" {
		t.Errorf("error lacks message, type or code: %s", body)
	}
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Message, e.Error.Type, param, code
}

func pcm16(b []byte) []int16 {
	out := make([]int16, len(b)/2)
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return out
}
