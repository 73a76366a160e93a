"""One exception family: every bad call of the int8, post-processing and image bindings
raises edgeinf.InputError (a ValueError) naming the problem, never a plain ValueError,
TypeError, ZeroDivisionError, IndexError or AttributeError; zero rows give zero rows."""

from __future__ import annotations

import numpy as np
import pytest

from edgeinf import _C, InputError, postprocess, quant
from edgeinf.isa import supported_isas, use_isa

Q = dict(input_scale=0.5, input_zero_point=0, weight_scale=0.25, output_scale=0.125, output_zero_point=0)
BINARY = dict(a_scale=0.1, a_zero_point=0, b_scale=0.1, b_zero_point=0, output_scale=0.2, output_zero_point=0)
ANCHORS = postprocess.ssd_anchors(postprocess.FACE_SHORT_RANGE_ANCHORS)
BOXES = np.zeros((896, 16), np.float32)
SCORES = np.full(896, 5.0, np.float32)


def i8(*shape):
    return np.zeros(shape, np.int8)


def fc():
    return quant.FullyConnected(np.ones((3, 4), np.int8), **Q)


def detections(n=1, anchors=1):
    return postprocess.Detections(
        np.zeros((n, 4), np.float32),
        np.zeros((n, 0, 2), np.float32),
        np.ones(n, np.float32),
        np.zeros(anchors, np.int64),
    )


def plan(src=(16, 16), roi=(0, 0, 16, 16), out=(8, 8, 3), threads=1, resize="bilinear"):
    return _C.ImagePlan("bgr", src, roi, out, "NHWC", "float32", resize, False, False, "limited",
                        (1, 1, 1), (0, 0, 0), (0, 0, 0), 0.0, 0.0, threads)  # fmt: skip


BAD_CALLS = {
    # int8 layers
    "input scale not a number": lambda: quant.FullyConnected(np.ones((3, 4), np.int8), **{**Q, "input_scale": "a"}),
    "input scale None": lambda: quant.FullyConnected(np.ones((3, 4), np.int8), **{**Q, "input_scale": None}),
    "weight scale 0": lambda: quant.FullyConnected(np.ones((3, 4), np.int8), **{**Q, "weight_scale": 0}),
    "weight scales not numbers": lambda: quant.FullyConnected(np.ones((3, 4), np.int8), **{**Q, "weight_scale": ["a"]}),
    "weights with K = 0": lambda: quant.FullyConnected(np.ones((3, 0), np.int8), **Q),
    "weights with N = 0": lambda: quant.FullyConnected(np.ones((0, 3), np.int8), **Q),
    "x of another K": lambda: fc()(i8(2, 5)),
    "x float": lambda: fc()(np.zeros((2, 4), np.float32)),
    "x a list": lambda: fc()([[1, 2, 3, 4]]),
    "out of another shape": lambda: fc()(i8(2, 4), out=i8(2, 4)),
    "out read-only": lambda: fc()(i8(2, 4), out=np.broadcast_to(i8(1, 3), (2, 3))),
    "conv stride 0": lambda: quant.Conv2D(np.ones((2, 3, 3, 1), np.int8), stride=0, **Q),
    "conv stride 2**70": lambda: quant.Conv2D(np.ones((2, 3, 3, 1), np.int8), stride=2**70, **Q),
    "conv stride bool": lambda: quant.Conv2D(np.ones((2, 3, 3, 1), np.int8), stride=(True, 1), **Q),
    "conv dilation 2**40": lambda: quant.Conv2D(np.ones((2, 3, 3, 1), np.int8), dilation=2**40, **Q),
    "conv input smaller than filter": lambda: quant.Conv2D(np.ones((2, 3, 3, 1), np.int8), padding="valid", **Q)(
        i8(1, 2, 2, 1)
    ),
    "conv input of height 0": lambda: quant.Conv2D(np.ones((2, 3, 3, 1), np.int8), **Q)(i8(1, 0, 5, 1)),
    "depth multiplier -1": lambda: quant.DepthwiseConv2D(np.ones((1, 3, 3, 4), np.int8), depth_multiplier=-1, **Q),
    "depth multiplier 1.5": lambda: quant.DepthwiseConv2D(np.ones((1, 3, 3, 4), np.int8), depth_multiplier=1.5, **Q),
    "depth multiplier 3 of 4": lambda: quant.DepthwiseConv2D(np.ones((1, 3, 3, 4), np.int8), depth_multiplier=3, **Q),
    "pool of size 0": lambda: quant.max_pool(i8(1, 4, 4, 1), 0),
    "pool of size 2**40": lambda: quant.max_pool(i8(1, 4, 4, 1), 2**40, padding="same"),
    "pool larger than input": lambda: quant.average_pool(i8(1, 4, 4, 1), 8),
    "softmax beta not a number": lambda: quant.softmax(i8(2, 3), input_scale=0.1, beta="x"),
    "softmax of 0 classes": lambda: quant.softmax(i8(3, 0), input_scale=0.1),
    "logistic zero point 300": lambda: quant.logistic(i8(3), input_scale=0.1, input_zero_point=300),
    "mul a zero point -2**31": lambda: quant.mul(i8(1), i8(1), **{**BINARY, "a_zero_point": -(2**31)}),
    "add output zero point 200": lambda: quant.add(i8(1), i8(1), **{**BINARY, "output_zero_point": 200}),
    "add of shapes that do not broadcast": lambda: quant.add(i8(2, 3), i8(4), **BINARY),
    "quantize_multiplier of a string": lambda: quant.quantize_multiplier("x"),
    "quantize_multiplier of -1": lambda: quant.quantize_multiplier(-1.0),
    "multiplier beyond int32": lambda: quant.multiply_by_quantized_multiplier(np.zeros(3, np.int32), 2**40, 0),
    "shift beyond 30": lambda: quant.multiply_by_quantized_multiplier(np.zeros(3, np.int32), 1 << 30, 99),
    "requantize multiplier beyond int32": lambda: quant.requantize(np.zeros(3, np.int32), 2**40, 0, 0),
    "requantize float multiplier": lambda: quant.requantize(np.zeros(3, np.int32), 0.5, 0, 0),
    "requantize of 0 channels": lambda: quant.requantize(np.zeros((2, 0), np.int32), 1 << 30, 0, 0),
    "conv_output_size with stride 0": lambda: quant.conv_output_size(5, 3, 0, 1, "same"),
    "quantize product that wraps": lambda: _C.quantize(
        np.zeros(4, np.float32), np.ones(2, np.float32), np.zeros(2, np.int32), 2**63 + 1, 2
    ),
    # post-processing
    "top_k of k 1.5": lambda: postprocess.top_k(i8(5), 1.5),
    "decode with 2**63 keypoints": lambda: postprocess.decode_ssd(
        BOXES, SCORES, ANCHORS, postprocess.DecodeOptions(num_keypoints=2**63)
    ),
    "decode with 2**63 coordinates": lambda: postprocess.decode_ssd(
        BOXES, SCORES, ANCHORS, postprocess.DecodeOptions(num_coords=2**63)
    ),
    "decode with -1 keypoints": lambda: postprocess.decode_ssd(
        BOXES, SCORES, ANCHORS, postprocess.DecodeOptions(num_keypoints=-1)
    ),
    "decode with a NaN score clip": lambda: postprocess.decode_ssd(
        BOXES, SCORES, ANCHORS, postprocess.DecodeOptions(score_clip=float("nan"))
    ),
    "decode threshold not a number": lambda: postprocess.decode_ssd(BOXES, SCORES, ANCHORS, score_threshold="a"),
    "nms iou not a number": lambda: postprocess.non_max_suppression(detections(), "a"),
    "nms with fewer anchors than scores": lambda: postprocess.non_max_suppression(detections(2, 1)),
    "BlazeFace decoder of lists": lambda: postprocess.BlazeFaceDecoder()([1], [2]),
    "anchors of stride 0": lambda: postprocess.ssd_anchors(
        postprocess.AnchorOptions(input_size=(128, 128), strides=(0,))
    ),
    "anchors without strides": lambda: postprocess.ssd_anchors(
        postprocess.AnchorOptions(input_size=(128, 128), strides=())
    ),
    "2**60 anchors": lambda: postprocess.ssd_anchors(
        postprocess.AnchorOptions(input_size=(2**30, 2**30), strides=(1,))
    ),
    "native decoder keypoints 2**63": lambda: _C.DetectionDecoder(
        ANCHORS, 16, 2**63, 128, 128, 128, 128, 100, True, 0, 128, 1, 0, 1, 0, 0.3, 2, 10
    )(BOXES[None], SCORES[None, :, None]),
    # found by tools/fuzz/fuzz_native.py: no anchor, but outputs shaped by 2**38 keypoints (bad_alloc)
    "decode with no anchors and 2**40 coordinates": lambda: _C.DetectionDecoder(
        np.zeros((0, 4), np.float32),
        2**40,
        2**38,
        128.0,
        128.0,
        128.0,
        128.0,
        100.0,
        True,
        0.0,
        128,
        1.0,
        0,
        1.0,
        0,
        0.3,
        1,
        5,
    )(np.zeros((0, 16), np.float32), np.zeros(0, np.float32)),  # fmt: skip
    # image plans
    "plan threads 512": lambda: plan(threads=512),
    "plan threads 0": lambda: plan(threads=0),
    "plan ROI beyond int": lambda: plan(roi=(0, 0, 2**40, 2)),
    "plan ROI wider than 2**20": lambda: plan(src=(2**21, 1), roi=(0, 0, 2**21, 1)),
    "plan output of 2**17 rows": lambda: plan(out=(8, 2**17, 3)),
    "plan run on a list": lambda: _C._run_plan(plan()._capsule(), [0], np.zeros((1, 8, 8, 3), np.float32)),
}


@pytest.mark.parametrize("call", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_call_raises_input_error(call):
    with pytest.raises(InputError):
        call()


def test_native_errors_name_the_problem():
    with pytest.raises(InputError, match="num_coords 16 cannot hold a box and 9223372036854775808 keypoints"):
        BAD_CALLS["native decoder keypoints 2**63"]()
    with pytest.raises(InputError, match=r"threads must be in \[1, 256\], got 512"):
        plan(threads=512)
    with pytest.raises(InputError, match="does not fit in memory"):
        BAD_CALLS["quantize product that wraps"]()


EMPTY_BATCH = {
    "fully connected, 0 rows": (lambda: fc()(i8(0, 4)), (0, 3)),
    "fully connected, 0 of 2 rows": (lambda: fc()(i8(2, 0, 4)), (2, 0, 3)),
    "fully connected, wide, 0 rows": (
        lambda: quant.FullyConnected(np.ones((40, 64), np.int8), **Q)(i8(0, 64)),
        (0, 40),
    ),
    "conv, batch 0": (lambda: quant.Conv2D(np.ones((3, 3, 3, 2), np.int8), **Q)(i8(0, 5, 5, 2)), (0, 5, 5, 3)),
    "1x1 conv, batch 0": (lambda: quant.Conv2D(np.ones((3, 1, 1, 2), np.int8), **Q)(i8(0, 5, 5, 2)), (0, 5, 5, 3)),
    "depthwise, batch 0": (
        lambda: quant.DepthwiseConv2D(np.ones((1, 3, 3, 4), np.int8), **Q)(i8(0, 5, 5, 4)),
        (0, 5, 5, 4),
    ),
    "max pool, batch 0": (lambda: quant.max_pool(i8(0, 4, 4, 2), 2), (0, 2, 2, 2)),
    "average pool, batch 0": (lambda: quant.average_pool(i8(0, 4, 4, 2), 2), (0, 2, 2, 2)),
    "softmax, 0 rows": (lambda: quant.softmax(i8(0, 10), input_scale=0.1), (0, 10)),
    "logistic, empty": (lambda: quant.logistic(i8(0), input_scale=0.1, input_zero_point=0), (0,)),
    "add, 0 rows": (lambda: quant.add(i8(0, 3), i8(0, 3), **BINARY), (0, 3)),
    "mul, 0 rows": (lambda: quant.mul(i8(0, 3), i8(0, 3), **BINARY), (0, 3)),
    "quantize, 0 rows": (lambda: quant.quantize(np.zeros((0, 3), np.float32), [0.1] * 3, [0] * 3, axis=1), (0, 3)),
    "dequantize, 0 rows": (lambda: quant.dequantize(i8(0, 3), [0.1] * 3, [0] * 3, axis=1), (0, 3)),
    "requantize, 0 rows": (lambda: quant.requantize(np.zeros((0, 3), np.int32), 1 << 30, 0, 0), (0, 3)),
    "top_k, 0 rows": (lambda: postprocess.top_k(i8(0, 5), 2)[0], (0, 2)),
    # empty, with a huge other dimension: nothing may loop over it
    "max pool, 2**40 images of 0 channels": (lambda: quant.max_pool(i8(2**40, 2, 2, 0), 2), (2**40, 1, 1, 0)),
    "quantize, 2**40 x 3 x 0": (
        lambda: quant.quantize(np.zeros((2**40, 3, 0), np.float32), [0.1] * 3, [0] * 3, axis=1),
        (2**40, 3, 0),
    ),
    "dequantize, 2**40 x 3 x 0": (lambda: quant.dequantize(i8(2**40, 3, 0), [0.1] * 3, [0] * 3, axis=1), (2**40, 3, 0)),
}


@pytest.mark.parametrize("isa", supported_isas())
@pytest.mark.parametrize("case", EMPTY_BATCH.values(), ids=EMPTY_BATCH.keys())
def test_zero_rows_give_zero_rows(case, isa):
    call, shape = case
    with use_isa(isa):
        assert call().shape == shape
