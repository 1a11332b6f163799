"""A fine-tuning starting point from the recogniser the user has installed.

    python3 -m train.sensevoice.base --onnx ~/.local/share/parley/models/sensevoice-demo --out JOB/init
    python3 -m train.sensevoice.base --official ~/SenseVoiceSmall --out JOB/init

``--onnx``: a SenseVoice ONNX export made by ``train.sensevoice.export`` (the embedded demo
recogniser, or an earlier fine-tune): the PyTorch weights, vocabulary and CMVN are recovered
from the graph by ``train.sensevoice.from_onnx``.  Exports Parley did not make (the sherpa-onnx
int8 SenseVoice-Small) cannot be trained from: the error says to use ``--official``.

``--official``: FunASR's SenseVoiceSmall directory (``model.pt``, ``am.mvn`` and the
``*.bpe.model``), as published on ModelScope / Hugging Face (iic/SenseVoiceSmall).

Both write OUT/init.pt in our checkpoint layout (model, config, tokens, cmvn, sp_model), which
``train.sensevoice.train --init OUT/init.pt --from-init`` takes whole, and print one JSON line:
{"init": …, "size": …, "params": …, "vocab_size": …, "source": …}.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

import torch

from . import model as svm
from .features import load_am_mvn
from .from_onnx import RecoverError, recover
from .tokens import load_vocab


def from_official(d: str):
    """-> (model, vocab, cmvn) from a FunASR SenseVoiceSmall directory."""
    if not os.path.isdir(d):
        raise RecoverError(f"{d}: not a directory (want FunASR's SenseVoiceSmall: model.pt, am.mvn, *.bpe.model)")
    need = {"model.pt": os.path.join(d, "model.pt"), "am.mvn": os.path.join(d, "am.mvn")}
    bpe = sorted(f for f in os.listdir(d) if f.endswith(".bpe.model") or f == "bpe.model")
    missing = [k for k, p in need.items() if not os.path.isfile(p)] + ([] if bpe else ["*.bpe.model"])
    if missing:
        raise RecoverError(f"{d}: lacks {', '.join(missing)} (want FunASR's SenseVoiceSmall directory)")
    vocab = load_vocab(os.path.join(d, bpe[0]))
    model = svm.build(svm.config_for("small", vocab_size=len(vocab)))
    svm.load_checkpoint_weights(model, need["model.pt"])
    neg_mean, inv_std = load_am_mvn(need["am.mvn"])
    return model, vocab, {"neg_mean": neg_mean, "inv_stddev": inv_std}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.base", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--onnx", help="a SenseVoice ONNX export made by Parley (model.onnx + tokens.txt)")
    src.add_argument("--official", help="FunASR SenseVoiceSmall directory (model.pt, am.mvn, *.bpe.model)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        if a.onnx:
            meta_comment = _comment(a.onnx)
            if meta_comment is not None and "parley" not in meta_comment.lower():
                raise RecoverError(f"{a.onnx}: this export was not made by Parley ({meta_comment!r}), so its weights "
                                   "cannot be recovered; fine-tune from FunASR's model.pt instead (--official DIR)")
            model, vocab, cmvn, size = recover(a.onnx)
            source = os.path.abspath(a.onnx)
        else:
            model, vocab, cmvn = from_official(a.official)
            size, source = "small", os.path.abspath(a.official)
    except (RecoverError, RuntimeError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    os.makedirs(a.out, exist_ok=True)
    ck = {"model": model.state_dict(), "config": model.cfg.to_dict(), "tokens": list(vocab.pieces), "cmvn": cmvn,
          "size": size, "source": source}
    if vocab.sp is not None:
        proto = getattr(vocab, "sp_proto", None)
        if proto is None and vocab.sp_path:
            with open(vocab.sp_path, "rb") as f:
                proto = f.read()
        ck["sp_model"] = proto
    path = os.path.join(a.out, "init.pt")
    torch.save(ck, path + ".partial")
    os.replace(path + ".partial", path)
    print(json.dumps({"init": path, "size": size, "params": svm.count_params(model), "vocab_size": len(vocab),
                      "source": source}))
    return 0


def _comment(d: str) -> Optional[str]:
    """The export's metadata comment (None when it cannot be read here)."""
    try:
        import onnx

        f = os.path.join(d, "model.onnx") if os.path.isdir(d) else d
        if not os.path.isfile(f):
            return None
        m = onnx.load(f, load_external_data=False)
        return {p.key: p.value for p in m.metadata_props}.get("comment", "")
    except Exception:  # noqa: BLE001 - recover() reports unreadable models properly
        return None


if __name__ == "__main__":
    sys.exit(main())
