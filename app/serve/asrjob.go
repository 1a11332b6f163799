package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/audio"
)

// streamRecognizer is a recognizer that reads a stream with bounded memory
// (*asr.Recognizer is one).
type streamRecognizer interface {
	TranscribeStream(ctx context.Context, src asr.Source, o asr.Options, onSegment func(asr.Segment) error) (*asr.Result, error)
}

// batchRecognizer recognises several inputs in one model call (*asr.Recognizer is one).
type batchRecognizer interface {
	TranscribeBatch(ctx context.Context, inputs [][]float32, o asr.Options) ([]*asr.Result, error)
}

// asrInput is audio to recognise: samples in memory (realtime and Wyoming utterances) or a
// decoded upload.
type asrInput struct {
	samples []float32
	dec     *decoded
}

func (in asrInput) seconds() float64 {
	if in.dec != nil {
		return in.dec.Seconds()
	}
	return float64(len(in.samples)) / asr.SampleRate
}

// asrJobOverhead is the cost, in seconds of audio, a job brings beyond its audio: a model
// call, features, decoding, the request itself.
const asrJobOverhead = 1.0

// batchItem is one short job's audio and, once its batch ran, its result.
type batchItem struct {
	x    []float32
	res  *asr.Result
	err  error
	done chan struct{}
}

// recognize runs one recognition in the recogniser's queue, its place sized by the audio's
// duration. Short audio (one model window) runs in a batch with other short jobs waiting
// when the recogniser batches; longer audio streams through it with bounded memory.
func (s *Server) recognize(ctx context.Context, in asrInput, o asr.Options) (*asr.Result, *APIError) {
	cost := in.seconds() + asrJobOverhead
	var item *batchItem
	if _, ok := s.eng.ASR.(batchRecognizer); ok && in.seconds() <= asr.MaxSegment.Seconds() {
		x, ok := in.samples, in.samples != nil
		if !ok && in.dec != nil {
			x, ok = in.dec.Samples()
		}
		if ok {
			item = &batchItem{x: x, done: make(chan struct{})}
		}
	}
	var t *Ticket
	var err error
	if item != nil {
		t, err = s.asrLim.AdmitBatch(cost, item, fmt.Sprintf("%s|%v|%v", o.Language, o.ITN, o.SuppressEmoUnknown))
	} else {
		t, err = s.asrLim.Admit(cost)
	}
	if err != nil {
		return nil, s.queueErr(s.asrLim, err)
	}
	defer t.Done()
	if err := t.Wait(ctx); err != nil {
		return nil, s.queueErr(s.asrLim, err)
	}
	if t.Leader() != nil {
		// another job's batch runs this one
		select {
		case <-item.done:
			return item.res, asrError(item.err)
		case <-ctx.Done():
			return nil, gone("client went away")
		}
	}
	if len(t.Group()) > 0 {
		s.runBatch(ctx, item, t.Group(), o)
		t.Done()
		return item.res, asrError(item.err)
	}
	jctx, cancel := context.WithTimeout(ctx, s.o.JobTimeout)
	defer cancel()
	var res *asr.Result
	switch {
	case in.samples != nil:
		res, err = s.eng.ASR.TranscribeWith(jctx, in.samples, o)
	case item != nil:
		res, err = s.eng.ASR.TranscribeWith(jctx, item.x, o)
	default:
		res, err = s.transcribeDecoded(jctx, in.dec, o)
	}
	if err != nil && ctx.Err() != nil {
		return nil, gone("client went away")
	}
	return res, asrError(err)
}

// runBatch recognises the leader's audio and its group's in one call. It runs to the end
// even when the leader's client leaves: the others wait for it.
func (s *Server) runBatch(ctx context.Context, lead *batchItem, group []*Ticket, o asr.Options) {
	items := []*batchItem{lead}
	for _, g := range group {
		items = append(items, g.Batch.(*batchItem))
	}
	xs := make([][]float32, len(items))
	for i, it := range items {
		xs[i] = it.x
	}
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.JobTimeout)
	defer cancel()
	res, err := s.eng.ASR.(batchRecognizer).TranscribeBatch(jctx, xs, o)
	s.metrics.Counter("parley_asr_batched_jobs_total").Add(int64(len(items)))
	for i, it := range items {
		if err == nil && i < len(res) {
			it.res = res[i]
		} else {
			it.err = err
			if it.err == nil {
				it.err = errors.New("the batch returned too few results")
			}
		}
		if it != lead {
			close(it.done)
		}
	}
}

// transcribeDecoded recognises a decoded upload: streamed through the recogniser when it
// streams (one 30 s window in memory), else read whole.
func (s *Server) transcribeDecoded(ctx context.Context, d *decoded, o asr.Options) (*asr.Result, error) {
	src, err := d.Source()
	if err != nil {
		return nil, err
	}
	if st, ok := s.eng.ASR.(streamRecognizer); ok {
		return st.TranscribeStream(ctx, src, o, nil)
	}
	b, err := audio.ReadAll(ctx, src, 0)
	if err != nil {
		return nil, err
	}
	return s.eng.ASR.TranscribeWith(ctx, b.Data, o)
}

// asrError maps a recognition failure to an API error.
func asrError(err error) *APIError {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, asr.ErrInput):
		return invalidCode("file", "invalid_audio", "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return timedOut("transcription took longer than the server's job timeout")
	case errors.Is(err, context.Canceled):
		return gone("client went away")
	}
	return internal("transcription failed: %v", err)
}

// serverASR is the server's recogniser as app.Transcriber, for its realtime sessions and
// its Wyoming service: each utterance is a job under the ASR limiter like an upload.
type serverASR struct{ s *Server }

// Transcribe implements app.Transcriber. A language tag is taken by its language
// ("en-US" → en) and must be one the model knows.
func (a serverASR) Transcribe(ctx context.Context, pcm []float32, o app.TranscribeOptions) (app.Transcript, error) {
	s := a.s
	opts := s.eng.ASR.Options()
	if o.Language != "" {
		l := strings.ToLower(o.Language)
		if i := strings.IndexAny(l, "-_"); i > 0 {
			l = l[:i] // en-US → en
		}
		if !slices.Contains(s.eng.ASRLanguages, l) && l != "auto" {
			return app.Transcript{}, fmt.Errorf("language %q is not supported (have %s)", o.Language, strings.Join(s.eng.ASRLanguages, ", "))
		}
		opts.Language = l
	}
	res, e := s.recognize(ctx, asrInput{samples: pcm}, opts)
	if e != nil {
		return app.Transcript{}, wyomingErr(e) // the message alone; ErrBusy for a 429
	}
	return factory.Heard(res, o)
}
