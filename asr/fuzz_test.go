package asr

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
)

// FuzzTranscribeBytes drives the whole path from outside bytes to a Result with the tiny
// model: the bytes are read as a WAV file (any layout, converted to 16 kHz mono), or as raw
// 16-bit PCM when they are not one. Whatever the bytes, the answer is a Result or a clear
// error, never a panic or an error from inside ONNX Runtime.
func FuzzTranscribeBytes(f *testing.F) {
	r := newTiny(f, Config{MaxSegment: 2 * time.Second}) // short pieces keep iterations quick
	var wav bytes.Buffer
	x := loadCase(f, "speech_fast")[:8000]
	audio.WriteWAV(&wav, &audio.Buffer{Format: audio.Format{SampleRate: 8000, Channels: 2}, Data: x}, audio.S16)
	f.Add(wav.Bytes())
	f.Add([]byte("RIFF\x24\x00\x00\x00WAVEfmt "))
	f.Add(make([]byte, 900))
	f.Add([]byte{0xff, 0x7f, 0x00, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}
		var samples []float32
		if src, err := audio.NewWAVReader(bytes.NewReader(b)); err == nil {
			conv, err := audio.Convert(src, audio.Mono16k, audio.QualityLow)
			if err != nil {
				return
			}
			buf, err := audio.ReadAll(context.Background(), conv, 10*SampleRate)
			if err != nil {
				return
			}
			samples = buf.Data
		} else {
			samples = make([]float32, len(b)/2)
			audio.DecodePCM(samples, b, audio.S16)
		}
		res, err := r.Transcribe(context.Background(), samples)
		if err != nil {
			t.Fatalf("%d samples: %v", len(samples), err)
		}
		if len(res.Tokens) != len(res.Timestamps) {
			t.Fatalf("%d tokens, %d timestamps", len(res.Tokens), len(res.Timestamps))
		}
	})
}
