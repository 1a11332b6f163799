// Package skills is Parley's offline brain: time and date, timers and alarms (persisted),
// arithmetic and unit conversions, "repeat after me", "what can you do" and controls of
// Parley itself (voice, speed, language) as typed actions. Intent matching tolerates speech
// recognition errors in English and Chinese. The same skills are offered to capable LLMs as
// OpenAI-style tools with JSON schemas (see Tools and Call).
package skills

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Action kinds: controls of Parley that the app executes.
const (
	ActionVoice    = "voice"    // Value: a voice name, or "next"
	ActionSpeed    = "speed"    // Amount: relative change, +0.15 faster, -0.15 slower
	ActionLanguage = "language" // Value: "en", "zh", "yue", "ja", "ko", …
	ActionStop     = "stop"     // stop speaking
)

// SpeedStep is the relative speed change of one "faster"/"slower".
const SpeedStep = 0.15

// Action is a control the app executes after (or instead of) speaking the reply.
type Action struct {
	Kind   string  `json:"kind"`
	Value  string  `json:"value,omitempty"`
	Amount float64 `json:"amount,omitempty"`
}

// Reply is the answer of the offline skills to one utterance.
type Reply struct {
	Intent  string   // "time", "date", "timer.set", …; "" when nothing matched
	Text    string   // what to say
	Lang    string   // "en" or "zh"
	Actions []Action // controls to execute
	Handled bool     // false: nothing matched and Text is the honest fallback
}

// Options configure an Engine.
type Options struct {
	Now      func() time.Time // clock; nil: time.Now
	Location *time.Location   // local time zone; nil: time.Local
	Timers   TimerStore       // nil: in memory only
	Language string           // reply language when the input does not tell: "en" (default) or "zh"
	Log      *slog.Logger
}

// Engine runs the skills. It is safe for concurrent use if its TimerStore is.
type Engine struct {
	now     func() time.Time
	loc     *time.Location
	timers  TimerStore
	lang    string
	log     *slog.Logger
	started time.Time  // timers due before this fell due while Parley was not running
	dueMu   sync.Mutex // one taker of due timers at a time: each is reported once
}

// New returns an Engine.
func New(opt Options) (*Engine, error) {
	e := &Engine{now: opt.Now, loc: opt.Location, timers: opt.Timers, lang: opt.Language, log: opt.Log}
	if e.now == nil {
		e.now = time.Now
	}
	if e.loc == nil {
		e.loc = time.Local
	}
	if e.timers == nil {
		e.timers = &MemTimers{}
	}
	switch e.lang {
	case "":
		e.lang = "en"
	case "en", "zh":
	default:
		return nil, fmt.Errorf("skills: reply language %q: only en and zh", opt.Language)
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.started = e.now()
	return e, nil
}

// input is one utterance in the forms the matchers need.
type input struct {
	raw   string   // as heard, trimmed
	norm  string   // normalize(raw)
	words []string // fields of norm
	zh    bool     // reply in Chinese
}

func (e *Engine) newInput(text string) input {
	raw := strings.TrimSpace(text)
	n := normalize(raw)
	in := input{raw: raw, norm: n, words: strings.Fields(n)}
	in.zh = hasHan(raw) || (e.lang == "zh" && !hasLatin(raw))
	return in
}

type matcher struct {
	name string
	fn   func(e *Engine, ctx context.Context, in input, dry bool) (Reply, bool, error)
}

// The order matters: specific intents before general ones ("timer" before "time").
var matchers = []matcher{
	{"repeat", (*Engine).repeat},
	{"stop", (*Engine).stop},
	{"help", (*Engine).help},
	{"timer.cancel", (*Engine).cancelTimer},
	{"timer.list", (*Engine).listTimers},
	{"alarm.set", (*Engine).setAlarm},
	{"timer.set", (*Engine).setTimer},
	{"convert", (*Engine).convert},
	{"math", (*Engine).math},
	{"date", (*Engine).date},
	{"time", (*Engine).time},
	{"speed", (*Engine).speed},
	{"language", (*Engine).language},
	{"voice", (*Engine).voice},
	{"smalltalk", (*Engine).smalltalk},
}

// Handle answers one utterance. Replies are always usable: when nothing matches, Handled is
// false and Text honestly says what the offline skills can do. The error reports a failing
// timer store; Text then says so too.
func (e *Engine) Handle(ctx context.Context, text string) (Reply, error) {
	in := e.newInput(text)
	if in.raw == "" {
		return e.reply(in, "", "Sorry, I didn't catch that.", "抱歉，我没听清。"), nil
	}
	for _, m := range matchers {
		r, ok, err := m.fn(e, ctx, in, false)
		if ok || err != nil {
			if r.Intent == "" {
				r.Intent = m.name
			}
			r.Handled = true
			if r.Lang == "" {
				r.Lang = langOf(in)
			}
			return r, err
		}
	}
	r := e.reply(in, "",
		"Sorry, I can't answer that offline. I can tell the time and date, set timers and alarms, do arithmetic and convert units. Connect a language model for everything else.",
		"抱歉，离线模式下我回答不了这个问题。我可以报时、查日期、设置计时器和闹钟、做算术和单位换算。连接大语言模型后可以回答更多问题。")
	r.Handled = false
	return r, nil
}

// Match reports the intent an utterance would trigger, without side effects; "" when none.
func (e *Engine) Match(text string) string {
	in := e.newInput(text)
	if in.raw == "" {
		return ""
	}
	for _, m := range matchers {
		if r, ok, _ := m.fn(e, context.Background(), in, true); ok {
			if r.Intent != "" {
				return r.Intent
			}
			return m.name
		}
	}
	return ""
}

func langOf(in input) string {
	if in.zh {
		return "zh"
	}
	return "en"
}

func (e *Engine) reply(in input, intent, en, zh string) Reply {
	if in.zh {
		return Reply{Intent: intent, Text: zh, Lang: "zh"}
	}
	return Reply{Intent: intent, Text: en, Lang: "en"}
}

func hasLatin(s string) bool {
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return true
		}
	}
	return false
}

func newID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
