package gui

import (
	"github.com/parley-voice/parley/app/gui/internal/localefix"

	_ "embed"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
)

// icon.png is drawn by mkicon.go (go run ./app/gui/mkicon.go -o app/gui/icon.png).
//
//go:embed icon.png
var iconPNG []byte

// appIcon is Parley's app icon.
func appIcon() fyne.Resource { return fyne.NewStaticResource("parley.png", iconPNG) }

// Icon returns the app icon (for main and packaging).
func Icon() fyne.Resource { return appIcon() }

const micSVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path fill="#000000" d="M12 14c1.66 0 2.99-1.34 2.99-3L15 5c0-1.66-1.34-3-3-3S9 3.34 9 5v6c0 1.66 1.34 3 3 3zm5.3-3c0 3-2.54 5.1-5.3 5.1S6.7 14 6.7 11H5c0 3.41 2.72 6.23 6 6.72V21h2v-3.28c3.28-.48 6-3.3 6-6.72h-1.7z"/></svg>`

const micOffSVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path fill="#000000" d="M19 11h-1.7c0 .74-.16 1.43-.43 2.05l1.23 1.23c.56-.98.9-2.09.9-3.28zm-4.02.17c0-.06.02-.11.02-.17V5c0-1.66-1.34-3-3-3S9 3.34 9 5v.18l5.98 5.99zM4.27 3L3 4.27l6.01 6.01V11c0 1.66 1.33 3 2.99 3 .22 0 .44-.03.65-.08l1.66 1.66c-.71.33-1.5.52-2.31.52-2.76 0-5.3-2.1-5.3-5.1H5c0 3.41 2.72 6.23 6 6.72V21h2v-3.28c.91-.13 1.77-.45 2.54-.9L19.73 21 21 19.73 4.27 3z"/></svg>`

func micIcon() fyne.Resource {
	return theme.NewThemedResource(fyne.NewStaticResource("mic.svg", []byte(micSVG)))
}

func micOffIcon() fyne.Resource {
	return theme.NewThemedResource(fyne.NewStaticResource("mic-off.svg", []byte(micOffSVG)))
}

func init() {
	// Fyne's lang package has read the locale by now (see internal/localefix).
	localefix.Restore()
}
