"""An exported ChatTTS voice as a user hears it, judged: ``parley say`` speaks new assistant
sentences (none is in any voice corpus) with seed voices, the independent judge (train.judge,
PocketSphinx) writes down what it hears, and each seed's median F0 is measured.  The same
sentences through the human-derived source voices (train.corpus.voices) give the judge's
own error on people.

    python3 -m train.chattts.judge_say --model assets/demo/chattts --out R/judge [--sources flite:kal16,...]

Prints and writes OUT/results.json: {"wer": ..., "per_seed_f0_hz": {...}, "sources": {...}}.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import List, Optional

import numpy as np

from ..judge import Judge, score
from .evaluate import f0_median, read_24k

# New assistant sentences: what a voice assistant says, written for this check.
SENTENCES = [
    "Good evening, how can I help you tonight?",
    "It is half past seven and the kitchen lights are on.",
    "I set a timer for twelve minutes.",
    "Tomorrow will be cloudy with a little rain in the afternoon.",
    "Your next meeting starts in fifteen minutes.",
    "I turned the volume down to four.",
    "The train to the city leaves at eight fifteen.",
    "Sure, I will remind you to call your sister at noon.",
    "There are three new messages waiting for you.",
    "The oven is already warm, so you can start baking.",
    "I could not find that song, would you like something else?",
    "It is twenty degrees outside and the wind is light.",
    "Your alarm is set for six thirty in the morning.",
    "Here is a short poem about the sea.",
    "I have added milk and bread to your shopping list.",
    "The library closes at five on Saturday.",
    "Seven times twelve is eighty four.",
    "I will turn off the lights in the living room.",
    "Please speak a little louder, I did not hear you.",
    "Have a nice day and drive safely.",
    "The package should arrive on Thursday.",
    "You walked almost nine thousand steps today.",
    "I paused the music for you.",
    "The meeting was moved to Monday morning.",
    "Would you like me to read the news?",
    "The battery is at forty percent.",
    "It will be sunny all weekend.",
    "I found three restaurants near you.",
    "Your coffee should be ready in two minutes.",
    "Goodnight, sleep well.",
]

# Other new sentences, for choosing a setting (sampling defaults, say) without choosing it on
# the sentences above, which measure it.
SELECT = [
    "The garage door is closed and locked.",
    "I moved your dentist appointment to Friday at ten.",
    "The weather in Lisbon is warm and clear.",
    "Your phone is charged to ninety percent.",
    "I can read you a recipe for pancakes.",
    "The bus is running about six minutes late.",
    "There is one reminder left for this evening.",
    "I changed the thermostat to twenty one degrees.",
    "The museum opens at nine thirty tomorrow.",
    "You have a birthday party on Sunday afternoon.",
    "I sent the photos to your brother.",
    "The washing machine will finish in forty minutes.",
    "Shall I play some quiet piano music?",
    "The nearest pharmacy is two streets away.",
    "Eleven plus sixteen is twenty seven.",
    "I opened the blinds in the bedroom.",
    "Your flight boards at gate fourteen.",
    "The soup needs another ten minutes on the stove.",
    "I am sorry, I do not know the answer to that.",
    "Good morning, it is a bright and windy day.",
]


def say(parley: str, model: str, text: str, seed: int, out: str, precision: str = "auto",
        sampling: Optional[List[str]] = None) -> None:
    cmd = [parley, "say", "--engine", "chattts", "--model", model, "--seed", str(seed), "--precision", precision,
           *(sampling or []), "-o", out, text]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:8])}…: {r.stderr.strip()[-400:]}")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.judge_say", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="an exported ChatTTS voice directory")
    ap.add_argument("--out", required=True)
    ap.add_argument("--parley", default="bin/parley")
    ap.add_argument("--seeds", default="1,2,3,4,5,6,7,8,9,10", help="seed voices, used in turn")
    ap.add_argument("--limit", type=int, default=len(SENTENCES))
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "int8"], help="the GPT's weights (tts.precision)")
    ap.add_argument("--sources", default="", help="comma-separated train.corpus.voices ids that read the same sentences")
    ap.add_argument("--set", default="judge", choices=["judge", "select"],
                    help="judge: the sentences that measure a voice; select: others, for choosing a setting")
    ap.add_argument("--temperature", type=float, help="parley say --temperature (default: the engine's)")
    ap.add_argument("--top-p", type=float, help="parley say --top-p")
    ap.add_argument("--top-k", type=int, help="parley say --top-k")
    a = ap.parse_args(argv)
    sampling = []
    for flag, v in (("--temperature", a.temperature), ("--top-p", a.top_p), ("--top-k", a.top_k)):
        if v is not None:
            sampling += [flag, str(v)]
    os.makedirs(a.out, exist_ok=True)
    seeds = [int(s) for s in a.seeds.split(",") if s]
    judge = Judge()
    texts = (SENTENCES if a.set == "judge" else SELECT)[: a.limit]
    pairs, f0s = [], {}
    rows = []
    for i, text in enumerate(texts):
        seed = seeds[i % len(seeds)]
        path = os.path.join(a.out, f"say-{i:03d}-seed{seed}.wav")
        say(a.parley, a.model, text, seed, path, a.precision, sampling)
        x = read_24k(path)
        hyp = judge.transcribe(x, 24000)
        pairs.append((hyp, text))
        rows.append({"seed": seed, "ref": text, "hyp": hyp, "seconds": round(len(x) / 24000, 2)})
        f0s.setdefault(seed, []).append(f0_median(x))
    res = {"model": a.model, "precision": a.precision, "set": a.set, "sampling": " ".join(sampling), "sentences": len(texts), "wer": round(score(pairs)["wer"], 4),
           "per_seed_f0_hz": {str(s): round(float(np.median(v)), 1) for s, v in sorted(f0s.items())}}
    f0 = list(res["per_seed_f0_hz"].values())
    res["seed_f0_range_hz"] = [min(f0), max(f0)] if f0 else []
    if a.sources:
        from ..corpus import voices as V  # the human-derived voices, as the corpus made them (16 kHz)

        res["sources"] = {}
        for vid in [v for v in a.sources.split(",") if v]:
            xs = V.synthesize_many(texts, V.voice(vid), [V.Knobs()] * len(texts))
            got = [(judge.transcribe(np.asarray(x, dtype=np.float32), 16000), t) for x, t in zip(xs, texts) if x is not None]
            res["sources"][vid] = round(score(got)["wer"], 4)
    res["examples"] = rows[:8]
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({**res, "rows": rows}, f, indent=1)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
