package tune

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/parley-voice/parley/app/factory"
	"github.com/parley-voice/parley/asr"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/chattts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices/clone"
)

// VoiceComparison says which voices CompareVoices scores against a person, and on what. The
// voice fine-tune's evaluate step (TrainingService.Evaluate, the wizard's), `parley finetune
// evaluate` and the quick clone's comparison (CloneService.CompareVoices) all run it; they
// differ only in what they set here.
type VoiceComparison struct {
	Dataset *clone.Dataset
	// Model is the ChatTTS export the voices speak with (unless one has a model of its own).
	Model string
	// ASRModel is the recogniser that scores clarity ("": asr.model, else the best installed).
	ASRModel string
	// HeldOut are the clips of the person's voice the voices are compared with (the speaker
	// encoder's mean over the usable ones); the voices speak the first Sentences of their
	// transcripts.
	HeldOut   []string
	Sentences int
	// Voices are spoken by Model and scored first, in order.
	Voices []VoiceCandidate
	// Clone, when set, adds a zero-shot clone next.
	Clone *ZeroShot
	// After are scored last, in order, each spoken by its own model.
	After []ModelVoice
	// Desktop words a speaker encoder or recogniser that cannot be opened for the desktop
	// app (what the comparison needs; ErrNoRecogniser and the Models page); without it the
	// factory's errors stand as they are (they name the commands that fix them).
	Desktop bool
	// Progress hears what is being done (nil: nothing).
	Progress func(string)
}

// ZeroShot is the zero-shot clone a comparison measures the other voices against: made from
// one clip as `parley voices clone` makes one (the clip's DVAE codes, the closest seed
// speaker), and not saved to the library.
type ZeroShot struct {
	From    []string // the clips to pick from (the training clips)
	Seconds float64  // the clip's length: the usable one nearest this
	Seeds   int      // seed speakers tried for the closest one
	// Name names the clone's score.
	Name func(cl CloneResult, clip *clone.Clip) string
	// Optional: a clone that cannot be made leaves the comparison without it
	// (VoiceComparisonResult.NoClone says why) instead of failing it.
	Optional bool
}

// ModelVoice is a voice scored after the others, spoken by a model of its own (a fine-tune
// that trained the GPT makes one).
type ModelVoice struct {
	VoiceCandidate
	Model string // the ChatTTS export that speaks it ("": the comparison's Model)
	Label string // names the voice in an error opening Model ("": the error alone)
}

// VoiceComparisonResult is what CompareVoices found.
type VoiceComparisonResult struct {
	Scores []VoiceScore // Voices, the clone, After
	Texts  []string     // the sentences spoken
	Clips  []string     // the held-out clip of each sentence
	// HeldOut is how many held-out clips the person's voice was taken from.
	HeldOut int
	// SpeakerEncoder and Recogniser are the ids of the models that scored.
	SpeakerEncoder, Recogniser string
	// NoClone is why an optional zero-shot clone is missing (nil when it was scored).
	NoClone error
}

// CompareVoices speaks the held-out sentences with every voice of c and scores each: how
// alike it sounds to the person (the speaker encoder) and how clear (the recogniser's CER).
// The engines are opened through fac and closed before it returns.
func CompareVoices(ctx context.Context, fac *factory.Factory, c VoiceComparison) (*VoiceComparisonResult, error) {
	progress := c.Progress
	if progress == nil {
		progress = func(string) {}
	}
	res := &VoiceComparisonResult{}
	var heldIDs []string
	for _, id := range c.HeldOut {
		cl, err := c.Dataset.Clip(id)
		if err != nil || !cl.Usable() {
			continue
		}
		heldIDs = append(heldIDs, id)
		if len(res.Texts) < c.Sentences {
			res.Texts = append(res.Texts, cl.Text)
			res.Clips = append(res.Clips, id)
		}
	}
	if len(heldIDs) == 0 {
		return nil, fmt.Errorf("%w: none of the held-out clips is left to compare with", ErrTooFewClips)
	}
	res.HeldOut = len(heldIDs)

	progress("loading the voice model, the speaker encoder and the recogniser")
	eng, err := fac.ChatTTS(c.Model)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	se, sm, err := fac.SpeakerEncoder(ctx, "")
	if err != nil {
		if c.Desktop {
			err = fmt.Errorf("comparing voices needs a speaker encoder: %w", err)
		}
		return nil, err
	}
	defer se.Close()
	rec, rm, err := fac.Recognizer(ctx, c.ASRModel, asr.Config{})
	if err != nil {
		if c.Desktop {
			err = notInstalled(err)
		}
		return nil, err
	}
	defer rec.Close()
	res.SpeakerEncoder, res.Recogniser = sm.ID, rm.ID
	ear := factory.CloneTranscriber(rec)
	progress("your voice in the held-out clips")
	ref, err := ReferenceEmbedding(ctx, c.Dataset, heldIDs, se)
	if err != nil {
		return nil, err
	}

	cands := c.Voices
	if c.Clone != nil {
		zs, err := zeroShot(ctx, fac, c, eng, se)
		switch {
		case err == nil:
			cands = append(cands[:len(cands):len(cands)], *zs)
		case c.Clone.Optional:
			res.NoClone = err
		default:
			return nil, err
		}
	}
	n := len(cands) + len(c.After)
	voices := fmt.Sprintf("%d voices", n)
	if n == 2 {
		voices = "both voices"
	}
	progress(fmt.Sprintf("speaking %d held-out sentences with %s", len(res.Texts), voices))
	if res.Scores, err = EvaluateVoices(ctx, eng, cands, res.Texts, ref, se, ear); err != nil {
		return nil, err
	}
	for _, v := range c.After {
		sc, err := scoreOwn(ctx, fac, eng, v, res.Texts, ref, se, ear)
		if err != nil {
			return nil, err
		}
		res.Scores = append(res.Scores, sc...)
	}
	return res, nil
}

// scoreOwn scores a voice spoken by its own model (or the comparison's, eng).
func scoreOwn(ctx context.Context, fac *factory.Factory, eng *chattts.Engine, v ModelVoice, texts []string, ref []float32, se Embedder, ear clone.Transcriber) ([]VoiceScore, error) {
	if v.Model != "" {
		own, err := fac.ChatTTS(v.Model)
		if err != nil {
			if v.Label != "" {
				err = fmt.Errorf("%s: %w", v.Label, err)
			}
			return nil, err
		}
		defer own.Close()
		eng = own
	}
	return EvaluateVoices(ctx, eng, []VoiceCandidate{v.VoiceCandidate}, texts, ref, se, ear)
}

// zeroShot makes c's zero-shot clone with the comparison's engine and speaker encoder.
func zeroShot(ctx context.Context, fac *factory.Factory, c VoiceComparison, eng *chattts.Engine, se Embedder) (*VoiceCandidate, error) {
	z := c.Clone
	clip, err := ClipNear(c.Dataset, z.From, z.Seconds)
	if err != nil {
		return nil, err
	}
	pcm, err := c.Dataset.ReadClip(clip.Path)
	if err != nil {
		return nil, err
	}
	det, err := fac.VAD("", vad.Config{MinSilence: CloneVADMinSilence})
	if err != nil {
		return nil, fmt.Errorf("voice activity detection: %w", err)
	}
	defer det.Close()
	enc, err := fac.SampleEncoder(c.Model)
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	cl, err := Clone(ctx, pcm, audio.Mono16k.SampleRate, CloneOptions{Name: "zero-shot", Text: clip.Text, Prompter: enc,
		NumVQ: eng.Model().GPT.NumVQ, Langs: eng.Capabilities().Languages, Speech: det, Seeds: z.Seeds, Embedder: se, Voice: eng})
	if err != nil {
		if z.Optional { // the caller says what is missing
			return nil, fmt.Errorf("clip %s: %w", clip.ID, err)
		}
		return nil, fmt.Errorf("zero-shot clone from clip %s: %w", clip.ID, err)
	}
	req, err := engines.ApplyVoice(tts.Request{}, cl.Voice, "chattts", engines.Explicit{})
	if err != nil {
		return nil, err
	}
	return &VoiceCandidate{Name: z.Name(cl, clip), Request: req}, nil
}

// RandomSeed is the one "random voice" the desktop wizard compares a person's voices with: a
// seed speaker fixed by the dataset's name, so the comparison is the same each time.
func RandomSeed(dataset string) int64 {
	h := fnv.New32a()
	h.Write([]byte(dataset))
	return int64(1 + h.Sum32()%10000)
}

// RandomSeeds are the n random seed voices `parley finetune evaluate` scores (one draw is
// luck; it reports each beside the others): fixed by the dataset's name like RandomSeed, but
// from 1001 on, apart from the seed speakers 1..1000 its zero-shot clone may try (--seeds).
// The wizard's single RandomSeed is kept as it was, so stored evaluations stay comparable.
func RandomSeeds(dataset string, n int) []int64 {
	h := fnv.New32a()
	h.Write([]byte(dataset))
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(1001 + (h.Sum32()+uint32(i)*7919)%9000)
	}
	return out
}

// notInstalled names what the label step needs when no recogniser is installed (the
// desktop's wording: the Models page).
func notInstalled(err error) error {
	if errors.Is(err, assets.ErrNotInstalled) {
		return fmt.Errorf("%w: download %s in Models", ErrNoRecogniser, factory.RealASR)
	}
	return err
}
