package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/parley-voice/parley/gpu"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/app/serve/wyoming"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/engines"
)

// realASR opens the demo SenseVoice model from the source tree (assets/demo/sensevoice, the
// files that get embedded) when it is there — real transcripts — else the tiny random test
// model (mechanics only). demo says which.
func realASR(t testing.TB) (r *asr.Recognizer, id string, demo bool) {
	t.Helper()
	gputest.RequireORT(t)
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	dir, id, demo := filepath.Join(root, "assets", "demo", "sensevoice"), "sensevoice-demo", true
	if _, err := os.Stat(filepath.Join(dir, "tokens.txt")); err != nil {
		dir, id, demo = filepath.Join(root, "testdata", "sensevoice", "tiny"), "sensevoice-tiny", false
	}
	// ITN off, as config's asr.itn default: the demo model is trained without ITN and the
	// retrained one (01bf813) loses "weather" in the test sentence with it on
	r, err := asr.New(dir, asr.Config{Options: asr.Options{Language: "auto", ITN: false}, GPU: gpu.Options{IntraOpThreads: 1}, Workers: 2})
	if err != nil {
		t.Fatalf("asr model %s: %v", dir, err)
	}
	t.Cleanup(func() { r.Close() })
	return r, id, demo
}

func realTTS(t testing.TB) tts.Engine {
	t.Helper()
	e, err := engines.Open(engines.Options{Engine: "espeak"})
	if err != nil {
		t.Skipf("espeak-ng unavailable: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func TestRealEnginesHTTP(t *testing.T) {
	rec, id, demo := realASR(t)
	eng := realTTS(t)
	_, base := testServer(t, Engines{ASR: rec, ASRModel: id, TTS: eng, TTSEngine: "espeak"}, nil)

	// speak with espeak-ng, in every format
	var wav []byte
	for _, format := range SpeechFormatsHere() {
		resp, b := post(t, base+"/v1/audio/speech", "application/json",
			[]byte(fmt.Sprintf(`{"model":"tts-1","input":"what is the weather like today","voice":"en-us","response_format":%q}`, format)))
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", format, resp.StatusCode, b)
		}
		switch format {
		case "wav":
			wav = b
			buf, err := audio.ReadWAV(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("wav: %v", err)
			}
			if buf.SampleRate != SpeechRate || buf.Duration() < 500*time.Millisecond || audio.RMS(buf.Data) < 0.01 {
				t.Errorf("wav: %d Hz, %v, rms %.3f", buf.SampleRate, buf.Duration(), audio.RMS(buf.Data))
			}
		case "flac", "mp3", "opus", "aac":
			if _, err := exec.LookPath("ffmpeg"); err == nil {
				dec := ffmpegDecodeS16At(t, b, SpeechRate)
				if len(dec) < SpeechRate { // half a second of 16-bit samples
					t.Errorf("%s decodes to %d bytes", format, len(dec))
				}
			}
		}
	}
	// a Parley engine preset as the voice, and an unknown one
	resp, b := post(t, base+"/v1/audio/speech", "application/json", []byte(`{"model":"espeak","input":"Hi.","voice":"en-gb","response_format":"pcm"}`))
	if resp.StatusCode != 200 {
		t.Errorf("en-gb voice: %d %s", resp.StatusCode, b)
	}
	resp, b = post(t, base+"/v1/audio/speech", "application/json", []byte(`{"model":"espeak","input":"Hi.","voice":"klingon-x","response_format":"pcm"}`))
	if resp.StatusCode != 400 {
		t.Errorf("unknown voice: %d %s", resp.StatusCode, b)
	}

	// transcribe espeak-ng speech: the demo model was trained on 16 kHz espeak-ng renderings of
	// its sentences, and it is fragile (CER 35 %), so the asserted input is such a rendering;
	// the 24 kHz reply from /v1/audio/speech is transcribed too, and only logged
	st, err := eng.Synthesize(context.Background(), tts.Request{Text: "what is the weather like today", Voice: "en-us", SampleRate: 16000})
	if err != nil {
		t.Fatal(err)
	}
	b16, err := tts.ReadAll(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	var w16 bytes.Buffer
	audio.WriteWAV(&w16, b16, audio.S16)
	ct, body := multipartBody(t, wav, [2]string{"model", "whisper-1"}, [2]string{"response_format", "text"})
	_, heard24 := post(t, base+"/v1/audio/transcriptions", ct, body)
	t.Logf("%s heard %q in the 24 kHz reply", id, strings.TrimSpace(string(heard24)))
	ct, body = multipartBody(t, w16.Bytes(), [2]string{"model", "whisper-1"}, [2]string{"response_format", "verbose_json"}, [2]string{"timestamp_granularities[]", "word"}, [2]string{"timestamp_granularities[]", "segment"})
	resp, b = post(t, base+"/v1/audio/transcriptions", ct, body)
	if resp.StatusCode != 200 {
		t.Fatalf("transcription: %d %s", resp.StatusCode, b)
	}
	var v asr.Verbose
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Task != "transcribe" || v.Duration < 0.5 || len(v.Segments) == 0 {
		t.Errorf("verbose %s", b)
	}
	// the streaming path refuses bad and over-long audio with 400s too
	_, short := testServer(t, Engines{ASR: rec, ASRModel: id}, func(o *Options) { o.Config.MaxAudioSeconds = 1 })
	for name, file := range map[string][]byte{"too long": wav, "not audio": []byte("garbage garbage garbage garbage"), "header only": wav[:44]} {
		ct, body := multipartBody(t, file, [2]string{"model", "whisper-1"})
		resp, b := post(t, short+"/v1/audio/transcriptions", ct, body)
		if resp.StatusCode != 400 {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
			continue
		}
		msg, _, _, _ := apiErr(t, b)
		t.Logf("%s: %s", name, msg)
	}
	if demo {
		// the demo model knows ~400 words of synthetic assistant requests; this one it hears
		if !strings.Contains(v.Text, "weather") || v.Lang != "en" {
			t.Errorf("demo model heard %q (%s) in espeak's \"what is the weather like today\"", v.Text, v.Lang)
		}
	} else {
		t.Logf("tiny random model (mechanics only) heard %q", v.Text)
	}
}

func TestRealWyoming(t *testing.T) {
	rec, id, _ := realASR(t)
	eng := realTTS(t)
	_, _, asrAddr, ttsAddr, _ := serveAll(t, Engines{ASR: rec, ASRModel: id, TTS: eng, TTSEngine: "espeak"}, nil)
	ctx := context.Background()
	tc, err := wyoming.Dial(ctx, ttsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	// describe: every espeak-ng language is a voice with Home Assistant's fields and a BCP 47
	// tag; no display strings, no OpenAI names as voices
	tc.Write(wyoming.NewEvent(wyoming.TypeDescribe, nil))
	ev, err := tc.Read(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info wyoming.Info
	ev.Decode(&info)
	if len(info.TTS) != 1 || len(info.TTS[0].Voices) < 50 {
		t.Fatalf("TTS info %+v", info.TTS)
	}
	byName := map[string]wyoming.TtsVoice{}
	for _, v := range info.TTS[0].Voices {
		byName[v.Name] = v
		if !v.Installed || v.Description == "" || v.Attribution.Name == "" || len(v.Languages) != 1 || len(v.Speakers) == 0 {
			t.Errorf("voice lacks Home Assistant's fields: %+v", v)
		}
		if strings.ContainsAny(v.Name+v.Languages[0], " (…") {
			t.Errorf("not a voice: %+v", v)
		}
	}
	if v := byName["en-gb"]; v.Languages[0] != "en-GB" || !strings.Contains(v.Description, "English") {
		t.Errorf("en-gb: %+v", v)
	}
	if _, ok := byName["alloy"]; ok {
		t.Error("an OpenAI name is listed as a voice")
	}
	for _, name := range []string{"cmn", "fr-fr", "de"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("no %s voice", name)
		}
	}
	tc.Write(wyoming.NewEvent(wyoming.TypeSynthesize, map[string]any{"text": "Turn on the kitchen light.", "voice": map[string]string{"name": "en-us", "speaker": "echo"}}))
	var pcm []byte
	var f wyoming.AudioFormat
	for {
		e, err := tc.Read(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == wyoming.TypeAudioStart {
			e.Decode(&f)
		}
		if e.Type == wyoming.TypeError {
			t.Fatalf("error %v", e.Data)
		}
		if e.Type == wyoming.TypeAudioStop {
			break
		}
		pcm = append(pcm, e.Payload...)
	}
	if f.Rate == 0 || len(pcm) < f.Rate { // at least half a second
		t.Fatalf("audio %+v, %d bytes", f, len(pcm))
	}
	// send it back for recognition, in 100 ms chunks at its own rate
	ac, err := wyoming.Dial(ctx, asrAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	ac.Write(wyoming.NewEvent(wyoming.TypeTranscribe, map[string]string{"language": "en"}))
	ac.Write(wyoming.NewEvent(wyoming.TypeAudioStart, f))
	step := f.Rate / 10 * 2
	for i := 0; i < len(pcm); i += step {
		e := wyoming.NewEvent(wyoming.TypeAudioChunk, f)
		e.Payload = pcm[i:min(len(pcm), i+step)]
		ac.Write(e)
	}
	ac.Write(wyoming.NewEvent(wyoming.TypeAudioStop, nil))
	for {
		e, err := ac.Read(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == wyoming.TypeError {
			t.Fatalf("error %v", e.Data)
		}
		if e.Type == wyoming.TypeTranscript {
			var tr wyoming.Transcript
			e.Decode(&tr)
			t.Logf("%s heard %q", id, tr.Text)
			break
		}
	}
}

// TestRealRealtime runs a realtime session on the real engines: espeak-ng speech in,
// Silero VAD (when installed) finds the utterance, SenseVoice transcribes it, the offline
// skills answer and espeak-ng speaks the answer back.
func TestRealRealtime(t *testing.T) {
	rec, id, _ := realASR(t)
	eng := realTTS(t)
	e := Engines{ASR: rec, ASRModel: id, TTS: eng, TTSEngine: "espeak"}
	if p := vad.DefaultModel(); fileExists(p) {
		e.NewVAD = func() (app.VAD, error) {
			d, err := vad.New(p, vad.Config{})
			if err != nil {
				return nil, err
			}
			return factory.SileroVAD{D: d}, nil
		}
	} else {
		t.Log("Silero VAD not installed: the energy detector finds the speech")
	}
	_, base, _, _, _ := serveAll(t, e, nil)

	// speech to send: espeak-ng at 24 kHz, with silence after it
	st, err := eng.Synthesize(context.Background(), tts.Request{Text: "What is two plus three?", SampleRate: 24000})
	if err != nil {
		t.Fatal(err)
	}
	buf, err := tts.ReadAll(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	speech := append(append(make([]float32, 24000/2), buf.Data...), make([]float32, 24000*3/2)...)
	pcm := audio.EncodePCM(nil, speech, audio.S16)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/v1/realtime", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 24)
	for i := 0; i < len(pcm); i += 9600 {
		msg, _ := json.Marshal(map[string]string{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(pcm[i:min(len(pcm), i+9600)])})
		if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	audioBytes := 0
	var heard string
	for !seen["response.done"] {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v (seen %v)", err, seen)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		typ, _ := m["type"].(string)
		seen[typ] = true
		switch typ {
		case "response.output_audio.delta":
			d, _ := base64.StdEncoding.DecodeString(m["delta"].(string))
			audioBytes += len(d)
		case "conversation.item.input_audio_transcription.completed":
			heard, _ = m["transcript"].(string)
			if strings.TrimSpace(heard) == "" {
				// the tiny random model may hear nothing: no turn follows
				t.Logf("%s heard nothing; stopping here", id)
				return
			}
		case "error":
			t.Logf("error event: %s", b)
		}
	}
	for _, want := range []string{"session.created", "input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped", "input_audio_buffer.committed", "conversation.item.input_audio_transcription.completed", "response.created"} {
		if !seen[want] {
			t.Errorf("no %s (seen %v)", want, seen)
		}
	}
	if audioBytes == 0 {
		t.Error("no answer audio")
	}
	t.Logf("%s heard %q; answer %.1f s of audio", id, heard, float64(audioBytes)/2/24000)
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"parley_realtime_transcript_seconds_count 1", "parley_realtime_first_audio_seconds_count 1"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "parley_realtime_") && strings.Contains(line, "_sum") {
			t.Log(line)
		}
	}
}
