package roles

import (
	"testing"

	"github.com/parley-voice/parley/llm/skills"
	"github.com/parley-voice/parley/tts"
)

func TestVoiceApply(t *testing.T) {
	v := &Voice{Req: tts.Request{Speed: 1}}
	for _, tc := range []struct {
		act  skills.Action
		ok   bool
		want func(r tts.Request) bool
	}{
		{skills.Action{Kind: skills.ActionSpeed, Amount: 0.15}, true, func(r tts.Request) bool { return r.Speed > 1.14 && r.Speed < 1.16 }},
		{skills.Action{Kind: skills.ActionSpeed, Amount: -0.9}, true, func(r tts.Request) bool { return r.Speed == 0.5 }},
		{skills.Action{Kind: skills.ActionVoice, Value: "next"}, true, func(r tts.Request) bool { return r.Seed == 1 && r.HasSeed }},
		{skills.Action{Kind: skills.ActionVoice, Value: "en-gb"}, true, func(r tts.Request) bool { return r.Voice == "en-gb" }},
		{skills.Action{Kind: skills.ActionLanguage, Value: "zh"}, true, func(r tts.Request) bool { return r.Language == "zh" }},
		{skills.Action{Kind: skills.ActionStop}, false, func(tts.Request) bool { return true }},
	} {
		if ok := v.Apply(tc.act); ok != tc.ok || !tc.want(v.Req) {
			t.Errorf("Apply(%+v) = %v, request now %+v", tc.act, ok, v.Req)
		}
	}
}
