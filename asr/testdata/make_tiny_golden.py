#!/usr/bin/python3
"""Golden CTC token ids of the project's tiny random SenseVoice model on real audio.

Regenerate (from the repository root; Debian's python3-torch/torchaudio/onnx):

    /usr/bin/python3 asr/testdata/make_tiny_golden.py

It rebuilds the tiny model exactly as `make -C train test-models` does (same seed, same
construction order), checks the rebuilt weights against testdata/sensevoice/tiny/reference.json
(PyTorch logits of the exported model), computes features with PyTorch (torchaudio's Kaldi
fbank -> LFR 7/6 -> CMVN from model.onnx's metadata), runs the model, decodes greedily
(argmax, collapse, drop blank 0) and writes asr/testdata/tiny_golden.json. The Go test runs
the same audio through the Go frontend and ONNX Runtime and must get the same ids.
Frames whose top-2 logit margin is tiny are listed so a flip there can be judged.
"""
import json
import os
import sys

import numpy as np
import onnx
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, ROOT)
from train.sensevoice import model as svm  # noqa: E402
from train.sensevoice import features as feats  # noqa: E402
from train.sensevoice.tokens import char_vocab  # noqa: E402

torch.set_num_threads(1)
TINY = os.path.join(ROOT, "testdata", "sensevoice", "tiny")
FB = os.path.join(ROOT, "asr", "testdata", "fbank")
SEED = 20240717


def build():
    torch.manual_seed(SEED)
    vocab = char_vocab()
    m = svm.build(svm.config_for("tiny", vocab_size=len(vocab)))
    m.eval()
    ref = json.load(open(os.path.join(TINY, "reference.json")))
    with torch.no_grad():
        for c in ref["cases"]:
            x = torch.tensor(c["x"], dtype=torch.float32).reshape(c["x_shape"])
            out = m(x, torch.tensor(c["x_length"], dtype=torch.int32),
                    torch.tensor(c["language"], dtype=torch.int32),
                    torch.tensor(c["text_norm"], dtype=torch.int32))
            want = torch.tensor(c["logits"]).reshape(c["logits_shape"])
            d = (out - want).abs().max().item()
            assert d < 1e-5, f"rebuilt tiny model differs from reference.json ({c['name']}: {d})"
    return m


def meta():
    md = {p.key: p.value for p in onnx.load(os.path.join(TINY, "model.onnx")).metadata_props}
    nm = torch.tensor([float(v) for v in md["neg_mean"].split(",")])
    iv = torch.tensor([float(v) for v in md["inv_stddev"].split(",")])
    return nm, iv, md


def greedy(logits):
    ids, frames, prev = [], [], -1
    am = logits.argmax(-1).tolist()
    for t, y in enumerate(am):
        if y != 0 and y != prev:
            ids.append(y)
            frames.append(t)
        prev = y
    top2 = logits.topk(2, dim=-1).values
    margin = (top2[:, 0] - top2[:, 1])
    return ids, frames, float(margin.min()), [int(i) for i in (margin < 1e-3).nonzero().flatten()]


def main():
    m = build()
    nm, iv, md = meta()
    out = {"model": "testdata/sensevoice/tiny/model.onnx", "seed": SEED, "cases": []}
    for name in ["speech_en", "speech_fast", "clipped", "noise_full"]:
        pcm = np.fromfile(os.path.join(FB, name + ".pcm"), dtype="<i2").astype(np.float32) / 32768
        x = feats.apply_cmvn(feats.lfr(feats.fbank(torch.from_numpy(pcm))), nm, iv)
        for lang, tn in [("auto", "without_itn"), ("en", "with_itn")]:
            with torch.no_grad():
                lg = m(x.unsqueeze(0), torch.tensor([x.shape[0]], dtype=torch.int32),
                       torch.tensor([int(md["lang_" + lang])], dtype=torch.int32),
                       torch.tensor([int(md[tn])], dtype=torch.int32))[0]
            ids, frames, margin, close = greedy(lg)
            out["cases"].append({"audio": name, "language": lang, "itn": tn == "with_itn",
                                 "lfr_frames": int(x.shape[0]), "ids": ids, "frames": frames,
                                 "min_margin": margin, "near_tie_frames": close})
            print(name, lang, tn, len(ids), "tokens, min top-2 margin %.2e" % margin, close)
    with open(os.path.join(ROOT, "asr", "testdata", "tiny_golden.json"), "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
