package gui

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/assets"
)

// essentialModels installs what it is asked to pull, after reporting progress; failFirst
// makes the first pull fail as a dropped connection would.
type essentialModels struct {
	mu        sync.Mutex
	pulled    []string
	failFirst bool
}

func (f *essentialModels) List(context.Context) ([]assets.ModelStatus, error) { return nil, nil }
func (f *essentialModels) Pull(ctx context.Context, id string, progress func(assets.Event)) error {
	progress(assets.Event{Model: id, File: id + ".onnx", Phase: "download", Done: 1, Total: 2})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failFirst {
		f.failFirst = false
		return errors.New("connection reset by peer")
	}
	f.pulled = append(f.pulled, id)
	progress(assets.Event{Model: id, Phase: "done"})
	return nil
}
func (f *essentialModels) Verify(context.Context, string) (assets.ModelStatus, error) {
	return assets.ModelStatus{}, nil
}
func (f *essentialModels) Remove(context.Context, string) error { return nil }

func (f *essentialModels) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pulled)
}

// A first run offers the missing essential models in one card; Download fetches each with
// progress, a failure offers Retry, and once all are in the card goes and done runs.
func TestFirstRunOfferFetchesEssentials(t *testing.T) {
	fm := &essentialModels{failFirst: true}
	u, _ := newTestUI(t, Services{Models: fm})
	u.Attach(newFakeAssistant(), nil)
	missing := []assets.ModelStatus{{ID: "silero-vad-v5", State: assets.StateMissing}, {ID: "openwakeword", State: assets.StatePartial}}
	var done int
	f := u.offerFirstRun(missing, func() { done++ })
	if f == nil || !slices.Contains(u.banners.Objects, fyne.CanvasObject(f.box)) {
		t.Fatal("no first-run card above the conversation")
	}
	for _, id := range []string{"silero-vad-v5", "openwakeword", "npm registry", "typed messages"} {
		if !strings.Contains(f.msg.Text, id) {
			t.Errorf("the offer %q does not mention %q", f.msg.Text, id)
		}
	}
	test.Tap(f.get)
	waitFor(t, u, "the failed first try", func() bool { return f.get.Text == "Retry" && !f.get.Disabled() })
	if !strings.Contains(f.detail.Text, "connection reset") || done != 0 {
		t.Errorf("after a failure: detail %q, done %d", f.detail.Text, done)
	}
	test.Tap(f.get)
	waitFor(t, u, "both models", func() bool { return done == 1 })
	if got := fm.got(); !slices.Equal(got, []string{"silero-vad-v5", "openwakeword"}) {
		t.Errorf("pulled %v", got)
	}
	if slices.Contains(u.banners.Objects, fyne.CanvasObject(f.box)) {
		t.Error("the card stays after the models are installed")
	}
	if f.bar.Value != 1 {
		t.Errorf("progress ends at %.2f", f.bar.Value)
	}
}

func TestFirstRunNothingMissing(t *testing.T) {
	u, _ := newTestUI(t, Services{Models: &essentialModels{}})
	if f := u.offerFirstRun(nil, nil); f != nil || len(u.banners.Objects) != 0 {
		t.Error("an offer with nothing to fetch")
	}
	notes := []app.Note{{Part: app.PartVAD, Kind: app.NoteMissing, Model: "silero-vad-v5", Message: "voice activity: Silero VAD is not installed"},
		{Part: app.PartBrain, Kind: app.NoteFallback, Message: "brain: offline skills only"}}
	got := withoutPulls(notes, []assets.ModelStatus{{ID: "silero-vad-v5"}})
	if len(got) != 1 || got[0].Message != notes[1].Message {
		t.Errorf("withoutPulls kept %+v", got)
	}
}
