"""Fit a seed filter: a linear score over seed speaker vectors that predicts which seeds whisper.

The demo voice samples seed speakers from its spk_stat (randn·std + mean); about a fifth of
them come out whispering (under 15 % of their speech voiced). A seed speaker's voicing is
partly a linear function of its (L2-normalised) vector, so a logistic score fitted on measured
seeds lets the engine refuse a draw that would whisper and draw again from the same seed's
RNG (tts/chattts SeedFilter; seeds whose first draw passes keep their voice).

The measurements come from the engine itself, on the bundle without a filter:

    parley voices seeds --from 1 --to 2000 --json --speaker --model DIR > seeds.jsonl

    python3 -m train.chattts.seed_filter --model DIR seeds.jsonl [--target 0.10] [--dry-run]
    python3 -m train.chattts.seed_filter --compare plain.jsonl filtered.jsonl

Every fourth seed is held out of the fit; the score's threshold is the highest acceptance
whose held-out accepted seeds whisper at most --target of the time. config.json's
speaker.seed_filter is written, and speaker.suggested_seeds: 20 clearly voiced seeds the filter
leaves as they are, over the pitch range from the lowest voice to the highest, which clones and
fine-tunes try first and the server gives OpenAI's voice names (the rest of the file unchanged).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Dict, List

import numpy as np

# A seed voiced less than this whispers: train.chattts.evaluate's WHISPER_SHARE and Go's
# tune.WhisperVoiced (kept here so this numpy-only tool does not load the training stack).
WHISPER_SHARE = 0.15
VOICED_LABEL = 0.3  # a seed voiced at least this much is the fit's positive class (cf. tune's cloneMinVoiced)
MAX_TRIES = 64  # tts/chattts MaxFilterTries


def _seed_row(r: Dict, speaker: bool) -> Dict:
    seed = r["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 1:
        raise ValueError(f"seed {seed!r} (want a whole number from 1)")
    voiced, f0 = float(r["voiced_share"]), float(r["f0_hz"])
    if not 0 <= voiced <= 1:
        raise ValueError(f"voiced_share {voiced} (want 0..1)")
    if not (math.isfinite(f0) and f0 >= 0):
        raise ValueError(f"f0_hz {f0}")
    row = {"seed": seed, "voiced": voiced, "f0": f0}
    if speaker:
        if r.get("filtered"):
            raise ValueError("measured with the model's seed filter in use: its speakers are the draws the filter "
                             "kept; measure a copy of the model without speaker.seed_filter")
        v = np.asarray(r["speaker"], dtype=np.float64)
        if v.ndim != 1 or len(v) == 0 or not np.isfinite(v).all():
            raise ValueError("speaker is not a vector of finite numbers")
        row["speaker"] = v
    return row


def read_seeds(paths: List[str], speaker: bool = True) -> List[Dict]:
    """`parley voices seeds --json` lines (with --speaker when speaker), each checked; a seed
    measured twice is refused (the same file given twice, say)."""
    rows, where = [], {}
    for p in paths:
        with open(p) as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = _seed_row(json.loads(line), speaker)
                except (ValueError, KeyError, TypeError) as e:
                    what = "--json --speaker" if speaker else "--json"
                    raise SystemExit(f"{p}:{i}: not a `parley voices seeds {what}` line: {e}")
                if row["seed"] in where:
                    raise SystemExit(f"{p}:{i}: seed {row['seed']} again (first at {where[row['seed']]})")
                where[row["seed"]] = f"{p}:{i}"
                rows.append(row)
    if not rows:
        raise SystemExit(f"no seeds in {', '.join(paths)}")
    if not speaker:
        return rows
    dims = {len(r["speaker"]) for r in rows}
    if len(dims) != 1:
        raise SystemExit(f"{', '.join(paths)}: speaker vectors of several sizes: {sorted(dims)}")
    return rows


def normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, steps: int = 3000, lr: float = 0.5):
    """Logistic regression on standardised features (gradient descent); returns (w, b) for the
    raw features: score = x·w + b."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = (x - mu) / sd
    w, b = np.zeros(x.shape[1]), 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        w -= lr * (z.T @ (p - y) / len(y) + l2 * w)
        b -= lr * float((p - y).mean())
    return w / sd, b - float((w * mu / sd).sum())


def choose_threshold(score: np.ndarray, voiced: np.ndarray, target: float) -> float:
    """The lowest threshold (most seeds accepted) at which the accepted seeds whisper at most
    target of the time; refused where only a handful of seeds would pass (such a filter would
    move nearly every seed and run out of tries)."""
    best = 1.0
    for t in np.sort(score):
        keep = score >= t
        if keep.sum() < max(10, len(score) // 10):
            break
        rate = float((voiced[keep] < WHISPER_SHARE).mean())
        if rate <= target:
            return float(t)
        best = min(best, rate)
    raise SystemExit(f"no threshold keeps the whispering seeds to {target:.0%} while accepting a tenth of them "
                     f"(the best: {best:.0%}); raise --target")


def summary(voiced: np.ndarray, f0: np.ndarray) -> Dict:
    """Whispering share, and the pitch of the seeds that do not whisper (a whisper's "F0" is
    a few frames', not a pitch)."""
    ok = voiced >= WHISPER_SHARE
    q = np.quantile(f0[ok], [0.05, 0.5, 0.95]) if ok.any() else [0, 0, 0]
    return {"seeds": int(len(voiced)), "whispering": round(float((~ok).mean()), 3),
            "under_30pct_voiced": round(float((voiced < VOICED_LABEL).mean()), 3),
            "median_voiced_share": round(float(np.median(voiced)), 3),
            "f0_hz_p5_p50_p95": [round(float(v), 1) for v in q],
            "f0_hz_range": [round(float(f0[ok].min()), 1), round(float(f0[ok].max()), 1)] if ok.any() else []}


def compare(plain: List[Dict], filtered: List[Dict]) -> Dict:
    """The same seeds measured without and with the filter."""
    a = {r["seed"]: r for r in plain}
    b = {r["seed"]: r for r in filtered}
    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise SystemExit("the two files share no seed")
    out = {}
    for name, rows in (("plain", a), ("filtered", b)):
        out[name] = summary(np.array([rows[s]["voiced"] for s in seeds]), np.array([rows[s]["f0"] for s in seeds]))
    out["seeds_changed"] = sum(1 for s in seeds if (a[s]["voiced"], a[s]["f0"]) != (b[s]["voiced"], b[s]["f0"]))
    return out


SUGGEST_VOICED = 0.5  # a suggested seed is voiced at least this much (speech: about 0.6)


def suggest(seeds: np.ndarray, voiced: np.ndarray, f0: np.ndarray, passes: np.ndarray, n: int) -> List[int]:
    """At most n seeds to suggest (a band with no seed gives none): clearly voiced ones the filter passes at their first draw (so the
    filter leaves their speaker as measured). Their pitch range (log F0) is cut into n equal
    bands and each band's most voiced seed taken (a low voice is often a breathy one: the most
    voiced of the low ones is the one to offer), from the lowest band to the highest (the
    engine spreads them when it searches: tune.CandidateSeeds)."""
    ok = np.flatnonzero(passes & (voiced >= SUGGEST_VOICED) & (f0 > 0))
    if len(ok) == 0 or n <= 0:
        return []
    logf = np.log(f0[ok])
    edges = np.linspace(logf.min(), logf.max(), n + 1)
    band = np.clip(np.searchsorted(edges, logf, side="right") - 1, 0, n - 1)
    picks = []  # index into ok, lowest band first
    for b in range(n):
        members = np.flatnonzero(band == b)
        if len(members):
            picks.append(int(members[np.argmax(voiced[ok[members]])]))
    return [int(seeds[ok[i]]) for i in picks]


def fit(rows: List[Dict], target: float, tries: int, n_suggest: int = 20) -> Dict:
    x = normalise(np.stack([r["speaker"] for r in rows]))
    voiced = np.array([r["voiced"] for r in rows])
    f0 = np.array([r["f0"] for r in rows])
    held = np.array([r["seed"] % 4 == 0 for r in rows])
    if held.sum() < 20 or (~held).sum() < 40:
        raise SystemExit(f"{len(rows)} seeds: too few to fit and check a filter (measure a few hundred)")
    w, b = fit_logistic(x[~held], (voiced[~held] >= VOICED_LABEL).astype(np.float64))
    score = x @ w + b
    t = choose_threshold(score[held], voiced[held], target)
    keep = held & (score >= t)
    report = {"fit_seeds": int((~held).sum()), "held_out": summary(voiced[held], f0[held]),
              "held_out_accepted": summary(voiced[keep], f0[keep]),
              "acceptance": round(float(keep.sum() / held.sum()), 3),
              "all_tries_refused": round(float((1 - keep.sum() / held.sum()) ** tries), 5)}
    seeds = np.array([r["seed"] for r in rows])
    # a suggested seed must keep its speaker in the engine, which scores in float32 (weights as
    # written): a small margin keeps a seed at the threshold out
    w32, bias32 = w.astype(np.float32), np.float32(b - t)
    passes = x.astype(np.float32) @ w32 + bias32 >= 1e-3
    suggested = suggest(seeds, voiced, f0, passes, n_suggest)
    by_seed = {r["seed"]: r for r in rows}
    report["suggested"] = [{"seed": s, "f0_hz": round(by_seed[s]["f0"], 1), "voiced_share": round(by_seed[s]["voiced"], 3)} for s in suggested]
    filt = {"weights": [float(np.float32(v)) for v in w], "bias": float(b - t), "tries": tries,
            "about": f"logistic score of a voiced (≥ {VOICED_LABEL}) seed speaker, fitted on {int((~held).sum())} measured seeds; "
                     f"its threshold chosen on {int(held.sum())} others (of which {report['held_out']['whispering']:.0%} whisper) "
                     f"so that at most {target:.0%} of those it accepts whisper (it accepts {report['acceptance']:.0%})"}
    return {"filter": filt, "suggested": suggested, "report": report}


def write_filter(model: str, filt: Dict, suggested: List[int] = ()) -> None:
    path = os.path.join(model, "config.json")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    if int(cfg.get("speaker", {}).get("dim", -1)) != len(filt["weights"]):
        raise SystemExit(f"{path}: speaker.dim {cfg.get('speaker', {}).get('dim')} but the seeds' vectors have {len(filt['weights'])} values")
    cfg["speaker"]["seed_filter"] = filt
    if suggested:
        cfg["speaker"]["suggested_seeds"] = list(suggested)
    else:
        cfg["speaker"].pop("suggested_seeds", None)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seeds", nargs="+", help="`parley voices seeds --json --speaker` output, measured without a filter")
    ap.add_argument("--model", help="the bundle whose config.json gets the filter")
    ap.add_argument("--compare", action="store_true", help="SEEDS are two measurements of the same seeds, without and with "
                    "the filter (`voices seeds --json`): report both")
    ap.add_argument("--target", type=float, default=0.10, help="whispering share allowed among accepted held-out seeds")
    ap.add_argument("--tries", type=int, default=8)
    ap.add_argument("--dry-run", action="store_true", help="report only")
    a = ap.parse_args(argv)
    if a.compare:
        if len(a.seeds) != 2:
            ap.error("--compare takes two files: without the filter, then with it")
        json.dump(compare(read_seeds(a.seeds[:1], speaker=False), read_seeds(a.seeds[1:], speaker=False)), sys.stdout, indent=1)
        print()
        return
    if not a.model and not a.dry_run:
        ap.error("--model is needed to write the filter (or --dry-run it)")
    if not 0 < a.target < 1 or not 1 <= a.tries <= MAX_TRIES:
        ap.error(f"--target in (0, 1), --tries in 1..{MAX_TRIES}")
    out = fit(read_seeds(a.seeds), a.target, a.tries)
    json.dump(out["report"], sys.stdout, indent=1)
    print()
    if not a.dry_run:
        write_filter(a.model, out["filter"], out["suggested"])


if __name__ == "__main__":
    main()
