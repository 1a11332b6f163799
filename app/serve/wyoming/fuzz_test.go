package wyoming

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
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

// FuzzServerConnection plays arbitrary bytes as the client's side of a connection to a
// server that does both ASR and TTS: whatever the events (out of order, wrong formats,
// overlong, cut short), the server neither panics nor hangs, and once the connection ends it
// has given back all the shared audio memory it reserved.
func FuzzServerConnection(f *testing.F) {
	ev := func(es ...*Event) []byte {
		var b []byte
		for _, e := range es {
			b, _ = AppendEvent(b, e)
		}
		return b
	}
	chunk := func(f AudioFormat, payload []byte) *Event {
		e := NewEvent(TypeAudioChunk, f)
		e.Payload = payload
		return e
	}
	mono := AudioFormat{Rate: 16000, Width: 2, Channels: 1}
	stereo8k := AudioFormat{Rate: 8000, Width: 1, Channels: 2}
	f.Add(ev(NewEvent(TypeDescribe, nil), NewEvent(TypePing, map[string]string{"text": "x"})))
	f.Add(ev(NewEvent(TypeTranscribe, map[string]string{"language": "en"}), NewEvent(TypeAudioStart, mono),
		chunk(mono, s16(1600, 16000)), chunk(mono, s16(1600, 16000)), NewEvent(TypeAudioStop, nil)))
	f.Add(ev(NewEvent(TypeAudioStart, stereo8k), chunk(stereo8k, make([]byte, 1600)), chunk(mono, s16(10, 16000)), NewEvent(TypeAudioStop, nil),
		chunk(stereo8k, make([]byte, 3)), NewEvent(TypeAudioStop, nil)))
	f.Add(ev(NewEvent(TypeSynthesizeStart, map[string]any{"voice": map[string]string{"name": "v"}}),
		NewEvent(TypeSynthesizeChunk, map[string]string{"text": "Hello there. How "}), NewEvent(TypeSynthesizeChunk, map[string]string{"text": "are you?"}),
		NewEvent(TypeSynthesizeStop, nil), NewEvent(TypeSynthesize, map[string]string{"text": "Hello there. How are you?"}),
		NewEvent(TypeSynthesize, map[string]string{"text": "this will fail"})))
	f.Add(ev(NewEvent(TypeSynthesizeChunk, map[string]string{"text": "no start"}), NewEvent(TypeSynthesizeStop, nil)))
	f.Fuzz(func(t *testing.T, in []byte) {
		b := &budget{max: 256 << 10}
		s := &Server{ASR: &fakeASR{}, TTS: &fakeTTS{}, MaxAudioSeconds: 3, MaxText: 200, Budget: b,
			Limits: Limits{MaxLine: 4096, MaxData: 4096, MaxPayload: 64 << 10}}
		s.defaults()
		client, server := net.Pipe()
		go io.Copy(io.Discard, client)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.serveConn(&conn{s: s, c: server, ctx: context.Background()})
		}()
		io.Copy(client, bytes.NewReader(in)) // fails once the server hangs up
		client.Close()
		<-done
		if b.used != 0 {
			t.Fatalf("%d bytes of the audio budget still reserved after the connection ended", b.used)
		}
	})
}
