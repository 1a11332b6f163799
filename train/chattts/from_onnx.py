"""A PyTorch ChatTTS from one of Parley's ONNX exports (the fine-tune wizard's starting point).

    /usr/bin/python3 -m train.chattts.from_onnx --model ~/.local/share/parley/models/chattts-demo --out JOB/init

Fine-tuning a voice ("parley finetune train") needs weights PyTorch can train; the demo voice is
installed only as the ONNX bundle of train.chattts.export.  The architecture comes from the
bundle's config.json (its size), the weights from the graphs: every parameter (and the DVAE's
coef buffer) of that architecture is given unique random values and exported, which shows which
initializer holds which tensor, possibly transposed (Linear weights under MatMul); the weight-
normed heads, folded by the export into plain matrices (w_text, and w_code for the 4 code heads
together), are matched as their effective weights and restored as v = W, g = |W| per row. The
result is checked by exporting it again and comparing every graph with the bundle's
(train/onnxcompare.py).  Writes OUT/init.pt in train.chattts.train's checkpoint layout (model,
config, tokenizer, spk_stat, frontend, refine, size, code_defaults), which
``train.chattts.export --checkpoint`` and ``train.chattts.train … --init`` take, and prints
{"init": …, "size": …, "params": …}.  The DVAE's decoder half (not in any graph) stays random:
nothing exported uses it.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from ..onnxcompare import compare_onnx
from .config import config_for
from .export import GPT_FP16_META, export_graphs, fp16_gpt_model
from .model import ChatTTS, WeightNormLinear, count_params
from .tokenizer import WordPieceTokenizer


class RecoverError(RuntimeError):
    pass


GRAPHS = ("gpt", "decoder", "vocos", "dvae_encoder")


def _values(path: str, meta: Optional[Dict[str, str]] = None) -> Dict[str, np.ndarray]:
    """Initializers by name, plus names the exporter's deduplication made Identity nodes of;
    the model's metadata goes into meta when given (the file is read once)."""
    import onnx
    from onnx import numpy_helper

    try:
        m = onnx.load(path)
    except Exception as e:  # noqa: BLE001
        raise RecoverError(f"{path}: not a readable ONNX model: {e}") from e
    if meta is not None:
        meta.update({p.key: p.value for p in m.metadata_props})
    vals = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Identity" and n.input[0] in vals:
            vals[n.output[0]] = vals[n.input[0]]
        if n.op_type == "Cast" and n.input[0] in vals and vals[n.input[0]].dtype == np.float16:
            vals[n.output[0]] = vals[n.input[0]].astype(np.float32)  # export --fp16-gpt's weights
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    vals[n.output[0]] = numpy_helper.to_array(a.t)
    return vals


def _tensors(m: ChatTTS) -> Dict[str, torch.Tensor]:
    """Everything recovered: parameters and the DVAE coef buffers (not the weight-norm heads,
    which are matched as whole matrices)."""
    out = {n: p for n, p in m.named_parameters() if ".parametrizations.weight." not in n}
    for n, b in m.named_buffers():
        if n.endswith("coef"):
            out[n] = b
    return out


def _heads(m: ChatTTS) -> Dict[str, List[WeightNormLinear]]:
    """The folded matrices: w_text = head_textᵀ, w_code = [head_code…]ᵀ concatenated."""
    return {"w_text": [m.embed.head_text], "w_code": list(m.embed.head_code)}


def _fingerprint(m: ChatTTS) -> Dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(12345)
    marks = {}
    with torch.no_grad():
        for n, t in _tensors(m).items():
            t.copy_(torch.randn(t.shape, generator=g) * 0.5 + 1.0)
            marks[n] = t.detach().numpy().copy()
        for lst in _heads(m).values():
            for h in lst:
                p = h.parametrizations["weight"]
                p.original1.copy_(torch.randn(p.original1.shape, generator=g))
                p.original0.copy_(torch.rand(p.original0.shape, generator=g) + 0.5)
    return marks


def _find(want: np.ndarray, pool: Dict[str, np.ndarray]) -> Optional[Tuple[str, bool]]:
    for name, arr in pool.items():
        if arr.size != want.size or arr.dtype != want.dtype:
            continue
        if arr.shape == want.shape and np.array_equal(arr, want):
            return name, False
        if want.ndim == 2 and arr.shape == want.T.shape and np.array_equal(arr, want.T):
            return name, True
    return None


def read_spk_stat(path: str, hidden: int) -> torch.Tensor:
    raw = np.fromfile(path, dtype="<f4")
    if raw.size != 2 * hidden:
        raise RecoverError(f"{path}: {raw.size} values, want {2 * hidden} (std then mean)")
    return torch.from_numpy(raw.copy())


def recover(d: str, work: Optional[str] = None) -> Tuple[ChatTTS, dict]:
    """-> (model, checkpoint extras) recovered from the export in d."""
    cpath = os.path.join(d, "config.json")
    try:
        with open(cpath, encoding="utf-8") as f:
            conf = json.load(f)
    except (OSError, ValueError) as e:
        raise RecoverError(f"{cpath}: {e}") from e
    if conf.get("format") != "parley-chattts-onnx":
        raise RecoverError(f"{cpath}: not a Parley ChatTTS export (format {conf.get('format')!r})")
    files = conf.get("files") or {}
    missing = [g for g in GRAPHS + ("tokenizer", "spk_stat") if not files.get(g) or not os.path.isfile(os.path.join(d, files[g]))]
    if missing:
        raise RecoverError(f"{d}: the export lacks {', '.join(missing)} (a voice without its DVAE encoder cannot be fine-tuned)")
    with open(os.path.join(d, files["tokenizer"]), encoding="utf-8") as f:
        spec = json.load(f)
    tok = WordPieceTokenizer(spec)
    size = conf.get("size", "")
    try:
        cfg = config_for(size, num_text_tokens=tok.size)
    except ValueError as e:
        raise RecoverError(f"{cpath}: {e}") from e
    g = conf.get("gpt", {})
    for k, v in {"hidden": cfg.gpt.hidden, "layers": cfg.gpt.layers, "heads": cfg.gpt.heads,
                 "num_vq": cfg.gpt.num_vq, "num_audio_tokens": cfg.gpt.num_audio_tokens}.items():
        if g.get(k) != v:
            raise RecoverError(f"{cpath}: gpt.{k} is {g.get(k)}, size {size!r} has {v}")
    spk_id = tok.token_id("[spk_emb]")
    torch.manual_seed(0)
    model = ChatTTS(cfg).eval()
    fp = copy.deepcopy(model)
    marks = _fingerprint(fp)
    gpt_meta: Dict[str, str] = {}
    real = {name: _values(os.path.join(d, files[name]), gpt_meta if name == "gpt" else None) for name in GRAPHS}
    fp16 = gpt_meta.get(GPT_FP16_META) == "true"
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        export_graphs(fp, tmp, spk_id, with_dvae=True)
        marked = {name: _values(os.path.join(tmp, f"{name}.onnx")) for name in GRAPHS}
        tensors = _tensors(model)
        with torch.no_grad():
            found = set()
            for name in GRAPHS:
                for tname, val in marks.items():
                    if tname in found:
                        continue
                    hit = _find(val, marked[name])
                    if hit is None:
                        continue
                    iname, transposed = hit
                    if iname not in real[name] or real[name][iname].shape != marked[name][iname].shape:
                        raise RecoverError(f"{d}: {files[name]} has no {iname!r} of shape {marked[name][iname].shape} "
                                           f"(not size {size!r}?)")
                    w = torch.from_numpy(np.array(real[name][iname]))
                    tensors[tname].copy_(w.T if transposed else w)
                    found.add(tname)
                # the folded weight-norm heads
                for fold, heads in _heads(fp).items():
                    if name != "gpt":
                        continue
                    eff = torch.cat([h.weight.detach() for h in heads]).t().contiguous().numpy()
                    hit = _find(eff, marked[name])
                    if hit is None:
                        raise RecoverError(f"{d}: {files[name]}: the {fold} matrix was not found")
                    w = torch.from_numpy(np.array(real[name][hit[0]]))
                    w = (w.T if hit[1] else w).t()  # (num heads × out, in)
                    for i, h in enumerate(_heads(model)[fold]):
                        rows = w[i * h.parametrizations["weight"].original1.shape[0]:(i + 1) * h.parametrizations["weight"].original1.shape[0]]
                        p = h.parametrizations["weight"]
                        p.original1.copy_(rows)
                        p.original0.copy_(rows.norm(dim=1, keepdim=True))
        # tensors no graph uses: the DVAE decoder half and the GFSQ output projections (code → feature)
        unused = [t for t in marks if t not in found and not t.startswith(("dvae.decoder.", "dvae.out_conv.")) and ".project_out." not in t]
        if unused:
            raise RecoverError(f"{d}: tensors not found in the graphs: {unused[:5]}")
        # the same model, checked by exporting it again
        again = os.path.join(tmp, "again")
        os.makedirs(again)
        if fp16:  # export --fp16-gpt: the same rounding, so the check compares like with like
            export_graphs(fp16_gpt_model(model), again, spk_id, with_dvae=True, fp16_gpt=True)
        else:
            export_graphs(model, again, spk_id, with_dvae=True)
        for name in GRAPHS:
            diffs = compare_onnx(os.path.join(again, f"{name}.onnx"), os.path.join(d, files[name]))
            if diffs:
                raise RecoverError(f"{d}: the recovered model exports {name} differently: {diffs[:3]}")
    spk_stat = read_spk_stat(os.path.join(d, files["spk_stat"]), cfg.gpt.hidden)
    extra = {"config": cfg.to_dict(), "tokenizer": spec, "spk_stat": spk_stat, "frontend": conf.get("frontend", {"type": "wordpiece"}),
             "refine": bool((conf.get("refine") or {}).get("enabled", False)), "size": size,
             "code_defaults": conf.get("code"), "recovered_from": os.path.abspath(d),
             "neutral_streams": list((conf.get("dvae") or {}).get("neutral_streams") or [])}
    return model, extra


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.from_onnx", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a ChatTTS export directory made by train.chattts.export")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        model, extra = recover(a.model)
    except RecoverError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "init.pt")
    torch.save({"model": model.state_dict(), **extra}, path + ".partial")
    os.replace(path + ".partial", path)
    print(json.dumps({"init": path, "size": extra["size"], "params": count_params(model)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
