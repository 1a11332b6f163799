"""Zero-shot clone vs seed voice: the demo recogniser's CER on each, through Parley's own CLI.

    python3 -m train.chattts.clone_cer --model assets/demo/chattts --corpus train/out/chattts/corpus \
        --out /tmp/clone-cer [--per-speaker 8] [--parley bin/parley] [--asr assets/demo/sensevoice]

Every held-out corpus speaker (test.jsonl) is cloned from their first adaptation clip of 3-4.5 s
(else the shortest up to 10 s, else short clips joined to 3 s) with
(``parley voices clone CLIP --text … --seeds K``: prompt codes plus the closest of K seed
speakers, 20 unless --seeds; the clone's pitch matched to the clip's unless --keep-pitch) and says their test sentences (``parley say``); the same sentences are said by one
seed voice (seed:7, the demo card's).  The ratio is the clone's CER over the seed voice's,
pooled over characters; ``ratio_95`` is a bootstrap interval over sentences, since sampling
and a small recogniser make one draw of a few dozen sentences move by 10-20 points.
Voices are written to a private library under --out, never the user's.

Speaker similarity (issue 29: "the clone's speaker similarity to its reference higher than every
seed speaker's"; on unless --sim-seeds 0): seeds 1..--sim-seeds each say the first
--sim-sentences test sentences (fixed, so shared by every speaker), and for each speaker the
encoder's cosine (``parley voices compare``, precision_eval.similarity) of the reference clip to
- the clone's sentences (mean),
- each seed's sentences (mean per seed; the max, which seed, and the median),
- seed:7's takes of the clone's own sentences (the same words as the clone),
- the person's own corpus recordings of those sentences (other utterances: the ceiling),
- the other held-out speakers' recordings (the pitch/formant variants of the same source voice).
results.json gets each speaker's figures under "similarity" and the summary under "similarity".
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import statistics
import subprocess
import sys
from typing import Callable, Dict, List, Optional

from .evaluate import WHISPER_SHARE, edits, f0_frames, f0_median, norm, read_24k, transcribe
from .precision_eval import similarity


def pooled_voiced_share(paths: List[str]) -> float:
    """The voiced share of the files' sounding frames, pooled (evaluate.f0_frames)."""
    v = n = 0
    for p in paths:
        f0s, sounding = f0_frames(read_24k(p))
        v, n = v + len(f0s), n + sounding
    return v / max(1, n)


def median_f0(paths: List[str]) -> float:
    """The median of the files' median F0s (Hz; 0 when none is voiced), at 24 kHz as
    evaluate measures it."""
    import numpy as np

    got = [f for f in (f0_median(read_24k(p)) for p in paths) if f > 0]
    return float(np.median(got)) if got else 0.0


def pick_clips(adapt: List[dict], lo: float = 3.0, hi: float = 4.5, most: float = 10.0) -> Dict[str, List[dict]]:
    """Each speaker's first adaptation clip between lo and hi seconds (the product's 3-second
    clone), else their shortest up to ``most`` seconds (the clone panel takes 3-10 s), else
    their clips in order until together they last lo seconds (said one after another, as a
    person reading two short lines)."""
    clips: Dict[str, List[dict]] = {}
    for r in adapt:
        if lo <= r["seconds"] <= hi and r["speaker"] not in clips:
            clips[r["speaker"]] = [r]
    for r in sorted(adapt, key=lambda r: r["seconds"]):
        if hi < r["seconds"] <= most and r["speaker"] not in clips:
            clips[r["speaker"]] = [r]
    for spk in dict.fromkeys(r["speaker"] for r in adapt):
        if spk in clips:
            continue
        run: List[dict] = []
        for r in adapt:
            if r["speaker"] == spk and r["seconds"] < lo:
                run.append(r)
                if sum(x["seconds"] for x in run) >= lo:
                    clips[spk] = run
                    break
    return clips


def join_clips(corpus: str, rows: List[dict], out: str, gap_s: float = 0.3) -> str:
    """One clip of rows said one after another with gap_s of silence between; its transcript."""
    import numpy as np
    import soundfile as sf

    parts, rate = [], 0
    for i, r in enumerate(rows):
        x, rate = sf.read(os.path.join(corpus, r["source"]), dtype="float32")
        if i:
            parts.append(np.zeros(int(gap_s * rate), dtype=np.float32))
        parts.append(x)
    sf.write(out, np.concatenate(parts), rate)
    return ", ".join(r["text"].rstrip(".!?,;: ") for r in rows[:-1]) + (", " if len(rows) > 1 else "") + rows[-1]["text"]


def say(parley: str, model: str, voice: str, text: str, path: str, env: dict) -> str:
    """``parley say`` TEXT with VOICE into PATH (the private library's env); PATH."""
    r = subprocess.run([parley, "say", "--engine", "chattts", "--model", model, "--voice", voice,
                        "-o", path, text], env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"parley say ({voice}): {r.stderr.strip()[-500:]}")
    return path


def _mean_sim(sim: Callable[[str, str], float], ref: str, paths: List[str]) -> Optional[float]:
    return float(sum(sim(ref, p) for p in paths) / len(paths)) if paths else None


def speaker_similarity(sim: Callable[[str, str], float], ref: str, clone: List[str], seeds: Dict[int, List[str]],
                       same_text: List[str] = (), own: List[str] = (), base: Optional[int] = None) -> dict:
    """The reference clip's similarity (sim(ref, take)) to the clone's takes, mean, against each
    seed's (mean per seed): the seeds' max, which seed, median, and whether the clone beats
    every seed (strictly above the max) and the median one (a random seed).  same_text: another
    voice's takes of the clone's sentences; own: the person's other recordings (the ceiling);
    base: the seed speaker the clone was built on (voices clone's closest of --seeds)."""
    c = _mean_sim(sim, ref, clone)
    per = {s: _mean_sim(sim, ref, ps) for s, ps in sorted(seeds.items()) if ps}
    row: dict = {"clone": round(c, 4) if c is not None else None}
    if per:
        best = max(per, key=lambda s: per[s])
        med = statistics.median(per.values())
        row.update({"seed_max": round(per[best], 4), "seed_max_seed": best, "seed_median": round(med, 4),
                    "seeds": {str(s): round(v, 4) for s, v in per.items()}})
        if c is not None:
            row.update({"clone_beats_every_seed": c > per[best], "clone_beats_median_seed": c > med,
                        "clone_minus_seed_max": round(c - per[best], 4),
                        "seeds_at_or_above_clone": sum(v >= c for v in per.values())})
    if base is not None:
        row["clone_seed"] = base
        if base in per and c is not None:
            row["clone_beats_its_seed"] = c > per[base]
    for key, paths in (("same_text_seed_voice", same_text), ("self", own)):
        m = _mean_sim(sim, ref, list(paths))
        if m is not None:
            row[key] = round(m, 4)
    return row


def similarity_summary(rows: Dict[str, dict]) -> dict:
    """Over speakers (each a speaker_similarity row): how many clones beat every seed and the
    median seed, and the means of each figure."""
    rs = [r for r in rows.values() if r.get("clone") is not None and "seed_max" in r]
    out: dict = {"speakers": len(rs),
                 "clone_beats_every_seed": sum(bool(r["clone_beats_every_seed"]) for r in rs),
                 "clone_beats_median_seed": sum(bool(r["clone_beats_median_seed"]) for r in rs)}
    out["clone_beats_every_seed_of"] = f"{out['clone_beats_every_seed']} of {len(rs)}"
    own = [r["clone_beats_its_seed"] for r in rs if "clone_beats_its_seed" in r]
    if own:
        out["clone_beats_its_seed_of"] = f"{sum(own)} of {len(own)}"
    for key in ("clone", "seed_max", "seed_median", "same_text_seed_voice", "self", "other_variants_max"):
        got = [r[key] for r in rs if r.get(key) is not None]
        if got:
            out[key + "_mean"] = round(statistics.mean(got), 4)
    if rs:
        out["seed_max_seeds"] = {str(s): n for s, n in sorted(
            collections.Counter(r["seed_max_seed"] for r in rs).items())}
    return out


def ratio_interval(pairs: List[tuple], n: int = 2000, seed: int = 0) -> List[float]:
    """95 % bootstrap interval of sum(clone edits)/sum(seed edits) over sentences; each pair is
    (clone edits, seed edits) for one sentence (same reference length, so it cancels)."""
    if not pairs:
        return [0.0, 0.0]
    rng = random.Random(seed)
    rs = []
    for _ in range(n):
        s = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        rs.append(sum(a for a, _ in s) / max(1, sum(b for _, b in s)))
    rs.sort()
    return [rs[int(0.025 * n)], rs[int(0.975 * n) - 1]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.clone_cer", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the ChatTTS bundle (e.g. assets/demo/chattts)")
    ap.add_argument("--corpus", required=True, help="train.chattts.corpus output (adapt.jsonl, test.jsonl, wav/)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--parley", default="bin/parley")
    ap.add_argument("--asr", default="assets/demo/sensevoice")
    ap.add_argument("--per-speaker", type=int, default=0, help="test sentences per speaker (0: all)")
    ap.add_argument("--seed-voice", default="seed:7")
    ap.add_argument("--seeds", type=int, default=20, help="seed speakers voices clone tries for the closest one (its default)")
    ap.add_argument("--transcript", choices=("given", "heard"), default="given",
                    help="the clip's transcript: the corpus text, or what the recogniser hears (no --text)")
    ap.add_argument("--sim-seeds", type=int, default=20,
                    help="speaker similarity against seeds 1..N (0: no similarity section)")
    ap.add_argument("--sim-sentences", type=int, default=2, help="test sentences each similarity seed says")
    ap.add_argument("--keep-pitch", action="store_true",
                    help="clone with voices clone --keep-pitch (the model's pitch, not the clip's)")
    a = ap.parse_args(argv)
    out = os.path.abspath(a.out)
    data = os.path.join(out, "data")
    os.makedirs(os.path.join(data, "parley"), exist_ok=True)
    # the user's pulled models (the speaker encoder) stay visible; voices go to the private library
    mine = os.path.join(os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share")), "parley", "models")
    link = os.path.join(data, "parley", "models")
    if os.path.isdir(mine) and not os.path.lexists(link):
        os.symlink(mine, link)
    env = dict(os.environ, XDG_DATA_HOME=data, XDG_CONFIG_HOME=os.path.join(out, "config"))

    def rows(name):
        with open(os.path.join(a.corpus, name), encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    test = rows("test.jsonl")
    clips = pick_clips(rows("adapt.jsonl"))
    speakers = sorted({r["speaker"] for r in test})
    with open(os.path.join(a.model, "config.json"), encoding="utf-8") as f:
        weight = json.load(f).get("code", {}).get("sample_weight") or 1.0
    res: dict = {"model": a.model, "seed_voice": a.seed_voice, "transcript": a.transcript, "sample_weight": weight, "seeds": a.seeds,
                 "keep_pitch": a.keep_pitch,
                 "speakers": {}, "skipped": []}
    if not speakers:
        raise SystemExit(f"{a.corpus}/test.jsonl: no sentences")
    pairs, tot = [], {"clone": [0, 0, 0.0], "seed": [0, 0, 0.0]}  # edits, chars, seconds
    # every seed says the same few sentences (the first distinct test texts), shared by all speakers
    seed_paths: Dict[int, List[str]] = {}
    if a.sim_seeds > 0:
        texts = list(dict.fromkeys(t["text"] for t in test))[:a.sim_sentences]
        for s in range(1, a.sim_seeds + 1):
            seed_paths[s] = [say(a.parley, a.model, f"seed:{s}", x, os.path.join(out, f"sim-seed{s:02d}-{j}.wav"), env)
                             for j, x in enumerate(texts)]
        res["sim_sentences"] = texts
    refs_by_spk: Dict[str, str] = {}
    own_by_spk: Dict[str, List[str]] = {}
    for spk in speakers:
        if spk not in clips:
            res["skipped"].append(spk)
            continue
        name = "c-" + "".join(ch if ch.isalnum() else "-" for ch in spk)
        src = clips[spk]
        clip, text = os.path.join(a.corpus, src[0]["source"]), src[0]["text"]
        if len(src) > 1:
            clip = os.path.join(out, name + "-clip.wav")
            text = join_clips(a.corpus, src, clip)
        given = ["--text", text] if a.transcript == "given" else []  # heard: the default recogniser
        r = subprocess.run([a.parley, "voices", "clone", clip, *given, *(["--keep-pitch"] if a.keep_pitch else []),
                            "--name", name, "--model", a.model, "--seeds", str(a.seeds), "--force"],
                           env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise SystemExit(f"parley voices clone ({spk}): {r.stderr.strip()[-500:]}")
        try:  # the transcript the voice keeps (the recogniser's, with --transcript heard)
            with open(os.path.join(data, "parley", "voices", name + ".json"), encoding="utf-8") as f:
                card = json.load(f)
            kept, base = card.get("sample", {}).get("text", ""), card.get("seed")
            pitch = card.get("sample", {}).get("pitch", 0.0)
        except (OSError, ValueError):
            kept, base, pitch = "", None, 0.0
        sents = [t for t in test if t["speaker"] == spk]
        if a.per_speaker:
            sents = sents[:a.per_speaker]
        paths: Dict[str, List[str]] = {"clone": [], "seed": []}
        for i, t in enumerate(sents):
            for kind, voice in (("clone", name), ("seed", a.seed_voice)):
                paths[kind].append(say(a.parley, a.model, voice, t["text"], os.path.join(out, f"{name}-{kind}-{i:03d}.wav"), env))
        refs = [norm(t["plain"]) for t in sents]
        got = {k: transcribe(v, a.parley, a.asr) for k, v in paths.items()}
        e = {k: [edits(ref, norm(h)) for ref, h in zip(refs, got[k])] for k in got}
        chars = sum(len(x) for x in refs)
        pairs += list(zip(e["clone"], e["seed"]))
        row = {"clip": [x["source"] for x in src], "clip_seconds": round(sum(x["seconds"] for x in src), 3),
               "clip_text": text, "voice_text": kept, "pitch_shift": pitch, "sentences": len(sents)}
        for k in got:
            secs = sum(float(subprocess.run(["soxi", "-D", p], capture_output=True, text=True).stdout or 0)
                       for p in paths[k])
            row[k] = round(sum(e[k]) / max(1, chars), 4)
            tot[k][0] += sum(e[k])
            tot[k][1] += chars
            tot[k][2] += secs
        # the clone keeps the person's pitch: its median F0 against the clip's (issue 29: within 15 %)
        ref_f0 = median_f0([os.path.join(a.corpus, x["source"]) for x in src])
        row["f0_hz"] = {"clip": round(ref_f0, 1), "clone": round(median_f0(paths["clone"]), 1), "seed": round(median_f0(paths["seed"]), 1)}
        row["clone_f0_off"] = round(abs(row["f0_hz"]["clone"] / ref_f0 - 1), 3) if ref_f0 else None
        row["voiced_share"] = {"clip": round(pooled_voiced_share([os.path.join(a.corpus, x["source"]) for x in src]), 3),
                               "clone": round(pooled_voiced_share(paths["clone"]), 3), "seed": round(pooled_voiced_share(paths["seed"]), 3)}
        if seed_paths:  # the clip against the clone, every seed, seed:7 on the same words, the person themself
            own = [os.path.join(a.corpus, t["source"]) for t in sents]
            refs_by_spk[spk], own_by_spk[spk] = clip, own
            row["similarity"] = speaker_similarity(lambda x, y: similarity(a.parley, x, y), clip, paths["clone"],
                                                   seed_paths, paths["seed"], own, base)
        res["speakers"][spk] = row
        print(spk, json.dumps(row), flush=True)
    if seed_paths:
        # each clip against every held-out speaker's recordings: the diagonal is "self", the rest
        # are the same source voice pitch/formant-shifted
        matrix = {s: {o: round(_mean_sim(lambda x, y: similarity(a.parley, x, y), refs_by_spk[s], own_by_spk[o]), 4)
                      for o in own_by_spk} for s in refs_by_spk}
        for s, m in matrix.items():
            others = [v for o, v in m.items() if o != s]
            if others:
                res["speakers"][s]["similarity"]["other_variants_max"] = max(others)
        res["similarity_matrix"] = matrix
        res["similarity"] = similarity_summary({s: r["similarity"] for s, r in res["speakers"].items() if "similarity" in r})
        for s, r in res["speakers"].items():
            if "similarity" in r:
                print(s, "similarity", json.dumps({k: v for k, v in r["similarity"].items() if k != "seeds"}), flush=True)
        print("similarity matrix (clip row vs recordings column):", json.dumps(matrix), flush=True)
    for k, (ed, ch, secs) in tot.items():
        res[k] = {"cer": round(ed / max(1, ch), 4), "seconds": round(secs, 1)}
    res["sentences"] = len(pairs)
    res["ratio"] = round(res["clone"]["cer"] / max(1e-9, res["seed"]["cer"]), 3)
    res["ratio_95"] = [round(x, 3) for x in ratio_interval(pairs)]
    offs = [r["clone_f0_off"] for r in res["speakers"].values() if r.get("clone_f0_off") is not None]
    res["clone_f0_within_15pct"] = f"{sum(o <= 0.15 for o in offs)} of {len(offs)}"
    whisper = [k for k, r in res["speakers"].items() if r.get("voiced_share", {}).get("clone", 1) < WHISPER_SHARE]
    res["clones_whispering"] = f"{len(whisper)} of {len(res['speakers'])}"
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: res[k] for k in ("clone", "seed", "sentences", "ratio", "ratio_95", "clone_f0_within_15pct", "clones_whispering", "skipped",
                                          "similarity") if k in res}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
