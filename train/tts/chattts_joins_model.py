#!/usr/bin/env python3
"""Official-size ChatTTS decoder and Vocos with layer scales of trained magnitude, for
tts/chattts's BenchmarkStreamingJoins.

A random export's ConvNeXt layer scales start at 1e-6, so its decoder and Vocos are nearly the
identity and reach almost no context: streamed chunks would look exact whatever the context.
This sets every ConvNeXt layer scale (the DVAE decoder's 12 blocks, Vocos's 8) to 0.3 and
exports decoder.onnx and vocos.onnx next to links to the rest of an official-size export.
Regenerate (after `make -C train chattts-official`) with:

  /usr/bin/python3 train/tts/chattts_joins_model.py --src /tmp/parley-chattts-official \\
      --out /tmp/parley-chattts-joins
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from train.chattts.config import config_for  # noqa: E402
from train.chattts.export import DecoderGraph, VocosGraph, _export  # noqa: E402
from train.chattts.model import ChatTTS  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default="/tmp/parley-chattts-official")
    ap.add_argument("--out", default="/tmp/parley-chattts-joins")
    ap.add_argument("--scale", type=float, default=0.3)
    a = ap.parse_args()
    conf = json.load(open(os.path.join(a.src, "config.json")))
    torch.manual_seed(5)
    m = ChatTTS(config_for(conf["size"], num_text_tokens=conf["gpt"]["num_text_tokens"])).float().eval()
    n = 0
    with torch.no_grad():
        for name, p in m.named_parameters():
            # ConvNeXt layer scales are the blocks' 1-d "weight" (not the norms')
            if p.dim() == 1 and name.endswith(".weight") and "norm" not in name and \
                    ("decoder_block" in name or "convnext" in name or "backbone" in name):
                p.fill_(a.scale)
                n += 1
    os.makedirs(a.out, exist_ok=True)
    h = m.cfg.gpt.hidden
    meta = {"format": conf["format"]}
    _export(DecoderGraph(m), (torch.randn(1, 5, h),), os.path.join(a.out, "decoder.onnx"), ["hiddens"], ["mel"],
            {"hiddens": {0: "batch", 1: "codes"}, "mel": {0: "batch", 2: "frames"}}, meta)
    _export(VocosGraph(m), (torch.randn(1, conf["audio"]["n_mels"], 10),), os.path.join(a.out, "vocos.onnx"),
            ["mel"], ["mag", "phase"],
            {"mel": {0: "batch", 2: "frames"}, "mag": {0: "batch", 2: "frames"}, "phase": {0: "batch", 2: "frames"}},
            meta)
    for f in ["config.json", "tokenizer.json", "spk_stat.bin", "gpt.onnx"]:
        d = os.path.join(a.out, f)
        if not os.path.lexists(d):
            os.symlink(os.path.join(os.path.abspath(a.src), f), d)
    print(json.dumps({"layer_scales": n, "scale": a.scale, "out": a.out}))


if __name__ == "__main__":
    main()
