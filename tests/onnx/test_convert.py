"""`edgeinf convert`: ONNX -> NCNN through pnnx, checked and verified against ONNX Runtime."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

import edgeinf
from edgeinf import zoo
from edgeinf.cli import main
from edgeinf.convert import Tolerance, convert, parse_input_shapes
from edgeinf.formats.onnx import OnnxValue

pytest.importorskip("onnxruntime")
pytest.importorskip("ncnn")
from onnx_models import conv_model, photo_nchw, save  # noqa: E402

needs_pnnx = pytest.mark.skipif(
    importlib.util.find_spec("pnnx") is None, reason="pip install --no-deps pnnx (the ONNX -> ncnn converter)"
)
CLS = "ppocr_cls_mobile"
CLS_OUTPUT = "save_infer_model/scale_0.tmp_1"


@needs_pnnx
def test_cli_converts_the_real_classifier_and_reports_json(tmp_path, capsys):
    code = main(["convert", CLS, "--to", "ncnn", "-o", str(tmp_path), "--input-shape", "1,3,48,192", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["passed"] and report["schema"] == "edgeinf.convert/1"
    assert report["check"]["verdict"] == "YES" and report["converter"]["tool"] == "pnnx"
    (out,) = report["verification"]["outputs"]
    assert out["name"] == CLS_OUTPUT and out["top1_agreement"] == 1.0
    assert out["max_abs"] <= 1e-3 and out["cosine"] > 0.99999 and out["reference_max_abs"] > 0.5
    assert len(report["verification"]["samples"]) == 4 and "grace_hopper.jpg" in report["verification"]["samples"][0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ch_ppocr_mobile_v2.0_cls_mobile.bin",
        "ch_ppocr_mobile_v2.0_cls_mobile.param",
    ]


@needs_pnnx
def test_converted_model_agrees_with_onnxruntime_independently(tmp_path):
    """The files convert wrote, run by edgeinf's NCNN backend, against ORT on another photo size."""
    report = convert(CLS, "ncnn", tmp_path, input_shapes=["x:1,3,48,192"])
    assert report.passed, report.failures
    x = photo_nchw(48, 192)
    with edgeinf.load(CLS, num_threads=1) as original, edgeinf.load(report.files[0], fp16=False) as ncnn_model:
        expected = original.run(x)[CLS_OUTPUT]
        got = ncnn_model.run({"in0": x})["out0"]
    np.testing.assert_allclose(got.reshape(expected.shape), expected, atol=1e-4)


@needs_pnnx
def test_fp16_conversion_is_within_its_wider_tolerance_and_fails_a_strict_one(tmp_path):
    loose = convert(CLS, "ncnn", tmp_path / "a", input_shapes=["1,3,48,192"], fp16=True)
    assert loose.passed and loose.tolerance == Tolerance.default(True)
    assert 0 < loose.outputs[0].max_abs <= 5e-2
    code = main(
        ["convert", CLS, "--to", "ncnn", "-o", str(tmp_path / "b"), "--input-shape", "1,3,48,192", "--fp16"]
        + ["--atol", "1e-6"]
    )
    assert code == 1


@needs_pnnx
def test_an_op_pnnx_cannot_lower_fails_naming_the_onnx_node(tmp_path, capsys):
    model = conv_model("CumSum", opset=14, name="running_total")
    import onnx

    axis = onnx.numpy_helper.from_array(np.array(3, np.int64), "axis")
    model.graph.initializer.append(axis)
    model.graph.node[1].input.append("axis")
    path = save(model, tmp_path / "cumsum.onnx")
    code = main(["convert", str(path), "--to", "ncnn", "-o", str(tmp_path / "out")])
    text = capsys.readouterr().out
    assert code == 1 and "FAILED" in text
    assert "does not run on ncnn" in text and "node 1 running_total (CumSum)" in text
    report = convert(path, "ncnn", tmp_path / "again", verify=True)
    assert report.check["verdict"] == report.check["predicted_verdict"] == "NO"
    assert any("CumSum" in b for b in report.check["blockers"]) and not report.verified


@needs_pnnx
def test_verification_fails_when_outputs_differ(tmp_path, monkeypatch):
    """A converter that changed the numbers is caught: the converted weights are perturbed on load."""
    from edgeinf.backends import ncnn as ncnn_backend

    original = ncnn_backend.NCNNBackend.invoke

    def skewed(self):
        return [out + 0.01 for out in original(self)]

    monkeypatch.setattr(ncnn_backend.NCNNBackend, "invoke", skewed)
    report = convert(save(conv_model(), tmp_path / "m.onnx"), "ncnn", tmp_path / "out")
    assert not report.passed and report.verified
    assert report.outputs[0].max_abs == pytest.approx(0.01, rel=1e-3)
    assert "max abs error 0.01 > 0.001" in report.failures[0]


def test_tflite_needs_onnx2tf_and_says_so(tmp_path, capsys):
    if importlib.util.find_spec("onnx2tf") and importlib.util.find_spec("tensorflow"):
        pytest.skip("onnx2tf and TensorFlow are installed: tests/onnx/test_convert_tflite.py covers them")
    code = main(["convert", CLS, "--to", "tflite", "-o", str(tmp_path), "--input-shape", "1,3,48,192"])
    err = capsys.readouterr().err
    assert code == 2 and "needs onnx2tf and TensorFlow" in err and "--to ncnn" in err


def test_dynamic_input_needs_a_shape(tmp_path, capsys):
    assert main(["convert", CLS, "--to", "ncnn", "-o", str(tmp_path)]) == 2
    assert "input 'x' has dynamic shape [-1, 3, '?', '?']: give its size with --input-shape" in capsys.readouterr().err


def test_not_an_onnx_model(tmp_path, capsys):
    assert main(["convert", "face_detection_short_range", "--to", "ncnn", "-o", str(tmp_path)]) == 2
    assert "edgeinf converts ONNX models" in capsys.readouterr().err


@pytest.mark.parametrize(
    "texts, pattern",
    [
        (["1,3,48"], r"does not fit input 'x' of shape \[-1, 3, '\?', '\?'\]"),
        (["1,4,48,192"], "does not fit"),
        (["y:1,3,48,192"], r"the model's inputs are \['x'\]"),
        (["1,3,0,192"], "every dimension must be from 1 to"),
        (["1,3,99999999,192"], "every dimension must be from 1 to"),
        (["1;3"], "expected dimensions like"),
        (["1,3,48,192", "1,3,48,192"], r"the model's inputs are \['x'\]"),
    ],
)
def test_input_shape_errors(texts, pattern):
    inputs = (OnnxValue("x", "float32", (-1, 3, "?", "?")),)
    with pytest.raises(edgeinf.InputError, match=pattern):
        parse_input_shapes(texts, inputs)


def test_input_shapes_default_a_dynamic_batch_to_one():
    inputs = (OnnxValue("x", "float32", ("N", 3, 8, 8)), OnnxValue("k", "int64", (2,)))
    assert parse_input_shapes([], inputs) == {"x": (1, 3, 8, 8), "k": (2,)}
    assert parse_input_shapes(["x:2,3,8,8"], inputs)["x"] == (2, 3, 8, 8)


def test_cli_rejects_bad_tolerances(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["convert", str(zoo.path(CLS)), "--to", "ncnn", "-o", str(tmp_path), "--min-cosine", "1.5"])
    assert exit_info.value.code == 2 and "a cosine is at most 1" in capsys.readouterr().err


def test_input_shapes_of_scalars_and_fixed_inputs():
    inputs = (OnnxValue("t", "float32", ()), OnnxValue("x", "float32", (2, 3)))
    assert parse_input_shapes([], inputs) == {"t": (), "x": (2, 3)}
