"""The ONNX reader."""

from __future__ import annotations

import sys

import pytest

from edgeinf.errors import BackendUnavailableError, ModelFileError
from edgeinf.formats.onnx import read_onnx

onnx = pytest.importorskip("onnx")


@pytest.mark.parametrize("name", ["ppocr_cls_mobile", "ppocr_det_small"])
def test_real_models_agree_with_onnx(model_path, name):
    path = model_path(name)
    m = read_onnx(path)
    ref = onnx.load(str(path))
    assert [(n.op_type, tuple(n.input)) for n in ref.graph.node] == [(n.op_type, n.inputs) for n in m.nodes]
    assert m.opsets == {(o.domain or "ai.onnx"): o.version for o in ref.opset_import}
    assert all(n.since_version is not None and n.since_version <= m.opsets["ai.onnx"] for n in m.nodes)
    x = m.inputs[0]
    assert x.is_dynamic and x.shape[1] == 3
    init_bytes = sum(onnx.numpy_helper.to_array(t).nbytes for t in ref.graph.initializer)
    const_bytes = sum(
        onnx.numpy_helper.to_array(a.t).nbytes
        for n in ref.graph.node
        if n.op_type == "Constant"
        for a in n.attribute
        if a.type == onnx.AttributeProto.TENSOR
    )
    assert m.weight_bytes == init_bytes + const_bytes


def test_custom_domain_node_has_no_schema(tmp_path):
    h = onnx.helper
    node = h.make_node("MyOp", ["x"], ["y"], domain="my.domain")
    graph = h.make_graph(
        [node],
        "g",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 4])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("my.domain", 1)])
    path = tmp_path / "c.onnx"
    onnx.save(model, str(path))
    m = read_onnx(path)
    assert m.nodes[0].key == "onnx:my.domain:MyOp" and m.nodes[0].since_version is None
    assert m.inputs[0].shape == ("N", 4)


def test_corrupt_file(tmp_path, model_path):
    data = model_path("ppocr_cls_mobile").read_bytes()
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(data[: len(data) // 3])
    with pytest.raises(ModelFileError, match="bad.onnx"):
        read_onnx(bad)
    bad.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ModelFileError):
        read_onnx(bad)
    with pytest.raises(ModelFileError, match="no such file"):
        read_onnx(tmp_path / "none.onnx")


def test_missing_onnx_package(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(BackendUnavailableError, match=r"pip install edgeinf\[onnx\]"):
        read_onnx(tmp_path / "x.onnx")


def _one_initializer_model(dims, raw: bytes) -> bytes:
    h = onnx.helper
    w = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=dims, raw_data=raw)
    node = h.make_node("Add", ["x", "w"], ["y"])
    graph = h.make_graph(
        [node],
        "g",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])],
        [w],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]).SerializeToString()


def test_an_initializer_larger_than_its_data_is_refused_naming_the_file():
    data = _one_initializer_model([100_000, 100_000, 100_000], bytes(16))
    with pytest.raises(ModelFileError, match=r"^w\.onnx: .*4000000000000000 bytes"):
        read_onnx(data, name="/models/w.onnx")
    assert read_onnx(_one_initializer_model([4], bytes(16)), name="w.onnx").weight_bytes == 16
