package asr

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestStamp(t *testing.T) {
	for _, c := range []struct {
		s    float64
		sep  byte
		want string
	}{{0, ',', "00:00:00,000"}, {3723.4567, ',', "01:02:03,457"}, {59.9996, '.', "00:01:00.000"}, {-1, '.', "00:00:00.000"}} {
		if got := stamp(c.s, c.sep); got != c.want {
			t.Errorf("stamp(%v) = %q, want %q", c.s, got, c.want)
		}
	}
}

func TestCuesAndSubtitles(t *testing.T) {
	// Eight words a second for 10 s, then a pause, then one more word in a new segment.
	var toks []string
	var ts []float64
	for i := range 80 {
		toks = append(toks, " w")
		ts = append(ts, float64(i)*0.125)
	}
	s1 := Segment{Start: 0, End: 10.2, Tokens: toks, Timestamps: ts}
	s2 := Segment{Start: 10.2, End: 14, Tokens: []string{" end"}, Timestamps: []float64{12.5}}
	r := merge([]Segment{s1, s2}, 14)
	cues := r.Cues()
	if len(cues) < 3 {
		t.Fatalf("%d cues: %+v", len(cues), cues)
	}
	for i, c := range cues {
		if c.End-c.Start > cueMaxSeconds+1e-9 || len(c.Text) > cueMaxChars {
			t.Errorf("cue %d too long: %+v", i, c)
		}
		if i > 0 && c.Start < cues[i-1].End-1e-9 {
			t.Errorf("cue %d overlaps the previous one", i)
		}
	}
	if last := cues[len(cues)-1]; last.Text != "end" || last.Start != 12.5 || last.End != 14 {
		t.Errorf("last cue %+v", last)
	}
	var srt, vtt bytes.Buffer
	if err := WriteSRT(&srt, cues); err != nil {
		t.Fatal(err)
	}
	if err := WriteVTT(&vtt, cues); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srt.String(), "1\n00:00:00,000 --> ") || !strings.HasPrefix(vtt.String(), "WEBVTT\n\n00:00:00.000 --> ") {
		t.Errorf("srt:\n%s\nvtt:\n%s", srt.String()[:60], vtt.String()[:60])
	}
	v := r.Verbose()
	if v.Task != "transcribe" || len(v.Segments) != 2 || len(v.Words) != 81 || v.Duration != 14 {
		t.Errorf("verbose: %d segments, %d words", len(v.Segments), len(v.Words))
	}
	if LanguageName("en") != "english" || LanguageName("xx") != "xx" {
		t.Error("LanguageName")
	}
}

// The names OpenAI's verbose_json uses, and a query id for every language SenseVoice is said
// to know (lang.Codes).
func TestLanguageNames(t *testing.T) {
	for tag, want := range map[string]string{"zh": "chinese", "en": "english", "yue": "cantonese", "ja": "japanese", "ko": "korean",
		"nospeech": "nospeech", "auto": "auto", "": "", "EN": "EN", "de": "de"} {
		if got := LanguageName(tag); got != want {
			t.Errorf("LanguageName(%q) = %q, want %q", tag, got, want)
		}
	}
	if got, want := Languages(), []string{"auto", "zh", "en", "yue", "ja", "ko"}; !slices.Equal(got, want) {
		t.Errorf("Languages() = %q, want %q", got, want)
	}
	for _, l := range Languages() {
		if _, ok := funasrIDs["lang_"+l]; !ok {
			t.Errorf("no FunASR query id for %q", l)
		}
	}
}
