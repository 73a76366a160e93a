"""Bad .onnx files give ModelFileError or UnsupportedOperatorError from load and check, never a crash."""

from __future__ import annotations

import numpy as np
import pytest

import edgeinf
from edgeinf import zoo

pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_models import conv_model, graph_model, onnx, save  # noqa: E402


@pytest.mark.parametrize("keep", [0.999, 0.6, 0.25, 0.01])
def test_truncated_real_model(tmp_path, keep):
    data = zoo.path("ppocr_cls_mobile").read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(edgeinf.ModelFileError, match="cut.onnx"):
        edgeinf.load(path)
    with pytest.raises(edgeinf.ModelFileError):
        edgeinf.check(path)


def test_op_that_does_not_exist_at_the_model_opset(tmp_path):
    # HardSwish arrived in opset 14: at opset 13 it is no op at all.
    path = save(conv_model("HardSwish", opset=13), tmp_path / "old.onnx")
    with pytest.raises(edgeinf.ModelFileError, match="HardSwish"):
        edgeinf.load(path)


def test_opset_newer_than_the_installed_onnxruntime(tmp_path):
    from edgeinf.compat import tables

    newest = tables.onnxruntime_kernels(tables.resolve("onnxruntime"))["max_opset"]["ai.onnx"]
    path = save(conv_model(opset=newest + 1), tmp_path / "future.onnx", ir_version=10)
    with pytest.raises(edgeinf.UnsupportedOperatorError, match=f"opset {newest + 1}; .* knows opsets up to {newest}"):
        edgeinf.load(path)
    # the table is right: ORT itself refuses the file (without the check, as edgeinf's error)
    with pytest.raises(edgeinf.ModelFileError, match="onnxruntime .* refused future.onnx"):
        edgeinf.load(path, check=False)


def test_custom_domain_op_is_unsupported_and_named(tmp_path):
    path = save(
        conv_model("FancyAct", name="my_fancy_act", domain="my.domain", extra_opsets=[("my.domain", 1)]),
        tmp_path / "custom.onnx",
    )
    report = edgeinf.check(path, backend="onnxruntime")
    assert report.verdict("onnxruntime") == "NO"
    assert "my_fancy_act" in report.backends["onnxruntime"].blockers[0]
    with pytest.raises(edgeinf.UnsupportedOperatorError, match="FancyAct") as err:
        edgeinf.load(path)
    assert err.value.report.verdict("onnxruntime") == "NO"
    # the verdict agrees with ONNX Runtime itself: the session refuses the model
    import onnxruntime as ort

    with pytest.raises(Exception, match="FancyAct"):
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    # without the check, ORT's refusal becomes the same kind of error
    with pytest.raises(edgeinf.UnsupportedOperatorError, match="FancyAct"):
        edgeinf.load(path, check=False)


def _external_model(tmp_path, location: str, length: int | None = None):
    weights = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    w = numpy_helper.from_array(weights, "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(length or weights.nbytes))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    model = graph_model(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [w],
    )
    return save(model, tmp_path / "ext.onnx"), weights


def test_external_data_present_runs(tmp_path):
    path, weights = _external_model(tmp_path, "weights.bin")
    (tmp_path / "weights.bin").write_bytes(weights.tobytes())
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    with edgeinf.load(path, num_threads=1) as model:
        y = model.run(x)["y"]
    assert model.parsed.external_data == ("weights.bin",)
    assert y.shape == (1, 4, 8, 8) and np.isclose(y[0, 0, 4, 4], (x[0, :, 3:6, 3:6] * weights[0]).sum(), atol=1e-4)


def test_external_data_missing(tmp_path):
    path, _ = _external_model(tmp_path, "weights.bin")
    with pytest.raises(edgeinf.ModelFileError, match="external data file 'weights.bin', missing"):
        edgeinf.load(path)
    with pytest.raises(edgeinf.ModelFileError, match="missing"):
        edgeinf.check(path)


def test_external_data_too_short(tmp_path):
    path, weights = _external_model(tmp_path, "weights.bin")
    (tmp_path / "weights.bin").write_bytes(weights.tobytes()[:100])
    with pytest.raises(edgeinf.ModelFileError, match="reads bytes 0..432 of 'weights.bin', which has 100 bytes"):
        edgeinf.load(path)


@pytest.mark.parametrize("location", ["../weights.bin", "/etc/passwd"])
def test_external_data_outside_the_model_folder(tmp_path, location):
    path, _ = _external_model(tmp_path, location)
    with pytest.raises(edgeinf.ModelFileError, match="outside the model's folder"):
        edgeinf.load(path)


def test_not_onnx_at_all(tmp_path):
    path = tmp_path / "noise.onnx"
    path.write_bytes(np.random.default_rng(3).bytes(2000))
    with pytest.raises(edgeinf.ModelFileError):
        edgeinf.load(path)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(edgeinf.ModelFileError, match="empty"):
        edgeinf.load(empty)


def test_graph_onnx_checks_but_onnxruntime_refuses(tmp_path):
    # Valid to onnx's checker (a Reshape to a shape computed at run time), but the
    # declared output is float16 while the graph makes float32: ORT refuses the types.
    model = graph_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 4])],
    )
    path = save(model, tmp_path / "types.onnx")
    try:
        onnx.checker.check_model(onnx.load(str(path)), full_check=False)
    except onnx.checker.ValidationError:
        pytest.skip("this onnx rejects the model itself")
    with pytest.raises((edgeinf.ModelFileError, edgeinf.UnsupportedOperatorError)):
        edgeinf.load(path, check=False)


def test_external_data_needs_the_model_file_itself(tmp_path):
    from edgeinf.formats.onnx import read_onnx

    path, weights = _external_model(tmp_path, "weights.bin")
    (tmp_path / "weights.bin").write_bytes(weights.tobytes())
    assert read_onnx(path.read_bytes(), name=path).external_data == ("weights.bin",)
    with pytest.raises(edgeinf.ModelFileError, match="only found from the model's own file"):
        read_onnx(path.read_bytes())  # bytes alone: nowhere to look
    with pytest.raises(edgeinf.ModelFileError, match="only found from the model's own file"):
        other = onnx.load(str(path), load_external_data=False)
        other.producer_name = "edited"
        read_onnx(other.SerializeToString(), name=path)  # bytes that are not the file's
