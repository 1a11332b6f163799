package gui

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/config"

	"github.com/parley-voice/parley/app/gui/kit"
)

const systemDefault = "System default"

// settingsPanel edits the configuration and saves it through app/config.
type settingsPanel struct {
	u         *UI
	input     *widget.Select
	output    *widget.Select
	testBtn   *widget.Button
	testMeter *kit.LevelMeter
	language  *widget.Select
	backend   *widget.Select
	url       *widget.Entry
	model     *widget.SelectEntry
	discover  *widget.Button
	servers   *widget.Label
	persona   *widget.Entry
	bargeIn   *widget.Select
	wakeWord  *widget.Select
	retention *widget.Entry
	saveAudio *widget.Check
	logs      *widget.Button
	diag      *widget.Button
	helpNote  *widget.Label
	gpuBtn    *widget.Button
	gpuReport *widget.Label
	sections  []*fyne.Container
	save      *widget.Button
	status    *widget.Label
	content   fyne.CanvasObject
	loaded    bool
}

// languages are the recogniser's choices: "auto" and lang.Codes, English first in this menu
// (TestLanguageNames holds them to lang.Codes).
var languages = []string{"auto", "en", "zh", "yue", "ja", "ko"}

func newSettingsPanel(u *UI) *settingsPanel {
	p := &settingsPanel{u: u}
	p.input = widget.NewSelect([]string{systemDefault}, nil)
	p.output = widget.NewSelect([]string{systemDefault}, nil)
	p.testMeter = kit.NewLevelMeter()
	p.testBtn = widget.NewButtonWithIcon("Test: record 3 s and play back", theme.MediaRecordIcon(), func() { p.test() })
	p.language = widget.NewSelect(languages, nil)
	p.backend = widget.NewSelect([]string{"auto", "openai", "ollama", "builtin", "skills"}, nil)
	p.url = widget.NewEntry()
	p.url.SetPlaceHolder("empty = discover local servers (Ollama, llama.cpp, LM Studio)")
	p.model = widget.NewSelectEntry(nil)
	p.model.SetPlaceHolder("the server's default model")
	p.servers = widget.NewLabel("")
	p.servers.Wrapping = fyne.TextWrapWord
	p.servers.Importance = widget.LowImportance
	p.discover = widget.NewButtonWithIcon("Find servers", theme.SearchIcon(), func() { p.find() })
	p.persona = widget.NewMultiLineEntry()
	p.persona.SetPlaceHolder("Parley's default persona")
	p.persona.SetMinRowsVisible(3)
	p.persona.Wrapping = fyne.TextWrapWord
	p.bargeIn = widget.NewSelect([]string{"on", "off", "min-speech"}, nil)
	p.wakeWord = widget.NewSelect([]string{"hey_jarvis", "hey_mycroft", "alexa"}, nil)
	p.retention = widget.NewEntry()
	p.retention.Validator = func(s string) error {
		if n, err := strconv.Atoi(s); err != nil || n < 0 {
			return errors.New("a number of days, 0 = forever")
		}
		return nil
	}
	p.saveAudio = widget.NewCheck("Keep what is said (replay it from the conversation)", nil)
	p.helpNote = widget.NewLabel("A bug report needs the log and the diagnostics (runtime, devices, models; no conversations).")
	p.helpNote.Wrapping = fyne.TextWrapWord
	p.helpNote.Importance = widget.LowImportance
	p.save = widget.NewButtonWithIcon("Save", theme.DocumentSaveIcon(), func() { p.Save() })
	p.save.Importance = widget.HighImportance
	p.status = widget.NewLabel("")
	p.load(u.svc.Config)

	var g formGroup // one label column for every section
	audioForm := g.form(
		widget.NewFormItem("Microphone", p.input),
		widget.NewFormItem("Speaker", p.output),
		widget.NewFormItem("", container.NewHBox(p.testBtn, container.NewCenter(p.testMeter))),
	)
	talkForm := g.form(
		widget.NewFormItem("Language", p.language),
		widget.NewFormItem("Barge-in", p.bargeIn),
		widget.NewFormItem("Wake word", p.wakeWord),
	)
	llmForm := g.form(
		widget.NewFormItem("Backend", p.backend),
		widget.NewFormItem("Server URL", container.NewVBox(container.NewBorder(nil, nil, nil, p.discover, p.url), p.servers)),
		widget.NewFormItem("Model", p.model),
		widget.NewFormItem("Persona", p.persona),
	)
	dataForm := g.form(
		widget.NewFormItem("Turn audio", p.saveAudio),
		widget.NewFormItem("Keep audio (days)", p.retention),
	)
	p.logs = widget.NewButtonWithIcon("Open log folder", theme.FolderOpenIcon(), func() { p.openLogs() })
	p.diag = widget.NewButtonWithIcon("Copy diagnostics", theme.ContentCopyIcon(), func() { p.copyDiagnostics() })
	helpForm := g.form(widget.NewFormItem("Problems", container.NewVBox(container.NewHBox(p.logs, p.diag), p.helpNote)))
	p.gpuBtn = widget.NewButtonWithIcon("Set up GPU (NVIDIA CUDA)", theme.DownloadIcon(), func() { p.setUpGPU() })
	p.gpuReport = widget.NewLabel("Models run on the CPU. For an NVIDIA GPU this fetches ONNX Runtime's CUDA provider (258 MB) and checks the driver and the CUDA and cuDNN libraries it needs.")
	p.gpuReport.Wrapping = fyne.TextWrapWord
	p.gpuReport.Importance = widget.LowImportance
	gpuForm := g.form(widget.NewFormItem("GPU", container.NewVBox(container.NewHBox(p.gpuBtn), p.gpuReport)))
	p.servers.Hide()
	p.sections = []*fyne.Container{audioForm, talkForm, llmForm, dataForm, gpuForm, helpForm}
	form := container.NewVScroll(container.NewPadded(container.NewVBox(
		kit.Heading("Audio"), audioForm,
		kit.Heading("Conversation"), talkForm,
		kit.Heading("Language model"), llmForm,
		kit.Heading("Data"), dataForm,
		kit.Heading("Inference"), gpuForm,
		kit.Heading("Help"), helpForm,
	)))
	footer := container.NewVBox(widget.NewSeparator(), container.NewPadded(container.NewBorder(nil, nil, nil, p.save, p.status)))
	p.content = container.NewBorder(nil, footer, nil, nil, form)
	return p
}

func (p *settingsPanel) load(c *config.Config) {
	if c == nil {
		c = config.Default()
	}
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	p.input.SetSelected(or(c.Audio.Input, systemDefault))
	p.output.SetSelected(or(c.Audio.Output, systemDefault))
	p.language.SetSelected(or(c.Assistant.Language, "auto"))
	p.backend.SetSelected(or(c.LLM.Backend, "auto"))
	p.url.SetText(c.LLM.URL)
	p.model.SetText(c.LLM.Model)
	p.persona.SetText(c.LLM.Persona)
	p.bargeIn.SetSelected(or(c.Assistant.BargeIn, "on"))
	p.wakeWord.SetSelected(or(c.Assistant.WakeWord, config.Default().Assistant.WakeWord))
	p.retention.SetText(strconv.Itoa(c.Store.RetentionDays))
	p.saveAudio.SetChecked(c.Store.SaveAudio)
	if d := p.u.svc.Devices; d != nil && !p.loaded {
		p.loaded = true
		go func() {
			list, err := d.List()
			p.u.do(func() { p.setDevices(list, err) })
		}()
	}
}

func (p *settingsPanel) setDevices(list []Device, err error) {
	if err != nil {
		p.status.SetText("Audio devices: " + err.Error())
		return
	}
	in, out := []string{systemDefault}, []string{systemDefault}
	for _, d := range list {
		if d.Input {
			in = append(in, d.Name)
		}
		if d.Output {
			out = append(out, d.Name)
		}
	}
	p.input.Options, p.output.Options = in, out
	p.input.Refresh()
	p.output.Refresh()
}

func devName(s string) string {
	if s == systemDefault {
		return ""
	}
	return s
}

// apply writes the form into c.
func (p *settingsPanel) apply(c *config.Config) error {
	days, err := strconv.Atoi(p.retention.Text)
	if err != nil || days < 0 {
		return fmt.Errorf("data retention: %q is not a number of days", p.retention.Text)
	}
	c.Audio.Input, c.Audio.Output = devName(p.input.Selected), devName(p.output.Selected)
	c.Assistant.Language = p.language.Selected
	c.ASR.Language = p.language.Selected
	c.LLM.Backend = p.backend.Selected
	c.LLM.URL = p.url.Text
	c.LLM.Model = p.model.Text
	c.LLM.Persona = p.persona.Text
	c.Assistant.BargeIn = p.bargeIn.Selected
	c.Assistant.WakeWord = p.wakeWord.Selected
	c.Store.RetentionDays = days
	c.Store.SaveAudio = p.saveAudio.Checked
	return c.Validate()
}

// Save validates and saves the settings (off the UI goroutine); the assistant restarts
// with them.
func (p *settingsPanel) Save() {
	base := p.u.svc.Config
	if base == nil {
		base = config.Default()
	}
	c := *base
	if err := p.apply(&c); err != nil {
		p.status.SetText(err.Error())
		p.status.Importance = widget.DangerImportance
		p.status.Refresh()
		return
	}
	save := p.u.svc.SaveConfig
	if save == nil {
		p.status.SetText("Saving is not available here.")
		return
	}
	p.status.SetText("Saving…")
	p.status.Importance = widget.LowImportance
	p.save.Disable()
	go func() {
		err := save(&c)
		p.u.do(func() {
			p.save.Enable()
			if err != nil {
				p.status.SetText("Could not save: " + err.Error())
				p.status.Importance = widget.DangerImportance
			} else {
				*base = c
				p.status.SetText("Saved " + time.Now().Format("15:04:05") + ".")
				p.status.Importance = widget.SuccessImportance
			}
			p.status.Refresh()
		})
	}()
}

// find probes for local LLM servers and fills the model picker.
func (p *settingsPanel) find() {
	d := p.u.svc.Discover
	if d == nil {
		p.servers.SetText("Discovery is not available here.")
		p.servers.Show()
		return
	}
	p.servers.SetText("Looking for local servers…")
	p.servers.Show()
	p.discover.Disable()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		found := d(ctx)
		p.u.do(func() {
			p.discover.Enable()
			var lines string
			var models []string
			for _, s := range found {
				if s.Err != "" {
					continue
				}
				if s.Kind == "builtin" {
					lines += fmt.Sprintf("built-in models (backend builtin, no server): %s\n", strings.Join(s.Models, ", "))
				} else {
					lines += fmt.Sprintf("%s at %s (%d models)\n", s.Name, s.URL, len(s.Models))
				}
				models = append(models, s.Models...)
				if p.url.Text == "" && s.URL != "" {
					p.url.SetText(s.URL)
				}
			}
			if lines == "" {
				lines = "No local server answered (Ollama on :11434, llama.cpp on :8080, LM Studio on :1234). Parley uses its offline skills until one does."
			}
			p.servers.SetText(lines)
			p.model.SetOptions(models)
		})
	}()
}

// test records three seconds on the chosen microphone and plays them back.
func (p *settingsPanel) test() {
	d := p.u.svc.Devices
	if d == nil {
		p.status.SetText("Audio devices are not available here.")
		return
	}
	in, out := devName(p.input.Selected), devName(p.output.Selected)
	p.testBtn.Disable()
	p.testBtn.SetText("Recording… speak now")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		err := d.Test(ctx, in, out, func(db float64) { p.u.do(func() { p.testMeter.SetLevel(db) }) })
		p.u.do(func() {
			p.testBtn.Enable()
			p.testBtn.SetText("Test: record 3 s and play back")
			p.testMeter.SetLevel(-100)
			if err != nil {
				p.status.SetText("Audio test failed: " + err.Error())
			} else {
				p.status.SetText("Audio test done: you should have heard yourself.")
			}
		})
	}()
}

// openLogs opens the folder of the log files in the desktop's file manager.
func (p *settingsPanel) openLogs() {
	dir := p.u.svc.LogDir
	if dir == "" {
		p.status.SetText("This build keeps no log file.")
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.status.SetText("Log folder: " + err.Error())
		return
	}
	u := &url.URL{Scheme: "file", Path: dir}
	if err := p.u.openURL(u); err != nil {
		p.status.SetText("Could not open " + dir + ": " + err.Error())
		return
	}
	p.status.SetText("Logs are in " + dir)
}

// copyDiagnostics puts doctor's report (JSON) on the clipboard.
func (p *settingsPanel) copyDiagnostics() {
	diag := p.u.svc.Diagnostics
	if diag == nil {
		p.status.SetText("Diagnostics are not available in this build.")
		return
	}
	p.diag.Disable()
	p.status.SetText("Collecting diagnostics…")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b, err := diag(ctx)
		p.u.do(func() {
			p.diag.Enable()
			if err != nil {
				p.status.SetText("Diagnostics failed: " + err.Error())
				return
			}
			p.u.clipboard(string(b))
			p.status.SetText(fmt.Sprintf("Diagnostics copied (%d bytes of JSON): paste them into a bug report.", len(b)))
		})
	}()
}

// setUpGPU runs Services.SetUpGPU (doctor --gpu) with its progress on the status line, and
// shows its report: what was installed, the GPU found, the libraries still missing with the
// line that installs them.
func (p *settingsPanel) setUpGPU() {
	setUp := p.u.svc.SetUpGPU
	if setUp == nil {
		p.status.SetText("GPU set-up is not available in this build: run `parley doctor --gpu`.")
		return
	}
	p.gpuBtn.Disable()
	p.status.SetText("Setting up the GPU runtime…")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		var last time.Time
		report, err := setUp(ctx, func(what string, done, total int64) {
			now := time.Now()
			if now.Sub(last) < 250*time.Millisecond && done != total {
				return
			}
			last = now
			text := fmt.Sprintf("Fetching %s: %s", what, mib(done))
			if total > 0 {
				text += fmt.Sprintf(" of %s", mib(total))
			}
			p.u.do(func() { p.status.SetText(text) })
		})
		p.u.do(func() {
			p.gpuBtn.Enable()
			if report != "" {
				p.gpuReport.SetText(strings.TrimSpace(report))
				p.gpuReport.Importance = widget.MediumImportance
				p.gpuReport.Refresh()
			}
			switch {
			case err != nil && report == "":
				p.status.SetText("GPU set-up failed: " + err.Error())
			case err != nil:
				p.status.SetText("Installed, but the GPU cannot run yet: see Inference above.")
			default:
				p.status.SetText("GPU runtime ready: models run on the GPU from the next start.")
			}
		})
	}()
}

func mib(n int64) string { return fmt.Sprintf("%.0f MB", float64(n)/1e6) }
