package gui

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/gpu"

	"github.com/parley-voice/parley/app/gui/kit"
)

// modelsPanel lists every registry model with its state and actions, where each engine
// runs, and the GPUs discovery found.
type modelsPanel struct {
	u        *UI
	start    *fyne.Container // "Start here": the first model to get, and the brain
	servers  []LLMServer     // what Look for servers found
	looking  bool
	last     []assets.ModelStatus
	stopPoll func() // while the panel is shown: changes made elsewhere appear
	every    time.Duration
	list     *fyne.Container
	devices  *fyne.Container
	gpus     *fyne.Container
	status   *widget.Label
	content  fyne.CanvasObject
	rows     map[string]*modelRow
	pulls    map[string]context.CancelFunc
	failed   map[string]string // the last download error of each model, shown where it was asked for
	pending  string            // a model to download once the list has loaded
}

// modelRow is one model's line.
type modelRow struct {
	st       assets.ModelStatus
	box      *fyne.Container
	state    *widget.Label
	size     *widget.Label
	progress *widget.ProgressBar
	detail   *widget.Label
	get      *widget.Button
	cancel   *widget.Button
	verify   *widget.Button
	remove   *widget.Button
}

func newModelsPanel(u *UI) *modelsPanel {
	p := &modelsPanel{u: u, rows: map[string]*modelRow{}, pulls: map[string]context.CancelFunc{}, every: 4 * time.Second}
	p.start = container.NewVBox()
	p.list = container.NewVBox()
	p.devices = container.NewVBox()
	p.gpus = container.NewVBox()
	p.status = widget.NewLabel("")
	p.status.Importance = widget.LowImportance
	refresh := widget.NewButtonWithIcon("Refresh", theme.ViewRefreshIcon(), func() { p.refresh() })
	p.content = container.NewVScroll(container.NewPadded(container.NewVBox(
		kit.Heading("Start here"),
		p.start,
		widget.NewSeparator(),
		container.NewBorder(nil, nil, kit.Heading("Models"), refresh),
		p.status,
		p.list,
		widget.NewSeparator(),
		kit.Heading("Where each engine runs"),
		p.devices,
		kit.Heading("GPUs"),
		p.gpus,
	)))
	return p
}

// shown starts (true) or stops watching the models while the panel is on screen: a
// download finished by another Parley process, or a model removed by `parley models rm`,
// shows without pressing Refresh.
func (p *modelsPanel) shown(on bool) {
	if p.stopPoll != nil {
		p.stopPoll()
		p.stopPoll = nil
	}
	if !on || p.u.svc.Models == nil {
		return
	}
	p.stopPoll = p.u.poll(p.every, p.check)
}

// check lists the models again and updates the panel only if something changed.
func (p *modelsPanel) check() {
	m := p.u.svc.Models
	if m == nil || len(p.pulls) > 0 {
		return // a download in this window reports its own progress
	}
	go func() {
		list, err := m.List(context.Background())
		if err != nil {
			return
		}
		p.u.do(func() {
			if !sameStates(list, p.last) {
				p.setModels(list)
			}
		})
	}()
}

// sameStates says whether two listings show the same thing.
func sameStates(a, b []assets.ModelStatus) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(s assets.ModelStatus) string {
		return fmt.Sprint(s.ID, s.State, s.Bytes, s.Total, s.InUse, s.Extracted)
	}
	seen := map[string]bool{}
	for _, s := range a {
		seen[key(s)] = true
	}
	for _, s := range b {
		if !seen[key(s)] {
			return false
		}
	}
	return true
}

// refresh reloads model states and the GPU list (off the UI goroutine).
func (p *modelsPanel) refresh() {
	m := p.u.svc.Models
	gpus := p.u.svc.GPUs
	if m == nil {
		p.status.SetText("Model management is not available in this build.")
	} else {
		p.status.SetText("Checking models…")
	}
	go func() {
		var list []assets.ModelStatus
		var err error
		if m != nil {
			list, err = m.List(context.Background())
		}
		var rep gpu.GPUReport
		var gerr error = ErrUnavailable
		if gpus != nil {
			rep, gerr = gpus()
		}
		p.u.do(func() {
			if m != nil {
				if err != nil {
					p.status.SetText("Could not list models: " + err.Error())
				} else {
					p.status.SetText(fmt.Sprintf("%d models in the registry, in %s", len(list), modelsDirOf(list)))
					p.setModels(list)
				}
			}
			p.setGPUs(rep, gerr)
		})
	}()
}

func modelsDirOf(list []assets.ModelStatus) string {
	for _, s := range list {
		if s.Dir != "" {
			return strings.TrimSuffix(s.Dir, "/"+s.ID)
		}
	}
	return assets.ModelsDir()
}

func (p *modelsPanel) setModels(list []assets.ModelStatus) {
	sort.SliceStable(list, func(i, j int) bool { return list[i].Kind < list[j].Kind })
	p.last = list
	p.list.RemoveAll()
	kind := ""
	for _, st := range list {
		if st.Kind != kind {
			kind = st.Kind
			l := widget.NewLabelWithStyle(kindName(kind), fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
			l.Importance = widget.LowImportance
			p.list.Add(l)
		}
		r := p.rows[st.ID]
		if r == nil {
			r = p.newRow(st)
			p.rows[st.ID] = r
		}
		r.update(st, p.pulls[st.ID] != nil)
		p.list.Add(r.box)
	}
	p.setStart()
	if id := p.pending; id != "" {
		p.pending = ""
		if r := p.rows[id]; r != nil && r.st.State != assets.StateInstalled {
			p.pull(id)
		}
	}
	p.content.Refresh()
}

func kindName(k string) string {
	switch k {
	case "asr":
		return "SPEECH RECOGNITION"
	case "vad":
		return "VOICE ACTIVITY"
	case "wake":
		return "WAKE WORDS"
	case "tts":
		return "VOICES"
	case "llm":
		return "LANGUAGE MODELS"
	case "tokenizer":
		return "TOKENIZERS"
	case "runtime":
		return "GPU RUNTIME (used from the next start; parley doctor --gpu checks the NVIDIA libraries it needs)"
	}
	return strings.ToUpper(k)
}

func (p *modelsPanel) newRow(st assets.ModelStatus) *modelRow {
	r := &modelRow{st: st}
	title := widget.NewLabelWithStyle(st.ID, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	r.state = widget.NewLabel("")
	r.size = widget.NewLabel("")
	r.size.Importance = widget.LowImportance
	r.detail = widget.NewLabel(st.Description)
	r.detail.Wrapping = fyne.TextWrapWord
	r.detail.Importance = widget.LowImportance
	r.progress = widget.NewProgressBar()
	r.progress.Hide()
	id := st.ID
	r.get = widget.NewButtonWithIcon("Download", theme.DownloadIcon(), func() { p.pull(id) })
	r.cancel = widget.NewButtonWithIcon("Cancel", theme.CancelIcon(), func() { p.cancelPull(id) })
	r.verify = widget.NewButtonWithIcon("Verify", theme.ConfirmIcon(), func() { p.verify(id) })
	r.remove = widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), func() { p.confirmRemove(id) })
	r.remove.Importance = widget.DangerImportance
	actions := container.NewHBox(r.get, r.cancel, r.verify, r.remove)
	head := container.NewBorder(nil, nil, container.NewHBox(title, r.state, r.size), actions)
	r.box = container.NewVBox(head, r.detail, r.progress, widget.NewSeparator())
	return r
}

// modelStateText is a model's state as the list shows it.
func modelStateText(st assets.ModelStatus) string {
	s := string(st.State)
	switch st.State {
	case assets.StatePartial:
		s = "partial — resumable"
	case assets.StateUnavailable:
		s = "not in this build"
	}
	if st.Demo {
		s += " · demo-grade"
	}
	if st.ID == firstASR && st.State != assets.StateInstalled {
		s += " · recommended first"
	}
	if st.Embedded {
		s += " · built in"
	}
	if st.InUse {
		s += " · in use"
	}
	return s
}

func (r *modelRow) update(st assets.ModelStatus, pulling bool) {
	r.st = st
	r.state.SetText(modelStateText(st))
	switch st.State {
	case assets.StateInstalled:
		r.state.Importance = widget.SuccessImportance
	case assets.StateCorrupt:
		r.state.Importance = widget.DangerImportance
	case assets.StatePartial:
		r.state.Importance = widget.WarningImportance
	default:
		r.state.Importance = widget.MediumImportance
	}
	if st.Demo && st.State == assets.StateInstalled {
		r.state.Importance = widget.WarningImportance
	}
	r.state.Refresh()
	r.size.SetText(sizeText(st))
	switch st.State {
	case assets.StatePartial:
		r.get.SetText("Resume")
	case assets.StateCorrupt:
		r.get.SetText("Repair")
	default:
		r.get.SetText("Download")
	}
	show := func(b *widget.Button, on bool) {
		if on {
			b.Show()
		} else {
			b.Hide()
		}
	}
	installed := st.State == assets.StateInstalled
	show(r.get, !pulling && !installed && st.State != assets.StateUnavailable && st.Downloadable)
	show(r.cancel, pulling)
	show(r.verify, !pulling && installed)
	show(r.remove, !pulling && st.State != assets.StateMissing && !st.Embedded)
	if pulling {
		r.progress.Show()
	} else {
		r.progress.Hide()
	}
}

func sizeText(st assets.ModelStatus) string {
	switch {
	case st.Total > 0 && st.State != assets.StateInstalled && st.Bytes > 0:
		return humanBytes(st.Bytes) + " of " + humanBytes(st.Total)
	case st.Total > 0:
		return humanBytes(st.Total)
	case st.Bytes > 0:
		return humanBytes(st.Bytes)
	}
	return ""
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// download opens the list and downloads id (the fix offered by a banner).
func (p *modelsPanel) download(id string) {
	p.pending = id
	p.refresh()
}

// pull downloads (or resumes) a model with a progress bar; Cancel keeps the partial files.
func (p *modelsPanel) pull(id string) {
	m := p.u.svc.Models
	r := p.rows[id]
	if m == nil || r == nil || p.pulls[id] != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.pulls[id] = cancel
	delete(p.failed, id)
	r.update(r.st, true)
	r.progress.SetValue(0)
	r.detail.SetText("Starting download…")
	before := r.st
	go func() {
		err := m.Pull(ctx, id, func(ev assets.Event) { p.u.do(func() { p.progress(id, ev) }) })
		st, serr := m.Verify(context.Background(), id)
		if serr != nil {
			st = before
		}
		p.u.do(func() {
			delete(p.pulls, id)
			cancel()
			switch {
			case err == nil:
				r.detail.SetText("Installed. " + st.Description)
				if p.u.svc.Reload != nil {
					p.u.svc.Reload() // the assistant picks the new model up now
				}
			case errors.Is(err, context.Canceled):
				r.detail.SetText("Paused — Resume continues where it stopped.")
				if st.State == assets.StateMissing {
					st.State = assets.StatePartial
				}
			default:
				r.detail.SetText("Download failed: " + err.Error())
				if p.failed == nil {
					p.failed = map[string]string{}
				}
				p.failed[id] = "Download failed: " + err.Error()
			}
			r.update(st, false)
			p.replaceStatus(st)
		})
	}()
	p.setStart()
}

// replaceStatus puts a model's new status into the listing "Start here" is built from.
func (p *modelsPanel) replaceStatus(st assets.ModelStatus) {
	for i := range p.last {
		if p.last[i].ID == st.ID {
			p.last[i] = st
		}
	}
	p.setStart()
}

// progress renders one progress event.
func (p *modelsPanel) progress(id string, ev assets.Event) {
	r := p.rows[id]
	if r == nil {
		return
	}
	if ev.Total > 0 {
		r.progress.SetValue(float64(ev.Done) / float64(ev.Total))
	}
	msg := ev.Phase
	switch ev.Phase {
	case "download":
		msg = "Downloading " + ev.File
		if ev.Total > 0 {
			msg += fmt.Sprintf(" — %s of %s", humanBytes(ev.Done), humanBytes(ev.Total))
		}
		if ev.Rate > 0 {
			msg += fmt.Sprintf(" at %s/s", humanBytes(int64(ev.Rate)))
		}
		if ev.ETA > 0 {
			msg += fmt.Sprintf(", %.0f s left", ev.ETA)
		}
	case "verify":
		msg = "Verifying " + ev.File
	case "waiting":
		msg = "Waiting for another Parley process that is downloading this model"
	case "extract":
		msg = "Extracting " + ev.File
	case "release", "converting":
		msg = strings.ToUpper(ev.Message[:1]) + ev.Message[1:]
	case "done":
		r.progress.SetValue(1)
		msg = "Done"
	}
	if ev.Message != "" {
		msg += " (" + ev.Message + ")"
	}
	r.detail.SetText(msg)
}

func (p *modelsPanel) cancelPull(id string) {
	if c := p.pulls[id]; c != nil {
		c()
	}
}

func (p *modelsPanel) verify(id string) {
	m, r := p.u.svc.Models, p.rows[id]
	if m == nil || r == nil {
		return
	}
	r.detail.SetText("Verifying checksums…")
	go func() {
		st, err := m.Verify(context.Background(), id)
		p.u.do(func() {
			if err != nil {
				r.detail.SetText("Verify failed: " + err.Error())
				return
			}
			r.update(st, false)
			if pr := st.Problems(); len(pr) > 0 {
				r.detail.SetText(strings.Join(pr, "; "))
			} else {
				r.detail.SetText("Verified: every file matches its checksum.")
			}
		})
	}()
}

func (p *modelsPanel) confirmRemove(id string) {
	p.u.showDialog(dialog.NewConfirm("Delete model", "Delete "+id+" from disk? You can download it again later.", func(ok bool) {
		if ok {
			p.remove(id)
		}
	}, p.u.win))
}

func (p *modelsPanel) remove(id string) {
	m, r := p.u.svc.Models, p.rows[id]
	if m == nil || r == nil {
		return
	}
	go func() {
		err := m.Remove(context.Background(), id)
		st, _ := m.Verify(context.Background(), id)
		p.u.do(func() {
			if err != nil {
				r.detail.SetText("Delete failed: " + err.Error())
				return
			}
			if st.ID == "" {
				st = r.st
				st.State = assets.StateMissing
			}
			r.update(st, false)
			r.detail.SetText("Deleted.")
		})
	}()
}

// setGPUs shows discovery's GPUs and where each engine runs.
func (p *modelsPanel) setGPUs(rep gpu.GPUReport, err error) {
	p.gpus.RemoveAll()
	switch {
	case err != nil:
		p.gpus.Add(widget.NewLabel("GPU discovery unavailable: " + err.Error()))
	case len(rep.Devices) == 0:
		why := rep.Reason
		if why == "" {
			why = "none found"
		}
		l := widget.NewLabel("No NVIDIA GPU (" + why + "). Every engine runs on the CPU.")
		l.Wrapping = fyne.TextWrapWord
		p.gpus.Add(l)
	default:
		for _, d := range rep.Devices {
			p.gpus.Add(widget.NewLabel(fmt.Sprintf("GPU %d: %s — %s free of %s", d.Index, d.Name,
				humanBytes(int64(d.MemoryFree)), humanBytes(int64(d.MemoryTotal)))))
		}
		p.gpus.Add(widget.NewLabel("Driver " + rep.DriverVersion + ", CUDA " + rep.CUDAVersion))
	}
	provider := "auto"
	if c := p.u.svc.Config; c != nil && c.Runtime.Provider != "" {
		provider = c.Runtime.Provider
	}
	asrDev := "CPU"
	if len(rep.Devices) > 0 && provider != "cpu" {
		n := 0
		if i := strings.IndexByte(provider, ':'); i >= 0 {
			fmt.Sscan(provider[i+1:], &n)
		}
		if n < len(rep.Devices) {
			asrDev = fmt.Sprintf("GPU %d (%s, via %s)", n, rep.Devices[n].Name, strings.SplitN(provider, ":", 2)[0])
		}
	}
	p.devices.RemoveAll()
	rows := [][2]string{
		{"Speech recognition (SenseVoice)", asrDev + " — runtime.provider = " + provider},
		{"Voice activity (Silero) and wake word", "CPU (small models, one thread)"},
		{voiceRow(p.u.voiceName), voiceDevice(p.u.voiceName, asrDev, provider)},
		{"Language model", "the LLM server's own device; offline skills on the CPU"},
	}
	g := container.NewGridWithColumns(2)
	for _, r := range rows {
		g.Add(widget.NewLabelWithStyle(r[0], fyne.TextAlignLeading, fyne.TextStyle{Bold: true}))
		v := widget.NewLabel(r[1])
		v.Wrapping = fyne.TextWrapWord
		g.Add(v)
	}
	p.devices.Add(g)
	p.content.Refresh()
}

// voiceRow is the devices table's voice row: the voice in use, when one runs.
func voiceRow(name string) string {
	if name == "" {
		return "Voice (none running)"
	}
	return "Voice (" + name + ")"
}

// voiceDevice is where the voice runs: espeak-ng on the CPU, an ONNX voice where the
// recogniser's provider puts it.
func voiceDevice(name, asrDev, provider string) string {
	if name == "" {
		return "—"
	}
	if strings.HasPrefix(name, "espeak-ng") || strings.Contains(name, "(espeak-ng)") {
		return "CPU"
	}
	return asrDev + " — runtime.provider = " + provider
}
