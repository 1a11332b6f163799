#!/usr/bin/python3
"""Golden token ids of the embedded demo model on the held-out speech, from PyTorch.

Regenerate (from the repository root, after `make -C train demo-asr`; Debian's python3-torch,
torchaudio, soundfile):

    /usr/bin/python3 asr/testdata/make_demo_golden.py --checkpoint train/out/demo/run/ckpt-NNNNNNNN.pt

The checkpoint must be the one assets/demo/sensevoice was exported from: the script checks
the rebuilt model against assets/demo/sensevoice/reference.json (PyTorch logits written by the
exporter) and refuses otherwise. It then computes features with PyTorch (torchaudio's Kaldi
fbank -> LFR 7/6 -> CMVN from model.onnx's metadata) for every utterance in
testdata/speech/manifest.jsonl, runs the model (language auto, the manifest's ITN tag),
decodes greedily and writes asr/testdata/demo_golden.json, which TestDemoModel compares
with the Go frontend + ONNX Runtime.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
import soundfile
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, ROOT)
from train.sensevoice import features as feats  # noqa: E402
from train.sensevoice.export import load_our_checkpoint  # noqa: E402

DEMO = os.path.join(ROOT, "assets", "demo", "sensevoice")
SPEECH = os.path.join(ROOT, "testdata", "speech")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--demo", default=DEMO, help="the exported model directory (default assets/demo/sensevoice)")
    ap.add_argument("--out", default=os.path.join(ROOT, "asr", "testdata", "demo_golden.json"))
    a = ap.parse_args()
    demo = a.demo
    torch.set_num_threads(1)
    out = load_our_checkpoint(a.checkpoint)
    m = out[0]
    m.eval()
    ref = json.load(open(os.path.join(demo, "reference.json")))
    with torch.no_grad():
        for c in ref["cases"]:
            x = torch.tensor(c["x"], dtype=torch.float32).reshape(c["x_shape"])
            lg = m(x, torch.tensor(c["x_length"], dtype=torch.int32), torch.tensor(c["language"], dtype=torch.int32),
                   torch.tensor(c["text_norm"], dtype=torch.int32))
            d = (lg - torch.tensor(c["logits"]).reshape(c["logits_shape"])).abs().max().item()
            if d > 1e-4:
                raise SystemExit(f"{a.checkpoint} is not the checkpoint {demo} was exported from ({c['name']}: {d})")
    md = {p.key: p.value for p in onnx.load(os.path.join(demo, "model.onnx")).metadata_props}
    nm = torch.tensor([float(v) for v in md["neg_mean"].split(",")])
    iv = torch.tensor([float(v) for v in md["inv_stddev"].split(",")])
    pieces = [line.rsplit(maxsplit=1)[0] for line in open(os.path.join(demo, "tokens.txt"), encoding="utf-8")]
    golden = {"model": "assets/demo/sensevoice", "note": "PyTorch ids (asr/testdata/make_demo_golden.py --checkpoint "
              + os.path.relpath(a.checkpoint, ROOT) + ")", "ids": {}, "text": {}, "tags": {}}
    for line in open(os.path.join(SPEECH, "manifest.jsonl")):
        if not line.strip():
            continue
        row = json.loads(line)
        wav, sr = soundfile.read(os.path.join(SPEECH, row["source"]), dtype="int16", always_2d=True)
        assert sr == 16000, sr
        pcm = torch.from_numpy(wav[:, 0].astype(np.float32) / 32768)
        x = feats.apply_cmvn(feats.lfr(feats.fbank(pcm)), nm, iv)
        tn = int(md["with_itn"] if row.get("with_or_wo_itn") == "<|withitn|>" else md["without_itn"])
        with torch.no_grad():
            lg = m(x.unsqueeze(0), torch.tensor([x.shape[0]], dtype=torch.int32),
                   torch.tensor([int(md["lang_auto"])], dtype=torch.int32), torch.tensor([tn], dtype=torch.int32))[0]
        ids, prev = [], -1
        for y in lg.argmax(-1).tolist():
            if y != 0 and y != prev:
                ids.append(y)
            prev = y
        top2 = lg.topk(2, dim=-1).values
        margin = float((top2[:, 0] - top2[:, 1]).min())
        text = "".join(pieces[i] for i in ids[4:]).replace("\u2581", " ").strip()
        golden["ids"][row["key"]] = ids
        golden["text"][row["key"]] = text
        golden["tags"][row["key"]] = [pieces[i][2:-2] for i in ids[:3]]
        print(row["key"], repr(row["target"]), "->", repr(text), "min margin %.3g" % margin)
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(golden, fh, indent=1, ensure_ascii=False)
        fh.write("\n")


if __name__ == "__main__":
    main()
