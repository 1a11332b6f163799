package clone

import "strings"

// The guided recording's sentences, written for Parley. Each reads in 3–8 seconds. Together
// they cover the language's sounds in many neighbourhoods, and the ways an assistant talks:
// statements, questions, exclamations, lists, numbers, names, hesitations and feelings, so a
// voice trained on them has heard the person ask, answer, count and laugh, not only read.
var prompts = map[string][]string{
	"en": {
		"Good morning! The kettle is on, and the first train leaves at seven fifteen.",
		"Could you remind me to water the tomatoes before it gets dark?",
		"I honestly thought the museum would be closed on a Tuesday.",
		"Turn left at the bakery, then walk past the blue gate and the old oak tree.",
		"That was the funniest thing I have heard all week!",
		"Her flight from Lisbon lands at twenty past nine on Thursday evening.",
		"Please add eggs, butter, two lemons and a bag of flour to the shopping list.",
		"Why does the cat always sleep exactly where I want to sit?",
		"The thunder rolled across the valley, and the sheep huddled by the wall.",
		"Hmm, let me think about that for a second before I answer.",
		"We measured the room twice: four metres wide and just under six metres long.",
		"Jasmine and Hugo are bringing the cheese; Zoe promised a chocolate cake.",
		"Is it going to rain tomorrow, or should I leave the umbrella at home?",
		"Wow, you finished the whole puzzle in one evening? That's impressive.",
		"The quick grey fox jumped over a fence and vanished into the cornfield.",
		"Set a timer for twelve minutes, and tell me when the pasta is ready.",
		"I'm sorry, I didn't quite catch that. Could you say it once more?",
		"Thirty-three thousand people watched the final, and nobody left early.",
		"A gentle breeze carried the smell of pine needles and wood smoke.",
		"What would you like to listen to while you cook dinner tonight?",
		"Oh no, I left my keys on the kitchen table again!",
		"The library opens at half past eight and closes at six on Saturdays.",
		"Yes, absolutely, that sounds like a wonderful plan for the weekend.",
		"My grandmother's recipe calls for a pinch of nutmeg and a splash of milk.",
		"Which of these three jackets do you think looks the warmest?",
		"Engineers tested the bridge with heavy trucks before it opened to the public.",
		"Well, to be fair, the instructions were rather confusing.",
		"The year two thousand and eight was when we moved to Edinburgh.",
		"Shh, the baby has only just fallen asleep in the next room.",
		"Quietly, the violinist tuned her strings while the audience found their seats.",
		"Can you call Dr. Okafor's office and move my appointment to Friday?",
		"It's freezing outside, so wear your thick gloves and a woolly hat.",
		"Seven red balloons drifted over the harbour and out towards the sea.",
		"I can't believe it's already December; this year went by so fast.",
		"The recipe says to whisk the yolks until they turn pale and thick.",
		"How far is it from here to the nearest petrol station?",
		"Thank you so much for your help, I really appreciate it.",
		"Mountain goats climbed the steep rocks as if it were nothing at all.",
		"Your package was delivered at four thirty-six and left by the front door.",
		"Actually, I'd rather have tea than coffee this afternoon, if that's all right.",
		"The choir sang beautifully, and the echo rang through the stone church.",
		"Do you remember the name of that little restaurant near the station?",
		"Ha! I knew you would say that.",
		"Scientists found a new species of frog deep in the rainforest.",
		"First chop the onions, then the garlic, and finally the fresh ginger.",
		"On clear nights you can see Jupiter and four of its moons with binoculars.",
		"Excuse me, is this seat taken, or may I sit here?",
		"The meeting has been moved from Monday morning to Wednesday at noon.",
		"Maybe we should just order pizza and watch a film instead.",
		"A thousand thanks to everyone who joined us this evening.",
		"The bus was late again, so I walked the last mile in the drizzle.",
		"Would you like me to read the next chapter out loud?",
		"Please switch off the lights in the garage when you're done.",
		"Fifteen percent of eighty is twelve, so the tip comes to twelve pounds.",
		"She whispered the answer, but everyone in the room still heard it.",
		"Right, that's everything for today. Sleep well, and see you tomorrow!",
	},
	"zh": {
		"早上好！今天天气很不错，适合出去散散步。",
		"请提醒我下午三点给妈妈打个电话。",
		"这家小饭馆的饺子特别好吃，我们下次再来吧。",
		"你知道最近的地铁站怎么走吗？",
		"哇，这个消息太让人高兴了！",
		"明天上午九点半，我们在图书馆门口见面。",
		"请把牛奶、鸡蛋、西红柿和两斤苹果加到购物清单里。",
		"为什么周末的时间总是过得这么快？",
		"窗外下着小雨，屋里飘着淡淡的茶香。",
		"嗯，让我想一想，再告诉你答案。",
		"这个房间长六米，宽四米，正好放得下一张大桌子。",
		"小王和小李负责买水果，我来准备蛋糕。",
		"明天会下雨吗？需不需要带伞？",
		"对不起，我刚才没听清楚，能再说一遍吗？",
		"二零一九年的夏天，我们第一次去了海边。",
		"请帮我设一个十二分钟的计时器。",
		"哎呀，我又把钥匙忘在办公室了！",
		"谢谢你一直以来的帮助，真的非常感谢。",
		"春天来了，公园里的花都开了，到处都是五颜六色的。",
		"你今天晚上想听点什么音乐？",
		"先把葱切好，再把鸡蛋打散，最后一起下锅炒。",
		"这本书我已经看了三遍，每次都有新的感受。",
		"会议从星期一改到了星期三中午。",
		"外面很冷，记得多穿一件外套。",
		"好了，今天就到这里，晚安，明天见！",
	},
}

// PromptLanguages are the languages with built-in sentences to read.
func PromptLanguages() []string { return []string{"en", "zh"} }

// Prompts returns the built-in sentences to read for a language ("en" for one without its
// own list). The slice is the caller's.
func Prompts(lang string) []string {
	p, ok := prompts[lang]
	if !ok {
		p = prompts["en"]
	}
	return append([]string(nil), p...)
}

// Recorded says which of these prompts the dataset already holds a recording of.
func (d *Dataset) Recorded(prompts []string) []bool {
	have := map[string]bool{}
	for _, s := range d.Sources {
		if s.Text != "" {
			have[normPrompt(s.Text)] = true
		}
	}
	out := make([]bool, len(prompts))
	for i, p := range prompts {
		out[i] = have[normPrompt(p)]
	}
	return out
}

// PromptSource returns the source recorded for a prompt ("" when there is none yet).
func (d *Dataset) PromptSource(prompt string) string {
	want := normPrompt(prompt)
	id := ""
	for _, s := range d.Sources { // the last take wins
		if s.Text != "" && normPrompt(s.Text) == want {
			id = s.ID
		}
	}
	return id
}

func normPrompt(s string) string { return strings.Join(strings.Fields(s), " ") }
