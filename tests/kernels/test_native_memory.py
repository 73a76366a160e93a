"""Memory safety of the native bindings: sizes past 32 bits, products that would wrap, and
the capsule fast paths outliving the objects they were taken from."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from preprocess_helpers import pipeline

from edgeinf import _C, InputError, postprocess, quant

ANCHORS = postprocess.ssd_anchors(postprocess.FACE_SHORT_RANGE_ANCHORS)


def image_plan(src, roi, out=(8, 8, 3), resize="bilinear"):
    return _C.ImagePlan("bgr", src, roi, out, "NHWC", "float32", resize, False, False, "limited",
                        (1, 1, 1), (0, 0, 0), (0, 0, 0), 0.0, 0.0, 1)  # fmt: skip


@pytest.fixture(scope="module")
def frame_over_2gib():
    """One BGR row of 2**31 + 3000 bytes (lazily zeroed pages), its last 64 pixels set."""
    width = 2**31 // 3 + 1000
    frame = np.zeros((1, width, 3), np.uint8)
    frame[0, -64:] = (10, 20, 30)
    frame[0, -32:] = (200, 150, 100)
    return frame


@pytest.mark.parametrize("resize", ["nearest", "bilinear", "area"])
def test_roi_at_the_right_edge_of_a_2gib_row(frame_over_2gib, resize):
    width = frame_over_2gib.shape[1]
    small = np.ascontiguousarray(frame_over_2gib[:, -64:])  # the same pixels in a small frame
    want = np.zeros((1, 8, 8, 3), np.float32)
    image_plan((64, 1), (0, 0, 64, 1), resize=resize).run(small, want)
    got = np.zeros((1, 8, 8, 3), np.float32)
    image_plan((width, 1), (width - 64, 0, 64, 1), resize=resize).run(frame_over_2gib, got)
    np.testing.assert_array_equal(got, want)
    assert set(np.unique(got)) >= {10.0, 200.0}


def test_decode_refuses_keypoint_counts_that_wrap():
    boxes, scores = np.zeros((896, 16), np.float32), np.full(896, 5.0, np.float32)
    args = (True, 0.0, 128, 1.0, 0, 1.0, 0, 0.3, 0, 2**63 - 1)
    for coords, keypoints in ((16, 2**63), (16, 2**63 + 6), (2**63, 6), (2**62, 0)):
        with pytest.raises(InputError):
            _C.DetectionDecoder(ANCHORS, coords, keypoints, 128, 128, 128, 128, 100, *args)(boxes, scores)


def test_decode_refuses_coordinate_counts_that_match_a_small_buffer_modulo_2_64():
    # 896 * 2**62 wraps to 0: an empty boxes array once passed the size check.
    with pytest.raises(InputError):
        _C.DetectionDecoder(ANCHORS, 2**62, 0, 128, 128, 128, 128, 100, True, 0.0, 128, 1.0, 0, 1.0, 0, 0.3, 0, 10)(
            np.zeros((0, 16), np.float32), np.full(896, 5.0, np.float32)
        )


@pytest.mark.parametrize("fn", [_C.quantize, _C.dequantize])
def test_per_channel_conversions_refuse_products_that_wrap(fn):
    x = np.zeros(4, np.float32 if fn is _C.quantize else np.int8)
    with pytest.raises(InputError, match="does not fit in memory"):
        fn(x, np.ones(2, np.float32), np.zeros(2, np.int32), 2**63 + 1, 2)


def make_layers():
    q = dict(input_scale=0.5, input_zero_point=1, weight_scale=0.25, output_scale=0.125, output_zero_point=-3)
    rng = np.random.default_rng(7)
    return {
        "fully connected": (
            quant.FullyConnected(rng.integers(-127, 128, (5, 8), dtype=np.int8), **q),
            rng.integers(-128, 128, (3, 8), dtype=np.int8),
        ),
        "conv": (
            quant.Conv2D(rng.integers(-127, 128, (4, 3, 3, 2), dtype=np.int8), **q),
            rng.integers(-128, 128, (1, 6, 6, 2), dtype=np.int8),
        ),
        "depthwise": (
            quant.DepthwiseConv2D(rng.integers(-127, 128, (1, 3, 3, 2), dtype=np.int8), **q),
            rng.integers(-128, 128, (1, 6, 6, 2), dtype=np.int8),
        ),
    }


@pytest.mark.parametrize("name", ["fully connected", "conv", "depthwise"])
def test_layer_capsule_keeps_its_layer_alive(name):
    layer, x = make_layers()[name]
    want = layer(x)
    capsule = layer._op._capsule()
    del layer
    gc.collect()
    for _ in range(3):  # reuse the freed memory, if it were freed
        make_layers()
    np.testing.assert_array_equal(_C._run_layer(capsule, x), want)


def test_plan_capsule_keeps_its_plan_alive(rng):
    pipe = pipeline(16, 16, 3, "float32", "NHWC", color="bgr")
    frame = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    want = pipe.new_output()
    pipe(frame, want)
    capsule = pipe.plan(frame)._capsule()
    del pipe
    gc.collect()
    for _ in range(3):
        pipeline(16, 16, 3, "float32", "NHWC", color="bgr")(frame, np.zeros((1, 16, 16, 3), np.float32))
    got = np.zeros_like(want)
    _C._run_plan(capsule, frame, got)
    np.testing.assert_array_equal(got, want)
