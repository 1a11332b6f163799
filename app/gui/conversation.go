package gui

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	xdraw "golang.org/x/image/draw"

	"github.com/parley-voice/parley/app"
	"github.com/parley-voice/parley/lang"

	"github.com/parley-voice/parley/app/gui/kit"
)

// conversation is the scrolling list of chat bubbles. Its methods run on the UI goroutine.
type conversation struct {
	list   *fyne.Container
	scroll *container.Scroll
	empty  fyne.CanvasObject
	hint   *widget.Label
	body   *fyne.Container // stack of empty state and scroll

	// Bubbles are keyed by the assistant's generation and its turn number: a rebuilt
	// assistant numbers its turns from 1 again, and must not write into earlier bubbles.
	gen    int
	users  map[turnKey]*bubble
	parley map[turnKey]*bubble
	voice  string // the voice shown on Parley's bubbles
	logo   image.Image
	acts   bubbleActions
	live   *bubble // the utterance being heard (partial transcripts)
}

// turnKey names one exchange of one assistant.
type turnKey struct {
	gen  int
	turn int64
}

const (
	hintVoice = "Hold the space bar or click the microphone and speak,\nor type a message below."
	hintText  = "Type a message below: Parley answers in writing\n(no microphone or speaker is in use)."
)

func newConversation() *conversation {
	c := &conversation{users: map[turnKey]*bubble{}, parley: map[turnKey]*bubble{}, logo: logoImage(112)}
	c.list = container.New(&listLayout{})
	c.scroll = container.NewVScroll(container.NewPadded(c.list))
	title := widget.NewLabelWithStyle("Talk to Parley", fyne.TextAlignCenter, fyne.TextStyle{Bold: true})
	title.SizeName = theme.SizeNameHeadingText
	c.hint = widget.NewLabel(hintVoice)
	c.hint.Alignment = fyne.TextAlignCenter
	c.hint.Importance = widget.LowImportance
	c.empty = container.NewCenter(container.NewVBox(container.NewCenter(logoMark(c.logo, 56)), title, c.hint))
	c.body = container.NewStack(c.empty, c.scroll)
	c.scroll.Hide()
	return c
}

// setTextOnly words the empty conversation's hint for an assistant without audio.
func (c *conversation) setTextOnly(on bool) {
	if on {
		c.hint.SetText(hintText)
	} else {
		c.hint.SetText(hintVoice)
	}
}

// clear empties the view (a new conversation).
func (c *conversation) clear() {
	c.live = nil
	c.list.RemoveAll()
	clear(c.users)
	clear(c.parley)
	c.scroll.Hide()
	c.empty.Show()
	c.body.Refresh()
}

func (c *conversation) add(b *bubble) {
	if len(c.list.Objects) == 0 {
		c.empty.Hide()
		c.scroll.Show()
	}
	c.list.Add(b.row)
	c.scrollDown()
}

func (c *conversation) scrollDown() {
	c.list.Refresh()
	c.scroll.Refresh()
	c.scroll.ScrollToBottom()
}

// partial shows what the recogniser makes of the utterance so far, in a provisional bubble
// of the user's that the final transcript replaces.
func (c *conversation) partial(text string) {
	if c.live == nil {
		c.live = newBubble(true, c.logo, &c.acts)
		c.live.meta.Hide()
		c.add(c.live)
	}
	c.live.setText(text + " …")
	c.scrollDown()
}

// endPartial removes the provisional bubble.
func (c *conversation) endPartial() {
	if c.live == nil {
		return
	}
	c.list.Remove(c.live.row)
	c.live = nil
	if len(c.list.Objects) == 0 {
		c.scroll.Hide()
		c.empty.Show()
	}
	c.scrollDown()
}

// userAt and parleyAt are the bubbles of the current assistant's turn (nil if none).
func (c *conversation) userAt(turn int64) *bubble   { return c.users[turnKey{c.gen, turn}] }
func (c *conversation) parleyAt(turn int64) *bubble { return c.parley[turnKey{c.gen, turn}] }

// userTurn shows (or updates) the user's bubble of a turn.
func (c *conversation) userTurn(turn int64, tr app.Transcript) {
	c.endPartial()
	k := turnKey{c.gen, turn}
	b := c.users[k]
	if b == nil {
		b = newBubble(true, c.logo, &c.acts)
		b.setTime(time.Now())
		c.users[k] = b
		c.add(b)
	}
	b.setText(tr.Text)
	b.setBadges(tagBadges(tr))
	c.scrollDown()
}

// parleyBubble returns Parley's bubble of a turn, creating it.
func (c *conversation) parleyBubble(turn int64) *bubble {
	k := turnKey{c.gen, turn}
	b := c.parley[k]
	if b == nil {
		b = newBubble(false, c.logo, &c.acts)
		b.setHeader("Parley" + voiceSuffix(c.voice))
		b.setTime(time.Now())
		c.parley[k] = b
		c.add(b)
	}
	return b
}

func voiceSuffix(v string) string {
	if v == "" {
		return ""
	}
	return " · voice " + v
}

func (c *conversation) delta(turn int64, text string) {
	b := c.parleyBubble(turn)
	b.appendText(text)
	c.scrollDown()
}

func (c *conversation) failed(turn int64, n app.Note) {
	b := c.parleyBubble(turn)
	b.setError(n)
	c.scrollDown()
}

func (c *conversation) done(ex *app.Exchange) {
	if ex == nil {
		return
	}
	if c.userAt(ex.Turn) == nil && ex.Transcript.Text != "" {
		c.userTurn(ex.Turn, ex.Transcript)
	}
	if ex.FullAnswer == "" && ex.Answer == "" && ex.Err == nil {
		return
	}
	b := c.parleyBubble(ex.Turn)
	switch {
	case ex.Interrupted:
		b.setText(ex.Answer)
		b.setInterrupted(ex.FullAnswer)
	case ex.FullAnswer != "":
		b.setText(ex.FullAnswer)
	}
	if ex.Err != nil && b.errText == "" {
		b.setError(app.NoteOf(ex.Err))
	}
	b.setLatency(ex)
	c.scrollDown()
}

// setAudio offers replay on the bubbles of a finished turn whose audio was kept.
func (c *conversation) setAudio(turn int64, user, parley string) {
	if b := c.userAt(turn); b != nil && user != "" {
		b.setAudio(user)
	}
	if b := c.parleyAt(turn); b != nil && parley != "" {
		b.setAudio(parley)
	}
}

// count is the number of bubbles shown (for tests).
func (c *conversation) count() int { return len(c.list.Objects) }

// bubble is one chat bubble: a rounded background around a header, the text, badges, marks
// and a latency bar, aligned right for the user and left for Parley.
type bubble struct {
	user    bool
	row     *fyne.Container
	bg      *kit.ThemedRect
	header  *canvas.Text
	text    *widget.RichText
	badges  *fyne.Container
	marks   *fyne.Container
	latency *fyne.Container
	meta    *fyne.Container // time, copy, replay
	at      *canvas.Text
	copyB   *widget.Button
	replayB *widget.Button
	audio   string // the turn's kept audio (store.save_audio); "" = none
	raw     string
	errText string
	acts    *bubbleActions
}

// bubbleActions are what a bubble's buttons do (the conversation's, shared by its bubbles).
type bubbleActions struct {
	copy   func(text string)
	replay func(path string)
}

func newBubble(user bool, logo image.Image, acts *bubbleActions) *bubble {
	b := &bubble{user: user, acts: acts}
	b.bg = kit.NewThemedRect(colParleyBubble, 14)
	b.text = widget.NewRichText()
	b.text.Wrapping = fyne.TextWrapWord
	b.badges = container.NewHBox()
	b.marks = container.NewVBox()
	b.latency = container.NewVBox()
	b.header = canvas.NewText("", theme.Color(theme.ColorNamePrimary))
	b.header.TextSize = theme.CaptionTextSize()
	b.header.TextStyle.Bold = true
	inner := container.New(layout.NewCustomPaddedVBoxLayout(0))
	b.at = canvas.NewText("", theme.Color(theme.ColorNamePlaceHolder))
	b.at.TextSize = theme.CaptionTextSize()
	b.copyB = widget.NewButtonWithIcon("", theme.ContentCopyIcon(), func() {
		if b.acts != nil && b.acts.copy != nil {
			b.acts.copy(strings.TrimSpace(b.raw))
		}
	})
	b.replayB = widget.NewButtonWithIcon("", theme.MediaPlayIcon(), func() {
		if b.acts != nil && b.acts.replay != nil && b.audio != "" {
			b.acts.replay(b.audio)
		}
	})
	for _, bt := range []*widget.Button{b.copyB, b.replayB} {
		bt.Importance = widget.LowImportance
	}
	b.replayB.Hide()
	b.meta = container.NewHBox(container.NewCenter(b.at), layout.NewSpacer(), b.replayB, b.copyB)
	if user {
		b.bg.SetColor(colUserBubble)
		b.badges.Hide()
		b.at.Color = kit.ThemeColor(colUserText)
		inner.Add(b.text)
		inner.Add(b.badges)
		inner.Add(b.meta)
	} else {
		inner.Add(container.New(&insetLayout{h: theme.InnerPadding(), v: 0}, b.header))
		inner.Add(b.text)
		inner.Add(b.marks)
		inner.Add(b.latency)
		inner.Add(b.meta)
	}
	b.marks.Hide()
	b.latency.Hide()
	card := container.NewStack(b.bg, container.New(&insetLayout{h: 10, v: 6}, inner))
	var avatar fyne.CanvasObject
	if !user {
		avatar = logoMark(logo, 30)
	}
	b.row = container.New(&rowLayout{b: b, avatar: avatar}, card)
	if avatar != nil {
		b.row.Add(avatar)
	}
	b.setText("")
	return b
}

func (b *bubble) setHeader(s string) { b.header.Text = s; b.header.Refresh() }

// setTime shows when the turn was said: the time of day, with the date if not today.
func (b *bubble) setTime(t time.Time) {
	if t.IsZero() {
		return
	}
	f := "15:04"
	if y, m, d := t.Date(); y != time.Now().Year() || m != time.Now().Month() || d != time.Now().Day() {
		f = "2 Jan 2006 15:04"
	}
	b.at.Text = t.Local().Format(f)
	b.at.Refresh()
}

// setAudio offers replay of the turn's kept audio.
func (b *bubble) setAudio(path string) {
	b.audio = path
	if path != "" {
		b.replayB.Show()
	} else {
		b.replayB.Hide()
	}
}

func (b *bubble) appendText(s string) { b.setText(b.raw + s) }

func (b *bubble) setText(s string) {
	b.raw = s
	shown := strings.TrimSpace(s)
	if shown == "" && !b.user {
		shown = "…"
	}
	seg := &widget.TextSegment{Text: shown, Style: widget.RichTextStyleParagraph}
	if b.user {
		seg.Style.ColorName = colUserText
	}
	b.text.Segments = []widget.RichTextSegment{seg}
	b.text.Refresh()
}

func (b *bubble) setBadges(tags []string) {
	b.badges.RemoveAll()
	for _, t := range tags {
		b.badges.Add(newBadge(t, colBadge, colUserText))
	}
	if len(tags) > 0 {
		b.badges.Show()
	} else {
		b.badges.Hide()
	}
}

func (b *bubble) setInterrupted(full string) {
	mark := widget.NewLabelWithStyle("Interrupted — the rest was not spoken", fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
	mark.Importance = widget.WarningImportance
	mark.SizeName = theme.SizeNameCaptionText
	b.marks.Add(mark)
	b.marks.Show()
}

func (b *bubble) setError(n app.Note) {
	b.errText = n.Message
	l := widget.NewLabel(friendlyError(n))
	l.Wrapping = fyne.TextWrapWord
	l.Importance = widget.DangerImportance
	l.SizeName = theme.SizeNameCaptionText
	b.marks.Add(l)
	b.marks.Show()
}

func (b *bubble) setLatency(ex *app.Exchange) {
	segs := latencySegments(ex)
	if len(segs) == 0 {
		return
	}
	b.latency.RemoveAll()
	b.latency.Add(newLatencyBar(segs))
	b.latency.Show()
}

// naturalWidth is the width the bubble's text would take on one line (capped by the layout).
func (b *bubble) naturalWidth() float32 {
	size := theme.TextSize()
	w := float32(0)
	for _, line := range strings.Split(strings.TrimSpace(b.raw), "\n") {
		if lw := fyne.MeasureText(line, size, fyne.TextStyle{}).Width; lw > w {
			w = lw
		}
	}
	w += 4 * theme.InnerPadding()
	for _, o := range []fyne.CanvasObject{b.header, b.badges, b.marks, b.latency, b.meta} {
		if o.Visible() {
			if mw := o.MinSize().Width + 2*theme.InnerPadding(); mw > w {
				w = mw
			}
		}
	}
	if !b.user && b.header.Visible() {
		if hw := fyne.MeasureText(b.header.Text, b.header.TextSize, b.header.TextStyle).Width + 4*theme.InnerPadding(); hw > w {
			w = hw
		}
	}
	if len(b.marks.Objects) > 0 {
		w = max(w, 360)
	}
	return w + 8
}

// rowLayout places a bubble (objects[0]) on the right for the user and after an avatar
// (objects[1]) on the left for Parley, at most 75% of the row wide.
type rowLayout struct {
	b      *bubble
	avatar fyne.CanvasObject
	width  float32
}

const avatarGap = 8

func (l *rowLayout) bubbleWidth(rowW float32) float32 {
	maxW := rowW * 0.75
	if l.avatar != nil {
		maxW = min(maxW, rowW-l.avatar.MinSize().Width-avatarGap)
	}
	return max(min(l.b.naturalWidth(), maxW), 40)
}

func (l *rowLayout) heightFor(rowW float32) float32 {
	card := l.b.row.Objects[0]
	w := l.bubbleWidth(rowW)
	if card.Size().Width != w {
		card.Resize(fyne.NewSize(w, card.Size().Height))
	}
	return card.MinSize().Height
}

func (l *rowLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	l.width = size.Width
	card := objs[0]
	w := l.bubbleWidth(size.Width)
	h := l.heightFor(size.Width)
	x := float32(0)
	if l.b.user {
		x = size.Width - w
	} else if l.avatar != nil {
		as := l.avatar.MinSize()
		l.avatar.Resize(as)
		l.avatar.Move(fyne.NewPos(0, 0))
		x = as.Width + avatarGap
	}
	card.Resize(fyne.NewSize(w, h))
	card.Move(fyne.NewPos(x, 0))
}

func (l *rowLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	w := l.width
	if w <= 0 {
		w = 600
	}
	return fyne.NewSize(60, l.heightFor(w))
}

// listLayout stacks rows at the full width with a gap, computing each row's height for that
// width (wrapped text needs the width first).
type listLayout struct{ width float32 }

func (l *listLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	l.width = size.Width
	y := float32(0)
	for _, o := range objs {
		h := o.MinSize().Height
		if rl, ok := rowOf(o); ok {
			h = rl.heightFor(size.Width)
			rl.width = size.Width
		}
		o.Resize(fyne.NewSize(size.Width, h))
		o.Move(fyne.NewPos(0, y))
		y += h + 2*theme.Padding()
	}
}

func (l *listLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	w := l.width
	if w <= 0 {
		w = 600
	}
	h := float32(0)
	for i, o := range objs {
		if rl, ok := rowOf(o); ok {
			h += rl.heightFor(w)
		} else {
			h += o.MinSize().Height
		}
		if i > 0 {
			h += 2 * theme.Padding()
		}
	}
	return fyne.NewSize(100, h)
}

func rowOf(o fyne.CanvasObject) (*rowLayout, bool) {
	c, ok := o.(*fyne.Container)
	if !ok {
		return nil, false
	}
	rl, ok := c.Layout.(*rowLayout)
	return rl, ok
}

// insetLayout pads its single child by h horizontally and v vertically (plus theme padding).
type insetLayout struct{ h, v float32 }

func (l *insetLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	for _, o := range objs {
		o.Move(fyne.NewPos(l.h, l.v))
		o.Resize(fyne.NewSize(size.Width-2*l.h, size.Height-2*l.v))
	}
}

func (l *insetLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var s fyne.Size
	for _, o := range objs {
		s = s.Max(o.MinSize())
	}
	return s.Add(fyne.NewSize(2*l.h, 2*l.v))
}

// newBadge is a small rounded tag.
func newBadge(text string, bg, fg fyne.ThemeColorName) fyne.CanvasObject {
	r := kit.NewThemedRect(bg, 8)
	t := canvas.NewText(text, kit.ThemeColor(fg))
	t.TextSize = theme.CaptionTextSize()
	t.TextStyle.Bold = true
	return container.NewStack(r, container.New(&insetLayout{h: 7, v: 2}, t))
}

// tagBadges turns SenseVoice's tags into readable badges.
func tagBadges(tr app.Transcript) []string {
	var out []string
	if l := languageName(tr.Lang); l != "" {
		out = append(out, l)
	}
	if e := emotionName(tr.Emotion); e != "" {
		out = append(out, e)
	}
	if e := eventName(tr.Event); e != "" {
		out = append(out, e)
	}
	return out
}

// languageName is the badge for the language SenseVoice heard, in any case ("zh" → "Mandarin":
// lang.SpokenName); "" when it heard none, another code as it is.
func languageName(code string) string {
	switch l := strings.ToLower(code); {
	case l == "" || l == "nospeech" || l == "auto":
		return ""
	case lang.Known(l):
		return lang.SpokenName(l)
	}
	return code
}

func emotionName(tag string) string {
	switch strings.ToUpper(tag) {
	case "", "EMO_UNKNOWN":
		return ""
	case "HAPPY":
		return "☺ happy"
	case "SAD":
		return "sad"
	case "ANGRY":
		return "angry"
	case "NEUTRAL":
		return "neutral"
	case "FEARFUL":
		return "fearful"
	case "DISGUSTED":
		return "disgusted"
	case "SURPRISED":
		return "surprised"
	}
	return strings.ToLower(tag)
}

func eventName(tag string) string {
	switch tag {
	case "", "Speech", "Event_UNK", "Speech_Noise":
		return ""
	case "BGM":
		return "♪ music"
	case "Laughter":
		return "laughter"
	case "Applause":
		return "applause"
	case "Cry":
		return "crying"
	case "Sneeze":
		return "sneeze"
	case "Breath":
		return "breath"
	case "Cough":
		return "cough"
	case "Sing":
		return "♪ singing"
	}
	return strings.ToLower(tag)
}

// latencySeg is one hop of a turn's latency.
type latencySeg struct {
	name string
	d    time.Duration
	col  fyne.ThemeColorName
}

// latencySegments splits an exchange's timeline into transcribe, think and first audio.
// Typed turns have no speech end; their hops count from the start of the exchange.
func latencySegments(ex *app.Exchange) []latencySeg {
	l := ex.Latency
	origin := l.SpeechEnd
	if origin.IsZero() {
		origin = ex.Start
	}
	var segs []latencySeg
	hop := func(name string, from, to time.Time, col fyne.ThemeColorName) {
		if from.IsZero() || to.IsZero() || to.Before(from) {
			return
		}
		segs = append(segs, latencySeg{name, to.Sub(from), col})
	}
	if !l.SpeechEnd.IsZero() && l.Transcript.After(l.SpeechEnd) { // typed turns have no transcription
		hop("transcribe", l.SpeechEnd, l.Transcript, colTranscribe)
	}
	think := l.Transcript
	if think.IsZero() {
		think = origin
	}
	hop("think", think, l.FirstToken, colThink)
	hop("first audio", l.FirstToken, l.FirstAudio, colAudio)
	return segs
}

func fmtDur(d time.Duration) string {
	if d < time.Millisecond {
		return "<1 ms"
	}
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// newLatencyBar draws a stacked bar of the hops and a caption naming them.
func newLatencyBar(segs []latencySeg) fyne.CanvasObject {
	var total time.Duration
	for _, s := range segs {
		total += s.d
	}
	bar := container.New(&barLayout{segs: segs, total: total})
	var parts []string
	for _, s := range segs {
		bar.Add(kit.NewThemedRect(s.col, 2))
		parts = append(parts, s.name+" "+fmtDur(s.d))
	}
	cap := canvas.NewText(strings.Join(parts, " · "), theme.Color(theme.ColorNamePlaceHolder))
	cap.TextSize = theme.CaptionTextSize() - 1
	return container.NewHBox(container.NewCenter(bar), cap)
}

// barLayout sizes the bar's segments in proportion to their durations.
type barLayout struct {
	segs  []latencySeg
	total time.Duration
}

const barWidth, barHeight = 90, 6

func (l *barLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	x := float32(0)
	for i, o := range objs {
		w := float32(barWidth) / float32(len(objs))
		if l.total > 0 {
			w = float32(barWidth) * float32(l.segs[i].d) / float32(l.total)
		}
		w = max(w, 2)
		o.Move(fyne.NewPos(x, (size.Height-barHeight)/2))
		o.Resize(fyne.NewSize(w, barHeight))
		x += w + 1
	}
}

func (l *barLayout) MinSize([]fyne.CanvasObject) fyne.Size {
	return fyne.NewSize(barWidth+float32(len(l.segs)), barHeight)
}

// logoImage decodes the app icon at a small size once, for the avatars (a conversation
// keeps one and shares it between its bubbles, so painting never decodes the PNG).
func logoImage(px int) image.Image {
	src, err := png.Decode(bytes.NewReader(iconPNG))
	if err != nil {
		return image.NewNRGBA(image.Rect(0, 0, 1, 1))
	}
	dst := image.NewNRGBA(image.Rect(0, 0, px, px))
	xdraw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), xdraw.Over, nil)
	return dst
}

// logoMark is Parley's round mark (the avatar next to its bubbles).
func logoMark(logo image.Image, size float32) fyne.CanvasObject {
	img := canvas.NewImageFromImage(logo)
	img.FillMode = canvas.ImageFillContain
	img.ScaleMode = canvas.ImageScaleSmooth
	img.SetMinSize(fyne.NewSize(size, size))
	return img
}
