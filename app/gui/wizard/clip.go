package wizard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/storage"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/tune"
	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/voices"
	"github.com/parley-voice/parley/voices/clone"

	"github.com/parley-voice/parley/app/gui/kit"
)

// A zero-shot clone is made from one short clip: 3 to 10 seconds of one person speaking.
const (
	clipMinSeconds = 3.0
	clipMaxSeconds = 10.0
	// clipTakeSeconds is the most a picked file may hold: a longer one is almost always the
	// wrong file, or material for the fine-tune wizard.
	clipFileMaxSeconds = 30.0
)

// clipCloner is the voice panel's "Clone from a clip": record 3–10 s or pick a file, get the
// transcript from the recogniser (editable), name the voice.
type clipCloner struct {
	w      *Wizard
	prep   tune.Preparer // decodes a picked file, transcribes the clip
	cloner tune.Cloner   // makes the voice
	pcm    []float32     // the clip, 16 kHz mono
	record *widget.Button
	pick   *widget.Button
	play   *widget.Button
	meter  *kit.LevelMeter
	clock  *widget.Label
	status *kit.Notice
	text   *widget.Entry
	lang   *widget.Label
	name   *widget.Entry
	create *widget.Button
	why    *kit.Notice
	box    fyne.CanvasObject

	recording context.CancelFunc
	playing   context.CancelFunc
	creating  bool
	started   time.Time
	gen       int   // clip generation: a transcript of an older clip is dropped
	ready     error // why no clone can be made here (no voice model); nil when one can
	created   string
}

func newClipCloner(w *Wizard) *clipCloner {
	c := &clipCloner{w: w, prep: w.prep, cloner: w.cloner}
	c.record = widget.NewButtonWithIcon("Record", theme.MediaRecordIcon(), func() { c.toggleRecord() })
	c.record.Importance = widget.HighImportance
	c.pick = widget.NewButtonWithIcon("Choose a file…", theme.FileAudioIcon(), func() { c.fileDialog() })
	c.play = widget.NewButtonWithIcon("Play", theme.MediaPlayIcon(), func() { c.playClip() })
	c.play.Disable()
	c.meter = kit.NewLevelMeter()
	c.clock = widget.NewLabel("0:00")
	c.status = kit.NewNotice()
	c.text = widget.NewMultiLineEntry()
	c.text.Wrapping = fyne.TextWrapWord
	c.text.SetPlaceHolder("what the clip says (filled in by the recogniser; correct it if needed)")
	c.text.SetMinRowsVisible(3)
	c.text.OnChanged = func(string) { c.check() }
	c.lang = widget.NewLabel("")
	c.name = widget.NewEntry()
	c.name.SetPlaceHolder("my-voice")
	c.name.Validator = voices.ValidName
	c.name.OnChanged = func(string) { c.check() }
	c.create = widget.NewButtonWithIcon("Create voice", theme.ContentAddIcon(), func() { c.createVoice() })
	c.create.Importance = widget.HighImportance
	c.create.Disable()
	c.why = kit.NewNotice()
	c.why.Importance = widget.WarningImportance
	intro := widget.NewLabel(fmt.Sprintf("Record %.0f–%.0f seconds of one person speaking clearly, or choose a recording. "+
		"Parley writes down what it says; the voice copies how it sounds.", clipMinSeconds, clipMaxSeconds))
	intro.Wrapping = fyne.TextWrapWord
	c.box = container.NewVBox(
		intro,
		container.NewHBox(c.record, c.pick, c.play),
		container.NewBorder(nil, nil, nil, c.clock, container.NewPadded(c.meter)),
		c.status,
		widget.NewForm(
			widget.NewFormItem("Transcript", c.text),
			widget.NewFormItem("Language", c.lang),
			widget.NewFormItem("Name", c.name),
		),
		c.why,
	)
	c.ready = c.cloner.CloneReady()
	c.check()
	return c
}

// CanCloneFromClip says whether Clone from a clip is offered (the voice panel's button
// shows only then).
func (w *Wizard) CanCloneFromClip() bool { return w.prep != nil && w.cloner != nil }

// CloneFromClip opens the voice panel's "Clone from a clip" dialog.
func (w *Wizard) CloneFromClip() { w.showCloneFromClip() }

func (w *Wizard) showCloneFromClip() *clipCloner {
	if !w.CanCloneFromClip() {
		return nil
	}
	c := newClipCloner(w)
	d := dialog.NewCustomWithoutButtons("Clone from a clip", c.box, w.host.Window())
	closeBtn := widget.NewButton("Close", func() { c.stop(); d.Hide() })
	d.SetOnClosed(func() {
		c.stop()
		if !w.host.OnScreen() || w.step != stepCollect {
			w.releaseMic()
		}
	})
	d.SetButtons([]fyne.CanvasObject{closeBtn, c.create})
	d.Resize(fyne.NewSize(560, 460))
	d.Show()
	return c
}

func (c *clipCloner) stop() {
	if c.recording != nil {
		c.recording()
	}
	if c.playing != nil {
		c.playing()
	}
}

func (c *clipCloner) toggleRecord() {
	if c.recording != nil {
		c.recording()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.recording = cancel
	c.started = time.Now()
	c.w.holdMic()
	c.record.SetText("Stop")
	c.record.SetIcon(theme.MediaStopIcon())
	c.pick.Disable()
	c.check()
	c.status.SetText(fmt.Sprintf("Recording… speak for %.0f to %.0f seconds, then press Stop (it stops by itself at %.0f).", clipMinSeconds, clipMaxSeconds, clipMaxSeconds))
	host := c.w.host
	go func() {
		pcm, err := host.Record(ctx, time.Duration(clipMaxSeconds*float64(time.Second)), func(db float64) {
			c.w.host.Do(func() {
				c.meter.SetLevel(db)
				s := int(time.Since(c.started).Seconds())
				c.clock.SetText(fmt.Sprintf("0:%02d", s))
			})
		})
		c.w.host.Do(func() {
			cancel()
			c.recording = nil
			c.record.SetText("Record again")
			c.record.SetIcon(theme.MediaRecordIcon())
			c.pick.Enable()
			c.meter.SetLevel(-100)
			if err != nil {
				c.status.SetText("Recording failed: " + err.Error())
				return
			}
			c.setClip(pcm, "the recording")
		})
	}()
}

func (c *clipCloner) fileDialog() {
	fd := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
		if err != nil || r == nil {
			return
		}
		path := r.URI().Path()
		r.Close()
		c.load(path)
	}, c.w.host.Window())
	fd.SetFilter(storage.NewExtensionFileFilter([]string{".wav", ".mp3", ".flac", ".ogg", ".opus", ".m4a", ".aac", ".webm"}))
	fd.Show()
}

// load reads a picked file (any format) as the clip, off the UI goroutine.
func (c *clipCloner) load(path string) {
	c.status.SetText("Reading " + filepath.Base(path) + "…")
	prep := c.prep
	go func() {
		pcm, err := readClipFile(prep, path)
		c.w.host.Do(func() {
			if err != nil {
				c.setClip(nil, "")
				c.status.SetText(filepath.Base(path) + ": " + err.Error())
				return
			}
			c.setClip(pcm, filepath.Base(path))
		})
	}()
}

// readClipFile decodes up to clipFileMaxSeconds of a file as 16 kHz mono.
func readClipFile(prep tune.Preparer, path string) ([]float32, error) {
	ctx := context.Background()
	src, done, err := prep.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer done()
	mono, err := audio.Convert(src, audio.Mono16k, audio.QualityHigh)
	if err != nil {
		return nil, err
	}
	limit := int(clipFileMaxSeconds * 16000)
	pcm := make([]float32, 0, 10*16000)
	buf := make([]float32, 8192)
	for {
		n, err := mono.Read(ctx, buf)
		pcm = append(pcm, buf[:n]...)
		if len(pcm) > limit {
			return nil, fmt.Errorf("longer than %.0f seconds: a clone needs %.0f–%.0f s of speech (cut it), and the fine-tune wizard takes long recordings", clipFileMaxSeconds, clipMinSeconds, clipMaxSeconds)
		}
		if errors.Is(err, io.EOF) {
			return pcm, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// setClip checks a new clip and has the recogniser transcribe it.
func (c *clipCloner) setClip(pcm []float32, from string) {
	c.gen++
	c.pcm = nil
	c.play.Disable()
	c.text.SetText("")
	c.lang.SetText("")
	defer c.check()
	if pcm == nil {
		return
	}
	secs := float64(len(pcm)) / 16000
	if secs < clipMinSeconds {
		c.status.SetText(fmt.Sprintf("The clip is %.1f s: a clone needs at least %.0f seconds of speech.", secs, clipMinSeconds))
		return
	}
	problem, warn := clone.CheckTake(pcm)
	switch {
	case problem != "":
		c.status.SetText(problem)
		return
	case secs > clipMaxSeconds+0.5:
		// a file of 10–30 s: its first seconds make the clip
		pcm = pcm[:int(clipMaxSeconds*16000)]
		warn = strings.TrimSpace(fmt.Sprintf("Only its first %.0f seconds are used. %s", clipMaxSeconds, warn))
	}
	c.pcm = pcm
	c.play.Enable()
	c.status.SetText(strings.TrimSpace(fmt.Sprintf("Clip: %.1f s from %s. Transcribing… %s", float64(len(pcm))/16000, from, warn)))
	gen, prep := c.gen, c.prep
	go func() {
		ctx := context.Background()
		var text, lang, event string
		r, err := prep.Recogniser(ctx)
		if err == nil {
			h, terr := r.Transcribe(ctx, pcm)
			r.Close()
			text, lang, event, err = h.Text, h.Lang, h.Event, terr
		}
		c.w.host.Do(func() {
			if gen != c.gen {
				return
			}
			msg := fmt.Sprintf("Clip: %.1f s from %s.", float64(len(pcm))/16000, from)
			switch {
			case errors.Is(err, tune.ErrNoRecogniser):
				msg += " No speech recogniser is installed: type what the clip says."
			case err != nil:
				msg += " The recogniser failed (" + err.Error() + "): type what the clip says."
			case event != "" && !strings.EqualFold(event, "Speech"):
				msg += fmt.Sprintf(" It sounds like %s, not speech: a clone needs a clip of one person speaking.", event)
			case strings.TrimSpace(text) == "":
				msg += " No words were recognised: is it speech? Type what it says if it is."
			default:
				msg += " Check the transcript: it must say exactly what is spoken."
			}
			if warn != "" {
				msg += " " + warn
			}
			c.status.SetText(msg)
			c.text.SetText(strings.TrimSpace(text))
			c.lang.SetText(langName(lang))
			c.check()
		})
	}()
}

func (c *clipCloner) playClip() {
	if c.playing != nil {
		c.playing()
		return
	}
	if c.pcm == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.playing = cancel
	pcm, host := c.pcm, c.w.host
	go func() {
		host.Play(ctx, pcm)
		c.w.host.Do(func() { cancel(); c.playing = nil })
	}()
}

// check says what is still missing before the voice can be created.
func (c *clipCloner) check() {
	var why string
	switch {
	case c.ready != nil:
		why = sentence(c.ready.Error())
	case c.creating:
	case c.pcm == nil:
		why = "Record or choose a clip first."
	case strings.TrimSpace(c.text.Text) == "":
		why = "The transcript is empty: type what the clip says."
	case c.name.Text == "" || voices.ValidName(c.name.Text) != nil:
		why = "Give the voice a name (letters, digits, '-', '_')."
	}
	c.why.SetText(why)
	if why == "" && !c.creating && c.recording == nil {
		c.create.Enable()
	} else {
		c.create.Disable()
	}
}

// createVoice makes the clone (off the UI goroutine) and adds it to the voice library.
func (c *clipCloner) createVoice() {
	if c.creating || c.pcm == nil {
		return
	}
	c.creating = true
	c.check()
	c.record.Disable()
	c.pick.Disable()
	pcm, text, name, cloner := c.pcm, strings.TrimSpace(c.text.Text), c.name.Text, c.cloner
	c.status.SetText("Creating the voice…")
	go func() {
		res, err := cloner.CloneVoice(context.Background(), pcm, text, name, func(step string) {
			c.w.host.Do(func() { c.status.SetText("Creating the voice: " + step + "…") })
		})
		c.w.host.Do(func() {
			c.creating = false
			c.record.Enable()
			c.pick.Enable()
			if err != nil {
				c.status.SetText("")
				c.check()
				c.why.SetText("The voice was not created: " + sentence(strings.TrimPrefix(err.Error(), "tune: ")))
				return
			}
			c.created = res.Voice.Name
			msg := fmt.Sprintf("Voice %s created from %.1f s of speech", res.Voice.Name, res.Seconds)
			if res.Seed != 0 {
				msg += fmt.Sprintf(", with the seed speaker closest to it (seed %d, similarity %.2f)", res.Seed, res.SeedSimilarity)
			}
			if res.Pitch != 0 {
				msg += fmt.Sprintf(", its pitch moved %+.1f semitones to your recording's (%.0f Hz)", res.Pitch, res.ClipF0)
			}
			msg += ". Pick it in the voice list and press Preview."
			for _, w := range res.Warnings {
				msg += " " + sentence(w)
			}
			c.status.SetText(msg)
			c.check()
			c.w.host.VoicesChanged()
		})
	}()
}
