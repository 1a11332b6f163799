"""Dynamic int8 quantisation of MatMul weights, done on the ONNX graph itself.

Python has no onnxruntime here, so ``onnxruntime.quantization.quantize_dynamic``
is not available.  This does what it does for ``op_types_to_quantize=["MatMul"]``
with ``weight_type=QUInt8`` (the setting sherpa-onnx uses for SenseVoice):
every MatMul whose right operand is a constant 2-D float weight becomes

    DynamicQuantizeLinear(A) -> MatMulInteger(A_q, W_q, A_zp, W_zp) -> Cast -> Mul(A_scale*W_scale)

with W quantised per tensor to uint8 (asymmetric, zero included in the range).
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _quantize_weight(w: np.ndarray):
    lo = min(float(w.min()), 0.0)
    hi = max(float(w.max()), 0.0)
    scale = (hi - lo) / 255.0
    if scale == 0.0:
        scale = 1.0
    zp = int(np.clip(round(-lo / scale), 0, 255))
    q = np.clip(np.round(w / scale) + zp, 0, 255).astype(np.uint8)
    return q, np.float32(scale), np.uint8(zp)


def quantize_matmuls(model: onnx.ModelProto, min_elements: int = 256) -> int:
    """Rewrite ``model`` in place; returns the number of MatMuls quantised."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    qweights = {}
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
            q, s, z = _quantize_weight(numpy_helper.to_array(t))
            qn, sn, zn = wname + "_quantized", wname + "_scale", wname + "_zero_point"
            g.initializer.extend([numpy_helper.from_array(q, qn), numpy_helper.from_array(np.array(s), sn),
                                  numpy_helper.from_array(np.array(z), zn)])
            qweights[wname] = (qn, sn, zn)
        qn, sn, zn = qweights[wname]
        a = node.input[0]
        base = (node.name or node.output[0]).replace("/", "_") + "_q"
        aq, asc, azp = base + "_A_q", base + "_A_scale", base + "_A_zp"
        yi, yf, sc = base + "_Y_int", base + "_Y_f", base + "_scale"
        new_nodes += [
            helper.make_node("DynamicQuantizeLinear", [a], [aq, asc, azp], name=base + "_dql"),
            helper.make_node("MatMulInteger", [aq, qn, azp, zn], [yi], name=base + "_mmi"),
            helper.make_node("Cast", [yi], [yf], to=TensorProto.FLOAT, name=base + "_cast"),
            helper.make_node("Mul", [asc, sn], [sc], name=base + "_scale_mul"),
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
