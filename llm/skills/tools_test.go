package skills

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/llm"
)

func call(name, args string) llm.ToolCall {
	return llm.ToolCall{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: name, Arguments: args}}
}

func TestToolSchemasAreValidJSON(t *testing.T) {
	e := newEngine(t)
	for _, tl := range e.Tools() {
		var v map[string]any
		if err := json.Unmarshal(tl.Function.Parameters, &v); err != nil || v["type"] != "object" {
			t.Errorf("%s: %v %v", tl.Function.Name, v, err)
		}
		if tl.Type != "function" || tl.Function.Description == "" {
			t.Errorf("%+v", tl)
		}
	}
}

func TestToolCalls(t *testing.T) {
	tests := []struct {
		name, args string
		wantErr    string // substring of ToolResult.Error; "" for success
		check      func(t *testing.T, r ToolResult)
	}{
		{"calculate", `{"expression":"(2+3)*4"}`, "", func(t *testing.T, r ToolResult) {
			if r.Content.(map[string]any)["result"] != 20.0 {
				t.Errorf("%+v", r)
			}
		}},
		{"calculate", `{"expression":"1/0"}`, "division by zero", nil},
		{"calculate", `{"expression":42}`, "arguments.expression must be a string", nil},
		{"calculate", `{}`, "arguments.expression is required", nil},
		{"calculate", `{"expression":"1+1","extra":true}`, "not a known parameter", nil},
		{"calculate", `{"expression":"1+1"`, "not valid JSON", nil},
		{"calculate", `[1,2]`, "must be an object", nil},
		{"calculate", `{"expression":"1"} {"x":1}`, "more than one JSON value", nil},
		{"set_timer", `{"seconds":300,"label":"tea"}`, "", func(t *testing.T, r ToolResult) {
			if r.Content.(map[string]any)["remaining_seconds"] != 300 {
				t.Errorf("%+v", r)
			}
		}},
		{"set_timer", `{"seconds":2.5}`, "whole number", nil},
		{"set_timer", `{"seconds":0}`, "at least 1", nil},
		{"set_timer", `{"seconds":"300"}`, "must be a integer", nil},
		{"set_timer", `{"seconds":99999999}`, "at most", nil},
		{"set_alarm", `{"time":"07:30"}`, "", func(t *testing.T, r ToolResult) {
			if !strings.HasPrefix(r.Content.(map[string]any)["due"].(string), "2026-11-23T07:30") {
				t.Errorf("%+v", r)
			}
		}},
		{"set_alarm", `{"time":"25:00"}`, "must match", nil},
		{"set_alarm", `{"time":"10:00","day":"today"}`, "already passed", nil},
		{"set_alarm", `{"time":"10:00","day":"someday"}`, "must be one of", nil},
		{"list_timers", ``, "", nil},
		{"cancel_timer", `{}`, "give id, label or all", nil},
		{"cancel_timer", `{"label":"nothing"}`, "no matching", nil},
		{"convert_units", `{"value":5,"from":"miles","to":"km"}`, "", func(t *testing.T, r ToolResult) {
			if v := r.Content.(map[string]any)["result"].(float64); math.Abs(v-8.04672) > 1e-9 {
				t.Errorf("%v", v)
			}
		}},
		{"convert_units", `{"value":5,"from":"kg","to":"km"}`, "cannot convert", nil},
		{"convert_units", `{"value":5,"from":"furlong","to":"km"}`, "unknown unit", nil},
		{"get_datetime", `{"timezone":"Asia/Tokyo"}`, "", func(t *testing.T, r ToolResult) {
			if r.Content.(map[string]any)["time"] != "00:07" {
				t.Errorf("%+v", r)
			}
		}},
		{"get_datetime", `{"timezone":"Mars/Olympus"}`, "unknown time zone", nil},
		{"control_parley", `{"action":"faster"}`, "", func(t *testing.T, r ToolResult) {
			if len(r.Actions) != 1 || r.Actions[0].Kind != ActionSpeed || r.Actions[0].Amount != SpeedStep {
				t.Errorf("%+v", r)
			}
		}},
		{"control_parley", `{"action":"language","value":"Chinese"}`, "", func(t *testing.T, r ToolResult) {
			if r.Actions[0] != (Action{Kind: ActionLanguage, Value: "zh"}) {
				t.Errorf("%+v", r)
			}
		}},
		{"control_parley", `{"action":"language","value":" Mandarin "}`, "", func(t *testing.T, r ToolResult) {
			if r.Actions[0] != (Action{Kind: ActionLanguage, Value: "zh"}) {
				t.Errorf("%+v", r)
			}
		}},
		{"control_parley", `{"action":"language","value":"YUE"}`, "", func(t *testing.T, r ToolResult) {
			if r.Actions[0] != (Action{Kind: ActionLanguage, Value: "yue"}) {
				t.Errorf("%+v", r)
			}
		}},
		{"control_parley", `{"action":"language","value":"klingon"}`, "language must be", nil},
		{"control_parley", `{"action":"language","value":"German"}`, "language must be one of en, zh, yue, ja, ko", nil},
		{"control_parley", `{"action":"dance"}`, "must be one of", nil},
		{"rm_rf", `{}`, "unknown tool", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name+" "+tt.args, func(t *testing.T) {
			r := newEngine(t).Call(context.Background(), call(tt.name, tt.args))
			if tt.wantErr == "" && r.Error != "" {
				t.Fatalf("error %q", r.Error)
			}
			if tt.wantErr != "" && !strings.Contains(r.Error, tt.wantErr) {
				t.Fatalf("error %q, want %q (content %+v)", r.Error, tt.wantErr, r.Content)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func TestEval(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"1+2*3", 7}, {"(1+2)*3", 9}, {"2^3^2", 512}, {"-2^2", -4}, {"2^-1", 0.5}, {"10 % 4", 2},
		{"5!", 120}, {"sqrt 16 + 9", 13}, {"sqrt(16+9)", 5}, {"2 ** 10", 1024}, {"6 × 7", 42}, {"8 ÷ 2", 4},
		{"1e3 + 1", 1001}, {"--3", 3}, {"abs(-2.5)", 2.5}, {"log 1000", 3}, {"round(2.5)", 3}, {"pi", math.Pi},
	}
	for _, tt := range tests {
		got, err := Eval(tt.in)
		if err != nil || math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Eval(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "1+", "(1", "1)", "2 3", "foo(1)", "1/0", "sqrt(-1)", "171!", "3.5!", "1..2", "10^400", "ln 0", "$"} {
		if _, err := Eval(bad); err == nil {
			t.Errorf("Eval(%q) accepted", bad)
		}
	}
	if _, err := Eval(strings.Repeat("(", 200) + "1" + strings.Repeat(")", 200)); err == nil {
		t.Error("deep nesting accepted")
	}
}

func TestFormatNumber(t *testing.T) {
	for in, want := range map[float64]string{7: "7", 0.1 + 0.2: "0.3", -2.5: "-2.5", 1e20: "1e+20", 1.0 / 3: "0.333333"} {
		if got := FormatNumber(in); got != want {
			t.Errorf("FormatNumber(%v) = %q, want %q", in, got, want)
		}
	}
}

func FuzzEval(f *testing.F) {
	for _, s := range []string{"1+2*3", "(((1)))", "2^3^2", "sqrt 16!", "1e308*10", "-(-(-1))", "5 % 0", "×÷−", "1e", ".5.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Eval(s)
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("Eval(%q) = %v without error", s, v)
		}
	})
}

func FuzzHandle(f *testing.F) {
	for _, s := range []string{"what time is it", "set a timer for 5 minutes", "三加四等于几", "convert 5 miles to km",
		"set an alarm for 25:99", "remind me in to", "一个半小时后提醒我", "what is 1e999 times 10", "how many in in in"} {
		f.Add(s)
	}
	e, _ := New(Options{Now: func() time.Time { return testNow }})
	f.Fuzz(func(t *testing.T, s string) {
		r, err := e.Handle(context.Background(), s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if r.Text == "" && len(r.Actions) == 0 {
			t.Fatalf("%q: empty reply %+v", s, r)
		}
	})
}

func FuzzToolArgs(f *testing.F) {
	f.Add("set_timer", `{"seconds":1}`)
	f.Add("calculate", `{"expression":"1+1"}`)
	f.Add("set_alarm", `{"time":"7:00","label":"x"}`)
	f.Add("cancel_timer", `{"all":true}`)
	f.Add("convert_units", `{"value":1e308,"from":"c","to":"f"}`)
	f.Fuzz(func(t *testing.T, name, args string) {
		e, _ := New(Options{Now: func() time.Time { return testNow }})
		r := e.Call(context.Background(), call(name, args))
		if (r.Error == "") == (r.Content == nil) {
			t.Fatalf("%s(%s): exactly one of content and error expected: %+v", name, args, r)
		}
		if r.Content != nil {
			if _, err := json.Marshal(r.Content); err != nil {
				t.Fatalf("content not JSON: %v", err)
			}
		}
	})
}

func TestBackend(t *testing.T) {
	var b llm.Backend = Backend{E: newEngine(t)}
	d, err := llm.Collect(context.Background(), b, &llm.Request{Model: ModelID, Messages: []llm.Message{
		{Role: "system", Content: "be nice"}, {Role: "user", Content: "what is 6 times 7"}, {Role: "assistant", Content: "x"},
	}})
	if err != nil || d.Content != "That's 42." || d.FinishReason != "stop" {
		t.Errorf("%+v %v", d, err)
	}
	ms, _ := b.Models(context.Background())
	if len(ms) != 1 || ms[0].ID != ModelID || b.Health(context.Background()) != nil {
		t.Errorf("%+v", ms)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Chat(ctx, &llm.Request{}, func(llm.Delta) error { return nil }); err == nil {
		t.Error("cancelled chat ran")
	}
}

func TestUnitAliasesResolve(t *testing.T) {
	for a, id := range aliases {
		if u, ok := lookupUnit(a); !ok || u == nil || u.id != id {
			t.Errorf("alias %q → %q does not resolve", a, id)
		}
	}
}
