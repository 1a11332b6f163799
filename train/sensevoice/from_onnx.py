"""A PyTorch starting point from a SenseVoice ONNX export made by ``train.sensevoice.export``.

    /usr/bin/python3 -m train.sensevoice.from_onnx --model assets/demo/sensevoice --out train/out/demo-init

Fine-tuning ("improve recognition of my voice") needs weights PyTorch can train. For the
official SenseVoice-Small that is FunASR's ``model.pt``; for models Parley ships only as ONNX
(the embedded demo recogniser) this script recovers them from the graph:

- the architecture: the known sizes (``model.SIZES``) are tried with the vocabulary size from
  the metadata, and the one whose export has the same graph is taken;
- the weights: each parameter of that architecture is given a unique random fingerprint and
  exported, which shows which initializer (possibly transposed, as torch.onnx stores Linear
  weights for MatMul) holds which parameter; the real initializers are then copied back;
- the vocabulary: ``tokens.txt`` in SentencePiece BPE order is turned back into a
  SentencePiece model (pieces scored by rank, the SenseVoice tags as user-defined symbols), so
  targets encode as in training;
- the frontend's CMVN from the metadata.

The result is checked by exporting the recovered model again and comparing the graph with
the input (``train/onnxcompare.py``): it must be the same model. Writes ``init.pt`` (our
checkpoint layout: model, config, tokens, cmvn, sp_model), ``bpe.model`` (when the vocabulary is
BPE) and ``cmvn.json``, the three files ``train.sensevoice.train`` takes (--init, --vocab, --cmvn).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from ..onnxcompare import compare_onnx
from . import model as svm
from .export import export_onnx
from .tokens import BASE_TOKENS, SPECIAL_TOKENS, WORD_START, CHARSET, Vocab, read_tokens


class RecoverError(RuntimeError):
    pass


def _initializers(m) -> Dict[str, np.ndarray]:
    from onnx import numpy_helper

    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def _find_file(path: str) -> Tuple[str, str]:
    if os.path.isdir(path):
        for name in ("model.onnx",):
            if os.path.isfile(os.path.join(path, name)):
                return os.path.join(path, name), path
        raise RecoverError(f"{path}: no model.onnx (the float model; an int8 export cannot be trained from)")
    return path, os.path.dirname(path)


def vocab_from_tokens(pieces: List[str]) -> Vocab:
    """The vocabulary of a tokens.txt: the built-in characters, or SentencePiece BPE rebuilt."""
    char = BASE_TOKENS + SPECIAL_TOKENS + [WORD_START] + list(CHARSET)
    if pieces == char:
        return Vocab(pieces)
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    mp = pb.ModelProto()
    mp.trainer_spec.model_type = pb.TrainerSpec.BPE
    mp.trainer_spec.vocab_size = len(pieces)
    mp.trainer_spec.unk_id, mp.trainer_spec.bos_id, mp.trainer_spec.eos_id, mp.trainer_spec.pad_id = 0, 1, 2, -1
    mp.trainer_spec.character_coverage = 1.0
    mp.normalizer_spec.name = "identity"
    mp.normalizer_spec.add_dummy_prefix = True
    mp.normalizer_spec.remove_extra_whitespaces = True
    types = {"<unk>": pb.ModelProto.SentencePiece.UNKNOWN, "<s>": pb.ModelProto.SentencePiece.CONTROL,
             "</s>": pb.ModelProto.SentencePiece.CONTROL}
    for i, p in enumerate(pieces):
        sp = mp.pieces.add()
        sp.piece = p
        if p in types:
            sp.type, sp.score = types[p], 0.0
        elif p in SPECIAL_TOKENS:
            sp.type, sp.score = pb.ModelProto.SentencePiece.USER_DEFINED, 0.0
        else:
            # SentencePiece writes BPE pieces in merge order with score -rank: keep that order.
            sp.type, sp.score = pb.ModelProto.SentencePiece.NORMAL, -float(i)
    proc = spm.SentencePieceProcessor()
    proc.load_from_serialized_proto(mp.SerializeToString())
    if [proc.id_to_piece(i) for i in range(proc.get_piece_size())] != pieces:
        raise RecoverError("rebuilt SentencePiece model does not keep the tokens' ids")
    v = Vocab(pieces, sp=proc)
    v.sp_proto = mp.SerializeToString()
    return v


def _fingerprint_export(cfg: svm.SenseVoiceConfig, vocab: Vocab, meta: dict, path: str) -> Dict[str, torch.Tensor]:
    """Export cfg with every parameter set to its own random values; returns those values."""
    torch.manual_seed(0)
    m = svm.build(cfg).eval()
    marks = {}
    g = torch.Generator().manual_seed(12345)
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g))
            marks[name] = p.detach().clone()
    export_onnx(m, path, meta)
    return marks


def _match(marked: Dict[str, np.ndarray], marks: Dict[str, torch.Tensor]) -> Dict[str, Tuple[str, bool]]:
    """parameter name -> (initializer name, transposed)."""
    out: Dict[str, Tuple[str, bool]] = {}
    by_size: Dict[int, List[str]] = {}
    for iname, arr in marked.items():
        by_size.setdefault(arr.size, []).append(iname)
    for pname, val in marks.items():
        v = val.numpy()
        for iname in by_size.get(v.size, []):
            arr = marked[iname]
            if arr.shape == v.shape and np.array_equal(arr, v):
                out[pname] = (iname, False)
                break
            if v.ndim == 2 and arr.shape == v.T.shape and np.array_equal(arr, v.T):
                out[pname] = (iname, True)
                break
    return out


def _values(m) -> Dict[str, np.ndarray]:
    """Initializers by name, plus the names the exporter's deduplication turned into Identity
    nodes over another initializer (a fresh model's LayerNorm weights are all ones and share
    one tensor), so every original weight name resolves to its values."""
    vals = _initializers(m)
    for n in m.graph.node:
        if n.op_type == "Identity" and n.input[0] in vals:
            vals[n.output[0]] = vals[n.input[0]]
        # export --fp16-weights stores a weight W as float16 W_fp16 read through Cast -> W
        if n.op_type == "Cast" and n.input[0] in vals and vals[n.input[0]].dtype == np.float16:
            vals[n.output[0]] = vals[n.input[0]].astype(np.float32)
    return vals


def _fp16_weights(m) -> set:
    """The weights an export stores as float16 (W_fp16 read through a Cast to W)."""
    from onnx import TensorProto

    return {t.name[: -len("_fp16")] for t in m.graph.initializer
            if t.data_type == TensorProto.FLOAT16 and t.name.endswith("_fp16")}


def _plausible(real: Dict[str, np.ndarray], cfg: svm.SenseVoiceConfig) -> bool:
    """Whether the named weights of the graph fit cfg: the first block's FSMN kernel
    (d_model, 1, kernel) and the numbers of encoder and tp blocks."""
    fsmn = real.get("encoder.encoders0.0.self_attn.fsmn_block.weight")
    if fsmn is None or fsmn.shape != (cfg.d_model, 1, cfg.kernel_size):
        return False

    def blocks(prefix: str) -> int:
        return len({k.split(".")[2] for k in real if k.startswith(prefix)})

    return blocks("encoder.encoders.") == cfg.num_blocks - 1 and blocks("encoder.tp_encoders.") == cfg.tp_blocks


def recover(path: str, work: Optional[str] = None):
    """-> (model, vocab, cmvn dict, size name) recovered from a SenseVoice ONNX export."""
    import onnx

    file, d = _find_file(path)
    try:
        src = onnx.load(file)
    except Exception as e:  # noqa: BLE001
        raise RecoverError(f"{file}: not an ONNX model: {e}") from e
    meta = {p.key: p.value for p in src.metadata_props}
    for k in ("vocab_size", "neg_mean", "inv_stddev"):
        if k not in meta:
            raise RecoverError(f"{file}: metadata {k!r} missing (not a SenseVoice export)")
    tokens = os.path.join(d, "tokens.txt")
    if not os.path.isfile(tokens):
        raise RecoverError(f"{d}: tokens.txt missing")
    pieces = read_tokens(tokens)
    if len(pieces) != int(meta["vocab_size"]):
        raise RecoverError(f"{tokens} has {len(pieces)} pieces, the model {meta['vocab_size']}")
    vocab = vocab_from_tokens(pieces)
    cmvn = {"neg_mean": [float(v) for v in meta["neg_mean"].split(",")],
            "inv_stddev": [float(v) for v in meta["inv_stddev"].split(",")]}
    real = _values(src)
    tried = []
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        for size in svm.SIZES:
            cfg = svm.config_for(size, vocab_size=len(pieces))
            if not _plausible(real, cfg):
                tried.append(size)  # cheap check first: exporting the small size takes minutes
                continue
            fp = os.path.join(tmp, f"{size}.onnx")
            marks = _fingerprint_export(cfg, vocab, meta, fp)
            marked = _initializers(onnx.load(fp))
            if any(k not in real or real[k].shape != v.shape for k, v in marked.items()):
                tried.append(size)
                continue
            mapping = _match(marked, marks)
            model = svm.build(cfg).eval()
            sd = model.state_dict()
            missing = [n for n in marks if n not in mapping]
            if missing:
                raise RecoverError(f"{file}: parameters not found in the graph: {missing[:5]}")
            for pname, (iname, transposed) in mapping.items():
                w = torch.from_numpy(np.array(real[iname]))
                sd[pname] = (w.T if transposed else w).contiguous().clone()
            model.load_state_dict(sd)
            # the same model, checked by exporting it again
            again = os.path.join(tmp, "again.onnx")
            export_onnx(model, again, meta)
            halves = _fp16_weights(src)
            if halves:  # stored as the source stored them (their values are float16-exact)
                from .export import store_fp16

                m2 = onnx.load(again)
                store_fp16(m2, only=halves)
                onnx.save(m2, again)
            diffs = compare_onnx(again, file)
            if diffs:
                raise RecoverError(f"{file}: the recovered model exports differently: {diffs[:3]}")
            return model, vocab, cmvn, size
    raise RecoverError(f"{file}: the graph matches none of the known sizes ({', '.join(tried)})")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.sensevoice.from_onnx", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a SenseVoice ONNX export directory (model.onnx + tokens.txt)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        model, vocab, cmvn, size = recover(a.model)
    except RecoverError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    os.makedirs(a.out, exist_ok=True)
    ck = {"model": model.state_dict(), "config": model.cfg.to_dict(), "tokens": list(vocab.pieces), "cmvn": cmvn,
          "recovered_from": os.path.abspath(a.model), "size": size}
    out = {"init": os.path.join(a.out, "init.pt"), "cmvn": os.path.join(a.out, "cmvn.json"), "size": size,
           "params": svm.count_params(model)}
    if vocab.sp is not None:
        ck["sp_model"] = vocab.sp_proto
        out["vocab"] = os.path.join(a.out, "bpe.model")
        with open(out["vocab"], "wb") as f:
            f.write(vocab.sp_proto)
    else:
        out["vocab"] = "char"
    torch.save(ck, out["init"])
    with open(out["cmvn"], "w") as f:
        json.dump(cmvn, f)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
