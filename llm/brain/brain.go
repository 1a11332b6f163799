// Package brain runs one conversational turn: the user's words go to the configured LLM
// backend (or, offline, to the skills engine); tool calls from the model are validated,
// executed and answered; the final answer streams out as events, capped in tokens and
// wall-clock time. Failures end the turn with a short, honest sentence that can be spoken.
package brain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/llm"
	"github.com/parley-voice/parley/llm/skills"
)

// Toolbox is a set of tools offered to the model. *skills.Engine is one.
type Toolbox interface {
	Tools() []llm.Tool
	Call(ctx context.Context, call llm.ToolCall) skills.ToolResult
}

// Config configures a Brain. Zero values take the defaults shown.
type Config struct {
	Backend     llm.Backend    // nil: offline skills only
	Model       string         // required with a Backend
	Skills      *skills.Engine // required: the offline brain
	Tools       Toolbox        // tools offered to the model; nil: Skills. Set NoTools to offer none.
	NoTools     bool
	LocalFirst  bool // answer utterances the skills recognise locally, without the model
	Persona     llm.Persona
	Budget      int           // prompt budget in tokens: 3072
	MaxTokens   int           // answer cap in tokens: 512
	MaxDuration time.Duration // wall-clock cap of a turn: 90s
	MaxRounds   int           // tool rounds per turn: 3
	KeepThink   bool          // keep <think>…</think> text in the answer (default: strip it)
	Think       *bool         // ask reasoning models to think (Ollama "think"); nil: server default. false speeds up spoken replies.
	Temperature *float64
	Log         *slog.Logger
}

// Event kinds.
const (
	EventText       = "text"        // Text: a piece of the spoken answer
	EventReasoning  = "reasoning"   // Text: model reasoning, never spoken
	EventToolCall   = "tool_call"   // Tool, Text: arguments
	EventToolResult = "tool_result" // Tool, Text: the JSON given to the model
	EventAction     = "action"      // Action: a control for the app
)

// Event is one piece of a turn's output.
type Event struct {
	Kind   string
	Text   string
	Tool   string
	Action *skills.Action
}

// Input is one user turn.
type Input struct {
	Text     string
	Listener llm.Listener // language, emotion and event from speech recognition
}

// Result sums up a turn.
type Result struct {
	Text         string          // the whole spoken answer, including any apology
	Source       string          // "skills" or the backend's name
	Model        string          // the model, when a backend answered
	Intent       string          // the skill's intent, when skills answered
	Actions      []skills.Action // controls the app should execute (also sent as events)
	FinishReason string          // stop, length, timeout, tool_calls, cancelled, error
	Usage        *llm.Usage
	Elapsed      time.Duration
	FirstToken   time.Duration // from the start of the turn to the first text
}

// Brain holds one conversation. Turns are serialised.
type Brain struct {
	cfg     Config
	log     *slog.Logger
	mu      sync.Mutex
	conv    llm.Conversation
	noTools atomic.Bool // the server rejected tools once: stop offering them
}

// New checks cfg and returns a Brain.
func New(cfg Config) (*Brain, error) {
	if cfg.Skills == nil {
		return nil, errors.New("brain: no skills engine")
	}
	if cfg.Backend != nil && strings.TrimSpace(cfg.Model) == "" {
		return nil, fmt.Errorf("brain: %w (backend %s)", llm.ErrNoModel, cfg.Backend.URL())
	}
	if cfg.Tools == nil {
		cfg.Tools = cfg.Skills
	}
	if cfg.Budget <= 0 {
		cfg.Budget = 3072
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 512
	}
	if cfg.MaxDuration <= 0 {
		cfg.MaxDuration = 90 * time.Second
	}
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = 3
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Brain{cfg: cfg, log: log}
	p := cfg.Persona
	p.Tools = !cfg.NoTools
	b.conv = llm.Conversation{System: p.System(), Budget: cfg.Budget}
	return b, nil
}

// Source describes what answers: "skills (offline)" or "ollama llama3.2 at http://…".
func (b *Brain) Source() string {
	if b.cfg.Backend == nil {
		return "skills (offline)"
	}
	return fmt.Sprintf("%s %s at %s", b.cfg.Backend.Name(), b.cfg.Model, b.cfg.Backend.URL())
}

// Reset forgets the conversation.
func (b *Brain) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.conv.Reset()
}

// Restore replaces the conversation with messages (user, assistant and tool messages, oldest
// first), such as History returned from an earlier Brain: a rebuilt assistant goes on where
// the last one stopped.
func (b *Brain) Restore(messages []llm.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.conv.Reset()
	b.conv.Add(messages...)
}

// Interrupted records that the last answer was cut off after spoken (barge-in): only what
// was heard stays in the history.
func (b *Brain) Interrupted(spoken string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.conv.Interrupted(spoken)
}

// History returns a copy of the conversation so far.
func (b *Brain) History() []llm.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]llm.Message(nil), b.conv.Messages...)
}

var (
	errMaxTokens = errors.New("brain: answer reached the token cap")
	errWallClock = errors.New("brain: answer reached the time cap")
)

// localIntents are answered by the skills even with a model, when LocalFirst is set: they are
// exact, instant and need no world knowledge.
var localIntents = map[string]bool{
	"time": true, "date": true, "timer.set": true, "timer.cancel": true, "timer.list": true, "alarm.set": true,
	"math": true, "convert": true, "speed": true, "language": true, "voice": true, "stop": true, "repeat": true,
}

// Turn answers one user turn, streaming events to fn, and keeps the conversation. If fn
// returns an error the turn stops (and generation on the server with it) and Turn returns
// that error. When the model fails, the turn ends with an apology that has already been
// streamed as text; the error returned then matches ErrSpoken. Cancelling ctx (barge-in)
// stops everything and returns ctx's error.
func (b *Brain) Turn(ctx context.Context, in Input, fn func(Event) error) (Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	res, err := b.answer(ctx, &b.conv, in, fn)
	if err == nil && ctx.Err() == nil && res.Text != "" {
		b.conv.Add(llm.Message{Role: llm.RoleUser, Content: in.Text}, llm.Message{Role: llm.RoleAssistant, Content: res.Text})
	}
	return res, err
}

// Answer is Turn for callers that keep the history themselves (the app's store): history
// holds the earlier user and assistant messages, oldest first; the Brain's own conversation
// is neither used nor changed. Turns through Answer may run concurrently.
func (b *Brain) Answer(ctx context.Context, history []llm.Message, in Input, fn func(Event) error) (Result, error) {
	b.mu.Lock()
	conv := llm.Conversation{System: b.conv.System, Budget: b.cfg.Budget}
	b.mu.Unlock()
	conv.Messages = append([]llm.Message(nil), history...)
	return b.answer(ctx, &conv, in, fn)
}

// ErrSpoken marks errors after which the user already got a spoken response for the turn
// (an apology, or the skills' answer when the model failed): callers should not add another.
var ErrSpoken = errors.New("brain: explained to the user")

type spokenError struct{ err error }

func (e spokenError) Error() string        { return e.err.Error() }
func (e spokenError) Unwrap() error        { return e.err }
func (e spokenError) Is(target error) bool { return target == ErrSpoken }

func (b *Brain) answer(ctx context.Context, conv *llm.Conversation, in Input, fn func(Event) error) (Result, error) {
	start := time.Now()
	t := &turn{b: b, conv: conv, fn: fn, start: start, zh: wantsChinese(in)}
	res, err := t.run(ctx, in)
	res.Elapsed = time.Since(start)
	res.FirstToken = t.first
	res.Text = t.text.String()
	res.Actions = t.actions
	if err != nil && t.apologised {
		err = spokenError{err}
	}
	return res, err
}

type turn struct {
	b          *Brain
	conv       *llm.Conversation
	apologised bool
	fn         func(Event) error
	start      time.Time
	first      time.Duration
	text       strings.Builder
	actions    []skills.Action
	zh         bool
	fnErr      error
}

func (t *turn) emit(ev Event) error {
	if t.fnErr != nil {
		return t.fnErr
	}
	if ev.Kind == EventText {
		if ev.Text == "" {
			return nil
		}
		if t.first == 0 {
			t.first = time.Since(t.start)
		}
		t.text.WriteString(ev.Text)
	}
	if err := t.fn(ev); err != nil {
		t.fnErr = err
		return err
	}
	return nil
}

func (t *turn) emitActions(acts []skills.Action) error {
	for i := range acts {
		a := acts[i]
		t.actions = append(t.actions, a)
		if err := t.emit(Event{Kind: EventAction, Action: &a}); err != nil {
			return err
		}
	}
	return nil
}

func (t *turn) skills(ctx context.Context, text string) (Result, error) {
	r, err := t.b.cfg.Skills.Handle(ctx, text)
	res := Result{Source: "skills", Intent: r.Intent, FinishReason: llm.FinishStop}
	if e := t.emit(Event{Kind: EventText, Text: r.Text}); e != nil {
		return res, e
	}
	if e := t.emitActions(r.Actions); e != nil {
		return res, e
	}
	return res, err
}

func (t *turn) run(ctx context.Context, in Input) (Result, error) {
	b := t.b
	if strings.TrimSpace(in.Text) == "" {
		return Result{Source: "skills", FinishReason: llm.FinishStop}, nil
	}
	if b.cfg.Backend == nil {
		return t.skills(ctx, in.Text)
	}
	if b.cfg.LocalFirst {
		if intent := b.cfg.Skills.Match(in.Text); localIntents[intent] {
			return t.skills(ctx, in.Text)
		}
	}

	res := Result{Source: b.cfg.Backend.Name(), Model: b.cfg.Model}
	ctx, cancel := context.WithTimeoutCause(ctx, b.cfg.MaxDuration, errWallClock)
	defer cancel()
	prompt := func() []llm.Message {
		t.conv.Add(llm.Message{Role: llm.RoleUser, Content: in.Text})
		msgs := t.conv.Prompt(in.Listener)
		t.conv.Messages = t.conv.Messages[:len(t.conv.Messages)-1] // Turn adds the pair at the end
		return msgs
	}
	msgs := prompt()
	tokens := 0
	shrunk := false
	for round := 0; ; round++ {
		req := &llm.Request{Model: b.cfg.Model, Messages: msgs, MaxTokens: b.cfg.MaxTokens - tokens, Temperature: b.cfg.Temperature, Think: b.cfg.Think}
		offerTools := !b.cfg.NoTools && !b.noTools.Load() && round < b.cfg.MaxRounds
		if offerTools {
			req.Tools = b.cfg.Tools.Tools()
		}
		out, err := t.stream(ctx, req, &tokens)
		if err != nil && offerTools && round == 0 && t.text.Len() == 0 && toolsRejected(err) {
			b.log.Info("brain: server rejected tools; continuing without", "model", b.cfg.Model, "err", err)
			b.noTools.Store(true)
			req.Tools = nil
			out, err = t.stream(ctx, req, &tokens)
		}
		if out.Usage != nil {
			res.Usage = out.Usage
		}
		res.FinishReason = out.FinishReason
		switch {
		case err == nil:
		case errors.Is(err, errMaxTokens):
			res.FinishReason = llm.FinishLength
			return res, nil
		case t.fnErr != nil:
			res.FinishReason = llm.FinishCancelled
			return res, t.fnErr
		case ctx.Err() != nil && errors.Is(context.Cause(ctx), errWallClock):
			res.FinishReason = llm.FinishTimeout
			if t.text.Len() == 0 {
				t.apologise(errWallClock)
			}
			return res, nil
		case ctx.Err() != nil:
			res.FinishReason = llm.FinishCancelled
			return res, context.Cause(ctx)
		case round == 0 && !shrunk && t.text.Len() == 0 && contextOverflow(err) && len(t.conv.Messages) > 0:
			// The server's context is smaller than our budget: fold older turns into the
			// summary at half the budget and ask once more.
			shrunk = true
			budget := t.conv.Budget
			if budget <= 0 {
				budget = 3072
			}
			t.conv.Budget = budget / 2
			b.log.Info("brain: server context overflow; shrinking the prompt", "budget", t.conv.Budget, "err", err)
			msgs = prompt()
			round = -1
			continue
		default:
			res.FinishReason = "error"
			// Nothing said yet and the skills know the answer: give it rather than an error.
			if t.text.Len() == 0 && round == 0 {
				if localIntents[b.cfg.Skills.Match(in.Text)] {
					b.log.Warn("brain: model failed; answered from skills", "err", err)
					sr, serr := t.skills(ctx, in.Text)
					sr.FinishReason = "error"
					t.apologised = true // the user heard an answer
					if serr != nil {
						return sr, serr
					}
					return sr, err
				}
			}
			t.apologise(err)
			return res, err
		}
		if len(out.ToolCalls) == 0 || !offerTools {
			if res.FinishReason == "" {
				res.FinishReason = llm.FinishStop
			}
			return res, nil
		}
		// Run the tools and go round again.
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: out.Content, ToolCalls: out.ToolCalls})
		for _, call := range out.ToolCalls {
			if err := t.emit(Event{Kind: EventToolCall, Tool: call.Function.Name, Text: call.Function.Arguments}); err != nil {
				return res, err
			}
			r := b.cfg.Tools.Call(ctx, call)
			content := WrapToolResult(call.Function.Name, r)
			if err := t.emit(Event{Kind: EventToolResult, Tool: call.Function.Name, Text: content}); err != nil {
				return res, err
			}
			if err := t.emitActions(r.Actions); err != nil {
				return res, err
			}
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Name: call.Function.Name, Content: content})
		}
	}
}

// stream runs one model call, forwarding text and reasoning, and enforcing the token cap.
func (t *turn) stream(ctx context.Context, req *llm.Request, tokens *int) (llm.Delta, error) {
	var all llm.Delta
	var content strings.Builder
	var think llm.ThinkFilter
	strip := !t.b.cfg.KeepThink
	limit := t.b.cfg.MaxTokens
	deltas := 0
	send := func(text, reasoning string) error {
		if reasoning != "" {
			if err := t.emit(Event{Kind: EventReasoning, Text: reasoning}); err != nil {
				return err
			}
		}
		if text != "" {
			content.WriteString(text)
			if err := t.emit(Event{Kind: EventText, Text: text}); err != nil {
				return err
			}
		}
		return nil
	}
	err := t.b.cfg.Backend.Chat(ctx, req, func(d llm.Delta) error {
		content, reasoning := d.Content, d.Reasoning
		if strip {
			c, r := think.Push(content)
			content, reasoning = c, reasoning+r
		}
		if err := send(content, reasoning); err != nil {
			return err
		}
		all.ToolCalls = append(all.ToolCalls, d.ToolCalls...)
		if d.FinishReason != "" {
			all.FinishReason = d.FinishReason
		}
		if d.Usage != nil {
			all.Usage = d.Usage
		}
		if d.Content != "" || d.Reasoning != "" {
			deltas++
			*tokens = max(*tokens+1, *tokens+llm.EstimateTokens(d.Content+d.Reasoning)/2)
			if *tokens >= limit {
				return errMaxTokens
			}
		}
		return nil
	})
	if strip {
		c, r := think.Flush()
		if e := send(c, r); e != nil && err == nil {
			err = e
		}
	}
	all.Content = content.String()
	return all, err
}

// contextOverflow recognises a prompt the server cannot fit (llama.cpp, vLLM, OpenAI wording).
func contextOverflow(err error) bool {
	var ae *llm.APIError
	if !errors.As(err, &ae) {
		return false
	}
	m := strings.ToLower(ae.Message)
	return strings.Contains(m, "context size") || strings.Contains(m, "context length") ||
		strings.Contains(m, "context window") || strings.Contains(m, "too many tokens") || ae.Code == "context_length_exceeded"
}

// toolsRejected recognises servers and models that cannot take tools (Ollama: "does not
// support tools", llama.cpp without --jinja: 400/500 mentioning tools).
func toolsRejected(err error) bool {
	var ae *llm.APIError
	if !errors.As(err, &ae) {
		return false
	}
	m := strings.ToLower(ae.Message)
	return (ae.Status == 400 || ae.Status == 500 || ae.Status == 501) && strings.Contains(m, "tool")
}

// WrapToolResult renders a tool's outcome for the model as data, never as instructions:
// the JSON is HTML-escaped (so "<", ">" and "&" inside it cannot close or open the wrapper)
// and wrapped in <tool_result> tags that the system prompt tells the model to treat as data.
func WrapToolResult(name string, r skills.ToolResult) string {
	var body any = map[string]any{"result": r.Content}
	if r.Error != "" {
		body = map[string]any{"error": r.Error}
	}
	js, err := json.Marshal(body) // escapes <, > and & as \u003c, \u003e, \u0026
	if err != nil {
		js, _ = json.Marshal(map[string]any{"error": "the tool returned data that is not JSON"})
	}
	safeName := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return -1
	}, name)
	return `<tool_result name="` + safeName + `">` + string(js) + `</tool_result>`
}

// apologise streams a short honest sentence about err, in the user's language.
func (t *turn) apologise(err error) {
	msg := Explain(err, t.zh)
	if t.text.Len() > 0 {
		msg = " " + msg
	}
	if t.emit(Event{Kind: EventText, Text: msg}) == nil {
		t.apologised = true
	}
}

// Explain turns a backend error into one speakable sentence.
func Explain(err error, zh bool) string {
	pick := func(en, cn string) string {
		if zh {
			return cn
		}
		return en
	}
	var ae *llm.APIError
	if errors.As(err, &ae) {
		m := strings.ToLower(ae.Message)
		switch {
		case ae.Status == 503 && strings.Contains(m, "loading"):
			return pick("Sorry, the language model is still loading. Try again in a moment.", "抱歉，语言模型还在加载，请稍后再试。")
		case strings.Contains(m, "context size") || strings.Contains(m, "context length") || strings.Contains(m, "too many tokens"):
			return pick("Sorry, our conversation got too long for the language model. Say reset to start over.", "抱歉，对话太长了，语言模型处理不了。请重新开始对话。")
		}
	}
	switch {
	case errors.Is(err, llm.ErrUnreachable):
		return pick("Sorry, I can't reach the language model right now.", "抱歉，我现在连不上语言模型。")
	case errors.Is(err, llm.ErrModelNotFound):
		return pick("Sorry, the language model I'm set to use isn't installed on the server.", "抱歉，服务器上没有安装我要用的语言模型。")
	case errors.Is(err, llm.ErrAuth):
		return pick("Sorry, the language model server refused my credentials.", "抱歉，语言模型服务器拒绝了我的密钥。")
	case errors.Is(err, llm.ErrTruncated), errors.Is(err, llm.ErrStalled):
		return pick("Sorry, I lost the connection to the language model.", "抱歉，和语言模型的连接断了。")
	case errors.Is(err, llm.ErrBadStream):
		return pick("Sorry, the language model sent something I couldn't read.", "抱歉，语言模型返回的内容我读不懂。")
	case errors.Is(err, errWallClock):
		return pick("Sorry, that took too long.", "抱歉，这花的时间太长了。")
	}
	return pick("Sorry, the language model ran into a problem.", "抱歉，语言模型出了点问题。")
}

func wantsChinese(in Input) bool {
	switch strings.ToLower(in.Listener.Language) {
	case "zh", "yue":
		return true
	case "":
		for _, r := range in.Text {
			if r >= 0x4E00 && r <= 0x9FFF {
				return true
			}
		}
	}
	return false
}
