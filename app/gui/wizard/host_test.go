package wizard

import (
	"context"
	"errors"
	"image/color"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/app/tune"
)

// testUI is the window around the wizard in its tests, and the Host it sees: a Fyne test
// window with the main window's tabs (the wizard's last, as app/gui lays them out, so a
// page's width is checked with the tab bar beside it), UI callbacks queued for the test
// goroutine, and an assistant's microphone as app/gui's window holds it.
type testUI struct {
	app    fyne.App
	win    fyne.Window
	tabs   *container.AppTabs
	wizard *Wizard
	svc    Services
	q      chan func()

	muted      bool // the assistant's microphone is held (app/gui: muted, push-to-talk)
	pushToTalk bool // the assistant listens only while Talk is held: nothing to hold
	holds      int  // HoldMic calls that held it
	releases   int
	voices     int // VoicesChanged calls
}

// Services are what a test gives the wizard: the datasets' service with its microphone and
// speaker (app/gui's Cloning), the training roles, the configuration.
type Services struct {
	Clone      cloning
	Training   training
	Config     *config.Config
	SaveConfig func(*config.Config) error
}

type cloning interface {
	tune.Preparer
	tune.Cloner
	Takes
}

type training interface {
	tune.Readiness
	tune.Jobs
	tune.Evaluator
	tune.Installer
}

func (s Services) roles() Roles {
	var r Roles
	if s.Clone != nil {
		r.Preparer, r.Cloner = s.Clone, s.Clone
	}
	if s.Training != nil {
		r.Readiness, r.Jobs, r.Evaluator, r.Installer = s.Training, s.Training, s.Training, s.Training
	}
	return r
}

var _ Host = (*testUI)(nil)

func (u *testUI) Window() fyne.Window           { return u.win }
func (u *testUI) Preferences() fyne.Preferences { return u.app.Preferences() }
func (u *testUI) Do(fn func())                  { u.q <- fn }
func (u *testUI) OnScreen() bool {
	return u.tabs != nil && u.tabs.Selected() != nil && u.tabs.Selected().Text == Tab
}

func (u *testUI) HoldMic() bool {
	if u.muted || u.pushToTalk {
		return false
	}
	u.muted = true
	u.holds++
	return true
}

func (u *testUI) ReleaseMic()    { u.muted = false; u.releases++ }
func (u *testUI) VoicesChanged() { u.voices++ }

func (u *testUI) Config() (*config.Config, func(*config.Config) error) {
	return u.svc.Config, u.svc.SaveConfig
}

var errNoDevices = errors.New("no microphone or speaker in this test")

func (u *testUI) Record(ctx context.Context, max time.Duration, level func(float64)) ([]float32, error) {
	if u.svc.Clone == nil {
		return nil, errNoDevices
	}
	return u.svc.Clone.Record(ctx, max, level)
}

func (u *testUI) Play(ctx context.Context, pcm []float32) error {
	if u.svc.Clone == nil {
		return errNoDevices
	}
	return u.svc.Clone.Play(ctx, pcm)
}

// Content is the window's content: the tabs.
func (u *testUI) Content() fyne.CanvasObject { return u.tabs }

// newTestUI builds the wizard in a test window of a new test app.
func newTestUI(t testing.TB, svc Services) (*testUI, fyne.Window) {
	t.Helper()
	a := test.NewTempApp(t)
	a.Settings().SetTheme(testTheme{theme.DefaultTheme()})
	return newTestUIOn(t, a, svc)
}

// testTheme is Fyne's default theme, as app/gui's is, with a colour for each of Parley's own
// colour names (app/gui's theme has the real ones).
type testTheme struct{ fyne.Theme }

func (t testTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	if strings.HasPrefix(string(n), "parley.") {
		return t.Theme.Color(theme.ColorNamePrimary, v)
	}
	return t.Theme.Color(n, v)
}

// newTestUIOn builds the wizard in a new window of a (running) app: the app started again.
func newTestUIOn(t testing.TB, a fyne.App, svc Services) (*testUI, fyne.Window) {
	t.Helper()
	w := a.NewWindow("Parley")
	u := &testUI{app: a, win: w, svc: svc, q: make(chan func(), 1<<16)}
	u.wizard = New(u, svc.roles())
	// the main window's tabs (app/gui's names), the wizard's last
	other := func(name string, icon fyne.Resource) *container.TabItem {
		return container.NewTabItemWithIcon(name, icon, widget.NewLabel(name))
	}
	u.tabs = container.NewAppTabs(
		other("Conversation", theme.MailComposeIcon()),
		other("Voice", theme.VolumeUpIcon()),
		other("Models", theme.DownloadIcon()),
		other("Settings", theme.SettingsIcon()),
		other("History", theme.HistoryIcon()),
		container.NewTabItemWithIcon(Tab, theme.ComputerIcon(), u.wizard.Content()),
	)
	u.tabs.SetTabLocation(container.TabLocationLeading)
	u.tabs.OnSelected = func(t *container.TabItem) {
		u.wizard.TabChanged(t.Text)
		if t.Text == Tab {
			u.wizard.Shown()
		}
	}
	w.SetContent(u.tabs)
	w.Resize(fyne.NewSize(1000, 700))
	return u, w
}

// drain runs the UI callbacks queued by background goroutines, on the test goroutine, so the
// UI stays single-threaded as it is under the real driver.
func drain(u *testUI) {
	for {
		select {
		case fn := <-u.q:
			fn()
		default:
			return
		}
	}
}

// waitFor runs queued UI callbacks until cond holds; the bound only keeps a broken UI from
// hanging the test.
func waitFor(t *testing.T, u *testUI, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		drain(u)
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// texts are the labels and canvas texts in o's containers.
func texts(o fyne.CanvasObject) []string {
	var out []string
	collect(o, func(o fyne.CanvasObject) {
		switch v := o.(type) {
		case *widget.Label:
			out = append(out, v.Text)
		case *canvas.Text:
			out = append(out, v.Text)
		}
	})
	return out
}

func collect(o fyne.CanvasObject, fn func(fyne.CanvasObject)) {
	fn(o)
	if c, ok := o.(*fyne.Container); ok {
		for _, ch := range c.Objects {
			collect(ch, fn)
		}
	}
}
