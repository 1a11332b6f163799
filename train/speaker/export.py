"""Export the speaker encoder to ONNX in CAM++'s signature (see model.py), with metadata.

    /usr/bin/python3 -m train.speaker.export --checkpoint train/out/speaker/ckpt-XXXXXXXX.pt --out assets/demo/speaker
    /usr/bin/python3 -m train.speaker.export --random --size tiny --seed 7 --reference --out testdata/speaker/tiny

Writes model.onnx (input "input" (B, T, 80), output "output" (B, 192); metadata: model_type
"campplus", framework, sample_rate, feature, window, mean_norm, output_dim, comment) and, with
--reference, reference.json: fixed inputs and PyTorch's embeddings for the Go parity test.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

import torch

from . import model as spm
from ..trainer import load_torch


def metadata(comment: str, dim: int) -> dict:
    return {
        "model_type": "campplus", "framework": "parley", "version": "1", "sample_rate": "16000",
        "feature": "kaldi-fbank", "feature_dim": "80", "window": "povey", "sample_scale": "1",
        "mean_norm": "utterance", "output_dim": str(dim), "comment": comment,
    }


def export_onnx(enc: spm.SpeakerEncoder, path: str, meta: dict) -> None:
    import onnx

    enc = enc.float().eval()
    x = torch.zeros(1, 120, spm.FEAT_DIM)
    torch.onnx.export(enc, (x,), path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch", 1: "frames"}, "output": {0: "batch"}},
                      opset_version=13, do_constant_folding=True)
    m = onnx.load(path)
    for k, v in meta.items():
        p = m.metadata_props.add()
        p.key, p.value = k, v
    onnx.checker.check_model(m)
    onnx.save(m, path)


def reference_cases(enc: spm.SpeakerEncoder, seed: int) -> List[dict]:
    g = torch.Generator().manual_seed(seed)
    cases = []
    enc.eval()
    for name, t in [("short", 40), ("long", 150)]:
        x = torch.round(torch.randn(1, t, spm.FEAT_DIM, generator=g) * 8) / 8
        with torch.no_grad():
            y = enc(x)
        cases.append({"name": name, "x_shape": list(x.shape), "x": [float(v) for v in x.reshape(-1)],
                      "embedding": [float(v) for v in y.reshape(-1)]})
    return cases


def load_checkpoint(path: str) -> spm.SpeakerEncoder:
    try:
        ck = load_torch(path)
    except Exception as e:  # noqa: BLE001
        raise SystemExit(f"{path}: cannot read checkpoint: {e}")
    if not isinstance(ck, dict) or "model" not in ck or "speaker_config" not in ck:
        raise SystemExit(f"{path}: not a train.speaker.train checkpoint (no model/speaker_config)")
    enc = spm.SpeakerEncoder(spm.SpeakerConfig.from_dict(ck["speaker_config"]))
    sd = {k[len("module."):] if k.startswith("module.") else k: v for k, v in ck["model"].items()}
    sd = {k[len("encoder."):]: v for k, v in sd.items() if k.startswith("encoder.")}
    missing, unexpected = enc.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise SystemExit(f"{path}: encoder tensors missing {missing[:5]} unexpected {unexpected[:5]}")
    return enc


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.speaker.export", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--random", action="store_true")
    src.add_argument("--checkpoint")
    ap.add_argument("--size", default="tiny", choices=sorted(spm.SIZES))
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--comment", default="")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    if a.random:
        enc = spm.SpeakerEncoder(spm.config_for(a.size))
        # Random batch-norm statistics, so the parity test exercises them.
        for m in enc.modules():
            if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
        comment = a.comment or f"parley random-weight speaker encoder ({a.size}, seed {a.seed}); not a trained model"
    else:
        enc = load_checkpoint(a.checkpoint)
        comment = a.comment or f"parley speaker encoder trained by train.speaker.train ({os.path.basename(a.checkpoint)})"
    enc.eval()
    path = os.path.join(a.out, "model.onnx")
    export_onnx(enc, path, metadata(comment, enc.cfg.embedding))
    out = {"model": path, "params": spm.count_params(enc)}
    if a.reference:
        ref = {"comment": "PyTorch embeddings for fixed inputs; checked against ONNX Runtime by voices/speaker",
               "tolerance": 1e-4, "config": enc.cfg.to_dict(), "cases": reference_cases(enc, a.seed)}
        out["reference"] = os.path.join(a.out, "reference.json")
        with open(out["reference"], "w", encoding="utf-8") as f:
            json.dump(ref, f, separators=(",", ":"))
            f.write("\n")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
