package gui

import (
	"errors"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/tts"
	"github.com/parley-voice/parley/voices"
)

func espeakCaps() tts.Capabilities {
	return tts.Capabilities{Engine: "espeak-ng", Voices: []string{"en-us", "en-gb", "de"},
		Controls: map[tts.Control]tts.Support{tts.CtlSeed: tts.Emulated, tts.CtlTemperature: tts.Emulated,
			tts.CtlSpeed: tts.Native, tts.CtlLaugh: tts.Emulated, tts.CtlPause: tts.Emulated},
		Notes: map[tts.Control]string{tts.CtlSeed: "seed → voice variant"}}
}

func chatttsCaps() tts.Capabilities {
	c := tts.Capabilities{Engine: "chattts", Controls: map[tts.Control]tts.Support{}}
	for _, ctl := range tts.AllControls {
		c.Controls[ctl] = tts.Native
	}
	return c
}

func kokoroCaps() tts.Capabilities {
	return tts.Capabilities{Engine: "kokoro", Voices: []string{"af_heart", "am_adam"},
		Controls: map[tts.Control]tts.Support{tts.CtlSeed: tts.Native, tts.CtlSpeed: tts.Native, tts.CtlPause: tts.Emulated}}
}

func voicePanelUI(t *testing.T) (*UI, fyne.Window, *fakeVoices) {
	fv := &fakeVoices{caps: map[string]tts.Capabilities{"espeak": espeakCaps(), "chattts": chatttsCaps(), "kokoro": kokoroCaps()}}
	u, w := newTestUI(t, Services{Voices: fv})
	p := u.voice
	p.engineS.SetSelected("espeak")
	waitFor(t, u, "espeak's report", func() bool { return p.capsFor == "espeak-ng" })
	return u, w, fv
}

// TestVoicePanelFollowsTheEngine: the picker lists the library's voices for the engine and
// the engine's own voices; the controls the engine ignores are disabled, each with the
// reason on hover; another engine's report changes both, with no code for that engine.
func TestVoicePanelFollowsTheEngine(t *testing.T) {
	u, _, _ := voicePanelUI(t)
	p := u.voice
	if got := strings.Join(p.picker.Options, "|"); got != "Engine default|warm (saved)|de|en-gb|en-us" {
		t.Errorf("espeak picker: %s", got)
	}
	for name, s := range map[string]*widget.Slider{"top-p": p.topP, "top-k": p.topK} {
		if !s.Disabled() {
			t.Errorf("espeak ignores %s but its slider is enabled", name)
		}
	}
	if p.temp.Disabled() || p.speed.Disabled() || p.seed.Disabled() || p.tokens["[laugh]"].Disabled() {
		t.Error("a control espeak honours is disabled")
	}
	h := p.hints[tts.CtlTopP][0]
	if !h.Visible() || !strings.Contains(h.text, "espeak-ng ignores") {
		t.Fatalf("top-p's hint %q (shown %v)", h.text, h.Visible())
	}
	h.MouseIn(&desktop.MouseEvent{})
	waitFor(t, u, "the hint on hover", func() bool { return h.shown() != "" })
	h.MouseOut()
	if h.shown() != "" {
		t.Error("the hint stays after the pointer left")
	}
	if p.hints[tts.CtlSpeed][0].Visible() {
		t.Error("speed, which espeak honours, has a hint over it")
	}
	if r := p.Request(); r.TopP == 0 { // the value is kept, the engine just does not use it
		t.Error("top-p dropped from the request")
	}

	p.engineS.SetSelected("chattts")
	waitFor(t, u, "chattts's report", func() bool { return p.capsFor == "chattts" })
	if p.topP.Disabled() || p.topK.Disabled() || p.hints[tts.CtlTopP][0].Visible() {
		t.Error("chattts samples with top-p and top-k, yet they stay disabled")
	}
	if got := strings.Join(p.picker.Options, "|"); got != "Engine default" {
		t.Errorf("chattts picker (no voices of its own, no saved ones): %s", got)
	}

	p.engineS.SetSelected("kokoro")
	waitFor(t, u, "kokoro's report", func() bool { return p.capsFor == "kokoro" })
	p.picker.SetSelected("am_adam")
	if r := p.Request(); r.Voice != "am_adam" {
		t.Errorf("kokoro voice picked: request voice %q", r.Voice)
	}
	if !p.temp.Disabled() || !p.tokens["[laugh]"].Disabled() || p.tokens["[uv_break]"].Disabled() {
		t.Error("kokoro: temperature and [laugh] should be disabled, pauses not")
	}
}

// TestPreviewReplaySaveWAV: Preview synthesizes and plays, says what it played, and offers
// Replay (the same audio again, not synthesized again) and Save WAV….
func TestPreviewReplaySaveWAV(t *testing.T) {
	u, w, fv := voicePanelUI(t)
	p := u.voice
	if !p.replay.Disabled() || !p.saveWAV.Disabled() {
		t.Error("Replay or Save WAV… offered before any preview")
	}
	test.Tap(p.preview)
	if p.status.Text != "Synthesizing…" || p.preview.Text != "Stop" {
		t.Errorf("during synthesis: status %q, button %q", p.status.Text, p.preview.Text)
	}
	waitFor(t, u, "the preview to play", func() bool { return p.preview.Text == "Preview" })
	if !strings.Contains(p.status.Text, "Played 1.5 s at 24 kHz") {
		t.Errorf("after the preview: %q", p.status.Text)
	}
	if p.replay.Disabled() || p.saveWAV.Disabled() {
		t.Fatal("no Replay or Save WAV… after a preview")
	}
	test.Tap(p.replay)
	waitFor(t, u, "the replay", func() bool { _, plays := fv.counts(); return plays == 2 && p.preview.Text == "Preview" })
	if synths, _ := fv.counts(); synths != 1 {
		t.Errorf("Replay synthesized again (%d syntheses)", synths)
	}
	test.Tap(p.saveWAV)
	if len(w.Canvas().Overlays().List()) == 0 {
		t.Error("Save WAV… opened no dialog")
	}
}

// buttonIn finds a button by its text under o.
func buttonIn(o fyne.CanvasObject, text string) *widget.Button {
	var found *widget.Button
	var walk func(o fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		if found != nil {
			return
		}
		switch v := o.(type) {
		case *widget.Button:
			if v.Text == text {
				found = v
			}
		case *fyne.Container:
			for _, c := range v.Objects {
				walk(c)
			}
		case fyne.Widget:
			for _, c := range test.WidgetRenderer(v).Objects() {
				walk(c)
			}
		}
	}
	walk(o)
	return found
}

// TestSaveDialog: the name is filled in and Save is enabled at once; a bad name disables
// it; Escape closes the dialog; Enter saves.
func TestSaveDialog(t *testing.T) {
	u, w, fv := voicePanelUI(t)
	p := u.voice
	p.seed.SetText("1234")
	test.Tap(p.save)
	ov := w.Canvas().Overlays().Top()
	if ov == nil || p.dlg == nil {
		t.Fatal("no dialog")
	}
	save := buttonIn(ov, "Save")
	if save == nil {
		t.Fatal("no Save button in the dialog")
	}
	entry, ok := w.Canvas().Focused().(*escEntry)
	if !ok {
		t.Fatalf("the name field does not have the focus (%T)", w.Canvas().Focused())
	}
	if entry.Text != "seed-1234" || save.Disabled() {
		t.Errorf("name %q, Save disabled %v: want a name and Save enabled", entry.Text, save.Disabled())
	}
	entry.SetText("Not A Name")
	if !save.Disabled() {
		t.Error("Save enabled for an invalid name")
	}
	entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
	if w.Canvas().Overlays().Top() != nil {
		t.Fatal("Escape left the dialog open")
	}
	if len(fv.saved) != 0 {
		t.Fatal("Escape saved")
	}

	test.Tap(p.save)
	entry = w.Canvas().Focused().(*escEntry)
	entry.SetText("calm")
	entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	if w.Canvas().Overlays().Top() != nil || len(fv.saved) != 1 || fv.saved[0].Name != "calm" {
		t.Errorf("Enter: dialog open %v, saved %v", w.Canvas().Overlays().Top() != nil, fv.saved)
	}
	if v := fv.saved[0]; v.Engine != "espeak" || v.Kind != voices.KindSeed || *v.Seed != 1234 {
		t.Errorf("saved %+v", v)
	}

	// the window's Escape closes a dialog whose fields do not have the focus
	test.Tap(p.save)
	w.Canvas().Unfocus()
	w.Canvas().OnTypedKey()(&fyne.KeyEvent{Name: fyne.KeyEscape})
	if w.Canvas().Overlays().Top() != nil {
		t.Error("Escape with nothing focused left the dialog open")
	}
}

// An engine that cannot open (Kokoro not installed) says so under its own name, with no
// table; going back to one that opens clears its title and its error (the panel once showed
// "What espeak-ng does" over an empty table, and the error stayed).
func TestVoicePanelEngineThatCannotOpen(t *testing.T) {
	u, _, fv := voicePanelUI(t)
	p := u.voice
	fv.broken = map[string]error{"kokoro": errors.New("kokoro-82m is not installed; run `parley models pull kokoro-82m`")}
	p.engineS.SetSelected("kokoro")
	waitFor(t, u, "kokoro's failure", func() bool { return p.capsTitle.Text == "kokoro is not available" })
	if len(p.caps.Objects) != 0 || !strings.Contains(p.status.Text, "not installed") {
		t.Errorf("table of %d rows, status %q", len(p.caps.Objects), p.status.Text)
	}
	p.engineS.SetSelected("espeak")
	waitFor(t, u, "espeak's report", func() bool { return p.capsFor == "espeak-ng" })
	if p.capsTitle.Text != "What espeak-ng does" || p.status.Text != "" || len(p.caps.Objects) == 0 {
		t.Errorf("back on espeak: title %q, status %q, %d rows", p.capsTitle.Text, p.status.Text, len(p.caps.Objects))
	}
}
