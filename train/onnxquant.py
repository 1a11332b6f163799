"""Dynamic int8 quantisation of MatMul weights, done on the ONNX graph itself.

Python has no onnxruntime here, so ``onnxruntime.quantization.quantize_dynamic`` is not
available. This does what it does for ``op_types_to_quantize=["MatMul"]``: every MatMul whose
right operand is a constant 2-D float weight becomes

    DynamicQuantizeLinear(A) -> MatMulInteger(A_q, W_q, A_zp[, W_zp]) -> Cast -> Mul(A_scale*W_scale)

which ONNX Runtime fuses into one DynamicQuantizeMatMul kernel. Two weight layouts:

- ``per_channel=False`` (the default; sherpa-onnx's setting for SenseVoice, ``weight_type=QUInt8``):
  W quantised per tensor to uint8, asymmetric, zero inside the range;
- ``per_channel=True``: W quantised per output column to int8, symmetric (no zero point), the
  scales a float vector ``{W}_scale`` of length N. With ``reduce_range`` the weights keep to
  7 bits (-64..63): AVX2 machines without VNNI add uint8×int8 products in int16 pairs, which
  saturate at full range (ONNX Runtime's own advice for those CPUs).

An activation feeding several MatMuls (a layer's q, k and v) is quantised once.
"""
from __future__ import annotations

from typing import Dict, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QUANTIZED_SUFFIX = "_quantized"
SCALE_SUFFIX = "_scale"


def _quantize_weight(w: np.ndarray):
    lo = min(float(w.min()), 0.0)
    hi = max(float(w.max()), 0.0)
    scale = (hi - lo) / 255.0
    if scale == 0.0:
        scale = 1.0
    zp = int(np.clip(round(-lo / scale), 0, 255))
    q = np.clip(np.round(w / scale) + zp, 0, 255).astype(np.uint8)
    return q, np.float32(scale), np.uint8(zp)


def quantize_per_channel(w: np.ndarray, reduce_range: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """(K,N) float -> (K,N) int8 and (N,) float32 scales, symmetric per column."""
    qmax = 63 if reduce_range else 127
    amax = np.abs(w).max(axis=0).astype(np.float64)
    scale = np.where(amax > 0, amax / qmax, 1.0)
    q = np.clip(np.round(w / scale), -qmax - (1 if reduce_range else 0), qmax).astype(np.int8)
    return q, scale.astype(np.float32)


def quantize_matmuls(model: onnx.ModelProto, min_elements: int = 256, *, per_channel: bool = False,
                     reduce_range: bool = False) -> int:
    """Rewrite ``model`` in place; returns the number of MatMuls quantised."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    qweights: Dict[str, tuple] = {}
    activations: Dict[str, tuple] = {}  # per_channel: one DynamicQuantizeLinear per input tensor
    new_nodes = []
    count = 0
    for node in g.node:
        if node.op_type != "MatMul" or node.input[1] not in inits:
            new_nodes.append(node)
            continue
        t = inits[node.input[1]]
        if t.data_type != TensorProto.FLOAT or len(t.dims) != 2 or int(np.prod(t.dims)) < min_elements:
            new_nodes.append(node)
            continue
        wname = node.input[1]
        if wname not in qweights:
            w = numpy_helper.to_array(t)
            qn, sn = wname + QUANTIZED_SUFFIX, wname + SCALE_SUFFIX
            if per_channel:
                q, s = quantize_per_channel(w, reduce_range)
                g.initializer.extend([numpy_helper.from_array(q, qn), numpy_helper.from_array(s, sn)])
                qweights[wname] = (qn, sn)
            else:
                q, s, z = _quantize_weight(w)
                zn = wname + "_zero_point"
                g.initializer.extend([numpy_helper.from_array(q, qn), numpy_helper.from_array(np.array(s), sn),
                                      numpy_helper.from_array(np.array(z), zn)])
                qweights[wname] = (qn, sn, zn)
        a = node.input[0]
        base = (node.name or node.output[0]).replace("/", "_") + "_q"
        if per_channel:
            if a not in activations:
                ab = a.replace("/", "_").replace(":", "_") + "_dq"
                activations[a] = (ab + "_A_q", ab + "_A_scale", ab + "_A_zp")
                new_nodes.append(helper.make_node("DynamicQuantizeLinear", [a], list(activations[a]), name=ab + "_dql"))
            aq, asc, azp = activations[a]
            mmi_inputs = [aq, qweights[wname][0], azp]
        else:
            aq, asc, azp = base + "_A_q", base + "_A_scale", base + "_A_zp"
            new_nodes.append(helper.make_node("DynamicQuantizeLinear", [a], [aq, asc, azp], name=base + "_dql"))
            mmi_inputs = [aq, qweights[wname][0], azp, qweights[wname][2]]
        yi, yf, sc = base + "_Y_int", base + "_Y_f", base + "_scale"
        new_nodes += [
            helper.make_node("MatMulInteger", mmi_inputs, [yi], name=base + "_mmi"),
            helper.make_node("Cast", [yi], [yf], to=TensorProto.FLOAT, name=base + "_cast"),
            helper.make_node("Mul", [asc, qweights[wname][1]], [sc], name=base + "_scale_mul"),
            helper.make_node("Mul", [yf, sc], [node.output[0]], name=base + "_out"),
        ]
        count += 1
    del g.node[:]
    g.node.extend(new_nodes)
    used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    return count
