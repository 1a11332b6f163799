"""Tune the recogniser's beam-search weights (and its token LM's order and pruning) on the
validation split, and write them as the LM's sidecar, lm.json (asr.LMWeightsPath).

    /usr/bin/python3 -m train.sensevoice.lmtune --model /tmp/sv --manifest train/out/human/val.jsonl \\
        --parley bin/parley --checkpoint train/out/asr6/G --build 4:8 --build 5:4 --out /tmp/lmtune

Each point is ``parley transcribe`` over the manifest (train.sensevoice.evaluate_cli) with
--lm FILE --beam-alpha A --beam-beta B --beam-width W --beam-top T --beam-oov O, scored by WER (CER breaks ties). The
search: the coarse alpha x beta grid on the first LM (the model's lm.bin unless --lm or --build
say otherwise); every other LM on the 3 x 3 neighbourhood of the best point so far (coarse
steps); then a fine 3 x 3 grid (half steps) around the overall best, repeated while it moves.
Only --manifest selects; the --report manifests (default: the held-out test-*.jsonl beside
it) are scored afterwards for the chosen setting and for the defaults (the model's lm.bin at
alpha 0.4, beta 2, width 32, 8 tokens a frame, no word list), never to choose. Width, tokens a
frame and --oov are always sent, so no lm.json beside an LM changes them.

--oov O charges each word missing from the LM's word list (LexiconPath: lm.bin ->
lm.words.txt, train.sensevoice.lexicon) O; every --lm tried needs one beside it then (checked
before any work), each --build LM gets a copy of the model's, and --out gets the winner's as
lm.words.txt.

--build ORDER:MIN_COUNT makes an LM (train.sensevoice.lm, from --checkpoint's vocabulary) into
--lm-dir as oORDERmMIN.bin unless it is there; LMs over --max-bytes are left out. --out gets
lm.json (the winner's weights), lm.bin (the winner's LM, copied) and _lmtune.json (every point
and the held-out report; the leading _ keeps it out of an embedded model's files, so --out may
be the model's directory).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from . import evaluate_cli as ev

DEFAULTS = {"alpha": 0.4, "beta": 2.0, "width": 32, "top": 8}  # asr.defaultBeam
MAX_BEAM = 4096  # asr.MaxBeamWidth, asr.MaxBeamTop
MAX_OOV = 100.0  # asr.MaxBeamOOV
COARSE_ALPHAS = [0.2, 0.4, 0.6, 0.8, 1.0]
COARSE_BETAS = [1.0, 2.0, 3.0, 4.0]
RECORD = "_lmtune.json"  # assets' embedder skips _-files (assets.skipEmbedded)

Point = Tuple[str, float, float]  # (LM file, alpha, beta)
Evaluate = Callable[[str, float, float], dict]  # -> {"wer", "cer", ...}


def flag_value(x: float) -> str:
    """A weight as parley's flag takes it: 0 there means 'the default', so a zero is sent as
    1e-9 (no weight, in effect)."""
    return repr(round(x, 6)) if x != 0 else "1e-09"


def beam_flags(alpha: float, beta: float, width: int, top: int = DEFAULTS["top"], oov: float = 0.0) -> List[str]:
    # oov 0 is sent as 0 (parley's explicit zero): 1e-9 would still ask for a word list
    return ["--beam-alpha", flag_value(alpha), "--beam-beta", flag_value(beta), "--beam-width", str(width),
            "--beam-top", str(top), "--beam-oov", repr(round(oov, 6)) if oov else "0"]


def words_path(lm: str) -> str:
    """The word list beside an LM (asr.LexiconPath): lm.bin -> lm.words.txt."""
    return os.path.splitext(lm)[0] + ".words.txt"


def key(res: dict) -> Tuple[float, float]:
    """Lower is better: WER, then CER."""
    return (res["wer"], res["cer"])


def around(centre: float, step: float, lo: Optional[float] = None) -> List[float]:
    """centre - step, centre, centre + step (rounded; values below lo left out)."""
    vals = [round(centre + d * step, 6) for d in (-1, 0, 1)]
    return [v for v in vals if lo is None or v >= lo]


class Sweep:
    """The search over (LM, alpha, beta), each point evaluated once (evaluate is called with
    the LM file, alpha and beta and returns figures with "wer" and "cer")."""

    def __init__(self, evaluate: Evaluate, log=None):
        self.evaluate = evaluate
        self.results: Dict[Point, dict] = {}
        self.log = log

    def point(self, lm: str, alpha: float, beta: float) -> dict:
        p = (lm, round(alpha, 6), round(beta, 6))
        if p not in self.results:
            self.results[p] = self.evaluate(*p)
            if self.log:
                r = self.results[p]
                print(f"{os.path.basename(lm):>12} alpha {p[1]:5.2f} beta {p[2]:5.2f}  WER {100 * r['wer']:5.2f}  CER {100 * r['cer']:5.2f}",
                      file=self.log, flush=True)
        return self.results[p]

    def grid(self, lm: str, alphas: Iterable[float], betas: Iterable[float]) -> None:
        for a in alphas:
            for b in betas:
                self.point(lm, a, b)

    def best(self, lm: Optional[str] = None) -> Tuple[Point, dict]:
        pts = [(p, r) for p, r in self.results.items() if lm is None or p[0] == lm]
        return min(pts, key=lambda pr: (key(pr[1]), pr[0]))

    def run(self, lms: Sequence[str], alphas: Sequence[float], betas: Sequence[float],
            fine_rounds: int = 3) -> Tuple[Point, dict]:
        if not lms or not alphas or not betas:
            raise ValueError("nothing to sweep: no LM, alpha or beta")
        da = min((b - a for a, b in zip(sorted(alphas), sorted(alphas)[1:])), default=0.2)
        db = min((b - a for a, b in zip(sorted(betas), sorted(betas)[1:])), default=1.0)
        self.grid(lms[0], alphas, betas)
        for lm in lms[1:]:
            (_, a, b), _ = self.best()
            self.grid(lm, around(a, da, lo=0), around(b, db))
            # a neighbourhood whose best is on its edge moves once more, towards it
            (_, a2, b2), _ = self.best(lm)
            if (a2, b2) != (a, b):
                self.grid(lm, around(a2, da, lo=0), around(b2, db))
        for _ in range(fine_rounds):
            (lm, a, b), _ = self.best()
            before = len(self.results)
            self.grid(lm, around(a, da / 2, lo=0), around(b, db / 2))
            if self.best()[0] == (lm, a, b) or len(self.results) == before:
                break
        return self.best()

    def table(self) -> List[dict]:
        rows = [{"lm": p[0], "alpha": p[1], "beta": p[2], **r} for p, r in self.results.items()]
        return sorted(rows, key=lambda r: (r["wer"], r["cer"], r["lm"], r["alpha"], r["beta"]))


def weights_json(alpha: float, beta: float, width: int, top: int = DEFAULTS["top"], oov: float = 0.0) -> dict:
    w = {"alpha": round(alpha, 6), "beta": round(beta, 6), "width": width, "top": top}
    if oov:
        w["oov"] = round(oov, 6)
    return w


def write_out(out: str, lm: str, alpha: float, beta: float, width: int, table: List[dict], report: dict,
              top: int = DEFAULTS["top"], oov: float = 0.0) -> None:
    os.makedirs(out, exist_ok=True)
    if os.path.abspath(lm) != os.path.abspath(os.path.join(out, "lm.bin")):
        shutil.copyfile(lm, os.path.join(out, "lm.bin"))
    words = os.path.join(out, "lm.words.txt")
    if oov and os.path.abspath(words_path(lm)) != os.path.abspath(words):
        shutil.copyfile(words_path(lm), words)
    with open(os.path.join(out, "lm.json"), "w") as f:
        json.dump(weights_json(alpha, beta, width, top, oov), f)
        f.write("\n")
    with open(os.path.join(out, RECORD), "w") as f:
        json.dump({"chosen": {"lm": lm, **weights_json(alpha, beta, width, top, oov)}, "points": table, "report": report}, f, indent=1)
        f.write("\n")


def build_lm(checkpoint: str, order: int, min_count: int, path: str) -> None:
    from . import lm as lmmod
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    lmmod.main(["--checkpoint", checkpoint, "--order", str(order), "--min-count", str(min_count), "--out", path])


def parse_build(s: str) -> Tuple[int, int]:
    try:
        o, m = s.split(":")
        return int(o), int(m)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: want ORDER:MIN_COUNT, e.g. 5:4")


def floats(s: str) -> List[float]:
    try:
        return [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: want numbers separated by commas")


def cli_evaluator(parley: str, model: str, manifest: str, width: int, limit: int = 0,
                  top: int = DEFAULTS["top"], oov: float = 0.0) -> Evaluate:
    rows, files = ev.load_manifest(manifest, limit)

    def evaluate(lm: str, alpha: float, beta: float) -> dict:
        hyp = ev.transcribe(parley, model, files, lm, beam_flags(alpha, beta, width, top, oov))
        return ev.figures([(hyp.get(f, ""), r["target"]) for f, r in zip(files, rows)])
    return evaluate


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.lmtune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the recogniser's directory (model.onnx, tokens.txt, lm.bin)")
    ap.add_argument("--manifest", required=True, help="the split that selects: the validation split")
    ap.add_argument("--parley", default="bin/parley")
    ap.add_argument("--out", required=True, help="directory for lm.json, lm.bin and " + RECORD)
    ap.add_argument("--lm", action="append", default=[], help="an LM file to try (repeatable)")
    ap.add_argument("--build", action="append", default=[], type=parse_build, metavar="ORDER:MIN_COUNT",
                    help="an LM to make and try (repeatable; needs --checkpoint)")
    ap.add_argument("--checkpoint", help="the recogniser's checkpoint, for --build")
    ap.add_argument("--lm-dir", help="where --build's LMs go (default OUT/lms); one already there is reused")
    ap.add_argument("--max-bytes", type=int, default=8 << 20, help="leave out LMs larger than this")
    ap.add_argument("--alphas", type=floats, default=COARSE_ALPHAS, help="coarse grid (comma-separated)")
    ap.add_argument("--betas", type=floats, default=COARSE_BETAS, help="coarse grid (comma-separated)")
    ap.add_argument("--width", type=int, default=DEFAULTS["width"], help="prefixes kept per frame")
    ap.add_argument("--top", type=int, default=DEFAULTS["top"], help="likeliest tokens tried per frame")
    ap.add_argument("--oov", type=float, default=0.0,
                    help=f"cost of a word missing from each LM's word list (lm.words.txt beside lm.bin), 0..{MAX_OOV}; 0: no list")
    ap.add_argument("--fine-rounds", type=int, default=3)
    ap.add_argument("--report", action="append", default=None,
                    help="held-out manifests to report (not select on); default the test-*.jsonl beside --manifest; 'none' for none")
    ap.add_argument("--limit", type=int, default=0, help="first N utterances only (a quick look)")
    a = ap.parse_args(argv)
    if not (1 <= a.width <= MAX_BEAM and 1 <= a.top <= MAX_BEAM):
        ap.error(f"--width and --top must be within 1..{MAX_BEAM}")
    if not 0 <= a.oov <= MAX_OOV:  # also refuses NaN
        ap.error(f"--oov {a.oov}: want 0..{MAX_OOV}")
    if os.path.basename(a.manifest).startswith("test"):
        ap.error(f"--manifest {a.manifest}: select on the validation split, not a held-out test split")
    if a.build and not a.checkpoint:
        ap.error("--build needs --checkpoint")
    lms = list(a.lm) or ([] if a.build else [os.path.join(a.model, "lm.bin")])
    model_words = words_path(os.path.join(a.model, "lm.bin"))
    lm_dir = a.lm_dir or os.path.join(a.out, "lms")
    built = [(order, mc, os.path.join(lm_dir, f"o{order}m{mc}.bin")) for order, mc in a.build]
    absent = [lm for lm in lms if not os.path.isfile(lm)]
    if absent:
        ap.error(f"no LM file {', '.join(absent)}")
    if a.oov:  # before any build: every LM tried needs a list, a built one the model's
        missing = [words_path(lm) for lm in lms if not os.path.isfile(words_path(lm))]
        if any(not os.path.isfile(words_path(p)) for _, _, p in built) and not os.path.isfile(model_words):
            missing.append(model_words + " (for the --build LMs)")
        if missing:
            ap.error(f"--oov {a.oov} needs a word list beside each LM: no {', '.join(missing)}")
    for order, mc, p in built:
        if not os.path.exists(p):
            build_lm(a.checkpoint, order, mc, p)
        if a.oov and not os.path.isfile(words_path(p)):
            shutil.copyfile(model_words, words_path(p))
        lms.append(p)
    sizes = {lm: os.path.getsize(lm) for lm in lms}
    kept = [lm for lm in lms if sizes[lm] <= a.max_bytes]
    for lm in lms:
        print(f"LM {lm}: {sizes[lm]} bytes" + ("" if lm in kept else f" (over --max-bytes {a.max_bytes}: left out)"), file=sys.stderr)
    if not kept:
        ap.error("no LM under --max-bytes")

    sweep = Sweep(cli_evaluator(a.parley, a.model, a.manifest, a.width, a.limit, a.top, a.oov), log=sys.stderr)
    (lm, alpha, beta), res = sweep.run(kept, a.alphas, a.betas, a.fine_rounds)
    table = sweep.table()
    print(f"\n{'LM':>12} {'bytes':>9} {'alpha':>6} {'beta':>6}   WER %   CER %   ({os.path.basename(a.manifest)}, width {a.width}, top {a.top}, oov {a.oov})")
    for r in table:
        print(f"{os.path.basename(r['lm']):>12} {sizes[r['lm']]:>9} {r['alpha']:6.2f} {r['beta']:6.2f}  {100 * r['wer']:6.2f}  {100 * r['cer']:6.2f}")
    print(f"\nchosen: {lm} alpha {alpha} beta {beta} width {a.width} top {a.top} oov {a.oov}: WER {100 * res['wer']:.2f} % CER {100 * res['cer']:.2f} %")

    reports = a.report
    if reports is None:
        reports = sorted(glob.glob(os.path.join(os.path.dirname(a.manifest), "test-*.jsonl")))
    reports = [r for r in reports if r != "none"]
    report: Dict[str, dict] = {}
    default_lm = os.path.join(a.model, "lm.bin")
    for m in reports:
        name = os.path.basename(m).removesuffix(".jsonl")
        chosen = cli_evaluator(a.parley, a.model, m, a.width, a.limit, a.top, a.oov)(lm, alpha, beta)
        default = cli_evaluator(a.parley, a.model, m, DEFAULTS["width"], a.limit, DEFAULTS["top"])(
            default_lm, DEFAULTS["alpha"], DEFAULTS["beta"])
        report[name] = {"chosen": chosen, "defaults": default}
        print(f"held out {name:>14}: chosen WER {100 * chosen['wer']:5.2f} CER {100 * chosen['cer']:5.2f}  |  "
              f"defaults WER {100 * default['wer']:5.2f} CER {100 * default['cer']:5.2f}", flush=True)
    write_out(a.out, lm, alpha, beta, a.width, table, report, a.top, a.oov)
    print(f"wrote {os.path.join(a.out, 'lm.json')}: {json.dumps(weights_json(alpha, beta, a.width, a.top, a.oov))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
