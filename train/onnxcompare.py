"""Compare regenerated model files with committed ones, as far as CPUs agree.

PyTorch and OpenBLAS pick kernels per instruction set (AVX2, AVX-512, NEON), so the same
seed gives float weights and logits that differ in the last bits from one CPU to another.
A committed model is still *current* when everything that is not a float computation is
identical (graph structure, attributes, names, metadata, integer tensors, vocabularies) and
the floats agree within a tolerance scaled to each tensor. A real change to the model — a
LayerNorm epsilon, a scaled positional encoding, another layer — moves a constant or the
graph itself and is reported.

    diffs = compare_onnx("new/model.onnx", "testdata/.../model.onnx")   # [] when current
    diffs = compare_reference(new_json, old_json)

Each function returns a list of human-readable differences (empty when they agree).
"""
from __future__ import annotations

import math
from typing import Any, List

import numpy as np

# Float tensors (weights, folded constants): max |a-b| <= FLOAT_TOL * max|b| for each tensor.
# Cross-CPU differences are a few ULPs (~1e-7 relative); a real change is far larger.
FLOAT_TOL = 1e-5
# Quantised (8-bit) tensors: rounding on a boundary may flip by one step on a few elements.
QUANT_FRACTION = 0.01
# reference.json logits: |a-b| <= LOGIT_TOL * max(1, max|logit|) per case.
LOGIT_TOL = 1e-5


def compare_arrays(name: str, got: np.ndarray, want: np.ndarray, *, tol: float = FLOAT_TOL) -> List[str]:
    """Differences between two tensors: dtype and shape exactly, values as the dtype allows."""
    if got.dtype != want.dtype:
        return [f"{name}: dtype {got.dtype}, want {want.dtype}"]
    if got.shape != want.shape:
        return [f"{name}: shape {list(got.shape)}, want {list(want.shape)}"]
    if got.size == 0:
        return []
    if np.issubdtype(want.dtype, np.floating):
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        if not (np.isfinite(g) == np.isfinite(w)).all():
            return [f"{name}: non-finite values differ"]
        fin = np.isfinite(w)
        if not (g[~fin] == w[~fin]).all():
            return [f"{name}: inf/nan values differ"]
        if not fin.any():
            return []
        scale = float(np.abs(w[fin]).max())
        err = float(np.abs(g[fin] - w[fin]).max())
        if err > tol * scale or (scale == 0.0 and err > 0.0):
            return [f"{name}: max |diff| {err:.3g} exceeds {tol:g} x max|value| ({scale:.3g})"]
        return []
    if want.dtype in (np.uint8, np.int8):
        d = np.abs(got.astype(np.int32) - want.astype(np.int32))
        off = int((d > 0).sum())
        allowed = max(1, int(math.ceil(QUANT_FRACTION * want.size)))
        if int(d.max()) > 1 or off > allowed:
            return [f"{name}: {off} of {want.size} quantised values differ (max step {int(d.max())}); "
                    f"at most {allowed} may differ by one"]
        return []
    if not np.array_equal(got, want):
        return [f"{name}: integer values differ"]
    return []


def _tensor(t) -> np.ndarray:
    from onnx import numpy_helper

    return numpy_helper.to_array(t)


def _attr_value(a):
    """An attribute as something comparable with ==, tensors kept as arrays."""
    from onnx import AttributeProto, helper

    if a.type == AttributeProto.TENSOR:
        return _tensor(a.t)
    if a.type == AttributeProto.TENSORS:
        return [_tensor(t) for t in a.tensors]
    if a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
        return str(helper.get_attribute_value(a))
    return helper.get_attribute_value(a)


def _compare_graph(prefix: str, g, w) -> List[str]:
    diffs: List[str] = []
    for kind in ("input", "output"):
        gi = [str(v).strip() for v in getattr(g, kind)]
        wi = [str(v).strip() for v in getattr(w, kind)]
        if gi != wi:
            diffs.append(f"{prefix}graph {kind}s differ: {[v.name for v in getattr(g, kind)]} "
                         f"vs {[v.name for v in getattr(w, kind)]} (or their types/shapes)")
    if len(g.node) != len(w.node):
        diffs.append(f"{prefix}{len(g.node)} nodes, want {len(w.node)}")
    for i, (a, b) in enumerate(zip(g.node, w.node)):
        where = f"{prefix}node {i} ({b.op_type} {b.name!r})"
        if (a.op_type, a.domain, a.name) != (b.op_type, b.domain, b.name):
            diffs.append(f"{where}: is {a.op_type} {a.name!r}")
            continue
        if list(a.input) != list(b.input) or list(a.output) != list(b.output):
            diffs.append(f"{where}: inputs/outputs {list(a.input)}->{list(a.output)}, "
                         f"want {list(b.input)}->{list(b.output)}")
        an = {x.name: x for x in a.attribute}
        bn = {x.name: x for x in b.attribute}
        if sorted(an) != sorted(bn):
            diffs.append(f"{where}: attributes {sorted(an)}, want {sorted(bn)}")
            continue
        for k in sorted(bn):
            va, vb = _attr_value(an[k]), _attr_value(bn[k])
            if isinstance(vb, np.ndarray):
                diffs += compare_arrays(f"{where} attribute {k}", va, vb)
            elif isinstance(vb, list) and vb and isinstance(vb[0], np.ndarray):
                for j, (x, y) in enumerate(zip(va, vb)):
                    diffs += compare_arrays(f"{where} attribute {k}[{j}]", x, y)
            elif va != vb:
                diffs.append(f"{where}: attribute {k} = {va!r}, want {vb!r}")
    gi = {t.name: t for t in g.initializer}
    wi = {t.name: t for t in w.initializer}
    if [t.name for t in g.initializer] != [t.name for t in w.initializer]:
        extra, missing = sorted(set(gi) - set(wi)), sorted(set(wi) - set(gi))
        diffs.append(f"{prefix}initializers differ (extra {extra}, missing {missing}, or order)")
    for name in [t.name for t in w.initializer if t.name in gi]:
        diffs += compare_arrays(f"{prefix}initializer {name}", _tensor(gi[name]), _tensor(wi[name]))
    return diffs


def compare_onnx(got_path: str, want_path: str) -> List[str]:
    """Differences between two ONNX files that are not explained by float rounding."""
    import onnx

    g, w = onnx.load(got_path), onnx.load(want_path)
    diffs: List[str] = []
    for field in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
        if getattr(g, field) != getattr(w, field):
            diffs.append(f"{field}: {getattr(g, field)!r}, want {getattr(w, field)!r}")
    go = sorted((o.domain, o.version) for o in g.opset_import)
    wo = sorted((o.domain, o.version) for o in w.opset_import)
    if go != wo:
        diffs.append(f"opset imports {go}, want {wo}")
    gm = {p.key: p.value for p in g.metadata_props}
    wm = {p.key: p.value for p in w.metadata_props}
    for k in sorted(set(gm) | set(wm)):
        if gm.get(k) != wm.get(k):
            diffs.append(f"metadata {k}: {gm.get(k, '<missing>')[:60]!r}, want {wm.get(k, '<missing>')[:60]!r}")
    return diffs + _compare_graph("", g.graph, w.graph)


def compare_reference(got: Any, want: Any, path: str = "", *, logit_tol: float = LOGIT_TOL) -> List[str]:
    """Differences between two reference.json documents.

    Lists of floats are compared as tensors: a list named like logits within
    logit_tol x max(1, max|value|), other float lists (inputs, stats) within FLOAT_TOL
    of their scale; everything else exactly.
    """
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path or '/'}: not an object"]
        diffs = []
        if sorted(got) != sorted(want):
            diffs.append(f"{path or '/'}: keys {sorted(got)}, want {sorted(want)}")
        for k in want:
            if k in got:
                diffs += compare_reference(got[k], want[k], f"{path}/{k}", logit_tol=logit_tol)
        return diffs
    if isinstance(want, list) and want and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in want) \
            and any(isinstance(v, float) for v in want):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{path}: length {len(got) if isinstance(got, list) else '?'}, want {len(want)}"]
        g = np.asarray(got, dtype=np.float64)
        w = np.asarray(want, dtype=np.float64)
        if "logit" in path.rsplit("/", 1)[-1]:
            bound = logit_tol * max(1.0, float(np.abs(w).max()))
            err = float(np.abs(g - w).max())
            return [] if err <= bound else [f"{path}: max |diff| {err:.3g} exceeds {bound:.3g}"]
        return compare_arrays(path, g, w)
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{path}: length {len(got) if isinstance(got, list) else '?'}, want {len(want)}"]
        diffs = []
        for i, (a, b) in enumerate(zip(got, want)):
            diffs += compare_reference(a, b, f"{path}[{i}]", logit_tol=logit_tol)
        return diffs
    if isinstance(want, float) and isinstance(got, (int, float)):
        return [] if abs(got - want) <= FLOAT_TOL * max(1.0, abs(want)) else [f"{path}: {got!r}, want {want!r}"]
    return [] if got == want else [f"{path}: {got!r}, want {want!r}"]
