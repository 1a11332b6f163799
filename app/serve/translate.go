package serve

import (
	"context"
	"net/http"
	"strings"

	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/llm"
)

// translations is POST /v1/audio/translations: speech in any language the recogniser
// knows, answered as English text in the transcription formats. SenseVoice only transcribes,
// so the transcript is translated by the configured LLM; without one the request is a clear
// 400 (translation_not_supported), before its upload is read.
func (s *Server) translations(w http.ResponseWriter, r *http.Request) *APIError {
	return s.audioRequest(w, r, true)
}

const translatePrompt = "Translate the user's text into English. Reply with the translation only: no notes, no quotes. If it is already English, repeat it unchanged."

// translate replaces the result's text (and each segment's) with an English translation.
// Segments are translated one by one so subtitles keep their timings; English needs nothing.
// (OpenAI's translations take no timestamp_granularities: words are not offered.)
func (s *Server) translate(ctx context.Context, res *asr.Result) *APIError {
	english := res.Lang == "en"
	for _, seg := range res.Segments {
		english = english && (seg.Lang == "" || seg.Lang == "en")
	}
	if english || strings.TrimSpace(res.Text) == "" {
		return nil
	}
	one := func(text string) (string, *APIError) {
		if strings.TrimSpace(text) == "" {
			return text, nil
		}
		release, err := s.llmLim.Acquire(ctx, 1)
		if err != nil {
			return "", s.queueErr(s.llmLim, err)
		}
		defer release()
		jctx, cancel := context.WithTimeout(ctx, s.o.JobTimeout)
		defer cancel()
		d, err := llm.Collect(jctx, s.eng.LLM, &llm.Request{Model: s.eng.LLMModel, Temperature: ptr(0.0),
			Messages: []llm.Message{{Role: llm.RoleSystem, Content: translatePrompt}, {Role: llm.RoleUser, Content: text}}})
		if err != nil {
			return "", llmError(err, s.eng.LLMModel)
		}
		return strings.TrimSpace(d.Content), nil
	}
	if len(res.Segments) == 0 {
		res.Segments = []asr.Segment{{Start: 0, End: res.Duration, Text: res.Text}}
	}
	var all []string
	res.Tokens, res.Timestamps, res.TokenIDs = nil, nil, nil
	for i := range res.Segments {
		seg := &res.Segments[i]
		t, e := one(seg.Text)
		if e != nil {
			return e
		}
		seg.Text, seg.Lang, seg.TokenIDs = t, "en", nil
		// The translation's words are spread over the segment's time: subtitles keep the
		// segment's timing; word timings of the speech do not carry over to other words.
		words := strings.Fields(t)
		seg.Tokens, seg.Timestamps = make([]string, len(words)), make([]float64, len(words))
		for j, w := range words {
			seg.Tokens[j] = " " + w
			seg.Timestamps[j] = seg.Start + (seg.End-seg.Start)*float64(j)/float64(len(words))
		}
		res.Tokens = append(res.Tokens, seg.Tokens...)
		res.Timestamps = append(res.Timestamps, seg.Timestamps...)
		if t != "" {
			all = append(all, t)
		}
	}
	res.Text = strings.Join(all, " ")
	res.Lang = "en"
	return nil
}

func ptr[T any](v T) *T { return &v }
