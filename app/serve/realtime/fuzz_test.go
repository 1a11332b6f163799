package realtime

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// budget counts what is reserved from it.
type budget struct {
	mu        sync.Mutex
	used, max int64
}

func (b *budget) Reserve(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

func (b *budget) Release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

// FuzzSession plays arbitrary client events (one per line) through a whole session: server
// and manual turns, items, truncation, cancellation, in any order and shape. The session
// never panics or hangs, and once it ends it has given back all the shared audio memory
// it reserved (transcriptions in flight included).
func FuzzSession(f *testing.F) {
	script := func(vs ...any) []byte {
		var lines [][]byte
		for _, v := range vs {
			b, _ := json.Marshal(v)
			lines = append(lines, b)
		}
		return bytes.Join(lines, []byte("\n"))
	}
	audio := func(pcm []byte) map[string]any {
		return map[string]any{"type": "input_audio_buffer.append", "audio": base64.StdEncoding.EncodeToString(pcm)}
	}
	speech := tone(300*time.Millisecond, 800*time.Millisecond, 900*time.Millisecond)
	f.Add(script(audio(speech[:len(speech)/2]), audio(speech[len(speech)/2:])))
	f.Add(script(map[string]any{"type": "session.update", "session": map[string]any{"turn_detection": nil, "voice": "v"}},
		audio(speech), map[string]any{"type": "input_audio_buffer.commit"}, map[string]any{"type": "response.create"},
		map[string]any{"type": "conversation.item.truncate", "item_id": "item_x", "content_index": 0, "audio_end_ms": 100},
		audio(speech[:4800]), map[string]any{"type": "input_audio_buffer.clear"}))
	f.Add(script(map[string]any{"type": "conversation.item.create", "item": map[string]any{"type": "message", "role": "user",
		"content": []any{map[string]any{"type": "input_text", "text": "hi"}}}},
		map[string]any{"type": "response.create"}, map[string]any{"type": "response.cancel"}, map[string]any{"type": "response.create"}))
	f.Add([]byte("{}\n[]\nnull\n{\"type\":\"input_audio_buffer.append\",\"audio\":\"!!\"}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		b := &budget{max: 2 << 20}
		p := newPipe()
		drained := make(chan struct{})
		go func() {
			for {
				select {
				case <-p.out:
				case <-drained:
					return
				}
			}
		}()
		defer close(drained)
		done := make(chan error, 1)
		cfg := Config{Transcriber: fakeASR{text: "hello there"}, Brain: fakeBrain{answer: "Hi. How can I help?"}, Voice: &fakeVoice{},
			Budget: b, MaxBufferSeconds: 5, MaxBadEvents: 8}
		go func() { done <- Run(context.Background(), p, cfg) }()
		ended := false
		for _, msg := range bytes.Split(in, []byte("\n")) {
			select {
			case p.in <- msg:
			case <-done: // too many bad events end a session early
				ended = true
			}
			if ended {
				break
			}
		}
		close(p.in)
		if !ended {
			<-done
		}
		if b.used != 0 {
			t.Fatalf("%d bytes of the audio budget still reserved after the session ended", b.used)
		}
	})
}
