"""Zero-shot clone vs seed voice: the demo recogniser's CER on each, through Parley's own CLI.

    python3 -m train.chattts.clone_cer --model assets/demo/chattts --corpus train/out/chattts/corpus \
        --out /tmp/clone-cer [--per-speaker 8] [--parley bin/parley] [--asr assets/demo/sensevoice]

Every held-out corpus speaker (test.jsonl) is cloned from their first adaptation clip of 3-4.5 s
(else the shortest up to 10 s, else short clips joined to 3 s) with
(``parley voices clone CLIP --text … --seeds K``: prompt codes plus the closest of K seed
speakers, 8 unless --seeds) and says their test sentences (``parley say``); the same sentences are said by one
seed voice (seed:7, the demo card's).  The ratio is the clone's CER over the seed voice's,
pooled over characters; ``ratio_95`` is a bootstrap interval over sentences, since sampling
and a small recogniser make one draw of a few dozen sentences move by 10-20 points.
Voices are written to a private library under --out, never the user's.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from typing import Dict, List

from .evaluate import edits, f0_median, norm, read_24k, transcribe


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
    ap.add_argument("--seeds", type=int, default=8, help="seed speakers voices clone tries for the closest one")
    ap.add_argument("--transcript", choices=("given", "heard"), default="given",
                    help="the clip's transcript: the corpus text, or what the recogniser hears (no --text)")
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
                 "speakers": {}, "skipped": []}
    if not speakers:
        raise SystemExit(f"{a.corpus}/test.jsonl: no sentences")
    pairs, tot = [], {"clone": [0, 0, 0.0], "seed": [0, 0, 0.0]}  # edits, chars, seconds
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
        r = subprocess.run([a.parley, "voices", "clone", clip, *given,
                            "--name", name, "--model", a.model, "--seeds", str(a.seeds), "--force"],
                           env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise SystemExit(f"parley voices clone ({spk}): {r.stderr.strip()[-500:]}")
        try:  # the transcript the voice keeps (the recogniser's, with --transcript heard)
            with open(os.path.join(data, "parley", "voices", name + ".json"), encoding="utf-8") as f:
                kept = json.load(f).get("sample", {}).get("text", "")
        except (OSError, ValueError):
            kept = ""
        sents = [t for t in test if t["speaker"] == spk]
        if a.per_speaker:
            sents = sents[:a.per_speaker]
        paths: Dict[str, List[str]] = {"clone": [], "seed": []}
        for i, t in enumerate(sents):
            for kind, voice in (("clone", name), ("seed", a.seed_voice)):
                p = os.path.join(out, f"{name}-{kind}-{i:03d}.wav")
                r = subprocess.run([a.parley, "say", "--engine", "chattts", "--model", a.model, "--voice", voice,
                                    "-o", p, t["text"]], env=env, capture_output=True, text=True, timeout=600)
                if r.returncode != 0:
                    raise SystemExit(f"parley say ({voice}): {r.stderr.strip()[-500:]}")
                paths[kind].append(p)
        refs = [norm(t["plain"]) for t in sents]
        got = {k: transcribe(v, a.parley, a.asr) for k, v in paths.items()}
        e = {k: [edits(ref, norm(h)) for ref, h in zip(refs, got[k])] for k in got}
        chars = sum(len(x) for x in refs)
        pairs += list(zip(e["clone"], e["seed"]))
        row = {"clip": [x["source"] for x in src], "clip_seconds": round(sum(x["seconds"] for x in src), 3),
               "clip_text": text, "voice_text": kept, "sentences": len(sents)}
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
        res["speakers"][spk] = row
        print(spk, json.dumps(row), flush=True)
    for k, (ed, ch, secs) in tot.items():
        res[k] = {"cer": round(ed / max(1, ch), 4), "seconds": round(secs, 1)}
    res["sentences"] = len(pairs)
    res["ratio"] = round(res["clone"]["cer"] / max(1e-9, res["seed"]["cer"]), 3)
    res["ratio_95"] = [round(x, 3) for x in ratio_interval(pairs)]
    offs = [r["clone_f0_off"] for r in res["speakers"].values() if r.get("clone_f0_off") is not None]
    res["clone_f0_within_15pct"] = f"{sum(o <= 0.15 for o in offs)} of {len(offs)}"
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: res[k] for k in ("clone", "seed", "sentences", "ratio", "ratio_95", "clone_f0_within_15pct", "skipped")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
