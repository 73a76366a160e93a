"""Every SIMD path of the image-to-tensor kernels equals the scalar reference bit for bit.

Integer outputs must be identical by the project's rule; float outputs are identical too,
because the colour stage is one fixed sequence of float32 multiplies and adds on every
path (the documented bound is 0 ULP). Sizes cover 1-pixel images, odd widths and the
tails around the vector widths (8/16/32 elements).
"""

from __future__ import annotations

import platform

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from preprocess_helpers import first_mismatch, make_frame, pipeline

from edgeinf.isa import supported_isas, use_isa

SIMD = [isa for isa in supported_isas() if isa != "scalar"]
EXAMPLES = 40 if platform.machine() == "aarch64" else 300
COLORS = ["rgb", "bgr", "rgba", "bgra", "gray", "nv12", "nv21", "i420", "yuyv"]
# widths around the vector widths, and plain odd ones
EDGE_SIZES = [1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33, 47, 63, 64, 65]

pytestmark = pytest.mark.skipif(not SIMD, reason="no SIMD path is built and supported on this machine")


def run_on(isa, pipe, frame, roi=None):
    out = pipe.new_output()
    out.fill(0x5A if out.dtype != np.float32 else np.nan)  # stale values must not survive
    with use_isa(isa):
        pipe(frame, out, roi)
    return out


def assert_paths_agree(pipe, frame, roi=None):
    want = run_on("scalar", pipe, frame, roi)
    for isa in SIMD:
        got = run_on(isa, pipe, frame, roi)
        msg = first_mismatch(
            got.view(np.uint32) if got.dtype == np.float32 else got,
            want.view(np.uint32) if want.dtype == np.float32 else want,
        )
        assert not msg, f"{isa} vs scalar ({pipe.color}, {pipe.resize}, {pipe.dtype}, {pipe.layout.value}): {msg}"


def even(n):
    return max(2, n - n % 2)


@st.composite
def cases(draw):
    color = draw(st.sampled_from(COLORS))
    w = draw(st.one_of(st.sampled_from(EDGE_SIZES), st.integers(1, 90)))
    h = draw(st.one_of(st.sampled_from([1, 2, 3, 17]), st.integers(1, 40)))
    if color in ("nv12", "nv21", "i420"):
        w, h = even(w), even(h)
    if color == "yuyv":
        w = even(w)
    ow = draw(st.one_of(st.sampled_from(EDGE_SIZES), st.integers(1, 90)))
    oh = draw(st.integers(1, 24))
    x0 = draw(st.integers(0, w - 1))
    y0 = draw(st.integers(0, h - 1))
    roi = draw(st.one_of(st.none(), st.just((x0, y0, draw(st.integers(1, w - x0)), draw(st.integers(1, h - y0))))))
    options = dict(
        color=color,
        resize=draw(st.sampled_from(["bilinear", "nearest", "area"])),
        letterbox=draw(st.booleans()),
        channel_order=draw(st.sampled_from(["rgb", "bgr"])),
        yuv_range=draw(st.sampled_from(["limited", "full"])),
        pad=draw(st.sampled_from([0.0, 114.0, (255.0, 0.0, 77.0)])),
    )
    dtype = draw(st.sampled_from(["float32", "int8", "uint8"]))
    channels = draw(st.sampled_from([3, 3, 1]))
    layout = draw(st.sampled_from(["NHWC", "NCHW"]))
    if dtype == "float32" or draw(st.booleans()):
        options.update(
            mean=draw(st.sampled_from([0.0, 127.5, (123.7, 116.3, 103.5)])),
            std=draw(st.sampled_from([1.0, 127.5, (58.4, 57.1, 57.4)])),
        )
    if channels == 1:
        for k in ("mean", "std", "pad"):
            if isinstance(options.get(k), tuple):
                options[k] = options[k][0]
    seed = draw(st.integers(0, 2**31))
    return (w, h, roi, ow, oh, channels, dtype, layout, options, seed)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(cases())
def test_simd_equals_scalar_random_cases(case):
    w, h, roi, ow, oh, channels, dtype, layout, options, seed = case
    rng = np.random.default_rng(seed)
    frame = make_frame(rng, options["color"], w, h)
    zp = {"int8": -3, "uint8": 131}.get(dtype, 0)
    pipe = pipeline(ow, oh, channels, dtype, layout, scale=0.0173, zero_point=zp, **options)
    assert_paths_agree(pipe, frame, roi)


@pytest.mark.parametrize("color", COLORS)
@pytest.mark.parametrize("resize", ["bilinear", "nearest", "area"])
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8"])
def test_simd_equals_scalar_every_format(color, resize, dtype, rng):
    # a camera-like size with a large downscale, and an upscale, each with tails
    for (w, h), (ow, oh) in [((70, 46), (33, 17)), ((18, 10), (41, 23))]:
        frame = make_frame(rng, color, w, h)
        for layout in ("NHWC", "NCHW"):
            pipe = pipeline(
                ow,
                oh,
                3,
                dtype,
                layout,
                scale=0.02,
                zero_point=5 if dtype != "float32" else 0,
                color=color,
                resize=resize,
                mean=(120.0, 110.0, 100.0),
                std=(60.0, 61.0, 62.0),
            )
            assert_paths_agree(pipe, frame)


@pytest.mark.parametrize("color", ["nv12", "nv21", "i420", "yuyv"])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize(("channels", "layout"), [(3, "NHWC"), (3, "NCHW"), (1, "NHWC")])
@pytest.mark.parametrize(
    ("yuv_range", "order"), [("limited", "rgb"), ("full", "rgb"), ("limited", "bgr"), ("full", "bgr")]
)
def test_simd_fused_yuv_quantization(color, dtype, channels, layout, yuv_range, order, rng):
    # int8: (p - 127.5) / 127.5 at scale 1/128 has an int16 map, so YUV -> RGB and the
    # quantization run fused (16 pixels per AVX2 step, 8 per NEON step, scalar tails); uint8
    # (zero point 128) has none at 16-bit precision and checks the unfused path beside it.
    # Both ranges and orders: AVX2 specializes BT.601's shifts and zero products for them.
    frame = make_frame(rng, color, 96, 40)
    zp = 0 if dtype == "int8" else 128
    for out_w in (7, 8, 15, 16, 17, 33, 48, 50):
        pipe = pipeline(
            out_w,
            9,
            channels,
            dtype,
            layout,
            1 / 128,
            zp,
            color=color,
            mean=127.5,
            std=127.5,
            yuv_range=yuv_range,
            channel_order=order,
        )
        assert_paths_agree(pipe, frame)


@pytest.mark.parametrize("out_w", EDGE_SIZES)
def test_simd_tails_around_vector_width(out_w, rng):
    frame = make_frame(rng, "bgr", 97, 13)
    for dtype in ("float32", "int8"):
        pipe = pipeline(out_w, 5, 3, dtype, "NHWC", scale=0.02, color="bgr", mean=127.5, std=127.5)
        assert_paths_agree(pipe, frame)


def test_simd_one_pixel_images(rng):
    for color in COLORS:
        w, h = (2, 2) if color in ("nv12", "nv21", "i420", "yuyv") else (1, 1)
        frame = make_frame(rng, color, w, h)
        for ow, oh in [(1, 1), (9, 3), (33, 2)]:
            assert_paths_agree(pipeline(ow, oh, 3, "uint8", "NHWC", color=color), frame)
            assert_paths_agree(pipeline(ow, oh, 3, "float32", "NCHW", color=color, std=255.0), frame)


def test_simd_threads_split_rows_identically(rng):
    frame = make_frame(rng, "nv12", 160, 96)
    one = pipeline(64, 48, 3, "int8", "NHWC", scale=0.03, color="nv12", mean=128.0, std=64.0)
    two = pipeline(64, 48, 3, "int8", "NHWC", scale=0.03, color="nv12", mean=128.0, std=64.0, threads=2)
    for isa in ["scalar", *SIMD]:
        a, b = run_on(isa, one, frame), run_on(isa, two, frame)
        assert not first_mismatch(a, b), first_mismatch(a, b)


# The usual image quantizations, whose affine integer outputs SIMD paths compute with the
# int16 map proven at plan time (Stage::int_map): TFLite's (p - 127.5) / 127.5 at scale
# 1/128, raw levels, pixel - 128; every width around the 48-element step.
@pytest.mark.parametrize(
    "dtype, scale, zero_point, options",
    [
        ("int8", 1 / 128, 0, dict(mean=127.5, std=127.5)),
        ("int8", 1.0, -128, {}),
        ("uint8", 1.0, 0, {}),
        ("uint8", 1 / 255, 0, dict(mean=0.0, std=255.0)),
    ],
)
def test_simd_integer_map_quantizations(dtype, scale, zero_point, options, rng):
    for color in ("bgr", "rgba", "gray"):
        frame = make_frame(rng, color, 301, 37)
        for out_w in (1, 15, 16, 17, 47, 48, 49, 97):
            for layout in ("NHWC", "NCHW"):
                pipe = pipeline(out_w, 7, 3, dtype, layout, scale=scale, zero_point=zero_point, color=color, **options)
                assert_paths_agree(pipe, frame)


# The chunk gather of the 4-byte-window passes (one channel, NV12/NV21 chroma): one 16-byte
# load per pair of output pixels while the pair's windows fit in it, 4-byte windows after
# the first block that does not. Horizontal downscales from 1x to 16x cross that limit
# (about 12x for one channel, 6x for the chroma pairs), also partway along a row, and ROIs
# move the chunks against the row's end.
@pytest.mark.parametrize("color", ["gray", "nv12", "nv21", "i420", "yuyv"])
def test_simd_chunk_gather_across_scales(color, rng):
    frame = make_frame(rng, color, 640, 6)
    for out_w in (640, 321, 160, 107, 91, 80, 64, 58, 53, 50, 47, 45, 43, 40):
        for roi in (None, (4, 2, 634, 4), (0, 0, 332, 6)):
            pipe = pipeline(out_w, 3, 3, "int8", "NHWC", 1 / 128, 0, color=color, mean=127.5, std=127.5)
            assert_paths_agree(pipe, frame, roi)


# Area downscales sum several source rows per output row in one pass (kAreaRowBatch rows
# per kernel call, pairs of rows per multiply): 1 to 40 rows per output row (batches of 16
# plus a remainder, odd counts, rows shared by two output rows), over rows whose byte
# spans end around the 32-column step, and the 720p -> 128 letterbox of the face detector.
@pytest.mark.parametrize("color", COLORS)
def test_simd_area_many_rows_per_output_row(color, rng):
    for w, h, ow, oh in [(61, 40, 7, 1), (65, 33, 9, 2), (22, 48, 5, 3), (11, 37, 3, 17), (96, 40, 31, 40)]:
        w, h = (even(w), even(h)) if color in ("nv12", "nv21", "i420", "yuyv") else (w, h)
        frame = make_frame(rng, color, w, h)
        for layout in ("NHWC", "NCHW"):
            assert_paths_agree(pipeline(ow, oh, 3, "float32", layout, color=color, resize="area", std=255.0), frame)
    frame = make_frame(rng, "bgr", 1280, 720)
    pipe = pipeline(128, 128, 3, "float32", "NHWC", color="bgr", resize="area", letterbox=True, mean=127.5, std=127.5)
    assert_paths_agree(pipe, frame)
