package skills

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/parley-voice/parley/edit"
	"github.com/parley-voice/parley/lang"
)

// ---- helpers ----

func (in input) has(words ...string) bool {
	for _, w := range in.words {
		for _, x := range words {
			if w == x {
				return true
			}
		}
	}
	return false
}

func (in input) hasPhrase(phrases ...string) bool {
	s := " " + in.norm + " "
	for _, p := range phrases {
		if strings.Contains(s, " "+p+" ") {
			return true
		}
	}
	return false
}

// fuzzy reports a word within one edit of target (targets of 4+ letters), except the listed
// real words that mean something else.
func (in input) fuzzy(target string, except ...string) bool {
outer:
	for _, w := range in.words {
		if w == target {
			return true
		}
		for _, x := range except {
			if w == x {
				continue outer
			}
		}
		if len(target) >= 4 && len(w) >= 3 && edit.Runes(w, target) <= 1 {
			return true
		}
	}
	return false
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// ---- repeat after me ----

var (
	reRepeatEN = regexp.MustCompile(`(?i)^\s*(?:please\s+|can you\s+|could you\s+)?(?:repeat after me|say after me|say|repeat)\b[\s:,]*(.+?)\s*$`)
	// "say something funny", "repeat the last answer" are requests for the model, not text to echo.
	repeatNotFirst = map[string]bool{"something": true, "anything": true, "a": true, "an": true, "the": true, "that": true,
		"it": true, "what": true, "why": true, "how": true, "more": true, "again": true, "me": true, "my": true, "your": true,
		"some": true, "sorry": true, "this": true, "yes": true, "no": true, "something,": true}
	reRepeatZH = regexp.MustCompile(`^\s*(?:请)?(?:跟我说|跟我念|跟着我说|跟着我念|重复一遍|重复|请说|你说)[\s:：,，]*(.+?)\s*$`)
)

func (e *Engine) repeat(_ context.Context, in input, _ bool) (Reply, bool, error) {
	re := reRepeatEN
	if hasHan(in.raw) {
		re = reRepeatZH
	}
	m := re.FindStringSubmatch(in.raw)
	if m == nil || strings.TrimSpace(m[1]) == "" {
		return Reply{}, false, nil
	}
	text := strings.Trim(m[1], " \"'“”‘’")
	if text == "" {
		return Reply{}, false, nil
	}
	if re == reRepeatEN {
		lead := strings.ToLower(strings.TrimSpace(in.raw))
		explicit := strings.Contains(lead, "after me") || strings.ContainsAny(m[1], "\"“:") || strings.Contains(lead, ":")
		first := strings.ToLower(strings.Fields(text)[0])
		if !explicit && (repeatNotFirst[first] || strings.HasPrefix(lead, "repeat")) {
			return Reply{}, false, nil
		}
	}
	return Reply{Text: text, Lang: langOf(in)}, true, nil
}

// ---- stop ----

var (
	reStopEN = regexp.MustCompile(`^(?:ok |okay |please )?(?:stop|stop it|stop talking|be quiet|quiet|shut up|enough|that is enough|never mind|nevermind|silence|hush)(?: please| now| parley)?$`)
	reStopZH = regexp.MustCompile(`^(?:好了)?(?:停|停下|停止|别说了|不要说了|闭嘴|安静|安静点|够了|算了)(?:吧|啊|了)?$`)
)

func (e *Engine) stop(_ context.Context, in input, _ bool) (Reply, bool, error) {
	compact := strings.Join(in.words, "")
	if !reStopEN.MatchString(in.norm) && !reStopZH.MatchString(compact) {
		return Reply{}, false, nil
	}
	r := e.reply(in, "", "", "")
	r.Actions = []Action{{Kind: ActionStop}}
	return r, true, nil
}

// ---- help ----

var (
	reHelpEN = regexp.MustCompile(`^(?:so |hey |ok |okay )?(?:parley )?(?:what can you do|what do you do|what are you able to do|what can i ask(?: you)?|what can i say|what are your skills|what skills do you have|what are your features|how can you help(?: me)?|help|help me|what do you know how to do)(?: parley)?(?: for me)?(?: exactly)?$`)
	reHelpZH = regexp.MustCompile(`^(?:请问)?(?:你|您)?(?:能|会|可以)(?:做|干)?(?:什么|啥|些什么|哪些事)(?:呢|啊|呀|吗)?$|^(?:你|您)有(?:什么|哪些)功能(?:呢|啊|吗)?$|^帮助$`)
)

func (e *Engine) help(_ context.Context, in input, _ bool) (Reply, bool, error) {
	ok := reHelpEN.MatchString(in.norm) || reHelpZH.MatchString(strings.Join(in.words, ""))
	if !ok {
		return Reply{}, false, nil
	}
	return e.reply(in, "",
		"Offline, I can tell you the time and date, set timers and alarms, do arithmetic, convert units, and repeat after you. You can also ask me to speak faster or slower, change my voice, or switch language.",
		"离线时我可以报时、查日期、设置计时器和闹钟、做算术、换算单位，还可以跟着你说。你也可以让我说快一点或慢一点、换个声音，或者切换语言。"), true, nil
}

// ---- timers ----

var timerWordsZH = []string{"计时", "记时", "定时", "倒计时", "闹钟", "闹铃", "提醒"}

func (in input) mentionsTimer() bool {
	return in.has("timer", "timers", "alarm", "alarms", "reminder", "reminders", "countdown") || containsAny(in.raw, timerWordsZH...)
}

func (e *Engine) cancelTimer(ctx context.Context, in input, dry bool) (Reply, bool, error) {
	en := in.has("cancel", "stop", "delete", "remove", "clear", "kill", "disable") || in.hasPhrase("turn off", "switch off", "get rid of")
	zh := containsAny(in.raw, "取消", "关掉", "关闭", "删除", "删掉", "停止", "不要")
	if !in.mentionsTimer() || !(en || zh) || in.has("how", "why", "can", "does", "do") || len(in.words) > 10 ||
		containsAny(in.raw, "怎么", "如何", "为什么") {
		return Reply{}, false, nil
	}
	if dry {
		return Reply{}, true, nil
	}
	ts, err := e.timers.Timers(ctx)
	if err != nil {
		return e.storeError(in, err)
	}
	all := in.has("all", "every", "everything") || containsAny(in.raw, "所有", "全部")
	var pick []Timer
	for _, t := range ts {
		if all || (t.Label != "" && strings.Contains(in.norm, strings.ToLower(t.Label))) {
			pick = append(pick, t)
		}
	}
	if len(pick) == 0 && len(ts) > 0 {
		// The kind asked about, soonest first.
		wantAlarm := in.has("alarm", "alarms") || strings.Contains(in.raw, "闹钟")
		for _, t := range ts {
			if (t.Kind == KindAlarm) == wantAlarm {
				pick = []Timer{t}
				break
			}
		}
		if len(pick) == 0 {
			pick = []Timer{ts[0]}
		}
	}
	if len(pick) == 0 {
		return e.reply(in, "", "There are no timers or alarms to cancel.", "现在没有计时器或闹钟。"), true, nil
	}
	for _, t := range pick {
		if err := e.timers.RemoveTimer(ctx, t.ID); err != nil {
			return e.storeError(in, err)
		}
	}
	if len(pick) > 1 {
		return e.reply(in, "", fmt.Sprintf("Cancelled %d timers and alarms.", len(pick)), fmt.Sprintf("已取消%d个计时器和闹钟。", len(pick))), true, nil
	}
	return e.reply(in, "", "Cancelled the "+e.describe(pick[0], false)+".", "已取消"+e.describe(pick[0], true)+"。"), true, nil
}

func (e *Engine) listTimers(ctx context.Context, in input, dry bool) (Reply, bool, error) {
	en := (in.hasPhrase("how much time", "how long", "time left", "time remaining") && in.has("left", "remaining", "until", "till", "timer", "alarm")) ||
		(in.mentionsTimer() && in.hasPhrase("what timers", "which timers", "list timers", "list my timers", "any timers", "my timers",
			"my alarms", "what alarms", "which alarms", "show timers", "show my timers", "timer status", "do i have", "are there", "the timers", "the alarms", "list alarms"))
	if in.hasPhrase("how do", "how to", "how can") || in.has("cancel", "delete", "set") {
		en = false
	}
	zh := containsAny(in.raw, "还剩多少", "还有多久", "还剩多久", "剩多少时间", "有哪些", "有什么闹钟", "有几个") ||
		(containsAny(in.raw, timerWordsZH...) && containsAny(in.raw, "多久", "剩", "哪些", "什么", "几个", "查看", "列出"))
	if !(en || zh) || in.hasTimeOfDay() || in.hasDuration() {
		return Reply{}, false, nil
	}
	if dry {
		return Reply{}, true, nil
	}
	// Timers already due are reported here once (and removed), not listed as "0 seconds left".
	done, err := e.Due(ctx)
	if err != nil {
		return e.storeError(in, err)
	}
	ts, err := e.timers.Timers(ctx)
	if err != nil {
		return e.storeError(in, err)
	}
	if len(ts) == 0 && len(done) == 0 {
		return e.reply(in, "", "You have no timers or alarms.", "你没有计时器或闹钟。"), true, nil
	}
	now := e.now()
	var enParts, zhParts []string
	for _, t := range done {
		local := t.Due.In(e.loc)
		en := fmt.Sprintf("the %s went off at %s", e.describe(t, false), clockEN(local)+e.dayEN(local))
		zh := fmt.Sprintf("%s已经在%s到时了", e.describe(t, true), e.dayZH(local)+clockZH(local))
		if e.Missed(t) {
			en += " while Parley was not running"
			zh = "Parley没有运行的时候，" + zh
		}
		enParts = append(enParts, en)
		zhParts = append(zhParts, zh)
	}
	for _, t := range ts {
		left := t.Due.Sub(now)
		if left < 0 {
			left = 0
		}
		if t.Kind == KindAlarm {
			enParts = append(enParts, fmt.Sprintf("the %s at %s", e.describe(t, false), clockEN(t.Due.In(e.loc))))
			zhParts = append(zhParts, fmt.Sprintf("%s在%s", e.describe(t, true), clockZH(t.Due.In(e.loc))))
		} else {
			enParts = append(enParts, fmt.Sprintf("the %s has %s left", e.describe(t, false), durEN(left)))
			zhParts = append(zhParts, fmt.Sprintf("%s还剩%s", e.describe(t, true), durZH(left)))
		}
	}
	en1 := strings.Join(enParts, "; ")
	en1, zh1 := strings.ToUpper(en1[:1])+en1[1:]+".", strings.Join(zhParts, "；")+"。"
	if len(ts) == 0 {
		en1 += " You have no other timers or alarms."
		zh1 += "你没有其他计时器或闹钟。"
	}
	return e.reply(in, "", en1, zh1), true, nil
}

var (
	reDurEN  = regexp.MustCompile(`\b(\d+(?:\.\d+)?|an?)(?: and a half)? ?(seconds?|secs?|minutes?|mins?|hours?|hrs?)\b( and a half)?`)
	reHalfEN = regexp.MustCompile(`\bhalf (?:an? )?(hour|minute)\b`)
	reDurZH  = regexp.MustCompile(`(\d+(?:\.\d+)?)?\s*个?\s*(半)?\s*(小时|钟头|分钟|分|秒钟|秒)`)
)

// duration finds a length of time in the utterance: "5 minutes", "an hour and a half",
// "1 hour 20 minutes", "五分钟", "一个半小时", "半小时".
func (in input) duration() (time.Duration, bool) {
	var d time.Duration
	found := false
	unitOf := func(u string) time.Duration {
		switch {
		case strings.HasPrefix(u, "h") || u == "小时" || u == "钟头":
			return time.Hour
		case strings.HasPrefix(u, "m") || u == "分钟" || u == "分":
			return time.Minute
		}
		return time.Second
	}
	if hasHan(in.raw) {
		s := zhToDigits(in.raw)
		for _, m := range reDurZH.FindAllStringSubmatch(s, -1) {
			if m[1] == "" && m[2] == "" {
				continue
			}
			if m[3] == "分" && strings.Contains(s, "点") {
				continue // 7点20分 is a time of day
			}
			v := 0.0
			if m[1] != "" {
				v, _ = strconv.ParseFloat(m[1], 64)
			}
			if m[2] != "" {
				v += 0.5
			}
			d = addDuration(d, v, unitOf(m[3]))
			found = true
		}
		return d, found && d > 0
	}
	for _, m := range reHalfEN.FindAllStringSubmatch(in.norm, -1) {
		d += unitOf(m[1]) / 2
		found = true
	}
	for _, m := range reDurEN.FindAllStringSubmatch(in.norm, -1) {
		v := 1.0
		if m[1] != "a" && m[1] != "an" {
			v, _ = strconv.ParseFloat(m[1], 64)
		}
		if strings.Contains(m[0], "and a half") {
			v += 0.5
		}
		d = addDuration(d, v, unitOf(m[2]))
		found = true
	}
	return d, found && d > 0
}

// addDuration adds v units to d, saturating at maxTimer+1s: converting a float beyond what
// time.Duration holds is undefined in Go (negative on amd64, so "99999999999 hours" was not
// recognised as a timer at all instead of being refused as too long).
func addDuration(d time.Duration, v float64, unit time.Duration) time.Duration {
	const over = maxTimer + time.Second
	x := float64(d) + v*float64(unit)
	if !(x < float64(over)) { // also NaN
		return over
	}
	return time.Duration(x)
}

func (in input) hasDuration() bool { _, ok := in.duration(); return ok }

const maxTimer = 7 * 24 * time.Hour

func (e *Engine) setTimer(ctx context.Context, in input, dry bool) (Reply, bool, error) {
	en := in.has("timer", "countdown") || in.hasPhrase("count down", "remind me in", "remind me after", "wake me in", "wake me up in") ||
		(in.has("remind") && in.has("in", "after")) ||
		// misheard "timer" ("time", "timmer", "tymer") next to a command and a duration
		(in.has("set", "start", "make", "begin") && in.fuzzy("timer", "tiger", "tamer", "times") && in.hasDuration())
	zh := containsAny(in.raw, "计时", "记时", "定时", "倒计时", "倒记时", "后提醒", "后叫我", "提醒我", "以后叫") || (strings.Contains(in.raw, "闹钟") && strings.Contains(in.raw, "后"))
	if !(en || zh) {
		return Reply{}, false, nil
	}
	d, ok := in.duration()
	if !ok {
		if reBareTimer.MatchString(in.norm) || reBareTimerZH.MatchString(strings.Join(in.words, "")) {
			if dry {
				return Reply{}, true, nil
			}
			return e.reply(in, "", "For how long? For example: set a timer for five minutes.", "要多长时间？比如：设置一个五分钟的计时器。"), true, nil
		}
		return Reply{}, false, nil
	}
	if dry {
		return Reply{}, true, nil
	}
	if d < time.Second || d > maxTimer {
		return e.reply(in, "", "Timers can run from one second to seven days.", "计时器的时长需要在一秒到七天之间。"), true, nil
	}
	r, err := e.addTimer(ctx, KindTimer, e.now().Add(d), d, labelOf(in), langOf(in))
	return r, true, err
}

var (
	reBareAlarm   = regexp.MustCompile(`^(?:please )?(?:(?:can|could) you )?(?:set|create|make)(?: me)?(?: an| a)?(?: new)? alarm(?: please)?$|^alarm$`)
	reBareAlarmZH = regexp.MustCompile(`^(?:请|帮我)?(?:设置|设|定|订|设定)(?:一个)?闹钟(?:吧)?$`)
	reBareTimer   = regexp.MustCompile(`^(?:please )?(?:(?:can|could) you )?(?:set|start|create|make)(?: me)?(?: a| an)?(?: new)? timer(?: please)?$|^timer$`)
	reBareTimerZH = regexp.MustCompile(`^(?:请|帮我)?(?:设置|设|定|开始|开)?(?:一个)?(?:计时器|计时|倒计时|定时器)(?:吧)?$`)
	reLabelTo     = regexp.MustCompile(`\bremind me (?:in|after) .*? to (.+)$|\bremind me to (.+?) in \d`)
	reLabelFor    = regexp.MustCompile(`\b(?:for|called|named) (?:the |my )?([a-z][a-z ]*)$`)
	reLabelZH     = regexp.MustCompile(`提醒我(.+)$`)
)

func labelOf(in input) string {
	if hasHan(in.raw) {
		if m := reLabelZH.FindStringSubmatch(in.raw); m != nil {
			return strings.Trim(m[1], " ，。！？,.!?")
		}
		return ""
	}
	if m := reLabelTo.FindStringSubmatch(in.norm); m != nil {
		return strings.TrimSpace(m[1] + m[2])
	}
	if m := reLabelFor.FindStringSubmatch(in.norm); m != nil {
		l := strings.TrimSpace(m[1])
		for _, w := range strings.Fields(l) {
			if _, ok := unitIndex[w]; ok || w == "am" || w == "pm" || w == "tomorrow" || w == "today" || w == "tonight" {
				return ""
			}
		}
		return l
	}
	return ""
}

var (
	reClockEN   = regexp.MustCompile(`\b(\d{1,2})(?::(\d{2})| (\d{2}))? ?(am|pm|o'clock|oclock|in the morning|in the afternoon|in the evening|at night|tonight)?\b`)
	reHalfPast  = regexp.MustCompile(`\b(half|quarter) (past|to) (\d{1,2})\b`)
	reClockZH   = regexp.MustCompile(`(明天|明早|明晚|今天|今晚)?\s*(早上|早晨|上午|凌晨|中午|下午|傍晚|晚上)?\s*(\d{1,2})\s*[点:：]\s*(半|一刻|三刻|(\d{1,2})\s*分?)?`)
	reAlarmCue  = regexp.MustCompile(`\b(?:alarm|wake me|wake me up|remind me)\b.*\b(?:at|for)\b|\balarm\b`)
	reRemindAtE = regexp.MustCompile(`\bremind me (?:at|tomorrow)\b`)
)

// clock is a time of day asked for.
type clock struct {
	h, m     int
	meridiem string // "am", "pm" or ""
	tomorrow bool
}

func (in input) timeOfDay() (clock, bool) {
	if hasHan(in.raw) {
		m := reClockZH.FindStringSubmatch(zhToDigits(in.raw))
		if m == nil {
			return clock{}, false
		}
		c := clock{tomorrow: strings.HasPrefix(m[1], "明")}
		c.h, _ = strconv.Atoi(m[3])
		switch m[4] {
		case "半":
			c.m = 30
		case "一刻":
			c.m = 15
		case "三刻":
			c.m = 45
		default:
			c.m, _ = strconv.Atoi(m[5])
		}
		switch {
		case m[2] == "下午" || m[2] == "傍晚" || m[2] == "晚上" || m[1] == "今晚" || m[1] == "明晚":
			c.meridiem = "pm"
		case m[2] == "中午":
			if c.h < 6 {
				c.meridiem = "pm"
			} else {
				c.meridiem = "am"
				if c.h == 12 {
					c.meridiem = "pm"
				}
			}
		case m[2] != "" || m[1] == "明早":
			c.meridiem = "am"
		}
		return c, c.h <= 24 && c.m < 60
	}
	c := clock{tomorrow: in.has("tomorrow")}
	switch {
	case in.has("noon", "midday"):
		c.h, c.meridiem = 12, "pm"
		return c, true
	case in.has("midnight"):
		c.h, c.meridiem = 0, "am"
		c.tomorrow = true
		return c, true
	}
	if m := reHalfPast.FindStringSubmatch(in.norm); m != nil {
		c.h, _ = strconv.Atoi(m[3])
		c.m = 30
		if m[1] == "quarter" {
			c.m = 15
		}
		if m[2] == "to" {
			c.h = (c.h + 23) % 24
			c.m = 60 - c.m
		}
		switch {
		case in.hasPhrase("am", "in the morning"):
			c.meridiem = "am"
		case in.hasPhrase("pm", "in the afternoon", "in the evening", "at night", "tonight"):
			c.meridiem = "pm"
		}
		return c, c.h < 24
	}
	for _, m := range reClockEN.FindAllStringSubmatch(in.norm, -1) {
		idx := strings.Index(in.norm, m[0])
		after := in.norm[idx+len(m[0]):]
		// "5 minutes", "3 hours": a duration, not a time of day.
		if w := strings.Fields(after); len(w) > 0 {
			if _, ok := lookupUnit(w[0]); ok && m[4] == "" {
				continue
			}
		}
		if m[2] == "" && m[3] == "" && m[4] == "" && !strings.HasSuffix(strings.TrimSpace(in.norm[:idx]), "at") && !strings.HasSuffix(strings.TrimSpace(in.norm[:idx]), "for") {
			continue
		}
		c.h, _ = strconv.Atoi(m[1])
		if m[2] != "" {
			c.m, _ = strconv.Atoi(m[2])
		} else if m[3] != "" {
			c.m, _ = strconv.Atoi(m[3])
		}
		switch m[4] {
		case "am", "in the morning":
			c.meridiem = "am"
		case "pm", "in the afternoon", "in the evening", "at night", "tonight":
			c.meridiem = "pm"
		}
		if c.h > 23 || c.m > 59 || (c.meridiem != "" && c.h > 12) {
			return clock{}, false
		}
		return c, true
	}
	return clock{}, false
}

func (in input) hasTimeOfDay() bool { _, ok := in.timeOfDay(); return ok }

// next returns the next moment after now that matches c.
func (c clock) next(now time.Time) time.Time {
	hours := []int{c.h}
	switch {
	case c.meridiem == "am":
		hours = []int{c.h % 12}
	case c.meridiem == "pm":
		hours = []int{c.h%12 + 12}
	case c.h < 12 && c.h > 0 && !c.tomorrow:
		hours = []int{c.h, c.h + 12}
	}
	var best time.Time
	for _, h := range hours {
		day := now
		if c.tomorrow {
			day = now.AddDate(0, 0, 1)
		}
		t := time.Date(day.Year(), day.Month(), day.Day(), h%24, c.m, 0, 0, now.Location())
		if !t.After(now) {
			t = t.AddDate(0, 0, 1)
		}
		if best.IsZero() || t.Before(best) {
			best = t
		}
	}
	return best
}

func (e *Engine) setAlarm(ctx context.Context, in input, dry bool) (Reply, bool, error) {
	en := reAlarmCue.MatchString(in.norm) || reRemindAtE.MatchString(in.norm) || in.hasPhrase("wake me up", "wake me") ||
		(in.has("set") && in.fuzzy("alarm", "alarms") && in.hasTimeOfDay())
	zh := (containsAny(in.raw, "闹钟", "闹铃", "叫醒我", "叫我起床", "喊我起床") || (strings.Contains(in.raw, "提醒我") && strings.Contains(in.raw, "点"))) &&
		!containsAny(in.raw, "取消", "关掉", "删除", "怎么", "如何", "为什么")
	if !(en || zh) {
		return Reply{}, false, nil
	}
	c, ok := in.timeOfDay()
	if !ok {
		if in.hasDuration() {
			return Reply{}, false, nil // "wake me in 20 minutes" is a timer
		}
		if reBareAlarm.MatchString(in.norm) || reBareAlarmZH.MatchString(strings.Join(in.words, "")) {
			if dry {
				return Reply{}, true, nil
			}
			return e.reply(in, "", "For what time? For example: set an alarm for seven a m.", "定在几点？比如：明天早上七点叫醒我。"), true, nil
		}
		return Reply{}, false, nil
	}
	if dry {
		return Reply{}, true, nil
	}
	due := c.next(e.now().In(e.loc))
	r, err := e.addTimer(ctx, KindAlarm, due, 0, labelOf(in), langOf(in))
	return r, true, err
}

func (e *Engine) addTimer(ctx context.Context, kind string, due time.Time, d time.Duration, label, lang string) (Reply, error) {
	t := Timer{ID: newID(), Kind: kind, Label: label, Due: due, Created: e.now(), Duration: d, Lang: lang}
	in := input{zh: lang == "zh"}
	if err := e.timers.AddTimer(ctx, t); err != nil {
		r, _, err := e.storeError(in, err)
		return r, err
	}
	r := Reply{Intent: kind + ".set", Lang: lang}
	if kind == KindTimer {
		r.Text = fmt.Sprintf("Timer set for %s.", durEN(d))
		if lang == "zh" {
			r.Text = fmt.Sprintf("好的，%s的计时器开始了。", durZH(d))
		}
	} else {
		local := due.In(e.loc)
		day := "today"
		dayZH := "今天"
		if local.YearDay() != e.now().In(e.loc).YearDay() {
			day, dayZH = "tomorrow", "明天"
		}
		r.Text = fmt.Sprintf("Alarm set for %s %s.", clockEN(local), day)
		if lang == "zh" {
			r.Text = fmt.Sprintf("好的，闹钟定在%s%s。", dayZH, clockZH(local))
		}
	}
	if label != "" {
		if lang == "zh" {
			r.Text = strings.TrimSuffix(r.Text, "。") + "，提醒你" + label + "。"
		} else {
			r.Text = strings.TrimSuffix(r.Text, ".") + ", for " + label + "."
		}
	}
	return r, nil
}

func (e *Engine) storeError(in input, err error) (Reply, bool, error) {
	if errors.Is(err, ErrNoTimers) {
		r := e.reply(in, "",
			"Sorry, I can't set timers or alarms here: this is Parley's speech server, and nothing would ring when one ran out. Set it in the Parley app or on your phone.",
			"抱歉，这里不能设置计时器或闹钟：这是 Parley 的语音服务器，时间到了也没有地方提醒你。请在 Parley 应用或手机上设置。")
		r.Intent = "timer.unavailable"
		return r, true, nil
	}
	e.log.Error("skills: timer store", "err", err)
	return e.reply(in, "", "Sorry, I couldn't save or read your timers.", "抱歉，计时器保存或读取失败。"), true, err
}

func (e *Engine) describe(t Timer, zh bool) string {
	if zh {
		if t.Kind == KindAlarm {
			if t.Label != "" {
				return t.Label + "的闹钟"
			}
			return "闹钟"
		}
		if t.Label != "" {
			return t.Label + "的计时器"
		}
		return durZH(t.Duration) + "的计时器"
	}
	if t.Kind == KindAlarm {
		if t.Label != "" {
			return t.Label + " alarm"
		}
		return "alarm"
	}
	if t.Label != "" {
		return t.Label + " timer"
	}
	return durAdj(t.Duration) + " timer"
}

// durAdj is a duration used as an adjective: "5 minute", "1 hour and 30 minute".
func durAdj(d time.Duration) string {
	return strings.NewReplacer("hours", "hour", "minutes", "minute", "seconds", "second").Replace(durEN(d))
}

// Missed reports whether t fell due while Parley was not running (before this Engine began).
func (e *Engine) Missed(t Timer) bool { return t.Due.Before(e.started) }

// dayEN is "" for today and " yesterday" or " on Monday, January 2" for other days.
func (e *Engine) dayEN(t time.Time) string {
	now := e.now().In(e.loc)
	y1, m1, d1 := now.Date()
	y2, m2, d2 := t.Date()
	switch {
	case y1 == y2 && m1 == m2 && d1 == d2:
		return ""
	case now.AddDate(0, 0, -1).Format("2006-01-02") == t.Format("2006-01-02"):
		return " yesterday"
	}
	return " on " + t.Format("Monday, January 2")
}

func (e *Engine) dayZH(t time.Time) string {
	now := e.now().In(e.loc)
	switch {
	case now.Format("2006-01-02") == t.Format("2006-01-02"):
		return ""
	case now.AddDate(0, 0, -1).Format("2006-01-02") == t.Format("2006-01-02"):
		return "昨天"
	}
	return fmt.Sprintf("%d月%d日", int(t.Month()), t.Day())
}

// Announcement is what to say when t is due. A timer that fell due while Parley was not
// running is reported as missed, with the time it went off, not as "time's up".
func (e *Engine) Announcement(t Timer) string {
	zh := t.Lang == "zh"
	if e.Missed(t) {
		local := t.Due.In(e.loc)
		if zh {
			return "Parley没有运行的时候，你的" + e.describe(t, true) + "在" + e.dayZH(local) + clockZH(local) + "到时了。"
		}
		return "While Parley was not running, your " + e.describe(t, false) + " went off at " + clockEN(local) + e.dayEN(local) + "."
	}
	if t.Kind == KindAlarm {
		local := t.Due.In(e.loc)
		if zh {
			if t.Label != "" {
				return fmt.Sprintf("现在是%s。提醒你：%s。", clockZH(local), t.Label)
			}
			return fmt.Sprintf("闹钟响了，现在是%s。", clockZH(local))
		}
		if t.Label != "" {
			return fmt.Sprintf("It's %s. Reminder: %s.", clockEN(local), t.Label)
		}
		return fmt.Sprintf("It's %s. This is your alarm.", clockEN(local))
	}
	if zh {
		if t.Label != "" {
			return "时间到了！提醒你：" + t.Label + "。"
		}
		return "时间到了！" + durZH(t.Duration) + "的计时结束了。"
	}
	if t.Label != "" {
		return "Time's up! Reminder: " + t.Label + "."
	}
	return "Time's up! Your " + durAdj(t.Duration) + " timer is done."
}

// Due removes and returns the timers and alarms that are due now. Each due timer is returned
// by one call only (Watch and a "what timers do I have" may run at once).
func (e *Engine) Due(ctx context.Context) ([]Timer, error) {
	e.dueMu.Lock()
	defer e.dueMu.Unlock()
	ts, err := e.timers.Timers(ctx)
	if err != nil {
		return nil, err
	}
	now := e.now()
	var due []Timer
	for _, t := range ts {
		if t.Due.After(now) {
			continue
		}
		if err := e.timers.RemoveTimer(ctx, t.ID); err != nil {
			return due, err
		}
		due = append(due, t)
	}
	return due, nil
}

// Watch calls fn for every timer as it becomes due, checking every interval, until ctx ends.
// Timers that fell due while Parley was not running come at the first check (Missed is true
// for them; Announcement says they were missed).
func (e *Engine) Watch(ctx context.Context, interval time.Duration, fn func(Timer)) error {
	if interval <= 0 {
		interval = time.Second
	}
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		due, err := e.Due(ctx)
		for _, t := range due {
			fn(t)
		}
		if err != nil {
			e.log.Error("skills: timers", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tk.C:
		}
	}
}

func durEN(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	var parts []string
	add := func(n int, unit string) {
		if n == 1 {
			parts = append(parts, "1 "+unit)
		} else if n > 1 {
			parts = append(parts, fmt.Sprintf("%d %ss", n, unit))
		}
	}
	add(h, "hour")
	add(m, "minute")
	add(s, "second")
	switch len(parts) {
	case 0:
		return "0 seconds"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func durZH(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%d小时", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%d分钟", m)
	}
	if s > 0 || b.Len() == 0 {
		fmt.Fprintf(&b, "%d秒", s)
	}
	return b.String()
}

func clockEN(t time.Time) string { return t.Format("3:04 PM") }

func clockZH(t time.Time) string {
	h := t.Hour()
	var period string
	switch {
	case h < 5:
		period = "凌晨"
	case h < 12:
		period = "上午"
	case h < 13:
		period = "中午"
	case h < 18:
		period = "下午"
	default:
		period = "晚上"
	}
	h12 := h % 12
	if h12 == 0 {
		h12 = 12
	}
	if t.Minute() == 0 {
		return fmt.Sprintf("%s%d点", period, h12)
	}
	return fmt.Sprintf("%s%d点%d分", period, h12, t.Minute())
}

// ---- time and date ----

var cities = map[string]string{
	"tokyo": "Asia/Tokyo", "beijing": "Asia/Shanghai", "shanghai": "Asia/Shanghai", "hong kong": "Asia/Hong_Kong",
	"singapore": "Asia/Singapore", "london": "Europe/London", "paris": "Europe/Paris", "berlin": "Europe/Berlin",
	"moscow": "Europe/Moscow", "new york": "America/New_York", "chicago": "America/Chicago",
	"los angeles": "America/Los_Angeles", "san francisco": "America/Los_Angeles", "sydney": "Australia/Sydney",
	"dubai": "Asia/Dubai", "delhi": "Asia/Kolkata", "mumbai": "Asia/Kolkata", "seoul": "Asia/Seoul",
	"utc": "UTC", "gmt": "UTC",
	"东京": "Asia/Tokyo", "北京": "Asia/Shanghai", "上海": "Asia/Shanghai", "香港": "Asia/Hong_Kong",
	"伦敦": "Europe/London", "巴黎": "Europe/Paris", "纽约": "America/New_York", "洛杉矶": "America/Los_Angeles",
	"悉尼": "Australia/Sydney", "首尔": "Asia/Seoul", "新加坡": "Asia/Singapore", "莫斯科": "Europe/Moscow", "柏林": "Europe/Berlin",
}

func (in input) city() (string, *time.Location) {
	for name, zone := range cities {
		if (hasHan(name) && strings.Contains(in.raw, name)) || (!hasHan(name) && in.hasPhrase("in "+name)) {
			if loc, err := time.LoadLocation(zone); err == nil {
				return name, loc
			}
		}
	}
	return "", nil
}

// The time and date questions are recognised as whole utterances (with a misheard key word
// put right by canon), so "what is the time complexity of quicksort" goes to the model.
var (
	reTimeEN = regexp.MustCompile(`^(?:(?:hey |ok |okay )?parley )?(?:(?:can|could|would) you )?(?:please )?(?:tell me |do you know |have you got |you got |got |check |say )?(?:what is |what )?(?:the )?(?:current |exact )?time(?: is it| it is| is| isit| is at| s it)?(?: now| right now)?(?: please)?(?: in [a-z]+(?: [a-z]+)?)?(?: please| now)?$`)
	reTimeZH = regexp.MustCompile(`^(?:请问)?(?:现在|目前|而家)?(?:是)?(?:几点|几点钟|几點|鸡点|几店|挤点|机点|什么时间|什么时候|几多点)(?:了)?(?:呢|啊|呀|吗)?$`)
	reDateEN = regexp.MustCompile(`^(?:(?:hey |ok |okay )?parley )?(?:(?:can|could|would) you )?(?:please )?(?:tell me |do you know )?(?:what is |what |which )?(?:the |todays |today s |today's )?(?:date|day|day of the week|weekday)(?: is it| is today| is it today| it is| today| is)?(?: today)?(?: please)?$|^what is today(?:'s date| s date)?$|^today'?s date$`)
	reDateZH = regexp.MustCompile(`^(?:请问)?(?:今天|今日)?(?:是)?(?:几号|星期几|礼拜几|周几|几月几号|几月几日|什么日子|哪一天)(?:了)?(?:呢|啊|呀|吗)?$`)
)

// canon returns the normalised utterance with every word within one edit of target (except
// the listed real words) replaced by target.
func (in input) canon(target string, except ...string) string {
	ws := make([]string, len(in.words))
outer:
	for i, w := range in.words {
		ws[i] = w
		for _, x := range except {
			if w == x {
				continue outer
			}
		}
		if w != target && len(target) >= 4 && len(w) >= 3 && edit.Runes(w, target) <= 1 {
			ws[i] = target
		}
	}
	return strings.Join(ws, " ")
}

var timeNotWords = []string{"timer", "timers", "times", "timed", "tie", "ties", "tile", "tide", "tome", "item", "tine"}

func (e *Engine) time(_ context.Context, in input, _ bool) (Reply, bool, error) {
	en := reTimeEN.MatchString(in.canon("time", timeNotWords...)) || in.hasPhrase("what hour is it")
	compact := strings.Join(in.words, "")
	zh := reTimeZH.MatchString(compact) ||
		containsAny(in.raw, "现在几点", "现在是几点", "几点了", "几点钟了", "现在时间", "现在的时间", "报时", "现在鸡点", "现在几店", "而家几点")
	if !(en || zh) {
		return Reply{}, false, nil
	}
	now := e.now().In(e.loc)
	name, loc := in.city()
	if loc != nil {
		t := now.In(loc)
		zhName := name
		return e.reply(in, "", fmt.Sprintf("In %s it's %s.", titleCase(name), clockEN(t)), fmt.Sprintf("%s现在是%s。", zhName, clockZH(t))), true, nil
	}
	return e.reply(in, "", fmt.Sprintf("It's %s.", clockEN(now)), fmt.Sprintf("现在是%s。", clockZH(now))), true, nil
}

func titleCase(s string) string {
	w := strings.Fields(s)
	for i, x := range w {
		if x == "utc" || x == "gmt" {
			w[i] = strings.ToUpper(x)
		} else {
			w[i] = strings.ToUpper(x[:1]) + x[1:]
		}
	}
	return strings.Join(w, " ")
}

var weekdayZH = []string{"日", "一", "二", "三", "四", "五", "六"}

func (e *Engine) date(_ context.Context, in input, _ bool) (Reply, bool, error) {
	en := reDateEN.MatchString(in.canon("date", "data", "dated", "dates", "late", "gate", "rate", "mate"))
	compact := strings.Join(in.words, "")
	zh := reDateZH.MatchString(compact) ||
		containsAny(in.raw, "今天几号", "今天是几号", "今天星期几", "今天是星期几", "今天礼拜几", "今天周几", "今天是什么日子", "今天的日期", "今天日期", "几月几号了")
	if !(en || zh) {
		return Reply{}, false, nil
	}
	now := e.now().In(e.loc)
	return e.reply(in, "",
		"Today is "+now.Format("Monday, January 2, 2006")+".",
		fmt.Sprintf("今天是%d年%d月%d日，星期%s。", now.Year(), int(now.Month()), now.Day(), weekdayZH[now.Weekday()])), true, nil
}

// ---- arithmetic ----

var mathWordsEN = []struct{ from, to string }{
	{"to the power of", " ^ "}, {"raised to the power of", " ^ "}, {"raised to", " ^ "}, {"to the power", " ^ "},
	{"square root of", " sqrt "}, {"the square root of", " sqrt "}, {"cube root of", " cbrt "},
	{"multiplied by", " * "}, {"times", " * "}, {"divided by", " / "}, {"over", " / "},
	{"plus", " + "}, {"minus", " - "}, {"negative", " - "}, {"percent of", " / 100 * "}, {"% of", " / 100 * "},
	{"percent", " / 100 "}, {"modulo", " % "}, {"mod", " % "}, {"squared", " ^ 2 "}, {"cubed", " ^ 3 "},
	{"factorial of", " fact "}, {"factorial", " ! "}, {"x", " * "}, {"into", " * "},
}

var mathFillerEN = map[string]bool{
	"what": true, "is": true, "whats": true, "calculate": true, "compute": true, "how": true, "much": true,
	"please": true, "tell": true, "me": true, "the": true, "equals": true, "equal": true, "does": true,
	"do": true, "make": true, "makes": true, "can": true, "you": true, "answer": true, "to": true, "of": true,
	"solve": true, "work": true, "out": true, "result": true, "hey": true, "parley": true, "and": true,
}

var (
	reFactOf      = regexp.MustCompile(`fact\s*(\d+(?:\.\d+)?)`)
	reZhDecimal   = regexp.MustCompile(`(\d)点(\d)`)
	reZhPercent   = regexp.MustCompile(`@(\d+(?:\.\d+)?)`) // 百分之N, marked before zhToDigits
	reZhPercentOf = regexp.MustCompile(`(\d+(?:\.\d+)?)的(\(\d+(?:\.\d+)?/100\))`)
	reZhSqrt      = regexp.MustCompile(`(\d+(?:\.\d+)?)的平方根`)
	reZhPow       = regexp.MustCompile(`的(\d+)次方`)
)

// mathExpr turns an utterance into an expression for Eval, or "" if it is not arithmetic.
func mathExpr(in input) string {
	var s string
	if hasHan(in.raw) {
		// 百分之 first: zhToDigits would read its 百 as a hundred.
		s = zhToDigits(strings.ReplaceAll(strings.Join(strings.Fields(in.raw), ""), "百分之", "@"))
		s = reZhDecimal.ReplaceAllString(s, "$1.$2")
		s = reZhPercent.ReplaceAllString(s, "($1/100)")
		s = reZhPercentOf.ReplaceAllString(s, "$1*$2") // 50的百分之20
		s = reZhSqrt.ReplaceAllString(s, "sqrt($1)")
		s = reZhPow.ReplaceAllString(s, "^$1")
		s = strings.NewReplacer("根号", "sqrt ", "的平方", "^2", "的立方", "^3", "加上", "+", "加", "+", "减去", "-", "减", "-",
			"乘以", "*", "乘", "*", "除以", "/", "等于几", "", "等于多少", "", "是多少", "", "等于", "", "多少", "",
			"计算", "", "算一下", "", "算算", "", "请问", "", "帮我", "", "请", "", "一下", "", "吗", "", "呢", "", "？", "", "?", "",
			"。", "", "，", "", "是几", "", "得几", "", "几", "").Replace(s)
	} else {
		s = " " + percentGlued(in.norm) + " "
		for _, w := range mathWordsEN {
			s = strings.ReplaceAll(s, " "+w.from+" ", " "+w.to+" ")
		}
		s = reFactOf.ReplaceAllString(s, "$1 !")
		var keep []string
		for _, w := range strings.Fields(s) {
			if mathFillerEN[w] {
				continue
			}
			keep = append(keep, w)
		}
		s = strings.Join(keep, " ")
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	hasOp, hasNum := false, false
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			hasNum = true
		case strings.ContainsRune("+-*/%^!×÷", r):
			hasOp = true
		case r == '.' || r == ' ' || r == '(' || r == ')' || r >= 'a' && r <= 'z':
		default:
			return ""
		}
	}
	if strings.Contains(s, "sqrt") || strings.Contains(s, "cbrt") {
		hasOp = true
	}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z') }) {
		if _, ok := funcs[w]; !ok && w != "pi" && w != "e" {
			return ""
		}
	}
	if !hasOp || !hasNum {
		return ""
	}
	return s
}

func (e *Engine) math(_ context.Context, in input, _ bool) (Reply, bool, error) {
	if en, zh, ok := percentReply(in); ok {
		return e.reply(in, "", en, zh), true, nil
	}
	expr := mathExpr(in)
	if expr == "" {
		return Reply{}, false, nil
	}
	v, err := Eval(expr)
	if err != nil {
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), ErrExpr.Error()), ": ")
		return e.reply(in, "", "I can't work that out: "+msg+".", "这个我算不出来："+msg+"。"), true, nil
	}
	return e.reply(in, "", "That's "+FormatNumber(roundNice(v))+".", "等于"+FormatNumber(roundNice(v))+"。"), true, nil
}

// roundNice keeps answers speakable: two decimals, or three significant digits below one.
func roundNice(v float64) float64 {
	a := math.Abs(v)
	switch {
	case a == 0 || a >= 1e15:
		return v
	case a >= 1:
		return math.Round(v*100) / 100
	default:
		p := math.Pow(10, 2-math.Floor(math.Log10(a)))
		return math.Round(v*p) / p
	}
}

// ---- unit conversion ----

var reNumZH = regexp.MustCompile(`\d+(?:\.\d+)?`)

func (e *Engine) convert(_ context.Context, in input, _ bool) (Reply, bool, error) {
	v, from, to, ok := parseConversion(in)
	if !ok {
		return Reply{}, false, nil
	}
	out, uf, ut, err := Convert(v, from, to)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), ErrUnit.Error()+": ")
		return e.reply(in, "", "I can't convert that: "+msg+".", "这个没法换算："+msg+"。"), true, nil
	}
	r := roundNice(out)
	return e.reply(in, "",
		fmt.Sprintf("%s %s is %s %s.", FormatNumber(v), uf.name(v, false), FormatNumber(r), ut.name(r, false)),
		fmt.Sprintf("%s%s等于%s%s。", FormatNumber(v), uf.name(v, true), FormatNumber(r), ut.name(r, true))), true, nil
}

// parseConversion finds "<number> <unit> … <unit>" with a conversion cue.
func parseConversion(in input) (v float64, from, to string, ok bool) {
	if hasHan(in.raw) {
		s := zhToDigits(strings.Join(strings.Fields(strings.ToLower(in.raw)), ""))
		s = reZhDecimal.ReplaceAllString(s, "$1.$2")
		if !containsAny(s, "多少", "几", "换算", "转换", "等于", "合", "是") {
			return 0, "", "", false
		}
		loc := reNumZH.FindStringIndex(s)
		if loc == nil {
			return 0, "", "", false
		}
		v, _ = strconv.ParseFloat(s[loc[0]:loc[1]], 64)
		rest := s[loc[1]:]
		from = longestUnitAt(rest)
		if from == "" {
			return 0, "", "", false
		}
		rest = rest[len(from):]
		for i := range rest {
			if to = longestUnitAt(rest[i:]); to != "" {
				break
			}
		}
		if to == "" {
			return 0, "", "", false
		}
		from, to = resolveDegrees(from, to)
		return v, from, to, true
	}
	w := in.words
	cue := in.has("convert", "to", "in", "into", "as") || in.hasPhrase("how many", "how much")
	if !cue {
		return 0, "", "", false
	}
	for i := 0; i < len(w); i++ {
		num, err := strconv.ParseFloat(w[i], 64)
		if err != nil {
			if (w[i] == "a" || w[i] == "an" || w[i] == "one") && i > 0 && (w[i-1] == "in" || w[i-1] == "is") {
				num = 1
			} else {
				continue
			}
		}
		fromName, n := unitWords(w, i+1, true)
		if fromName == "" {
			continue
		}
		// The target: after a cue word, anywhere else in the sentence.
		for j := 0; j < len(w); j++ {
			if j >= i && j < i+1+n {
				continue
			}
			if j == 0 || !(w[j-1] == "to" || w[j-1] == "in" || w[j-1] == "into" || w[j-1] == "as" || w[j-1] == "many" || w[j-1] == "much") {
				continue
			}
			toName, m := unitWords(w, j, true)
			if toName == "" || (j+m > i && j < i+1+n) {
				continue
			}
			f, t := resolveDegrees(fromName, toName)
			return num, f, t, true
		}
	}
	return 0, "", "", false
}

// unitWords matches the longest unit name (up to 3 words) at w[i]; short symbols ("m",
// "kg", "f") only when allowed (right after the number or at the end).
func unitWords(w []string, i int, short bool) (string, int) {
	for n := 3; n >= 1; n-- {
		if i+n > len(w) {
			continue
		}
		name := strings.Join(w[i:i+n], " ")
		if name == "degree" || name == "degrees" {
			return "degrees", 1
		}
		if _, ok := lookupUnit(name); ok {
			if len(name) <= 2 && !short && i+n != len(w) {
				continue
			}
			return name, n
		}
	}
	return "", 0
}

// longestUnitAt returns the longest unit name that s starts with.
func longestUnitAt(s string) string {
	for _, n := range unitNames {
		if strings.HasPrefix(s, n) {
			if !hasHan(n) && len(n) < len(s) && isASCIILetter(s[len(n)]) {
				continue // "m" of "miles"
			}
			return n
		}
	}
	return ""
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// resolveDegrees reads a bare "degrees" as the scale the user is converting away from.
func resolveDegrees(from, to string) (string, string) {
	if from != "degrees" && from != "度" {
		return from, to
	}
	if ut, ok := lookupUnit(to); ok && ut.id == "degree celsius" {
		return "fahrenheit", to
	}
	return "celsius", to
}

// ---- Parley controls ----

func (e *Engine) speed(_ context.Context, in input, _ bool) (Reply, bool, error) {
	speechy := in.has("speak", "talk", "read", "speech", "voice", "speaking", "talking", "go", "say") || len(in.words) <= 4
	faster := (in.has("faster", "quicker") || in.hasPhrase("speed up", "more quickly", "hurry up")) && speechy
	slower := (in.has("slower") || in.hasPhrase("slow down", "more slowly")) && speechy
	zhFast := containsAny(in.raw, "说快", "讲快", "语速快", "快一点", "快一些", "快点说", "加快语速", "说得快")
	zhSlow := containsAny(in.raw, "说慢", "讲慢", "语速慢", "慢一点", "慢一些", "慢点说", "放慢", "说得慢", "慢点")
	switch {
	case faster || zhFast:
		r := e.reply(in, "", "Okay, I'll speak faster.", "好的，我说快一点。")
		r.Actions = []Action{{Kind: ActionSpeed, Amount: SpeedStep}}
		return r, true, nil
	case slower || zhSlow:
		r := e.reply(in, "", "Okay, I'll speak more slowly.", "好的，我说慢一点。")
		r.Actions = []Action{{Kind: ActionSpeed, Amount: -SpeedStep}}
		return r, true, nil
	}
	return Reply{}, false, nil
}

// reLangCmd: a command to change language, not a sentence that mentions speaking one.
var reLangCmd = regexp.MustCompile(`^(?:ok |okay |hey )?(?:parley )?(?:please )?(?:(?:can|could|would) you )?(?:please )?(?:switch|change|speak|talk|use|reply|answer|respond)\b|\b(?:switch|change) (?:to|into)\b|\bfrom now on\b`)

// languagesZH are the Chinese words for the languages Parley speaks (lang.FromName has the
// English ones), in the order a command is searched for them.
var languagesZH = []struct{ name, code string }{
	{"中文", "zh"}, {"汉语", "zh"}, {"普通话", "zh"}, {"国语", "zh"}, {"英文", "en"}, {"英语", "en"},
	{"粤语", "yue"}, {"广东话", "yue"}, {"日语", "ja"}, {"日文", "ja"}, {"韩语", "ko"}, {"韩文", "ko"},
}

var langReply = map[string][2]string{
	"en": {"Okay, I'll speak English.", "好的，我会说英语。"}, "zh": {"Okay, I'll speak Chinese.", "好的，我会说中文。"},
	"yue": {"Okay, I'll speak Cantonese.", "好的，我会说粤语。"}, "ja": {"Okay, I'll speak Japanese.", "好的，我会说日语。"},
	"ko": {"Okay, I'll speak Korean.", "好的，我会说韩语。"},
}

func (e *Engine) language(_ context.Context, in input, _ bool) (Reply, bool, error) {
	code := ""
	if hasHan(in.raw) {
		if containsAny(in.raw, "怎么说", "怎么讲", "翻译", "什么意思") {
			return Reply{}, false, nil
		}
		if containsAny(in.raw, "说", "讲", "用", "切换", "换成", "改成", "换到", "改用") {
			for _, l := range languagesZH {
				if strings.Contains(in.raw, l.name) {
					code = l.code
					break
				}
			}
		}
	} else if reLangCmd.MatchString(in.norm) && !in.has("how", "translate", "mean", "word", "learn", "learning", "say") {
		for _, w := range in.words {
			if c, ok := lang.FromName(w); ok && lang.Known(c) {
				code = c
				break
			}
		}
	}
	if code == "" {
		return Reply{}, false, nil
	}
	t := langReply[code]
	// Confirm in the new language where we can.
	r := Reply{Text: t[0], Lang: "en"}
	if code == "zh" || code == "yue" || (in.zh && code != "en") {
		r = Reply{Text: t[1], Lang: "zh"}
	}
	r.Actions = []Action{{Kind: ActionLanguage, Value: code}}
	return r, true, nil
}

var (
	reVoiceName   = regexp.MustCompile(`\bvoice (?:to|called|named) ([a-z0-9_\-]+)|\b(?:use|try|switch to|change to) (?:the |a |an )?([a-z0-9_\-]+) voice\b|\buse voice ([a-z0-9_\-]+)`)
	reVoiceNameZH = regexp.MustCompile(`(?:用|换成|换到|切换到|改成)(.+?)的?(?:声音|音色)`)
	voiceNotNames = map[string]bool{"a": true, "the": true, "different": true, "another": true, "next": true, "new": true, "other": true, "your": true, "my": true, "this": true, "that": true}
)

func (e *Engine) voice(_ context.Context, in input, _ bool) (Reply, bool, error) {
	en := in.has("voice", "voices") && in.has("change", "switch", "different", "another", "next", "use", "try", "new", "other", "pick") &&
		len(in.words) <= 8 && !in.has("paragraph", "sentence", "passive", "active", "text", "essay", "grammar", "how", "why")
	zh := containsAny(in.raw, "声音", "音色", "嗓音") && containsAny(in.raw, "换", "切换", "改", "用", "别的", "另一个", "下一个")
	if !(en || zh) {
		return Reply{}, false, nil
	}
	name := "next"
	if m := reVoiceName.FindStringSubmatch(in.norm); m != nil {
		for _, g := range m[1:] {
			if g != "" && !voiceNotNames[g] {
				name = g
			}
		}
	}
	if m := reVoiceNameZH.FindStringSubmatch(in.raw); m != nil {
		n := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(m[1], "一个"), "个"))
		if n != "" && !containsAny(n, "别的", "另一个", "下一个", "其他") {
			name = n
		}
	}
	r := e.reply(in, "", "Okay, switching my voice.", "好的，我换个声音。")
	if name != "next" {
		r = e.reply(in, "", "Okay, switching to the "+name+" voice.", "好的，换成"+name+"的声音。")
	}
	r.Actions = []Action{{Kind: ActionVoice, Value: name}}
	return r, true, nil
}

// ---- small talk ----

var (
	reHelloEN = regexp.MustCompile(`^(?:hi|hello|hey|hiya|good morning|good afternoon|good evening|howdy)(?: there| parley| you)?$`)
	reHelloZH = regexp.MustCompile(`^(?:你好|您好|嗨|哈喽|早上好|下午好|晚上好|早安)(?:啊|呀|吗)?$`)
)

func (e *Engine) smalltalk(_ context.Context, in input, _ bool) (Reply, bool, error) {
	compact := strings.Join(in.words, "")
	switch {
	case reHelloEN.MatchString(in.norm) || reHelloZH.MatchString(compact):
		return e.reply(in, "greeting", "Hello! How can I help?", "你好！有什么可以帮你的？"), true, nil
	case in.hasPhrase("thank you", "thanks", "thank you very much", "cheers") || containsAny(in.raw, "谢谢", "多谢", "感谢"):
		return e.reply(in, "thanks", "You're welcome.", "不客气。"), true, nil
	case in.hasPhrase("who are you", "what is your name", "what are you", "your name") || containsAny(in.raw, "你是谁", "你叫什么", "你的名字"):
		return e.reply(in, "identity", "I'm Parley, a private voice assistant that runs on this computer.", "我是Parley，一个运行在你电脑上的私人语音助手。"), true, nil
	}
	return Reply{}, false, nil
}
