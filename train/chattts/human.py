"""The demo voice's human-derived corpus: the same layout and controls as train.chattts.corpus,
spoken by voices made from real people's recordings (flite's CMU ARCTIC voices, festival's
diphone and HTS voices) widened into hundreds of speakers (train.corpus.augment: formant warp,
pitch, pitch range, rate, voice-quality tilt), reading open-vocabulary text
(train.corpus.text: WordNet examples, State of the Union addresses, Moby-Dick, the assistant's
requests and replies).

    python3 -m train.chattts.human --out train/out/chattts/human --train 20000 --jobs 2

Controls are in the audio as in train.chattts.corpus: pauses of the control grammar's lengths,
a laugh spliced in (the speaker's own "ha ha ha", higher and quicker), and ``[speed_N]`` as a
real tempo change made by the synthesiser itself (its duration knob times 1/(0.5 + 0.1 N)), so
speed is learnt from speech that is faster or slower, not from resampled audio.

Splits: train and val (training speakers), test (held-out sentences spoken by the held-out
person, ``--holdout-person``, as recorded and as pitch/formant-shifted variants: speakers no
model has heard), test-seen (the same sentences by training speakers), adapt (8 utterances of
each test speaker, for fitting its speaker vector and for clone prompts).  24 kHz mono PCM16
(the voices are 16 kHz: nothing above 8 kHz).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
import tempfile
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..corpus import augment as A
from ..corpus import text as T
from ..corpus import voices as V
from .corpus import LAUGH, PAUSE_MS, phonemize, punctuate, split_controls, trim, with_controls

SR = 24000
# the human-derived voices (espeak-ng is what this corpus replaces)
VOICE_WEIGHTS = {"flite:kal16": 1.0, "flite:awb": 1.0, "flite:rms": 1.0, "flite:slt": 1.3,
                 "festival:kal_diphone": 0.6, "festival:ked_diphone": 1.0, "festival:cmu_us_slt_arctic_hts": 1.0}
MAX_WORDS = 16


def speed_stretch(n: int) -> float:
    """[speed_N] as a duration factor: rate 0.5 + 0.1 N of normal (speed_5 normal)."""
    return 1.0 / (0.5 + 0.1 * n)


def test_speakers(person: str, variants: int, rng: np.random.Generator) -> List[A.Speaker]:
    vids = [vid for vid, v in V.VOICES.items() if v.person == person]
    if not vids:
        raise ValueError(f"--holdout-person {person!r}: no voice of that person")
    out = [A.draw_speaker(f"{person}-plain{i}", V.voice(v), rng, plain=True) for i, v in enumerate(vids)]
    out += [A.draw_speaker(f"{person}-{i:02d}", V.voice(vids[i % len(vids)]), rng) for i in range(variants)]
    return out


def plan(a, pool: T.TextPool) -> Tuple[Dict[str, List[dict]], List[A.Speaker], List[A.Speaker]]:
    rng = np.random.default_rng(a.seed)
    vids = [v for v in VOICE_WEIGHTS if V.VOICES[v].person != a.holdout_person]
    w = np.array([VOICE_WEIGHTS[v] for v in vids])
    picks = rng.choice(len(vids), size=a.speakers, p=w / w.sum())
    train_spk = [A.draw_speaker(f"spk{i:04d}", V.voice(vids[k]), rng) for i, k in enumerate(picks)]
    test_spk = test_speakers(a.holdout_person, a.heldout_variants, rng)
    trng = random.Random(a.seed)

    def text(which: str) -> Tuple[str, str]:
        for _ in range(1000):
            cat, s = pool.draw(trng, which)
            if 2 <= len(s.split()) <= MAX_WORDS:
                return cat, s
        raise RuntimeError(f"no {which} sentence of 2-{MAX_WORDS} words")

    def items(split: str, n: int, speakers: Sequence[A.Speaker], which: str, controls: bool) -> List[dict]:
        out = []
        for i in range(n):
            cat, plain = text(which)
            si = trng.randrange(len(speakers))
            speed = trng.randint(2, 8) if controls and trng.random() < a.p_speed else 5
            words = punctuate(plain.split(), trng)
            t = with_controls(words, trng, a.p_pause, a.p_laugh) if controls else " ".join(words)
            out.append({"key": f"{split}-{i:06d}", "text": t, "plain": plain, "category": cat,
                        "speaker": speakers[si].id, "speaker_index": si, "speed": speed, "seed": trng.randrange(2 ** 31)})
        return out

    splits = {
        "train": items("train", a.train, train_spk, "train", True),
        "val": items("val", a.val, train_spk, "val", True),
        "test": items("test", a.test, test_spk, "test", False),
        "adapt": items("adapt", 8 * len(test_spk), test_spk, "val", False),
    }
    for i, it in enumerate(splits["adapt"]):  # 8 of each test speaker
        it["speaker_index"] = i % len(test_spk)
        it["speaker"] = test_spk[it["speaker_index"]].id
    splits["test-seen"] = [dict(it, key=it["key"].replace("test", "seen"), speaker=train_spk[i % len(train_spk)].id,
                                speaker_index=i % len(train_spk)) for i, it in enumerate(splits["test"])]
    return splits, train_spk, test_spk


def render_shard(job) -> List[dict]:
    """One shard: every text piece of every item, synthesised per voice in one go (festival
    starts once), then the items assembled with their pauses and laughs."""
    import soundfile as sf
    from scipy.signal import resample_poly

    out_dir, items, spk = job
    speakers = {k: A.Speaker.from_dict(v) for k, v in spk.items()}
    pieces: Dict[str, List[Tuple[int, int, str, V.Knobs, float]]] = defaultdict(list)
    layout: List[List[Tuple[str, object]]] = []
    for n, it in enumerate(items):
        sp = speakers[it["speaker"]]
        v = V.voice(sp.voice)
        k, w = A.utterance_knobs(sp, v, np.random.default_rng(it["seed"]))
        k = V.Knobs(k.f0, k.f0_range, k.stretch * speed_stretch(it["speed"]))
        laugh = V.Knobs(None if k.f0 is None else k.f0 * 1.3, k.f0_range * 1.5, k.stretch * 0.75)
        parts = []
        for p, ctl in split_controls(it["text"]):
            if ctl and p in PAUSE_MS:
                parts.append(("pause", PAUSE_MS[p]))
            elif ctl and p == LAUGH:
                pieces[v.id].append((n, len(parts), "ha ha ha", laugh, w))
                parts.append(("laugh", None))
            elif not ctl and p.strip():
                pieces[v.id].append((n, len(parts), T.synth_text(p.strip()), k, w))
                parts.append(("speech", None))
        layout.append(parts)
    audio: Dict[Tuple[int, int], Optional[np.ndarray]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for vid, ps in sorted(pieces.items()):
            outs = V.synthesize_many([p[2] for p in ps], V.voice(vid), [p[3] for p in ps], tmp)
            for (n, j, _, _, w), x in zip(ps, outs):
                audio[(n, j)] = None if x is None else trim_16k(A.tilt(A.warp(x, w), speakers[items[n]["speaker"]].tilt))
    rows = []
    for n, it in enumerate(items):
        segs, controls, pos, ok = [np.zeros(int(0.1 * 16000), np.float32)], [], int(0.1 * 16000), True
        toks = [p for p, ctl in split_controls(it["text"]) if (ctl and (p in PAUSE_MS or p == LAUGH)) or (not ctl and p.strip())]
        for j, ((kind, val), tok) in enumerate(zip(layout[n], toks)):
            if kind == "pause":
                seg = np.zeros(int(val * 16000 / 1000), np.float32)
            else:
                x = audio.get((n, j))
                if x is None:
                    ok = False
                    break
                seg = x
                if kind == "laugh":
                    gap = np.zeros(int(0.08 * 16000), np.float32)
                    seg = np.concatenate([gap, x, gap])
            if kind != "speech":
                controls.append({"token": tok, "start": pos / 16000, "end": (pos + len(seg)) / 16000})
            segs.append(seg)
            pos += len(seg)
        if not ok:
            continue  # a piece the synthesiser refused: the item is skipped (counted by the caller)
        segs.append(np.zeros(int(0.15 * 16000), np.float32))
        x = np.concatenate(segs)
        x = resample_poly(x, 3, 2).astype(np.float32)
        x = x / (np.abs(x).max() + 1e-9) * 0.7
        rel = os.path.join("wav", it["key"] + ".wav")
        sf.write(os.path.join(out_dir, rel), x, SR, subtype="PCM_16")
        sp = speakers[it["speaker"]]
        rows.append({"key": it["key"], "source": rel, "seconds": round(len(x) / SR, 3), "text": it["text"],
                     "plain": it["plain"], "phonemes": phonemize(it["text"]), "speaker": it["speaker"],
                     "speaker_index": it["speaker_index"], "speed": it["speed"], "controls": controls,
                     "voice": sp.voice, "person": V.voice(sp.voice).person, "f0": round(sp.f0, 1),
                     "warp": round(sp.warp, 4), "text_source": it["category"]})
    return rows


def trim_16k(x: np.ndarray) -> np.ndarray:
    """train.chattts.corpus.trim at 16 kHz (its margin is in seconds of its own rate)."""
    a = np.abs(x)
    on = np.nonzero(a > 0.02 * (a.max() + 1e-9))[0]
    if len(on) == 0:
        return x[:0]
    m = int(0.01 * 16000)
    return x[max(0, on[0] - m):min(len(x), on[-1] + m)]


def generate(a, pool: Optional[T.TextPool] = None, log=sys.stderr) -> dict:
    for vid in VOICE_WEIGHTS:
        V.check(V.voice(vid))
    pool = pool or T.load_pool(a.text_cache, log=log)
    splits, train_spk, test_spk = plan(a, pool)
    wanted = [x.strip() for x in (a.splits or ",".join(splits)).split(",") if x.strip()]
    unknown = sorted(set(wanted) - set(splits))
    if unknown or not wanted:
        raise ValueError(f"--splits {','.join(unknown) or repr(a.splits)}: the splits are {', '.join(splits)}")
    os.makedirs(os.path.join(a.out, "wav"), exist_ok=True)
    spk = {s.id: s.to_dict() for s in train_spk + test_spk}
    counts = {}
    ctx = mp.get_context("fork")
    with ctx.Pool(max(1, a.jobs)) as p:
        for name, its in splits.items():
            if name not in wanted:
                continue  # planned all the same: the others are the whole build's, item for item
            jobs = [(a.out, its[s:s + 100], spk) for s in range(0, len(its), 100)]
            rows = [r for part in p.imap(render_shard, jobs) for r in part]
            with open(os.path.join(a.out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
                for r in rows:
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
            counts[name] = {"utterances": len(rows), "skipped": len(its) - len(rows),
                            "hours": round(sum(r["seconds"] for r in rows) / 3600, 3)}
            print(json.dumps({"split": name, **counts[name]}), file=log, flush=True)
    with open(os.path.join(a.out, "speakers.json"), "w") as f:
        json.dump({"train": [s.id for s in train_spk], "test": [s.id for s in test_spk],
                   "table": spk}, f, indent=1)
    recipe = {"args": {k: v for k, v in vars(a).items() if k not in ("out", "text_cache")}, "counts": counts,
              "text": pool.summary()}
    if set(wanted) == set(splits):  # a part leaves a whole build's recipe as it was
        with open(os.path.join(a.out, "recipe.json"), "w") as f:
            json.dump(recipe, f, indent=1)
    return recipe


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.human", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--train", type=int, default=20000)
    ap.add_argument("--val", type=int, default=200)
    ap.add_argument("--test", type=int, default=120)
    ap.add_argument("--speakers", type=int, default=240, help="training speakers")
    ap.add_argument("--holdout-person", default="rms")
    ap.add_argument("--heldout-variants", type=int, default=5, help="pitch/warp variants of the held-out person")
    ap.add_argument("--p-pause", type=float, default=0.4)
    ap.add_argument("--p-laugh", type=float, default=0.15)
    ap.add_argument("--p-speed", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--text-cache", default=None)
    ap.add_argument("--splits", default=None,
                    help="render only these splits (comma-separated; default all): the plan is the whole corpus's, "
                         "so test,adapt alone are the held-out clips a full build makes, for clone_cer without the hours")
    return ap


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    try:
        generate(a)
    except (V.VoiceMissing, T.TextSourceMissing, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
