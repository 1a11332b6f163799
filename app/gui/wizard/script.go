package wizard

import "fyne.io/fyne/v2"

// Script drives the wizard from code, step by step, as a person does through its buttons:
// app/gui's real-window test walks it in the running app and captures each page. Its methods
// run on the UI goroutine, like the wizard's.
type Script struct {
	w    *Wizard
	clip *clipCloner // the Clone from a clip dialog CloneFromClip opened
}

// Script returns the wizard's driver.
func (w *Wizard) Script() *Script { return &Script{w: w} }

// Busy says whether a step's job (import, slice, label, clone, evaluate, install) runs.
func (s *Script) Busy() bool { return s.w.busy != nil }

// Create makes a dataset for goal (tune.GoalVoice, tune.GoalRecognition) and opens it.
func (s *Script) Create(name, goal string) error { return s.w.create(name, goal) }

// Prompts are the guided recording's first n sentences.
func (s *Script) Prompts(n int) []string {
	return append([]string(nil), s.w.collect.prompts[:min(n, len(s.w.collect.prompts))]...)
}

// Read keeps takes (16 kHz mono) as the recordings of the first prompts, as the guided
// recording does, and moves on to the next sentence.
func (s *Script) Read(takes [][]float32, prompts []string) error {
	var first error
	for i, pcm := range takes {
		if _, err := s.w.d.AddRecording(pcm, prompts[i]); err != nil && first == nil {
			first = err
		}
	}
	s.w.collect.idx = len(takes)
	return first
}

// Import imports recordings (step 1's Add files).
func (s *Script) Import(paths []string) { s.w.collect.importPaths(paths) }

// Show switches to a step's page: 0 Collect, 1 Slice, 2 Label, 3 Proofread, 4 Train,
// 5 Evaluate, 6 Install.
func (s *Script) Show(step int) { s.w.show(step) }

// Slice cuts the recordings into clips (step 2).
func (s *Script) Slice() { s.w.show(stepSlice); s.w.slice.slice() }

// OnlyBad shows only the clips step 2 set aside.
func (s *Script) OnlyBad() { s.w.slice.onlyBad.SetChecked(true) }

// Label transcribes the clips (step 3).
func (s *Script) Label() { s.w.show(stepLabel); s.w.label.label() }

// Proofread shows step 4 and corrects the first clip's text to text.
func (s *Script) Proofread(text string) {
	s.w.show(stepProof)
	if len(s.w.proof.rows) > 0 {
		s.w.proof.setText(s.w.proof.rows[0].ID, text)
	}
}

// QuickClone shows step 5 and makes the dataset's quick clone (the voice goal).
func (s *Script) QuickClone() { s.w.show(stepTrain); s.w.train.quick.makeClone() }

// CompareVoices compares the quick clone with a random voice.
func (s *Script) CompareVoices() { s.w.train.quick.runCompare() }

// SetGoal picks the dataset's goal (tune.GoalVoice, tune.GoalRecognition) and shows step 5.
func (s *Script) SetGoal(goal string) {
	s.w.goalSel.SetSelected(goalLabels[goal])
	s.w.show(stepTrain)
}

// TrainChecked says whether step 5's checks are done, and whether training can start.
func (s *Script) TrainChecked() (checked, ready bool) {
	t := s.w.train
	checked = t.checked != "" || t.checkEr != nil
	return checked, checked && !t.start.Disabled()
}

// Train starts step 5's job.
func (s *Script) Train() { s.w.train.begin(false) }

// Training says whether step 5's job runs.
func (s *Script) Training() bool { return s.w.train.run }

// TrainProgress is the running job's newest step and its steps in all.
func (s *Script) TrainProgress() (step, total int) {
	t := s.w.train
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live.Step, t.live.TotalSteps
}

// Evaluate shows step 6 and evaluates the trained job.
func (s *Script) Evaluate() { s.w.show(stepEval); s.w.eval.evaluate() }

// Install shows step 7 and installs the result when the evaluation found it better; it
// says whether it did.
func (s *Script) Install() bool {
	s.w.show(stepInstall)
	if ev := s.w.eval.evaluation(); ev != nil && ev.Improved {
		s.w.install.install()
		return true
	}
	return false
}

// InstallAnyway installs the result whatever the evaluation found (step 7's button).
func (s *Script) InstallAnyway() { s.w.show(stepInstall); s.w.install.install() }

// CloneFromClip opens Clone from a clip and loads the recording at path; false when the
// dialog is not offered here.
func (s *Script) CloneFromClip(path string) bool {
	s.clip = s.w.showCloneFromClip()
	if s.clip == nil {
		return false
	}
	s.clip.load(path)
	return true
}

// ClipHeard says whether the clip has been transcribed (its language shown).
func (s *Script) ClipHeard() bool { return s.clip.lang.Text != "" }

// CreateClipVoice corrects the clip's transcript to text and creates the voice name.
func (s *Script) CreateClipVoice(text, name string) {
	s.clip.text.SetText(text)
	s.clip.name.SetText(name)
	s.clip.createVoice()
}

// ClipCreating says whether the clip's voice is still being made.
func (s *Script) ClipCreating() bool { return s.clip.creating }

// ClipContent is the Clone from a clip dialog's content.
func (s *Script) ClipContent() fyne.CanvasObject { return s.clip.box }
