#!/usr/bin/env python3
"""A project-made BERT WordPiece tokenizer.json in ChatTTS's layout, and a test corpus.

ChatTTS's tokenizer is a BertTokenizerFast (WordPiece, BertNormalizer, BertPreTokenizer) whose
vocabulary is bert-base-chinese's plus 50 ChatTTS tokens ([Stts], [spk_emb], [uv_break],
[laugh], [break_N], [oral_N], [speed_N], ...). We do not ship third-party vocabularies, so this
script derives one from the repository's own text: English words, word-initial pieces and
"##" continuation pieces, a block of CJK characters, digits, ASCII and full-width punctuation,
then the 50 ChatTTS tokens as added tokens after it. Two variants are written:

  chattts-like.json   lowercase=false (as bert-base-chinese), ChatTTS tokens added as plain
                      (normalized) tokens, [CLS]/[SEP]/[PAD]/[UNK]/[MASK] special
  uncased.json        lowercase=true with accent stripping, ChatTTS tokens special
                      (normalized=false), [MASK] with lstrip

and corpus.jsonl: 3000 mixed English/Chinese/number/punctuation/control-token lines (one JSON
string per line) for the id-for-id check against the reference JS implementation
(train/tts/chattts_tokenizer_ref.mjs). Regenerate from the repository root with:

  /usr/bin/python3 train/tts/chattts_tokenizer.py --out tts/chattts/testdata/tokenizer
  node train/tts/chattts_tokenizer_ref.mjs ~/.cache/parley/peers/current tts/chattts/testdata/tokenizer

The corpus leaves out the few inputs where tokenizers.js knowingly differs from the Rust
tokenizers that ChatTTS runs (CJK outside the BMP: tokenizers.js looks at UTF-16 units; capital
sigma at a word end: JavaScript's toLowerCase applies the final-sigma rule); the Go tests check
those against the Rust behaviour by hand.
"""
import argparse
import collections
import json
import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from train.chattts.tokenizer import CHATTTS_SPECIALS, wordpiece_spec  # noqa: E402 (run as a script)

CHATTTS_TOKENS = CHATTTS_SPECIALS
assert len(CHATTTS_TOKENS) == 50

# Common Chinese characters (typed here; any CJK outside the vocabulary becomes [UNK]).
COMMON_ZH = (
    "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所"
    "去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从知"
    "今天气很明白早晚上午下午点钟分秒星期月号音乐声笑话请帮我设置闹钟提醒开关灯电话打给朋友妈妈爸爸谢谢再见"
    "你好吗是的不对问题回答听说读写语言中文英文数字时间现在已经可以需要觉得喜欢高兴难过"
)
ZH_BLOCK = range(0x4E00, 0x5200)  # plus a contiguous block, so rarer characters occur too

FULLWIDTH = "，。、！？：；（）《》“”‘’…—「」【】～＃＄％＆＊＋／＜＝＞＠＼＾｀｛｜｝"


def repo_words(root):
    """Words from the repository's own Go/Markdown/Python text (project-made material)."""
    files = subprocess.run(["git", "-C", root, "ls-files", "*.go", "*.md", "*.py"], check=True,
                           capture_output=True, text=True).stdout.split()
    counts = collections.Counter()
    for f in sorted(files):
        if "testdata" in f:
            continue
        try:
            text = open(os.path.join(root, f), encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        counts.update(w.lower() for w in re.findall(r"[A-Za-z]{2,}", text))
    return counts


def build_vocab(counts):
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 100)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    seen = set(vocab)

    def add(tok):
        if tok not in seen:
            seen.add(tok)
            vocab.append(tok)

    for c in "".join(chr(i) for i in range(33, 127)):
        add(c)
    for c in "0123456789abcdefghijklmnopqrstuvwxyz":
        add("##" + c)
    for c in "éèêëàâäîïôöùûüçñåøæß":  # kept by the cased variant, stripped by the uncased one
        add(c)
        add("##" + c)
    for c in FULLWIDTH:
        add(c)
    for n in ["10", "12", "20", "30", "100", "2024", "2025", "##00", "##000", "##5", "##50"]:
        add(n)
    for c in COMMON_ZH:
        add(c)
    for i in ZH_BLOCK:
        add(chr(i))
    words = [w for w, n in counts.most_common() if n >= 3][:6000]
    for w in words[:2500]:  # frequent words whole
        add(w)
    pre, suf = collections.Counter(), collections.Counter()
    for w in words:
        for k in range(2, min(5, len(w))):
            pre[w[:k]] += counts[w]
            suf[w[-k:]] += counts[w]
    for p, _ in pre.most_common(1200):
        add(p)
    for s, _ in suf.most_common(1200):
        add("##" + s)
    for w in ["Parley", "ChatTTS", "Go", "ONNX", "The", "I", "A"]:  # cased entries
        add(w)
    return vocab


def tokenizer_json(vocab, lowercase, chattts_special):
    return wordpiece_spec(vocab, lowercase=lowercase, strip_accents=None, specials=CHATTTS_TOKENS,
                          specials_special=chattts_special, mask_lstrip=lowercase, cls_sep=True,
                          controls_in_vocab=False)


def corpus(words, rng, n):
    en = [w for w in words if w.isascii()][:4000]
    zh = COMMON_ZH + "".join(chr(i) for i in range(0x4E00, 0x9FA5, 7))  # some outside the vocab
    punct = list(".,!?;:'\"()-[]/&%$#@*+=<>_~`^{}|\\") + list(FULLWIDTH)
    odd = ["café", "naïve", "Über", "Ångström", "façade", "ÉCOLE", "İstanbul", "🍌", "😀", "\u200b",
           "\u00a0", "\t", "  ", "\u3000", "\x07", "\ufeff", "½", "²", "Ⅻ", "ﬁ", "Ｈｅｌｌｏ", "ｱｲｳ", "한국어",
           "русский", "ΣΟΦΙΑ σοφία", "x" * 120, "[foo]", "[laugh", "laugh]", "[ uv_break ]", "[LAUGH]",
           "[Laugh]", "##ing", "[MASK]", " [MASK]", "[UNK]", "\r\n", "3.14159", "12:05", "2024-11-24",
           "$4.99", "50%", "1,000,000", "e.g.", "U.S.A.", "don't", "it's", "C++", "x86_64", "a@b.c"]

    def word():
        r = rng.random()
        if r < 0.55:
            w = rng.choice(en)
            k = rng.random()
            return w.capitalize() if k < 0.2 else w.upper() if k < 0.25 else w
        if r < 0.65:
            return str(rng.choice([rng.randint(0, 99), rng.randint(100, 99999), rng.random() * 1000]))
        if r < 0.8:
            return "".join(rng.choice(zh) for _ in range(rng.randint(1, 8)))
        if r < 0.88:
            return rng.choice(punct)
        if r < 0.95:
            return rng.choice(CHATTTS_TOKENS)
        return rng.choice(odd)

    lines = []
    for i in range(n):
        parts = [word() for _ in range(rng.randint(1, 25))]
        seps = [rng.choice(["", " ", " ", " ", "  "]) for _ in parts]
        line = "".join(p + s for p, s in zip(parts, seps)).strip(" ") if i % 10 else "".join(parts)
        if i % 50 == 0:
            line = "[Stts][spk_emb][speed_5]" + line + "[Ptts]"
        elif i % 50 == 1:
            line = "[Sbreak]" + line + "[Pbreak][oral_2][laugh_0][break_6]"
        lines.append(line)
    lines += ["", " ", "[uv_break]", "[uv_break][laugh][lbreak]", "你好，世界！", "Hello, World!",
              "[Stts][empty_spk][speed_5]今天天气很好[uv_break]，我们去公园吧[laugh]。[Ptts]"]
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tts/chattts/testdata/tokenizer")
    ap.add_argument("--lines", type=int, default=3000)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    counts = repo_words(root)
    vocab = build_vocab(counts)
    os.makedirs(a.out, exist_ok=True)
    for name, lower, special in [("chattts-like", False, False), ("uncased", True, True)]:
        with open(os.path.join(a.out, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(tokenizer_json(vocab, lower, special), f, ensure_ascii=False, indent=1)
            f.write("\n")
    rng = random.Random(18)
    words = [w for w, n in counts.most_common() if n >= 2]
    with open(os.path.join(a.out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for line in corpus(words, rng, a.lines):
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(len(vocab), "WordPiece entries +", len(CHATTTS_TOKENS), "ChatTTS tokens;", a.lines, "lines")


if __name__ == "__main__":
    main()
