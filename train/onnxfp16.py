"""Float16 weight storage for ONNX graphs that compute in float32.

A large float32 initializer W is stored as float16 and read through a Cast back to float32, so
the file halves and every kernel (and every CPU, GPU and int8 path built from the graph) still
computes in float32. To keep PyTorch's reference outputs exact, round the model's weights first
(round_fp16) and export: store_fp16 refuses a weight that float16 cannot hold exactly.
"""
from __future__ import annotations

import numpy as np
import torch

FP16_MIN_ELEMENTS = 1024


def round_fp16(model: torch.nn.Module, min_elements: int = FP16_MIN_ELEMENTS) -> torch.nn.Module:
    """Round every float tensor of at least min_elements values to float16 precision (in place,
    kept float32): the weights exactly as a --fp16-weights export stores them."""
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point() and t.numel() >= min_elements:
                t.copy_(t.half().float())
    return model


def store_fp16(m, min_elements: int = FP16_MIN_ELEMENTS, only=None) -> int:
    """Rewrite an ONNX model in place: float32 initializers of at least min_elements values
    (or, with ``only``, those named in it) become float16 initializers read through a Cast to
    float32.  Returns how many."""
    from onnx import TensorProto, helper, numpy_helper

    g = m.graph
    casts, n = [], 0
    for init in g.initializer:
        if init.data_type != TensorProto.FLOAT or (init.name not in only if only is not None
                                                   else int(np.prod(init.dims)) < min_elements):
            continue
        w = numpy_helper.to_array(init)
        h = w.astype(np.float16)
        if not np.array_equal(h.astype(np.float32), w):
            raise ValueError(f"initializer {init.name} is not float16-exact: round the model first (round_fp16)")
        name = init.name
        init.CopyFrom(numpy_helper.from_array(h, name + "_fp16"))
        casts.append(helper.make_node("Cast", [name + "_fp16"], [name], to=TensorProto.FLOAT, name=name + "_cast"))
        n += 1
    nodes = casts + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    return n
