package serve

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/serve/wyoming"
	"github.com/parley-voice/parley/tts"
)

var errPumpStream = errors.New("the engine broke")

// pumpTTS streams the chunks it is given; failAt >= 0 makes the stream fail with
// errPumpStream before chunk failAt (len(chunks): after the last); hold keeps the stream
// open after its chunks until it is closed. finished is closed when the producer returns.
type pumpTTS struct {
	fakeTTS
	chunks   []tts.Chunk
	failAt   int
	hold     bool
	startErr error
	finished chan struct{}
}

func (f *pumpTTS) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	if f.startErr != nil {
		return nil, f.startErr
	}
	f.finished = make(chan struct{})
	done := f.finished
	return tts.NewStream(ctx, nil, func(ctx context.Context, emit func(tts.Chunk) error) error {
		defer close(done)
		for i, c := range f.chunks {
			if i == f.failAt {
				return errPumpStream
			}
			if err := emit(c); err != nil {
				return err
			}
		}
		if f.failAt == len(f.chunks) {
			return errPumpStream
		}
		if f.hold {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}), nil
}

// pumpSpec is a pumpTTS's script, for tables.
type pumpSpec struct {
	chunks   []tts.Chunk
	failAt   int
	hold     bool
	startErr error
}

func pumpServer(t *testing.T, eng tts.Engine, jobTimeout time.Duration) *Server {
	t.Helper()
	s, err := New(Options{Config: config.Default().Serve, Engines: Engines{TTS: eng}, Version: "test", JobTimeout: jobTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pumpChunks(rates ...int) []tts.Chunk {
	var cs []tts.Chunk
	for i, r := range rates {
		cs = append(cs, tts.Chunk{Samples: make([]float32, 10*(i+1)), SampleRate: r, Sentence: i})
	}
	return cs
}

// got is what emit saw: the length and rate of each chunk.
type got struct{ n, rate int }

func TestPumpSpeech(t *testing.T) {
	emitFailed := errors.New("the client's socket is gone")
	emitErr := func(err error) *APIError { return &APIError{Status: 499, Message: "emit: " + err.Error()} }
	tests := []struct {
		name      string
		eng       pumpSpec
		emitFail  int // emit fails on this chunk (1-based); 0: never
		empty     bool
		want      []got
		status    int // 0: no error
		code, msg string
	}{
		{name: "chunks in order", eng: pumpSpec{chunks: pumpChunks(22050, 22050, 24000), failAt: -1},
			want: []got{{10, 22050}, {20, 22050}, {30, 24000}}},
		{name: "empty stream", eng: pumpSpec{failAt: -1}},
		{name: "stream fails mid-way", eng: pumpSpec{chunks: pumpChunks(16000, 16000), failAt: 1},
			want: []got{{10, 16000}}, status: 500, code: "internal_error", msg: "synthesis failed: the engine broke"},
		{name: "stream fails after its last chunk", eng: pumpSpec{chunks: pumpChunks(16000), failAt: 1},
			want: []got{{10, 16000}}, status: 500, code: "internal_error", msg: "synthesis failed: the engine broke"},
		{name: "engine refuses the voice", eng: pumpSpec{startErr: fmt.Errorf("%w: \"zz\"", tts.ErrUnknownVoice)},
			status: 400, code: "invalid_voice", msg: `tts: unknown voice: "zz"`},
		{name: "nothing to say", eng: pumpSpec{startErr: tts.ErrEmpty}, status: 400, msg: "tts: nothing to say"},
		{name: "nothing to say is silence", eng: pumpSpec{startErr: tts.ErrEmpty}, empty: true},
		{name: "emit fails", eng: pumpSpec{chunks: pumpChunks(16000, 16000, 16000), failAt: -1, hold: true}, emitFail: 2,
			want: []got{{10, 16000}, {20, 16000}}, status: 499, msg: "emit: the client's socket is gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng := &pumpTTS{chunks: tt.eng.chunks, failAt: tt.eng.failAt, hold: tt.eng.hold, startErr: tt.eng.startErr}
			s := pumpServer(t, eng, 0)
			var seen []got
			e := s.pumpSpeech(context.Background(), speechJob{req: tts.Request{Text: "Hello."}, cost: 6, emptyIsSilence: tt.empty, emitErr: emitErr,
				emit: func(pcm []float32, rate int) error {
					seen = append(seen, got{len(pcm), rate})
					if len(seen) == tt.emitFail {
						return emitFailed
					}
					return nil
				}})
			if fmt.Sprint(seen) != fmt.Sprint(tt.want) {
				t.Errorf("emitted %v, want %v", seen, tt.want)
			}
			switch {
			case tt.status == 0 && e != nil:
				t.Errorf("error %v", e)
			case tt.status != 0 && (e == nil || e.Status != tt.status || e.Message != tt.msg || (tt.code != "" && (e.Code == nil || *e.Code != tt.code))):
				t.Errorf("error %+v, want %d %q %q", e, tt.status, tt.code, tt.msg)
			}
			if eng.finished != nil {
				select {
				case <-eng.finished: // the stream was closed: its producer is gone
				default:
					t.Error("the stream's producer still runs after pumpSpeech returned")
				}
			}
			if s.ttsLim.Running() != 0 {
				t.Errorf("%d TTS jobs still held", s.ttsLim.Running())
			}
		})
	}
}

// A pump cancelled mid-stream (the client left, or the job's time ran out) stops at once,
// closes the stream, and answers as ttsError does.
func TestPumpSpeechCancelled(t *testing.T) {
	t.Run("client gone", func(t *testing.T) {
		eng := &pumpTTS{chunks: pumpChunks(24000, 24000), failAt: -1, hold: true}
		s := pumpServer(t, eng, 0)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		n := 0
		e := s.pumpSpeech(ctx, speechJob{req: tts.Request{Text: "Hello."}, cost: 6, emitErr: func(err error) *APIError { t.Errorf("emit failed: %v", err); return nil },
			emit: func([]float32, int) error {
				if n++; n == 2 {
					cancel()
				}
				return nil
			}})
		if e == nil || e.Status != statusClientClosed || e.Message != "client went away" || n != 2 {
			t.Errorf("%+v after %d chunks", e, n)
		}
		<-eng.finished
	})
	t.Run("job timeout", func(t *testing.T) {
		eng := &pumpTTS{chunks: pumpChunks(24000), failAt: -1, hold: true}
		s := pumpServer(t, eng, 50*time.Millisecond)
		n := 0
		e := s.pumpSpeech(context.Background(), speechJob{req: tts.Request{Text: "Hello."}, cost: 6, emitErr: func(err error) *APIError { t.Errorf("emit failed: %v", err); return nil },
			emit: func([]float32, int) error { n++; return nil }})
		if e == nil || e.Status != 504 || e.Message != "synthesis took longer than the server's job timeout" || n != 1 {
			t.Errorf("%+v after %d chunks", e, n)
		}
		<-eng.finished
	})
}

// The two services keep their own answers around the shared pump: the realtime voice
// speaks nothing for text the engine finds empty and reports an emit failure by its text;
// Wyoming answers it with an error (the invalid-input APIError's type as its code) and
// reports an emit failure with code "error".
func TestPumpSpeechServices(t *testing.T) {
	emitFailed := errors.New("send: broken pipe")
	fail := func([]float32, int) error { return emitFailed }

	eng := &pumpTTS{chunks: pumpChunks(24000), failAt: -1}
	s := pumpServer(t, eng, 0)
	if err := (rtVoice{s}).Synthesize(context.Background(), "Hello.", "", fail); err == nil || err.Error() != emitFailed.Error() {
		t.Errorf("realtime, emit fails: %v", err)
	}
	err := (wyTTS{s}).Synthesize(context.Background(), "Hello.", wyoming.Voice{}, fail)
	if err == nil || err.Error() != emitFailed.Error() || wyomingCode(err) != "error" {
		t.Errorf("wyoming, emit fails: %v (%s)", err, wyomingCode(err))
	}

	eng.startErr = fmt.Errorf("%w: no speakable phonemes", tts.ErrEmpty)
	called := false
	emit := func([]float32, int) error { called = true; return nil }
	if err := (rtVoice{s}).Synthesize(context.Background(), "Hello.", "", emit); err != nil || called {
		t.Errorf("realtime, nothing to say: %v, emitted %v", err, called)
	}
	err = (wyTTS{s}).Synthesize(context.Background(), "Hello.", wyoming.Voice{}, emit)
	if err == nil || err.Error() != "tts: nothing to say: no speakable phonemes" || wyomingCode(err) != "invalid_request_error" || called {
		t.Errorf("wyoming, nothing to say: %v (%s), emitted %v", err, wyomingCode(err), called)
	}
}
