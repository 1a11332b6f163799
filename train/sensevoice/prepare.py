"""Prepare a SenseVoice training run: global CMVN from training audio and,
optionally, a small SentencePiece BPE model carrying the SenseVoice special tokens.

    python3 -m train.sensevoice.prepare --manifest corpus/train.jsonl --out exp/demo --bpe 300

Writes OUT/cmvn.json ({"neg_mean": [560], "inv_stddev": [560], "frames": n}) and
OUT/bpe.model (+ bpe.vocab) when --bpe is given.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from ..data import read_manifest
from .dataset import load_item_audio
from .features import CMVNAccumulator, features
from .tokens import train_sentencepiece


def compute_cmvn(records, max_utts: int = 1000) -> dict:
    acc = CMVNAccumulator()
    for r in records[:max_utts]:
        acc.add(features(load_item_audio(r)))
    neg_mean, inv_std = acc.result()
    return {"neg_mean": neg_mean, "inv_stddev": inv_std, "frames": acc.n}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.prepare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bpe", type=int, default=0, help="train a BPE model of this size (0 = none)")
    ap.add_argument("--cmvn-utts", type=int, default=1000)
    a = ap.parse_args(argv)
    recs = read_manifest(a.manifest, check_audio=True)
    os.makedirs(a.out, exist_ok=True)
    cmvn = compute_cmvn(recs, a.cmvn_utts)
    with open(os.path.join(a.out, "cmvn.json"), "w") as f:
        json.dump(cmvn, f)
    res = {"cmvn": os.path.join(a.out, "cmvn.json"), "frames": cmvn["frames"]}
    if a.bpe:
        v = train_sentencepiece((r["target"] for r in recs), os.path.join(a.out, "bpe"), a.bpe)
        res.update(bpe=v.sp_path, vocab_size=len(v))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
