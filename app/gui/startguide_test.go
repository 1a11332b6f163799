package gui

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app/config"
	"github.com/parley-voice/parley/assets"
	"github.com/parley-voice/parley/store"
)

// shelf is a model store that changes underneath the panel (another Parley process, the CLI).
type shelf struct {
	mu    sync.Mutex
	list  []assets.ModelStatus
	lists int
}

func (s *shelf) set(id string, st assets.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.list {
		if s.list[i].ID == id {
			s.list[i].State = st
		}
	}
}

func (s *shelf) calls() int { s.mu.Lock(); defer s.mu.Unlock(); return s.lists }

func (s *shelf) List(context.Context) ([]assets.ModelStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	return append([]assets.ModelStatus(nil), s.list...), nil
}
func (s *shelf) Pull(context.Context, string, func(assets.Event)) error { return nil }
func (s *shelf) Verify(_ context.Context, id string) (assets.ModelStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.list {
		if m.ID == id {
			return m, nil
		}
	}
	return assets.ModelStatus{}, nil
}
func (s *shelf) Remove(context.Context, string) error { return nil }

func newShelf() *shelf {
	return &shelf{list: []assets.ModelStatus{
		{ID: "sensevoice-demo", Kind: "asr", State: assets.StateInstalled, Demo: true, Embedded: true},
		{ID: firstASR, Kind: "asr", Description: "SenseVoice-Small int8", State: assets.StatePartial, Bytes: 100, Total: 239 << 20},
		{ID: "qwen3-0.6b", Kind: "llm", Description: "Qwen3-0.6B chat model", State: assets.StateMissing},
		{ID: "qwen2.5-0.5b-instruct", Kind: "llm", Description: "Qwen2.5-0.5B", State: assets.StateInstalled},
	}}
}

// buttons lists the buttons under "Start here".
func startButtons(p *modelsPanel) map[string]*widget.Button {
	out := map[string]*widget.Button{}
	collect(p.start, func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok {
			out[b.Text] = b
		}
	})
	return out
}

// TestStartHere: the Models panel says which model to get first (SenseVoice-Small,
// recommended; Resume for a partial download) and offers the brain: local servers found and
// built-in models, each with Use, which saves the choice.
func TestStartHere(t *testing.T) {
	sh := newShelf()
	cfg := config.Default()
	saved := make(chan *config.Config, 4)
	u, _ := newTestUI(t, Services{Models: sh, Config: cfg, SaveConfig: func(c *config.Config) error { saved <- c; return nil },
		Discover: func(context.Context) []LLMServer {
			return []LLMServer{{Name: "Ollama", Kind: "ollama", URL: "http://127.0.0.1:11434", Models: []string{"llama3.2", "qwen2.5"}}}
		}})
	p := u.models
	p.refresh()
	waitFor(t, u, "the list", func() bool { return len(p.last) == 4 })
	start := strings.Join(texts(p.start), " ")
	if !strings.Contains(start, "Get this first (recommended") {
		t.Errorf("start: %q", start)
	}
	bs := startButtons(p)
	if bs["Resume SenseVoice-Small"] == nil || bs["Download"] == nil || bs["Use"] == nil {
		t.Fatalf("start buttons %v", keys(bs))
	}
	if r := p.rows[firstASR]; !strings.Contains(r.state.Text, "recommended first") {
		t.Errorf("row state %q", r.state.Text)
	}
	test.Tap(bs["Use"]) // the installed built-in model
	if c := <-saved; c.LLM.Backend != "builtin" || c.LLM.Model != "qwen2.5-0.5b-instruct" {
		t.Errorf("Use built-in saved %+v", c.LLM)
	}
	test.Tap(bs["Look for local servers"])
	waitFor(t, u, "the servers", func() bool { return strings.Contains(strings.Join(texts(p.start), " "), "Ollama at") })
	var useOllama *widget.Button
	collect(p.start, func(o fyne.CanvasObject) {
		if c, ok := o.(*fyne.Container); ok && strings.Contains(strings.Join(texts(c), " "), "Ollama at") {
			if b := buttonIn(c, "Use"); b != nil {
				useOllama = b
			}
		}
	})
	if useOllama == nil {
		t.Fatal("no Use for the server found")
	}
	test.Tap(useOllama)
	if c := <-saved; c.LLM.Backend != "ollama" || c.LLM.URL != "http://127.0.0.1:11434" || c.LLM.Model != "llama3.2" {
		t.Errorf("Use Ollama saved %+v", c.LLM)
	}
	waitFor(t, u, "the note", func() bool { return strings.Contains(strings.Join(texts(p.start), " "), "Now: llama3.2") })
}

func keys(m map[string]*widget.Button) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestModelsFollowChangesUnderneath: while the Models panel is shown, a download another
// process finished shows as installed without a click; hidden, the panel does not look.
func TestModelsFollowChangesUnderneath(t *testing.T) {
	sh := newShelf()
	u, _ := newTestUI(t, Services{Models: sh, Config: config.Default()})
	p := u.models
	p.every = 20 * time.Millisecond
	u.showTab(tabModels)
	waitFor(t, u, "the list", func() bool { return p.rows[firstASR] != nil })
	if r := p.rows[firstASR]; !strings.Contains(r.state.Text, "partial") {
		t.Fatalf("state %q", r.state.Text)
	}
	sh.set(firstASR, assets.StateInstalled)
	waitFor(t, u, "the finished download", func() bool { return strings.HasPrefix(p.rows[firstASR].state.Text, "installed") })
	if !strings.Contains(strings.Join(texts(p.start), " "), "is installed") {
		t.Error("Start here still offers the download")
	}
	u.showTab(tabConversation)
	n := sh.calls()
	time.Sleep(150 * time.Millisecond)
	drain(u)
	if sh.calls() > n+1 {
		t.Errorf("the hidden panel listed the models %d more times", sh.calls()-n)
	}
}

// TestHiddenPanelsStopPolling: hiding Models or History ends the goroutine that polled for
// them; switching tabs for a day does not pile them up.
func TestHiddenPanelsStopPolling(t *testing.T) {
	u, _ := newTestUI(t, Services{Models: newShelf(), History: &growingHistory{}, Config: config.Default()})
	u.models.every, u.history.every = time.Hour, time.Hour
	before := runtime.NumGoroutine()
	for range 100 {
		u.models.shown(true)
		u.history.shown(true)
		u.models.shown(false)
		u.history.shown(false)
	}
	deadline := time.Now().Add(30 * time.Second) // goroutines end soon after stop; a bound, not a timing
	for runtime.NumGoroutine() > before+10 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after showing and hiding the panels 100 times, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type growingHistory struct {
	fakeHistory
	mu    sync.Mutex
	convs []store.Conversation
}

func (h *growingHistory) Conversations(context.Context, int) ([]store.Conversation, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]store.Conversation(nil), h.convs...), nil
}

// TestHistoryFollowsNewConversations: a conversation stored while History is shown appears.
func TestHistoryFollowsNewConversations(t *testing.T) {
	h := &growingHistory{convs: []store.Conversation{{ID: 1, Title: "first", Exchanges: 1}}}
	u, _ := newTestUI(t, Services{History: h})
	p := u.history
	p.every = 20 * time.Millisecond
	u.showTab(tabHistory)
	waitFor(t, u, "the list", func() bool { return len(p.results.Objects) == 1 })
	h.mu.Lock()
	h.convs = append([]store.Conversation{{ID: 2, Title: "second", Exchanges: 3}}, h.convs...)
	h.mu.Unlock()
	waitFor(t, u, "the new conversation", func() bool { return len(p.results.Objects) == 2 })
}
