package tune

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices/clone"
)

// The evaluate step for voices: sentences of the person's held-out clips are synthesised with
// each candidate voice (a random seed speaker, a zero-shot clone, a fine-tuned voice…), and
// each is scored by how alike it sounds to the person (speaker encoder: cosine to the mean
// embedding of the held-out clips) and how intelligible it is (the recogniser's CER).

// VoiceCandidate is a voice to score: a name and the request fields that make it (Voice, Seed,
// Embedding, Sample…).
type VoiceCandidate struct {
	Name    string
	Request tts.Request
	// Keep, when set, receives each sentence's speech as it was scored (16 kHz mono): the
	// desktop wizard keeps it for A/B listening.
	Keep func(sentence int, pcm []float32) error
}

// VoiceScore is one candidate's result.
type VoiceScore struct {
	Name         string  `json:"name"`
	Similarity   float64 `json:"similarity"` // mean cosine similarity to the person's voice
	CER          float64 `json:"cer"`        // the recogniser's character error rate on the speech
	Errors       int     `json:"errors"`
	Chars        int     `json:"chars"`
	Sentences    int     `json:"sentences"`
	AudioSeconds float64 `json:"audio_s"`
	SynthSeconds float64 `json:"synth_s"` // wall time synthesising
	// Items is each sentence: what the recogniser heard and how alike it sounded.
	Items []SentenceScore `json:"items,omitempty"`
}

// SentenceScore is one sentence a candidate spoke.
type SentenceScore struct {
	Text       string  `json:"text"`
	Heard      string  `json:"heard"`
	Errors     int     `json:"errors"`
	Chars      int     `json:"chars"`
	Similarity float64 `json:"similarity"`
}

// ReferenceEmbedding is the mean unit embedding of clips of the dataset (the person's voice).
func ReferenceEmbedding(ctx context.Context, d *clone.Dataset, ids []string, emb Embedder) ([]float32, error) {
	var m meanEmbedding
	for _, id := range ids {
		c, err := d.Clip(id)
		if err != nil {
			continue
		}
		pcm, err := d.ReadClip(c.Path)
		if err != nil {
			return nil, fmt.Errorf("clip %s: %w", id, err)
		}
		e, err := emb.Embed(ctx, pcm)
		if err != nil {
			return nil, fmt.Errorf("clip %s: %w", id, err)
		}
		m.add(e)
	}
	if m.n == 0 {
		return nil, fmt.Errorf("%w: no held-out clip to compare voices with", ErrTooFewClips)
	}
	return m.mean(), nil
}

// EvaluateVoices synthesises every text with every candidate and scores it.
func EvaluateVoices(ctx context.Context, eng tts.Engine, cands []VoiceCandidate, texts []string, ref []float32, emb Embedder, ear clone.Transcriber) ([]VoiceScore, error) {
	var out []VoiceScore
	for _, c := range cands {
		s := VoiceScore{Name: c.Name}
		var sims float64
		for i, text := range texts {
			req := c.Request
			req.Text = text
			t0 := time.Now()
			pcm, err := synth16k(ctx, eng, req)
			if err != nil {
				return out, fmt.Errorf("%s: %w", c.Name, err)
			}
			s.SynthSeconds += time.Since(t0).Seconds()
			s.AudioSeconds += float64(len(pcm)) / 16000
			if c.Keep != nil {
				if err := c.Keep(i, pcm); err != nil {
					return out, fmt.Errorf("%s: %w", c.Name, err)
				}
			}
			item := SentenceScore{Text: text}
			if e, err := emb.Embed(ctx, pcm); err == nil {
				item.Similarity = cosine(ref, e)
				sims += item.Similarity
			}
			h, err := ear.Transcribe(ctx, pcm)
			if err != nil {
				return out, fmt.Errorf("%s: %w", c.Name, err)
			}
			item.Heard = h.Text
			item.Errors, item.Chars = CharErrors(text, h.Text)
			s.Errors += item.Errors
			s.Chars += item.Chars
			s.Sentences++
			s.Items = append(s.Items, item)
		}
		if s.Sentences > 0 {
			s.Similarity = sims / float64(s.Sentences)
		}
		if s.Chars > 0 {
			s.CER = float64(s.Errors) / float64(s.Chars)
		}
		out = append(out, s)
	}
	return out, nil
}

// ClipNear is the usable clip among ids whose length is nearest secs (at least 2 s): the
// recording a "3-second clone" is made from.
func ClipNear(d *clone.Dataset, ids []string, secs float64) (*clone.Clip, error) {
	cs, err := ClipsNear(d, ids, secs, 1)
	if err != nil {
		return nil, err
	}
	return cs[0], nil
}

// ClipsNear is up to k usable clips of at least 2 s, the nearest secs long first.
func ClipsNear(d *clone.Dataset, ids []string, secs float64, k int) ([]*clone.Clip, error) {
	var cs []*clone.Clip
	for _, id := range ids {
		c, err := d.Clip(id)
		if err != nil || !c.Usable() || c.Seconds < 2 {
			continue
		}
		cs = append(cs, c)
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("%w: no clip of at least 2 s to clone from", ErrTooFewClips)
	}
	slices.SortStableFunc(cs, func(a, b *clone.Clip) int {
		return cmp.Compare(math.Abs(a.Seconds-secs), math.Abs(b.Seconds-secs))
	})
	return cs[:min(k, len(cs))], nil
}
