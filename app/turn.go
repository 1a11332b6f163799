package app

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/parley-voice/parley/audio"
)

// turn is one exchange in flight.
type turn struct {
	id     int64
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when every goroutine of the turn has ended and history is written
	prev   *turn

	audio      []float32 // the utterance; nil for a typed turn
	audioFrom  int64     // the capture index audio starts at
	transcript Transcript
	say        string // an announcement: spoken as is, no brain
	start      time.Time

	interrupted atomic.Bool
	stopped     atomic.Bool  // the brain reported ErrStopSpeaking
	stoppedAt   atomic.Int64 // Played() when barge-in stopped the speaker; -1 when not stopped

	mu        sync.Mutex // guards what the pipeline goroutines fill in below
	lat       Latency
	full      strings.Builder
	sentences []spoken
	said      []float32 // with Options.RecordAudio: everything written to the speaker, from saidAt
	saidAt    int64     // Played position of said[0]
}

// spoken is one sentence placed on the speaker's timeline (Played coordinates).
type spoken struct {
	text       string
	start, end int64
	complete   bool // every chunk was written
}

func (t *turn) mark(p *time.Time) {
	t.mu.Lock()
	if p.IsZero() {
		*p = time.Now()
	}
	t.mu.Unlock()
}

// StageError is how the loop reports a failure: the stage of the exchange that failed
// ("transcribe", "think", "speak", "microphone", "history"), the part of Parley it is about
// (PartOf), and the cause. Its message is "stage: cause".
type StageError struct {
	Stage string
	Part  Part
	Err   error
}

func (e *StageError) Error() string { return e.Stage + ": " + e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// explanation is what Parley says when a stage fails.
func explanation(err error) string {
	var es *StageError
	if !errors.As(err, &es) {
		return "Sorry, something went wrong."
	}
	switch es.Stage {
	case "transcribe":
		return "Sorry, I could not understand that; speech recognition is not working."
	case "think":
		return "Sorry, I cannot think right now; my language model is not answering."
	}
	return "Sorry, something went wrong."
}

func (a *Assistant) toLoop(m any) {
	select {
	case a.in <- m:
	case <-a.ctx.Done():
	}
}

func (a *Assistant) runTurn(t *turn) {
	defer close(t.done)
	defer t.cancel()
	ex, err := a.exchange(t)
	// order: the previous exchange is fully recorded before this one
	if t.prev != nil {
		<-t.prev.done
		t.prev = nil
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		ex.Err = err
		a.log.Warn("turn failed", "turn", t.id, "err", err)
		a.publish(Event{Kind: EvError, Turn: t.id, Err: err})
		var es *StageError
		if errors.As(err, &es) && es.Stage != "speak" && !errors.Is(err, ErrSpoken) && t.ctx.Err() == nil {
			a.sayPlain(t, explanation(err))
		}
	}
	if ex.Transcript.Text != "" || ex.Answer != "" || ex.Err != nil {
		a.record(t, ex)
	}
	a.toLoop(msgTurnDone{t, ex})
}

// exchange runs one turn: transcribe (voice turns), think, speak.
func (a *Assistant) exchange(t *turn) (*Exchange, error) {
	ex := &Exchange{Turn: t.id, Start: t.start}
	defer func() {
		t.mu.Lock()
		ex.Latency = t.lat
		ex.FullAnswer = t.full.String()
		t.mu.Unlock()
		ex.Answer, ex.Interrupted = a.played(t)
		ex.Stopped = t.stopped.Load()
		ex.End = time.Now()
	}()
	if t.say != "" {
		t.lat.SpeechEnd = time.Now()
		t.lat.Endpoint, t.lat.Transcript, t.start = t.lat.SpeechEnd, t.lat.SpeechEnd, t.lat.SpeechEnd
		ex.Start = t.start
		if t.prev != nil {
			select {
			case <-t.prev.done:
			case <-t.ctx.Done():
				return ex, t.ctx.Err()
			}
			t.prev = nil
		}
		return ex, a.think(t)
	}
	if t.audio != nil {
		if a.p.Transcriber == nil {
			return ex, &StageError{"transcribe", PartASR, errors.New("no speech recognition model")}
		}
		a.ear.unecho(t.audio, t.audioFrom) // a barge-in question, without the answer it interrupted
		tr, err := a.p.Transcriber.Transcribe(t.ctx, t.audio, TranscribeOptions{})
		if err != nil {
			return ex, &StageError{"transcribe", PartASR, err}
		}
		t.mark(&t.lat.Transcript)
		tr.Text = strings.TrimSpace(tr.Text)
		t.transcript = tr
		ex.Transcript = tr
		a.publish(Event{Kind: EvTranscript, Turn: t.id, Transcript: &tr})
		if tr.Text == "" {
			return ex, nil
		}
		a.toLoop(msgTurnState{t, Thinking})
	} else {
		t.lat.SpeechEnd = time.Now()
		t.lat.Endpoint, t.lat.Transcript = t.lat.SpeechEnd, t.lat.SpeechEnd
		t.start = t.lat.SpeechEnd
		ex.Start = t.start
		ex.Transcript = t.transcript
		a.publish(Event{Kind: EvTranscript, Turn: t.id, Transcript: &ex.Transcript})
	}
	if t.prev != nil { // the brain sees the previous answer as it was actually played
		select {
		case <-t.prev.done:
		case <-t.ctx.Done():
			return ex, t.ctx.Err()
		}
		t.prev = nil
	}
	if a.p.Brain == nil {
		return ex, &StageError{"think", PartBrain, errors.New("no language model or skills configured")}
	}
	return ex, a.think(t)
}

// think streams the brain's answer through the chunker, the voice and the speaker as a
// pipeline: sentence k+1 is synthesised while sentence k plays.
func (a *Assistant) think(t *turn) error {
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	sentences := make(chan string, 64)
	chunks := make(chan pcmChunk, 16)
	var wg sync.WaitGroup
	var brainErr, voiceErr error
	hist := a.History()
	if len(hist) > 2*a.o.HistoryTurns {
		hist = hist[len(hist)-2*a.o.HistoryTurns:]
	}

	wg.Add(2)
	go func() { // brain → sentences
		defer wg.Done()
		defer close(sentences)
		brain := a.p.Brain
		if t.say != "" {
			brain = BrainFunc(func(_ context.Context, _ Transcript, _ []Message, fn func(string) error) error { return fn(t.say) })
		}
		err := StreamAnswer(ctx, brain, t.transcript, hist, a.p.Chunker(), AnswerSink{
			Delta: func(d string) error {
				t.mark(&t.lat.FirstToken)
				t.mu.Lock()
				t.full.WriteString(d)
				t.mu.Unlock()
				a.publish(Event{Kind: EvDelta, Turn: t.id, Text: d})
				return nil
			},
			Sentence: func(s string) error {
				t.mark(&t.lat.FirstSentence)
				select {
				case sentences <- s:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		})
		if errors.Is(err, ErrStopSpeaking) && ctx.Err() == nil {
			a.stopTurn(t)
			return
		}
		if err != nil {
			brainErr = &StageError{"think", PartBrain, err}
			cancel()
		}
	}()
	go func() { // sentences → PCM
		defer wg.Done()
		defer close(chunks)
		idx := 0
		for s := range sentences {
			if a.p.Voice == nil || a.p.Speaker == nil { // a text-only assistant: the answer is shown, not spoken
				a.publish(Event{Kind: EvSentenceStarted, Turn: t.id, Sentence: idx, Text: s})
				a.publish(Event{Kind: EvSentenceFinished, Turn: t.id, Sentence: idx, Text: s})
				idx++
				continue
			}
			if err := a.synth(ctx, idx, s, chunks); err != nil {
				voiceErr = &StageError{"speak", PartVoice, err}
				cancel()
				for range sentences { // let the brain goroutine end
				}
				return
			}
			idx++
		}
	}()
	playErr := a.speak(ctx, t, chunks)
	cancel()
	for range chunks {
	}
	wg.Wait()
	switch {
	case t.ctx.Err() != nil:
		return t.ctx.Err()
	case brainErr != nil && !errors.Is(brainErr, context.Canceled):
		return brainErr
	case voiceErr != nil && !errors.Is(voiceErr, context.Canceled):
		return voiceErr
	case playErr != nil && !errors.Is(playErr, context.Canceled):
		part := PartAudio // the speaker
		if errors.Is(playErr, ErrNoVoice) {
			part = PartVoice
		}
		return &StageError{"speak", part, playErr}
	}
	return nil
}

// pcmChunk is a piece of a sentence at the speaker's rate.
type pcmChunk struct {
	sentence int
	text     string // on the first chunk of a sentence
	pcm      []float32
	first    bool
	last     bool
}

func (a *Assistant) synth(ctx context.Context, idx int, text string, out chan<- pcmChunk) error {
	if a.p.Voice == nil || a.p.Speaker == nil {
		return ErrNoVoice
	}
	from := a.p.Voice.SampleRate()
	conv := RateFollower{Rate: a.p.Speaker.SampleRate(), Quality: audio.QualityMedium}
	if _, err := conv.Process(nil, from); err != nil { // the resampler, before the voice starts
		return err
	}
	first := true
	send := func(pcm []float32, last bool) error {
		c := pcmChunk{sentence: idx, pcm: pcm, first: first, last: last}
		if first {
			c.text = text
		}
		first = false
		select {
		case out <- c:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := a.p.Voice.Synthesize(ctx, text, func(pcm []float32) error {
		var err error
		if from == conv.Rate {
			pcm = append([]float32(nil), pcm...) // the voice may reuse its buffer
		} else if pcm, err = conv.Process(pcm, from); err != nil {
			return err
		}
		if len(pcm) == 0 {
			return nil
		}
		return send(pcm, false)
	})
	if err != nil {
		return err
	}
	return send(conv.Flush(), true)
}

// speak writes chunks to the speaker, placing each sentence on the played timeline, and then
// waits until the speaker has played everything (or the turn is cancelled).
func (a *Assistant) speak(ctx context.Context, t *turn, chunks <-chan pcmChunk) error {
	if t.prev != nil {
		<-t.prev.done
	}
	if a.play == nil {
		for range chunks {
		}
		return ctx.Err()
	}
	started := false
	var mon *monitor
	defer func() {
		if mon != nil {
			mon.stop()
		}
	}()
	for c := range chunks {
		if !started {
			started = true
			a.play.sync() // a barge-in may have discarded queued audio
			mon = a.startMonitor(t)
			a.toLoop(msgTurnState{t, Speaking})
		}
		pos := a.play.pos()
		t.mu.Lock()
		if c.first {
			t.sentences = append(t.sentences, spoken{text: c.text, start: pos, end: pos})
		}
		s := &t.sentences[len(t.sentences)-1]
		s.end = pos + int64(len(c.pcm))
		s.complete = c.last
		t.mu.Unlock()
		if len(c.pcm) == 0 {
			continue
		}
		if a.o.RecordAudio {
			t.mu.Lock()
			if len(t.said) == 0 {
				t.saidAt = pos
			}
			t.said = append(t.said, c.pcm...)
			t.mu.Unlock()
		}
		if err := a.play.write(ctx, c.pcm); err != nil {
			return err
		}
		t.mark(&t.lat.FirstAudio)
	}
	if !started || ctx.Err() != nil {
		return ctx.Err()
	}
	return a.play.drain(ctx)
}

// stopTurn carries out the user's request to stop speaking, from inside the turn that heard
// it: while this turn runs no other turn plays (each waits for its predecessor), so stopping
// the speaker here stops only this answer. Whatever was already said of it is kept as
// interrupted; a stop before any answer ends the turn silently.
func (a *Assistant) stopTurn(t *turn) {
	t.stopped.Store(true)
	t.mu.Lock()
	said := t.full.Len() > 0
	t.mu.Unlock()
	a.publish(Event{Kind: EvStopped, Turn: t.id, Text: t.transcript.Text})
	a.log.Info("stopped speaking at the user's request", "turn", t.id)
	if said {
		a.interrupt(t)
	} else {
		t.cancel()
	}
}

// sayPlain speaks a short fixed sentence (an error explanation) outside the pipeline.
func (a *Assistant) sayPlain(t *turn, text string) {
	if a.p.Voice == nil || a.p.Speaker == nil {
		return
	}
	ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
	defer cancel()
	chunks := make(chan pcmChunk, 16)
	go func() {
		defer close(chunks)
		a.synth(ctx, 0, text, chunks)
	}()
	for c := range chunks {
		if err := a.play.write(ctx, c.pcm); err != nil {
			cancel()
		}
	}
	a.play.drain(ctx)
}

// played returns the answer as far as the speaker played it, and whether it was cut short.
func (a *Assistant) played(t *turn) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	full := strings.TrimSpace(t.full.String())
	if !t.interrupted.Load() {
		return full, false
	}
	stop := t.stoppedAt.Load()
	var parts []string
	for _, s := range t.sentences {
		switch {
		case stop < 0 || stop >= s.end && s.complete:
			parts = append(parts, strings.TrimSpace(s.text))
		case stop > s.start:
			frac := float64(stop-s.start) / float64(s.end-s.start)
			if !s.complete { // synthesis was still going: the sentence was longer than what was queued
				frac *= 0.5
			}
			if p := cutAt(s.text, frac); p != "" {
				parts = append(parts, p)
			}
		}
	}
	return strings.Join(parts, " "), true
}

// cutAt returns the words of text spoken by fraction frac of its audio, judged by characters
// (a word counts when most of it was spoken).
func cutAt(text string, frac float64) string {
	text = strings.TrimSpace(text)
	if frac >= 1 {
		return text
	}
	total := utf8.RuneCountInString(text)
	limit := frac * float64(total)
	cjk := false
	for _, r := range text {
		if unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r) {
			cjk = true
			break
		}
	}
	if cjk { // no spaces: cut between characters
		n := int(limit + 0.5)
		rs := []rune(text)
		return strings.TrimSpace(string(rs[:min(n, len(rs))]))
	}
	var out []string
	pos := 0
	for _, w := range strings.Fields(text) {
		n := utf8.RuneCountInString(w)
		mid := float64(pos) + float64(n)/2
		if mid > limit {
			break
		}
		out = append(out, w)
		pos += n + 1
	}
	return strings.Join(out, " ")
}

// record adds the exchange to the brain's context and to history.
func (a *Assistant) record(t *turn, ex *Exchange) {
	if ib, ok := a.p.Brain.(Interruptible); ok && ex.Interrupted && ex.FullAnswer != "" && t.say == "" {
		ib.Interrupted(ex.Answer)
	}
	a.histMu.Lock()
	if ex.Transcript.Text != "" {
		a.hist = append(a.hist, Message{Role: string(RoleUser), Text: ex.Transcript.Text})
	}
	if ex.Answer != "" {
		a.hist = append(a.hist, Message{Role: string(RoleAssistant), Text: ex.Answer})
	}
	if n := 2 * a.o.HistoryTurns * 4; len(a.hist) > n {
		a.hist = append([]Message(nil), a.hist[len(a.hist)-n/2:]...)
	}
	a.histMu.Unlock()
	if a.p.History == nil {
		return
	}
	var recs []TurnRecord
	if ex.Transcript.Text != "" {
		r := TurnRecord{Turn: t.id, Role: RoleUser, Text: ex.Transcript.Text, Transcript: ex.Transcript,
			Start: ex.Start, End: ex.Latency.SpeechEnd}
		if a.o.RecordAudio && len(t.audio) > 0 {
			r.Audio, r.AudioRate = t.audio, SampleRate
		}
		recs = append(recs, r)
	}
	if ex.Answer != "" || ex.Err != nil {
		r := TurnRecord{Turn: t.id, Role: RoleAssistant, Text: ex.Answer, Interrupted: ex.Interrupted,
			Start: ex.Latency.FirstAudio, End: ex.End, Latency: ex.Latency}
		if ex.Err != nil {
			r.Err = ex.Err.Error()
		}
		if a.o.RecordAudio && ex.Answer != "" && a.p.Speaker != nil {
			r.Audio, r.AudioRate = a.saidAudio(t), a.p.Speaker.SampleRate()
		}
		recs = append(recs, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.p.History.AddTurns(ctx, recs...); errors.Is(err, ErrAudioNotSaved) {
		a.log.Warn("turn audio not saved", "turn", t.id, "err", err)
		a.publish(Event{Kind: EvError, Turn: t.id, Err: err})
	} else if err != nil {
		a.log.Error("history", "turn", t.id, "err", err)
		a.publish(Event{Kind: EvError, Turn: t.id, Err: &StageError{"history", PartHistory, err}})
	}
}

// saidAudio is the answer's audio as far as the speaker played it (nil when none was).
func (a *Assistant) saidAudio(t *turn) []float32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.said) == 0 {
		return nil
	}
	n := int64(len(t.said))
	if stop := t.stoppedAt.Load(); t.interrupted.Load() && stop >= 0 {
		n = min(n, max(0, stop-t.saidAt))
	}
	if n == 0 {
		return nil
	}
	return t.said[:n:n]
}
