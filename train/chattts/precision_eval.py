"""The int8 GPT against fp32 on the same voice, as a user hears it (issue 35's quality goals).

    /usr/bin/python3 -m train.chattts.precision_eval --model assets/demo/chattts --out R/precision

For each precision, ``parley say`` speaks the judge's new assistant sentences (judge_say) with
the same seeds; then:
- the independent judge's WER (PocketSphinx, trained on real speech) per precision;
- the demo recogniser's CER (``parley transcribe``) per precision;
- speaker similarity of each int8 sentence to the fp32 one of the same seed and text
  (``parley voices compare``: the embedded speaker encoder's cosine).
Sampling makes the two takes of a sentence different utterances, so the figures compare
distributions, not samples. Goals: WER and CER within 1.1x of fp32's, similarity >= 0.9.
Writes OUT/results.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List, Optional

import numpy as np

from . import judge_say
from .evaluate import cer


def transcribe(parley: str, asr: str, files: List[str]) -> Dict[str, str]:
    r = subprocess.run([parley, "transcribe", "--model", asr, "--format", "json", *files],
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"parley transcribe: {r.stderr.strip()[-400:]}")
    out = {}
    for line in r.stdout.splitlines():
        if line.strip():
            row = json.loads(line)
            out[row["file"]] = row["text"]
    return out


def similarity(parley: str, a: str, b: str) -> float:
    r = subprocess.run([parley, "voices", "compare", a, b, "--json"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"parley voices compare: {r.stderr.strip()[-400:]}")
    return float(json.loads(r.stdout)["similarity"])


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.precision_eval", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="an export with gpt.int8.onnx (train.chattts.quantize)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--parley", default="bin/parley")
    ap.add_argument("--asr", default="assets/demo/sensevoice")
    ap.add_argument("--seeds", default="1,2,3,4,5,6,7,8,9,10")
    ap.add_argument("--limit", type=int, default=len(judge_say.SENTENCES))
    a = ap.parse_args(argv)
    res: dict = {"model": a.model, "by_precision": {}}
    rows: Dict[str, list] = {}
    for prec in ("fp32", "int8"):
        d = os.path.join(a.out, prec)
        judge_say.main(["--model", a.model, "--out", d, "--parley", a.parley, "--seeds", a.seeds,
                        "--limit", str(a.limit), "--precision", prec])
        with open(os.path.join(d, "results.json")) as f:
            jr = json.load(f)
        files = [os.path.join(d, f"say-{i:03d}-seed{r['seed']}.wav") for i, r in enumerate(jr["rows"])]
        hyps = transcribe(a.parley, a.asr, files)
        rows[prec] = [(p, r) for p, r in zip(files, jr["rows"])]
        res["by_precision"][prec] = {
            "judge_wer": jr["wer"],
            "demo_asr_cer": round(cer([r["ref"] for r in jr["rows"]], [hyps.get(p, "") for p in files]), 4),
            "seconds": round(sum(r["seconds"] for r in jr["rows"]), 1),
            "seed_f0_hz": jr["per_seed_f0_hz"],
        }
    sims = [similarity(a.parley, p32, p8) for (p32, _), (p8, _) in zip(rows["fp32"], rows["int8"])]
    f, q = res["by_precision"]["fp32"], res["by_precision"]["int8"]
    res["similarity_int8_to_fp32"] = {"mean": round(float(np.mean(sims)), 4), "min": round(float(np.min(sims)), 4)}
    res["ratios"] = {"judge_wer": round(q["judge_wer"] / max(1e-9, f["judge_wer"]), 3),
                     "demo_asr_cer": round(q["demo_asr_cer"] / max(1e-9, f["demo_asr_cer"]), 3)}
    res["goals"] = {"judge_wer within 1.1x": res["ratios"]["judge_wer"] <= 1.1,
                    "demo_asr_cer within 1.1x": res["ratios"]["demo_asr_cer"] <= 1.1,
                    "similarity >= 0.9": res["similarity_int8_to_fp32"]["mean"] >= 0.9}
    with open(os.path.join(a.out, "results.json"), "w") as fh:
        json.dump({**res, "similarities": [round(s, 4) for s in sims]}, fh, indent=1)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
