package gui

import (
	"fmt"
	"image/color"
	"math"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
)

// luminance is WCAG 2's relative luminance of an opaque colour.
func luminance(c color.Color) float64 {
	r, g, b, _ := color.NRGBAModel.Convert(c).(color.NRGBA).RGBA()
	lin := func(v uint32) float64 {
		x := float64(v>>8) / 255
		if x <= 0.03928 {
			return x / 12.92
		}
		return math.Pow((x+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
}

// contrast is WCAG 2's contrast ratio of two opaque colours.
func contrast(a, b color.Color) float64 {
	la, lb := luminance(a), luminance(b)
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)
}

// over composites c (which may be translucent) on the opaque bg, as the painter blends.
func over(c, bg color.Color) color.Color {
	f := color.NRGBAModel.Convert(c).(color.NRGBA)
	b := color.NRGBAModel.Convert(bg).(color.NRGBA)
	a := float64(f.A) / 255
	mix := func(x, y uint8) uint8 { return uint8(math.Round(float64(x)*a + float64(y)*(1-a))) }
	return color.NRGBA{R: mix(f.R, b.R), G: mix(f.G, b.G), B: mix(f.B, b.B), A: 0xff}
}

// TestContrast: every text colour Parley draws meets WCAG AA (4.5:1) on every surface it is
// drawn on, in the light and the dark variant: "low importance" text (LowImportance labels
// are drawn in the disabled colour: model descriptions, section headers, hints, counts,
// "ignored" rows), placeholders and captions, coloured importances, button labels, and the
// user's bubble with its badges.
func TestContrast(t *testing.T) {
	th := newTheme()
	texts := []fyne.ThemeColorName{theme.ColorNameForeground, theme.ColorNameDisabled, theme.ColorNamePlaceHolder,
		theme.ColorNamePrimary, theme.ColorNameHyperlink, theme.ColorNameError, theme.ColorNameWarning, theme.ColorNameSuccess}
	surfaces := []fyne.ThemeColorName{theme.ColorNameBackground, theme.ColorNameInputBackground, colParleyBubble,
		theme.ColorNameOverlayBackground, theme.ColorNameMenuBackground, theme.ColorNameButton, theme.ColorNameDisabledButton,
		theme.ColorNameHeaderBackground}
	type pair struct {
		what   string
		fg, bg color.Color
	}
	for _, v := range []fyne.ThemeVariant{theme.VariantLight, theme.VariantDark} {
		c := func(n fyne.ThemeColorName) color.Color { return th.Color(n, v) }
		bg := c(theme.ColorNameBackground)
		solid := func(n fyne.ThemeColorName) color.Color { return over(c(n), bg) }
		var pairs []pair
		for _, tx := range texts {
			for _, s := range surfaces {
				pairs = append(pairs, pair{fmt.Sprintf("%s text on %s", tx, s), c(tx), solid(s)})
			}
		}
		user := solid(colUserBubble)
		pairs = append(pairs,
			pair{"the user's text on their bubble", c(colUserText), user},
			pair{"a badge on the user's bubble", c(colUserText), over(c(colBadge), user)},
			pair{"a primary button's label", c(theme.ColorNameForegroundOnPrimary), solid(theme.ColorNamePrimary)},
			pair{"a danger button's label", c(theme.ColorNameForegroundOnError), solid(theme.ColorNameError)},
			pair{"a warning button's label", c(theme.ColorNameForegroundOnWarning), solid(theme.ColorNameWarning)},
			pair{"a success button's label", c(theme.ColorNameForegroundOnSuccess), solid(theme.ColorNameSuccess)},
		)
		name := map[fyne.ThemeVariant]string{theme.VariantLight: "light", theme.VariantDark: "dark"}[v]
		for _, p := range pairs {
			if r := contrast(p.fg, p.bg); r < 4.5 {
				t.Errorf("%s theme: %s is %.2f:1, want ≥ 4.5:1", name, p.what, r)
			}
		}
	}
	// and the text hierarchy stays visible: low-importance text differs from the normal text
	for _, v := range []fyne.ThemeVariant{theme.VariantLight, theme.VariantDark} {
		if r := contrast(th.Color(theme.ColorNameForeground, v), th.Color(theme.ColorNameDisabled, v)); r < 1.8 {
			t.Errorf("variant %d: low-importance text is hardly different from normal text (%.2f:1)", v, r)
		}
	}
}

// TestContrastFormula checks the ratio against WCAG's published extremes and a known pair.
func TestContrastFormula(t *testing.T) {
	black, white := color.NRGBA{A: 0xff}, color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xff}
	if r := contrast(black, white); math.Abs(r-21) > 1e-9 {
		t.Errorf("black on white %.3f, want 21", r)
	}
	if r := contrast(white, white); r != 1 {
		t.Errorf("white on white %.3f, want 1", r)
	}
	// #777777 on white is the classic just-failing grey: 4.48:1
	if r := contrast(color.NRGBA{R: 0x77, G: 0x77, B: 0x77, A: 0xff}, white); math.Abs(r-4.48) > 0.01 {
		t.Errorf("#777 on white %.3f, want 4.48", r)
	}
}
