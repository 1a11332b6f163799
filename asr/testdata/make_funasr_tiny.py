#!/usr/bin/python3
"""A tiny SenseVoice model in the FunASR/ModelScope ONNX layout, for asr's loader tests.

Regenerate (from the repository root; Debian's python3-torch and python3-onnx):

    /usr/bin/python3 asr/testdata/make_funasr_tiny.py

Writes asr/testdata/funasr-tiny/{model.onnx, am.mvn, tokens.json}: the same network and
weights as testdata/sensevoice/tiny (train/'s model definition, tiny size, seed 20240717,
rebuilt and checked against its reference.json) and the same CMVN, but exported the way
FunASR exports SenseVoiceSmall: inputs speech (N,T,560) float32, speech_lengths (N) int32,
language (N) int32, textnorm (N) int32; outputs ctc_logits (N,T+4,V) float32 and
encoder_out_lens (N) int32; no metadata; CMVN in am.mvn (Kaldi nnet text: <AddShift> holds
the negated means, <Rescale> the inverse standard deviations); pieces in tokens.json.
So the Go test can demand identical token ids from both layouts.
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
from train.sensevoice.export import synthetic_cmvn  # noqa: E402
from train.sensevoice.tokens import char_vocab  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tiny_golden import build, SEED  # noqa: E402

OUT = os.path.join(ROOT, "asr", "testdata", "funasr-tiny")


class FunASRExport(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, speech, speech_lengths, language, textnorm):
        logits = self.m(speech, speech_lengths, language, textnorm)
        return logits, (speech_lengths + 4).to(torch.int32)


def vec(v):
    return "[ " + " ".join(repr(float(np.float32(x))) for x in v) + " ]"


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    m = build()  # asserts equality with testdata/sensevoice/tiny/reference.json
    path = os.path.join(OUT, "model.onnx")
    x = torch.randn(2, 23, 560)
    args = (x, torch.tensor([23, 15], dtype=torch.int32), torch.tensor([0, 4], dtype=torch.int32),
            torch.tensor([14, 15], dtype=torch.int32))
    with torch.no_grad():
        torch.onnx.export(FunASRExport(m).eval(), args, path, opset_version=13,
                          input_names=["speech", "speech_lengths", "language", "textnorm"],
                          output_names=["ctc_logits", "encoder_out_lens"],
                          dynamic_axes={"speech": {0: "N", 1: "T"}, "speech_lengths": {0: "N"},
                                        "language": {0: "N"}, "textnorm": {0: "N"},
                                        "ctc_logits": {0: "N", 1: "T"}, "encoder_out_lens": {0: "N"}},
                          do_constant_folding=True)
    mo = onnx.load(path)
    del mo.metadata_props[:]
    onnx.checker.check_model(mo)
    onnx.save(mo, path)
    neg_mean, inv_std = synthetic_cmvn(SEED)
    d = len(neg_mean)
    with open(os.path.join(OUT, "am.mvn"), "w") as f:
        f.write(f"<Nnet>\n<Splice> {d} {d}\n[ 0 ]\n<AddShift> {d} {d}\n<LearnRateCoef> 0 {vec(neg_mean)}\n"
                f"<Rescale> {d} {d}\n<LearnRateCoef> 0 {vec(inv_std)}\n</Nnet>\n")
    with open(os.path.join(OUT, "tokens.json"), "w", encoding="utf-8") as f:
        json.dump(char_vocab().pieces, f, ensure_ascii=False)
        f.write("\n")
    print("wrote", OUT, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
