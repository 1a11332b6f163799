package wyoming

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
)

func TestEventRoundTrip(t *testing.T) {
	e := NewEvent(TypeAudioChunk, AudioFormat{Rate: 16000, Width: 2, Channels: 1})
	e.Payload = []byte{1, 2, 3, 4}
	b, err := AppendEvent(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	var h map[string]any
	if err := json.Unmarshal(line, &h); err != nil {
		t.Fatal(err)
	}
	if h["type"] != TypeAudioChunk || h["version"] != Version || h["payload_length"] != 4.0 || h["data_length"] == nil {
		t.Errorf("header %s", line)
	}
	got, err := ReadEvent(bufio.NewReader(bytes.NewReader(b)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var f AudioFormat
	got.Decode(&f)
	if got.Type != TypeAudioChunk || f.Rate != 16000 || f.Width != 2 || !bytes.Equal(got.Payload, e.Payload) {
		t.Errorf("round trip: %+v %+v", got, f)
	}
}

func TestReadEventMergesHeaderData(t *testing.T) {
	// data in the header, then data_length bytes that override one key and add another
	in := `{"type":"synthesize","data":{"text":"old","voice":{"name":"a"}},"data_length":15}` + "\n" + `{"text":"new!"}`
	e, err := ReadEvent(bufio.NewReader(strings.NewReader(in)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Text  string `json:"text"`
		Voice Voice  `json:"voice"`
	}
	e.Decode(&v)
	if v.Text != "new!" || v.Voice.Name != "a" {
		t.Errorf("merged %+v", v)
	}
}

func TestReadEventRejects(t *testing.T) {
	lim := Limits{MaxLine: 1024, MaxData: 256, MaxPayload: 4096}
	cases := []struct {
		name, in string
		want     string
		err      error
	}{
		{"empty stream", "", "", io.EOF},
		{"not json", "hello\n", "not a JSON object", ErrFrame},
		{"no type", `{"data":{}}` + "\n", "no type", ErrFrame},
		{"blank line", "\n", "empty header", ErrFrame},
		{"huge header", strings.Repeat("x", 5000) + "\n", "longer than 1024", ErrFrame},
		{"huge header no newline", strings.Repeat("x", 5000), "longer than 1024", ErrFrame},
		{"huge payload", `{"type":"audio-chunk","payload_length":1000000000000}` + "\n", "over the limit", ErrFrame},
		{"huge data", `{"type":"x","data_length":100000}` + "\n", "over the limit", ErrFrame},
		{"negative", `{"type":"x","payload_length":-5}` + "\n", "negative", ErrFrame},
		{"not integer", `{"type":"x","payload_length":"12"}` + "\n", "not an integer", ErrFrame},
		{"float", `{"type":"x","payload_length":1.5}` + "\n", "not an integer", ErrFrame},
		{"lying payload", `{"type":"audio-chunk","payload_length":100}` + "\n" + "short", "inside the payload", ErrFrame},
		{"lying data", `{"type":"x","data_length":50}` + "\n" + `{"a":1}`, "inside the data", ErrFrame},
		{"data not object", `{"type":"x","data_length":3}` + "\n" + `[1]`, "not a JSON object", ErrFrame},
		{"cut header", `{"type":"x"`, "", io.ErrUnexpectedEOF},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadEvent(bufio.NewReaderSize(strings.NewReader(tc.in), 16), lim)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %q lacks %q", err, tc.want)
			}
		})
	}
}

func FuzzReadEvent(f *testing.F) {
	f.Add([]byte(`{"type":"describe"}` + "\n"))
	f.Add([]byte(`{"type":"audio-chunk","data":{"rate":16000,"width":2,"channels":1},"payload_length":4}` + "\n\x00\x01\x02\x03"))
	f.Add([]byte(`{"type":"synthesize","data_length":16}` + "\n" + `{"text":"hello"}`))
	f.Add([]byte(`{"type":"x","payload_length":99999999999999999999}` + "\n"))
	f.Add([]byte("\n\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		lim := Limits{MaxLine: 4096, MaxData: 4096, MaxPayload: 1 << 16}
		for i := 0; i < 16; i++ {
			e, err := ReadEvent(r, lim)
			if err != nil {
				return
			}
			if len(e.Payload) > lim.MaxPayload {
				t.Fatalf("payload %d over the limit", len(e.Payload))
			}
			// what we read, we can write and read back the same
			out, err := AppendEvent(nil, e)
			if err != nil {
				continue
			}
			e2, err := ReadEvent(bufio.NewReader(bytes.NewReader(out)), Limits{})
			if err != nil {
				t.Fatalf("re-read of %q: %v", out, err)
			}
			if e2.Type != e.Type || !bytes.Equal(e2.Payload, e.Payload) || len(e2.Data) != len(e.Data) {
				t.Fatalf("round trip changed %+v into %+v", e, e2)
			}
		}
	})
}

// fakeASR hears the number of samples it got.
type fakeASR struct {
	mu   sync.Mutex
	got  int
	lang string
}

func (f *fakeASR) Transcribe(ctx context.Context, pcm []float32, o app.TranscribeOptions) (app.Transcript, error) {
	f.mu.Lock()
	f.got, f.lang = len(pcm), o.Language
	f.mu.Unlock()
	if o.OnSegment != nil {
		if err := o.OnSegment("part one"); err != nil {
			return app.Transcript{}, err
		}
		if err := o.OnSegment("part two"); err != nil {
			return app.Transcript{}, err
		}
	}
	return app.Transcript{Text: fmt.Sprintf("heard %d samples", len(pcm)), Lang: "en"}, nil
}

// fakeTTS speaks 100 samples per character at 22050 Hz; "fail" fails.
type fakeTTS struct {
	mu    sync.Mutex
	texts []string
	voice Voice
}

func (f *fakeTTS) Synthesize(ctx context.Context, text string, v Voice, emit func([]float32, int) error) error {
	f.mu.Lock()
	f.texts, f.voice = append(f.texts, text), v
	f.mu.Unlock()
	if strings.Contains(text, "fail") {
		return errors.New("engine failed")
	}
	return emit(make([]float32, 100*len(text)), 22050)
}

func startServer(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		s.CloseListener()
		wctx, wc := context.WithTimeout(context.Background(), 5*time.Second)
		defer wc()
		s.Wait(wctx)
		<-done
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func read(t *testing.T, c *Client) *Event {
	t.Helper()
	e, err := c.Read(5 * time.Second)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return e
}

func expect(t *testing.T, c *Client, types ...string) []*Event {
	t.Helper()
	var out []*Event
	for _, typ := range types {
		e := read(t, c)
		if e.Type != typ {
			var msg struct{ Text string }
			e.Decode(&msg)
			t.Fatalf("got %s (%s), want %s", e.Type, msg.Text, typ)
		}
		out = append(out, e)
	}
	return out
}

func s16(n int, rate float64) []byte {
	b := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(int16(8000*math.Sin(2*math.Pi*440*float64(i)/rate))))
	}
	return b
}

func TestASRSession(t *testing.T) {
	asr := &fakeASR{}
	addr := startServer(t, &Server{ASR: asr, Info: Info{ASR: []AsrProgram{{Artifact: Artifact{Name: "parley"}, Models: []AsrModel{{Artifact: Artifact{Name: "m"}, Languages: []string{"en", "zh"}}}}}}})
	c := dial(t, addr)

	c.Write(NewEvent(TypeDescribe, nil))
	info := expect(t, c, TypeInfo)[0]
	var in Info
	info.Decode(&in)
	if len(in.ASR) != 1 || in.ASR[0].Models[0].Languages[1] != "zh" {
		t.Errorf("info %+v", in)
	}

	// 1 s at 48 kHz stereo, sent in 10 chunks, resampled to 16 kHz mono
	c.Write(NewEvent(TypeTranscribe, map[string]string{"language": "en"}))
	f := AudioFormat{Rate: 48000, Width: 2, Channels: 2}
	c.Write(NewEvent(TypeAudioStart, f))
	mono := s16(48000, 48000)
	for i := 0; i < 10; i++ {
		part := mono[i*9600 : (i+1)*9600]
		stereo := make([]byte, 0, 2*len(part))
		for j := 0; j < len(part); j += 2 {
			stereo = append(stereo, part[j], part[j+1], part[j], part[j+1])
		}
		e := NewEvent(TypeAudioChunk, f)
		e.Payload = stereo
		c.Write(e)
	}
	c.Write(NewEvent(TypeAudioStop, nil))
	evs := expect(t, c, TypeTranscriptStart, TypeTranscriptChunk, TypeTranscriptChunk, TypeTranscriptStop, TypeTranscript)
	var tr Transcript
	evs[4].Decode(&tr)
	asr.mu.Lock()
	got, lang := asr.got, asr.lang
	asr.mu.Unlock()
	if got < 15900 || got > 16100 || lang != "en" || !strings.HasPrefix(tr.Text, "heard ") || tr.Language != "en" {
		t.Errorf("transcript %+v from %d samples (lang %q)", tr, got, lang)
	}

	// errors keep the connection usable
	c.Write(NewEvent(TypeAudioStop, nil))
	expect(t, c, TypeError)
	c.Write(NewEvent(TypeAudioStart, AudioFormat{Rate: 16000, Width: 3, Channels: 1}))
	expect(t, c, TypeError)
	c.Write(NewEvent(TypeAudioStart, AudioFormat{Rate: 16000, Width: 2, Channels: 1}))
	bad := NewEvent(TypeAudioChunk, AudioFormat{Rate: 16000, Width: 2, Channels: 1})
	bad.Payload = []byte{1, 2, 3}
	c.Write(bad)
	expect(t, c, TypeError)
	c.Write(NewEvent(TypeSynthesize, map[string]string{"text": "hi"}))
	expect(t, c, TypeError) // this is the ASR service
	c.Write(NewEvent(TypePing, map[string]string{"text": "x"}))
	expect(t, c, TypePong)
}

func TestASRTooLong(t *testing.T) {
	addr := startServer(t, &Server{ASR: &fakeASR{}, MaxAudioSeconds: 1})
	c := dial(t, addr)
	f := AudioFormat{Rate: 16000, Width: 2, Channels: 1}
	c.Write(NewEvent(TypeAudioStart, f))
	e := NewEvent(TypeAudioChunk, f)
	e.Payload = s16(20000, 16000)
	c.Write(e)
	ev := expect(t, c, TypeError)[0]
	var m struct{ Text, Code string }
	ev.Decode(&m)
	if m.Code != "too-long" {
		t.Errorf("error %+v", m)
	}
}

func TestTTSSession(t *testing.T) {
	tts := &fakeTTS{}
	addr := startServer(t, &Server{TTS: tts})
	c := dial(t, addr)
	c.Write(NewEvent(TypeSynthesize, map[string]any{"text": "Hello there.", "voice": map[string]string{"name": "en-us", "speaker": "nova"}}))
	evs := expect(t, c, TypeAudioStart, TypeAudioChunk, TypeAudioChunk)
	var f AudioFormat
	evs[0].Decode(&f)
	if f.Rate != 22050 || f.Width != 2 || f.Channels != 1 {
		t.Errorf("audio-start %+v", f)
	}
	total := len(evs[1].Payload) + len(evs[2].Payload)
	for {
		e := read(t, c)
		if e.Type == TypeAudioStop {
			break
		}
		if e.Type != TypeAudioChunk {
			t.Fatalf("got %s", e.Type)
		}
		total += len(e.Payload)
	}
	if total != 2*100*len("Hello there.") {
		t.Errorf("audio bytes %d", total)
	}
	if tts.voice.Name != "en-us" || tts.voice.Speaker != "nova" {
		t.Errorf("voice %+v", tts.voice)
	}

	// streaming: sentences are spoken as they complete; the compatibility synthesize after
	// synthesize-stop is ignored
	tts.texts = nil
	c.Write(NewEvent(TypeSynthesizeStart, map[string]any{"voice": map[string]string{"name": "x"}}))
	c.Write(NewEvent(TypeSynthesizeChunk, map[string]string{"text": "The first sentence is here. The sec"}))
	c.Write(NewEvent(TypeSynthesizeChunk, map[string]string{"text": "ond one ends now."}))
	c.Write(NewEvent(TypeSynthesizeStop, nil))
	c.Write(NewEvent(TypeSynthesize, map[string]string{"text": "The first sentence is here. The second one ends now."}))
	c.Write(NewEvent(TypePing, nil))
	var types []string
	for {
		e := read(t, c)
		if e.Type == TypePong {
			break
		}
		if e.Type != TypeAudioChunk {
			types = append(types, e.Type)
		}
	}
	if strings.Join(types, ",") != "audio-start,audio-stop,synthesize-stopped" {
		t.Errorf("streamed events %v", types)
	}
	tts.mu.Lock()
	texts := tts.texts
	tts.mu.Unlock()
	if len(texts) != 2 || !strings.Contains(texts[0], "first") || !strings.Contains(texts[1], "second") {
		t.Errorf("spoken %q", texts)
	}

	// failures: an error event, and the connection goes on
	c.Write(NewEvent(TypeSynthesize, map[string]string{"text": "please fail"}))
	expect(t, c, TypeError)
	c.Write(NewEvent(TypeSynthesize, map[string]string{"text": "  "}))
	expect(t, c, TypeError)
	c.Write(NewEvent(TypeSynthesizeChunk, map[string]string{"text": "x"}))
	expect(t, c, TypeError)
	c.Write(NewEvent(TypeSynthesize, map[string]string{"text": "ok"}))
	expect(t, c, TypeAudioStart, TypeAudioChunk, TypeAudioStop)
}

func TestBrokenFramesCloseTheConnection(t *testing.T) {
	s := &Server{TTS: &fakeTTS{}, Limits: Limits{MaxLine: 1024, MaxPayload: 1 << 20}}
	addr := startServer(t, s)
	for _, raw := range []string{
		strings.Repeat("{", 4096),
		`{"type":"audio-chunk","payload_length":9999999999}` + "\n",
		"not json\n",
	} {
		c := dial(t, addr)
		c.WriteRaw([]byte(raw))
		e := read(t, c)
		var m struct{ Text, Code string }
		e.Decode(&m)
		if e.Type != TypeError || m.Code != "bad-frame" {
			t.Errorf("%.30q: got %s %+v", raw, e.Type, m)
		}
		if _, err := c.Read(5 * time.Second); !errors.Is(err, io.EOF) {
			t.Errorf("%.30q: connection not closed: %v", raw, err)
		}
	}
	// A lying payload_length: the server waits for the bytes, the client gives up; the
	// server must still serve others.
	c := dial(t, addr)
	c.WriteRaw([]byte(`{"type":"audio-chunk","payload_length":1000}` + "\nabc"))
	c.Close()
	c2 := dial(t, addr)
	c2.Write(NewEvent(TypeSynthesize, map[string]string{"text": "ok"}))
	expect(t, c2, TypeAudioStart)
}

func TestDrainEndsIdleConnectionsAndFinishesExchanges(t *testing.T) {
	asr := &fakeASR{}
	s := &Server{ASR: asr}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(context.Background(), ln)
	idle := dial(t, ln.Addr().String())
	idle.Write(NewEvent(TypePing, nil))
	expect(t, idle, TypePong)
	mid := dial(t, ln.Addr().String())
	f := AudioFormat{Rate: 16000, Width: 2, Channels: 1}
	mid.Write(NewEvent(TypeAudioStart, f))
	mid.Write(NewEvent(TypePing, nil))
	expect(t, mid, TypePong) // the audio-start has been handled: an exchange is open

	s.CloseListener()
	if _, err := idle.Read(5 * time.Second); !errors.Is(err, io.EOF) {
		t.Errorf("idle connection not closed at drain: %v", err)
	}
	// the open exchange completes
	e := NewEvent(TypeAudioChunk, f)
	e.Payload = s16(1600, 16000)
	mid.Write(e)
	mid.Write(NewEvent(TypeAudioStop, nil))
	expect(t, mid, TypeTranscriptStart, TypeTranscriptChunk, TypeTranscriptChunk, TypeTranscriptStop, TypeTranscript)
	if _, err := mid.Read(5 * time.Second); !errors.Is(err, io.EOF) {
		t.Errorf("connection not closed after its exchange: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	s.Wait(ctx)
	if ctx.Err() != nil {
		t.Errorf("Wait needed the deadline (%v)", time.Since(start))
	}
}

func TestStalledPayloadIsDropped(t *testing.T) {
	addr := startServer(t, &Server{TTS: &fakeTTS{}, BodyTimeout: 200 * time.Millisecond})
	c := dial(t, addr)
	c.WriteRaw([]byte(`{"type":"audio-chunk","payload_length":1000}` + "\nabc"))
	// the idle timeout is 5 minutes: an EOF within the client's 5 s wait is the body timeout
	if _, err := c.Read(5 * time.Second); !errors.Is(err, io.EOF) {
		t.Errorf("stalled payload: %v", err)
	}
}

func TestConnectionsAreBoundedAndDoNotLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	s := &Server{TTS: &fakeTTS{}, MaxConns: 4}
	addr := startServer(t, s)
	var cs []*Client
	for i := 0; i < 4; i++ {
		c := dial(t, addr)
		c.Write(NewEvent(TypePing, nil))
		expect(t, c, TypePong)
		cs = append(cs, c)
	}
	extra := dial(t, addr)
	e := read(t, extra)
	var m struct{ Code string }
	e.Decode(&m)
	if e.Type != TypeError || m.Code != "busy" {
		t.Errorf("fifth connection: %s %+v", e.Type, m)
	}
	for _, c := range cs {
		c.Close()
	}
	extra.Close()
	deadline := time.Now().Add(30 * time.Second) // a bound for a broken server, not a timing
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		t.Errorf("goroutines %d → %d", before, n)
	}
}
