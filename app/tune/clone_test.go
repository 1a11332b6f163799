package tune

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/vad"
	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/clone"
)

// fakeSpeech reports speech between two times (seconds).
type fakeSpeech struct{ from, to float64 }

func (f fakeSpeech) Segments(ctx context.Context, src audio.Source) ([]vad.Segment, error) {
	if f.to <= f.from {
		return nil, nil
	}
	return []vad.Segment{{Start: int64(f.from * 16000), End: int64(f.to * 16000), StartSec: f.from, EndSec: f.to}}, nil
}

type fakePrompter struct{ got int }

func (p *fakePrompter) Encode(ctx context.Context, pcm []float32, rate int) ([]int32, error) {
	p.got = len(pcm) * 16000 / rate
	frames := len(pcm) * 47 / rate
	out := make([]int32, frames*4)
	for i := range out {
		out[i] = int32(i % 625)
	}
	return out, nil
}

type fakeEar struct{ h clone.Heard }

func (e fakeEar) Transcribe(context.Context, []float32) (clone.Heard, error) { return e.h, nil }

// fakeVoice speaks a tone whose pitch is the seed; fakeEmbed embeds by the mean sample.
type fakeVoice struct{}

// suggestingVoice is fakeVoice with a model that suggests seeds (tts.SeedSuggester).
type suggestingVoice struct {
	fakeVoice
	seeds []int64
}

func (v suggestingVoice) SuggestedSeeds() []int64 { return v.seeds }

// TestCandidateSeeds: suggested seeds first (duplicates once; low to high as the model lists
// them, tried lowest, highest, then the middles), then 1, 2, … for the rest; at most n; an
// engine without suggestions tries 1..n. (The first cases' lists are not in pitch order: the
// spreading goes by list position, whatever the seeds' numbers.)
func TestCandidateSeeds(t *testing.T) {
	for _, c := range []struct {
		eng  tts.Engine
		n    int
		want []int64
	}{
		{fakeVoice{}, 4, []int64{1, 2, 3, 4}},
		{suggestingVoice{seeds: []int64{40, 2, 40, 77}}, 5, []int64{40, 77, 2, 1, 3}},
		{suggestingVoice{seeds: []int64{40, 2, 77}}, 2, []int64{40, 77}},
		{suggestingVoice{seeds: []int64{11, 12, 13, 14, 15, 16, 17, 18, 19}}, 9, []int64{11, 19, 15, 13, 17, 12, 14, 16, 18}},
		{suggestingVoice{}, 2, []int64{1, 2}},
		{fakeVoice{}, 0, nil},
		{suggestingVoice{seeds: []int64{11, 12, 13, 14, 15, 16, 17, 18, 19}}, 3, []int64{11, 19, 15}},
		{suggestingVoice{seeds: []int64{11}}, 3, []int64{11, 1, 2}},
	} {
		if got := CandidateSeeds(c.eng, c.n); !slices.Equal(got, c.want) {
			t.Errorf("%T %v n=%d: %v, want %v", c.eng, c.eng, c.n, got, c.want)
		}
	}
}

func (fakeVoice) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	return tts.NewStream(ctx, nil, func(ctx context.Context, emit func(tts.Chunk) error) error {
		x := make([]float32, 24000)
		for i := range x {
			x[i] = float32(req.Seed) / 10
		}
		return emit(tts.Chunk{Samples: x, SampleRate: 24000, Last: true})
	}), nil
}
func (fakeVoice) Capabilities() tts.Capabilities { return tts.Capabilities{} }
func (fakeVoice) Close() error                   { return nil }

type fakeEmbed struct{}

func (fakeEmbed) Embed(ctx context.Context, pcm []float32) ([]float32, error) {
	var m float64
	for _, v := range pcm {
		m += float64(v)
	}
	m /= float64(len(pcm))
	return []float32{float32(math.Cos(m)), float32(math.Sin(m))}, nil
}

func TestClone(t *testing.T) {
	ctx := context.Background()
	pcm := make([]float32, 24000*8) // 8 s at 24 kHz, the "speaker" at level 0.3 → seed 3
	for i := range pcm {
		pcm[i] = 0.3
	}
	p := &fakePrompter{}
	o := CloneOptions{Name: "anna", Prompter: p, NumVQ: 4, Model: "tiny", Langs: []string{"en-us"},
		Speech: fakeSpeech{1, 5}, Ear: fakeEar{clone.Heard{Text: "hello there", Lang: "en", Event: "Speech"}},
		Seeds: 5, Embedder: fakeEmbed{}, Voice: fakeVoice{}}
	res, err := Clone(ctx, pcm, 24000, o)
	if err != nil {
		t.Fatal(err)
	}
	v := res.Voice
	if v.Kind != voices.KindClone || v.Sample.Text != "hello there." || v.Sample.Model != "tiny" || len(v.Sample.Codes)%4 != 0 {
		t.Fatalf("voice %+v", v)
	}
	if math.Abs(res.Seconds-4.4) > 0.01 || p.got != int(4.4*16000) {
		t.Fatalf("kept %.2f s (encoded %d samples at 16 kHz), want the speech ±0.2 s", res.Seconds, p.got)
	}
	if res.Seed != 3 || v.Seed == nil || *v.Seed != 3 {
		t.Fatalf("closest seed %d (%.3f)", res.Seed, res.SeedSimilarity)
	}
	o.Text = "my own words"
	if res, err := Clone(ctx, pcm, 24000, o); err != nil || res.Voice.Sample.Text != "my own words" || res.Heard != "hello there." {
		t.Fatalf("given text: %v", err)
	}

	for name, c := range map[string]struct {
		mod  func(o *CloneOptions)
		want error
	}{
		"silence":            {func(o *CloneOptions) { o.Speech = fakeSpeech{} }, ErrNoSpeech},
		"a second of speech": {func(o *CloneOptions) { o.Speech = fakeSpeech{1, 2} }, ErrNoSpeech},
		"a minute of speech": {func(o *CloneOptions) { o.Speech = fakeSpeech{0, 60} }, ErrCloneLength},
		"clip in Chinese":    {func(o *CloneOptions) { o.Ear = fakeEar{clone.Heard{Text: "你好", Lang: "zh"}} }, ErrLanguage},
		"text in Chinese":    {func(o *CloneOptions) { o.Text = "今天天气很好" }, ErrLanguage},
		"text not the audio": {func(o *CloneOptions) { o.Langs = []string{"zh", "en"}; o.Text = "今天天气很好" }, ErrLanguage},
		"nothing heard":      {func(o *CloneOptions) { o.Ear = fakeEar{} }, ErrNoTranscript},
		"bad name":           {func(o *CloneOptions) { o.Name = "../x" }, voices.ErrInvalid},
	} {
		oo := o
		oo.Text = ""
		c.mod(&oo)
		if _, err := Clone(ctx, make([]float32, 16000*70), 16000, oo); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// phraseSpeech reports speech in several spans (seconds).
type phraseSpeech [][2]float64

func (f phraseSpeech) Segments(ctx context.Context, src audio.Source) ([]vad.Segment, error) {
	var out []vad.Segment
	for _, s := range f {
		out = append(out, vad.Segment{Start: int64(s[0] * 16000), End: int64(s[1] * 16000), StartSec: s[0], EndSec: s[1]})
	}
	return out, nil
}

// phraseEar hears each phrase by its level (the clip's phrases are at 0.1, 0.2, …).
type phraseEar struct{ words map[int]string }

func (e phraseEar) Transcribe(ctx context.Context, pcm []float32) (clone.Heard, error) {
	var top float32
	for _, v := range pcm {
		top = max(top, v)
	}
	return clone.Heard{Text: e.words[int(math.Round(float64(top)*10))], Lang: "en", Event: "Speech"}, nil
}

// The transcript marks the clip's pauses: each phrase is heard alone, joined by commas and
// closed by a full stop, so the prompt's text has a pause token where its audio pauses.
func TestCloneTranscriptPauses(t *testing.T) {
	pcm := make([]float32, 16000*8)
	spans := [][2]float64{{0.5, 2}, {2.1, 2.8}, {3.3, 5}, {5.6, 7}} // 0.1 s: one phrase; 0.5 s, 0.6 s: pauses
	levels := []float32{0.1, 0.1, 0.2, 0.3}
	for i, sp := range spans {
		for j := int(sp[0] * 16000); j < int(sp[1]*16000); j++ {
			pcm[j] = levels[i]
		}
	}
	o := CloneOptions{Name: "anna", Prompter: &fakePrompter{}, NumVQ: 4, Speech: phraseSpeech(spans),
		Ear: phraseEar{map[int]string{1: "well then", 2: "what is it?", 3: "tell me"}}}
	res, err := Clone(context.Background(), pcm, 16000, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := "well then, what is it? tell me."; res.Heard != want || res.Voice.Sample.Text != want {
		t.Fatalf("heard %q, voice text %q; want %q", res.Heard, res.Voice.Sample.Text, want)
	}
	for _, c := range []struct{ in, want string }{{"你好", "你好。"}, {"done!", "done!"}, {"", ""}} {
		if got := closePhrase(c.in, true); got != c.want {
			t.Errorf("closePhrase(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := closePhrase("你好", false); got != "你好，" {
		t.Errorf("closePhrase(你好, not last) = %q", got)
	}
}

func TestEvaluateVoices(t *testing.T) {
	ctx := context.Background()
	d := testDataset(t, 10)
	ids := []string{d.Clips[0].ID, d.Clips[1].ID}
	ref, err := ReferenceEmbedding(ctx, d, ids, fakeEmbed{})
	if err != nil || len(ref) != 2 {
		t.Fatalf("reference %v: %v", ref, err)
	}
	// the person's clips are quiet speech (mean near 0); seed 0 speaks at 0.0, seed 9 at 0.9
	var kept []int // sentences the "near" voice handed over, and their lengths
	keep := func(i int, pcm []float32) error { kept = append(kept, i, len(pcm)); return nil }
	cands := []VoiceCandidate{{Name: "far", Request: tts.Request{Seed: 9, HasSeed: true}}, {Name: "near", Request: tts.Request{Seed: 0}, Keep: keep}}
	scores, err := EvaluateVoices(ctx, fakeVoice{}, cands, []string{"hello there", "what time is it"}, ref, fakeEmbed{}, fakeEar{clone.Heard{Text: "hello there"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(scores) != 2 || scores[1].Similarity <= scores[0].Similarity || scores[0].Sentences != 2 {
		t.Fatalf("scores %+v", scores)
	}
	if e, n := CharErrors("what time is it", "hello there"); scores[0].Errors != e || scores[0].Chars != n+11 {
		t.Fatalf("errors %d/%d", scores[0].Errors, scores[0].Chars)
	}
	if math.Abs(scores[0].AudioSeconds-2) > 0.01 {
		t.Fatalf("audio %.2f s", scores[0].AudioSeconds)
	}
	// per sentence: what was heard, its errors, and the similarities that make the mean
	if it := scores[0].Items; len(it) != 2 || it[1].Text != "what time is it" || it[1].Heard != "hello there" || it[0].Errors != 0 || it[1].Errors == 0 ||
		math.Abs((it[0].Similarity+it[1].Similarity)/2-scores[0].Similarity) > 1e-9 {
		t.Fatalf("items %+v", it)
	}
	if len(kept) != 4 || kept[0] != 0 || kept[2] != 1 || kept[1] != 16000 {
		t.Fatalf("kept %v", kept)
	}
	boom := errors.New("disk full")
	cands[1].Keep = func(int, []float32) error { return boom }
	if _, err := EvaluateVoices(ctx, fakeVoice{}, cands, []string{"hello there"}, ref, fakeEmbed{}, fakeEar{clone.Heard{Text: "hello there"}}); !errors.Is(err, boom) {
		t.Fatalf("a voice that cannot be kept: %v", err)
	}
	if _, err := ReferenceEmbedding(ctx, d, []string{"nope"}, fakeEmbed{}); !errors.Is(err, ErrTooFewClips) {
		t.Fatalf("no clips: %v", err)
	}
	d.Clips[2].Seconds, d.Clips[3].Seconds = 3.1, 8
	c, err := ClipNear(d, []string{d.Clips[2].ID, d.Clips[3].ID}, 3)
	if err != nil || c.ID != d.Clips[2].ID {
		t.Fatalf("clip near 3 s: %v %v", c, err)
	}
	d.Clips[4].Seconds, d.Clips[5].Seconds = 1.5, 5.5 // 1.5 s: too short to judge a voice by
	cs, err := ClipsNear(d, []string{d.Clips[2].ID, d.Clips[3].ID, d.Clips[4].ID, d.Clips[5].ID}, 5, 2)
	if err != nil || len(cs) != 2 || cs[0].ID != d.Clips[5].ID || cs[1].ID != d.Clips[2].ID {
		t.Fatalf("2 clips near 5 s: %v %v", cs, err)
	}
	if _, err := ClipsNear(d, []string{d.Clips[4].ID}, 5, 3); !errors.Is(err, ErrTooFewClips) {
		t.Fatalf("only a short clip: %v", err)
	}
}

// TestClosestSeedOverClips: the seed speaker is chosen against the person's mean over all the
// clips given (fakeVoice: seed k sounds at angle k/10; the clips at 0.2 and 0.4 average to
// 0.3, seed 3), not against one clip (0.2 alone: seed 2).
func TestClosestSeedOverClips(t *testing.T) {
	ctx := context.Background()
	level := func(v float32) []float32 {
		x := make([]float32, 16000)
		for i := range x {
			x[i] = v
		}
		return x
	}
	one := []Utterance{{PCM: level(0.2), Text: "hello"}}
	two := append(one, Utterance{PCM: level(0.4), Text: "good night"})
	if seed, _, err := ClosestSeed(ctx, fakeVoice{}, fakeEmbed{}, one, 6, nil); err != nil || seed != 2 {
		t.Fatalf("one clip: seed %d, %v", seed, err)
	}
	var seen []int
	seed, sim, err := ClosestSeed(ctx, fakeVoice{}, fakeEmbed{}, two, 6, func(done, total int) {
		if total != 6 {
			t.Errorf("progress total %d", total)
		}
		seen = append(seen, done)
	})
	if !slices.Equal(seen, []int{1, 2, 3, 4, 5, 6}) {
		t.Errorf("progress %v, want each seed once in order", seen)
	}
	if err != nil || seed != 3 || sim < 0.99 {
		t.Fatalf("two clips: seed %d (similarity %.3f), %v", seed, sim, err)
	}
	if _, _, err := ClosestSeed(ctx, fakeVoice{}, fakeEmbed{}, nil, 6, nil); err == nil {
		t.Fatal("no clip of the person: no error")
	}
	// a model that suggests seeds has them tried first: seed 9 is beyond 1..6 and found
	if seed, _, err := ClosestSeed(ctx, suggestingVoice{seeds: []int64{9, 1}}, fakeEmbed{}, []Utterance{{PCM: level(0.9), Text: "hi"}}, 6, nil); err != nil || seed != 9 {
		t.Fatalf("suggested seeds: seed %d, %v", seed, err)
	}
}

// pitchSeedVoice: seed k sounds at angle k/10 to fakeEmbed and at 100·k Hz.
type pitchSeedVoice struct{}

func (pitchSeedVoice) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	return tts.NewStream(ctx, nil, func(ctx context.Context, emit func(tts.Chunk) error) error {
		x := tone(100*float64(req.Seed), 24000, 24000)
		for i := range x {
			x[i] += float32(req.Seed) / 10
		}
		return emit(tts.Chunk{Samples: x, SampleRate: 24000, Last: true})
	}), nil
}
func (pitchSeedVoice) Capabilities() tts.Capabilities { return tts.Capabilities{} }
func (pitchSeedVoice) Close() error                   { return nil }

// The seed nearest in embedding loses to a near one at the person's pitch: a person at angle
// 0.2 speaking at 300 Hz gets seed 3 (angle 0.3, 300 Hz), not seed 2 (angle 0.2, 200 Hz); with
// no pitch to go by (an unvoiced clip), seed 2.
func TestClosestSeedPitch(t *testing.T) {
	ctx := context.Background()
	person := tone(300, 16000, 16000)
	for i := range person {
		person[i] += 0.2
	}
	seed, sim, err := ClosestSeed(ctx, pitchSeedVoice{}, fakeEmbed{}, []Utterance{{PCM: person, Text: "hello"}}, 4, nil)
	if err != nil || seed != 3 || math.Abs(sim-math.Cos(0.1)) > 0.01 {
		t.Errorf("a 300 Hz person: seed %d (similarity %.3f), %v; want seed 3", seed, sim, err)
	}
	flat := make([]float32, 16000)
	for i := range flat {
		flat[i] = 0.2
	}
	if seed, _, err := ClosestSeed(ctx, pitchSeedVoice{}, fakeEmbed{}, []Utterance{{PCM: flat, Text: "hello"}}, 4, nil); err != nil || seed != 2 {
		t.Errorf("no pitch in the clip: seed %d, %v; want 2", seed, err)
	}
}

// whisperSeedVoice is pitchSeedVoice except that seed 2 whispers (noise, no pitch).
type whisperSeedVoice struct{ pitchSeedVoice }

func (w whisperSeedVoice) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	if req.Seed != 2 {
		return w.pitchSeedVoice.Synthesize(ctx, req)
	}
	return tts.NewStream(ctx, nil, func(ctx context.Context, emit func(tts.Chunk) error) error {
		rng := rand.New(rand.NewPCG(7, 8))
		x := make([]float32, 24000)
		for i := range x {
			x[i] = 0.2 + float32(0.1*rng.NormFloat64())
		}
		return emit(tts.Chunk{Samples: x, SampleRate: 24000, Last: true})
	}), nil
}

// A whispering seed loses to voiced ones however near its embedding: a person at angle 0.2
// speaking at 200 Hz gets seed 3 (300 Hz, angle 0.3), not the whispering seed 2 (angle 0.2).
func TestClosestSeedVoicing(t *testing.T) {
	person := tone(200, 16000, 16000)
	for i := range person {
		person[i] += 0.2
	}
	seed, _, err := ClosestSeed(context.Background(), whisperSeedVoice{}, fakeEmbed{}, []Utterance{{PCM: person, Text: "hello"}}, 4, nil)
	if err != nil || seed != 3 {
		t.Errorf("seed %d, %v; want 3 (seed 2 whispers)", seed, err)
	}
}

// promptWhisperVoice speaks a 150 Hz tone, and noise for a clone (a request with a prompt).
type promptWhisperVoice struct{}

func (promptWhisperVoice) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	return tts.NewStream(ctx, nil, func(ctx context.Context, emit func(tts.Chunk) error) error {
		x := tone(150, 24000, 24000)
		if req.Sample != nil {
			rng := rand.New(rand.NewPCG(3, 4))
			for i := range x {
				x[i] = float32(0.1 * rng.NormFloat64())
			}
		}
		return emit(tts.Chunk{Samples: x, SampleRate: 24000, Last: true})
	}), nil
}
func (promptWhisperVoice) Capabilities() tts.Capabilities { return tts.Capabilities{} }
func (promptWhisperVoice) Close() error                   { return nil }

// toneVoice speaks a harmonic tone at f0 Hz and keeps the last request.
type toneVoice struct {
	f0   float64
	last *tts.Request
}

func tone(f0 float64, rate, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		for h := 1; h <= 6; h++ {
			x[i] += float32(0.2 * math.Sin(2*math.Pi*f0*float64(h*i)/float64(rate)) / float64(h))
		}
	}
	return x
}

func (v toneVoice) Synthesize(ctx context.Context, req tts.Request) (tts.Stream, error) {
	*v.last = req
	return tts.NewStream(ctx, nil, func(ctx context.Context, emit func(tts.Chunk) error) error {
		return emit(tts.Chunk{Samples: tone(v.f0, 24000, 24000), SampleRate: 24000, Last: true})
	}), nil
}
func (toneVoice) Capabilities() tts.Capabilities { return tts.Capabilities{} }
func (toneVoice) Close() error                   { return nil }

// The clone is said once in its own words; the difference between its pitch and the
// recording's becomes the voice's pitch shift (none within half a semitone, at most
// ClonePitchMax), unless KeepPitch.
func TestClonePitch(t *testing.T) {
	ctx := context.Background()
	var last tts.Request
	o := CloneOptions{Name: "anna", Prompter: &fakePrompter{}, NumVQ: 4, Model: "tiny", Text: "hello there",
		Speech: fakeSpeech{0.5, 4.5}, Voice: toneVoice{150, &last}, Seeds: 2, Embedder: fakeEmbed{}}
	for _, c := range []struct {
		clip, want float64
		warn       bool
	}{{170, 2.2, false}, {128, -2.7, false}, {153, 0, false}, {300, ClonePitchMax, true}, {90, -ClonePitchMax, true}} {
		res, err := Clone(ctx, tone(c.clip, 16000, 5*16000), 16000, o)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(res.Pitch-c.want) > 0.15 || res.Voice.Sample.Pitch != res.Pitch || (len(res.Warnings) > 0) != c.warn {
			t.Errorf("clip at %.0f Hz, voice at 150 Hz: shift %.1f semitones (F0 %.1f / %.1f Hz; warnings %q), want %.1f",
				c.clip, res.Voice.Sample.Pitch, res.ClipF0, res.VoiceF0, res.Warnings, c.want)
		}
		if s := last.Sample; s == nil || s.Text != "hello there" || s.Pitch != 0 || last.Text != s.Text {
			t.Errorf("the clone was not said in its own words, unshifted: %+v", last)
		}
	}
	o.KeepPitch = true
	if res, err := Clone(ctx, tone(200, 16000, 5*16000), 16000, o); err != nil || res.Voice.Sample.Pitch != 0 || res.VoiceF0 != 0 {
		t.Errorf("KeepPitch: shift %v, %v", res.Voice.Sample.Pitch, err)
	}
	o.KeepPitch = false
	if res, err := Clone(ctx, make([]float32, 5*16000), 16000, o); err != nil || res.Voice.Sample.Pitch != 0 || len(res.Warnings) == 0 {
		t.Errorf("an unvoiced clip: shift %v, warnings %q, %v", res.Voice.Sample.Pitch, res.Warnings, err)
	}
	o.Voice = promptWhisperVoice{} // the seeds speak, the clone whispers
	if res, err := Clone(ctx, tone(200, 16000, 5*16000), 16000, o); err != nil || res.Voice.Sample.Pitch != 0 ||
		len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "barely voiced") {
		t.Errorf("a whispering clone: shift %v, warnings %q, %v", res.Voice.Sample.Pitch, res.Warnings, err)
	}
	o.Voice, o.Seeds = toneVoice{150, &last}, 0 // no seed speaker: the engine's default voice, which may change
	if res, err := Clone(ctx, tone(200, 16000, 5*16000), 16000, o); err != nil || res.Voice.Sample.Pitch != 0 ||
		len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "no seed speaker") {
		t.Errorf("no seed speaker: shift %v, warnings %q, %v", res.Voice.Sample.Pitch, res.Warnings, err)
	}
}
