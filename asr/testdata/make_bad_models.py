#!/usr/bin/python3
"""Small broken ONNX models for asr's validation tests (each a few hundred bytes).

Regenerate (from the repository root; Debian's python3-onnx):

    /usr/bin/python3 asr/testdata/make_bad_models.py

Each graph has a sherpa-onnx-like signature but passes x straight through, so only the
loader's checks matter:
  bad/no-meta/model.onnx        right inputs and outputs, no metadata at all
  bad/partial-meta/model.onnx   metadata without neg_mean, inv_stddev, with_itn
  bad/wrong-inputs/model.onnx   inputs named features/lengths: neither layout
  bad/wrong-type/model.onnx     language is float32
  bad/short-segment/model.onnx  full metadata, segment_s 0.5 (a piece under a second)
  bad/segment-over-max/model.onnx  full metadata, segment_s 12 over max_segment_s 10
"""
import os

import onnx
from onnx import TensorProto, helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad")


def graph(names, types, meta):
    ins = [helper.make_tensor_value_info(n, t, s) for n, t, s in zip(
        names, types, [["N", "T", 560], ["N"], ["N"], ["N"]])]
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", "T", 560])
    nodes = [helper.make_node("Identity", [names[0]], ["logits"])]
    g = helper.make_graph(nodes, "bad", ins, [out])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    for k, v in meta.items():
        p = m.metadata_props.add()
        p.key, p.value = k, v
    onnx.checker.check_model(m)
    return m


def main():
    sherpa = ["x", "x_length", "language", "text_norm"]
    i32 = TensorProto.INT32
    ok_types = [TensorProto.FLOAT, i32, i32, i32]
    partial = {"model_type": "sense_voice_ctc", "vocab_size": "560", "lfr_window_size": "7",
               "lfr_window_shift": "6", "normalize_samples": "0", "without_itn": "15",
               "lang_auto": "0", "lang_zh": "3", "lang_en": "4", "lang_yue": "7", "lang_ja": "11",
               "lang_ko": "12"}
    full = dict(partial, with_itn="14", neg_mean=",".join(["-10"] * 560), inv_stddev=",".join(["0.2"] * 560))
    cases = {
        "short-segment": graph(sherpa, ok_types, dict(full, segment_s="0.5")),
        "segment-over-max": graph(sherpa, ok_types, dict(full, segment_s="12", max_segment_s="10")),
        "no-meta": graph(sherpa, ok_types, {}),
        "partial-meta": graph(sherpa, ok_types, partial),
        "wrong-inputs": graph(["features", "lengths", "language", "text_norm"], ok_types, {}),
        "wrong-type": graph(sherpa, [TensorProto.FLOAT, i32, TensorProto.FLOAT, i32], partial),
    }
    for name, m in cases.items():
        d = os.path.join(HERE, name)
        os.makedirs(d, exist_ok=True)
        onnx.save(m, os.path.join(d, "model.onnx"))
        with open(os.path.join(d, "tokens.txt"), "w") as f:
            f.writelines(f"t{i} {i}\n" for i in range(560))


if __name__ == "__main__":
    main()
