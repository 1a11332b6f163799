"""Regenerates the tiny ONNX models the gpu tests use:  /usr/bin/python3 gpu/testdata/make_models.py

scale.onnx: y = x * 2 + bias, x float32 (N, 3), ids int64 (N) passed through, with custom
metadata. Built with onnx.helper so it needs no PyTorch.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["N"])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
ids_out = helper.make_tensor_value_info("ids_out", TensorProto.INT64, ["N"])
two = numpy_helper.from_array(np.array([2.0], dtype=np.float32), "two")
bias = numpy_helper.from_array(np.array([0.5, -1.0, 3.0], dtype=np.float32), "bias")
graph = helper.make_graph(
    [
        helper.make_node("Mul", ["x", "two"], ["xm"]),
        helper.make_node("Add", ["xm", "bias"], ["y"]),
        helper.make_node("Identity", ["ids"], ["ids_out"]),
    ],
    "scale",
    [x, ids],
    [y, ids_out],
    initializer=[two, bias],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="parley-test")
model.ir_version = 8
for k, v in {"model_type": "parley_test", "vocab_size": "42", "scales": "1.5, -2,3e-1", "bad_int": "x7"}.items():
    entry = model.metadata_props.add()
    entry.key, entry.value = k, v
onnx.checker.check_model(model)
onnx.save(model, os.path.join(here, "scale.onnx"))
print("wrote", os.path.join(here, "scale.onnx"))
