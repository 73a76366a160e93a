"""edgeinf.load runs .onnx on ONNX Runtime, with outputs equal to a raw InferenceSession."""

from __future__ import annotations

import numpy as np
import pytest

import edgeinf
from edgeinf import zoo

ort = pytest.importorskip("onnxruntime")
from onnx_models import conv_model, photo_nchw, qdq_model, qoperator_model, save  # noqa: E402


def raw_session(path, threads: int = 1):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize(
    "name, shape",
    [("ppocr_cls_mobile", (1, 3, 48, 192)), ("ppocr_det_small", (1, 3, 160, 224))],
)
def test_outputs_equal_raw_onnxruntime_on_real_models(name, shape):
    x = photo_nchw(*shape[2:])
    session = raw_session(zoo.path(name))
    expected = session.run(None, {session.get_inputs()[0].name: x})
    with edgeinf.load(name, num_threads=1) as model:
        assert model.backend == "onnxruntime" and model.runtime.startswith("onnxruntime ")
        got = model.run(x)
    assert list(got) == [o.name for o in session.get_outputs()]
    for value, want in zip(got.values(), expected):
        np.testing.assert_array_equal(value, want)
    assert np.abs(expected[0]).max() > 0  # a real, non-trivial output


def test_specs_show_dynamic_dimensions_and_any_size_runs():
    with edgeinf.load("ppocr_cls_mobile", num_threads=1) as model:
        (spec,) = model.inputs
        assert spec.shape == (-1, 3, -1, -1) and spec.dtype == np.float32 and spec.layout.value == "NCHW"
        assert model.outputs[0].shape == (-1, 2)
        session = raw_session(zoo.path("ppocr_cls_mobile"))
        for shape in [(1, 3, 48, 192), (2, 3, 48, 100), (1, 3, 32, 64)]:
            x = np.ascontiguousarray(np.broadcast_to(photo_nchw(*shape[2:]), shape))
            got = model.run(x)["save_infer_model/scale_0.tmp_1"]
            assert got.shape == (shape[0], 2)
            np.testing.assert_array_equal(got, session.run(None, {"x": x})[0])
        assert model.metrics.snapshot().calls == 3
        with pytest.raises(edgeinf.InputError, match=r"expects shape \[-1, 3, -1, -1\]"):
            model.run(np.zeros((1, 4, 48, 192), np.float32))


def test_run_image_fills_the_nchw_input():
    from PIL import Image

    with Image.open(zoo.path("grace_hopper")) as image:
        rgb = np.asarray(image.convert("RGB"))
    with edgeinf.load("ppocr_cls_mobile", num_threads=1) as model:
        model.resize_input(0, (1, 3, 48, 192))
        got = model.run_image(rgb, color="rgb", mean=127.5, std=127.5)["save_infer_model/scale_0.tmp_1"]
        direct = model.run(photo_nchw(48, 192))["save_infer_model/scale_0.tmp_1"]
    # run_image resizes natively; the reference resizes with PIL: the class and scores agree closely
    assert got.argmax() == direct.argmax()
    np.testing.assert_allclose(got, direct, atol=0.05)


def test_threads_and_optimization_options(tmp_path):
    path = save(conv_model(), tmp_path / "m.onnx")
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    outputs = []
    for level in ("disable", "basic", "extended", "all"):
        with edgeinf.load(path, num_threads=2, optimization=level) as model:
            assert model.num_threads == 2 and model.details["optimization"] == level
            outputs.append(model.run(x)["y"])
    for out in outputs[1:]:
        np.testing.assert_allclose(out, outputs[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(edgeinf.InputError, match="optimization option must be one of"):
        edgeinf.load(path, optimization="fast")
    with pytest.raises(edgeinf.InputError, match=r"unknown option\(s\) \['fp16'\]"):
        edgeinf.load(path, fp16=True)


def test_qdq_model_specs_carry_quantization(tmp_path):
    path = save(qdq_model(), tmp_path / "qdq.onnx")
    x = np.arange(3 * 64, dtype=np.uint8).reshape(1, 3, 8, 8)
    with edgeinf.load(path, num_threads=1) as model:
        (spec_in,), (spec_out,) = model.inputs, model.outputs
        assert spec_in.dtype == np.uint8 and spec_in.quantization.scales == pytest.approx((0.02,))
        assert spec_in.quantization.zero_points == (128,)
        assert spec_out.quantization.scales == pytest.approx((0.01,)) and spec_out.quantization.zero_points == (3,)
        raw = model.run(x)["y"]
        real = model.run(x, dequantize=True)["y"]
    np.testing.assert_array_equal(raw, raw_session(path).run(None, {"x": x})[0])
    expected = 1 / (1 + np.exp(-0.02 * (x.astype(np.float32) - 128)))
    np.testing.assert_allclose(real, expected, atol=0.01 / 2 + 1e-6)


def test_input_buffer_then_invoke(tmp_path):
    path = save(conv_model(), tmp_path / "m.onnx")
    x = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)
    with edgeinf.load(path, num_threads=1) as model:
        expected = model.run(x)["y"]
        with model.exclusive():
            model.input_buffer()[...] = x
            got = model.invoke()["y"]
        np.testing.assert_array_equal(got, expected)
        x[...] = 0  # the backend kept its own copy of the earlier input
        np.testing.assert_array_equal(model.invoke()["y"], expected)


def test_without_onnxruntime_the_error_names_the_extra(monkeypatch):
    from edgeinf import backends

    real = backends.installed_package
    monkeypatch.setattr(backends, "installed_package", lambda name: None if name == "onnxruntime" else real(name))
    with pytest.raises(edgeinf.BackendUnavailableError, match=r"pip install 'edgeinf\[onnx\]'"):
        edgeinf.load("ppocr_cls_mobile")
    with pytest.raises(edgeinf.BackendUnavailableError, match=r"pip install 'edgeinf\[onnx\]'"):
        backends.create("onnxruntime", zoo.path("ppocr_cls_mobile"), num_threads=1)


def test_qoperator_model_takes_float_and_equals_raw_session(tmp_path):
    path = save(qoperator_model(), tmp_path / "qop.onnx")
    report = edgeinf.check(path, backend="onnxruntime")
    assert report.verdict("onnxruntime") == "YES" and any(n.op == "QLinearConv" for n in report.nodes)
    x = photo_nchw(8, 8)
    with edgeinf.load(path, num_threads=1) as model:
        assert model.inputs[0].dtype == np.float32 and model.inputs[0].quantization is None
        got = model.run(x)["y"]
    np.testing.assert_array_equal(got, raw_session(path).run(None, {"x": x})[0])
    assert np.unique(got).size > 4  # real quantized arithmetic, not a constant
