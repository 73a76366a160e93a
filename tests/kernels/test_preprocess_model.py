"""run_image: a frame converted straight into a real model's input buffer, TFLite and NCNN."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

import edgeinf
from edgeinf import preprocess
from edgeinf.backends.base import Backend
from edgeinf.types import Layout, TensorSpec


@pytest.fixture(scope="module")
def photo(model_path):
    return cv2.imread(str(model_path("grace_hopper")))


def test_tflite_run_image_equals_run_on_the_converted_tensor(model_path, photo):
    pytest.importorskip("ai_edge_litert")
    with edgeinf.load(model_path("face_detection_short_range"), backend="tflite") as model:
        options = dict(mean=127.5, std=127.5, letterbox=True)
        got = preprocess.run_image(model, photo, color="bgr", **options)
        pipe = preprocess.Pipeline.for_model(model, photo, "bgr", **options)
        tensor = pipe.new_output()
        pipe(photo, tensor)
        want = model.run(tensor)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        # the short-range face detector finds Grace Hopper's face: some anchor's logit is positive
        assert got["classificators"].max() > 0
        lb = got.letterbox
        assert lb == pipe(photo, tensor)
        assert lb.content_h == 128 and lb.content_w == 109  # 512x600 kept its aspect ratio
        assert got.roi == (0, 0, photo.shape[1], photo.shape[0])
        cropped = model.run_image(photo, color="bgr", roi=(100, 50, 300, 200), **options)
        assert cropped.roi == (100, 50, 300, 200) and cropped.letterbox.content_h == 85


def test_tflite_model_method_and_pipeline_cache(model_path, photo):
    pytest.importorskip("ai_edge_litert")
    with edgeinf.load(model_path("face_detection_short_range"), backend="tflite") as model:
        a = model.run_image(photo, color="bgr", mean=127.5, std=127.5)
        first = preprocess.Pipeline.for_model(model, photo, "bgr", mean=127.5, std=127.5)
        b = model.run_image(photo, color="bgr", mean=127.5, std=127.5)
        assert preprocess.Pipeline.for_model(model, photo, "bgr", mean=127.5, std=127.5) is first
        np.testing.assert_array_equal(a["regressors"], b["regressors"])
        small = np.ascontiguousarray(photo[:300, :256])
        model.run_image(small, color="bgr", mean=127.5, std=127.5)
        assert preprocess.Pipeline.for_model(model, small, "bgr", mean=127.5, std=127.5) is not first


def test_ncnn_dynamic_input_run_image(model_path, photo):
    pytest.importorskip("ncnn")
    with edgeinf.load(model_path("realesr_animevideov3_x2"), backend="ncnn") as model:
        got = model.run_image(photo, color="bgr", size=(24, 16), std=255.0)
        (name,) = got
        assert got[name].shape == (1, 3, 32, 48)  # the x2 upscaler doubles the 24x16 input
        pipe = preprocess.Pipeline.for_input(model.inputs[0], color="bgr", std=255.0)
        tensor = pipe.new_output()
        pipe(photo, tensor)
        np.testing.assert_array_equal(model.run(tensor)[name], got[name])


class FakeBackend(Backend):
    """One int8 NCHW input whose buffer the test reads back at invoke."""

    name = runtime = "fake"

    def __init__(self, spec):
        super().__init__()
        self.inputs = (spec,)
        self.outputs = (TensorSpec("out", (1,), np.dtype(np.int64), Layout.OTHER),)
        self.buffer = np.zeros(spec.shape, spec.dtype)
        self.seen = []

    def set_input(self, i, array):
        self.buffer[...] = array

    def input_buffer(self, i):
        return self.buffer

    def invoke(self):
        self.seen.append(self.buffer.copy())
        return [self.buffer.sum(keepdims=True).reshape(1)]

    def resize_input(self, i, shape):
        raise AssertionError("a static input is never resized")


def test_run_image_writes_the_input_buffer(rng):
    from preprocess_helpers import make_frame, spec_for

    spec = spec_for(20, 10, 3, "int8", "NCHW", scale=1 / 128, zero_point=0)
    backend = FakeBackend(spec)
    model = edgeinf.Model(backend, Path("fake.tflite"))
    frame = make_frame(rng, "nv21", 40, 20)
    got = preprocess.run_image(model, frame, color="nv21", mean=128.0, std=128.0)
    want = preprocess.Pipeline.for_input(spec, color="nv21", mean=128.0, std=128.0)
    out = want.new_output()
    assert got.letterbox == want(frame, out)
    np.testing.assert_array_equal(backend.seen[-1], out)


def test_a_float_input_without_stated_normalization_needs_mean_and_std(model_path, photo):
    pytest.importorskip("ai_edge_litert")
    with edgeinf.load(model_path("face_detection_short_range"), num_threads=1) as model:
        with pytest.raises(edgeinf.InputError, match=r"float32 .* states no normalization: pass mean= and std="):
            model.run_image(photo, color="bgr")
        with pytest.raises(edgeinf.InputError, match="mean= and std="):
            preprocess.Pipeline.for_model(model, photo, "bgr", letterbox=True)
        raw = model.run_image(photo, color="bgr", mean=0.0, std=1.0)  # raw 0..255 levels, asked for explicitly
        assert raw["classificators"].shape == (1, 896, 1)
