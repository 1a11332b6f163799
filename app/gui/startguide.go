package gui

import (
	"context"
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/llm/discover"

	"github.com/parley-voice/parley/app/gui/kit"
)

// firstASR is the model to get first: accurate speech recognition (the embedded recogniser
// is demo-grade).
const firstASR = "sensevoice-small-int8"

// setStart fills "Start here": which model to get first, and the choice of a brain (a
// local server that answers, or a model for the built-in decoder), with where things stand.
func (p *modelsPanel) setStart() {
	p.start.RemoveAll()
	var asr *assets.ModelStatus
	var llms []assets.ModelStatus
	for i, st := range p.last {
		switch {
		case st.ID == firstASR:
			asr = &p.last[i]
		case st.Kind == "llm":
			llms = append(llms, st)
		}
	}

	// 1. speech recognition
	step := func(n int, title string) *widget.Label {
		return widget.NewLabelWithStyle(fmt.Sprintf("%d. %s", n, title), fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	}
	p.start.Add(step(1, "Speech recognition"))
	switch {
	case asr == nil:
		p.start.Add(note("This build's registry has no " + firstASR + "."))
	case asr.State == assets.StateInstalled:
		ok := widget.NewLabel("SenseVoice-Small (int8) is installed: Parley hears you accurately in Chinese, English, Japanese, Korean and Cantonese.")
		ok.Wrapping = fyne.TextWrapWord
		ok.Importance = widget.SuccessImportance
		p.start.Add(ok)
	default:
		id := asr.ID
		label := "Download SenseVoice-Small"
		if asr.State == assets.StatePartial {
			label = "Resume SenseVoice-Small"
		}
		get := widget.NewButtonWithIcon(label, theme.DownloadIcon(), func() { p.pull(id) })
		get.Importance = widget.HighImportance
		if p.pulls[id] != nil {
			get.Disable()
		}
		p.start.Add(container.NewBorder(nil, nil, nil, get,
			note(fmt.Sprintf("Get this first (recommended, %s): until then Parley hears you with its small demo-grade recogniser.", humanBytes(asr.Total)))))
		p.addFailure(id)
	}

	// 2. the brain
	p.start.Add(step(2, "A language model, for open conversation"))
	p.start.Add(note("Without one Parley answers with its offline skills: time, timers, arithmetic, units. " + p.brainNow()))
	for _, s := range p.servers {
		if s.Err != "" || s.Kind == discover.KindBuiltin || len(s.Models) == 0 {
			continue
		}
		srv := s
		pick := widget.NewSelect(srv.Models, nil)
		pick.SetSelectedIndex(0)
		use := widget.NewButton("Use", func() { p.useBrain(srv.Kind, srv.URL, pick.Selected) })
		p.start.Add(container.NewBorder(nil, nil, widget.NewLabel(srv.Name+" at "+srv.URL), use, pick))
	}
	for _, st := range llms {
		id := st.ID
		desc := widget.NewLabel(fmt.Sprintf("Built in, no server: %s", st.Description))
		desc.Wrapping = fyne.TextWrapWord
		var act *widget.Button
		switch {
		case st.State == assets.StateInstalled:
			act = widget.NewButton("Use", func() { p.useBrain(discover.KindBuiltin, "", id) })
		case p.pulls[id] != nil:
			act = widget.NewButton("Downloading…", nil)
			act.Disable()
		default:
			act = widget.NewButtonWithIcon("Download", theme.DownloadIcon(), func() { p.pull(id) })
		}
		p.start.Add(container.NewBorder(nil, nil, nil, act, desc))
		p.addFailure(id)
	}
	look := widget.NewButtonWithIcon("Look for local servers", theme.SearchIcon(), func() { p.lookForServers() })
	if p.looking {
		look.SetText("Looking…")
		look.Disable()
	}
	p.start.Add(container.NewHBox(look))
}

// note is a wrapped line of low-importance text.
func note(s string) *widget.Label {
	l := widget.NewLabel(s)
	l.Wrapping = fyne.TextWrapWord
	l.Importance = widget.LowImportance
	return l
}

// brainNow says what answers now, from the configuration.
func (p *modelsPanel) brainNow() string {
	c := p.u.svc.Config
	if c == nil {
		return ""
	}
	switch b := c.LLM.Backend; {
	case b == "skills":
		return "Now: offline skills only (llm.backend skills)."
	case b == discover.KindBuiltin:
		return "Now: the built-in model " + kit.OrDefault(c.LLM.Model, "(first installed)") + "."
	case c.LLM.URL != "":
		return fmt.Sprintf("Now: %s at %s.", kit.OrDefault(c.LLM.Model, "the server's default model"), c.LLM.URL)
	}
	return "Now: any local server that answers (Ollama, llama.cpp, LM Studio), else the skills."
}

// lookForServers probes for local LLM servers and lists them with a Use button each.
func (p *modelsPanel) lookForServers() {
	d := p.u.svc.Discover
	if d == nil {
		return
	}
	p.looking = true
	p.setStart()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		found := d(ctx)
		p.u.do(func() {
			p.looking = false
			p.servers = found
			n := 0
			for _, s := range found {
				if s.Err == "" && s.Kind != discover.KindBuiltin && len(s.Models) > 0 {
					n++
				}
			}
			if n == 0 {
				p.status.SetText("No local LLM server answered (Ollama on :11434, llama.cpp on :8080, LM Studio on :1234).")
			}
			p.setStart()
		})
	}()
}

// useBrain makes the assistant think with a server's model or a built-in one (llm.* in the
// configuration, saved; the assistant restarts with it).
func (p *modelsPanel) useBrain(kind, url, model string) {
	base, save := p.u.svc.Config, p.u.svc.SaveConfig
	if base == nil || save == nil {
		p.status.SetText("Saving settings is not available here.")
		return
	}
	c := *base
	switch kind {
	case discover.KindOllama, discover.KindBuiltin:
		c.LLM.Backend = kind
	default:
		c.LLM.Backend = discover.KindOpenAI
	}
	c.LLM.URL, c.LLM.Model = url, model
	p.status.SetText("Switching the language model…")
	go func() {
		err := save(&c)
		p.u.do(func() {
			if err != nil {
				p.status.SetText("Could not switch: " + err.Error())
				return
			}
			*base = c
			p.status.SetText("Parley now thinks with " + model + ".")
			p.u.settings.load(base)
			p.setStart()
		})
	}()
}

// addFailure shows a download's error under the button that started it (the model's row,
// far down the page, says it too).
func (p *modelsPanel) addFailure(id string) {
	if msg := p.failed[id]; msg != "" {
		l := widget.NewLabel(msg)
		l.Wrapping = fyne.TextWrapWord
		l.Importance = widget.DangerImportance
		p.start.Add(l)
	}
}
