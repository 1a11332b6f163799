package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/parley-voice/parley/lang"
	"github.com/parley-voice/parley/llm"
)

// ToolResult is the outcome of one tool call. Exactly one of Content and Error is set; Error
// is meant for the model ("seconds must be at least 1"), not for the user.
type ToolResult struct {
	Content any
	Error   string
	Actions []Action
}

type tool struct {
	name, desc string
	params     *schema
	raw        string
	run        func(e *Engine, ctx context.Context, a map[string]any) (any, []Action, error)
}

var tools = []tool{
	{
		name: "get_datetime",
		desc: "Get the current local date and time, or the time in another IANA time zone.",
		raw:  `{"type":"object","properties":{"timezone":{"type":"string","description":"IANA time zone such as Asia/Tokyo; omit for local time","maxLength":64}},"additionalProperties":false}`,
		run:  (*Engine).toolDatetime,
	},
	{
		name: "set_timer",
		desc: "Start a countdown timer that Parley announces aloud when it ends.",
		raw:  `{"type":"object","properties":{"seconds":{"type":"integer","minimum":1,"maximum":604800,"description":"length of the timer in seconds"},"label":{"type":"string","maxLength":80,"description":"what the timer is for"}},"required":["seconds"],"additionalProperties":false}`,
		run:  (*Engine).toolSetTimer,
	},
	{
		name: "set_alarm",
		desc: "Set an alarm for a time of day (24-hour clock). Parley announces it aloud.",
		raw:  `{"type":"object","properties":{"time":{"type":"string","pattern":"^([01]?[0-9]|2[0-3]):[0-5][0-9]$","description":"HH:MM, 24-hour"},"day":{"type":"string","enum":["today","tomorrow","next"],"description":"next (default): the next time this clock time comes"},"label":{"type":"string","maxLength":80}},"required":["time"],"additionalProperties":false}`,
		run:  (*Engine).toolSetAlarm,
	},
	{
		name: "list_timers",
		desc: "List pending timers and alarms with the time remaining.",
		raw:  `{"type":"object","properties":{},"additionalProperties":false}`,
		run:  (*Engine).toolListTimers,
	},
	{
		name: "cancel_timer",
		desc: "Cancel timers or alarms by id or label, or all of them.",
		raw:  `{"type":"object","properties":{"id":{"type":"string","maxLength":64},"label":{"type":"string","maxLength":80},"all":{"type":"boolean"}},"additionalProperties":false}`,
		run:  (*Engine).toolCancelTimer,
	},
	{
		name: "calculate",
		desc: "Evaluate an arithmetic expression exactly: + - * / % ^ ! parentheses, sqrt, cbrt, abs, round, floor, ceil, sin, cos, tan, ln, log, log2, exp, pi, e.",
		raw:  `{"type":"object","properties":{"expression":{"type":"string","minLength":1,"maxLength":500}},"required":["expression"],"additionalProperties":false}`,
		run:  (*Engine).toolCalculate,
	},
	{
		name: "convert_units",
		desc: "Convert a value between units of length, mass, volume, time, speed, temperature, area or data size.",
		raw:  `{"type":"object","properties":{"value":{"type":"number"},"from":{"type":"string","minLength":1,"maxLength":40},"to":{"type":"string","minLength":1,"maxLength":40}},"required":["value","from","to"],"additionalProperties":false}`,
		run:  (*Engine).toolConvert,
	},
	{
		name: "control_parley",
		desc: "Control Parley's own speech: change voice, speak faster or slower, switch the spoken language, or stop talking.",
		raw:  `{"type":"object","properties":{"action":{"type":"string","enum":["voice","faster","slower","language","stop"]},"value":{"type":"string","maxLength":40,"description":"voice name (or next) for voice; language code (en, zh, yue, ja, ko) for language"}},"required":["action"],"additionalProperties":false}`,
		run:  (*Engine).toolControl,
	},
}

func init() {
	for i := range tools {
		tools[i].params = mustSchema(tools[i].raw)
	}
}

// Tools returns the skills as OpenAI-style tool definitions.
func (e *Engine) Tools() []llm.Tool {
	out := make([]llm.Tool, len(tools))
	for i, t := range tools {
		out[i] = llm.Tool{Type: "function", Function: llm.FunctionDef{Name: t.name, Description: t.desc, Parameters: json.RawMessage(t.raw)}}
	}
	return out
}

// Call validates and runs one tool call from a model. Problems (unknown tool, bad arguments,
// failures) come back as ToolResult.Error for the model to read; it never panics on input.
func (e *Engine) Call(ctx context.Context, call llm.ToolCall) ToolResult {
	for _, t := range tools {
		if t.name != call.Function.Name {
			continue
		}
		args, err := t.params.parseArgs(call.Function.Arguments)
		if err != nil {
			return ToolResult{Error: "invalid arguments for " + t.name + ": " + err.Error()}
		}
		v, acts, err := t.run(e, ctx, args)
		if err != nil {
			return ToolResult{Error: err.Error(), Actions: acts}
		}
		return ToolResult{Content: v, Actions: acts}
	}
	return ToolResult{Error: fmt.Sprintf("unknown tool %q", call.Function.Name)}
}

func str(a map[string]any, k string) string { s, _ := a[k].(string); return s }

func num(a map[string]any, k string) float64 {
	n, _ := a[k].(json.Number)
	f, _ := n.Float64()
	return f
}

func (e *Engine) toolDatetime(_ context.Context, a map[string]any) (any, []Action, error) {
	loc := e.loc
	if tz := str(a, "timezone"); tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, nil, fmt.Errorf("unknown time zone %q", tz)
		}
		loc = l
	}
	t := e.now().In(loc)
	return map[string]any{
		"time": t.Format("15:04"), "date": t.Format("2006-01-02"), "weekday": t.Weekday().String(),
		"timezone": loc.String(), "utc_offset": t.Format("-07:00"),
	}, nil, nil
}

func timerJSON(t Timer, now time.Time) map[string]any {
	m := map[string]any{"id": t.ID, "kind": t.Kind, "due": t.Due.Format(time.RFC3339)}
	if t.Label != "" {
		m["label"] = t.Label
	}
	if left := t.Due.Sub(now); left > 0 {
		m["remaining_seconds"] = int(left.Round(time.Second) / time.Second)
	} else {
		m["remaining_seconds"] = 0
	}
	return m
}

func (e *Engine) toolSetTimer(ctx context.Context, a map[string]any) (any, []Action, error) {
	d := time.Duration(num(a, "seconds")) * time.Second
	t := Timer{ID: newID(), Kind: KindTimer, Label: str(a, "label"), Due: e.now().Add(d), Created: e.now(), Duration: d, Lang: e.lang}
	if err := e.timers.AddTimer(ctx, t); err != nil {
		return nil, nil, fmt.Errorf("could not save the timer: %v", err)
	}
	return timerJSON(t, e.now()), nil, nil
}

func (e *Engine) toolSetAlarm(ctx context.Context, a map[string]any) (any, []Action, error) {
	hh, mm, _ := strings.Cut(str(a, "time"), ":")
	h, _ := strconv.Atoi(hh)
	m, _ := strconv.Atoi(mm)
	now := e.now().In(e.loc)
	due := time.Date(now.Year(), now.Month(), now.Day(), h, m, 0, 0, e.loc)
	switch str(a, "day") {
	case "tomorrow":
		due = due.AddDate(0, 0, 1)
	case "today":
		if !due.After(now) {
			return nil, nil, fmt.Errorf("%s today has already passed", str(a, "time"))
		}
	default:
		if !due.After(now) {
			due = due.AddDate(0, 0, 1)
		}
	}
	t := Timer{ID: newID(), Kind: KindAlarm, Label: str(a, "label"), Due: due, Created: e.now(), Lang: e.lang}
	if err := e.timers.AddTimer(ctx, t); err != nil {
		return nil, nil, fmt.Errorf("could not save the alarm: %v", err)
	}
	return timerJSON(t, e.now()), nil, nil
}

func (e *Engine) toolListTimers(ctx context.Context, _ map[string]any) (any, []Action, error) {
	ts, err := e.timers.Timers(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("could not read timers: %v", err)
	}
	list := make([]any, 0, len(ts))
	for _, t := range ts {
		list = append(list, timerJSON(t, e.now()))
	}
	return map[string]any{"timers": list}, nil, nil
}

func (e *Engine) toolCancelTimer(ctx context.Context, a map[string]any) (any, []Action, error) {
	ts, err := e.timers.Timers(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("could not read timers: %v", err)
	}
	id, label := str(a, "id"), strings.ToLower(str(a, "label"))
	all, _ := a["all"].(bool)
	if id == "" && label == "" && !all {
		return nil, nil, fmt.Errorf("give id, label or all")
	}
	var cancelled []any
	for _, t := range ts {
		if all || (id != "" && t.ID == id) || (label != "" && strings.Contains(strings.ToLower(t.Label), label)) {
			if err := e.timers.RemoveTimer(ctx, t.ID); err != nil {
				return nil, nil, fmt.Errorf("could not cancel: %v", err)
			}
			cancelled = append(cancelled, timerJSON(t, e.now()))
		}
	}
	if len(cancelled) == 0 {
		return nil, nil, fmt.Errorf("no matching timer or alarm")
	}
	return map[string]any{"cancelled": cancelled}, nil, nil
}

func (e *Engine) toolCalculate(_ context.Context, a map[string]any) (any, []Action, error) {
	v, err := Eval(str(a, "expression"))
	if err != nil {
		return nil, nil, err
	}
	return map[string]any{"result": v, "text": FormatNumber(v)}, nil, nil
}

func (e *Engine) toolConvert(_ context.Context, a map[string]any) (any, []Action, error) {
	v := num(a, "value")
	from, to := resolveDegrees(str(a, "from"), str(a, "to"))
	out, uf, ut, err := Convert(v, from, to)
	if err != nil {
		return nil, nil, err
	}
	return map[string]any{"result": out, "from": uf.plural, "to": ut.plural, "text": FormatNumber(roundNice(out)) + " " + ut.name(out, false)}, nil, nil
}

func (e *Engine) toolControl(_ context.Context, a map[string]any) (any, []Action, error) {
	var act Action
	switch str(a, "action") {
	case "faster":
		act = Action{Kind: ActionSpeed, Amount: SpeedStep}
	case "slower":
		act = Action{Kind: ActionSpeed, Amount: -SpeedStep}
	case "stop":
		act = Action{Kind: ActionStop}
	case "voice":
		v := strings.TrimSpace(str(a, "value"))
		if v == "" {
			v = "next"
		}
		act = Action{Kind: ActionVoice, Value: v}
	case "language":
		v := strings.ToLower(strings.TrimSpace(str(a, "value")))
		if c, ok := lang.FromName(v); ok {
			v = c
		}
		if !lang.Known(v) {
			return nil, nil, fmt.Errorf("language must be one of en, zh, yue, ja, ko")
		}
		act = Action{Kind: ActionLanguage, Value: v}
	}
	return map[string]any{"done": act.Kind}, []Action{act}, nil
}
