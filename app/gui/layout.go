package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// formGroup lays several forms out with one label column, so that the fields of every
// section start at the same x (widget.Form sizes its label column per form).
type formGroup struct{ forms []*fyne.Container }

// form is one section: a label and a field per row.
func (g *formGroup) form(items ...*widget.FormItem) *fyne.Container {
	var objs []fyne.CanvasObject
	for _, it := range items {
		l := widget.NewLabelWithStyle(it.Text, fyne.TextAlignTrailing, fyne.TextStyle{Bold: true})
		objs = append(objs, l, it.Widget)
	}
	c := container.New(&groupFormLayout{g: g}, objs...)
	g.forms = append(g.forms, c)
	return c
}

// labelWidth is the widest label of the group.
func (g *formGroup) labelWidth() float32 {
	w := float32(0)
	for _, f := range g.forms {
		for i := 0; i < len(f.Objects); i += 2 {
			w = max(w, f.Objects[i].MinSize().Width)
		}
	}
	return w
}

type groupFormLayout struct{ g *formGroup }

func (l *groupFormLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	lw, pad := l.g.labelWidth(), theme.Padding()
	y := float32(0)
	for i := 0; i+1 < len(objs); i += 2 {
		label, field := objs[i], objs[i+1]
		h := max(label.MinSize().Height, field.MinSize().Height)
		label.Move(fyne.NewPos(0, y))
		label.Resize(fyne.NewSize(lw, label.MinSize().Height))
		field.Move(fyne.NewPos(lw+pad, y))
		field.Resize(fyne.NewSize(size.Width-lw-pad, h))
		y += h + pad
	}
}

func (l *groupFormLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	lw, pad := l.g.labelWidth(), theme.Padding()
	w, h := float32(0), float32(0)
	for i := 0; i+1 < len(objs); i += 2 {
		label, field := objs[i].MinSize(), objs[i+1].MinSize()
		w = max(w, field.Width)
		h += max(label.Height, field.Height)
		if i > 0 {
			h += pad
		}
	}
	return fyne.NewSize(lw+pad+w, h)
}
