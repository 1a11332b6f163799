package serve

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/app/serve/wyoming"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/gpu"
	"github.com/parley-voice/parley/gpu/gputest"
	"github.com/parley-voice/parley/tts/engines"
)

// TestChatTTSEngine serves the ChatTTS engine (tiny random export): /v1/audio/speech with an
// OpenAI voice (a seed) and inline ChatTTS tokens, and Wyoming's synthesize.
func TestChatTTSEngine(t *testing.T) {
	gputest.RequireORT(t)
	eng, err := engines.Open(engines.Options{Engine: "chattts", ModelDir: "../../testdata/chattts/tiny",
		GPU: gpu.Options{Provider: "cpu", IntraOpThreads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	e := Engines{TTS: eng, TTSEngine: "chattts"}
	_, base := testServer(t, e, nil)
	resp, b := post(t, base+"/v1/audio/speech", "application/json",
		[]byte(`{"model":"chattts","input":"hello world [laugh] [uv_break] what time is it","voice":"alloy","response_format":"wav"}`))
	if resp.StatusCode != 200 {
		t.Fatalf("speech: %d %s", resp.StatusCode, b)
	}
	buf, err := audio.ReadWAV(bytes.NewReader(b))
	if err != nil || buf.Duration() <= 0 {
		t.Fatalf("wav: %v", err)
	}
	// the same request gives the same audio (a seed and sampling are reproducible)
	if _, b2 := post(t, base+"/v1/audio/speech", "application/json",
		[]byte(`{"model":"chattts","input":"hello world [laugh] [uv_break] what time is it","voice":"alloy","response_format":"wav"}`)); !bytes.Equal(b, b2) {
		t.Error("the same speech request gave other audio")
	}
	if resp, b := post(t, base+"/v1/audio/speech", "application/json", []byte(`{"model":"chattts","input":"hi","voice":"seed:x"}`)); resp.StatusCode != 400 {
		t.Errorf("bad voice: %d %s", resp.StatusCode, b)
	}

	_, _, _, ttsAddr, _ := serveAll(t, e, nil)
	tc, err := wyoming.Dial(context.Background(), ttsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.Write(wyoming.NewEvent(wyoming.TypeSynthesize, map[string]any{"text": "hello world [laugh]"}))
	var pcm []byte
	var f wyoming.AudioFormat
	for {
		ev, err := tc.Read(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case wyoming.TypeAudioStart:
			ev.Decode(&f)
		case wyoming.TypeError:
			t.Fatalf("wyoming error %v", ev.Data)
		}
		if ev.Type == wyoming.TypeAudioStop {
			break
		}
		pcm = append(pcm, ev.Payload...)
	}
	if f.Rate == 0 || len(pcm) == 0 {
		t.Fatalf("wyoming audio %+v, %d bytes", f, len(pcm))
	}
}
