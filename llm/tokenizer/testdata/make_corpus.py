#!/usr/bin/env python3
"""Writes corpus.jsonl: a large mixed corpus (English, Chinese, code, emoji, whitespace runs,
contractions, numbers in many scripts, special tokens, random Unicode) for the tokenizer's
id-for-id check against @huggingface/tokenizers. Deterministic (fixed seed).

    python3 llm/tokenizer/testdata/make_corpus.py > llm/tokenizer/testdata/corpus.jsonl
"""
import json
import random
import sys

rng = random.Random(20)

english = """Parley is a private, offline-first voice assistant. You speak; it hears you, thinks with a
local model, and answers aloud. It's fast — isn't it? We'll see: they'd said "no", but I'M SURE
YOU'RE RIGHT and we've tried. The quick brown fox jumps over the lazy dog's back!!! (Really?)
Dr. Smith's e-mail is j.smith@example.com; call +1 (555) 010-9999 ext. 42 before 5:30 p.m.
Prices rose 12.5% to $1,234,567.89 in Q3 2024 — a 3x jump vs. 1999's 0.25‰.
"Quoted," she said, 'single-quoted', `backticks`, «guillemets», and ‘curly’ “quotes”.
Mr. O'Neil's rock'n'roll band: don't, won't, can't, shan't, y'all, ma'am, o'clock. 'TIS 'S 'T 'RE 'VE 'M 'LL 'D
""".split("\n")

chinese = """你好，世界！今天天气怎么样？我想听一首轻松的音乐。
帕利是一个离线优先的语音助手，它能听懂你说的话，并用自然的声音回答。
请在明天早上七点半叫醒我，然后告诉我今天的日程安排。
人工智能（AI）正在改变我们的生活方式：从手机到汽车，无处不在。
他说：“这个问题很难回答。”我回答说：“没关系，我们慢慢来。”
二〇二四年十二月三十一日，北京时间下午三点零五分。
粤语：你食咗饭未呀？日本語：こんにちは、元気ですか。한국어: 안녕하세요, 반갑습니다.
""".split("\n")

code = r'''package main

import (
	"fmt"
	"strings"
)

// Greet returns a greeting for name.
func Greet(name string) string {
	if strings.TrimSpace(name) == "" {
		return "Hello, world!"
	}
	return fmt.Sprintf("Hello, %s!\n", name)
}

def fib(n: int) -> int:
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

const add = (a, b) => a + b; // arrow function
let x = [1, 2, 3].map((v) => v ** 2).filter(v => v !== 4);
SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;
<div class="note">&lt;b&gt;bold&lt;/b&gt; &amp; more</div>
{"key": "value", "list": [1, 2.5, -3e10, true, null], "nested": {"a": "b"}}
#include <stdio.h>
int main(void) { printf("%d\n", 42); return 0; }
	if (x&&y||!z) { i++; j--; k <<= 2; m >>= 1; }
$ ls -la /usr/local/bin | grep -E '^-rwx' && echo "done" >> /tmp/log.txt 2>&1
'''.split("\n")

emoji = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇨🇳", "🇺🇸", "❤️", "🔥🔥🔥", "🤖", "🎉✨", "☕️", "🏳️‍🌈", "1️⃣", "👩🏿‍💻",
         "🧑‍🚀", "😂😂", "🙏", "🐉", "🍜", "© ® ™", "→ ← ↑ ↓", "∑∫√∞≈≠≤≥", "♪♫", "★☆", "✓✗"]

spaces = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", "\u00a0", "\u3000", "\u2028",
          "\u2029", "\u0085", "\ufeff", "\u200b", "\u2003", "\u202f", "\v", "\f", " \t \n"]

numbers = ["0", "7", "42", "123", "1234", "12345678901234567890", "3.14159", "-273.15", "1e-9", "٣٤٥",
           "३४५", "²³", "½", "Ⅻ", "〇", "١٢٣٤", "𝟙𝟚𝟛", "0x1F", "1,000,000", "10:45", "2024-06-01"]

specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
            "</tool_call>", "<tool_response>", "<|im_sta", "im_end|>", "<|fim_prefix|>", "<<|im_end|>>",
            "<|im_start|>user\n", "<|im_start|>assistant\n<think>\n\n</think>\n\n"]

nfc = ["e\u0301", "caf\u0065\u0301", "A\u030a", "n\u0303", "\u1100\u1161\u11a8", "Å", "ﬁ", "Ω", "ｆｕｌｌ　ｗｉｄｔｈ"]

ranges = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x6ff), (0x900, 0x97f),
          (0xe00, 0xe7f), (0x3040, 0x30ff), (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0x1f300, 0x1faff),
          (0x2000, 0x206f), (0x0300, 0x036f), (0xfe00, 0xfe0f), (0x10000, 0x1007f)]


def rand_unicode(n):
    out = []
    for _ in range(n):
        lo, hi = rng.choice(ranges)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


pools = [english, chinese, code, emoji, spaces, numbers, specials, nfc]
cases = []
cases += [l for l in english + chinese if l]
cases.append("\n".join(code))
cases += ["".join(rng.choice(spaces) for _ in range(rng.randint(1, 30))) for _ in range(60)]
cases += [" " * n for n in (1, 2, 3, 17, 100, 1000)] + ["\n" * 50, "\t" * 33, " \n" * 40, "!" * 500, "ab" * 300]
for _ in range(700):
    parts = []
    for _ in range(rng.randint(1, 12)):
        pool = rng.choice(pools)
        p = rng.choice(pool)
        if rng.random() < 0.3:
            p = p[: rng.randint(0, len(p))]
        parts.append(p)
        if rng.random() < 0.5:
            parts.append(rng.choice(spaces))
    cases.append("".join(parts))
for _ in range(200):
    cases.append(rand_unicode(rng.randint(1, 60)))
for c in cases:
    sys.stdout.write(json.dumps(c, ensure_ascii=False) + "\n")
