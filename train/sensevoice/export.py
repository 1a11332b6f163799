"""Export a SenseVoice model to ONNX in the sherpa-onnx SenseVoice format.

    python3 -m train.sensevoice.export --size tiny --random --seed 20240717 \
        --out testdata/sensevoice/tiny --reference
    python3 -m train.sensevoice.export --size small --random --out /tmp/sv-small   # ~234M, benchmarks
    python3 -m train.sensevoice.export --checkpoint exp/demo/final.pt --out assets/demo/sensevoice
    python3 -m train.sensevoice.export --official DIR --out OUT   # FunASR model.pt + am.mvn + bpe.model

Writes model.onnx (+ model.int8.onnx with --int8), tokens.txt and, with
--reference, reference.json: fixed inputs with PyTorch's logits, checked by the
Go test in train/onnxcheck (Python here has no onnxruntime).

``--fp16-weights`` stores the large weights as float16, each behind a Cast to float32
(ONNX Runtime folds the Casts when it loads the model, so it computes in float32 as
before): half the file for the embedded model.  The weights are rounded to float16 first
and the reference logits come from the rounded model, so the parity test still holds at
fp32 tolerance; ``round_fp16`` does the same rounding for evaluation.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from . import model as svm
from ..onnxfp16 import FP16_MIN_ELEMENTS, round_fp16, store_fp16  # noqa: F401 (callers import them from here)
from .features import FEAT_DIM, LFR_M, LFR_N, load_am_mvn
from .tokens import SPECIAL_TOKENS, BASE_TOKENS, Vocab, WORD_START, char_vocab, load_vocab
from ..trainer import load_torch

OPSET = 13


def filler_vocab(size: int) -> Vocab:
    """A vocabulary of ``size`` pieces for random-weight models: the character
    vocabulary padded with synthetic ``▁wN`` pieces."""
    pieces = char_vocab().pieces
    if size < len(pieces):
        raise ValueError(f"vocab size {size} is smaller than the {len(pieces)} built-in pieces")
    pieces += [f"{WORD_START}w{i}" for i in range(size - len(pieces))]
    return Vocab(pieces)


def synthetic_cmvn(seed: int) -> Tuple[List[float], List[float]]:
    g = np.random.default_rng(seed)
    neg_mean = (-(10.0 + 3.0 * g.random(FEAT_DIM))).astype(np.float32)
    inv_std = (0.2 + 0.2 * g.random(FEAT_DIM)).astype(np.float32)
    return [float(v) for v in neg_mean], [float(v) for v in inv_std]


def check_segments(seg: float, most: float) -> Tuple[float, float]:
    """(seg, most) when the recogniser takes them (1 <= segment_s <= max_segment_s <= 30), else ValueError."""
    if not (1 <= seg <= most <= 30):
        raise ValueError(f"segment {seg:g} s and max segment {most:g} s: want 1 <= segment <= max segment <= 30 seconds")
    return seg, most


def metadata(vocab_size: int, neg_mean, inv_stddev, comment: str, languages: Optional[List[str]] = None,
             segments: Optional[Tuple[float, float]] = None) -> Dict[str, str]:
    def floats(v):
        return ",".join(repr(float(np.float32(x))) for x in v)

    if len(neg_mean) != FEAT_DIM or len(inv_stddev) != FEAT_DIM:
        raise ValueError(f"CMVN vectors must have {FEAT_DIM} values, got {len(neg_mean)}/{len(inv_stddev)}")
    meta = {
        "model_type": "sense_voice_ctc",
        "version": "2",
        "model_author": "parley",
        "comment": comment,
        "vocab_size": str(vocab_size),
        "lfr_window_size": str(LFR_M),
        "lfr_window_shift": str(LFR_N),
        "normalize_samples": "0",
        "neg_mean": floats(neg_mean),
        "inv_stddev": floats(inv_stddev),
    }
    for k, v in svm.LANG_IDS.items():
        meta[f"lang_{k}"] = str(v)
    if languages:
        # the languages the model learnt: the recogniser offers only these (the query ids of
        # the others stay, as the architecture has them, but mean nothing to this model)
        unknown = [l for l in languages if l not in svm.LANG_IDS or l in ("auto", "nospeech")]
        if unknown:
            raise ValueError(f"unknown languages {unknown} (have {sorted(k for k in svm.LANG_IDS if k not in ('auto', 'nospeech'))})")
        meta["trained_languages"] = ",".join(languages)
    if segments:
        # how long audio is cut for this model (asr.Config.Segment/MaxSegment): pieces of at most
        # max_segment_s seconds, cut at a pause near segment_s
        seg, most = check_segments(*segments)
        meta["segment_s"], meta["max_segment_s"] = f"{seg:g}", f"{most:g}"
    meta["with_itn"] = str(svm.TEXTNORM_IDS["withitn"])
    meta["without_itn"] = str(svm.TEXTNORM_IDS["woitn"])
    return meta


def export_onnx(model: svm.SenseVoiceSmall, path: str, meta: Dict[str, str]) -> None:
    import onnx

    model.eval()
    x = torch.randn(2, 23, FEAT_DIM)
    x_length = torch.tensor([23, 15], dtype=torch.int32)
    language = torch.tensor([0, 4], dtype=torch.int32)
    text_norm = torch.tensor([14, 15], dtype=torch.int32)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer chatter about constants and shape inference
        torch.onnx.export(
            model, (x, x_length, language, text_norm), path, opset_version=OPSET,
            input_names=["x", "x_length", "language", "text_norm"], output_names=["logits"],
            dynamic_axes={"x": {0: "N", 1: "T"}, "x_length": {0: "N"}, "language": {0: "N"},
                          "text_norm": {0: "N"}, "logits": {0: "N", 1: "T"}},
            do_constant_folding=True,
        )
    m = onnx.load(path)
    del m.metadata_props[:]
    for k, v in meta.items():
        p = m.metadata_props.add()
        p.key, p.value = k, v
    onnx.checker.check_model(m)
    onnx.save(m, path)


def export_int8(src: str, dst: str) -> int:
    import onnx
    from ..onnxquant import quantize_matmuls

    m = onnx.load(src)
    n = quantize_matmuls(m)
    onnx.checker.check_model(m)
    onnx.save(m, dst)
    return n


def f32list(t: torch.Tensor) -> List[float]:
    return [float(v) for v in t.detach().to(torch.float32).reshape(-1).tolist()]


def reference_cases(model: svm.SenseVoiceSmall, seed: int) -> List[dict]:
    """Fixed inputs (single, batched with padding, language/itn variants) and logits."""
    g = torch.Generator().manual_seed(seed)
    specs = [
        ("single", [7], [0], [15]),
        ("batch_padded", [9, 5], [4, 3], [14, 15]),
        ("one_frame", [1], [13], [14]),
    ]
    cases = []
    model.eval()
    for name, lens, lang, tn in specs:
        t = max(lens)
        # Multiples of 1/8: exact in float32 and short in JSON.
        x = torch.round(torch.randn(len(lens), t, FEAT_DIM, generator=g) * 8) / 8
        for i, l in enumerate(lens):
            x[i, l:] = 0.0
        args = (x, torch.tensor(lens, dtype=torch.int32), torch.tensor(lang, dtype=torch.int32),
                torch.tensor(tn, dtype=torch.int32))
        with torch.no_grad():
            logits = model(*args)
        cases.append({
            "name": name, "x_shape": list(x.shape), "x": f32list(x), "x_length": lens,
            "language": lang, "text_norm": tn, "logits_shape": list(logits.shape),
            "logits": f32list(logits),
        })
    return cases


def save_bundle(model: svm.SenseVoiceSmall, vocab: Vocab, neg_mean, inv_stddev, out: str, *,
                comment: str, int8: bool = False, reference: bool = False, seed: int = 0,
                sp_model: Optional[str] = None, reference_name: str = "reference.json",
                fp16_weights: bool = False, languages: Optional[List[str]] = None,
                segments: Optional[Tuple[float, float]] = None) -> Dict[str, str]:
    os.makedirs(out, exist_ok=True)
    if len(vocab) != model.cfg.vocab_size:
        raise ValueError(f"vocabulary has {len(vocab)} pieces but the model outputs {model.cfg.vocab_size}")
    model = model.float().eval()
    if fp16_weights:
        round_fp16(model)
    meta = metadata(len(vocab), neg_mean, inv_stddev, comment, languages, segments)
    paths = {"model": os.path.join(out, "model.onnx"), "tokens": os.path.join(out, "tokens.txt")}
    export_onnx(model, paths["model"], meta)
    if fp16_weights:
        import onnx

        m = onnx.load(paths["model"])
        n = store_fp16(m)
        onnx.checker.check_model(m)
        onnx.save(m, paths["model"])
        print(f"fp16: {n} weights stored as float16", file=sys.stderr)
    vocab.write_tokens(paths["tokens"])
    if int8:
        paths["int8"] = os.path.join(out, "model.int8.onnx")
        n = export_int8(paths["model"], paths["int8"])
        print(f"int8: quantised {n} MatMul weights", file=sys.stderr)
    if sp_model:
        import shutil
        paths["bpe"] = os.path.join(out, "bpe.model")
        shutil.copyfile(sp_model, paths["bpe"])
    if reference:
        paths["reference"] = os.path.join(out, reference_name)
        ref = {
            "comment": "PyTorch logits for fixed inputs; checked against ONNX Runtime by train/onnxcheck",
            "models": ["model.onnx"] + (["model.int8.onnx"] if int8 else []),
            "tolerance": 1e-4,
            # int8 logits may differ by up to this fraction of the largest |logit|.
            "int8_rel_tolerance": 0.05,
            "config": model.cfg.to_dict(),
            "cases": reference_cases(model, seed),
        }
        with open(paths["reference"], "w", encoding="utf-8") as f:
            json.dump(ref, f, separators=(",", ":"))
            f.write("\n")
    return paths


def resolve_checkpoint(path: str) -> str:
    """A checkpoint file, or a run's directory: its newest checkpoint."""
    if os.path.isdir(path):
        import glob

        cks = sorted(glob.glob(os.path.join(path, "ckpt-*.pt")))
        if not cks:
            raise SystemExit(f"{path}: no checkpoint (ckpt-*.pt) in this directory")
        return cks[-1]
    return path


def load_our_checkpoint(path: str):
    try:
        ck = load_torch(path)
    except Exception as e:  # noqa: BLE001
        raise SystemExit(f"{path}: cannot read checkpoint: {e}")
    for k in ("model", "config", "tokens", "cmvn"):
        if k not in ck:
            raise SystemExit(f"{path}: checkpoint lacks {k!r} (not made by train.sensevoice.train?)")
    cfg = svm.SenseVoiceConfig.from_dict(ck["config"])
    m = svm.build(cfg)
    m.load_state_dict({k[7:] if k.startswith("module.") else k: v for k, v in ck["model"].items()})
    vocab = Vocab(ck["tokens"])
    if ck.get("sp_model"):  # restore the SentencePiece model so targets encode as in training
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor()
        sp.load_from_serialized_proto(ck["sp_model"])
        vocab = Vocab(ck["tokens"], sp=sp)
    return m, vocab, ck["cmvn"]["neg_mean"], ck["cmvn"]["inv_stddev"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.export", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--random", action="store_true", help="random weights (fixed --seed)")
    src.add_argument("--checkpoint", help="a checkpoint written by train.sensevoice.train (or a run directory: its newest)")
    src.add_argument("--official", metavar="DIR", help="FunASR SenseVoiceSmall dir (model.pt, am.mvn, *.bpe.model)")
    ap.add_argument("--size", default="tiny", choices=sorted(svm.SIZES))
    ap.add_argument("--vocab", help="vocabulary: 'char' (default for tiny/demo) or a SentencePiece .model")
    ap.add_argument("--vocab-size", type=int, help="override the vocabulary size (random models)")
    ap.add_argument("--seed", type=int, default=20240717)
    ap.add_argument("--out", required=True)
    ap.add_argument("--int8", action="store_true", help="also write model.int8.onnx")
    ap.add_argument("--fp16-weights", action="store_true",
                    help="store model.onnx's large weights as float16 (computed in float32; half the size)")
    ap.add_argument("--reference", action="store_true", help="write reference.json for the parity test")
    ap.add_argument("--reference-name", default="reference.json",
                    help="file name for the reference (e.g. _reference.json, which assets/ does not embed)")
    ap.add_argument("--languages", help="the languages the model was trained on, comma-separated (e.g. en): "
                    "written as trained_languages, so the recogniser offers only those")
    ap.add_argument("--segment-s", type=float, nargs=2, metavar=("SEGMENT", "MAX"),
                    help="cut long audio into pieces of at most MAX seconds, at a pause near SEGMENT "
                         "(metadata segment_s, max_segment_s; for a model that learnt from short utterances)")
    a = ap.parse_args(argv)
    if a.segment_s:
        try:
            check_segments(*a.segment_s)
        except ValueError as e:
            ap.error(f"--segment-s: {e}")

    torch.manual_seed(a.seed)
    sp_model = None
    if a.random:
        if a.vocab:
            vocab = load_vocab(a.vocab)
            sp_model = vocab.sp_path
        elif a.size == "small" or a.vocab_size:
            vocab = filler_vocab(a.vocab_size or svm.SIZES["small"]["vocab_size"])
        else:
            vocab = char_vocab()
        cfg = svm.config_for(a.size, vocab_size=len(vocab))
        model = svm.build(cfg)
        neg_mean, inv_std = synthetic_cmvn(a.seed)
        comment = f"parley random-weight SenseVoice ({a.size}, seed {a.seed}); not a speech model"
    elif a.checkpoint:
        a.checkpoint = resolve_checkpoint(a.checkpoint)
        model, vocab, neg_mean, inv_std = load_our_checkpoint(a.checkpoint)
        comment = f"parley SenseVoice trained by train.sensevoice.train ({os.path.basename(a.checkpoint)})"
    else:
        d = a.official
        bpe = [f for f in os.listdir(d) if f.endswith(".bpe.model") or f == "bpe.model"]
        if not bpe:
            raise SystemExit(f"{d}: no *.bpe.model found")
        vocab = load_vocab(os.path.join(d, bpe[0]))
        sp_model = vocab.sp_path
        model = svm.build(svm.config_for("small", vocab_size=len(vocab)))
        svm.load_checkpoint_weights(model, os.path.join(d, "model.pt"))
        neg_mean, inv_std = load_am_mvn(os.path.join(d, "am.mvn"))
        comment = "iic/SenseVoiceSmall exported by parley"
    n = svm.count_params(model)
    try:
        paths = save_bundle(model, vocab, neg_mean, inv_std, a.out, comment=comment, int8=a.int8,
                            reference=a.reference, seed=a.seed, sp_model=sp_model, reference_name=a.reference_name,
                            fp16_weights=a.fp16_weights,
                            languages=[l.strip() for l in a.languages.split(",") if l.strip()] if a.languages else None,
                            segments=tuple(a.segment_s) if a.segment_s else None)
    except OSError as e:  # disk full, quota, file size limit: say so instead of a traceback
        print(f"error: cannot write the export to {a.out}: {e.strerror or e} (is the disk full?)", file=sys.stderr)
        return 1
    print(json.dumps({"params": n, "vocab_size": len(vocab), **paths}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
