"""The demo voice's espeak-ng corpus, with ChatTTS's controls in the audio.

    python3 -m train.chattts.corpus --out train/out/chattts/corpus --train 3000 --val 100 --test 120

Every utterance is one speaker (an en-us espeak-ng variant with its own pitch and base rate)
reading a sentence of train/corpus/sentences, punctuated (questions get "?", others often "."
or "!", some a comma), with control tokens placed in it:

  [uv_break] [v_break] [lbreak] [break_N]   a pause of 150 / 250 / 600 / N x 100 ms in the audio
                                            (the control grammar's calibration, tts/README.md)
  [laugh]                                   a laugh spliced in: "ha ha ha" in the same voice,
                                            +25 pitch, 1.3x rate
  [speed_N]                                 (the prompt) espeak rate = base rate x (0.5 + 0.1 N)

Text pieces between controls are synthesised separately and trimmed to speech, so the pause
lengths are exact.  24 kHz mono PCM16 WAVs; JSONL manifests with the text, the phoneme string
the model reads (the contract's espeak-ipa front-end), the speaker, the speed and where each
control sits in the audio.  Test utterances use held-out sentences and, in ``test.jsonl``,
held-out speakers (``test-seen.jsonl``: training speakers).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..corpus.sentences import sentence
from .tokenizer import CHATTTS_SPECIALS

SR = 24000
VOICE = "en-us"
# (variant, pitch, base rate in words/min): 24 training speakers, 6 held out.
TRAIN_SPEAKERS: List[Tuple[str, int, int]] = [
    ("m1", 45, 165), ("m2", 35, 170), ("m3", 50, 160), ("m4", 40, 175), ("m5", 55, 170), ("m6", 30, 165),
    ("f1", 60, 170), ("f2", 65, 160), ("f3", 55, 175), ("f4", 70, 165), ("Andy", 50, 170), ("Annie", 60, 175),
    ("david", 40, 160), ("linda", 65, 170), ("max", 45, 180), ("paul", 35, 165), ("john", 50, 175),
    ("ed", 40, 170), ("edward", 45, 160), ("iven", 55, 165), ("norbert", 35, 175), ("steph", 70, 170),
    ("klatt", 50, 165), ("klatt2", 45, 170),
]
TEST_SPEAKERS: List[Tuple[str, int, int]] = [
    ("m7", 45, 170), ("f5", 65, 165), ("michael", 40, 175), ("belinda", 60, 170), ("benjamin", 50, 160),
    ("klatt4", 55, 170),
]
# 40 more training speakers, on espeak-ng variants none of the above uses (nor Alicia, the
# person of `make clone-eval`): a zero-shot clone carries on from an unheard voice, which 24
# training speakers leave far from anything seen (train.chattts.corpus --speakers extra).
EXTRA_SPEAKERS: List[Tuple[str, int, int]] = [
    ("adam", 40, 165), ("Alex", 50, 170), ("Andrea", 62, 165), ("antonio", 45, 175), ("aunty", 66, 160),
    ("boris", 35, 170), ("caleb", 48, 165), ("Denis", 42, 175), ("Diogo", 52, 160), ("edward2", 38, 170),
    ("Gene", 46, 165), ("Gene2", 54, 175), ("gustave", 36, 165), ("Henrique", 44, 170), ("Hugo", 50, 160),
    ("iven2", 58, 170), ("iven3", 40, 175), ("Jacky", 55, 165), ("kaukovalta", 47, 170), ("Lee", 64, 160),
    ("marcelo", 41, 175), ("Marco", 53, 165), ("Mario", 37, 170), ("michel", 49, 175), ("miguel", 43, 160),
    ("Mike", 51, 170), ("Nguyen", 57, 165), ("pablo", 39, 175), ("pedro", 45, 170), ("quincy", 60, 165),
    ("rob", 34, 170), ("robert", 48, 160), ("steph2", 68, 170), ("steph3", 62, 175), ("Storm", 44, 165),
    ("zac", 52, 170), ("anika", 67, 165), ("m8", 42, 170), ("grandma", 63, 160), ("klatt3", 50, 170),
]
PAUSE_MS: Dict[str, int] = {"[uv_break]": 150, "[v_break]": 250, "[lbreak]": 600,
                            **{f"[break_{n}]": 100 * n for n in range(8)}}
LAUGH = "[laugh]"
MARKS = ",.;:!?"
CONTROL_RE = re.compile("(" + "|".join(re.escape(t) for t in sorted(CHATTTS_SPECIALS, key=len, reverse=True)) + ")")


def speaker_name(s: Tuple[str, int, int]) -> str:
    return f"{s[0]}-p{s[1]}-r{s[2]}"


# ------------------------------------------------------------------------------ front-end


@lru_cache(maxsize=100000)
def espeak_ipa(text: str, voice: str = VOICE) -> str:
    """`espeak-ng -q --ipa -v VOICE TEXT`, line breaks as single spaces (tts/espeak.Phonemes)."""
    r = subprocess.run(["espeak-ng", "-q", "--ipa", "-v", voice, text], capture_output=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"espeak-ng --ipa: {r.stderr.decode(errors='replace').strip()}")
    return " ".join(r.stdout.decode("utf-8").split())


def split_controls(text: str) -> List[Tuple[str, bool]]:
    """[(piece, is_control)] with the control tokens (all 50 names) cut out."""
    out = []
    for p in CONTROL_RE.split(text):
        if not p:
            continue
        out.append((p, p in CHATTTS_SPECIALS))
    return out


def phonemize(text: str, voice: str = VOICE) -> str:
    """The contract's "espeak-ipa" front-end: control tokens kept, each run cut after , . ; : ! ?
    (the mark kept as a word), pieces phonemised, everything joined by single spaces."""
    words: List[str] = []
    for piece, ctl in split_controls(text):
        if ctl:
            words.append(piece)
            continue
        start = 0
        for i, c in enumerate(piece):
            if c in MARKS:
                seg = piece[start:i].strip()
                if seg:
                    words.append(espeak_ipa(seg, voice))
                words.append(c)
                start = i + 1
        seg = piece[start:].strip()
        if seg:
            words.append(espeak_ipa(seg, voice))
    return " ".join(w for w in words if w)


# ------------------------------------------------------------------------------ audio


def espeak_wav(text: str, variant: str, pitch: int, rate: int, tmpdir: str) -> np.ndarray:
    # imported here: the front-end above is imported by training stages that run where the audio
    # libraries may be missing (a GPU machine's PyTorch)
    from ..corpus.voices import espeak_wav as synth

    return synth(text, VOICE + ("+" + variant if variant else ""), rate, pitch, tmpdir)


def trim(x: np.ndarray, margin_s: float = 0.01, thresh: float = 0.02) -> np.ndarray:
    """Cut leading and trailing silence (below thresh x peak), keeping a small margin."""
    if len(x) == 0:
        return x
    a = np.abs(x)
    on = np.nonzero(a > thresh * (a.max() + 1e-9))[0]
    if len(on) == 0:
        return x[:0]
    m = int(margin_s * SR)
    return x[max(0, on[0] - m):min(len(x), on[-1] + m)]


def render(item: dict, out_dir: str, tmpdir: str) -> dict:
    """Synthesise one planned utterance; returns its manifest row."""
    import soundfile as sf

    variant, pitch, base = item["speaker"]
    rate = int(round(base * (0.5 + 0.1 * item["speed"])))
    parts: List[np.ndarray] = [np.zeros(int(0.1 * SR), np.float32)]
    controls = []
    pos = len(parts[0])
    for piece, ctl in split_controls(item["text"]):
        if ctl and piece in PAUSE_MS:
            seg = np.zeros(int(PAUSE_MS[piece] * SR / 1000), np.float32)
        elif ctl and piece == LAUGH:
            laugh = trim(espeak_wav("ha ha ha", variant, min(99, pitch + 25), int(rate * 1.3), tmpdir))
            seg = np.concatenate([np.zeros(int(0.08 * SR), np.float32), laugh, np.zeros(int(0.08 * SR), np.float32)])
        elif ctl:
            continue  # other controls (speed, oral) are not in the audio
        else:
            if not piece.strip():
                continue
            seg = trim(espeak_wav(piece.strip(), variant, pitch, rate, tmpdir))
        if ctl:
            controls.append({"token": piece, "start": pos / SR, "end": (pos + len(seg)) / SR})
        parts.append(seg)
        pos += len(seg)
    parts.append(np.zeros(int(0.15 * SR), np.float32))
    x = np.concatenate(parts)
    x = x / (np.abs(x).max() + 1e-9) * 0.7
    rel = os.path.join("wav", item["key"] + ".wav")
    sf.write(os.path.join(out_dir, rel), x.astype(np.float32), SR, subtype="PCM_16")
    return {"key": item["key"], "source": rel, "seconds": round(len(x) / SR, 3), "text": item["text"],
            "plain": item["plain"], "phonemes": phonemize(item["text"]), "speaker": speaker_name(item["speaker"]),
            "speaker_index": item["speaker_index"], "speed": item["speed"], "controls": controls}


# ------------------------------------------------------------------------------ plan


def with_controls(words: List[str], rng: random.Random, p_pause: float, p_laugh: float) -> str:
    out = list(words)
    if len(out) > 2 and rng.random() < p_pause:
        r = rng.random()
        tok = "[uv_break]" if r < 0.35 else "[lbreak]" if r < 0.5 else f"[break_{rng.randint(1, 7)}]"
        out.insert(rng.randint(1, len(out) - 1), tok)
    if rng.random() < p_laugh:
        r = rng.random()
        where = 0 if r < 0.3 else len(out) if r < 0.6 else rng.randint(1, max(1, len(out) - 1))
        out.insert(where, LAUGH)
    return " ".join(out)


QUESTION_WORDS = {"what", "how", "when", "where", "who", "why", "which", "is", "are", "can", "could", "do", "does",
                  "will", "would", "should", "did"}


def punctuate(words: List[str], rng: random.Random) -> List[str]:
    """Written form for the speaker: a question mark on questions, otherwise often a full stop
    or an exclamation mark, and now and then a comma (espeak-ng pauses and intones at them)."""
    out = list(words)
    if len(out) > 4 and rng.random() < 0.3:
        i = rng.randint(1, len(out) - 3)
        out[i] += ","
    if out[0] in QUESTION_WORDS:
        out[-1] += "?"
    else:
        r = rng.random()
        out[-1] += "." if r < 0.5 else "!" if r < 0.6 else ""
    return out


def plan(split: str, n: int, speakers: List[Tuple[str, int, int]], seed: int, banned: set,
         p_pause: float = 0.4, p_laugh: float = 0.15, p_speed: float = 0.4, speaker_offset: int = 0) -> List[dict]:
    rng = random.Random(f"{seed}-{split}")
    items, tries = [], 0
    while len(items) < n:
        tries += 1
        if tries > 50 * n + 1000:
            raise RuntimeError(f"cannot find {n} sentences for {split}")
        style = "templates" if rng.random() < 0.6 else rng.choice(["mixed", "assistant"])
        s = sentence(rng, style)
        if s in banned:
            continue
        words = s.split()
        if not 2 <= len(words) <= 14:
            continue
        si = rng.randrange(len(speakers))
        speed = rng.randint(2, 8) if rng.random() < p_speed else 5
        items.append({"key": f"{split}-{len(items):06d}", "text": with_controls(punctuate(words, rng), rng, p_pause, p_laugh),
                      "plain": s, "speaker": speakers[si], "speaker_index": si + speaker_offset, "speed": speed})
    return items


def write(out: str, name: str, rows: List[dict]) -> None:
    with open(os.path.join(out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def generate(out: str, n_train: int, n_val: int, n_test: int, seed: int, jobs: int, log=sys.stderr,
             speakers: str = "base") -> dict:
    """speakers "base": the corpus (training speakers, held-out test sentences and speakers);
    "extra": training utterances of EXTRA_SPEAKERS alone (speaker indices after the base
    ones), to train beside a base corpus of the same seed, whose test sentences it leaves out."""
    os.makedirs(os.path.join(out, "wav"), exist_ok=True)
    test_plain = plan("test", n_test, TEST_SPEAKERS, seed, set(), p_pause=0.0, p_laugh=0.0, p_speed=0.0)
    held = {it["plain"] for it in test_plain}
    if speakers == "extra":
        return _render_splits(out, {"train": plan("train-extra", n_train, EXTRA_SPEAKERS, seed, held,
                                                   speaker_offset=len(TRAIN_SPEAKERS))},
                              TRAIN_SPEAKERS + EXTRA_SPEAKERS, jobs, log)
    splits = {
        "train": plan("train", n_train, TRAIN_SPEAKERS, seed, held),
        "val": plan("val", n_val, TRAIN_SPEAKERS, seed, held),
        # held-out sentences x held-out speakers (no controls: the intelligibility test set)
        "test": test_plain,
        # the same sentences by training speakers
        "test-seen": [dict(it, key=it["key"].replace("test", "seen"), speaker=TRAIN_SPEAKERS[i % len(TRAIN_SPEAKERS)],
                           speaker_index=i % len(TRAIN_SPEAKERS)) for i, it in enumerate(test_plain)],
        # a few utterances of each held-out speaker, for fitting its speaker vector
        "adapt": plan("adapt", 8 * len(TEST_SPEAKERS), TEST_SPEAKERS, seed + 1, held, p_pause=0.2, p_laugh=0.0,
                      p_speed=0.0),
    }
    for it in splits["adapt"]:
        it["speaker_index"] = TEST_SPEAKERS.index(it["speaker"])
    for it in splits["test"]:
        it["speaker_index"] = TEST_SPEAKERS.index(it["speaker"])
    return _render_splits(out, splits, TRAIN_SPEAKERS, jobs, log)


def _render_splits(out: str, splits: Dict[str, List[dict]], train_speakers, jobs: int, log) -> dict:
    counts = {}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max(1, jobs)) as ex:
        for name, items in splits.items():
            rows = list(ex.map(lambda it: render(it, out, tmp), items))
            write(out, name, rows)
            counts[name] = len(rows)
            print(json.dumps({"split": name, "utterances": len(rows),
                              "hours": round(sum(r["seconds"] for r in rows) / 3600, 3)}), file=log, flush=True)
    with open(os.path.join(out, "speakers.json"), "w") as f:
        json.dump({"train": [speaker_name(s) for s in train_speakers],
                   "test": [speaker_name(s) for s in TEST_SPEAKERS]}, f, indent=1)
    return counts


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.corpus", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--train", type=int, default=3000)
    ap.add_argument("--val", type=int, default=100)
    ap.add_argument("--test", type=int, default=120)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--speakers", choices=("base", "extra"), default="base",
                    help="extra: training utterances of the 40 extra speakers alone (for beside a base corpus)")
    a = ap.parse_args(argv)
    generate(a.out, a.train, a.val, a.test, a.seed, a.jobs, speakers=a.speakers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
