"""Deepen a trained recogniser without changing what it hears.

    /usr/bin/python3 -m train.sensevoice.grow --checkpoint train/out/asr3/D --blocks 11 --out train/out/asr4/init.pt

A recogniser trained from random weights on the open-vocabulary corpus stays on CTC's prior
("the a to" for everything; issue 28), so a bigger model cannot start from scratch here. This
starts it from a smaller one that already listens: new SAN-M blocks are put between the old
ones, each an exact identity at first (its value projection, attention output and second
feed-forward layer are zero, so the block adds nothing to the residual stream). Gradients still
reach them: the FSMN memory adds v to itself, so the value projection learns at once, and the
rest follows. The result is checked: in eval mode it gives the same logits as the source.

Writes a checkpoint in our layout (model, config, tokens, cmvn, sp_model) for
``train.sensevoice.train --init OUT --from-init``.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

import torch

from ..trainer import load_torch
from . import model as svm
from .export import resolve_checkpoint


def identity_block(layer: svm.SANMLayer) -> None:
    """Make a residual SAN-M block add nothing: v = 0 (so attention and FSMN memory are 0),
    the attention's output projection 0, and the feed-forward's second layer 0."""
    att = layer.self_attn
    d = att.h * att.d_k
    with torch.no_grad():
        att.linear_q_k_v.weight[2 * d:].zero_()
        att.linear_q_k_v.bias[2 * d:].zero_()
        att.linear_out.weight.zero_()
        att.linear_out.bias.zero_()
        layer.feed_forward.w_2.weight.zero_()
        layer.feed_forward.w_2.bias.zero_()


def placement(old: int, new: int) -> List[Optional[int]]:
    """Where the old ``encoders`` blocks go among ``new`` slots: old block i, or None for a new
    identity block. New blocks are spread evenly, one after each old block first."""
    if new < old:
        raise ValueError(f"cannot shrink {old} blocks to {new}")
    extra = new - old
    slots: List[Optional[int]] = []
    for i in range(old):
        slots.append(i)
        # spread: old block i gets floor((i+1)*extra/old) - floor(i*extra/old) new ones after it
        slots.extend([None] * ((i + 1) * extra // old - i * extra // old))
    slots.extend([None] * (new - len(slots)))
    return slots


def grow(src: svm.SenseVoiceSmall, num_blocks: int, seed: int = 0) -> svm.SenseVoiceSmall:
    cfg = svm.SenseVoiceConfig.from_dict({**src.cfg.to_dict(), "num_blocks": num_blocks})
    torch.manual_seed(seed)
    dst = svm.build(cfg)
    sd_src = src.state_dict()
    sd = dst.state_dict()
    for k in sd:
        if not k.startswith("encoder.encoders."):
            sd[k] = sd_src[k].clone()
    for slot, old in enumerate(placement(src.cfg.num_blocks - 1, num_blocks - 1)):
        if old is None:
            continue
        pre_new, pre_old = f"encoder.encoders.{slot}.", f"encoder.encoders.{old}."
        for k in sd:
            if k.startswith(pre_new):
                sd[k] = sd_src[pre_old + k[len(pre_new):]].clone()
    dst.load_state_dict(sd)
    for slot, old in enumerate(placement(src.cfg.num_blocks - 1, num_blocks - 1)):
        if old is None:
            identity_block(dst.encoder.encoders[slot])
    return dst


def max_logit_difference(a: svm.SenseVoiceSmall, b: svm.SenseVoiceSmall, seed: int = 1) -> float:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 50, a.cfg.input_size, generator=g)
    n = torch.tensor([50, 31])
    lang = torch.tensor([0, 4])
    tn = torch.tensor([15, 14])
    a.eval(), b.eval()
    with torch.no_grad():
        return float((a(x, n, lang, tn) - b(x, n, lang, tn)).abs().max())


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.grow", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, help="one of our checkpoints, or a directory of them (newest)")
    ap.add_argument("--blocks", type=int, required=True, help="encoder blocks of the result (num_blocks)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the new blocks' other weights")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    path = resolve_checkpoint(a.checkpoint)
    ck = load_torch(path)
    missing = [k for k in ("model", "config", "tokens", "cmvn") if k not in ck]
    if missing:
        print(f"{path}: not one of our checkpoints (lacks {', '.join(missing)})", file=sys.stderr)
        return 2
    src = svm.build(svm.SenseVoiceConfig.from_dict(ck["config"]))
    src.load_state_dict(ck["model"])
    try:
        dst = grow(src, a.blocks, a.seed)
    except ValueError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 2
    diff = max_logit_difference(src, dst)
    if diff > 1e-4:
        print(f"grown model differs from {path}: max logit difference {diff:.3g}", file=sys.stderr)
        return 1
    out = {"model": dst.state_dict(), "config": dst.cfg.to_dict(), "tokens": ck["tokens"], "cmvn": ck["cmvn"],
           "sp_model": ck.get("sp_model"), "grown_from": os.path.abspath(path)}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    torch.save(out, a.out)
    print(f"{path}: {src.cfg.num_blocks} -> {a.blocks} blocks, {svm.count_params(src)} -> {svm.count_params(dst)} "
          f"parameters, max logit difference {diff:.2g}; wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
