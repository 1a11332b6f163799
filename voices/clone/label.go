package clone

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/parley-voice/parley/edit"
)

// Heard is what a recogniser made of a clip.
type Heard struct {
	Text  string
	Lang  string // "en", "zh", … ("" when unknown)
	Event string // "Speech", "BGM", "Laughter", … ("" when unknown)
}

// Transcriber is the recogniser the label step uses (SenseVoice in Parley, wired by the
// caller so this package stays a leaf).
type Transcriber interface {
	Transcribe(ctx context.Context, pcm []float32) (Heard, error)
}

// LabelOptions: Force relabels clips the recogniser already labelled (never the user's own
// texts); Progress, when set, is called before each clip.
type LabelOptions struct {
	Force    bool
	Progress func(done, total int, clip string)
}

// Label transcribes every clip that is not rejected and has no text (or, with Force, no
// text the user wrote), records its language, and flags what proofreading should look at:
// nothing recognised, something other than speech, a language other than the dataset's,
// and a prompt's text that does not match what was heard. The dataset is saved every few
// clips, so an interrupted label step keeps its work.
func (d *Dataset) Label(ctx context.Context, tr Transcriber, o LabelOptions) error {
	var todo []int
	for i := range d.Clips {
		c := &d.Clips[i]
		if c.Rejected != "" || c.Dropped {
			continue
		}
		if c.Text == "" || (o.Force && !c.Edited) || (c.Edited && c.Lang == "") {
			todo = append(todo, i)
		}
	}
	for n, i := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := &d.Clips[i]
		if o.Progress != nil {
			o.Progress(n, len(todo), c.ID)
		}
		pcm, err := d.ReadClip(c.Path)
		if err != nil {
			return fmt.Errorf("clip %s: %w", c.ID, err)
		}
		h, err := tr.Transcribe(ctx, pcm)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("clip %s: %w", c.ID, err)
		}
		c.Lang = h.Lang
		c.Warning = ""
		if c.Edited { // the person's own text (a prompt they read): check it against the audio
			if h.Text != "" && mismatch(c.Text, h.Text) {
				c.Warning = fmt.Sprintf("the text does not match what was heard (%q)", h.Text)
			}
		} else {
			c.Text = strings.TrimSpace(h.Text)
		}
		switch {
		case h.Event != "" && !strings.EqualFold(h.Event, "Speech"):
			c.Warning = fmt.Sprintf("sounds like %s, not speech", h.Event)
		case strings.TrimSpace(h.Text) == "" && !c.Edited:
			c.Warning = "no words recognised"
		}
		if n%16 == 15 {
			if err := d.Save(); err != nil {
				return &diskError{err}
			}
		}
	}
	d.setLanguage()
	if err := d.Save(); err != nil {
		return &diskError{err}
	}
	return nil
}

// setLanguage takes the clips' majority language as the dataset's and warns on clips in
// another one (a transcript in the wrong language trains the wrong sounds).
func (d *Dataset) setLanguage() {
	count := map[string]int{}
	for _, c := range d.Clips {
		if c.Rejected == "" && !c.Dropped && c.Lang != "" {
			count[c.Lang]++
		}
	}
	best, n := "", 0
	for l, k := range count {
		if k > n || (k == n && l < best) {
			best, n = l, k
		}
	}
	d.Lang = best
	if best == "" {
		return
	}
	for i := range d.Clips {
		c := &d.Clips[i]
		if c.Rejected == "" && c.Lang != "" && c.Lang != best && c.Warning == "" {
			c.Warning = fmt.Sprintf("language %s; the rest is %s", c.Lang, best)
		}
		if c.Edited && c.Warning == "" && scriptLang(c.Text) != "" && scriptLang(c.Text) != scriptLang(langSample(best)) {
			c.Warning = fmt.Sprintf("the text's script does not fit the spoken language (%s)", best)
		}
	}
}

// mismatch says whether the person's text and the recogniser's differ by more than half of
// their characters (letters and digits only, case folded): another sentence, another
// language, or the wrong file.
func mismatch(want, heard string) bool {
	a, b := []rune(fold(want)), []rune(fold(heard))
	if len(a) == 0 || len(b) == 0 {
		return len(a) != len(b)
	}
	return float64(edit.Distance(a, b)) > 0.5*float64(max(len(a), len(b)))
}

func fold(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// scriptLang is a coarse script class of a text: "han", "kana", "hangul", "latin" or "".
func scriptLang(s string) string {
	counts := map[string]int{}
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r):
			counts["kana"]++
		case unicode.Is(unicode.Han, r):
			counts["han"]++
		case unicode.Is(unicode.Hangul, r):
			counts["hangul"]++
		case unicode.Is(unicode.Latin, r):
			counts["latin"]++
		}
	}
	if counts["kana"] > 0 {
		return "kana"
	}
	best, n := "", 0
	for k, v := range counts {
		if v > n {
			best, n = k, v
		}
	}
	return best
}

// langSample is a word in a language's script, to compare scripts with.
func langSample(lang string) string {
	switch lang {
	case "zh", "yue":
		return "你好"
	case "ja":
		return "こんにちは"
	case "ko":
		return "안녕"
	}
	return "hello"
}

// ErrNothingUsable: the dataset has no clip to train on.
var ErrNothingUsable = errors.New("clone: no usable clips")
