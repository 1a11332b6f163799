package gui

import (
	"fmt"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// notInBuild is why steps 5–7 cannot run in this build: the fine-tune jobs (trainer launch,
// evaluation, install) come with the training side of issue 19.
const notInBuild = "Fine-tuning is not in this build of Parley yet: the training, evaluation and install jobs are still being built. " +
	"Your dataset is kept as it is; when Parley is updated, this step starts from it."

// laterPage is one of steps 5–7 (train, evaluate, install): what it will do, what it needs,
// and why it cannot start.
type laterPage struct {
	w      *wizard
	step   int
	needs  *widget.Label
	why    *widget.Label
	action *widget.Button
	box    fyne.CanvasObject
}

func newLaterPage(w *wizard, step int) *laterPage {
	p := &laterPage{w: w, step: step}
	p.needs = widget.NewLabel("")
	p.needs.Wrapping = fyne.TextWrapWord
	p.why = widget.NewLabel("")
	p.why.Wrapping = fyne.TextWrapWord
	p.why.Importance = widget.WarningImportance
	var title, intro, action string
	var icon fyne.Resource
	switch step {
	case stepTrain:
		title, action, icon = "5  Train", "Start training", theme.MediaPlayIcon()
		intro = "Parley fine-tunes the installed model on your clips as a job: a progress bar with the time left, a live loss plot, Cancel, " +
			"and it resumes where it stopped after Parley restarts. It checks Python and PyTorch first and tells you the exact install line when they are missing; " +
			"with more than one GPU it trains on all of them."
	case stepEval:
		title, action, icon = "6  Evaluate", "Evaluate", theme.SearchIcon()
		intro = "Sentences you did not record are spoken by the voice before and after fine-tuning. Parley measures how close each sounds to your held-out clips " +
			"(speaker similarity) and how well the recogniser understands it (character error rate), and you listen to both, A then B."
	case stepInstall:
		title, action, icon = "7  Install", "Add to my voices", theme.DownloadIcon()
		intro = "The fine-tuned voice is exported, checked and added to the voice library, where the conversation, `parley say` and the server can use it. " +
			"Nothing half-installed is left behind if anything fails."
	}
	p.action = widget.NewButtonWithIcon(action, icon, nil)
	p.action.Importance = widget.HighImportance
	p.action.Disable()
	p.box = pageFrame(title, intro, container.NewVBox(p.needs, p.why, container.NewHBox(p.action)), nil)
	return p
}

func (p *laterPage) view() fyne.CanvasObject { return p.box }

// state: these steps are never done in this build; the reason names what is missing first.
func (p *laterPage) state() (bool, string) {
	w := p.w
	if w.d == nil {
		return false, "Create or open a dataset first."
	}
	s := w.d.Summary()
	switch {
	case s.Usable == 0:
		return false, "There is no usable clip to train on yet: finish steps 1–4."
	case p.step == stepEval:
		return false, "Train first (step 5). " + notInBuild
	case p.step == stepInstall:
		return false, "Train and evaluate first (steps 5 and 6). " + notInBuild
	}
	return false, notInBuild
}

func (p *laterPage) refresh() {
	w := p.w
	s := w.d.Summary()
	what := "a voice that sounds like you"
	if w.goal == goalRecognition {
		what = "the speech recogniser, so it understands you better"
	}
	txt := fmt.Sprintf("Goal: %s. Data: %d usable clips, %s of speech.", what, s.Usable, minutes(s.UsableMinutes))
	if w.goal == goalVoice && s.UsableMinutes < minVoiceMinutes {
		txt += fmt.Sprintf(" A voice wants at least %.0f minutes.", minVoiceMinutes)
	}
	p.needs.SetText(txt)
	_, why := p.state()
	p.why.SetText(why)
}
