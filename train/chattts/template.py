"""Graph templates for converting an official ChatTTS release in Go, without Python.

    /usr/bin/python3 -m train.chattts.template --size official --out tts/chattts/convert/template/official

``parley models pull chattts`` downloads 2noise/ChatTTS's safetensors and turns them into the
engine's export set (train/chattts/CONTRACT.md) in Go. What Go cannot do is trace the PyTorch
model into ONNX, so this writes what the exporter makes of a model of the given size, minus its
weights, plus for every weight the recipe that makes it from the release's tensors:

- ``<part>.onnx``: the exported graph (``export.export_graphs``) with every initializer that
  comes from a released tensor emptied (its name, type and shape kept). Initializers that do not
  (rotary tables, mel filterbanks, windows, folded constants) stay as they are;
- ``gpt.int8.onnx``: the same for the int8 GPT (``export.write_int8_gpt``);
- ``recipes.json``: per graph, per emptied initializer: ``src`` (the tensors, as
  ``part:name`` in our model's names; the release's names map onto them as
  ``checkpoint._rename`` does), ``op`` (``copy``; ``wn``: torch's weight norm over dim 0,
  g · v / ‖v‖ per row, of (g, v) pairs, concatenated over rows when there are several),
  ``transpose`` (of the 2-D result), and for the int8 GPT ``quantize`` (per column, symmetric,
  ``bits``) and ``scale`` (that quantization's scales);
- ``tensors`` in recipes.json: every tensor a release of this size holds, with its shape (a
  release with a tensor missing, misshaped or unknown is refused, as ``checkpoint.load_part``
  refuses it);
- ``config.json``: the engine config the exporter writes for the size, for the converter to
  complete (tokens from the release's tokenizer, the model id).

How the recipes are found, so that none is guessed: every released tensor is filled with its
own random values, the graphs are exported, and each initializer is matched by its exact bytes
against the tensors, their transposes and their weight-normed forms. An initializer matching
nothing must be the same in a second export with other random values (a constant), or the
template is refused.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np
import onnx
import torch
from onnx import TensorProto, numpy_helper

from .checkpoint import _OPTIONAL
from .config import config_for
from .export import (engine_config, export_graphs, synthetic_spk_stat, tiny_tokenizer_spec, write_int8_gpt,
                     INT8_BITS)
from .model import ChatTTS, WeightNormLinear
from .tokenizer import WordPieceTokenizer, build_spec, english_pieces

PARTS = ("gpt", "embed", "decoder", "dvae", "vocos")
GRAPHS = ("gpt", "decoder", "vocos", "dvae_encoder")


def sourced(m: ChatTTS) -> List[str]:
    """The state-dict entries a release holds (not the buffers our modules recompute)."""
    out = []
    for k in m.state_dict():
        part, local = k.split(".", 1)
        if part in PARTS and not _OPTIONAL.search(local):
            out.append(k)
    return out


def fill(m: ChatTTS, seed: int) -> None:
    """Every released tensor gets its own random values (weight-norm g positive)."""
    g = torch.Generator().manual_seed(seed)
    sd = m.state_dict()
    with torch.no_grad():
        for k in sourced(m):
            t = sd[k]
            if not t.is_floating_point():
                continue
            v = torch.randn(t.shape, generator=g, dtype=torch.float32)
            if k.endswith("original0"):
                v = v.abs() + 0.5
            t.copy_(v)


def _key(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.float32).tobytes()).hexdigest()


def candidates(m: ChatTTS) -> Dict[str, dict]:
    """Byte hash -> recipe, for every released tensor, its transpose and the weight-normed
    weights (alone and the code heads concatenated, each also transposed)."""
    sd = m.state_dict()
    out: Dict[str, dict] = {}

    def add(arr: torch.Tensor, recipe: dict) -> None:
        a = arr.detach().float().numpy()
        out.setdefault(_key(a), {**recipe, "transpose": False})
        if a.ndim == 2:
            out.setdefault(_key(a.T), {**recipe, "transpose": True})

    for k in sourced(m):
        if sd[k].is_floating_point():
            add(sd[k], {"op": "copy", "src": [k]})
    wn: List[Tuple[str, WeightNormLinear]] = [(n, mod) for n, mod in m.named_modules() if isinstance(mod, WeightNormLinear)]
    with torch.no_grad():
        for n, mod in wn:
            pair = [f"{n}.parametrizations.weight.original0", f"{n}.parametrizations.weight.original1"]
            add(mod.weight, {"op": "wn", "src": pair})
        heads = [(n, mod) for n, mod in wn if n.startswith("embed.head_code.")]
        if heads:
            src = [s for n, _ in heads for s in (f"{n}.parametrizations.weight.original0",
                                                 f"{n}.parametrizations.weight.original1")]
            add(torch.cat([mod.weight for _, mod in heads]), {"op": "wn", "src": src})
    return out


def _export(m: ChatTTS, tok: WordPieceTokenizer, out: str, int8_bits: int) -> Dict[str, str]:
    files = export_graphs(m.float().eval(), out, tok.token_id("[spk_emb]"), with_dvae=m.dvae.encoder is not None,
                          int8_bits=int8_bits)
    return files


def _float_inits(path: str) -> Dict[str, np.ndarray]:
    mp = onnx.load(path)
    return {t.name: numpy_helper.to_array(t) for t in mp.graph.initializer}


def build(size: str, out: str, tok_spec: dict, int8_bits: int = INT8_BITS, seed: int = 1) -> dict:
    tok = WordPieceTokenizer(tok_spec)
    cfg = config_for(size, num_text_tokens=tok.size)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        os.makedirs(a), os.makedirs(b)
        torch.manual_seed(0)
        m = ChatTTS(cfg).eval()
        fill(m, seed)
        files = _export(m, tok, a, int8_bits)
        cands = candidates(m)
        fill(m, seed + 1)  # other values: what still matches the first export is a constant
        _export(m, tok, b, int8_bits)
        os.makedirs(out, exist_ok=True)
        recipes: Dict[str, dict] = {}
        for part in list(GRAPHS) + ["gpt_int8"]:
            if part not in files:
                continue
            name = files[part]
            pa, pb = os.path.join(a, name), os.path.join(b, name)
            other = _float_inits(pb)
            mp = onnx.load(pa)
            graph_recipes: Dict[str, dict] = {}
            float_recipes: Dict[str, dict] = {}  # for the int8 GPT: the float weight each quantized one came from
            if part == "gpt_int8":
                fp = {t.name: numpy_helper.to_array(t) for t in onnx.load(os.path.join(a, files["gpt"])).graph.initializer}
                for k, arr in fp.items():
                    if arr.dtype == np.float32 and _key(arr) in cands:
                        float_recipes[k] = cands[_key(arr)]
            for t in mp.graph.initializer:
                arr = numpy_helper.to_array(t)
                recipe = None
                if part == "gpt_int8" and t.name.endswith("_quantized") and t.name[: -len("_quantized")] in float_recipes:
                    recipe = {**float_recipes[t.name[: -len("_quantized")]], "quantize": int8_bits}
                elif part == "gpt_int8" and t.name.endswith("_scale") and t.name[: -len("_scale")] in float_recipes:
                    recipe = {**float_recipes[t.name[: -len("_scale")]], "scale": int8_bits}
                elif arr.dtype == np.float32 and _key(arr) in cands:
                    recipe = cands[_key(arr)]
                if recipe is None:
                    o = other.get(t.name)
                    if o is None or o.shape != arr.shape or not np.array_equal(o, arr):
                        raise SystemExit(f"{name}: initializer {t.name} {arr.dtype}{list(arr.shape)} changes with the "
                                         "weights but matches no recipe")
                    continue
                graph_recipes[t.name] = {**recipe, "dtype": "int8" if "quantize" in recipe else "float32",
                                         "shape": [int(d) for d in t.dims]}
                t.ClearField("raw_data")
                t.ClearField("float_data")
                t.ClearField("int32_data")
            onnx.save(mp, os.path.join(out, name))
            recipes[name] = graph_recipes
            results[name] = {"emptied": len(graph_recipes), "kept": len(mp.graph.initializer) - len(graph_recipes),
                             "bytes": os.path.getsize(os.path.join(out, name))}
        files.update(tokenizer="tokenizer.json", spk_stat="spk_stat.bin")
        conf = engine_config(m, tok, files, size=size, comment="2noise/ChatTTS converted by parley (Go)",
                             frontend={"type": "wordpiece"}, refine=True)
        with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
            json.dump(conf, f, indent=1, ensure_ascii=False)
            f.write("\n")
    sd = m.state_dict()
    tensors = {k: [int(d) for d in sd[k].shape] for k in sourced(m)}
    with open(os.path.join(out, "recipes.json"), "w", encoding="utf-8") as f:
        json.dump({"size": size, "int8_bits": int8_bits, "tensors": tensors, "graphs": recipes}, f, indent=1)
        f.write("\n")
    return results


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m train.chattts.template", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="official", choices=["official", "tiny"])
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    if a.size == "official":  # the official ids of the control tokens, as export --random official
        base = english_pieces()
        spec = build_spec(base + [f"##w{i}" for i in range(21128 - 5 - len(base))], lowercase=True, strip_accents=None)
    else:
        spec = tiny_tokenizer_spec()
    if os.path.isdir(a.out):
        shutil.rmtree(a.out)
    print(json.dumps(build(a.size, a.out, spec), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
