package serve

import (
	"context"
	"errors"

	"github.com/parley-voice/parley/tts"
)

// speechJob is one synthesis for a streaming service (the realtime session's voice, the
// Wyoming TTS service). Each frames the audio its own way in emit: the realtime session
// resamples it to 24 kHz and sends base64 deltas, Wyoming sends audio-chunk events.
type speechJob struct {
	req  tts.Request
	cost int // characters: the job's weight on the TTS limiter
	// emit takes every chunk of the stream, in order. An error from it ends the stream, and
	// emitErr(err) is the job's answer.
	emit    func(pcm []float32, rate int) error
	emitErr func(error) *APIError
	// emptyIsSilence makes an engine that finds nothing to say (tts.ErrEmpty when it starts)
	// give no audio and no error, rather than ttsError's invalid-input answer.
	emptyIsSilence bool
}

// pumpSpeech runs j as a job on the TTS limiter: it starts the engine on j.req and hands its
// stream to j.emit chunk by chunk until the stream ends (nil), fails, or ctx or the job's
// timeout ends it. The stream is closed before it returns. The engine's and the stream's
// failures (cancellation included) come back as ttsError's answers, a full queue or a
// shutdown as the limiter's.
func (s *Server) pumpSpeech(ctx context.Context, j speechJob) *APIError {
	return s.job(ctx, s.ttsLim, float64(j.cost), func(ctx context.Context) *APIError {
		st, err := s.eng.TTS.Synthesize(ctx, j.req)
		if err != nil {
			if j.emptyIsSilence && errors.Is(err, tts.ErrEmpty) {
				return nil
			}
			return ttsError(err)
		}
		defer st.Close()
		var emitErr error // the client's side failed, not the engine's
		err = tts.Each(ctx, st, func(c tts.Chunk) error {
			emitErr = j.emit(c.Samples, c.SampleRate)
			return emitErr
		})
		switch {
		case emitErr != nil:
			return j.emitErr(emitErr)
		case err != nil:
			return ttsError(err)
		}
		return nil
	})
}
