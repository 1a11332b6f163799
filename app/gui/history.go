package gui

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/store"

	"github.com/parley-voice/parley/app/gui/kit"
)

// historyPanel searches, opens, exports and deletes past conversations.
type historyPanel struct {
	u        *UI
	search   *widget.Entry
	results  *fyne.Container
	view     *fyne.Container
	title    *widget.Label
	export   *widget.Button
	del      *widget.Button
	status   *widget.Label
	content  fyne.CanvasObject
	open     int64
	last     []store.Conversation // the list shown
	stopPoll func()               // while the panel is shown: turns stored elsewhere appear
	every    time.Duration
	typing   *time.Timer  // search as you type: a pause in typing runs the search
	gen      atomic.Int64 // the latest list or search asked for: older answers are dropped
}

// searchDelay is the pause in typing after which the search runs.
const searchDelay = 250 * time.Millisecond

func newHistoryPanel(u *UI) *historyPanel {
	p := &historyPanel{u: u, every: 5 * time.Second}
	p.search = widget.NewEntry()
	p.search.SetPlaceHolder("Search every conversation…")
	p.search.OnSubmitted = func(string) { p.refresh() }
	p.search.OnChanged = func(string) {
		if p.typing != nil {
			p.typing.Stop()
		}
		p.typing = time.AfterFunc(searchDelay, func() { p.u.do(p.refresh) })
	}
	p.results = container.NewVBox()
	p.view = container.NewVBox()
	p.title = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	p.export = widget.NewButtonWithIcon("Export", theme.DocumentSaveIcon(), func() { p.exportDialog() })
	p.del = widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), func() { p.confirmDelete() })
	p.del.Importance = widget.DangerImportance
	p.export.Disable()
	p.del.Disable()
	p.status = widget.NewLabel("")
	p.status.Importance = widget.LowImportance
	left := container.NewBorder(container.NewVBox(p.search, p.status), nil, nil, nil, container.NewVScroll(p.results))
	right := container.NewBorder(container.NewBorder(nil, nil, nil, container.NewHBox(p.export, p.del), p.title), nil, nil, nil,
		container.NewVScroll(p.view))
	split := container.NewHSplit(container.NewPadded(left), container.NewPadded(right))
	split.Offset = 0.38
	p.content = split
	return p
}

// shown starts (true) or stops watching the store while the panel is on screen: turns
// added meanwhile (here, or by another Parley) show without a click.
func (p *historyPanel) shown(on bool) {
	if p.stopPoll != nil {
		p.stopPoll()
		p.stopPoll = nil
	}
	if !on || p.u.svc.History == nil {
		return
	}
	p.stopPoll = p.u.poll(p.every, p.check)
}

// check lists the conversations again when the list (not a search) is shown, and updates
// it only if something changed.
func (p *historyPanel) check() {
	h := p.u.svc.History
	if h == nil || strings.TrimSpace(p.search.Text) != "" {
		return
	}
	go func() {
		convs, err := h.Conversations(context.Background(), 100)
		if err != nil {
			return
		}
		p.u.do(func() {
			if !slices.Equal(convs, p.last) {
				p.showConversations(convs, nil)
			}
		})
	}()
}

// refresh lists recent conversations, or the search's hits.
func (p *historyPanel) refresh() {
	h := p.u.svc.History
	if h == nil {
		p.status.SetText("History is off (no store).")
		return
	}
	q := strings.TrimSpace(p.search.Text)
	gen := p.gen.Add(1)
	go func() {
		ctx := context.Background()
		if q == "" {
			convs, err := h.Conversations(ctx, 100)
			p.u.do(func() {
				if p.gen.Load() == gen {
					p.showConversations(convs, err)
				}
			})
			return
		}
		hits, err := h.Search(ctx, q, 50)
		p.u.do(func() {
			if p.gen.Load() == gen {
				p.showHits(hits, err)
			}
		})
	}()
}

func (p *historyPanel) showConversations(cs []store.Conversation, err error) {
	p.results.RemoveAll()
	p.last = cs
	if err != nil {
		p.status.SetText(err.Error())
		return
	}
	p.status.SetText(fmt.Sprintf("%d conversation%s", len(cs), kit.Plural(len(cs))))
	if len(cs) == 0 {
		p.placeholder("No conversations yet. What you say to Parley, and its answers, are kept here.")
	} else if p.open == 0 {
		p.placeholder("Pick a conversation on the left to read it here, export it or delete it.")
	}
	for _, c := range cs {
		id, title := c.ID, c.Title
		if title == "" {
			title = "Conversation " + c.Created.Format("2 Jan 15:04")
		}
		b := widget.NewButton(fmt.Sprintf("%s  ·  %s  ·  %s", title, exchanges(c.Exchanges), c.Updated.Format("2 Jan 15:04")), func() { p.openConv(id, title) })
		b.Alignment = widget.ButtonAlignLeading
		b.Importance = widget.LowImportance
		p.results.Add(b)
	}
}

// placeholder fills the empty reading pane with what to do.
func (p *historyPanel) placeholder(msg string) {
	p.view.RemoveAll()
	l := widget.NewLabel(msg)
	l.Wrapping = fyne.TextWrapWord
	l.Importance = widget.LowImportance
	p.view.Add(l)
}

func (p *historyPanel) showHits(hits []store.Hit, err error) {
	p.results.RemoveAll()
	if err != nil {
		p.status.SetText("Search: " + err.Error())
		return
	}
	p.status.SetText(fmt.Sprintf("%d match%s", len(hits), map[bool]string{true: "", false: "es"}[len(hits) == 1]))
	for _, h := range hits {
		id, title := h.ConversationID, h.Title
		snippet := store.Highlight(h.Snippet, h.Highlights, "«", "»")
		b := widget.NewButton(fmt.Sprintf("%s — %s: %s", title, h.Role, snippet), func() { p.openConv(id, title) })
		b.Alignment = widget.ButtonAlignLeading
		b.Importance = widget.LowImportance
		p.results.Add(b)
	}
}

func (p *historyPanel) openConv(id int64, title string) {
	h := p.u.svc.History
	p.open = id
	p.title.SetText(title)
	p.export.Enable()
	p.del.Enable()
	go func() {
		turns, err := h.Turns(context.Background(), id)
		p.u.do(func() {
			p.view.RemoveAll()
			if err != nil {
				p.view.Add(widget.NewLabel(err.Error()))
				return
			}
			c := newConversation()
			for _, t := range turns {
				b := newBubble(t.Role == store.RoleUser, c.logo, &p.u.conv.acts)
				b.setText(t.Text)
				at := t.Start
				if at.IsZero() {
					at = t.Created
				}
				b.setTime(at)
				b.setAudio(t.AudioPath)
				if t.Role == store.RoleUser {
					b.setBadges(tagBadges(appTranscript(t)))
				} else {
					b.setHeader("Parley" + voiceSuffix(t.Voice))
					if t.Interrupted {
						b.setInterrupted(t.Text)
					}
					if t.Error != "" {
						b.setError(app.Note{Kind: app.NoteFailed, Message: t.Error})
					}
				}
				c.list.Add(b.row)
			}
			p.view.Add(c.list)
		})
	}()
}

func (p *historyPanel) exportDialog() {
	h, id := p.u.svc.History, p.open
	if h == nil || id == 0 {
		return
	}
	p.u.saveDialog(fmt.Sprintf("parley-conversation-%d.md", id), p.status, "Exported to", "Export failed", func(dst io.Writer, name string) error {
		f := store.FormatMarkdown
		if strings.HasSuffix(strings.ToLower(name), ".json") {
			f, _ = store.ParseFormat("json")
		}
		return h.Export(context.Background(), dst, id, f)
	})
}

func (p *historyPanel) confirmDelete() {
	id := p.open
	p.u.showDialog(dialog.NewConfirm("Delete conversation", "Delete this conversation and its saved audio?", func(ok bool) {
		if !ok {
			return
		}
		go func() {
			err := p.u.svc.History.Delete(context.Background(), id)
			p.u.do(func() {
				if err != nil {
					p.status.SetText("Delete failed: " + err.Error())
					return
				}
				p.open = 0
				p.title.SetText("")
				p.placeholder("Deleted.")
				p.export.Disable()
				p.del.Disable()
				p.refresh()
			})
		}()
	}, p.u.win))
}

// exchanges counts what people count: a question and its answer are one exchange.
func exchanges(n int) string {
	if n == 1 {
		return "1 exchange"
	}
	return fmt.Sprintf("%d exchanges", n)
}

func appTranscript(t store.Turn) app.Transcript {
	return app.Transcript{Text: t.Text, Lang: t.Language, Emotion: t.Emotion, Event: t.Event}
}
