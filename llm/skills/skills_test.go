package skills

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/lang"
	"github.com/parley-voice/parley/llm"
)

var testNow = time.Date(2026, 11, 22, 15, 7, 0, 0, time.UTC) // a Sunday

func newEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := New(Options{Now: func() time.Time { return testNow }, Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestIntents(t *testing.T) {
	tests := []struct {
		in, intent, want string
	}{
		// time, including misrecognitions
		{"What time is it?", "time", "It's 3:07 PM."},
		{"what's the time", "time", "3:07 PM"},
		{"what tim is it", "time", "3:07 PM"},
		{"what dime is it", "time", "3:07 PM"},
		{"what time is", "time", "3:07 PM"},   // the recogniser dropped the last word
		{"what time isit", "time", "3:07 PM"}, // or glued it
		{"whats the thyme", "", "offline"},    // two edits away: not matched
		{"tell me the time please", "time", "3:07 PM"},
		{"What time is it in Tokyo?", "time", "In Tokyo it's 12:07 AM."},
		{"现在几点", "time", "现在是下午3点7分。"},
		{"几点了", "time", "下午3点7分"},
		{"现在几点钟了？", "time", "下午3点7分"},
		{"现在鸡点了", "time", "下午3点7分"},
		{"现在时间是多少", "time", "下午3点7分"},
		// date
		{"what's the date today", "date", "Today is Sunday, November 22, 2026."},
		{"what day is it", "date", "Sunday"},
		{"what's today's date", "date", "November 22"},
		{"今天几号", "date", "今天是2026年11月22日，星期日。"},
		{"今天星期几", "date", "星期日"},
		// timers
		{"set a timer for 5 minutes", "timer.set", "Timer set for 5 minutes."},
		{"set a timer for five minutes", "timer.set", "5 minutes"},
		{"set a time for ten minutes", "timer.set", "10 minutes"}, // "timer" misheard as "time"
		{"set a timmer for 3 minutes", "timer.set", "3 minutes"},
		{"set a timer for five minuets", "timer.set", "5 minutes"},
		{"wat time izit", "time", "3:07 PM"},
		{"convert 20 celcius to farenheit", "convert", "68 degrees fahrenheit"},
		{"set an alarn for 6 am", "alarm.set", "6:00 AM"},
		{"设置一个十分钟的记时器", "timer.set", "10分钟"},
		{"timer one hour and thirty minutes", "timer.set", "1 hour and 30 minutes"},
		{"set a timer for an hour and a half", "timer.set", "1 hour and 30 minutes"},
		{"start a half an hour timer", "timer.set", "30 minutes"},
		{"remind me in 10 minutes to check the oven", "timer.set", "for check the oven"},
		{"set a timer", "timer.set", "For how long?"},
		// Durations past what time.Duration holds get the same answer, not "can't answer".
		{"set a timer for 99999999999 hours", "timer.set", "one second to seven days"},
		{"倒计时99999999999小时", "timer.set", "一秒到七天"},
		{"设置一个五分钟的计时器", "timer.set", "5分钟的计时器开始了"},
		{"倒计时三十秒", "timer.set", "30秒"},
		{"一个半小时后提醒我关火", "timer.set", "提醒你关火"},
		{"定时半小时", "timer.set", "30分钟"},
		// alarms
		{"set an alarm for 7 am", "alarm.set", "Alarm set for 7:00 AM tomorrow."},
		{"wake me up at 6:30 tomorrow", "alarm.set", "6:30 AM tomorrow"},
		{"set an alarm for seven thirty pm", "alarm.set", "7:30 PM today"},
		{"set an alarm for 5", "alarm.set", "5:00 PM today"},
		{"set an alarm for half past six in the morning", "alarm.set", "6:30 AM tomorrow"},
		{"明天早上七点叫醒我", "alarm.set", "明天上午7点"},
		{"设一个下午五点半的闹钟", "alarm.set", "今天下午5点30分"},
		// arithmetic
		{"what is 3 plus 4", "math", "That's 7."},
		{"what's twenty five times four", "math", "That's 100."},
		{"calculate (2+3)*4", "math", "That's 20."},
		{"what is 15 percent of 80", "math", "That's 12."},
		{"square root of 2", "math", "That's 1.41."},
		{"2 to the power of 10", "math", "That's 1024."},
		{"what is 10 divided by 0", "math", "division by zero"},
		{"three point five minus one", "math", "That's 2.5."},
		{"三加四等于几", "math", "等于7。"},
		{"二十五乘以四是多少", "math", "等于100。"},
		{"一百除以八", "math", "等于12.5。"},
		// conversions
		{"convert 5 miles to kilometers", "convert", "5 miles is 8.05 kilometres."},
		{"how many feet in 3 meters", "convert", "3 metres is 9.84 feet."},
		{"100 fahrenheit in celsius", "convert", "100 degrees fahrenheit is 37.78 degrees celsius."},
		{"what is 30 degrees in fahrenheit", "convert", "86 degrees fahrenheit"},
		{"how many grams in a pound", "convert", "1 pound is 453.59 grams."},
		{"convert 5 kg to miles", "convert", "cannot convert"},
		{"5公里是多少英里", "convert", "5公里等于3.11英里。"},
		{"一斤等于多少克", "convert", "1斤等于500克。"},
		{"三十度是多少华氏度", "convert", "等于86华氏度"},
		// repeat
		{"repeat after me: the quick brown fox", "repeat", "the quick brown fox"},
		{"Say Hello World", "repeat", "Hello World"},
		{"跟我说：你好世界", "repeat", "你好世界"},
		// help
		{"what can you do", "help", "set timers"},
		{"你能做什么", "help", "计时器"},
		// controls
		{"speak faster", "speed", "faster"},
		{"can you talk a bit slower", "speed", "more slowly"},
		{"slow down", "speed", "more slowly"},
		{"说快一点", "speed", "快一点"},
		{"说慢点", "speed", "慢一点"},
		{"switch to Chinese", "language", "好的，我会说中文。"},
		{"please speak English", "language", "I'll speak English."},
		{"说英语", "language", "I'll speak English."},
		{"用中文回答", "language", "中文"},
		{"change your voice", "voice", "switching my voice"},
		{"use the alice voice", "voice", "alice voice"},
		{"change voice to bob", "voice", "bob voice"},
		{"换个声音", "voice", "换个声音"},
		{"stop", "stop", ""},
		{"别说了", "stop", ""},
		// small talk and fallback
		{"hello", "greeting", "Hello!"},
		{"谢谢", "thanks", "不客气"},
		{"what is the meaning of life", "", "can't answer that offline"},
		{"今天天气怎么样", "", "离线模式"},
		{"how do you say hello in chinese", "", "offline"},
		{"用英语怎么说你好", "", "离线"},
		{"what is faster a car or a bike", "", "offline"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			e := newEngine(t)
			r, err := e.Handle(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if r.Intent != tt.intent || !strings.Contains(r.Text, tt.want) {
				t.Errorf("Handle(%q) = intent %q text %q; want intent %q text containing %q", tt.in, r.Intent, r.Text, tt.intent, tt.want)
			}
			if r.Handled != (tt.intent != "") {
				t.Errorf("Handled = %v", r.Handled)
			}
			if got := e.Match(tt.in); got != tt.intent {
				t.Errorf("Match(%q) = %q, want %q", tt.in, got, tt.intent)
			}
		})
	}
}

func TestActions(t *testing.T) {
	tests := []struct {
		in   string
		want Action
	}{
		{"talk faster", Action{Kind: ActionSpeed, Amount: SpeedStep}},
		{"慢一点", Action{Kind: ActionSpeed, Amount: -SpeedStep}},
		{"switch to japanese", Action{Kind: ActionLanguage, Value: "ja"}},
		{"讲粤语", Action{Kind: ActionLanguage, Value: "yue"}},
		{"use a different voice", Action{Kind: ActionVoice, Value: "next"}},
		{"用小红的声音", Action{Kind: ActionVoice, Value: "小红"}},
		{"shut up", Action{Kind: ActionStop}},
	}
	for _, tt := range tests {
		r, _ := newEngine(t).Handle(context.Background(), tt.in)
		if len(r.Actions) != 1 || r.Actions[0] != tt.want {
			t.Errorf("%q: actions %+v, want %+v", tt.in, r.Actions, tt.want)
		}
	}
}

// Language commands name Parley's languages in English (any of lang's names) or Chinese; a
// language it does not speak, or a bare code, is no command.
func TestLanguageCommands(t *testing.T) {
	for in, want := range map[string]string{
		"switch to english": "en", "speak mandarin": "zh", "Please speak Chinese": "zh", "change to Cantonese": "yue",
		"could you speak korean": "ko", "switch to german and english": "en", "说英语": "en", "用日语": "ja",
		"switch to german": "", "speak french": "", "switch to en": "", "switch to zh": "", "how do you say hello in japanese": "",
	} {
		r, _ := newEngine(t).Handle(context.Background(), in)
		got := ""
		for _, a := range r.Actions {
			if a.Kind == ActionLanguage {
				got = a.Value
			}
		}
		if got != want {
			t.Errorf("%q: language %q, want %q (reply %q)", in, got, want, r.Text)
		}
	}
	// every language Parley speaks has its confirmation and a Chinese word
	for _, code := range lang.Codes() {
		if reply := langReply[code]; reply[0] == "" || reply[1] == "" {
			t.Errorf("no reply for %q", code)
		}
		if !slices.ContainsFunc(languagesZH, func(l struct{ name, code string }) bool { return l.code == code }) {
			t.Errorf("no Chinese word for %q", code)
		}
	}
}

func TestTimersLifecycle(t *testing.T) {
	now := testNow
	store, err := OpenFileTimers(t.TempDir() + "/timers.json")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := New(Options{Now: func() time.Time { return now }, Location: time.UTC, Timers: store})
	ctx := context.Background()
	for _, q := range []string{"set a timer for 5 minutes", "set a timer for 10 minutes for the pasta", "set an alarm for 7 am"} {
		if r, err := e.Handle(ctx, q); err != nil || !r.Handled {
			t.Fatalf("%q: %+v %v", q, r, err)
		}
	}
	r, _ := e.Handle(ctx, "how much time is left on my timer")
	if r.Intent != "timer.list" || !strings.Contains(r.Text, "5 minute timer has 5 minutes left") || !strings.Contains(r.Text, "pasta timer has 10 minutes left") || !strings.Contains(r.Text, "7:00 AM") {
		t.Errorf("list: %+v", r)
	}
	// Persisted: a new engine on the same file sees them.
	store2, err := OpenFileTimers(store.path)
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := store2.Timers(ctx)
	if len(ts) != 3 {
		t.Fatalf("reopened store has %d timers", len(ts))
	}
	now = now.Add(6 * time.Minute)
	due, err := e.Due(ctx)
	if err != nil || len(due) != 1 || due[0].Duration != 5*time.Minute {
		t.Fatalf("due: %+v %v", due, err)
	}
	if a := e.Announcement(due[0]); a != "Time's up! Your 5 minute timer is done." {
		t.Errorf("announcement %q", a)
	}
	r, _ = e.Handle(ctx, "cancel the pasta timer")
	if !strings.Contains(r.Text, "pasta") {
		t.Errorf("cancel: %q", r.Text)
	}
	r, _ = e.Handle(ctx, "取消所有闹钟")
	if r.Intent != "timer.cancel" {
		t.Errorf("zh cancel: %+v", r)
	}
	if ts, _ := store.Timers(ctx); len(ts) != 0 {
		t.Errorf("left: %+v", ts)
	}
	r, _ = e.Handle(ctx, "cancel the timer")
	if !strings.Contains(r.Text, "no timers") {
		t.Errorf("nothing to cancel: %q", r.Text)
	}
}

// Where timers cannot ring (parley --serve), asking for one gets an honest answer, not a
// promise: no "Timer set", no error to the caller.
func TestNoTimersAnswersHonestly(t *testing.T) {
	e, _ := New(Options{Now: func() time.Time { return testNow }, Timers: NoTimers{}})
	ctx := context.Background()
	for _, q := range []string{"set a timer for 5 minutes", "set an alarm for 7 am", "how much time is left on my timer", "cancel the timer", "五分钟后提醒我"} {
		r, err := e.Handle(ctx, q)
		if err != nil || !r.Handled || r.Intent != "timer.unavailable" || strings.Contains(r.Text, "set for") {
			t.Errorf("%q: %+v %v", q, r, err)
		}
		if !strings.Contains(r.Text, "can't set timers") && !strings.Contains(r.Text, "不能设置计时器") {
			t.Errorf("%q: %q does not say timers are unavailable", q, r.Text)
		}
	}
	res := e.Call(ctx, llm.ToolCall{Function: llm.FunctionCall{Name: "set_timer", Arguments: `{"seconds":60}`}})
	if !strings.Contains(res.Error, "not available") {
		t.Errorf("set_timer tool: %+v", res)
	}
}

func TestWatchAnnouncesMissedTimers(t *testing.T) {
	store := &MemTimers{}
	e, _ := New(Options{Now: func() time.Time { return testNow }, Timers: store})
	ctx, cancel := context.WithCancel(context.Background())
	store.AddTimer(ctx, Timer{ID: "a", Kind: KindTimer, Due: testNow.Add(-time.Hour), Duration: time.Minute, Lang: "zh"})
	store.AddTimer(ctx, Timer{ID: "b", Kind: KindTimer, Due: testNow.Add(time.Hour)})
	var got []string
	e.Watch(ctx, time.Millisecond, func(t Timer) {
		got = append(got, e.Announcement(t))
		cancel()
	})
	if len(got) != 1 || got[0] != "Parley没有运行的时候，你的1分钟的计时器在"+clockZH(testNow.Add(-time.Hour).In(time.Local))+"到时了。" {
		t.Errorf("%q", got)
	}
}

// A timer that fell due while no Parley was running is reported once, as missed, and removed;
// "what timers do I have" never lists it as "0 seconds left". One that falls due while the
// engine runs is announced as time's up.
func TestMissedAndExpiredTimers(t *testing.T) {
	now := testNow
	store, err := OpenFileTimers(t.TempDir() + "/timers.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store.AddTimer(ctx, Timer{ID: "gone", Kind: KindTimer, Due: now.Add(-90 * time.Minute), Duration: 5 * time.Minute, Lang: "en"})
	store.AddTimer(ctx, Timer{ID: "later", Kind: KindTimer, Due: now.Add(time.Hour), Duration: 2 * time.Hour, Lang: "en"})
	e, _ := New(Options{Now: func() time.Time { return now }, Location: time.UTC, Timers: store})
	r, _ := e.Handle(ctx, "what timers do i have")
	want := "The 5 minute timer went off at " + clockEN(now.Add(-90*time.Minute)) + " while Parley was not running; the 2 hour timer has 1 hour left."
	if r.Text != want {
		t.Errorf("list = %q\nwant   %q", r.Text, want)
	}
	r, _ = e.Handle(ctx, "what timers do i have")
	if r.Text != "The 2 hour timer has 1 hour left." {
		t.Errorf("second list = %q (the missed timer must be reported once)", r.Text)
	}
	// falls due while running, nobody watching: listed as done, not "0 seconds left"
	now = now.Add(2 * time.Hour)
	r, _ = e.Handle(ctx, "what timers do i have")
	want = "The 2 hour timer went off at " + clockEN(testNow.Add(time.Hour)) + ". You have no other timers or alarms."
	if r.Text != want || strings.Contains(r.Text, "0 seconds") {
		t.Errorf("list = %q, want %q", r.Text, want)
	}
	if ts, _ := store.Timers(ctx); len(ts) != 0 {
		t.Errorf("left in the store: %+v", ts)
	}
	// the watcher: missed ones say so, new ones are time's up
	store.AddTimer(ctx, Timer{ID: "old", Kind: KindAlarm, Due: testNow.Add(-24 * time.Hour), Lang: "en"})
	store.AddTimer(ctx, Timer{ID: "new", Kind: KindTimer, Due: now.Add(-time.Second), Duration: time.Minute, Lang: "en"})
	due, _ := e.Due(ctx)
	if len(due) != 2 {
		t.Fatalf("due %+v", due)
	}
	if a := e.Announcement(due[0]); a != "While Parley was not running, your alarm went off at "+clockEN(testNow)+" yesterday." {
		t.Errorf("missed alarm: %q", a)
	}
	if a := e.Announcement(due[1]); a != "Time's up! Your 1 minute timer is done." {
		t.Errorf("timer: %q", a)
	}
}

func TestCorruptTimerFile(t *testing.T) {
	p := t.TempDir() + "/timers.json"
	if err := writeFile(p, "{not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileTimers(p); err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), p) {
		t.Errorf("err = %v", err)
	}
}

func TestClockNext(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 11, 22, h, m, 0, 0, time.UTC) }
	tests := []struct {
		c    clock
		now  time.Time
		want time.Time
	}{
		{clock{h: 7}, at(15, 0), at(19, 0)},
		{clock{h: 7}, at(22, 0), at(7, 0).AddDate(0, 0, 1)},
		{clock{h: 7, meridiem: "am"}, at(6, 0), at(7, 0)},
		{clock{h: 12, meridiem: "am"}, at(6, 0), at(0, 0).AddDate(0, 0, 1)},
		{clock{h: 12, meridiem: "pm"}, at(6, 0), at(12, 0)},
		{clock{h: 7, tomorrow: true}, at(6, 0), at(7, 0).AddDate(0, 0, 1)},
		{clock{h: 18, m: 30}, at(6, 0), at(18, 30)},
	}
	for _, tt := range tests {
		if got := tt.c.next(tt.now); !got.Equal(tt.want) {
			t.Errorf("%+v at %v = %v, want %v", tt.c, tt.now, got, tt.want)
		}
	}
}

func TestNumbers(t *testing.T) {
	tests := []struct{ in, want string }{
		{"twenty five", "25"}, {"one hundred and five", "105"}, {"two thousand twenty six", "2026"},
		{"three point one four", "3.14"}, {"five six", "5 6"}, {"twenty-five", "25"},
		{"I want to go", "i want to go"}, {"for one", "for 1"},
	}
	for _, tt := range tests {
		if got := normalize(tt.in); got != tt.want {
			t.Errorf("normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	zh := []struct{ in, want string }{
		{"二十五", "25"}, {"一百零五", "105"}, {"两个小时", "2个小时"}, {"十五分钟", "15分钟"},
		{"一万二千", "12000"}, {"二零二六年", "2026年"}, {"七点半", "7点半"},
	}
	for _, tt := range zh {
		if got := zhToDigits(tt.in); got != tt.want {
			t.Errorf("zhToDigits(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestModelBoundQuestions: with a model configured and local-first answering on, these must
// not be taken by a local intent (they mention time, dates, voices, timers… but ask for more).
func TestModelBoundQuestions(t *testing.T) {
	local := map[string]bool{"time": true, "date": true, "timer.set": true, "timer.cancel": true, "timer.list": true,
		"alarm.set": true, "math": true, "convert": true, "speed": true, "language": true, "voice": true, "stop": true, "repeat": true, "help": true}
	for _, q := range []string{
		"what is the time complexity of quicksort",
		"what time does the sun set today",
		"what's the date of the French revolution",
		"what day is Christmas this year",
		"tell me about the history of time zones",
		"how do I convert a string to an int in Go",
		"how many miles to the moon",
		"repeat the last thing you said",
		"say something funny",
		"can you say that again",
		"what can you do about climate change",
		"change the voice of this paragraph to passive",
		"I want to learn to speak Chinese",
		"how do you say thank you in Japanese",
		"set up a timer in javascript",
		"how do I cancel a timer on android",
		"what is faster, light or sound",
		"stop the car",
		"你几点下班",
		"明天几号发工资",
		"怎么取消闹钟",
		"用英语怎么说你好",
		"你能做什么菜",
	} {
		if got := newEngine(t).Match(q); local[got] {
			t.Errorf("Match(%q) = %q, want the model to answer", q, got)
		}
	}
}
