"""Small ONNX models built in the tests, and a photo as model input."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def save(model, path, ir_version: int = 8):
    model.ir_version = ir_version
    onnx.save(model, str(path))
    return path


def graph_model(nodes, inputs, outputs, initializers=(), opset: int = 13, extra_opsets=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, v) for d, v in extra_opsets)]
    return helper.make_model(graph, opset_imports=opsets)


def x_to_y_model(nodes, x: tuple, y: tuple, initializers=(), opset: int = 13, extra_opsets=()):
    """graph_model with one input "x" and one output "y", each given as (element type, shape)."""
    return graph_model(
        nodes,
        [helper.make_tensor_value_info("x", *x)],
        [helper.make_tensor_value_info("y", *y)],
        initializers,
        opset,
        extra_opsets,
    )


def conv_model(op: str = "Relu", opset: int = 13, name: str = "act", domain: str = "", extra_opsets=()):
    """x [1,3,16,16] -> Conv 3x3 (4 channels) -> ``op`` -> y."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="stem_conv", pads=[1, 1, 1, 1]),
        helper.make_node(op, ["c"], ["y"], name=name, domain=domain),
    ]
    x, y = (TensorProto.FLOAT, [1, 3, 16, 16]), (TensorProto.FLOAT, [1, 4, 16, 16])
    return x_to_y_model(nodes, x, y, [w], opset, extra_opsets)


def qdq_model(scale_in=0.02, zero_in=128, scale_out=0.01, zero_out=3):
    """uint8 x -> DequantizeLinear -> Sigmoid -> QuantizeLinear -> uint8 y (a QDQ model's edges)."""
    inits = [
        numpy_helper.from_array(np.array(scale_in, np.float32), "s_in"),
        numpy_helper.from_array(np.array(zero_in, np.uint8), "z_in"),
        numpy_helper.from_array(np.array(scale_out, np.float32), "s_out"),
        numpy_helper.from_array(np.array(zero_out, np.uint8), "z_out"),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s_in", "z_in"], ["xf"]),
        helper.make_node("Sigmoid", ["xf"], ["yf"]),
        helper.make_node("QuantizeLinear", ["yf", "s_out", "z_out"], ["y"]),
    ]
    return x_to_y_model(nodes, (TensorProto.UINT8, [1, 3, 8, 8]), (TensorProto.UINT8, [1, 3, 8, 8]), inits)


def photo_nchw(height: int, width: int) -> np.ndarray:
    """The manifest's portrait resized to height x width, NCHW float32 in [-1, 1]."""
    from PIL import Image

    from edgeinf import zoo

    with Image.open(zoo.path("grace_hopper")) as image:
        rgb = np.asarray(image.convert("RGB").resize((width, height), Image.BILINEAR), dtype=np.float32)
    return np.ascontiguousarray(rgb.transpose(2, 0, 1)[np.newaxis] / 127.5 - 1)


def qoperator_model():
    """float x -> QuantizeLinear -> QLinearConv (uint8, per-tensor) -> DequantizeLinear -> float y."""
    rng = np.random.default_rng(7)
    consts = {
        "x_scale": np.array(0.02, np.float32),
        "x_zero": np.array(128, np.uint8),
        "w": rng.integers(0, 256, (4, 3, 3, 3)).astype(np.uint8),
        "w_scale": np.array(0.01, np.float32),
        "w_zero": np.array(120, np.uint8),
        "y_scale": np.array(0.05, np.float32),
        "y_zero": np.array(100, np.uint8),
    }
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"]),
        helper.make_node(
            "QLinearConv",
            ["xq", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero"],
            ["yq"],
            pads=[1, 1, 1, 1],
        ),
        helper.make_node("DequantizeLinear", ["yq", "y_scale", "y_zero"], ["y"]),
    ]
    return x_to_y_model(nodes, (TensorProto.FLOAT, [1, 3, 8, 8]), (TensorProto.FLOAT, [1, 4, 8, 8]), inits)
