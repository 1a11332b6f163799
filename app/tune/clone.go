package tune

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/tts/engines"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/clone"
)

// Zero-shot cloning: a ChatTTS clone voice from 3–10 s of speech. The clip's transcript and its
// DVAE codes become the voice's prompt, which the engine puts before every sentence (ChatTTS's
// sample-audio speaker); the voice keeps the codes and the text, not the audio.

// MinVoiceMinutes is the usable speech a voice fine-tune wants (the recogniser's is helped by
// less): the CLI refuses less without --force, the wizard warns.
const MinVoiceMinutes = 3.0

// CloneSeeds is how many seed speakers a zero-shot clone tries for the closest one
// (CandidateSeeds: the model's suggested seeds first). Before the demo voice suggested seeds,
// its one voiced low voice among 1..20 was seed 13, which 8 missed (a clone of a man then spoke
// at 175 Hz, or whispered). Each costs one synthesis of the clip's words.
const CloneSeeds = 20

// Clone limits.
const (
	CloneMinSpeech = 1.5  // seconds of speech a prompt needs
	CloneMaxSpeech = 20.0 // seconds of speech a prompt may hold
	clonePad       = 0.2  // seconds kept around the speech
	// ClonePhraseGap is the pause that ends a phrase of the transcript: the model reads a
	// comma or a full stop as a pause, so a prompt whose text marks the clip's pauses where
	// they are matches its codes better than one run-on sentence (the recogniser, with ITN
	// off, gives no punctuation). A Speech segmenter that splits at shorter pauses than its
	// default (Silero's 400 ms) finds more of them: CloneVAD.
	ClonePhraseGap = 0.2
)

// CloneVADMinSilence is the silence at which a clone's speech detector should split, so that
// comma-length pauses become phrases of the transcript.
const CloneVADMinSilence = 250 * time.Millisecond

var (
	// ErrNoSpeech: the clip holds (almost) no speech: silence, music or noise.
	ErrNoSpeech = errors.New("tune: no speech in the clip")
	// ErrCloneLength: too much speech for a prompt.
	ErrCloneLength = errors.New("tune: too much speech for a clone")
	// ErrLanguage: the clip or the transcript is in a language the voice model does not speak,
	// or they do not match.
	ErrLanguage = errors.New("tune: language mismatch")
	// ErrNoTranscript: no transcript given and none heard.
	ErrNoTranscript = errors.New("tune: no transcript")
)

// Prompter encodes a recording into speaker-sample codes (chattts.SampleEncoder).
type Prompter interface {
	Encode(ctx context.Context, pcm []float32, rate int) ([]int32, error)
}

// Embedder is a speaker encoder (voices/speaker.Encoder): 16 kHz mono in, embedding out.
type Embedder interface {
	Embed(ctx context.Context, pcm []float32) ([]float32, error)
}

// CloneOptions are what Clone works with. Prompter, Speech and NumVQ are required.
type CloneOptions struct {
	Name     string          // voice name
	Text     string          // the clip's transcript; "" = Ear's
	Prompter Prompter        // the voice model's DVAE encoder
	NumVQ    int             // the voice model's code streams
	Model    string          // the voice model's name, kept in the voice
	Langs    []string        // languages the voice model speaks ("en-us", "zh", …; nil = any)
	Speech   clone.Segmenter // finds the speech (Silero VAD)
	Ear      clone.Transcriber
	// Seeds > 0 with Embedder and Voice: the seed speaker closest to the clip (of Seeds
	// CandidateSeeds) becomes the voice's speaker vector.
	Seeds    int
	Embedder Embedder
	Voice    tts.Engine
	// With Voice the clone is said once and its pitch compared with the recording's: the
	// difference becomes the voice's pitch shift (voices.Sample.Pitch), unless KeepPitch.
	KeepPitch bool
	// Progress, when set, hears what is being done ("finding speech", "transcribing", …).
	Progress func(step string)
}

// CloneResult is the voice and what was found on the way.
type CloneResult struct {
	Voice          *voices.Voice
	Heard          string  // the recogniser's transcript ("" without one)
	Lang           string  // the language heard
	Seconds        float64 // of speech kept
	Seed           int64   // closest seed speaker (0: not searched)
	SeedSimilarity float64
	// ClipF0 and VoiceF0 are the median pitch (Hz) of the recording and of the clone before
	// its shift (0: not measured, or no voiced speech); Pitch is the shift in semitones.
	ClipF0, VoiceF0, Pitch float64
	Warnings               []string
}

// Clone makes a clone voice (not saved) from a recording of one person speaking (mono, rate Hz).
func Clone(ctx context.Context, pcm []float32, rate int, o CloneOptions) (CloneResult, error) {
	var res CloneResult
	step := func(s string) {
		if o.Progress != nil {
			o.Progress(s)
		}
	}
	if o.Prompter == nil || o.Speech == nil || o.NumVQ < 1 {
		return res, fmt.Errorf("%w: clone needs a voice model's encoder and a speech detector", ErrBadSpec)
	}
	if err := voices.ValidName(o.Name); err != nil {
		return res, err
	}
	p16 := pcm
	if rate != 16000 {
		var err error
		if p16, err = audio.Resample(pcm, rate, 16000, 1); err != nil {
			return res, err
		}
	}
	step("finding speech")
	segs, err := o.Speech.Segments(ctx, audio.NewBufferSource(&audio.Buffer{Format: audio.Mono16k, Data: p16}))
	if err != nil {
		return res, err
	}
	var speech float64
	for _, s := range segs {
		speech += s.EndSec - s.StartSec
	}
	if len(segs) == 0 || speech < CloneMinSpeech {
		return res, fmt.Errorf("%w: %.1f s of speech found (silence, music or noise?); a clone needs 3–10 s of one person speaking", ErrNoSpeech, speech)
	}
	pad := int64(clonePad * 16000)
	start, end := max(0, segs[0].Start-pad), min(int64(len(p16)), segs[len(segs)-1].End+pad)
	if float64(end-start)/16000 > CloneMaxSpeech {
		return res, fmt.Errorf("%w: %.0f s of speech; a clone takes 3–10 s (cut the clip; a fine-tune learns from long recordings)", ErrCloneLength, float64(end-start)/16000)
	}
	p16 = p16[start:end]
	pcm = pcm[int(start)*rate/16000 : min(len(pcm), int(end)*rate/16000)]
	res.Seconds = float64(len(p16)) / 16000

	if o.Ear != nil {
		step("transcribing")
		h, err := transcribePhrases(ctx, o.Ear, p16, segs, start)
		if err != nil {
			return res, err
		}
		res.Heard, res.Lang = h.Text, h.Lang
		if h.Event != "" && h.Event != "Speech" {
			res.Warnings = append(res.Warnings, fmt.Sprintf("the recogniser hears %s in the clip; a clean recording clones better", h.Event))
		}
	}
	if res.Lang != "" && !Speaks(o.Langs, res.Lang) {
		return res, fmt.Errorf("%w: the clip is speech in %s; this voice model speaks %s", ErrLanguage, res.Lang, strings.Join(o.Langs, ", "))
	}
	text := strings.TrimSpace(o.Text)
	switch {
	case text == "" && res.Heard == "":
		return res, fmt.Errorf("%w: the recogniser heard no words; give the transcript", ErrNoTranscript)
	case text == "":
		text = res.Heard
	default:
		if s := TextScript(text); s != "" && !ScriptFits(s, o.Langs) {
			return res, fmt.Errorf("%w: the transcript is written in %s script; this voice model speaks %s", ErrLanguage, s, strings.Join(o.Langs, ", "))
		}
		if hs := TextScript(res.Heard); hs != "" && TextScript(text) != hs {
			return res, fmt.Errorf("%w: the transcript is not in the language of the clip (the recogniser heard %q)", ErrLanguage, res.Heard)
		}
	}
	if len(text) > voices.MaxSampleText {
		return res, fmt.Errorf("%w: a transcript of %d bytes", ErrCloneLength, len(text))
	}

	step("encoding")
	codes, err := o.Prompter.Encode(ctx, pcm, rate)
	if err != nil {
		return res, err
	}
	v := voices.New(o.Name, "chattts", voices.KindClone)
	v.Sample = &voices.Sample{Text: text, NumVQ: o.NumVQ, Codes: codes, Model: o.Model, Seconds: res.Seconds}
	if m, ok := o.Prompter.(interface{ ModelID() string }); ok { // the export's identity
		v.Sample.ModelID = m.ModelID()
	}
	if o.Seeds > 0 && o.Embedder != nil && o.Voice != nil {
		step("choosing the closest seed speaker")
		res.Seed, res.SeedSimilarity, err = ClosestSeed(ctx, o.Voice, o.Embedder, []Utterance{{PCM: p16, Text: text}}, o.Seeds, nil)
		if err != nil {
			return res, err
		}
		v.Seed = &res.Seed
	}
	if o.Voice != nil && !o.KeepPitch {
		step("matching the recording's pitch")
		if err := matchPitch(ctx, o.Voice, v, p16, &res); err != nil {
			return res, err
		}
	}
	if err := v.Validate(); err != nil {
		return res, err
	}
	res.Voice = v
	return res, nil
}

// Pitch matching. The model's voice, even prompted with the recording and with the seed
// speaker nearest in pitch, speaks within the pitch range of the speakers it learnt (the demo
// voice's suggested seeds: 113-269 Hz): a clip below or above it is matched by shifting the clone
// by the difference, beyond clonePitchTolerance and at most ClonePitchMax semitones. On issue
// 29's held-out speakers (94-121 Hz) it took the clones' pitch within 15 % of the clip's for 5
// of 6 (1 unshifted) and their similarity above every seed's for 4 of 6 (1), at the same CER.
const (
	clonePitchTolerance = 0.5 // semitones (3 %): no shift within this
	ClonePitchMax       = 4.0 // semitones either way (×1.26)
	cloneMinVoiced      = 0.3 // a take voiced less than this (whispered, or breathy) gives too few frames to trust its pitch
)

// matchPitch says the clip's own words with the clone voice v, compares the median pitch with
// the recording's (pcm, 16 kHz) and sets v's pitch shift to the difference.
func matchPitch(ctx context.Context, eng tts.Engine, v *voices.Voice, pcm []float32, res *CloneResult) error {
	if v.Seed == nil {
		// without a seed speaker the voice speaks as whatever default voice the engine is
		// configured with when it is used: a shift measured against today's would not hold
		res.Warnings = append(res.Warnings, "no seed speaker was chosen (no speaker encoder, or --seeds 0): the pitch is not matched")
		return nil
	}
	res.ClipF0 = audio.MedianF0(pcm, 16000)
	if res.ClipF0 == 0 {
		res.Warnings = append(res.Warnings, "no voiced speech in the clip to match the pitch of: the voice keeps the model's")
		return nil
	}
	req, err := engines.ApplyVoice(tts.Request{Text: v.Sample.Text}, v, "chattts", engines.Explicit{})
	if err != nil {
		return err
	}
	said, err := synth16k(ctx, eng, req) // v has no shift yet
	if err != nil {
		return fmt.Errorf("tune: saying the clone once to match its pitch: %w", err)
	}
	var take pitchStats
	take.add(said)
	if take.voiced() < cloneMinVoiced {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the clone's take is barely voiced (%.0f %% of its sound): its pitch is not matched", 100*take.voiced()))
		return nil
	}
	res.VoiceF0 = audio.Median(take.f0s)
	st := 12 * math.Log2(res.ClipF0/res.VoiceF0)
	switch {
	case math.Abs(st) < clonePitchTolerance:
		st = 0
	case math.Abs(st) > ClonePitchMax:
		res.Warnings = append(res.Warnings, fmt.Sprintf("the clip's pitch (%.0f Hz) is %.1f semitones from the voice's (%.0f Hz): shifted by %.0f only (is it one person speaking?)",
			res.ClipF0, st, res.VoiceF0, ClonePitchMax))
		st = math.Copysign(ClonePitchMax, st)
	}
	res.Pitch = math.Round(st*10) / 10
	v.Sample.Pitch = res.Pitch
	return nil
}

// Utterance is a recording of the person (16 kHz mono) and what it says.
type Utterance struct {
	PCM  []float32
	Text string
}

// What a seed speaker's pitch costs it in ClosestSeed, in cosine similarity. The speaker
// encoder alone hears pitch and voicing only coarsely: it gave a man's clip a seed speaker an
// octave above him (the clone then speaks at the seed's pitch), and often a whispering seed
// (the demo voice has some: their takes are under 1 % voiced, speech's about 60 %), whose
// clones whisper too.
const (
	seedPitchWeight   = 0.5 // per octave between the seed's median pitch and the person's
	seedVoicingWeight = 2.0 // per unit of voiced share the seed has less than the person
)

// CandidateSeeds are the n seeds ClosestSeed tries: the engine's suggested seeds first (a
// tts.SeedSuggester: voiced ones from its lowest voice to its highest), spread so that any
// first few span the range (the lowest, the highest, then each time the one farthest from
// those taken), then 1, 2, … for the rest.
func CandidateSeeds(eng tts.Engine, n int) []int64 {
	var seeds []int64
	suggested := tts.SuggestedSeeds(eng)
	for _, i := range spread(len(suggested), n) {
		seeds = append(seeds, suggested[i])
	}
	for seed := int64(1); len(seeds) < n; seed++ {
		if !slices.Contains(suggested, seed) {
			seeds = append(seeds, seed)
		}
	}
	return seeds
}

// spread orders 0..n-1 so that every prefix covers the range: 0, n-1, then each time the index
// farthest from those taken (the lower on a tie); only the first k are made.
func spread(n, k int) []int {
	k = min(n, k)
	if k <= 0 {
		return nil
	}
	order := []int{0}
	dist := make([]int, n) // to the nearest index taken
	for i := range dist {
		dist[i] = i
	}
	if k > 1 && n > 1 {
		order = append(order, n-1)
		for i := range dist {
			dist[i] = min(dist[i], n-1-i)
		}
	}
	for len(order) < k {
		best := 0
		for i := range dist {
			if dist[i] > dist[best] {
				best = i
			}
		}
		order = append(order, best)
		for i := range dist {
			dist[i] = min(dist[i], max(i-best, best-i))
		}
	}
	return order
}

// ClosestSeed speaks each utterance's text with n seed speakers (CandidateSeeds) and returns the seed
// whose mean speaker embedding is closest (cosine) to the person's mean over the utterances,
// less what its pitch and voicing cost it (seedPitchWeight, seedVoicingWeight), and that
// seed's cosine. Several utterances make the choice steadier than one: one clip's embedding
// moves with what it says and how it was said. progress (nil: none) hears each seed done, so
// a caller can say how far the search is and how long it has left: it is most of a fine-tune's
// preparation.
func ClosestSeed(ctx context.Context, eng tts.Engine, emb Embedder, person []Utterance, n int, progress func(done, total int)) (int64, float64, error) {
	var want meanEmbedding
	var wantPitch pitchStats
	for _, u := range person {
		e, err := emb.Embed(ctx, u.PCM)
		if err != nil {
			return 0, 0, err
		}
		want.add(e)
		wantPitch.add(u.PCM)
	}
	if want.n == 0 {
		return 0, 0, errors.New("tune: no recording of the person to compare seed speakers with")
	}
	best, bestSim, bestScore := int64(0), -2.0, math.Inf(-1)
	for i, seed := range CandidateSeeds(eng, n) {
		var got meanEmbedding
		var pitch pitchStats
		for _, u := range person {
			pcm, err := synth16k(ctx, eng, tts.Request{Text: u.Text, Seed: seed, HasSeed: true})
			if err != nil {
				return 0, 0, err
			}
			if e, err := emb.Embed(ctx, pcm); err == nil { // else too short to embed
				got.add(e)
			}
			pitch.add(pcm)
		}
		if progress != nil {
			progress(i+1, n)
		}
		if got.n == 0 {
			continue
		}
		sim := cosine(want.mean(), got.mean())
		if score := sim - wantPitch.cost(pitch); score > bestScore {
			best, bestSim, bestScore = seed, sim, score
		}
	}
	if best == 0 {
		return 0, 0, errors.New("tune: no seed speaker could be compared (the voice model gave no usable audio)")
	}
	return best, bestSim, nil
}

// pitchStats pools the voiced frames of several takes (audio.VoicedF0).
type pitchStats struct {
	f0s      []float64
	sounding int
}

func (p *pitchStats) add(pcm []float32) {
	f0s, n := audio.VoicedF0(pcm, 16000)
	p.f0s, p.sounding = append(p.f0s, f0s...), p.sounding+n
}

func (p pitchStats) voiced() float64 { return float64(len(p.f0s)) / float64(max(1, p.sounding)) }

// cost is what a seed whose takes are s costs against the person p: seedPitchWeight an octave
// between the medians, seedVoicingWeight per unit of voiced share it lacks. A person without
// voiced speech to go by costs nothing.
func (p pitchStats) cost(s pitchStats) float64 {
	if len(p.f0s) == 0 {
		return 0
	}
	c := seedVoicingWeight * max(0, p.voiced()-s.voiced())
	if len(s.f0s) > 0 {
		c += seedPitchWeight * math.Abs(math.Log2(audio.Median(s.f0s)/audio.Median(p.f0s)))
	}
	return c
}

// meanEmbedding averages speaker embeddings scaled to unit length (a loud clip's embedding
// does not outweigh a quiet one's).
type meanEmbedding struct {
	sum []float64
	n   int
}

func (m *meanEmbedding) add(e []float32) {
	if m.sum == nil {
		m.sum = make([]float64, len(e))
	}
	norm := 0.0
	for _, v := range e {
		norm += float64(v) * float64(v)
	}
	norm = math.Sqrt(norm)
	if norm == 0 || len(e) != len(m.sum) {
		return
	}
	for i, v := range e {
		m.sum[i] += float64(v) / norm
	}
	m.n++
}

func (m *meanEmbedding) mean() []float32 {
	out := make([]float32, len(m.sum))
	for i, v := range m.sum {
		out[i] = float32(v / float64(max(m.n, 1)))
	}
	return out
}

// synth16k synthesizes a request to 16 kHz mono.
func synth16k(ctx context.Context, eng tts.Engine, req tts.Request) ([]float32, error) {
	st, err := eng.Synthesize(ctx, req)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	buf, err := tts.ReadAll(ctx, st)
	if err != nil {
		return nil, err
	}
	mono := audio.DownMix(nil, buf.Data, buf.Format.Channels)
	if buf.Format.SampleRate == 16000 {
		return mono, nil
	}
	return audio.Resample(mono, buf.Format.SampleRate, 16000, 1)
}

func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / (math.Sqrt(aa) * math.Sqrt(bb))
}

// Speaks says whether a voice model's languages ("en-us", "zh", "en") cover a recogniser's
// language tag ("en", "zh", "yue", …); no languages means any.
func Speaks(langs []string, lang string) bool {
	for _, l := range langs {
		if l == lang || strings.HasPrefix(l, lang+"-") || (lang == "yue" && l == "zh") {
			return true
		}
	}
	return len(langs) == 0
}

// TextScript is the main script of a text: "Latin", "Han", "Kana", "Hangul" or "".
func TextScript(s string) string {
	counts := map[string]int{}
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r):
			counts["Kana"]++
		case unicode.Is(unicode.Han, r):
			counts["Han"]++
		case unicode.Is(unicode.Hangul, r):
			counts["Hangul"]++
		case unicode.Is(unicode.Latin, r):
			counts["Latin"]++
		}
	}
	if counts["Kana"] > 0 {
		return "Kana"
	}
	best, n := "", 0
	for _, k := range []string{"Han", "Hangul", "Latin"} {
		if counts[k] > n {
			best, n = k, counts[k]
		}
	}
	return best
}

// ScriptFits says whether text in script s can be said by a model speaking langs.
func ScriptFits(s string, langs []string) bool {
	for _, l := range langs {
		switch {
		case strings.HasPrefix(l, "zh") || l == "yue":
			if s == "Han" || s == "Latin" {
				return true
			}
		case strings.HasPrefix(l, "ja"):
			if s == "Kana" || s == "Han" {
				return true
			}
		case strings.HasPrefix(l, "ko"):
			if s == "Hangul" {
				return true
			}
		default:
			if s == "Latin" {
				return true
			}
		}
	}
	return len(langs) == 0
}

// transcribePhrases hears the kept clip (p16, which starts at sample start of the segments'
// timeline) phrase by phrase: segments closer than ClonePhraseGap are one phrase; each phrase is
// transcribed alone and the phrases are joined with commas, the last closed with a full stop
// (in the script's own punctuation), unless the recogniser punctuated them itself.
func transcribePhrases(ctx context.Context, ear clone.Transcriber, p16 []float32, segs []vad.Segment, start int64) (clone.Heard, error) {
	type span struct{ from, to int64 }
	var phrases []span
	gap := int64(ClonePhraseGap * 16000)
	for _, sg := range segs {
		if n := len(phrases); n > 0 && sg.Start-phrases[n-1].to < gap {
			phrases[n-1].to = sg.End
			continue
		}
		phrases = append(phrases, span{sg.Start, sg.End})
	}
	if len(phrases) <= 1 {
		h, err := ear.Transcribe(ctx, p16)
		h.Text = closePhrase(strings.TrimSpace(h.Text), true)
		return h, err
	}
	var out clone.Heard
	var parts []string
	pad := int64(clonePad * 16000 / 2)
	for i, ph := range phrases {
		from, to := max(0, ph.from-pad-start), min(int64(len(p16)), ph.to+pad-start)
		if to <= from {
			continue
		}
		h, err := ear.Transcribe(ctx, p16[from:to])
		if err != nil {
			return out, err
		}
		if out.Lang == "" {
			out.Lang = h.Lang
		}
		if out.Event == "" || out.Event == "Speech" {
			out.Event = h.Event
		}
		if t := strings.TrimSpace(h.Text); t != "" {
			parts = append(parts, closePhrase(t, i == len(phrases)-1))
		}
	}
	if n := len(parts); n > 0 {
		parts[n-1] = closePhrase(strings.TrimRight(parts[n-1], ",，"), true)
	}
	out.Text = strings.Join(parts, " ")
	return out, nil
}

// closePhrase ends a phrase with a comma (a full stop when last) unless it ends in punctuation;
// Chinese and Japanese get their full-width marks.
func closePhrase(t string, last bool) string {
	if t == "" {
		return t
	}
	r := []rune(t)
	end := r[len(r)-1]
	if unicode.IsPunct(end) {
		return t
	}
	cjk := unicode.In(end, unicode.Han, unicode.Hiragana, unicode.Katakana)
	switch {
	case last && cjk:
		return t + "。"
	case last:
		return t + "."
	case cjk:
		return t + "，"
	}
	return t + ","
}
