package wizard

import (
	"context"
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/voices/clone"

	"github.com/parley-voice/parley/app/gui/kit"
)

// quickClone is the voice goal's quick path beside the fine-tune: a zero-shot clone from the
// dataset's clip nearest quickCloneSeconds (no training), added to the voice library, and
// compared with a random voice on the held-out clips (how alike each sounds to the person,
// how clear each is), with A/B listening.
type quickClone struct {
	w       *Wizard
	cloner  tune.Cloner // nil: no quick clone here
	intro   *widget.Label
	make    *widget.Button
	compare *widget.Button
	playA   *widget.Button
	playB   *widget.Button
	bar     *jobBar
	msg     *kit.Notice
	result  *kit.Notice
	box     *fyne.Container

	scores []tune.VoiceScore
	texts  []string
	seed   int64
	forKey string // the dataset the scores belong to
}

// quickCloneSeconds is the length of the clip the clone is made from: long enough to carry
// the voice, short enough to be one sentence.
const quickCloneSeconds = 6

func newQuickClone(w *Wizard, cloner tune.Cloner) *quickClone {
	q := &quickClone{w: w, cloner: cloner}
	q.intro = widget.NewLabel("Quick clone: no training, ready in seconds — a zero-shot clone from one of your clips. " +
		"It copies your voice less closely than a fine-tune; compare it with a random voice right here.")
	q.intro.Wrapping = fyne.TextWrapWord
	q.make = widget.NewButtonWithIcon("Make a quick clone", theme.ContentAddIcon(), func() { q.makeClone() })
	q.make.Importance = widget.HighImportance
	q.compare = widget.NewButtonWithIcon("Compare with a random voice", theme.SearchIcon(), func() { q.runCompare() })
	q.playA = widget.NewButtonWithIcon("A: random voice", theme.MediaPlayIcon(), func() { q.speak(false) })
	q.playB = widget.NewButtonWithIcon("B: your clone", theme.MediaPlayIcon(), func() { q.speak(true) })
	q.bar = newJobBar()
	q.msg = kit.NewNotice()
	q.result = kit.NewNotice()
	q.box = container.NewVBox(widget.NewSeparator(), q.intro, container.NewHBox(q.make, q.compare), q.bar.box, q.msg, q.result,
		container.NewHBox(q.playA, q.playB))
	q.box.Hide()
	return q
}

// name is the dataset's clone voice in the library.
func (q *quickClone) name() string {
	// the recogniser's local id is the dataset's name made safe: the same rule, its own suffix
	return strings.TrimPrefix(tune.LocalID(q.w.d.Name), "sensevoice-") + "-clone"
}

// available says whether the quick clone applies: the voice goal and a voice model to clone
// with.
func (q *quickClone) available() bool {
	w := q.w
	return w.d != nil && w.goal == goalVoice && q.cloner != nil && q.cloner.CloneReady() == nil
}

func (q *quickClone) refresh() {
	if !q.available() {
		q.box.Hide()
		return
	}
	q.box.Show()
	w := q.w
	has := q.cloner.HasVoice(q.name())
	if has {
		q.make.SetText("Make it again")
		q.make.Importance = widget.MediumImportance
	} else {
		q.make.SetText("Make a quick clone")
		q.make.Importance = widget.HighImportance
	}
	idle := w.busy == nil
	enable(q.make, idle && w.d.Summary().Usable >= tune.MinASRClips)
	enable(q.compare, idle && has)
	tooFew := fmt.Sprintf("A clone and its comparison need at least %d usable clips (some are held out to compare with).", tune.MinASRClips)
	switch {
	case w.d.Summary().Usable < tune.MinASRClips && q.msg.Text == "":
		q.msg.SetText(tooFew)
	case w.d.Summary().Usable >= tune.MinASRClips && q.msg.Text == tooFew:
		q.msg.SetText("")
	}
	if q.forKey != w.d.Dir() {
		q.scores, q.texts = nil, nil
	}
	show := len(q.texts) > 0 && has
	for _, b := range []*widget.Button{q.playA, q.playB} {
		if show {
			b.Show()
			enable(b, idle)
		} else {
			b.Hide()
		}
	}
	if !show {
		q.result.SetText("")
		if has {
			q.result.SetText("Your clone is in the voice library as " + q.name() + ": pick it in the Voice tab, or compare it here.")
		}
		return
	}
	var lines []string
	for _, s := range q.scores {
		lines = append(lines, fmt.Sprintf("%s: sounds %.2f alike to you (1 = the same), %.1f%% of characters misheard by the recogniser", s.Name, s.Similarity, 100*s.CER))
	}
	lines = append(lines, fmt.Sprintf("Listen to “%s” with each:", q.texts[0]))
	q.result.SetText(strings.Join(lines, "\n"))
}

func enable(b *widget.Button, on bool) {
	if on {
		b.Enable()
	} else {
		b.Disable()
	}
}

func (q *quickClone) makeClone() {
	name := q.name()
	q.msg.SetText("")
	var res *tune.CloneResult
	var from *clone.Clip
	q.w.job(q.bar, func(ctx context.Context, d *clone.Dataset, progress func(int, int, string)) error {
		var err error
		res, from, err = q.cloner.CloneDataset(ctx, d, name, quickCloneSeconds, func(step string) { progress(0, 1, step) })
		return err
	}, func(err error) {
		q.scores, q.texts = nil, nil
		if err != nil {
			q.msg.SetText("The clone was not made: " + sentence(strings.TrimPrefix(err.Error(), "tune: ")))
			return
		}
		msg := fmt.Sprintf("Made %s from clip %s (%.1f s of speech)", name, from.ID, res.Seconds)
		if res.Seed != 0 {
			msg += fmt.Sprintf(", with the seed speaker closest to you (seed %d)", res.Seed)
		}
		q.msg.SetText(msg + ".")
		q.w.host.VoicesChanged()
	})
}

func (q *quickClone) runCompare() {
	name := q.name()
	q.msg.SetText("")
	var scores []tune.VoiceScore
	var texts []string
	var seed int64
	q.w.job(q.bar, func(ctx context.Context, d *clone.Dataset, progress func(int, int, string)) error {
		var err error
		scores, texts, seed, err = q.cloner.CompareVoices(ctx, d, name, 4, func(step string) { progress(0, 1, step) })
		return err
	}, func(err error) {
		if err != nil {
			q.msg.SetText("The comparison failed: " + sentence(strings.TrimPrefix(err.Error(), "tune: ")))
			return
		}
		q.scores, q.texts, q.seed, q.forKey = scores, texts, seed, q.w.d.Dir()
	})
}

// speak plays the first held-out sentence with the random voice (A) or the clone (B).
func (q *quickClone) speak(cloned bool) {
	w := q.w
	if len(q.texts) == 0 || w.busy != nil {
		return
	}
	if w.playing != nil {
		w.stopPlaying()
		return
	}
	name := ""
	if cloned {
		name = q.name()
	}
	ctx, done := w.startPlaying()
	cloner, host, seed, text := q.cloner, w.host, q.seed, q.texts[0]
	go func() {
		pcm, err := cloner.Say(ctx, name, seed, text)
		if err == nil {
			err = host.Play(ctx, pcm)
		}
		w.host.Do(func() {
			done()
			if err != nil && ctx.Err() == nil {
				q.msg.SetText("Cannot play: " + err.Error())
			}
		})
	}()
}
