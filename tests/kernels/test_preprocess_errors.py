"""Bad input to the image pipeline raises ValueError naming the problem; nothing crashes."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from preprocess_helpers import make_frame, pipeline

from edgeinf import _C
from edgeinf.errors import InputError
from edgeinf.preprocess import Pipeline
from edgeinf.types import Layout, Quantization, TensorSpec


@pytest.fixture
def bgr_pipe():
    return pipeline(16, 16, 3, "float32", "NHWC", color="bgr")


def run(pipe, frame, out=None, roi=None):
    pipe(frame, pipe.new_output() if out is None else out, roi)


@pytest.mark.parametrize("dtype", [np.float32, np.uint16, np.int8])
def test_wrong_frame_dtype(bgr_pipe, dtype):
    with pytest.raises(ValueError, match=f"frame must be uint8, got {np.dtype(dtype).name}"):
        run(bgr_pipe, np.zeros((8, 8, 3), dtype))


def test_frame_not_an_array(bgr_pipe):
    with pytest.raises(ValueError, match="frame must be a numpy array, got list"):
        run(bgr_pipe, [[0, 0, 0]])


def test_wrong_channel_count(bgr_pipe):
    with pytest.raises(ValueError, match=r"frame must have shape \(8, 8, 3\) for this plan, got \(8, 8, 4\)"):
        run(bgr_pipe, np.zeros((8, 8, 4), np.uint8))


def test_odd_nv12_width():
    pipe = pipeline(8, 8, color="nv12")
    with pytest.raises(ValueError, match="4:2:0 YUV images need even width and height, got 9x8"):
        run(pipe, np.zeros((12, 9), np.uint8))


def test_nv12_rows_not_three_halves_of_a_height():
    pipe = pipeline(8, 8, color="nv12")
    with pytest.raises(ValueError, match="row count divisible by 3"):
        run(pipe, np.zeros((13, 8), np.uint8))
    with pytest.raises(ValueError, match=r"\(height \* 3 / 2, width\)"):
        run(pipe, np.zeros(96, np.uint8))  # a flat buffer says nothing of the image size


def test_odd_yuyv_width():
    pipe = pipeline(8, 8, color="yuyv")
    with pytest.raises(ValueError, match="YUYV images need an even width, got 7"):
        run(pipe, np.zeros((4, 7, 2), np.uint8))


@pytest.mark.parametrize("shape", [(0, 8, 3), (8, 0, 3)])
def test_zero_sized_frame(bgr_pipe, shape):
    with pytest.raises(ValueError, match="image size must be positive"):
        run(bgr_pipe, np.zeros(shape, np.uint8))


def test_zero_sized_output_spec():
    spec = TensorSpec("in", (1, 0, 16, 3), np.dtype(np.float32), Layout.NHWC)
    with pytest.raises(ValueError, match="output size must be positive, got 16x0"):
        Pipeline.for_input(spec)


def test_zero_sized_roi(bgr_pipe):
    with pytest.raises(ValueError, match="ROI size must be positive, got 0x4"):
        run(bgr_pipe, np.zeros((8, 8, 3), np.uint8), roi=(0, 0, 0, 4))


@pytest.mark.parametrize("roi", [(-1, 0, 4, 4), (0, -2, 4, 4), (5, 0, 4, 4), (0, 0, 8, 9), (8, 8, 1, 1)])
def test_roi_outside_the_image(bgr_pipe, roi):
    with pytest.raises(ValueError, match=r"ROI \(x=.*\) lies outside the 8x8 image"):
        run(bgr_pipe, np.zeros((8, 8, 3), np.uint8), roi=roi)


def test_roi_with_wrong_arity(bgr_pipe):
    with pytest.raises(ValueError, match=r"roi must be \(x, y, width, height\)"):
        run(bgr_pipe, np.zeros((8, 8, 3), np.uint8), roi=(0, 0, 4))


def test_non_contiguous_pixels(bgr_pipe):
    frame = np.zeros((8, 16, 3), np.uint8)
    with pytest.raises(ValueError, match="frame rows must be contiguous pixels"):
        run(bgr_pipe, frame[:, ::2])
    with pytest.raises(ValueError, match="frame rows must be contiguous pixels"):
        run(bgr_pipe, np.zeros((3, 8, 8), np.uint8).transpose(1, 2, 0))


def test_non_contiguous_nv12(rng):
    pipe = pipeline(8, 8, color="nv12")
    big = make_frame(rng, "nv12", 16, 8)
    with pytest.raises(ValueError, match="a 4:2:0 frame must be C-contiguous"):
        run(pipe, big[:, :8])


# The output is checked on the call that builds the frame shape's plan and on the per-frame
# path of later calls (warm), which takes another native entry point.
@pytest.fixture(params=[False, True], ids=["first call", "warm"])
def out_pipe(request, bgr_pipe):
    if request.param:
        run(bgr_pipe, np.zeros((8, 8, 3), np.uint8))
    return bgr_pipe


def test_output_wrong_dtype(out_pipe):
    with pytest.raises(ValueError, match="output must be float32, got int8"):
        run(out_pipe, np.zeros((8, 8, 3), np.uint8), out=np.zeros((1, 16, 16, 3), np.int8))


def test_output_not_an_array(out_pipe):
    with pytest.raises(ValueError, match="output must be a numpy array, got list"):
        run(out_pipe, np.zeros((8, 8, 3), np.uint8), out=[[0.0] * 3] * 256)


def test_output_too_small(out_pipe):
    with pytest.raises(ValueError, match=r"output must have shape \(1, 16, 16, 3\), got \(1, 16, 15, 3\)"):
        run(out_pipe, np.zeros((8, 8, 3), np.uint8), out=np.zeros((1, 16, 15, 3), np.float32))
    with pytest.raises(ValueError, match="output must have shape"):
        run(out_pipe, np.zeros((8, 8, 3), np.uint8), out=np.zeros(16 * 16 * 3, np.float32))


def test_output_not_contiguous_or_read_only(out_pipe):
    frame = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="output must be C-contiguous"):
        run(out_pipe, frame, out=np.zeros((1, 16, 32, 3), np.float32)[:, :, ::2])
    ro = np.zeros((1, 16, 16, 3), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="output array is read-only"):
        run(out_pipe, frame, out=ro)


def test_run_plan_refuses_anything_but_a_plan_capsule(bgr_pipe):
    frame, out = np.zeros((8, 8, 3), np.uint8), bgr_pipe.new_output()
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype, new_capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    with pytest.raises(ValueError, match="PyCapsule_GetPointer called with incorrect name"):
        _C._run_plan(new_capsule(out.ctypes.data, b"not.a.plan", None), frame, out)
    with pytest.raises(ValueError, match="invalid PyCapsule"):
        _C._run_plan(object(), frame, out)
    with pytest.raises(TypeError, match=r"expects \(plan capsule, frame, out\), got 2 arguments"):
        _C._run_plan(bgr_pipe.plan(frame)._capsule(), frame)
    _C._run_plan(bgr_pipe.plan(frame)._capsule(), frame, out)  # the right capsule runs


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"color": "hsv"}, "unknown colour format 'hsv'"),
        ({"resize": "cubic"}, "unknown resize 'cubic'"),
        ({"channel_order": "rbg"}, "channel_order must be 'rgb' or 'bgr'"),
        ({"yuv_range": "studio"}, "yuv_range must be 'limited' or 'full'"),
        ({"mean": (1.0, 2.0)}, "mean needs 1 or 3 values"),
        ({"std": 0.0}, "std must be non-zero"),
        ({"threads": 0}, "threads must be from 1 to 256"),
        ({"threads": 257}, "threads must be from 1 to 256"),
    ],
)
def test_bad_options(option, message):
    with pytest.raises(ValueError, match=message):
        pipeline(16, 16, 3, "float32", "NHWC", **option)


def test_specs_the_pipeline_cannot_fill():
    with pytest.raises(ValueError, match="image pipelines fill float32, int8 or uint8 inputs"):
        Pipeline.for_input(TensorSpec("in", (1, 8, 8, 3), np.dtype(np.float16), Layout.NHWC))
    with pytest.raises(ValueError, match="needs 1 or 3 channels, got 4"):
        Pipeline.for_input(TensorSpec("in", (1, 8, 8, 4), np.dtype(np.float32), Layout.NHWC))
    with pytest.raises(ValueError, match="expected \\(1, H, W, C\\)"):
        Pipeline.for_input(TensorSpec("in", (1, 2, 8, 8, 3), np.dtype(np.float32), Layout.OTHER))
    per_channel = Quantization((0.1, 0.2, 0.3), (0, 0, 0), axis=3)
    with pytest.raises(ValueError, match="per-channel quantization"):
        Pipeline.for_input(TensorSpec("in", (1, 8, 8, 3), np.dtype(np.int8), Layout.NHWC, per_channel), mean=0.0)
    with pytest.raises(ValueError, match="without quantization parameters"):
        Pipeline.for_input(TensorSpec("in", (1, 8, 8, 3), np.dtype(np.int8), Layout.NHWC), mean=0.0, std=1.0)


def test_native_plan_rejects_bad_requests_directly():
    from edgeinf import _C

    good = dict(
        format="bgr",
        src_size=(8, 8),
        roi=(0, 0, 8, 8),
        out_size=(4, 4, 3),
        layout="NHWC",
        dtype="float32",
        resize="bilinear",
        letterbox=False,
        bgr_out=False,
        yuv_range="limited",
        scale=(1, 1, 1),
        bias=(0, 0, 0),
        pad=(0, 0, 0),
        qmin=0,
        qmax=0,
        threads=1,
    )
    _C.ImagePlan(**good)
    for change, message in [
        ({"out_size": (4, 4, 2)}, "output channels must be 1 or 3, got 2"),
        ({"layout": "CHWN"}, "layout must be NHWC or NCHW"),
        ({"dtype": "float64"}, "unsupported output dtype 'float64'"),
        ({"qmin": 5, "qmax": 1}, "qmin must not exceed qmax"),
        ({"format": "p010"}, "unknown colour format 'p010'"),
    ]:
        with pytest.raises(ValueError, match=message):
            _C.ImagePlan(**{**good, **change})


@pytest.mark.parametrize("roi", [(0, 0, 2**70, 4), ("x", 0, 4, 4), (0, 0, 4), 5])
def test_a_roi_that_is_not_four_pixel_counts_is_an_input_error(bgr_pipe, roi):
    with pytest.raises(InputError, match="roi must be"):
        run(bgr_pipe, np.zeros((8, 8, 3), np.uint8), roi=roi)
