"""What load() and a Model accept: options, names, input memory, dynamic sizes, channels, bounds."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import edgeinf
from edgeinf import zoo
from edgeinf.errors import InputError
from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model
from edgeinf.model import MAX_THREADS

FACE = "face_detection_short_range"
SR = "realesr_animevideov3_x2"


@pytest.fixture(scope="module")
def photo(model_path):
    return cv2.imread(str(model_path("grace_hopper")))


# -- load() -------------------------------------------------------------------------------


def test_an_unknown_option_is_an_input_error_listing_the_accepted_ones(model_path):
    with pytest.raises(edgeinf.InputError, match=r"unknown option\(s\) \['xnnpak'\].*'xnnpack'"):
        edgeinf.load(model_path(FACE), xnnpak=False)
    pytest.importorskip("ncnn")
    with pytest.raises(edgeinf.InputError, match=r"'fp16', 'light_mode', 'vulkan'"):
        edgeinf.load(model_path(SR), xnnpack=False)


def test_a_bad_option_value_is_an_input_error(model_path):
    with pytest.raises(edgeinf.InputError, match="tflite package option must be one of"):
        edgeinf.load(model_path(FACE), package="tensorflow")
    with pytest.raises(edgeinf.InputError, match="num_threads"):
        edgeinf.load(model_path(FACE), num_threads=0)
    with pytest.raises(edgeinf.InputError, match="unknown backend"):
        edgeinf.load(model_path(FACE), backend="tensorrt")


def test_a_manifest_name_loads_the_cached_model(model_path):
    with edgeinf.load(FACE, num_threads=1) as model:
        assert model.path == zoo.path(FACE)
        assert model.inputs[0].shape == (1, 128, 128, 3)
    with pytest.raises(edgeinf.ModelFileError, match="not found"):
        edgeinf.load("face_detection_medium_range")  # neither a file nor a manifest name


def test_details_report_the_peak_memory_of_the_load(model_path):
    with edgeinf.load(model_path(FACE), num_threads=1) as model:
        peak = model.details["load_peak_rss_bytes"]
    assert isinstance(peak, int) and peak > model_path(FACE).stat().st_size


# -- NCNN input memory and validation -----------------------------------------------------


def test_ncnn_never_keeps_or_writes_the_callers_array(model_path, photo, rng):
    pytest.importorskip("ncnn")
    with edgeinf.load(model_path(SR), num_threads=1, fp16=False) as model:
        x = rng.random((1, 3, 16, 24), dtype=np.float32)
        x.setflags(write=False)  # e.g. a frame from np.frombuffer
        first = model.run(x)["output"]
        got = model.run_image(photo, color="bgr", size=(24, 16), std=255.0)  # fills the input: not x
        assert got["output"].shape == (1, 3, 32, 48)
        y = x.copy()
        model.run(y)
        buffer = model.input_buffer(0)
        buffer[...] = 0.5
        np.testing.assert_array_equal(y, x)  # the fill went into the backend's memory
        np.testing.assert_array_equal(model.run(x)["output"], first)


def test_ncnn_refuses_a_wrong_channel_count_and_rank(model_path, rng):
    pytest.importorskip("ncnn")
    with edgeinf.load(model_path(SR), num_threads=1) as model:
        with pytest.raises(edgeinf.InputError, match=r"expects shape \[1, 3, -1, -1\], got \[1, 5, 16, 16\]"):
            model.run(rng.random((1, 5, 16, 16), dtype=np.float32))
        with pytest.raises(edgeinf.InputError, match=r"got \[1, 16, 16, 3\]"):
            model.run(rng.random((16, 16, 3), dtype=np.float32))  # an HWC image is not a CHW one
        with pytest.raises(edgeinf.InputError, match="expects shape"):
            model.run(rng.random((16, 16), dtype=np.float32))
        chw = rng.random((3, 8, 8), dtype=np.float32)  # CHW without the batch axis stays accepted
        np.testing.assert_array_equal(model.run(chw)["output"], model.run(chw[np.newaxis])["output"])


def test_a_huge_dynamic_size_is_refused_before_any_allocation(model_path, photo):
    pytest.importorskip("ncnn")
    with edgeinf.load(model_path(SR), num_threads=1) as model:
        with pytest.raises(edgeinf.InputError, match="max_input_bytes"):
            model.resize_input(0, (1, 3, 40000, 40000))  # 19.2 GB of float32
        with pytest.raises(edgeinf.InputError, match="max_input_bytes"):
            model.run_image(photo, color="bgr", size=(30000, 30000), std=255.0)
        model.max_input_bytes = 64 << 10
        with pytest.raises(edgeinf.InputError, match="max_input_bytes"):
            model.run(np.zeros((1, 3, 100, 100), np.float32))
        assert model.run(np.zeros((1, 3, 16, 16), np.float32))["output"].shape == (1, 3, 32, 32)


def test_a_weightless_param_loads_without_a_bin(tmp_path, rng):
    pytest.importorskip("ncnn")
    param = tmp_path / "relu_pool.param"
    param.write_text(
        "7767517\n3 3\nInput input 0 1 data 0=8 1=6 2=2\nReLU relu 1 1 data r\nPooling pool 1 1 r out 0=0 1=2 2=2\n"
    )
    assert not param.with_suffix(".bin").exists()
    x = rng.standard_normal((1, 2, 6, 8)).astype(np.float32)
    with edgeinf.load(param, num_threads=1, fp16=False) as model:
        out = model.run(x)["out"]
    want = np.maximum(x, 0).reshape(1, 2, 3, 2, 4, 2).max(axis=(3, 5))  # 2x2 max pooling, stride 2
    np.testing.assert_array_equal(out, want)


# -- TFLite dynamic inputs ----------------------------------------------------------------


@pytest.fixture
def dynamic_tflite(tmp_path):
    """RELU on an input of shape signature [1, -1, -1, 3]: any height and width."""
    data = build_model(
        [
            TensorDef("x", (1, 1, 1, 3), "float32", shape_signature=(1, -1, -1, 3)),
            TensorDef("y", (1, 1, 1, 3), "float32", shape_signature=(1, -1, -1, 3)),
        ],
        [OpDef("RELU", [0], [1])],
        inputs=[0],
        outputs=[1],
    )
    path = tmp_path / "relu_dynamic.tflite"
    path.write_bytes(data)
    return path


def test_a_dynamic_tflite_input_takes_a_new_size_on_every_run(dynamic_tflite, rng):
    pytest.importorskip("ai_edge_litert")
    with edgeinf.load(dynamic_tflite, num_threads=1) as model:
        assert model.inputs[0].shape == (1, -1, -1, 3)
        for shape in [(1, 4, 5, 3), (1, 7, 2, 3), (1, 4, 5, 3), (1, 1, 1, 3)]:
            x = rng.standard_normal(shape).astype(np.float32)
            np.testing.assert_array_equal(model.run(x)["y"], np.maximum(x, 0))
        with pytest.raises(edgeinf.InputError, match=r"expects shape \[1, -1, -1, 3\], got \[1, 4, 4, 2\]"):
            model.run(np.zeros((1, 4, 4, 2), np.float32))
        with pytest.raises(edgeinf.InputError, match="max_input_bytes"):
            model.resize_input(0, (1, 50000, 50000, 3))


# -- run_image errors -----------------------------------------------------------------------


def test_run_image_raises_input_errors(model_path, photo):
    with edgeinf.load(model_path(FACE), num_threads=1) as model:
        with pytest.raises(edgeinf.InputError, match="uint8"):
            model.run_image(photo.astype(np.float32), mean=127.5, std=127.5)
        with pytest.raises(edgeinf.InputError, match="numpy array"):
            model.run_image(photo.tolist(), mean=127.5, std=127.5)
        with pytest.raises(edgeinf.InputError, match=r"unknown image option\(s\) \['normalise'\]"):
            model.run_image(photo, mean=127.5, std=127.5, normalise=True)
        with pytest.raises(edgeinf.InputError, match="colour format"):
            model.run_image(photo, color="hsv", mean=127.5, std=127.5)
        with pytest.raises(edgeinf.InputError, match="ROI"):
            model.run_image(photo, mean=127.5, std=127.5, roi=(0, 0, 5000, 10))
        assert model.metrics.snapshot().calls == 0


@pytest.mark.parametrize("threads", [0, MAX_THREADS + 1, 100_000, True, 2.0])
def test_num_threads_beyond_what_a_runtime_can_start_is_an_input_error(threads):
    with pytest.raises(InputError, match="num_threads"):
        edgeinf.load(zoo.path("face_detection_short_range"), num_threads=threads)
