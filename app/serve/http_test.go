package serve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"
)

func TestTranscriptionFormats(t *testing.T) {
	asrE := &fakeASR{}
	_, base := testServer(t, Engines{ASR: asrE, ASRModel: "fake-sv"}, nil)
	wav := wavBytes(t, 44100, 2, 1.5)
	cases := []struct {
		name   string
		fields [][2]string
		ctype  string
		check  func(t *testing.T, body []byte)
	}{
		{"json", [][2]string{{"model", "whisper-1"}}, "application/json", func(t *testing.T, b []byte) {
			var v struct {
				Text  string `json:"text"`
				Usage struct {
					Type    string `json:"type"`
					Seconds int    `json:"seconds"`
				} `json:"usage"`
			}
			json.Unmarshal(b, &v)
			if v.Text != "hello world" || v.Usage.Type != "duration" || v.Usage.Seconds != 2 {
				t.Errorf("json = %s", b)
			}
		}},
		{"text", [][2]string{{"model", "fake-sv"}, {"response_format", "text"}}, "text/plain", func(t *testing.T, b []byte) {
			if string(b) != "hello world\n" {
				t.Errorf("text = %q", b)
			}
		}},
		{"srt", [][2]string{{"model", "whisper-1"}, {"response_format", "srt"}}, "text/plain", func(t *testing.T, b []byte) {
			if !strings.HasPrefix(string(b), "1\n00:00:00,") || !strings.Contains(string(b), "-->") {
				t.Errorf("srt = %q", b)
			}
		}},
		{"vtt", [][2]string{{"model", "whisper-1"}, {"response_format", "vtt"}}, "text/plain", func(t *testing.T, b []byte) {
			if !strings.HasPrefix(string(b), "WEBVTT") || !strings.Contains(string(b), "00:00:00.") {
				t.Errorf("vtt = %q", b)
			}
		}},
		{"verbose default segments", [][2]string{{"model", "whisper-1"}, {"response_format", "verbose_json"}}, "application/json", func(t *testing.T, b []byte) {
			var v map[string]any
			json.Unmarshal(b, &v)
			if v["task"] != "transcribe" || v["language"] != "english" || v["emotion"] != "HAPPY" || v["event"] != "Speech" || v["segments"] == nil {
				t.Errorf("verbose = %s", b)
			}
			if _, ok := v["words"]; ok {
				t.Errorf("words without timestamp_granularities[]=word: %s", b)
			}
		}},
		{"verbose words", [][2]string{{"model", "whisper-1"}, {"response_format", "verbose_json"}, {"timestamp_granularities[]", "word"}}, "application/json", func(t *testing.T, b []byte) {
			var v struct {
				Words    []map[string]any `json:"words"`
				Segments []any            `json:"segments"`
			}
			json.Unmarshal(b, &v)
			if len(v.Words) != 2 || v.Words[0]["word"] != "hello" || v.Words[0]["start"] == nil || len(v.Segments) != 1 {
				t.Errorf("verbose words = %s", b)
			}
		}},
		{"verbose both", [][2]string{{"model", "whisper-1"}, {"response_format", "verbose_json"}, {"timestamp_granularities[]", "word"}, {"timestamp_granularities[]", "segment"}}, "application/json", func(t *testing.T, b []byte) {
			var v struct {
				Words    []any `json:"words"`
				Segments []struct {
					Emotion string `json:"emotion"`
				} `json:"segments"`
			}
			json.Unmarshal(b, &v)
			if len(v.Words) != 2 || len(v.Segments) != 1 || v.Segments[0].Emotion != "HAPPY" {
				t.Errorf("verbose both = %s", b)
			}
		}},
		{"json ignores segment granularity", [][2]string{{"model", "whisper-1"}, {"timestamp_granularities[]", "segment"}}, "application/json", func(t *testing.T, b []byte) {
			if !strings.Contains(string(b), `"text":"hello world"`) {
				t.Errorf("json = %s", b)
			}
		}},
		{"stream", [][2]string{{"model", "gpt-4o-transcribe"}, {"stream", "true"}}, "text/event-stream", func(t *testing.T, b []byte) {
			if !strings.Contains(string(b), `"type":"transcript.text.delta"`) || !strings.Contains(string(b), `{"text":"hello world","type":"transcript.text.done"`) {
				t.Errorf("stream = %s", b)
			}
		}},
		{"whisper-1 ignores stream", [][2]string{{"model", "whisper-1"}, {"stream", "true"}}, "application/json", func(t *testing.T, b []byte) {}},
		{"language", [][2]string{{"model", "whisper-1"}, {"language", "en"}}, "application/json", func(t *testing.T, b []byte) {
			if asrE.lang.Load() != "en" {
				t.Errorf("language passed as %v", asrE.lang.Load())
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ct, body := multipartBody(t, wav, tc.fields...)
			resp, b := post(t, base+"/v1/audio/transcriptions", ct, body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) {
				t.Errorf("content type %q", resp.Header.Get("Content-Type"))
			}
			tc.check(t, b)
		})
	}
}

func TestTranscriptionBadInput(t *testing.T) {
	_, base := testServer(t, Engines{ASR: &fakeASR{}, ASRModel: "fake-sv"}, func(o *Options) {
		o.Config.MaxUploadMB = 1
		o.Config.MaxAudioSeconds = 5
	})
	wav := wavBytes(t, 16000, 1, 1)
	truncated := wav[:len(wav)/2]
	mislabeledHeader := append([]byte(nil), wav...)
	copy(mislabeledHeader[8:12], "AVI ")
	cases := []struct {
		name   string
		ctype  string
		body   []byte
		status int
		param  string
		want   string
	}{
		{"not multipart", "application/json", []byte(`{"file":"x"}`), 400, "", "multipart/form-data"},
		{"no file", "", nil, 400, "file", "file"},
		{"empty file", "", []byte{}, 400, "file", "empty"},
		{"not audio", "", []byte("this is a text file, not audio at all........"), 400, "file", "could not read the audio"},
		{"garbage RIFF", "", mislabeledHeader, 400, "file", "could not read the audio"},
		{"too big", "", bytes.Repeat([]byte{1}, 2<<20), 413, "", "larger than 1 MB"},
		{"too long audio", "", wavBytes(t, 8000, 1, 6), 400, "file", "longer than 5 s"},
		{"missing model", "nomodel", wav, 400, "model", "model"},
		{"unknown model", "badmodel", wav, 404, "model", "does not exist"},
		{"bad format", "badformat", wav, 400, "response_format", "verbose_json"},
		{"granularity without verbose", "gran", wav, 400, "timestamp_granularities", "verbose_json"},
		{"bad language", "badlang", wav, 400, "language", "fr"},
		// a few bytes that claim an hour once resampled to 16 kHz: refused before any work
		{"1 Hz WAV", "", append(wavHeader(1, 7200), make([]byte, 7200)...), 400, "file", "below 4000 Hz"},
		{"too long by its header", "", wavHeader(16000, 6*32000), 400, "file", "longer than 5 s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ct string
			var body []byte
			fields := [][2]string{{"model", "whisper-1"}}
			switch tc.ctype {
			case "application/json":
				ct, body = tc.ctype, tc.body
			case "nomodel":
				fields = nil
			case "badmodel":
				fields = [][2]string{{"model", "gpt-9"}}
			case "badformat":
				fields = append(fields, [2]string{"response_format", "mp3"})
			case "gran":
				fields = append(fields, [2]string{"timestamp_granularities[]", "word"})
			case "badlang":
				fields = append(fields, [2]string{"language", "fr"})
			}
			if ct == "" {
				file := tc.body
				if tc.name == "no file" {
					file = nil
				}
				ct, body = multipartBody(t, file, fields...)
			}
			resp, b := post(t, base+"/v1/audio/transcriptions", ct, body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			msg, _, param, _ := apiErr(t, b)
			if param != tc.param {
				t.Errorf("param %q, want %q (%s)", param, tc.param, msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("message %q lacks %q", msg, tc.want)
			}
		})
	}
	t.Run("truncated WAV still transcribes what is there", func(t *testing.T) {
		ct, body := multipartBody(t, truncated, [2]string{"model", "whisper-1"})
		resp, b := post(t, base+"/v1/audio/transcriptions", ct, body)
		if resp.StatusCode != 200 && resp.StatusCode != 400 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		if resp.StatusCode == 400 {
			apiErr(t, b)
		}
	})
	t.Run("still serving", func(t *testing.T) {
		ct, body := multipartBody(t, wav, [2]string{"model", "whisper-1"})
		resp, b := post(t, base+"/v1/audio/transcriptions", ct, body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
	})
}

func TestTranscriptionNonWAVThroughFFmpeg(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed")
	}
	_, base := testServer(t, Engines{ASR: &fakeASR{}}, nil)
	// a FLAC file (what many clients upload), made by our own encoder
	var flac bytes.Buffer
	fw, _ := NewFLACWriter(&flac, 16000)
	x := make([]float32, 16000)
	for i := range x {
		x[i] = float32(i%100) / 400
	}
	fw.Write(x)
	fw.Close()
	ct, body := multipartBody(t, flac.Bytes(), [2]string{"model", "whisper-1"}, [2]string{"response_format", "verbose_json"})
	resp, b := post(t, base+"/v1/audio/transcriptions", ct, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var v struct {
		Duration float64 `json:"duration"`
	}
	json.Unmarshal(b, &v)
	if v.Duration < 0.99 || v.Duration > 1.01 {
		t.Errorf("duration %g, want 1 s", v.Duration)
	}
	// an AU file (ffmpeg's path, not our WAV reader) declaring 1 Hz: the rate floor holds
	// there too, read from ffmpeg's stream info
	au := []byte(".snd\x00\x00\x00\x18\x00\x00\x1c\x20\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00\x01")
	au = append(au, make([]byte, 7200)...)
	ct, body = multipartBody(t, au, [2]string{"model", "whisper-1"})
	resp, b = post(t, base+"/v1/audio/transcriptions", ct, body)
	if msg, _, _, code := apiErr(t, b); resp.StatusCode != 400 || code != "invalid_audio" || !strings.Contains(msg, "1 Hz is below") {
		t.Errorf("1 Hz AU: %d %s", resp.StatusCode, b)
	}
}

func TestSpeechFormats(t *testing.T) {
	eng := &fakeTTS{}
	_, base := testServer(t, Engines{TTS: eng}, nil)
	req := func(format string) []byte {
		body := fmt.Sprintf(`{"model":"tts-1","input":"One two three. Four five.","voice":"alloy","response_format":%q}`, format)
		resp, b := post(t, base+"/v1/audio/speech", "application/json", []byte(body))
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", format, resp.StatusCode, b)
		}
		want := map[string]string{"wav": "audio/wav", "pcm": "audio/pcm", "flac": "audio/flac", "mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac"}[format]
		if resp.Header.Get("Content-Type") != want {
			t.Errorf("%s: content type %q", format, resp.Header.Get("Content-Type"))
		}
		if format == "wav" {
			// whole, with its true sizes and length: no "unknown length" header
			if resp.ContentLength != int64(len(b)) || binary.LittleEndian.Uint32(b[4:]) != uint32(len(b)-8) || binary.LittleEndian.Uint32(b[40:]) != uint32(len(b)-44) {
				t.Errorf("wav: length %d, RIFF size %d, data size %d for %d bytes", resp.ContentLength, binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[40:]), len(b))
			}
		} else if resp.ContentLength != -1 || len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
			t.Errorf("%s: not streamed chunked (length %d, %v)", format, resp.ContentLength, resp.TransferEncoding)
		}
		return b
	}
	pcm := req("pcm")
	if n := len(pcm) / 2; n != 5*SpeechRate/10 {
		t.Errorf("pcm: %d samples, want %d (5 words at 24 kHz)", n, 5*SpeechRate/10)
	}
	// the engine's samples, quantized as everywhere else in Parley (audio.EncodePCM rounds)
	var want []byte
	for _, words := range []int{3, 2} {
		x := make([]float32, words*SpeechRate/10)
		for j := range x {
			x[j] = float32(0.3 * math.Sin(2*math.Pi*440*float64(j)/SpeechRate))
		}
		want = audio.EncodePCM(want, x, audio.S16)
	}
	if !bytes.Equal(pcm, want) {
		t.Error("pcm is not the engine's samples as audio.EncodePCM writes them")
	}
	r := eng.last.Load().(tts.Request)
	if r.Voice != "af_alloy" {
		t.Errorf("alloy mapped to %+v", r)
	}
	wav := req("wav")
	if string(wav[:4]) != "RIFF" || string(wav[8:12]) != "WAVE" || !bytes.Equal(wav[44:], pcm) {
		t.Errorf("wav does not hold exactly the pcm samples")
	}
	// stream_format=sse: the same pcm, base64 in speech.audio.delta events
	resp, b := post(t, base+"/v1/audio/speech", "application/json", []byte(`{"model":"tts-1","input":"One two three. Four five.","voice":"alloy","response_format":"pcm","stream_format":"sse"}`))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("sse: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var ssePCM []byte
	done := false
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct{ Type, Audio string }
		json.Unmarshal([]byte(data), &ev)
		switch ev.Type {
		case "speech.audio.delta":
			chunk, err := base64.StdEncoding.DecodeString(ev.Audio)
			if err != nil {
				t.Fatal(err)
			}
			ssePCM = append(ssePCM, chunk...)
		case "speech.audio.done":
			done = true
		}
	}
	if !done || !bytes.Equal(ssePCM, pcm) {
		t.Errorf("sse: done %v, %d bytes vs %d", done, len(ssePCM), len(pcm))
	}
	flac := req("flac")
	if string(flac[:4]) != "fLaC" {
		t.Fatalf("flac starts %q", flac[:4])
	}
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed: no mp3, opus or aac")
	}
	dec := ffmpegDecodeS16(t, flac)
	if !bytes.Equal(dec, pcm) {
		t.Errorf("flac decoded by ffmpeg differs from pcm (%d vs %d bytes)", len(dec), len(pcm))
	}
	// mp3 (OpenAI's default, so also what no response_format gives), opus in Ogg, aac in
	// ADTS: ffmpeg decodes each back to the tone, about as long as the pcm
	for _, format := range []string{"mp3", "opus", "aac", ""} {
		var b []byte
		if format == "" {
			resp, body := post(t, base+"/v1/audio/speech", "application/json", []byte(`{"model":"tts-1","input":"One two three. Four five.","voice":"alloy"}`))
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "audio/mpeg" {
				t.Fatalf("default format: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			b = body
		} else {
			b = req(format)
		}
		magic := map[string]string{"opus": "OggS"}[format]
		if magic != "" && string(b[:4]) != magic {
			t.Errorf("%s starts %q", format, b[:4])
		}
		dec := pcm16(ffmpegDecodeS16At(t, b, SpeechRate))
		secs := float64(len(dec)) / SpeechRate
		if secs < 0.45 || secs > 0.65 {
			t.Errorf("%s decodes to %.3f s, want ~0.5", format, secs)
		}
		var e float64
		for _, v := range dec {
			e += float64(v) * float64(v)
		}
		if rms := math.Sqrt(e/float64(len(dec))) / 32768; rms < 0.15 || rms > 0.3 {
			t.Errorf("%s decodes to RMS %.3f, the tone has 0.21", format, rms)
		}
	}
}

// ffmpegDecodeS16At decodes any audio to 16-bit mono at rate.
func ffmpegDecodeS16At(t *testing.T, in []byte, rate int) []byte {
	t.Helper()
	cmd := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-i", "pipe:0", "-f", "s16le", "-ac", "1", "-ar", strconv.Itoa(rate), "pipe:1")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ffmpeg cannot decode it: %v: %s", err, stderr.String())
	}
	return out
}

func ffmpegDecodeS16(t *testing.T, in []byte) []byte {
	t.Helper()
	cmd := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-i", "pipe:0", "-f", "s16le", "pipe:1")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ffmpeg cannot decode: %v: %s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("ffmpeg complained: %s", stderr.String())
	}
	return out
}

func TestSpeechBadInput(t *testing.T) {
	_, base := testServer(t, Engines{TTS: &fakeTTS{}}, nil)
	long := strings.Repeat("a", MaxSpeechInput+1)
	cases := []struct {
		name, body string
		status     int
		param      string
		want       string
	}{
		{"invalid json", `{"model":`, 400, "", "could not parse"},
		{"empty body", ``, 400, "", "empty"},
		{"trailing", `{"model":"tts-1","input":"hi","voice":"alloy"} {}`, 400, "", "trailing"},
		{"wrong type", `{"model":"tts-1","input":5,"voice":"alloy"}`, 400, "input", "Invalid type"},
		{"ogg", `{"model":"tts-1","input":"hi","voice":"alloy","response_format":"ogg"}`, 400, "response_format", "wav, pcm, flac"},
		{"too long", `{"model":"tts-1","input":"` + long + `","voice":"alloy"}`, 400, "input", "maximum length 4096"},
		{"empty input", `{"model":"tts-1","input":"  ","voice":"alloy"}`, 400, "input", "empty"},
		{"no input", `{"model":"tts-1","voice":"alloy"}`, 400, "input", "input"},
		{"no voice", `{"model":"tts-1","input":"hi"}`, 400, "voice", "voice"},
		{"unknown voice", `{"model":"tts-1","input":"hi","voice":"nobody"}`, 400, "voice", "unknown voice"},
		{"speed low", `{"model":"tts-1","input":"hi","voice":"alloy","speed":0.1}`, 400, "speed", "0.25"},
		{"speed high", `{"model":"tts-1","input":"hi","voice":"alloy","speed":4.5}`, 400, "speed", "4.0"},
		{"temperature", `{"model":"tts-1","input":"hi","voice":"alloy","temperature":3}`, 400, "temperature", "0–2"},
		{"no model", `{"input":"hi","voice":"alloy"}`, 400, "model", "model"},
		{"unknown model", `{"model":"tts-9","input":"hi","voice":"alloy"}`, 404, "model", "does not exist"},
		{"bad stream_format", `{"model":"tts-1","input":"hi","voice":"alloy","stream_format":"ogg"}`, 400, "stream_format", "audio or sse"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, base+"/v1/audio/speech", "application/json", []byte(tc.body))
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			msg, _, param, _ := apiErr(t, b)
			if param != tc.param || !strings.Contains(msg, tc.want) {
				t.Errorf("param %q message %q; want %q containing %q", param, msg, tc.param, tc.want)
			}
		})
	}
	t.Run("object voice and extras", func(t *testing.T) {
		resp, b := post(t, base+"/v1/audio/speech", "application/json", []byte(`{"model":"tts-1","input":"hi there","voice":{"id":"v1"},"seed":7,"temperature":0.5,"top_p":0.9,"top_k":10,"speed":1.5,"response_format":"pcm"}`))
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
	})
}

func TestChatCompletions(t *testing.T) {
	_, base := testServer(t, Engines{}, nil)
	resp, b := post(t, base+"/v1/chat/completions", "application/json", []byte(`{"model":"parley","messages":[{"role":"user","content":"what is 2 plus 3"}]}`))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var c struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role, Content string
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	json.Unmarshal(b, &c)
	if c.Object != "chat.completion" || len(c.Choices) != 1 || !strings.Contains(c.Choices[0].Message.Content, "5") || c.Choices[0].FinishReason != "stop" {
		t.Errorf("completion = %s", b)
	}

	// streaming
	resp, b = post(t, base+"/v1/chat/completions", "application/json", []byte(`{"model":"parley","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"what is 2 plus 3"}]}]}`))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var text strings.Builder
	sawDone, sawUsage, sawRole := false, false, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			sawDone = true
			continue
		}
		var ch struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta map[string]string `json:"delta"`
			} `json:"choices"`
			Usage any `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("bad chunk %q: %v", line, err)
		}
		if ch.Object != "chat.completion.chunk" {
			t.Errorf("object %q", ch.Object)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta["content"])
			sawRole = sawRole || c.Delta["role"] == "assistant"
		}
		sawUsage = sawUsage || ch.Usage != nil
	}
	if !sawDone || !sawUsage || !sawRole || !strings.Contains(text.String(), "5") {
		t.Errorf("stream: done %v usage %v role %v text %q", sawDone, sawUsage, sawRole, text.String())
	}

	for _, tc := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{`{"model":"parley","messages":[]}`, "messages"},
		{`{"model":"parley","messages":[{"role":"robot","content":"hi"}]}`, "messages[0].role"},
		{`{"model":"parley","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "messages[0].content"},
		{`{"model":"parley","n":2,"messages":[{"role":"user","content":"hi"}]}`, "n"},
	} {
		resp, b := post(t, base+"/v1/chat/completions", "application/json", []byte(tc.body))
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d", tc.body, resp.StatusCode)
			continue
		}
		if _, _, p, _ := apiErr(t, b); p != tc.param {
			t.Errorf("%s: param %q, want %q", tc.body, p, tc.param)
		}
	}
}

// Without an LLM the offline skills answer, under their own name or an alias; any other model
// is refused as OpenAI refuses a model it does not have.
func TestChatRefusesUnknownModelWithoutLLM(t *testing.T) {
	_, base := testServer(t, Engines{}, nil)
	for model, status := range map[string]int{"gpt-4o": 404, "llama3": 404, skillsModel: 200, "parley": 200, "default": 200} {
		resp, b := post(t, base+"/v1/chat/completions", "application/json", []byte(`{"model":"`+model+`","messages":[{"role":"user","content":"what is 2 plus 3"}]}`))
		if resp.StatusCode != status {
			t.Errorf("%s: status %d, want %d: %s", model, resp.StatusCode, status, b)
			continue
		}
		if status == 404 {
			if msg, _, param, code := apiErr(t, b); code != "model_not_found" || param != "model" || !strings.Contains(msg, model) {
				t.Errorf("%s: %s", model, b)
			}
		}
	}
}

// A headless server has nothing to ring a timer: "set a timer" is answered honestly, through
// chat and through a realtime session's brain alike.
func TestHeadlessTimerAnsweredHonestly(t *testing.T) {
	_, base := testServer(t, Engines{}, nil)
	resp, b := post(t, base+"/v1/chat/completions", "application/json", []byte(`{"model":"parley","messages":[{"role":"user","content":"set a timer for 5 minutes"}]}`))
	if resp.StatusCode != 200 || !strings.Contains(string(b), "can't set timers") || strings.Contains(string(b), "Timer set") {
		t.Errorf("status %d: %s", resp.StatusCode, b)
	}
}

func TestModelsHealthMetricsAndUnknownRoutes(t *testing.T) {
	_, base := testServer(t, Engines{ASR: &fakeASR{}, ASRModel: "fake-sv", TTS: &fakeTTS{}}, nil)
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Object string       `json:"object"`
		Data   []modelEntry `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	ids := map[string]modelEntry{}
	for _, m := range list.Data {
		if m.Object != "model" || len(m.Capabilities) == 0 {
			t.Errorf("entry %+v", m)
		}
		ids[m.ID] = m
	}
	// exactly the names requests accept: every alias, no voice names
	var want []string
	want = append(want, "fake-sv", "fake")
	want = append(want, transcriptionModels...)
	want = append(want, speechModels...)
	want = append(want, skillsModel, "parley", "default")
	slices.Sort(want)
	want = slices.Compact(want)
	got := slices.Sorted(maps.Keys(ids))
	if list.Object != "list" || !slices.Equal(got, want) {
		t.Errorf("models %v, want %v", got, want)
	}
	if m := ids["gpt-4o-transcribe"]; m.Kind != "asr" || m.AliasOf != "fake-sv" || !slices.Contains(m.Capabilities, "transcription") ||
		slices.Contains(m.Capabilities, "translation") {
		t.Errorf("gpt-4o-transcribe = %+v", m)
	}
	if m := ids["fake"]; m.Kind != "tts" || !slices.Contains(m.Voices, "alloy") || !slices.Contains(m.Voices, "af_alloy") {
		t.Errorf("tts engine entry = %+v", m)
	}
	if m := ids["default"]; m.Kind != "llm" || m.AliasOf != skillsModel {
		t.Errorf("default = %+v", m)
	}
	if m := ids["parley"]; !slices.Contains(m.Capabilities, "chat") || !slices.Contains(m.Capabilities, "speech") || !slices.Contains(m.Capabilities, "transcription") {
		t.Errorf("parley = %+v", m)
	}
	// /v1/models/{id} agrees with the list, alias by alias
	for _, id := range append(want, "alloy", "nova", "nothing") {
		resp, err := http.Get(base + "/v1/models/" + id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_, listed := ids[id]
		if listed != (resp.StatusCode == 200) {
			t.Errorf("/v1/models/%s = %d (listed %v): %s", id, resp.StatusCode, listed, b)
		}
		if !listed {
			if _, _, _, code := apiErr(t, b); code != "model_not_found" {
				t.Errorf("/v1/models/%s code %q", id, code)
			}
		}
	}

	resp, _ = http.Get(base + "/v1/audio/speech")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET /v1/audio/speech = %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	apiErr(t, b)
	resp, _ = http.Get(base + "/v1/nothing")
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown route = %d", resp.StatusCode)
	}
	apiErr(t, b)

	// one request of each kind, then metrics
	ct, body := multipartBody(t, wavBytes(t, 16000, 1, 1), [2]string{"model", "whisper-1"})
	post(t, base+"/v1/audio/transcriptions", ct, body)
	resp, _ = http.Get(base + "/metrics")
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`parley_http_requests_total{route="POST /v1/audio/transcriptions",code="200"} 1`,
		`parley_http_request_duration_seconds_bucket{route="POST /v1/audio/transcriptions",le="+Inf"} 1`,
		`parley_queue_depth{engine="asr"} 0`,
		`parley_model_loaded{kind="asr",model="fake-sv"} 1`,
		`# TYPE parley_http_request_duration_seconds histogram`,
		// the Go client's default collectors' names, as Prometheus users expect
		"\ngo_goroutines ", "\ngo_threads ", `go_info{version="go`, `go_gc_duration_seconds{quantile="0.5"}`,
		"\ngo_memstats_heap_inuse_bytes ", "\ngo_gc_gogc_percent ",
		"\nprocess_resident_memory_bytes ", "\nprocess_open_fds ", "\nprocess_max_fds ", "\nprocess_cpu_seconds_total ",
		"\nprocess_start_time_seconds ", "\nprocess_virtual_memory_bytes ",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
	checkExposition(t, string(b))
	if v := metricValue(t, string(b), "process_resident_memory_bytes"); v < 1<<20 || v > 64<<30 {
		t.Errorf("process_resident_memory_bytes = %g", v)
	}
	if v := metricValue(t, string(b), "process_open_fds"); v < 3 {
		t.Errorf("process_open_fds = %g", v)
	}
	resp, _ = http.Get(base + "/health")
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"status":"ok"`) {
		t.Errorf("health %d %s", resp.StatusCode, b)
	}
}

func TestMissingEnginesAnswer503(t *testing.T) {
	_, base := testServer(t, Engines{}, nil)
	ct, body := multipartBody(t, wavBytes(t, 16000, 1, 1), [2]string{"model", "whisper-1"})
	resp, b := post(t, base+"/v1/audio/transcriptions", ct, body)
	if resp.StatusCode != 503 {
		t.Errorf("transcriptions without ASR = %d", resp.StatusCode)
	}
	apiErr(t, b)
	resp, b = post(t, base+"/v1/audio/speech", "application/json", []byte(`{"model":"tts-1","input":"hi","voice":"alloy"}`))
	if resp.StatusCode != 503 {
		t.Errorf("speech without TTS = %d", resp.StatusCode)
	}
	apiErr(t, b)
}

func TestAuth(t *testing.T) {
	if _, err := New(Options{Config: config.Serve{Addr: "0.0.0.0:8780"}}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "api_key") {
		t.Errorf("non-loopback without key: %v", err)
	}
	if _, err := New(Options{Config: config.Serve{Addr: "0.0.0.0:8780", AllowNoAuth: true}}); err != nil {
		t.Errorf("allow_unauthenticated: %v", err)
	}
	if _, err := New(Options{Config: config.Serve{Addr: "127.0.0.1:8780", WyomingASRAddr: "0.0.0.0:10300"}}); !errors.Is(err, ErrConfig) {
		t.Errorf("non-loopback Wyoming: %v", err)
	}
	if _, err := New(Options{Config: config.Serve{Addr: "[::]:8780", APIKey: "k"}}); err != nil {
		t.Errorf("non-loopback with key: %v", err)
	}
	_, base := testServer(t, Engines{TTS: &fakeTTS{}}, func(o *Options) { o.Config.APIKey = "sekrit" })
	body := []byte(`{"model":"tts-1","input":"hi","voice":"alloy"}`)
	for _, tc := range []struct {
		hdr    []string
		status int
	}{
		{nil, 401},
		{[]string{"Authorization", "Bearer wrong"}, 401},
		{[]string{"Authorization", "sekrit"}, 401},
		{[]string{"Authorization", "Bearer sekrit"}, 200},
		{[]string{"Authorization", "bearer sekrit"}, 200}, // the scheme is case-insensitive
		{[]string{"Authorization", "BEARER  sekrit "}, 200},
		{[]string{"Authorization", "Basic sekrit"}, 401},
	} {
		resp, b := post(t, base+"/v1/audio/speech", "application/json", body, tc.hdr...)
		if resp.StatusCode != tc.status {
			t.Errorf("%v: status %d, want %d", tc.hdr, resp.StatusCode, tc.status)
		}
		if tc.status == 401 {
			if _, _, _, code := apiErr(t, b); code != "invalid_api_key" {
				t.Errorf("code %q", code)
			}
		}
	}
	resp, _ := http.Get(base + "/health")
	if resp.StatusCode != 200 {
		t.Errorf("health needs no key, got %d", resp.StatusCode)
	}
	resp.Body.Close()
}

func TestQueueFullGets429(t *testing.T) {
	asrE := &fakeASR{block: make(chan struct{})}
	s, base := testServer(t, Engines{ASR: asrE}, func(o *Options) {
		o.Config.MaxConcurrentASR = 1
		o.QueueLen = 1
	})
	ct, body := multipartBody(t, wavBytes(t, 16000, 1, 1), [2]string{"model", "whisper-1"})
	type res struct {
		code int
		body []byte
		ra   string
	}
	results := make(chan res, 2)
	for i := 0; i < 2; i++ {
		go func() {
			req, _ := http.NewRequest("POST", base+"/v1/audio/transcriptions", bytes.NewReader(body))
			req.Header.Set("Content-Type", ct)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				results <- res{code: -1}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- res{resp.StatusCode, b, resp.Header.Get("Retry-After")}
		}()
	}
	// wait until one runs and one waits
	for s.asrLim.Running()+s.asrLim.Waiting() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	resp, b := post(t, base+"/v1/audio/transcriptions", ct, body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("third request: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, _, _, code := apiErr(t, b); code != "rate_limit_exceeded" {
		t.Errorf("code %q", code)
	}
	close(asrE.block)
	for i := 0; i < 2; i++ {
		if r := <-results; r.code != 200 {
			t.Errorf("queued request: %d %s", r.code, r.body)
		}
	}
}

func TestGracefulShutdownDrains(t *testing.T) {
	asrE := &fakeASR{block: make(chan struct{})}
	o := Options{Config: config.Default().Serve, Engines: Engines{ASR: asrE}}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, Listeners{HTTP: ln}) }()
	ct, body := multipartBody(t, wavBytes(t, 16000, 1, 1), [2]string{"model", "whisper-1"})
	got := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/v1/audio/transcriptions", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- -1
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	for s.asrLim.Running() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel() // shutdown begins with a request in flight
	// the listener closes as soon as Serve's goroutine runs (the bound is for a broken server)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Error("still accepting connections while draining")
			break
		}
	}
	close(asrE.block)
	if code := <-got; code != 200 {
		t.Errorf("in-flight request ended %d during drain", code)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// At shutdown, queued work that cannot finish in the drain gets a 503 with Retry-After at
// once; work still running at the drain's end is cut: a whole-file answer becomes a 503, a
// stream ends with an error the client sees (no clean end of body); Serve returns in time.
func TestShutdownRefusesQueuedAndCutsRunning(t *testing.T) {
	o := Options{Config: config.Default().Serve, Engines: Engines{TTS: &fakeTTS{pace: 200 * time.Millisecond}}, DrainTimeout: 2 * time.Second}
	o.Config.MaxConcurrentTTS = 2
	s, addr, cancel, done := runServer(t, o)
	type result struct {
		status int
		retry  string
		body   []byte
		err    error
	}
	text := strings.Repeat("This sentence takes a while. ", 40) // 40 × 0.2 s
	ask := func(format string, out chan<- result) {
		body := fmt.Sprintf(`{"model":"tts-1","voice":"alloy","input":%q,"response_format":%q}`, text, format)
		resp, err := http.Post("http://"+addr+"/v1/audio/speech", "application/json", strings.NewReader(body))
		if err != nil {
			out <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		out <- result{status: resp.StatusCode, retry: resp.Header.Get("Retry-After"), body: b, err: err}
	}
	until := func(what string, ok func() bool) {
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never %s", what)
			}
		}
	}
	stream, whole, queued := make(chan result, 1), make(chan result, 1), make(chan result, 2)
	go ask("pcm", stream)
	until("streaming", func() bool { return s.ttsLim.Running() == 1 })
	go ask("wav", whole)
	until("two running", func() bool { return s.ttsLim.Running() == 2 })
	go ask("pcm", queued)
	go ask("pcm", queued)
	until("two queued", func() bool { return s.ttsLim.Waiting() == 2 })
	start := time.Now()
	cancel()
	refused := func(what string, r result) {
		t.Helper()
		if r.err != nil || r.status != 503 || r.retry == "" {
			t.Errorf("%s: %d, Retry-After %q, %v: %s", what, r.status, r.retry, r.err, r.body)
			return
		}
		if _, _, _, code := apiErr(t, r.body); code != "server_shutting_down" {
			t.Errorf("%s: code %q", what, code)
		}
	}
	for i := 0; i < 2; i++ {
		refused("queued", <-queued)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("queued work refused after %v, not at once", d)
	}
	refused("whole file cut at the drain's end", <-whole)
	r := <-stream
	if r.status != 200 || r.err == nil || len(r.body) == 0 {
		t.Errorf("cut stream: %d, %d bytes, error %v (want some audio, then an error, not a clean end)", r.status, len(r.body), r.err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Serve did not return")
	}
}

func TestSlowAndAbandonedClients(t *testing.T) {
	eng := &fakeTTS{}
	s, base := testServer(t, Engines{ASR: &fakeASR{}, TTS: eng}, func(o *Options) {
		o.UploadTimeout = 200 * time.Millisecond
	})
	addr := strings.TrimPrefix(base, "http://")
	// Clients that announce a body and stall: after the boundary line, and halfway through a
	// part's header line (slow, not malformed: 408, not 400 "malformed MIME header").
	for _, c := range []struct{ name, sent string }{
		{"stalled upload", "--zz\r\n"},
		{"upload stalled in a part header", "--zz\r\nContent-Disposition: form-da"},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=zz\r\nContent-Length: 100000\r\n\r\n%s", c.sent)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a %s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 408 {
			t.Errorf("%s: %d %s", c.name, resp.StatusCode, b)
		} else if _, _, _, code := apiErr(t, b); code != "upload_too_slow" {
			t.Errorf("%s: code %q", c.name, code)
		}
	}
	if s.asrLim.Waiting()+s.asrLim.Running() != 0 {
		t.Error("stalled upload holds a queue place")
	}
	s.uploads.mu.Lock()
	if s.uploads.n != 0 {
		t.Error("stalled upload still holds an upload place")
	}
	s.uploads.mu.Unlock()
	// A client that asks for speech and goes away: the job is cancelled and frees its slot.
	eng.block = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/audio/speech", strings.NewReader(`{"model":"tts-1","input":"hi","voice":"alloy"}`))
	go func() {
		for s.ttsLim.Running() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	http.DefaultClient.Do(req)
	deadline := time.Now().Add(10 * time.Second)
	for s.ttsLim.Running() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s.ttsLim.Running() != 0 {
		t.Error("abandoned synthesis still holds its slot")
	}
	close(eng.block)
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	if _, err := New(Options{TLSCertFile: certFile}); !errors.Is(err, ErrConfig) {
		t.Errorf("certificate without key: %v", err)
	}
	if _, err := New(Options{TLSCertFile: certFile, TLSKeyFile: certFile}); !errors.Is(err, ErrConfig) {
		t.Errorf("certificate as its own key: %v", err)
	}
	_, base := testServer(t, Engines{}, func(o *Options) { o.TLSCertFile, o.TLSKeyFile = certFile, keyFile })
	pool := x509.NewCertPool()
	cert, _ := x509.ParseCertificate(der)
	pool.AddCert(cert)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(strings.Replace(base, "http://", "https://", 1) + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("https /health = %d", resp.StatusCode)
	}
}

func TestSpeechWithLibraryVoice(t *testing.T) {
	lib, err := voices.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v := voices.New("warm", "espeak", voices.KindSeed)
	seed := int64(42)
	v.Seed = &seed
	v.Defaults.Speed = 1.2
	if err := lib.Save(v, false); err != nil {
		t.Fatal(err)
	}
	k := voices.New("bright", "kokoro", voices.KindPreset)
	k.Preset = "af_heart"
	if err := lib.Save(k, false); err != nil {
		t.Fatal(err)
	}
	eng := &fakeTTS{}
	_, base := testServer(t, Engines{TTS: eng, TTSEngine: "espeak", Voices: lib}, nil)
	resp, b := post(t, base+"/v1/audio/speech", "application/json", []byte(`{"model":"tts-1","input":"hi there","voice":"warm","response_format":"pcm"}`))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	r := eng.last.Load().(tts.Request)
	if !r.HasSeed || r.Seed != 42 || r.Speed != 1.2 {
		t.Errorf("library voice applied as %+v", r)
	}
	// an explicit speed wins over the voice's default
	post(t, base+"/v1/audio/speech", "application/json", []byte(`{"model":"tts-1","input":"hi there","voice":"warm","speed":0.8,"response_format":"pcm"}`))
	if r := eng.last.Load().(tts.Request); r.Speed != 0.8 {
		t.Errorf("explicit speed lost: %+v", r)
	}
	// a voice made for another engine is a clear 400
	resp, b = post(t, base+"/v1/audio/speech", "application/json", []byte(`{"model":"tts-1","input":"hi","voice":"bright"}`))
	if resp.StatusCode != 400 {
		t.Fatalf("kokoro voice on espeak: %d %s", resp.StatusCode, b)
	}
	if msg, _, param, _ := apiErr(t, b); param != "voice" || !strings.Contains(msg, "kokoro") {
		t.Errorf("param %q msg %q", param, msg)
	}
	// /v1/models lists the library voice of this engine only, among the engine's voices
	resp2, _ := http.Get(base + "/v1/models/espeak")
	var m modelEntry
	json.NewDecoder(resp2.Body).Decode(&m)
	resp2.Body.Close()
	if !slices.Contains(m.Voices, "warm") || slices.Contains(m.Voices, "bright") {
		t.Errorf("espeak voices: %v", m.Voices)
	}
}

// fakeLLM streams "Hello there." in pieces; model "missing" is not found; "broken" fails
// after the first piece.
type fakeLLM struct{ got *llm.Request }

func (f *fakeLLM) Name() string                                { return "fake" }
func (f *fakeLLM) URL() string                                 { return "http://fake" }
func (f *fakeLLM) Health(context.Context) error                { return nil }
func (f *fakeLLM) Models(context.Context) ([]llm.Model, error) { return []llm.Model{{ID: "m1"}}, nil }
func (f *fakeLLM) Chat(ctx context.Context, req *llm.Request, fn func(llm.Delta) error) error {
	f.got = req
	if req.Model == "missing" {
		return &llm.APIError{Status: 404, Message: "model missing not found", Kind: llm.ErrModelNotFound}
	}
	for i, p := range []string{"Hel", "lo ", "there."} {
		if req.Model == "broken" && i == 1 {
			return fmt.Errorf("%w: connection reset", llm.ErrTruncated)
		}
		if err := fn(llm.Delta{Content: p}); err != nil {
			return err
		}
	}
	return fn(llm.Delta{FinishReason: llm.FinishStop, Usage: &llm.Usage{PromptTokens: 3, CompletionTokens: 3, TotalTokens: 6}})
}

func TestChatThroughBackend(t *testing.T) {
	f := &fakeLLM{}
	_, base := testServer(t, Engines{LLM: f, LLMModel: "m1"}, nil)
	resp, b := post(t, base+"/v1/chat/completions", "application/json", []byte(`{"model":"parley","temperature":0.2,"max_completion_tokens":50,"messages":[{"role":"developer","content":"be brief"},{"role":"user","content":"hi"}]}`))
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"content":"Hello there."`) || !strings.Contains(string(b), `"total_tokens":6`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if f.got.Model != "m1" || f.got.MaxTokens != 50 || *f.got.Temperature != 0.2 || f.got.Messages[0].Role != "system" {
		t.Errorf("backend got %+v", f.got)
	}
	resp, b = post(t, base+"/v1/chat/completions", "application/json", []byte(`{"model":"missing","messages":[{"role":"user","content":"hi"}]}`))
	if resp.StatusCode != 404 {
		t.Errorf("missing model: %d %s", resp.StatusCode, b)
	} else if _, _, _, code := apiErr(t, b); code != "model_not_found" {
		t.Errorf("code %q", code)
	}
	// a failure mid-stream: an error frame in the stream, no [DONE]
	resp, b = post(t, base+"/v1/chat/completions", "application/json", []byte(`{"model":"broken","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"error"`) || strings.Contains(string(b), "[DONE]") {
		t.Errorf("mid-stream failure: %d %s", resp.StatusCode, b)
	}
	resp2, _ := http.Get(base + "/v1/models")
	mb, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if !strings.Contains(string(mb), `"id":"m1","object":"model","created":0,"owned_by":"fake","kind":"llm"`) {
		t.Errorf("models: %s", mb)
	}
}

// checkExposition checks Prometheus' text format line by line: every sample is `name{labels}
// value` with a number, and no metric family is declared twice.
func checkExposition(t *testing.T, page string) {
	t.Helper()
	typed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(page), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name := strings.Fields(rest)[0]
			if typed[name] {
				t.Errorf("metric %s declared twice", name)
			}
			typed[name] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Errorf("bad sample line %q", line)
			continue
		}
		if _, err := strconv.ParseFloat(line[i+1:], 64); err != nil && line[i+1:] != "+Inf" {
			t.Errorf("bad value in %q", line)
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			if !strings.HasSuffix(name, "}") {
				t.Errorf("bad labels in %q", line)
			}
			name = name[:j]
		}
		if name == "" || strings.ContainsAny(name, " \t\"") {
			t.Errorf("bad metric name in %q", line)
		}
	}
}

// metricValue is the value of an unlabelled sample.
func metricValue(t *testing.T, page, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no sample %s", name)
	return 0
}

// quietLLM answers without reporting usage, as some upstreams do.
type quietLLM struct{ fakeLLM }

func (q *quietLLM) Chat(ctx context.Context, req *llm.Request, fn func(llm.Delta) error) error {
	for _, p := range []string{"Hello ", "there."} {
		if err := fn(llm.Delta{Content: p}); err != nil {
			return err
		}
	}
	return fn(llm.Delta{FinishReason: llm.FinishStop})
}

// TestChatUsageWhenUpstreamReportsNone: the server counts the tokens (with Engines.Tokens,
// here one per word) instead of leaving usage out or null.
func TestChatUsageWhenUpstreamReportsNone(t *testing.T) {
	words := func(s string) int { return len(strings.Fields(s)) }
	_, base := testServer(t, Engines{LLM: &quietLLM{}, LLMModel: "m1", Tokens: words}, nil)
	// prompt: 3 + 1 message × (2 words + 4); completion: 2 words
	want := llm.Usage{PromptTokens: 3 + 2 + 4, CompletionTokens: 2, TotalTokens: 11}
	resp, b := post(t, base+"/v1/chat/completions", "application/json", []byte(`{"model":"parley","messages":[{"role":"user","content":"hi there"}]}`))
	var c struct{ Usage *llm.Usage }
	if err := json.Unmarshal(b, &c); err != nil || resp.StatusCode != 200 || c.Usage == nil || *c.Usage != want {
		t.Fatalf("non-stream usage: %d %s", resp.StatusCode, b)
	}
	resp, b = post(t, base+"/v1/chat/completions", "application/json", []byte(`{"model":"parley","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi there"}]}`))
	var got *llm.Usage
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ch struct{ Usage *llm.Usage }
		json.Unmarshal([]byte(line), &ch)
		if ch.Usage != nil {
			got = ch.Usage
		}
	}
	if resp.StatusCode != 200 || got == nil || *got != want {
		t.Errorf("stream usage %+v, want %+v: %s", got, want, b)
	}
}

// muLawWAV is 1 s of a tone as an 8 kHz G.711 µ-law WAV (format tag 7), as phones and
// telephony systems record.
func muLawWAV() []byte {
	const rate = 8000
	enc := func(x float64) byte { // G.711 µ-law
		const bias, clip = 0x84, 32635
		s := int(x * 32767)
		sign := 0
		if s < 0 {
			s, sign = -s, 0x80
		}
		s = min(s, clip) + bias
		exp := 7
		for mask := 0x4000; s&mask == 0 && exp > 0; mask >>= 1 {
			exp--
		}
		return ^byte(sign | exp<<4 | (s>>(exp+3))&0x0F)
	}
	data := make([]byte, rate)
	for i := range data {
		data[i] = enc(0.3 * math.Sin(2*math.Pi*440*float64(i)/rate))
	}
	var b bytes.Buffer
	w := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	w(uint32(4 + 8 + 18 + 8 + len(data)))
	b.WriteString("WAVEfmt ")
	w(uint32(18))
	w(uint16(7))    // WAVE_FORMAT_MULAW
	w(uint16(1))    // mono
	w(uint32(rate)) // sample rate
	w(uint32(rate)) // byte rate
	w(uint16(1))    // block align
	w(uint16(8))    // bits
	w(uint16(0))    // cbSize
	b.WriteString("data")
	w(uint32(len(data)))
	b.Write(data)
	return b.Bytes()
}

// TestTranscriptionMuLawWAV: a WAV whose codec the WAV reader does not decode (µ-law here;
// A-law and ADPCM alike) goes to ffmpeg, as the README says, instead of a 400.
func TestTranscriptionMuLawWAV(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed")
	}
	_, base := testServer(t, Engines{ASR: &fakeASR{}}, nil)
	ct, body := multipartBody(t, muLawWAV(), [2]string{"model", "whisper-1"}, [2]string{"response_format", "verbose_json"})
	resp, b := post(t, base+"/v1/audio/transcriptions", ct, body)
	if resp.StatusCode != 200 {
		t.Fatalf("µ-law WAV: status %d: %s", resp.StatusCode, b)
	}
	var v struct {
		Duration float64 `json:"duration"`
	}
	json.Unmarshal(b, &v)
	if v.Duration < 0.99 || v.Duration > 1.01 {
		t.Errorf("duration %g, want 1 s", v.Duration)
	}
}
