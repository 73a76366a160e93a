"""The ONNX Runtime table agrees with ONNX Runtime: edgeinf.check's verdict per one-op model
equals whether a real InferenceSession loads and runs it."""

from __future__ import annotations

import numpy as np
import pytest

import edgeinf

ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_models import graph_model, save  # noqa: E402

TYPES = {
    "float": (TensorProto.FLOAT, np.float32),
    "double": (TensorProto.DOUBLE, np.float64),
    "float16": (TensorProto.FLOAT16, np.float16),
    "int8": (TensorProto.INT8, np.int8),
    "uint8": (TensorProto.UINT8, np.uint8),
    "int16": (TensorProto.INT16, np.int16),
    "int32": (TensorProto.INT32, np.int32),
}


def one_op(op: str, type_name: str, opset: int, **attrs):
    elem, dtype = TYPES[type_name]
    shape = [1, 2, 4, 4]
    inputs = [helper.make_tensor_value_info("x", elem, shape)]
    names, inits, out_shape = ["x"], [], shape
    if op in ("Add", "Mul", "Sub"):
        inputs.append(helper.make_tensor_value_info("b", elem, shape))
        names.append("b")
    elif op == "MatMul":
        inits.append(numpy_helper.from_array(np.ones((4, 3), dtype), "w"))
        names.append("w")
        out_shape = [1, 2, 4, 3]
    elif op == "Conv":
        inits.append(numpy_helper.from_array(np.ones((3, 2, 1, 1), dtype), "w"))
        names.append("w")
        out_shape = [1, 3, 4, 4]
    node = helper.make_node(op, names, ["y"], name=f"the_{op.lower()}", **attrs)
    model = graph_model([node], inputs, [helper.make_tensor_value_info("y", elem, out_shape)], inits, opset)
    feeds = {vi.name: np.ones([d.dim_value for d in vi.type.tensor_type.shape.dim], dtype) for vi in inputs}
    return model, feeds


def runs_on_onnxruntime(path, feeds) -> bool:
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        session.run(None, feeds)
    except Exception:  # noqa: BLE001 (NotImplemented, Fail, InvalidGraph: all mean "does not run")
        return False
    return True


CASES = [
    ("Relu", "float", 13),
    ("Relu", "int8", 14),
    ("Relu", "int8", 13),  # Relu-13's kernel takes only float and double
    ("Relu", "int16", 14),
    ("Relu", "float16", 14),  # no fp16 kernel: ORT casts around it
    ("Add", "uint8", 13),
    ("Add", "uint8", 14),
    ("Add", "int16", 14),
    ("MatMul", "float", 13),
    ("MatMul", "int8", 13),
    ("Conv", "float", 13),
    ("Conv", "double", 13),
    ("Conv", "float16", 13),
    ("Sigmoid", "double", 13),
    ("Sigmoid", "float16", 13),
    ("HardSwish", "float", 14),
    ("Gelu", "float", 20),
    ("Mish", "float", 18),
    ("Softplus", "double", 13),
]


@pytest.mark.parametrize("op, type_name, opset", CASES, ids=[f"{o}-{t}-opset{v}" for o, t, v in CASES])
def test_verdict_agrees_with_a_real_session(tmp_path, op, type_name, opset):
    model, feeds = one_op(op, type_name, opset)
    path = save(model, tmp_path / "m.onnx", ir_version=10 if opset >= 20 else 8)
    report = edgeinf.check(path, backend="onnxruntime")
    real = runs_on_onnxruntime(path, feeds)
    status = report.nodes[0].status["onnxruntime"]
    assert report.runnable("onnxruntime") == real, (status, real)
    if not real:
        assert f"the_{op.lower()}" in report.backends["onnxruntime"].blockers[0] and type_name in status.reason
        with pytest.raises(edgeinf.UnsupportedOperatorError, match=f"{op} v.* at node 0: no CPU kernel"):
            edgeinf.load(path)
    else:
        with edgeinf.load(path, num_threads=1) as model_:
            np.testing.assert_array_equal(model_.run(feeds)["y"], ort.InferenceSession(str(path)).run(None, feeds)[0])


def test_table_is_for_the_installed_onnxruntime():
    from edgeinf.compat import tables

    target = tables.resolve("onnxruntime")
    assert target.version == ort.__version__ or "no table for it" in (target.note or "")
    assert tables.resolve("onnxruntime", "onnxruntime==" + target.version).version == target.version
    assert f"onnxruntime {target.version}" in tables.all_targets()
