package gui

import (
	"image/color"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"
)

// hint is a transparent layer over a control that says, when the pointer rests on it, why
// the control is disabled (Fyne has no tooltips). It only handles hovering: taps and drags
// reach the control under it. With no text it is hidden.
type hint struct {
	widget.BaseWidget
	text  string
	do    func(func())
	popup *widget.PopUp
	timer *time.Timer
	at    fyne.Position
}

// hintDelay is how long the pointer rests before the hint shows.
const hintDelay = 400 * time.Millisecond

func newHint(do func(func())) *hint {
	h := &hint{do: do}
	h.ExtendBaseWidget(h)
	h.Hide()
	return h
}

// overlay stacks the hint over the control.
func (h *hint) overlay(control fyne.CanvasObject) fyne.CanvasObject {
	return container.NewStack(control, h)
}

// set shows text on hover ("" removes the hint).
func (h *hint) set(text string) {
	h.text = text
	if text == "" {
		h.hide()
		h.Hide()
	} else {
		h.Show()
	}
}

// MouseIn starts the delay before the hint shows.
func (h *hint) MouseIn(e *desktop.MouseEvent) {
	h.at = e.AbsolutePosition
	if h.timer != nil {
		h.timer.Stop()
	}
	h.timer = time.AfterFunc(hintDelay, func() { h.do(h.show) })
}

// MouseMoved follows the pointer.
func (h *hint) MouseMoved(e *desktop.MouseEvent) { h.at = e.AbsolutePosition }

// MouseOut hides the hint.
func (h *hint) MouseOut() { h.hide() }

func (h *hint) show() {
	if h.text == "" || !h.Visible() {
		return
	}
	c := fyne.CurrentApp().Driver().CanvasForObject(h)
	if c == nil {
		return
	}
	if h.popup == nil {
		h.popup = widget.NewPopUp(widget.NewLabel(h.text), c)
	} else if l, ok := h.popup.Content.(*widget.Label); ok {
		l.SetText(h.text)
	}
	h.popup.ShowAtPosition(h.at.Add(fyne.NewPos(12, 16)))
}

func (h *hint) hide() {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if h.popup != nil {
		h.popup.Hide()
	}
}

// shown is the text on screen now ("" when hidden), for tests.
func (h *hint) shown() string {
	if h.popup == nil || !h.popup.Visible() {
		return ""
	}
	return h.text
}

func (h *hint) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(canvas.NewRectangle(color.Transparent))
}
