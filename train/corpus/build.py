"""The human-derived speech corpus: flite and festival voices made from real people's
recordings, widened into hundreds of speakers, plus espeak-ng for breadth; open-vocabulary
text; rooms, noise, microphones and codecs.  Built in parallel shards that resume after a kill.

    python3 -m train.corpus.build --out train/out/human --train 60000 --jobs 2

Splits (``OUT/<split>.jsonl``, FunASR-style rows whose ``source`` is relative to OUT):

- ``train``: training speakers drawn from every voice but the held-out person's, training
  texts, training conditions (``augment.Conditions``);
- ``val``: training speakers, the validation text set (never trained on), clean;
- ``test-voice``: the held-out person (``--holdout-person``, default rms: every voice of that
  person), as recorded and as a few pitch/warp variants, held-out texts, clean;
- ``test-speakers``: speakers drawn from the training voices but never trained on, held-out
  texts, clean;
- ``test-noise``: the held-out speakers and the held-out person under training conditions with
  noise at fixed SNRs (``snr`` in each row, for the per-noise-level WER);
- ``test-espeak``: espeak-ng variants no training item uses, held-out texts, clean.

Every row records what made it: engine, voice, person, speaker, the synthesiser's knobs,
text source and each condition.  ``OUT/recipe.json`` holds the arguments, seeds, counts, hours
per person and voice, and how many texts a synthesiser refused (skipped, never fatal).

A prefix: ``--train-shards N`` builds the first N training shards of the same plan (the
held-out splits whole), so a short session can train on part of the corpus and be scored on
exactly the held-out splits of the whole; a later run without the flag adds the rest.
``train.jsonl`` then lists the shards built in that run's plan; ``recipe.json`` records the flag.

Resuming: each shard (``OUT/shards/<split>-NNNNN/``) is finished when its ``done.json``
exists; that file holds the sha256 of every file in the shard and of the shard's plan.  A run
rebuilds any shard whose files no longer match their hashes (or whose plan changed) and skips
the rest.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import multiprocessing as mp
import os
import random
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import soundfile as sf

from . import augment as A
from . import text as T
from . import voices as V
from .synth import ACCENTS, TEST_VARIANTS, TRAIN_VARIANTS

SR = V.SR
SPLITS = ("train", "val", "test-voice", "test-speakers", "test-noise", "test-espeak")
TEST_SNRS = (0, 5, 10, 20, 30)
# How often each voice speaks in training: the human-derived voices carry the corpus,
# espeak-ng's many variants add breadth.
VOICE_WEIGHTS = {"flite:kal16": 1.0, "flite:awb": 1.0, "flite:rms": 1.0, "flite:slt": 1.2,
                 "festival:kal_diphone": 0.7, "festival:ked_diphone": 1.0, "festival:cmu_us_slt_arctic_hts": 0.9}
ESPEAK_WEIGHT = 1.2  # all espeak-ng variants together
# --voice-set accented: festival's Czech and Finnish voices saying English phones
# (train.corpus.accent); a supplement beside the human set, without espeak-ng.
ACCENTED_WEIGHTS = {"festival:czech_dita": 1.0, "festival:czech_machac": 1.0, "festival:czech_ph": 1.0,
                    "festival:suo_fi_lj_diphone": 1.0, "festival:hy_fi_mv_diphone": 1.0}
VOICE_SETS = ("human", "accented")


def voice_weights(voice_set: str) -> Tuple[Dict[str, float], float]:
    """The set's human-derived voices with their weights, and espeak-ng's share."""
    if voice_set == "accented":
        return ACCENTED_WEIGHTS, 0.0
    if voice_set == "human":
        return VOICE_WEIGHTS, ESPEAK_WEIGHT
    raise CorpusError(f"--voice-set {voice_set!r}: want one of {', '.join(VOICE_SETS)}")


class CorpusError(RuntimeError):
    pass


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- planning ---------------------------------------------------------------------------------

def train_voices(holdout_person: str, voice_set: str = "human") -> List[Tuple[str, float]]:
    weights, espeak_weight = voice_weights(voice_set)
    out = [(vid, w) for vid, w in weights.items() if V.voice(vid).person != holdout_person]
    if espeak_weight <= 0:
        return out
    espeak = [f"espeak-ng:{a}+{v}" if v else f"espeak-ng:{a}" for a in ACCENTS for v in TRAIN_VARIANTS]
    out += [(vid, espeak_weight / len(espeak)) for vid in espeak]
    return out


def draw_speakers(n: int, voices: Sequence[Tuple[str, float]], rng: np.random.Generator, prefix: str) -> List[A.Speaker]:
    ids = [v for v, _ in voices]
    w = np.array([w for _, w in voices], dtype=np.float64)
    # human voices get speakers in proportion to their weight; espeak-ng variants share theirs
    picks = rng.choice(len(ids), size=n, p=w / w.sum())
    return [A.draw_speaker(f"{prefix}{i:04d}", V.voice(ids[k]), rng) for i, k in enumerate(picks)]


def category_weights(s: str) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for part in s.split(","):
        name, eq, w = (x.strip() for x in part.partition("="))
        if name not in T.TextPool.WEIGHTS or not eq:
            raise argparse.ArgumentTypeError(f"{part!r}: want CATEGORY=WEIGHT, a category one of {sorted(T.TextPool.WEIGHTS)}")
        try:
            out[name] = float(w)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r}: {w!r} is not a number")
        if not (0 <= out[name] < float("inf")):
            raise argparse.ArgumentTypeError(f"{part!r}: want a weight of 0 or more")
    if not any(out.get(c, T.TextPool.WEIGHTS[c]) > 0 for c in T.TextPool.WEIGHTS if c != "word"):
        # single words are training text only: the held-out splits need another category
        raise argparse.ArgumentTypeError(f"{s!r}: every category but word would weigh 0 (the held-out splits draw from those)")
    return out


def plan(args) -> Tuple[Dict[str, List[dict]], Dict[str, A.Speaker], T.TextPool]:
    pool = T.load_pool(args.text_cache, log=sys.stderr)
    # getattr: callers' own Namespaces from before these flags have no such fields
    pool.open_frames = getattr(args, "open_frames", 0.0)
    pool.weights = {**T.TextPool.WEIGHTS, **(getattr(args, "weights", None) or {})}
    rng = np.random.default_rng(args.seed)
    weights, espeak_weight = voice_weights(args.voice_set)
    tv = train_voices(args.holdout_person, args.voice_set)
    train_spk = draw_speakers(args.speakers, tv, rng, "spk")
    held_spk = draw_speakers(args.heldout_speakers, [(v, w) for v, w in tv if not v.startswith("espeak-ng:")], rng, "hspk")
    catalogue = [V.voice(vid) for vid in weights]
    held_voices = [v.id for v in catalogue if v.person == args.holdout_person]
    if not held_voices:
        raise CorpusError(f"--holdout-person {args.holdout_person!r}: no voice of that person in the {args.voice_set} set "
                          f"(people: {', '.join(sorted({v.person for v in catalogue}))})")
    person_spk = [A.draw_speaker(f"{args.holdout_person}-plain{i}", V.voice(v), rng, plain=True)
                  for i, v in enumerate(held_voices)]
    person_spk += [A.draw_speaker(f"{args.holdout_person}-{i:02d}", V.voice(held_voices[i % len(held_voices)]), rng)
                   for i in range(args.heldout_person_variants)]
    espeak_test = [A.draw_speaker(f"espeak-test{i:02d}", V.espeak_voice(f"{ACCENTS[i % len(ACCENTS)]}+{v}"), rng, plain=True)
                   for i, v in enumerate(TEST_VARIANTS * 2)] if espeak_weight > 0 else []
    speakers = {s.id: s for s in train_spk + held_spk + person_spk + espeak_test}

    trng = random.Random(args.seed)
    splits: Dict[str, List[dict]] = {}

    def items(split: str, n: int, spk: Sequence[A.Speaker], text_set: str, cond: str,
              snrs: Sequence[Optional[float]] = (None,)) -> List[dict]:
        out = []
        for i in range(n):
            cat, text = pool.draw(trng, text_set)
            out.append({"key": f"{split}-{i:06d}", "split": split, "text": text, "category": cat,
                        "speaker": spk[trng.randrange(len(spk))].id, "cond": cond,
                        "snr": snrs[i % len(snrs)], "seed": trng.randrange(2 ** 31)})
        return out

    splits["train"] = items("train", args.train, train_spk, "train", "train")
    splits["val"] = items("val", args.val, train_spk, "val", "clean")
    splits["test-voice"] = items("test-voice", args.test, person_spk, "test", "clean")
    splits["test-speakers"] = items("test-speakers", args.test, held_spk, "test", "clean")
    splits["test-noise"] = items("test-noise", args.test, held_spk + person_spk, "test", "noise", TEST_SNRS)
    splits["test-espeak"] = items("test-espeak", args.test // 2, espeak_test, "test", "clean") if espeak_test else []
    # in the items, so their shards' plan hashes say so (getattr: callers' own Namespaces
    # from before the flag have no such field)
    if getattr(args, "accent_repair", False):
        for its in splits.values():
            for it in its:
                it["repair"] = True
    return splits, speakers, pool


# --- rendering ----------------------------------------------------------------------------------

def conditions_for(item: dict) -> A.Conditions:
    if item["cond"] == "clean":
        return A.Conditions.clean()
    if item["cond"] == "noise":
        snr = float(item["snr"])
        return A.Conditions(room=0.45, noise=1.0, channel=0.45, codec=0.12, snr=(snr, snr))
    return A.Conditions()


def render_shard(job: Tuple[str, List[dict], Dict[str, dict]]) -> dict:
    """Synthesise, warp and condition one shard's items; write its WAVs, manifest and done.json."""
    shard_dir, items, spk_dicts = job
    tmp_root = shard_dir + ".tmp"
    shutil.rmtree(tmp_root, ignore_errors=True)
    shutil.rmtree(shard_dir, ignore_errors=True)
    os.makedirs(os.path.join(tmp_root, "wav"))
    speakers = {k: A.Speaker.from_dict(v) for k, v in spk_dicts.items()}
    refused: List[str] = []
    clean: Dict[str, np.ndarray] = {}
    knobs_of: Dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        by_voice: Dict[str, List[dict]] = defaultdict(list)
        for it in items:
            by_voice[speakers[it["speaker"]].voice].append(it)
        for vid, its in sorted(by_voice.items()):
            v = V.voice(vid)
            ks, warps = [], []
            for it in its:
                sp = speakers[it["speaker"]]
                k, w = A.utterance_knobs(sp, v, np.random.default_rng(it["seed"]))
                if it.get("repair"):
                    k = dataclasses.replace(k, repair=True)
                ks.append(k)
                warps.append(w)
            texts = [T.synth_text(it["text"]) for it in its]
            outs = V.synthesize_many(texts, v, ks, tmp)
            for it, k, w, x in zip(its, ks, warps, outs):
                if x is None:
                    refused.append(it["key"])
                    continue
                sp = speakers[it["speaker"]]
                x = A.tilt(A.warp(x, w), sp.tilt)
                clean[it["key"]] = x
                knobs_of[it["key"]] = k.to_dict()
        others = list(clean.values())
        rows = []
        for it in items:
            x = clean.get(it["key"])
            if x is None:
                continue
            rng = np.random.default_rng(it["seed"] + 1)
            y, info = A.condition(x, rng, conditions_for(it), others, tmp)
            rel = os.path.join("wav", it["key"] + ".wav")
            sf.write(os.path.join(tmp_root, rel), y, SR, subtype="PCM_16")
            sp = speakers[it["speaker"]]
            v = V.voice(sp.voice)
            rows.append({
                "key": it["key"], "source": rel, "source_len": int(round(len(y) / SR * 100)),
                "target": it["text"], "target_len": len(it["text"].split()), "text_language": "<|en|>",
                "emo_target": "<|NEUTRAL|>", "event_target": "<|Speech|>", "with_or_wo_itn": "<|woitn|>",
                "engine": v.engine, "voice": v.id, "person": v.person, "speaker": sp.id,
                "knobs": knobs_of[it["key"]], "warp": round(sp.warp, 4), "text_source": it["category"],
                "aug": info, "snr": info.get("snr"),
            })
    with open(os.path.join(tmp_root, "manifest.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    files = {}
    for dirpath, _, names in os.walk(tmp_root):
        for n in names:
            p = os.path.join(dirpath, n)
            files[os.path.relpath(p, tmp_root)] = sha256_file(p)
    done = {"plan": plan_hash(items, spk_dicts), "files": files, "items": len(items), "rows": len(rows),
            "refused": refused, "seconds": round(sum(r["source_len"] for r in rows) / 100, 2)}
    with open(os.path.join(tmp_root, "done.json.partial"), "w") as f:
        json.dump(done, f)
    os.replace(os.path.join(tmp_root, "done.json.partial"), os.path.join(tmp_root, "done.json"))
    os.replace(tmp_root, shard_dir)  # the shard appears whole or not at all
    return {"shard": os.path.basename(shard_dir), "rows": len(rows), "refused": len(refused)}


def plan_hash(items: Sequence[dict], spk: Dict[str, dict]) -> str:
    used = sorted({it["speaker"] for it in items})
    blob = json.dumps([list(items), [spk[s] for s in used]], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


def shard_ok(shard_dir: str, want_plan: str, verify: bool = True) -> Tuple[bool, str]:
    """(finished and intact, why not)."""
    done_path = os.path.join(shard_dir, "done.json")
    if not os.path.isfile(done_path):
        return False, "unfinished"
    try:
        with open(done_path) as f:
            done = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        return False, f"done.json unreadable ({e})"
    if done.get("plan") != want_plan:
        return False, "plan changed"
    if verify:
        for rel, h in done.get("files", {}).items():
            p = os.path.join(shard_dir, rel)
            if not os.path.isfile(p):
                return False, f"{rel} missing"
            if sha256_file(p) != h:
                return False, f"{rel} corrupt (sha256 mismatch)"
    return True, ""


def build(args, log=sys.stderr) -> dict:
    t0 = time.time()
    weights, espeak_weight = voice_weights(args.voice_set)
    for vid in sorted(weights):  # every voice, the held-out person's too
        V.check(V.voice(vid))  # names the missing package before any work starts
    if espeak_weight > 0:
        V.check(V.espeak_voice("en-us"))
    splits, speakers, pool = plan(args)
    spk_dicts = {k: s.to_dict() for k, s in speakers.items()}
    os.makedirs(os.path.join(args.out, "shards"), exist_ok=True)
    with open(os.path.join(args.out, "speakers.json"), "w") as f:
        json.dump(spk_dicts, f, indent=0)
    jobs, order, rebuilt = [], [], []
    for split in SPLITS:
        its = splits[split]
        end = len(its)
        if split == "train" and args.train_shards is not None:
            end = min(end, args.train_shards * args.shard_size)
        for s in range(0, end, args.shard_size):
            chunk = its[s: s + args.shard_size]
            sd = os.path.join(args.out, "shards", f"{split}-{s // args.shard_size:05d}")
            order.append((split, sd))
            used = {it["speaker"]: spk_dicts[it["speaker"]] for it in chunk}
            ok, why = shard_ok(sd, plan_hash(chunk, used), verify=not args.no_verify)
            if ok:
                continue
            if why != "unfinished" or os.path.isdir(sd):
                rebuilt.append((os.path.basename(sd), why))
                print(json.dumps({"rebuild": os.path.basename(sd), "why": why}), file=log)
            jobs.append((sd, chunk, used))
    done_before = len(order) - len(jobs)
    print(json.dumps({"shards": len(order), "done": done_before, "to_build": len(jobs), "jobs": args.jobs}), file=log)
    if jobs:
        ctx = mp.get_context("fork")
        with ctx.Pool(max(1, args.jobs), maxtasksperchild=20) as p:
            for i, r in enumerate(p.imap_unordered(render_shard, jobs), 1):
                r.update(done=done_before + i, of=len(order), elapsed_s=round(time.time() - t0))
                print(json.dumps(r), file=log, flush=True)
    return finish(args, order, speakers, pool, rebuilt, time.time() - t0, log)


def finish(args, order, speakers, pool, rebuilt, elapsed, log) -> dict:
    counts: Dict[str, int] = defaultdict(int)
    seconds: Dict[str, Dict[str, float]] = defaultdict(lambda: defaultdict(float))
    refused: Dict[str, int] = defaultdict(int)
    outs = {s: open(os.path.join(args.out, f"{s}.jsonl.partial"), "w", encoding="utf-8") for s in SPLITS}
    try:
        for split, sd in order:
            with open(os.path.join(sd, "done.json")) as f:
                refused[split] += len(json.load(f)["refused"])
            rel = os.path.relpath(sd, args.out)
            with open(os.path.join(sd, "manifest.jsonl"), encoding="utf-8") as f:
                for line in f:
                    r = json.loads(line)
                    r["source"] = os.path.join(rel, r["source"])
                    outs[split].write(json.dumps(r) + "\n")
                    counts[split] += 1
                    seconds[split][r["person"]] += r["source_len"] / 100
                    seconds[split + " by voice"][r["voice"] if r["engine"] != "espeak-ng" else "espeak-ng"] += r["source_len"] / 100
    finally:
        for f in outs.values():
            f.close()
    for s in SPLITS:
        os.replace(os.path.join(args.out, f"{s}.jsonl.partial"), os.path.join(args.out, f"{s}.jsonl"))
    recipe = {
        "args": {k: v for k, v in vars(args).items() if k not in ("out", "text_cache")},
        "counts": dict(counts), "refused": dict(refused), "rebuilt_shards": rebuilt,
        "hours": {k: {p: round(s / 3600, 3) for p, s in sorted(v.items())} for k, v in seconds.items()},
        "speakers": {"train": args.speakers, "heldout": args.heldout_speakers,
                     "heldout_person": args.holdout_person, "heldout_person_variants": args.heldout_person_variants},
        "text": pool.summary(),
        "vocabulary": pool.vocabulary(), "build_seconds": round(elapsed),
    }
    with open(os.path.join(args.out, "recipe.json"), "w") as f:
        json.dump(recipe, f, indent=1)
    print(json.dumps({"counts": recipe["counts"], "refused": recipe["refused"],
                      "train_hours": round(sum(seconds["train"].values()) / 3600, 2)}), file=log)
    return recipe


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python3 -m train.corpus.build", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--train", type=int, default=60000)
    ap.add_argument("--val", type=int, default=400)
    ap.add_argument("--test", type=int, default=300, help="items per test split (test-espeak: half)")
    ap.add_argument("--speakers", type=int, default=600, help="training speakers")
    ap.add_argument("--heldout-speakers", type=int, default=40, help="speakers never trained on")
    ap.add_argument("--holdout-person", default="rms", help="the recorded person no training item uses")
    ap.add_argument("--heldout-person-variants", type=int, default=8,
                    help="pitch/warp variants of the held-out person beside the voice as recorded")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--voice-set", default="human", choices=VOICE_SETS,
                    help="human: the English voices and espeak-ng (the corpus); accented: festival's Czech and "
                         "Finnish voices saying English (train.corpus.accent), a supplement")
    ap.add_argument("--accent-repair", action="store_true",
                    help="accented set: say the diphones a voice lacks as its speakers would (voicing "
                         "assimilation, one long doubled consonant, a short bridge) instead of festival's silence")
    ap.add_argument("--open-frames", type=T.share, default=0.0, metavar="P",
                    help="the share of assistant sentences that are template frames with open slots "
                         "(train.corpus.sentences.open_frame; default 0: the templates as they are)")
    ap.add_argument("--weights", type=category_weights, default=None, metavar="CAT=W,…",
                    help="text categories' weights instead of train.corpus.text.TextPool.WEIGHTS' (those not named keep theirs)")
    ap.add_argument("--shard-size", type=int, default=250)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--train-shards", type=int, default=None,
                    help="build only the first N training shards of the plan (the evaluation splits whole): "
                         "a prefix of the full corpus with its exact held-out splits, which a later run "
                         "without the flag completes")
    ap.add_argument("--no-verify", action="store_true", help="trust finished shards without re-hashing their files")
    ap.add_argument("--text-cache", default=None, help="where the npm text sources are kept (default: PARLEY_CACHE/text)")
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    a = parser().parse_args(argv)
    least = {"train": 0, "val": 0, "test": 0, "speakers": 1, "heldout_speakers": 1, "shard_size": 1, "jobs": 1,
             "train_shards": 1}  # (train_shards: None is the whole plan)
    for k, lo in least.items():
        v = getattr(a, k)
        if v is not None and v < lo:
            print(f"error: --{k.replace('_', '-')} must be positive", file=sys.stderr)
            return 2
    if a.accent_repair and a.voice_set != "accented":
        print("error: --accent-repair is for --voice-set accented", file=sys.stderr)
        return 2
    try:
        build(a)
    except (CorpusError, V.SynthError, T.TextSourceMissing) as e:  # (VoiceMissing is a SynthError)
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
