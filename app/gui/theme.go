package gui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"

	"github.com/parley-voice/parley/app/gui/kit"
)

// Colour names of Parley's own surfaces; the theme maps them for light and dark variants.
const (
	colUserBubble   fyne.ThemeColorName = "parley.userBubble"
	colUserText     fyne.ThemeColorName = "parley.userText"
	colParleyBubble fyne.ThemeColorName = "parley.parleyBubble"
	colBadge        fyne.ThemeColorName = "parley.badge"
	colTranscribe   fyne.ThemeColorName = "parley.transcribe"
	colThink        fyne.ThemeColorName = "parley.think"
	colAudio        fyne.ThemeColorName = "parley.audio"
	colMeter                            = kit.ColMeter
	colMeterTrack                       = kit.ColMeterTrack
	colVADOn        fyne.ThemeColorName = "parley.vadOn"
	colWave                             = kit.ColWave
)

// parleyTheme is Fyne's default theme (which follows the system's light or dark preference)
// with Parley's accent colour and the colours of bubbles, badges and meters.
type parleyTheme struct{ fyne.Theme }

func newTheme() fyne.Theme { return parleyTheme{theme.DefaultTheme()} }

var (
	accent     = color.NRGBA{R: 0x4f, G: 0x5b, B: 0xd5, A: 0xff} // indigo
	accentDark = color.NRGBA{R: 0x9a, G: 0xa2, B: 0xf5, A: 0xff} // lighter: text on dark surfaces
	nearBlack  = color.NRGBA{R: 0x17, G: 0x17, B: 0x18, A: 0xff}
	white      = color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xff}
)

// Text colours meet WCAG AA (4.5:1) on every surface they are drawn on, in both variants
// (TestContrast computes it). Fyne's defaults do not: its light foreground is a mid grey, and
// "low importance" text (LowImportance labels use the disabled colour) is 1.55:1 on the dark
// background.
var (
	textLight     = color.NRGBA{R: 0x1f, G: 0x1f, B: 0x1f, A: 0xff}
	subtleLight   = color.NRGBA{R: 0x66, G: 0x66, B: 0x66, A: 0xff} // low importance, placeholders, disabled
	subtleDark    = color.NRGBA{R: 0xa0, G: 0xa0, B: 0xa0, A: 0xff}
	errorLight    = color.NRGBA{R: 0xc6, G: 0x28, B: 0x28, A: 0xff}
	errorDark     = color.NRGBA{R: 0xff, G: 0x8a, B: 0x80, A: 0xff}
	warningLight  = color.NRGBA{R: 0x9a, G: 0x5b, B: 0x00, A: 0xff}
	warningDark   = color.NRGBA{R: 0xff, G: 0xa7, B: 0x26, A: 0xff}
	successLight  = color.NRGBA{R: 0x28, G: 0x7a, B: 0x2e, A: 0xff}
	successDark   = color.NRGBA{R: 0x43, G: 0xf4, B: 0x36, A: 0xff}
	placeholderDk = color.NRGBA{R: 0xb2, G: 0xb2, B: 0xb2, A: 0xff}
)

func (t parleyTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	dark := v != theme.VariantLight
	pick := func(light, darkc color.NRGBA) color.Color {
		if dark {
			return darkc
		}
		return light
	}
	switch n {
	case theme.ColorNamePrimary, theme.ColorNameFocus:
		if n == theme.ColorNameFocus {
			c := accent
			c.A = 0x60
			return c
		}
		return pick(accent, accentDark)
	case theme.ColorNameHyperlink:
		return pick(accent, accentDark)
	case theme.ColorNameForegroundOnPrimary:
		return pick(white, nearBlack)
	case theme.ColorNameForeground:
		if !dark {
			return textLight
		}
	case theme.ColorNameDisabled:
		return pick(subtleLight, subtleDark)
	case theme.ColorNamePlaceHolder:
		return pick(subtleLight, placeholderDk)
	case theme.ColorNameError:
		return pick(errorLight, errorDark)
	case theme.ColorNameForegroundOnError:
		return pick(white, nearBlack)
	case theme.ColorNameWarning:
		return pick(warningLight, warningDark)
	case theme.ColorNameForegroundOnWarning:
		return pick(white, nearBlack)
	case theme.ColorNameSuccess:
		return pick(successLight, successDark)
	case theme.ColorNameForegroundOnSuccess:
		return pick(white, nearBlack)
	case theme.ColorNameSelection:
		return pick(color.NRGBA{R: 0x4f, G: 0x5b, B: 0xd5, A: 0x30}, color.NRGBA{R: 0x7c, G: 0x86, B: 0xf0, A: 0x40})
	case colUserBubble:
		return pick(accent, color.NRGBA{R: 0x45, G: 0x4f, B: 0xb8, A: 0xff})
	case colUserText:
		return white
	case colParleyBubble:
		return pick(color.NRGBA{R: 0xee, G: 0xf0, B: 0xf5, A: 0xff}, color.NRGBA{R: 0x2c, G: 0x2f, B: 0x38, A: 0xff})
	case colBadge: // a darker pill on the user's bubble, under white text
		return color.NRGBA{R: 0x00, G: 0x00, B: 0x00, A: 0x38}
	case colTranscribe:
		return color.NRGBA{R: 0x26, G: 0xa6, B: 0x9a, A: 0xff}
	case colThink:
		return color.NRGBA{R: 0xf5, G: 0x9e, B: 0x0b, A: 0xff}
	case colAudio:
		return color.NRGBA{R: 0x8b, G: 0x5c, B: 0xf6, A: 0xff}
	case colMeter:
		return color.NRGBA{R: 0x22, G: 0xc5, B: 0x5e, A: 0xff}
	case colMeterTrack:
		return pick(color.NRGBA{R: 0xdd, G: 0xe1, B: 0xe8, A: 0xff}, color.NRGBA{R: 0x3a, G: 0x3e, B: 0x48, A: 0xff})
	case colVADOn:
		return color.NRGBA{R: 0x22, G: 0xc5, B: 0x5e, A: 0xff}
	case colWave:
		return pick(color.NRGBA{R: 0x4f, G: 0x5b, B: 0xd5, A: 0xb0}, color.NRGBA{R: 0x7c, G: 0x86, B: 0xf0, A: 0xc0})
	}
	return t.Theme.Color(n, v)
}

func (t parleyTheme) Size(n fyne.ThemeSizeName) float32 {
	switch n {
	case theme.SizeNameInputRadius, theme.SizeNameSelectionRadius:
		return 6
	}
	return t.Theme.Size(n)
}
