package realtime

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/app"
)

// pipeConn is a Conn over channels: the test writes client events to in and reads server
// events from out.
type pipeConn struct {
	in  chan []byte
	out chan []byte
}

func newPipe() *pipeConn { return &pipeConn{in: make(chan []byte, 64), out: make(chan []byte, 4096)} }

func (p *pipeConn) Read(ctx context.Context) ([]byte, error) {
	select {
	case b, ok := <-p.in:
		if !ok {
			return nil, errors.New("closed")
		}
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pipeConn) Write(ctx context.Context, b []byte) error {
	select {
	case p.out <- append([]byte(nil), b...):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type fakeASR struct{ text string }

func (f fakeASR) Transcribe(ctx context.Context, pcm []float32, _ app.TranscribeOptions) (app.Transcript, error) {
	return app.Transcript{Text: f.text, Lang: "en", Emotion: "NEUTRAL"}, nil
}

type fakeBrain struct {
	answer      string
	interrupted *string
}

func (f fakeBrain) Interrupted(spoken string) {
	if f.interrupted != nil {
		*f.interrupted = spoken
	}
}

func (f fakeBrain) Answer(ctx context.Context, in app.Transcript, h []app.Message, fn func(string) error) error {
	for _, w := range strings.SplitAfter(f.answer, " ") {
		if err := fn(w); err != nil {
			return err
		}
	}
	return nil
}

// fakeVoice speaks 0.2 s per sentence at 22050 Hz; slow makes it speak in small pieces
// until cancelled.
type fakeVoice struct {
	slow   bool
	mu     sync.Mutex
	said   []string
	voices []string // the voice of each sentence said
}

func (f *fakeVoice) Synthesize(ctx context.Context, text, voice string, fn func([]float32, int) error) error {
	f.mu.Lock()
	f.said = append(f.said, text)
	f.voices = append(f.voices, voice)
	f.mu.Unlock()
	if f.slow {
		for {
			if err := fn(make([]float32, 2205), 22050); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return fn(make([]float32, 4410), 22050)
}

type ev map[string]any

func (e ev) typ() string { s, _ := e["type"].(string); return s }

func start(t *testing.T, cfg Config) (*pipeConn, chan error) {
	t.Helper()
	p := newPipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, p, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("session did not end")
		}
	})
	if e := next(t, p); e.typ() != "session.created" {
		t.Fatalf("first event %v", e)
	}
	return p, done
}

func next(t *testing.T, p *pipeConn) ev {
	t.Helper()
	select {
	case b := <-p.out:
		var e ev
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("server sent non-JSON %q", b)
		}
		if e["event_id"] == nil {
			t.Errorf("event without event_id: %s", b)
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event from the server")
	}
	return nil
}

// until reads events until one of type typ, returning all of them.
func until(t *testing.T, p *pipeConn, typ string) []ev {
	t.Helper()
	var out []ev
	for {
		e := next(t, p)
		out = append(out, e)
		if e.typ() == typ {
			return out
		}
	}
}

func send(p *pipeConn, v any) {
	b, _ := json.Marshal(v)
	p.in <- b
}

// tone is PCM16 at 24 kHz: silence, then a loud tone, then silence.
func tone(silence1, loud, silence2 time.Duration) []byte {
	n := func(d time.Duration) int { return int(d.Seconds() * Rate) }
	var b []byte
	for i := 0; i < n(silence1); i++ {
		b = binary.LittleEndian.AppendUint16(b, 0)
	}
	for i := 0; i < n(loud); i++ {
		b = binary.LittleEndian.AppendUint16(b, uint16(int16(10000*math.Sin(2*math.Pi*300*float64(i)/Rate))))
	}
	for i := 0; i < n(silence2); i++ {
		b = binary.LittleEndian.AppendUint16(b, 0)
	}
	return b
}

func appendAudio(p *pipeConn, pcm []byte) {
	for len(pcm) > 0 {
		n := min(len(pcm), 4800) // 100 ms
		send(p, map[string]any{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(pcm[:n])})
		pcm = pcm[n:]
	}
}

func types(evs []ev) []string {
	var out []string
	for _, e := range evs {
		if t := e.typ(); t != "response.output_audio.delta" {
			out = append(out, t)
		}
	}
	return out
}

func TestServerVADTurn(t *testing.T) {
	voice := &fakeVoice{}
	var heard string
	var mu sync.Mutex
	hops := map[string]time.Duration{}
	p, _ := start(t, Config{Transcriber: fakeASR{"what time is it"}, Brain: fakeBrain{"It is noon. Have a nice day.", &heard}, Voice: voice,
		OnLatency: func(hop string, d time.Duration) { mu.Lock(); hops[hop] = d; mu.Unlock() }})
	appendAudio(p, tone(300*time.Millisecond, time.Second, time.Second))
	evs := until(t, p, "response.done")
	got := strings.Join(types(evs), " ")
	for _, want := range []string{
		"input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
		"conversation.item.input_audio_transcription.completed", "response.created",
		"response.output_audio_transcript.delta", "response.output_audio_transcript.done", "response.output_audio.done", "response.done",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %s in %s", want, got)
		}
	}
	// the whole turn in OpenAI's GA order (deltas aside): the user's item is added and done
	// at commit, the answer's item and content part open before its audio and close after
	var order []string
	for _, e := range evs {
		if typ := e.typ(); !strings.HasSuffix(typ, ".delta") {
			order = append(order, typ)
		}
	}
	wantOrder := []string{"input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
		"input_audio_buffer.committed", "conversation.item.added", "conversation.item.done",
		"conversation.item.input_audio_transcription.completed", "response.created",
		"response.output_item.added", "conversation.item.added", "response.content_part.added",
		"response.output_audio.done", "response.output_audio_transcript.done", "response.content_part.done",
		"response.output_item.done", "conversation.item.done", "response.done"}
	if strings.Join(order, " ") != strings.Join(wantOrder, " ") {
		t.Errorf("events\n  %v\nwant\n  %v", order, wantOrder)
	}
	var userItem, answerItem, answerPrev any
	for _, e := range evs {
		it, _ := e["item"].(map[string]any)
		switch {
		case e.typ() == "input_audio_buffer.committed":
			userItem = e["item_id"]
		case e.typ() == "conversation.item.added" && it["role"] == "user":
			if it["id"] != userItem || it["content"].([]any)[0].(map[string]any)["type"] != "input_audio" {
				t.Errorf("user item %v, committed %v", it, userItem)
			}
		case e.typ() == "conversation.item.added" && it["role"] == "assistant":
			answerItem, answerPrev = it["id"], e["previous_item_id"]
		case e.typ() == "response.content_part.done":
			if e["item_id"] != answerItem || e["part"].(map[string]any)["transcript"] != "It is noon. Have a nice day." {
				t.Errorf("content part done %v", e)
			}
		case e.typ() == "conversation.item.done" && it["role"] == "assistant":
			if it["id"] != answerItem || it["status"] != "completed" {
				t.Errorf("answer item done %v", it)
			}
		}
	}
	if answerPrev != userItem || userItem == nil {
		t.Errorf("the answer's previous item %v, the user's %v", answerPrev, userItem)
	}
	var audioBytes int
	var transcript strings.Builder
	for _, e := range evs {
		switch e.typ() {
		case "response.output_audio.delta":
			b, err := base64.StdEncoding.DecodeString(e["delta"].(string))
			if err != nil {
				t.Fatal(err)
			}
			audioBytes += len(b)
		case "response.output_audio_transcript.delta":
			transcript.WriteString(e["delta"].(string))
		case "conversation.item.input_audio_transcription.completed":
			if e["transcript"] != "what time is it" {
				t.Errorf("transcription %v", e)
			}
		case "input_audio_buffer.speech_started":
			if ms := e["audio_start_ms"].(float64); ms < 0 || ms > 400 {
				t.Errorf("speech started at %v ms", ms)
			}
		case "response.done":
			r := e["response"].(map[string]any)
			if r["status"] != "completed" {
				t.Errorf("response %v", r)
			}
		}
	}
	// two sentences of 0.2 s, resampled from 22.05 kHz to 24 kHz PCM16
	if want := 2 * 2 * Rate / 5; audioBytes < want-200 || audioBytes > want+200 {
		t.Errorf("audio %d bytes, want about %d", audioBytes, want)
	}
	if !strings.Contains(transcript.String(), "noon") || !strings.Contains(transcript.String(), "nice day") {
		t.Errorf("transcript %q", transcript.String())
	}
	mu.Lock()
	if _, ok := hops["transcript"]; !ok || len(hops) != 2 || hops["first_audio"] < hops["transcript"] {
		t.Errorf("latency hops %v", hops)
	}
	mu.Unlock()
	// the client played 300 ms of the answer: only the first sentence (200 ms) was heard
	var item string
	for _, e := range evs {
		if e.typ() == "response.done" {
			item = e["response"].(map[string]any)["output"].([]any)[0].(map[string]any)["id"].(string)
		}
	}
	send(p, map[string]any{"type": "conversation.item.truncate", "item_id": item, "content_index": 0, "audio_end_ms": 300})
	if e := next(t, p); e.typ() != "conversation.item.truncated" || heard != "It is noon." {
		t.Errorf("truncate: %v; brain kept %q", e, heard)
	}
	send(p, map[string]any{"type": "conversation.item.truncate", "item_id": item, "content_index": 0, "audio_end_ms": 5000})
	if e := next(t, p); e.typ() != "error" {
		t.Errorf("truncate past the end: %v", e)
	}
	send(p, map[string]any{"type": "conversation.item.truncate", "item_id": "item_nope", "audio_end_ms": 10})
	if e := next(t, p); e.typ() != "error" {
		t.Errorf("truncate of an unknown item: %v", e)
	}
}

func TestBargeInCancelsTheAnswer(t *testing.T) {
	voice := &fakeVoice{slow: true}
	p, _ := start(t, Config{Transcriber: fakeASR{"tell me a story"}, Brain: fakeBrain{answer: "Once upon a time there was a very long story."}, Voice: voice})
	appendAudio(p, tone(200*time.Millisecond, 800*time.Millisecond, 800*time.Millisecond))
	until(t, p, "response.output_audio.delta")
	// the user speaks over the answer
	appendAudio(p, tone(0, 800*time.Millisecond, 0))
	evs := until(t, p, "response.done")
	sawStart := false
	for _, e := range evs {
		sawStart = sawStart || e.typ() == "input_audio_buffer.speech_started"
	}
	done := evs[len(evs)-1]["response"].(map[string]any)
	details, _ := done["status_details"].(map[string]any)
	if !sawStart || done["status"] != "cancelled" || details["reason"] != "turn_detected" {
		t.Errorf("speech_started %v, response.done %v", sawStart, done)
	}
}

func TestBargeInPolicies(t *testing.T) {
	cases := []struct {
		name   string
		policy app.BargeIn
		speech time.Duration
		cut    bool
	}{
		{"off", app.BargeInOff, 800 * time.Millisecond, false},
		{"min-speech, long enough", app.BargeInMinSpeech, 800 * time.Millisecond, true},
		{"min-speech, too short", app.BargeInMinSpeech, 150 * time.Millisecond, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			voice := &fakeVoice{slow: true}
			p, _ := start(t, Config{Transcriber: fakeASR{"story"}, Brain: fakeBrain{answer: "Once upon a time."}, Voice: voice,
				BargeIn: tc.policy, BargeInMin: 400 * time.Millisecond})
			appendAudio(p, tone(200*time.Millisecond, 800*time.Millisecond, 800*time.Millisecond))
			until(t, p, "response.output_audio.delta")
			appendAudio(p, tone(0, tc.speech, 600*time.Millisecond))
			// Then cancel explicitly: the answer ends either way, and the reason says whether
			// the speech cut it. (The response.done of a barge-in is sent by the worker, so it
			// may come after events the read loop answers later; waiting for "cleared" alone
			// raced with it on a loaded machine.)
			send(p, map[string]any{"type": "response.cancel"})
			evs := until(t, p, "response.done")
			done := evs[len(evs)-1]["response"].(map[string]any)
			details, _ := done["status_details"].(map[string]any)
			if cut := details["reason"] == "turn_detected"; cut != tc.cut {
				t.Errorf("answer cut by the speech: %v, want %v (response.done %v)", cut, tc.cut, done)
			}
		})
	}
}

func TestManualTurnsAndErrors(t *testing.T) {
	p, done := start(t, Config{Transcriber: fakeASR{"hello"}, Brain: fakeBrain{answer: "Hi there."}, Voice: &fakeVoice{}, MaxBadEvents: 5, MaxBufferSeconds: 2})
	send(p, map[string]any{"type": "session.update", "session": map[string]any{"type": "realtime", "instructions": "be brief",
		"audio": map[string]any{"input": map[string]any{"turn_detection": nil, "format": map[string]any{"type": "audio/pcm", "rate": 24000}}, "output": map[string]any{"voice": "nova"}}}})
	e := next(t, p)
	s := e["session"].(map[string]any)
	if e.typ() != "session.updated" || s["turn_detection"] != nil || s["voice"] != "nova" || s["instructions"] != "be brief" {
		t.Fatalf("session.updated %v", e)
	}
	// commit with nothing → error
	send(p, map[string]any{"type": "input_audio_buffer.commit", "event_id": "c1"})
	e = next(t, p)
	if errObj, _ := e["error"].(map[string]any); e.typ() != "error" || errObj["code"] != "input_audio_buffer_commit_empty" || errObj["event_id"] != "c1" {
		t.Errorf("empty commit: %v", e)
	}
	appendAudio(p, tone(0, 500*time.Millisecond, 0))
	send(p, map[string]any{"type": "input_audio_buffer.commit"})
	evs := until(t, p, "conversation.item.input_audio_transcription.completed")
	if types(evs)[0] != "input_audio_buffer.committed" {
		t.Errorf("commit events %v", types(evs))
	}
	send(p, map[string]any{"type": "response.create"})
	evs = until(t, p, "response.done")
	if evs[0].typ() != "response.created" {
		t.Errorf("response events %v", types(evs))
	}
	// too much uncommitted audio
	appendAudio(p, tone(0, 2500*time.Millisecond, 0))
	e = next(t, p)
	if errObj, _ := e["error"].(map[string]any); e.typ() != "error" || errObj["code"] != "input_audio_buffer_full" {
		t.Errorf("full buffer: %v", e)
	}
	send(p, map[string]any{"type": "input_audio_buffer.clear"})
	for _, e := range until(t, p, "input_audio_buffer.cleared") {
		if e.typ() != "error" && e.typ() != "input_audio_buffer.cleared" {
			t.Errorf("before cleared: %v", e)
		}
	}
	// bad events: each answered in the protocol's shape; a flood of them ends the session
	for _, raw := range []string{`{`, `{"type":"nope"}`, `{"type":"input_audio_buffer.append","audio":"!!"}`, `{"type":"input_audio_buffer.append","audio":"AAAA"}`, `{}`} {
		p.in <- []byte(raw)
		e := next(t, p)
		if e.typ() != "error" {
			t.Errorf("%s: got %v", raw, e)
		}
	}
	for i := 0; i < 5; i++ {
		p.in <- []byte(`not json`)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrTooManyBadEvents) {
			t.Errorf("flood ended with %v", err)
		}
		done <- err
	case <-time.After(5 * time.Second):
		t.Error("a flood of malformed events did not end the session")
	}
}

func TestTextItemAndCancel(t *testing.T) {
	p, _ := start(t, Config{Transcriber: fakeASR{""}, Brain: fakeBrain{answer: "Sure. Here we go. And on and on."}, Voice: &fakeVoice{slow: true}})
	send(p, map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "talk"}}}})
	until(t, p, "conversation.item.done")
	send(p, map[string]any{"type": "response.create"})
	until(t, p, "response.output_audio.delta")
	send(p, map[string]any{"type": "response.cancel"})
	evs := until(t, p, "response.done")
	r := evs[len(evs)-1]["response"].(map[string]any)
	if r["status"] != "cancelled" || r["status_details"].(map[string]any)["reason"] != "client_cancelled" {
		t.Errorf("cancel: %v", r)
	}
	// nothing pending: response.create fails cleanly
	send(p, map[string]any{"type": "response.create"})
	evs = until(t, p, "response.done")
	if r := evs[len(evs)-1]["response"].(map[string]any); r["status"] != "failed" {
		t.Errorf("empty response: %v", r)
	}
}

// The server's shutdown (Config.Stop) ends the answer in flight with response.done
// (cancelled, reason server_shutdown) before the caller closes the connection (AfterStop),
// and starts no answer after it.
func TestStopEndsTheAnswerThenCloses(t *testing.T) {
	stop, stopped := make(chan struct{}), make(chan struct{})
	p, _ := start(t, Config{Transcriber: fakeASR{""}, Brain: fakeBrain{answer: "Sure. Here we go. And on and on."}, Voice: &fakeVoice{slow: true},
		Stop: stop, AfterStop: func() { close(stopped) }})
	send(p, map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "talk"}}}})
	until(t, p, "conversation.item.done")
	send(p, map[string]any{"type": "response.create"})
	until(t, p, "response.output_audio.delta")
	close(stop)
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("AfterStop never called")
	}
	// everything sent before AfterStop is in the pipe: the last answer's response.done is there
	var done ev
	for len(p.out) > 0 {
		if e := next(t, p); e.typ() == "response.done" {
			done = e
		}
	}
	if done == nil {
		t.Fatal("no response.done before the connection was to close")
	}
	r := done["response"].(map[string]any)
	if r["status"] != "cancelled" || r["status_details"].(map[string]any)["reason"] != "server_shutdown" {
		t.Errorf("at shutdown: %v", r)
	}
	send(p, map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "more"}}}})
	until(t, p, "conversation.item.done")
	send(p, map[string]any{"type": "response.create"})
	select {
	case b := <-p.out:
		t.Errorf("an answer began after the shutdown: %s", b)
	case <-time.After(300 * time.Millisecond):
	}
}

// After each response.done comes rate_limits.updated with the server's limits, in both
// dialects.
func TestRateLimitsFollowEachResponse(t *testing.T) {
	for _, beta := range []bool{false, true} {
		calls := 0
		p, _ := start(t, Config{Transcriber: fakeASR{""}, Brain: fakeBrain{answer: "Sure."}, Voice: &fakeVoice{}, Beta: beta,
			RateLimits: func() []RateLimit {
				calls++
				return []RateLimit{{Name: "requests", Limit: 66, Remaining: 60 - calls, ResetSeconds: 1.5}}
			}})
		for turn := 1; turn <= 2; turn++ {
			send(p, map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "hi"}}}})
			send(p, map[string]any{"type": "response.create"})
			until(t, p, "response.done")
			e := next(t, p)
			if e.typ() != "rate_limits.updated" {
				t.Fatalf("beta %v: after response.done came %v", beta, e)
			}
			rl := e["rate_limits"].([]any)[0].(map[string]any)
			if rl["name"] != "requests" || rl["limit"] != 66.0 || rl["remaining"] != float64(60-turn) || rl["reset_seconds"] != 1.5 {
				t.Errorf("beta %v, turn %d: %v", beta, turn, rl)
			}
		}
	}
}

func TestFloodOfResponseCreates(t *testing.T) {
	p, _ := start(t, Config{Transcriber: fakeASR{""}, Brain: fakeBrain{answer: "Sure."}, Voice: &fakeVoice{slow: true}})
	send(p, map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "go"}}}})
	until(t, p, "conversation.item.done")
	for i := 0; i < 50; i++ {
		send(p, map[string]any{"type": "response.create"})
	}
	busy := 0
	deadline := time.After(5 * time.Second)
	for busy == 0 {
		select {
		case b := <-p.out:
			if strings.Contains(string(b), "too_many_pending") {
				busy++
			}
		case <-deadline:
			t.Fatal("a flood of response.create was never refused")
		}
	}
	// the session still answers
	send(p, map[string]any{"type": "response.cancel"})
	send(p, map[string]any{"type": "input_audio_buffer.clear"})
	until(t, p, "input_audio_buffer.cleared")
}

func TestIdleSessionEnds(t *testing.T) {
	p := newPipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), p, Config{Transcriber: fakeASR{""}, Brain: fakeBrain{answer: "x"}, Voice: &fakeVoice{}, IdleTimeout: 100 * time.Millisecond})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrIdle) {
			t.Errorf("idle session ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an idle session never ended")
	}
}

func FuzzDecodeClientEvent(f *testing.F) {
	f.Add([]byte(`{"type":"input_audio_buffer.append","audio":"AAAA"}`))
	f.Add([]byte(`{"type":"session.update","session":{"turn_detection":null,"audio":{"input":{"format":{"type":"audio/pcm","rate":24000}}}}}`))
	f.Add([]byte(`{"type":"session.update","session":{"turn_detection":{"type":"server_vad","silence_duration_ms":500}}}`))
	f.Add([]byte(`{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}`))
	f.Add([]byte(`{"type":"response.create","response":{}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"type":"conversation.item.truncate","item_id":"item_1","content_index":0,"audio_end_ms":1500}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeClientEvent(b)
		if err != nil {
			if !errors.Is(err, ErrEvent) {
				t.Fatalf("error %v does not wrap ErrEvent", err)
			}
			return
		}
		if e.Type == "" {
			t.Fatal("decoded an event without a type")
		}
		if e.Type == InputAudioAppend && len(e.PCM)%2 != 0 {
			t.Fatal("odd PCM length accepted")
		}
		if e.Session != nil {
			e.Session.turnDetection()
			checkFormat(e.Session.InputFormat, "x")
		}
	})
}

// An unknown voice fails at session.update, naming the parameter, and changes nothing; a
// known one is taken.
func TestSessionUpdateVetsTheVoice(t *testing.T) {
	p, _ := start(t, Config{Transcriber: fakeASR{"hi"}, Brain: fakeBrain{"Hello.", new(string)}, Voice: &fakeVoice{},
		CheckVoice: func(name string) error {
			if name != "alloy" && name != "verse" {
				return fmt.Errorf("unknown voice %q", name)
			}
			return nil
		}})
	send(p, map[string]any{"type": "session.update", "event_id": "e1", "session": map[string]any{"type": "realtime", "audio": map[string]any{"output": map[string]any{"voice": "nobody"}}}})
	e := next(t, p)
	er, _ := e["error"].(map[string]any)
	if e.typ() != "error" || er["param"] != "session.audio.output.voice" || er["code"] != "invalid_value" || er["event_id"] != "e1" {
		t.Fatalf("unknown voice: %v", e)
	}
	send(p, map[string]any{"type": "session.update", "session": map[string]any{"voice": "verse"}})
	e = next(t, p)
	if e.typ() != "session.updated" || e["session"].(map[string]any)["voice"] != "verse" {
		t.Errorf("known voice: %v", e)
	}
}
