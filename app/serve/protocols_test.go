package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/serve/wyoming"
)

type echoBrain struct{}

func (echoBrain) Answer(ctx context.Context, in app.Transcript, _ []app.Message, fn func(string) error) error {
	return fn("You said: " + in.Text + ".")
}

// serveAll runs a Server with HTTP and both Wyoming listeners on loopback.
func serveAll(t *testing.T, e Engines, mod func(*Options)) (s *Server, base, asrAddr, ttsAddr string, stop func()) {
	t.Helper()
	o := Options{Config: config.Default().Serve, Engines: e, Version: "test"}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var ls Listeners
	for _, p := range []*net.Listener{&ls.HTTP, &ls.WyomingASR, &ls.WyomingTTS} {
		if *p, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ls) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Error("server did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return s, "http://" + ls.HTTP.Addr().String(), ls.WyomingASR.Addr().String(), ls.WyomingTTS.Addr().String(), stop
}

func TestRealtimeOverWebSocket(t *testing.T) {
	s, base, _, _, stop := serveAll(t, Engines{ASR: &fakeASR{}, TTS: &fakeTTS{}, Brain: echoBrain{}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/v1/realtime?model=gpt-realtime", &websocket.DialOptions{Subprotocols: []string{"realtime"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if resp.Header.Get("Sec-WebSocket-Protocol") != "realtime" {
		t.Errorf("subprotocol %q", resp.Header.Get("Sec-WebSocket-Protocol"))
	}
	read := func() map[string]any {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("non-JSON %q", b)
		}
		return m
	}
	write := func(v any) {
		b, _ := json.Marshal(v)
		if err := c.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	if m := read(); m["type"] != "session.created" {
		t.Fatalf("first event %v", m)
	}
	// a voice the engine does not have fails at session.update, not at the first answer
	write(map[string]any{"type": "session.update", "session": map[string]any{"voice": "klingon"}})
	if m := read(); m["type"] != "error" || m["error"].(map[string]any)["param"] != "session.voice" {
		t.Fatalf("unknown voice: %v", m)
	}
	write(map[string]any{"type": "session.update", "session": map[string]any{"turn_detection": nil, "voice": "v1"}})
	if m := read(); m["type"] != "session.updated" {
		t.Fatalf("update: %v", m)
	}
	// 0.5 s of audio at 24 kHz, committed by hand
	pcm := make([]byte, 24000)
	write(map[string]any{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(pcm)})
	write(map[string]any{"type": "input_audio_buffer.commit"})
	write(map[string]any{"type": "response.create"})
	var got []string
	audio := 0
	transcript := ""
	for {
		m := read()
		typ := m["type"].(string)
		if typ == "response.output_audio.delta" {
			b, _ := base64.StdEncoding.DecodeString(m["delta"].(string))
			audio += len(b)
			continue
		}
		got = append(got, typ)
		if typ == "conversation.item.input_audio_transcription.completed" {
			transcript = m["transcript"].(string)
		}
		if typ == "response.done" {
			if st := m["response"].(map[string]any)["status"]; st != "completed" {
				t.Errorf("response status %v", st)
			}
			break
		}
	}
	if transcript != "hello world" || audio == 0 {
		t.Errorf("transcript %q, %d audio bytes; events %v", transcript, audio, got)
	}
	// then the server's limits: the voice queue's places, all free again
	if m := read(); m["type"] != "rate_limits.updated" {
		t.Errorf("after response.done: %v", m)
	} else if rl := m["rate_limits"].([]any)[0].(map[string]any); rl["name"] != "requests" ||
		rl["limit"] != float64(s.ttsLim.Workers()+s.ttsLim.QueueCap()) || rl["remaining"] != rl["limit"] {
		t.Errorf("rate limits %v", rl)
	}
	// garbage is answered with an error event, and the session goes on
	c.Write(ctx, websocket.MessageText, []byte("{nope"))
	if m := read(); m["type"] != "error" {
		t.Errorf("garbage: %v", m)
	}
	if n := s.sessionCount(); n != 1 {
		t.Errorf("%d sessions", n)
	}
	// shutdown ends the session with "going away" (the client keeps reading, as clients do)
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	_, _, err = c.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("after shutdown: %v", err)
	}
	<-stopped
	if n := s.sessionCount(); n != 0 {
		t.Errorf("%d sessions after shutdown", n)
	}
}

func (s *Server) sessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func TestRealtimeNeedsWebSocketAndEngines(t *testing.T) {
	_, base := testServer(t, Engines{ASR: &fakeASR{}, TTS: &fakeTTS{}}, nil)
	resp, err := http.Get(base + "/v1/realtime")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("plain GET: %d", resp.StatusCode)
	}
	apiErr(t, b)
	_, base = testServer(t, Engines{}, nil)
	resp, _ = http.Get(base + "/v1/realtime")
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("no engines: %d", resp.StatusCode)
	}
	apiErr(t, b)
}

func TestWyomingThroughServer(t *testing.T) {
	_, base, asrAddr, ttsAddr, _ := serveAll(t, Engines{ASR: &fakeASR{}, ASRModel: "fake-sv", TTS: &fakeTTS{}}, nil)
	ctx := context.Background()
	c, err := wyoming.Dial(ctx, asrAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(wyoming.NewEvent(wyoming.TypeDescribe, nil))
	e, err := c.Read(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info wyoming.Info
	e.Decode(&info)
	if e.Type != "info" || len(info.ASR) != 1 || info.ASR[0].Models[0].Name != "fake-sv" || len(info.ASR[0].Models[0].Languages) == 0 || len(info.TTS) != 0 {
		t.Errorf("ASR info %+v", info)
	}
	f := wyoming.AudioFormat{Rate: 16000, Width: 2, Channels: 1}
	c.Write(wyoming.NewEvent(wyoming.TypeTranscribe, map[string]string{"language": "en-US"}))
	c.Write(wyoming.NewEvent(wyoming.TypeAudioStart, f))
	chunk := wyoming.NewEvent(wyoming.TypeAudioChunk, f)
	chunk.Payload = make([]byte, 32000)
	c.Write(chunk)
	c.Write(wyoming.NewEvent(wyoming.TypeAudioStop, nil))
	for {
		e, err := c.Read(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == wyoming.TypeTranscript {
			var tr wyoming.Transcript
			e.Decode(&tr)
			if tr.Text != "hello world" || tr.Language != "en" {
				t.Errorf("transcript %+v", tr)
			}
			break
		}
		if e.Type == wyoming.TypeError {
			t.Fatalf("error event %v", e.Data)
		}
	}

	tc, err := wyoming.Dial(ctx, ttsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.Write(wyoming.NewEvent(wyoming.TypeDescribe, nil))
	e, _ = tc.Read(5 * time.Second)
	info = wyoming.Info{}
	e.Decode(&info)
	if len(info.TTS) != 1 || len(info.TTS[0].Voices) == 0 || len(info.TTS[0].Voices[0].Languages) == 0 || !info.TTS[0].SupportsSynthesizeStreaming {
		t.Errorf("TTS info %+v", info)
	}
	// the engine's presets are the voices; OpenAI's names are never voices or languages
	var names []string
	for _, v := range info.TTS[0].Voices {
		names = append(names, v.Name)
		if !v.Installed || v.Description == "" || v.Attribution.Name == "" || len(v.Languages) == 0 {
			t.Errorf("voice lacks Home Assistant's fields: %+v", v)
		}
	}
	if strings.Join(names, " ") != "af_alloy bm_fable v1" {
		t.Errorf("voices %v, want the engine's presets", names)
	}
	// a message for the other service gets an error event, not silence
	c.Write(wyoming.NewEvent(wyoming.TypeSynthesize, map[string]any{"text": "hello"}))
	if e, err := c.Read(5 * time.Second); err != nil || e.Type != wyoming.TypeError {
		t.Errorf("synthesize on the ASR port: %v %v", e, err)
	}
	tc.Write(wyoming.NewEvent(wyoming.TypeTranscribe, nil))
	if e, err := tc.Read(5 * time.Second); err != nil || e.Type != wyoming.TypeError {
		t.Errorf("transcribe on the TTS port: %v %v", e, err)
	}
	tc.Write(wyoming.NewEvent(wyoming.TypeAudioStart, f))
	if e, err := tc.Read(5 * time.Second); err != nil || e.Type != wyoming.TypeError {
		t.Errorf("audio-start on the TTS port: %v %v", e, err)
	}
	tc.Write(wyoming.NewEvent(wyoming.TypeSynthesize, map[string]any{"text": "One two three.", "voice": map[string]string{"name": "v1", "speaker": "onyx"}}))
	var pcm []byte
	for {
		e, err := tc.Read(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == wyoming.TypeAudioStop {
			break
		}
		if e.Type == wyoming.TypeError {
			t.Fatalf("error %v", e.Data)
		}
		pcm = append(pcm, e.Payload...)
	}
	if len(pcm) != 2*3*22050/10 {
		t.Errorf("%d bytes of audio", len(pcm))
	}
	tc.Write(wyoming.NewEvent(wyoming.TypeSynthesize, map[string]any{"text": "hi", "voice": map[string]string{"name": "nobody"}}))
	e, _ = tc.Read(5 * time.Second)
	var m struct{ Text, Code string }
	e.Decode(&m)
	if e.Type != wyoming.TypeError || m.Code != "invalid_voice" {
		t.Errorf("unknown voice: %s %+v", e.Type, m)
	}
	// the text is the message alone: an HTTP status means nothing to a Wyoming client
	if !strings.Contains(m.Text, "nobody") || strings.Contains(m.Text, "400") || strings.Contains(m.Text, "invalid_request_error") {
		t.Errorf("unknown voice: text %q", m.Text)
	}
	resp, _ := http.Get(base + "/metrics")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `parley_wyoming_events_total{type="synthesize"} 3`) {
		t.Errorf("metrics lack Wyoming counts:\n%s", b)
	}
}

// TestLoad fires 50 transcriptions, 20 syntheses and 200 chat completions at once: each one succeeds or gets a
// clean 429; the queue never holds more than its bound; memory and goroutines come back.
func TestLoad(t *testing.T) {
	asrE := &fakeASR{delay: 200 * time.Millisecond}
	s, base, _, _, stop := serveAll(t, Engines{ASR: asrE, TTS: &fakeTTS{}}, func(o *Options) {
		o.Config.MaxConcurrentASR = 2
		o.Config.MaxConcurrentTTS = 2
		o.QueueLen = 8
		o.MaxConnsPerClient = 1024 // this test is about the queues (TestConnectionCaps: the sockets)
	})
	runtime.GC()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	g0 := runtime.NumGoroutine()
	ct, body := multipartBody(t, wavBytes(t, 16000, 1, 3), [2]string{"model", "whisper-1"})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	maxQueue := int64(0)
	stopWatch := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopWatch:
				return
			default:
			}
			mu.Lock()
			maxQueue = max(maxQueue, s.asrLim.Waiting()+s.asrLim.Running(), s.ttsLim.Waiting()+s.ttsLim.Running())
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	do := func(kind string, req *http.Request) {
		defer wg.Done()
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s: %v", kind, err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
		case 429:
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s: 429 without Retry-After", kind)
			}
			_, _, _, code := apiErr(t, b)
			mu.Lock()
			counts[kind+" "+code]++
			mu.Unlock()
		default:
			t.Errorf("%s: status %d: %s", kind, resp.StatusCode, b)
		}
		mu.Lock()
		counts[kind+" "+http.StatusText(resp.StatusCode)]++
		mu.Unlock()
	}
	for i := 0; i < 50; i++ {
		req, _ := http.NewRequest("POST", base+"/v1/audio/transcriptions", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		wg.Add(1)
		go do("asr", req)
	}
	for i := 0; i < 20; i++ {
		req, _ := http.NewRequest("POST", base+"/v1/audio/speech", strings.NewReader(`{"model":"tts-1","input":"one two three four five six seven eight","voice":"alloy","response_format":"wav"}`))
		req.Header.Set("Content-Type", "application/json")
		wg.Add(1)
		go do("tts", req)
	}
	for i := 0; i < 200; i++ {
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(`{"model":"parley","messages":[{"role":"user","content":"what is 6 times 7"}]}`))
		req.Header.Set("Content-Type", "application/json")
		wg.Add(1)
		go do("chat", req)
	}
	wg.Wait()
	close(stopWatch)
	t.Logf("results: %v; most jobs admitted at once %d", counts, maxQueue)
	if counts["asr OK"] == 0 || counts["tts OK"] == 0 || counts["asr Too Many Requests"] == 0 {
		t.Errorf("nothing succeeded: %v", counts)
	}
	if counts["asr OK"]+counts["asr Too Many Requests"] != 50 || counts["tts OK"]+counts["tts Too Many Requests"] != 20 ||
		counts["chat OK"]+counts["chat Too Many Requests"] != 200 || counts["chat OK"] == 0 {
		t.Errorf("results %v", counts)
	}
	if maxQueue > 2+8 {
		t.Errorf("%d jobs admitted at once, bound 2 running + 8 waiting", maxQueue)
	}
	client.CloseIdleConnections()
	stop()
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	if grow := int64(ms1.HeapInuse) - int64(ms0.HeapInuse); grow > 64<<20 {
		t.Errorf("heap grew by %d MiB", grow>>20)
	}
	deadline := time.Now().Add(30 * time.Second) // a bound for a broken server, not a timing
	for runtime.NumGoroutine() > g0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > g0 {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines %d → %d\n%s", g0, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestRealtimeSessionCap(t *testing.T) {
	s, base, _, _, _ := serveAll(t, Engines{ASR: &fakeASR{}, TTS: &fakeTTS{}, Brain: echoBrain{}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := strings.Replace(base, "http", "ws", 1) + "/v1/realtime"
	var conns []*websocket.Conn
	defer func() {
		for _, c := range conns {
			c.CloseNow()
		}
	}()
	for i := 0; i < MaxRealtimeSessions; i++ {
		c, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		if _, _, err := c.Read(ctx); err != nil { // session.created
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	_, resp, err := websocket.Dial(ctx, url, nil)
	if err == nil || resp == nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("session %d: err %v, resp %+v", MaxRealtimeSessions+1, err, resp)
	}
	// closing one makes room again
	conns[0].Close(websocket.StatusNormalClosure, "")
	conns = conns[1:]
	deadline := time.Now().Add(30 * time.Second) // a bound for a broken server, not a timing
	for s.sessionCount() >= MaxRealtimeSessions && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("after one left: %v", err)
	}
	conns = append(conns, c)
}

// A recogniser's failure reaches a Wyoming client with its code, as a synthesiser's does:
// audio the recogniser refuses is invalid_audio, not a bare "error".
func TestWyomingRecognitionErrorKeepsItsCode(t *testing.T) {
	_, _, asrAddr, _, _ := serveAll(t, Engines{ASR: &fakeASR{}}, nil)
	c, err := wyoming.Dial(context.Background(), asrAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f := wyoming.AudioFormat{Rate: 16000, Width: 2, Channels: 1}
	c.Write(wyoming.NewEvent(wyoming.TypeAudioStart, f))
	e := wyoming.NewEvent(wyoming.TypeAudioChunk, f)
	e.Payload = make([]byte, 400) // 200 samples: too short for the recogniser (asr.ErrInput)
	c.Write(e)
	c.Write(wyoming.NewEvent(wyoming.TypeAudioStop, nil))
	e, err = c.Read(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Text, Code string }
	e.Decode(&m)
	if e.Type != wyoming.TypeError || m.Code != "invalid_audio" || !strings.Contains(m.Text, "too short") {
		t.Errorf("too short an utterance: %s %+v", e.Type, m)
	}
}

func TestWyomingBusyIsAnErrorEvent(t *testing.T) {
	asrE := &fakeASR{block: make(chan struct{})}
	s, _, asrAddr, _, _ := serveAll(t, Engines{ASR: asrE}, func(o *Options) {
		o.Config.MaxConcurrentASR = 1
		o.QueueLen = 1
	})
	f := wyoming.AudioFormat{Rate: 16000, Width: 2, Channels: 1}
	utter := func() *wyoming.Client {
		c, err := wyoming.Dial(context.Background(), asrAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Write(wyoming.NewEvent(wyoming.TypeAudioStart, f))
		e := wyoming.NewEvent(wyoming.TypeAudioChunk, f)
		e.Payload = make([]byte, 3200)
		c.Write(e)
		c.Write(wyoming.NewEvent(wyoming.TypeAudioStop, nil))
		return c
	}
	a, b := utter(), utter()
	for s.asrLim.Running()+s.asrLim.Waiting() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	c := utter()
	e, err := c.Read(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Text, Code string }
	e.Decode(&m)
	if e.Type != wyoming.TypeError || m.Code != "busy" {
		t.Errorf("third utterance: %s %+v", e.Type, m)
	}
	close(asrE.block)
	for _, cl := range []*wyoming.Client{a, b} {
		for {
			e, err := cl.Read(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if e.Type == wyoming.TypeTranscript {
				break
			}
		}
	}
}
