"""The image-to-tensor reference: its documented arithmetic, and its agreement with OpenCV.

Tolerances (docs/preprocess.md): packed formats agree with cv2.resize within 1 level
(bilinear: the 7-bit column weights; area: the 11-bit box weights; OpenCV's own aarch64
build adds a level at rare pixels); nearest picks exactly floor((x + 0.5) * in / out);
YUV sources agree within 2.5 levels with OpenCV resizing the planes (chroma repeated over
its 2x2 block, as cvtColor does) followed by the documented BT.601 formula (OpenCV rounds
the resized planes to 8 bits), and with cvtColor-then-resize on a natural photo within 2
levels for 99.5 % of the values (they differ where OpenCV clamps out-of-gamut source
pixels before interpolating, up to 24 levels at saturated colour edges).
"""

from __future__ import annotations

import platform

import cv2
import numpy as np
import pytest
from preprocess_helpers import first_mismatch, make_frame, pipeline

from edgeinf.preprocess import Letterbox, Pipeline, frame_size
from edgeinf.types import Layout, Quantization, TensorSpec

# OpenCV's aarch64 build rounds a few resized pixels a level away from its x86 build
# (seen on the emulated Pi): one more level of slack against OpenCV off x86.
CV_SLACK = 0 if platform.machine() in ("x86_64", "AMD64") else 1


@pytest.fixture(scope="module")
def photo(model_path):
    """A real photo (BGR), cropped to even sizes."""
    img = cv2.imread(str(model_path("grace_hopper")))
    return np.ascontiguousarray(img[:598, :510])


def convert(frame, color, ow, oh, channels=3, dtype="uint8", layout="NHWC", roi=None, **options):
    pipe = pipeline(ow, oh, channels, dtype, layout, **options, color=color)
    out = pipe.new_output()
    pipe(frame, out, roi)
    return out[0]


# -- the documented arithmetic, re-derived in numpy --------------------------------------


def linear_taps(start, length, n, bits, pair_inside):
    one = 1 << bits
    pos = (np.arange(n) + 0.5) * (length / n) - 0.5
    s = np.floor(pos).astype(np.int64)
    w = np.floor((pos - s) * one + 0.5).astype(np.int64)
    s, w = np.where(w == one, s + 1, s), np.where(w == one, 0, w)
    w = np.where(s < 0, 0, w)
    s = np.maximum(s, 0)
    w = np.where(s >= length - 1, 0, w)
    s = np.minimum(s, length - 1)
    if pair_inside and length >= 2:
        edge = s == length - 1
        s, w = np.where(edge, length - 2, s), np.where(edge, one, w)
    return start + s, w


def reference_bgr(frame, ow, oh, scale, bias, dtype, roi=None):
    """Bilinear BGR -> RGB NHWC by the documented fixed-point rules (no letterbox)."""
    h, w = frame.shape[:2]
    rx, ry, rw, rh = roi or (0, 0, w, h)
    x0, wx = linear_taps(rx, rw, ow, 7, True)
    y0, by = linear_taps(ry, rh, oh, 15, False)
    src = frame[..., ::-1].astype(np.int64)
    x1 = np.minimum(x0 + 1, w - 1)
    hrow = (128 - wx)[None, :, None] * src[:, x0] + wx[None, :, None] * src[:, x1]
    h0, h1 = hrow[y0], hrow[np.minimum(y0 + 1, h - 1)]
    v = h0 + (((h1 - h0) * by[:, None, None] + (1 << 14)) >> 15)
    s = (np.float32(scale) / np.float32(128)).astype(np.float32)
    x = v.astype(np.float32) * s + np.float32(bias)
    if dtype == "float32":
        return x
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    return np.rint(np.clip(x, lo, hi)).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8"])
@pytest.mark.parametrize(("size", "roi"), [((61, 37), None), ((224, 224), None), ((40, 90), (13, 7, 301, 415))])
def test_bilinear_matches_documented_fixed_point(photo, dtype, size, roi):
    mean, std, qscale = 127.5, 64.0, 0.05
    if dtype == "float32":
        scale, bias = 1 / std, -mean / std
        zp = 0
    else:
        zp = 3 if dtype == "int8" else 130
        scale, bias = 1 / (std * qscale), zp - mean / (std * qscale)
    got = convert(photo, "bgr", *size, dtype=dtype, roi=roi, mean=mean, std=std, scale=qscale, zero_point=zp)
    want = reference_bgr(photo, *size, scale, bias, dtype, roi)
    msg = first_mismatch(got, want)
    assert not msg, msg


# -- agreement with OpenCV --------------------------------------------------------------


@pytest.mark.parametrize("size", [(224, 224), (101, 77), (640, 700), (1, 1), (510, 598)])
def test_bilinear_within_one_level_of_cv2_resize(photo, size):
    got = convert(photo, "bgr", *size, channel_order="bgr")
    want = cv2.resize(photo, size, interpolation=cv2.INTER_LINEAR)
    msg = first_mismatch(got, want, tol=1 + CV_SLACK)
    assert not msg, msg


@pytest.mark.parametrize("size", [(224, 224), (33, 91), (700, 640)])
def test_area_within_one_level_of_cv2_inter_area(photo, size):
    got = convert(photo, "bgr", *size, channel_order="bgr", resize="area")
    want = cv2.resize(photo, size, interpolation=cv2.INTER_AREA)
    msg = first_mismatch(got, want, tol=1 + CV_SLACK)
    assert not msg, msg


def test_area_integer_factor_is_the_exact_block_mean(rng):
    frame = make_frame(rng, "gray", 64, 48)
    got = convert(frame, "gray", 16, 12, channels=1, resize="area")[..., 0]
    blocks = frame.reshape(12, 4, 16, 4).astype(np.float64).mean(axis=(1, 3))
    want = np.rint(blocks).astype(np.uint8)  # integer outputs round half to even
    msg = first_mismatch(got, want)
    assert not msg, msg


@pytest.mark.parametrize(("src", "dst"), [(510, 224), (598, 101), (37, 200), (7, 3)])
def test_nearest_picks_the_pixel_under_each_centre(src, dst):
    # a frame whose pixel values are their column index: the output shows which columns were picked
    frame = np.tile(np.arange(src, dtype=np.int64) % 256, (2, 1)).astype(np.uint8)
    got = convert(frame, "gray", dst, 2, channels=1, resize="nearest")[0, :, 0]
    want = np.minimum((2 * np.arange(dst) + 1) * src // (2 * dst), src - 1) % 256
    msg = first_mismatch(got, want.astype(np.uint8))
    assert not msg, msg
    # OpenCV's INTER_NEAREST_EXACT agrees except at exact ties, where its fixed point rounds down
    cv_cols = cv2.resize(
        np.tile(np.arange(src, dtype=np.float32), (2, 1)), (dst, 2), interpolation=cv2.INTER_NEAREST_EXACT
    )[0].astype(np.int64)
    ours = np.minimum((2 * np.arange(dst) + 1) * src // (2 * dst), src - 1)
    ties = ((2 * np.arange(dst) + 1) * src) % (2 * dst) == 0
    assert np.array_equal(cv_cols[~ties], ours[~ties])


def bt601(y, u, v, limited=True):
    y, u, v = (a.astype(np.float64) for a in (y, u, v))
    if limited:
        y = 1.164 * (y - 16)
        r, g, b = y + 1.596 * (v - 128), y - 0.391 * (u - 128) - 0.813 * (v - 128), y + 2.018 * (u - 128)
    else:
        r, g, b = y + 1.402 * (v - 128), y - 0.344136 * (u - 128) - 0.714136 * (v - 128), y + 1.772 * (u - 128)
    return np.clip(np.stack([r, g, b], -1), 0, 255)


def yuv_frames(bgr):
    """The photo as I420, NV12, NV21 and YUYV (OpenCV's encoder), plus its Y, U, V planes."""
    h, w = bgr.shape[:2]
    i420 = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420)
    y = i420[:h]
    u = i420[h:].reshape(-1)[: w * h // 4].reshape(h // 2, w // 2)
    v = i420[h:].reshape(-1)[w * h // 4 :].reshape(h // 2, w // 2)
    nv12, nv21 = i420.copy(), i420.copy()
    nv12[h:] = np.stack([u, v], -1).reshape(h // 2, w)
    nv21[h:] = np.stack([v, u], -1).reshape(h // 2, w)
    yuyv = np.empty((h, w, 2), np.uint8)
    yuyv[..., 0] = y
    yuyv[:, 0::2, 1] = np.repeat(u, 2, axis=0)
    yuyv[:, 1::2, 1] = np.repeat(v, 2, axis=0)
    return {"i420": i420, "nv12": nv12, "nv21": nv21, "yuyv": yuyv}, (y, u, v)


CV_CODES = {
    "i420": cv2.COLOR_YUV2RGB_I420,
    "nv12": cv2.COLOR_YUV2RGB_NV12,
    "nv21": cv2.COLOR_YUV2RGB_NV21,
    "yuyv": cv2.COLOR_YUV2RGB_YUY2,
}


@pytest.mark.parametrize("color", ["i420", "nv12", "nv21", "yuyv"])
@pytest.mark.parametrize("yuv_range", ["limited", "full"])
@pytest.mark.parametrize("size", [(224, 224), (77, 130)])
def test_yuv_matches_cv2_resized_planes_then_bt601(photo, color, yuv_range, size):
    frames, (y, u, v) = yuv_frames(photo)
    # chroma repeated over its block (vertically too for 4:2:0; YUYV is 4:2:2 but built from the same planes)
    up = lambda c: np.repeat(np.repeat(c, 2, axis=0), 2, axis=1)  # noqa: E731
    yuv444 = np.ascontiguousarray(np.stack([y, up(u), up(v)], -1))
    small = cv2.resize(yuv444, size, interpolation=cv2.INTER_LINEAR)
    want = bt601(small[..., 0], small[..., 1], small[..., 2], yuv_range == "limited")
    got = convert(frames[color], color, *size, dtype="float32", yuv_range=yuv_range)
    msg = first_mismatch(got, want, tol=2.5 + 2.018 * CV_SLACK)  # OpenCV rounds the planes to 8 bits; B = 2.018 U
    assert not msg, msg


@pytest.mark.parametrize("color", ["i420", "nv12", "nv21", "yuyv"])
def test_yuv_close_to_cv2_cvtcolor_then_resize(photo, color):
    frames, _ = yuv_frames(photo)
    want = cv2.resize(cv2.cvtColor(frames[color], CV_CODES[color]), (224, 224), interpolation=cv2.INTER_LINEAR)
    got = convert(frames[color], color, 224, 224)
    diff = np.abs(got.astype(int) - want)
    assert (diff <= 2).mean() >= 0.995, f"only {(diff <= 2).mean():.4f} within 2 levels"
    assert diff.max() <= 24 + CV_SLACK, first_mismatch(got, want, tol=24 + CV_SLACK)


def test_gray_output_from_bgr_matches_cv2_luma(photo):
    want = cv2.resize(cv2.cvtColor(photo, cv2.COLOR_BGR2GRAY), (97, 65), interpolation=cv2.INTER_LINEAR)
    got = convert(photo, "bgr", 97, 65, channels=1)[..., 0]
    msg = first_mismatch(got, want, tol=1 + CV_SLACK)
    assert not msg, msg


def test_gray_source_fills_three_channels(rng):
    frame = make_frame(rng, "gray", 50, 40)
    want = cv2.resize(frame, (30, 20), interpolation=cv2.INTER_LINEAR)
    for layout in ("NHWC", "NCHW"):
        got = convert(frame, "gray", 30, 20, layout=layout)
        planes = got if layout == "NCHW" else np.moveaxis(got, -1, 0)
        for c in range(3):
            msg = first_mismatch(planes[c], want, tol=1 + CV_SLACK)
            assert not msg, msg


@pytest.mark.parametrize("color", ["rgba", "bgra", "rgb"])
def test_packed_formats_agree_with_bgr(photo, color):
    code = {"rgba": cv2.COLOR_BGR2RGBA, "bgra": cv2.COLOR_BGR2BGRA, "rgb": cv2.COLOR_BGR2RGB}[color]
    frame = cv2.cvtColor(photo, code)
    got = convert(frame, color, 64, 48)
    want = convert(photo, "bgr", 64, 48)
    assert not first_mismatch(got, want), first_mismatch(got, want)


def test_float_normalization_per_channel(photo):
    mean, std = (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)
    got = convert(photo, "bgr", 224, 224, dtype="float32", mean=mean, std=std)
    rgb = cv2.resize(photo, (224, 224), interpolation=cv2.INTER_LINEAR)[..., ::-1].astype(np.float64)
    want = (rgb - np.array(mean)) / np.array(std)
    # OpenCV rounds its resized pixels to 8 bits, edgeinf does not: 1.5 levels apart at most
    msg = first_mismatch(got, want, tol=(1.5 + CV_SLACK) / 57.12)
    assert not msg, msg


def test_quantized_output_uses_scale_and_zero_point(photo):
    got = convert(photo, "bgr", 64, 64, dtype="int8", mean=127.5, std=127.5, scale=1 / 128, zero_point=-5)
    rgb = cv2.resize(photo, (64, 64), interpolation=cv2.INTER_LINEAR)[..., ::-1].astype(np.float64)
    want = np.clip(np.rint((rgb - 127.5) / 127.5 * 128 - 5), -128, 127)
    msg = first_mismatch(got, want, tol=2 + CV_SLACK)
    assert not msg, msg
    assert got.min() >= -128 and got.max() <= 127


def test_default_quantized_inputs_take_raw_pixels(photo):
    u8 = convert(photo, "bgr", 64, 64, dtype="uint8", scale=0.5, zero_point=7)
    i8 = convert(photo, "bgr", 64, 64, dtype="int8", scale=0.5, zero_point=7)
    want = cv2.resize(photo, (64, 64), interpolation=cv2.INTER_LINEAR)[..., ::-1]
    msg = first_mismatch(u8, want, tol=1 + CV_SLACK)
    assert not msg, msg
    assert np.array_equal(i8.astype(int), u8.astype(int) - 128)


def test_nchw_is_nhwc_transposed(photo):
    a = convert(photo, "bgr", 45, 33, dtype="float32", mean=10.0, std=3.0)
    b = convert(photo, "bgr", 45, 33, dtype="float32", layout="NCHW", mean=10.0, std=3.0)
    assert not first_mismatch(np.moveaxis(a, -1, 0), b)


def test_channel_order_bgr_swaps_channels(photo):
    a = convert(photo, "bgr", 40, 30)
    b = convert(photo, "bgr", 40, 30, channel_order="bgr")
    assert not first_mismatch(a[..., ::-1], b)


def test_roi_equals_converting_the_crop(photo):
    roi = (101, 57, 203, 311)
    got = convert(photo, "bgr", 64, 96, roi=roi)
    crop = np.ascontiguousarray(photo[57 : 57 + 311, 101 : 101 + 203])
    assert not first_mismatch(got, convert(crop, "bgr", 64, 96))
    # and a strided view of the frame is read in place
    assert not first_mismatch(got, convert(photo[57 : 57 + 311, 101 : 101 + 203], "bgr", 64, 96))


def test_letterbox_pads_and_maps_back(photo):
    pipe = pipeline(128, 128, 3, "uint8", "NHWC", color="bgr", letterbox=True, pad=(1.0, 2.0, 3.0))
    out = pipe.new_output()
    lb = pipe(photo, out)
    # 510x598 (w x h): scale 128/598, content 109x128 centred
    assert (lb.content_w, lb.content_h, lb.pad_x, lb.pad_y) == (109, 128, 9, 0)
    img = out[0]
    assert (img[:, :9] == [1, 2, 3]).all() and (img[:, 9 + 109 :] == [1, 2, 3]).all()
    content = convert(photo, "bgr", 109, 128)
    assert not first_mismatch(img[:, 9 : 9 + 109], content)
    corners = lb.to_source([[9, 0, 9 + 109, 128]])
    np.testing.assert_allclose(corners, [[0, 0, 510, 598]], atol=1e-9)
    centre = [(9 + 109 / 2) / 128, 0.5]  # the content's centre, in fractions of the output
    np.testing.assert_allclose(lb.to_source(centre, normalized=True), [255, 299], atol=1e-9)


def test_letterbox_with_roi_maps_to_frame_coordinates(photo):
    pipe = pipeline(100, 50, 3, "float32", "NCHW", color="bgr", letterbox=True, pad=0.0, std=255.0)
    out = pipe.new_output()
    lb = pipe(photo, out, roi=(10, 20, 200, 200))
    assert (lb.content_w, lb.content_h, lb.pad_x, lb.pad_y) == (50, 50, 25, 0)
    assert (out[0, :, :, :25] == 0).all()
    np.testing.assert_allclose(lb.to_source([25, 0, 75, 50]), [10, 20, 210, 220])


def test_one_pixel_image_fills_the_output(rng):
    frame = np.array([[[10, 20, 30]]], np.uint8)
    for resize in ("nearest", "bilinear", "area"):
        got = convert(frame, "bgr", 5, 3, resize=resize)
        assert (got == [30, 20, 10]).all(), resize


@pytest.mark.parametrize("resize", ["bilinear", "nearest", "area"])
@pytest.mark.parametrize("color", ["bgr", "nv12"])
def test_threads_give_the_same_result(rng, resize, color):
    frame = make_frame(rng, color, 300, 200)
    for size in [(150, 120), (64, 37), (400, 300)]:
        a = convert(frame, color, *size, dtype="float32", std=255.0, resize=resize)
        b = convert(frame, color, *size, dtype="float32", std=255.0, resize=resize, threads=2)
        assert not first_mismatch(a, b), (size, first_mismatch(a, b))


def test_each_frame_gets_its_own_result_when_plans_and_buffers_are_reused(photo, rng):
    # One pipeline, frames one after another, then a plan of another size in between on
    # the same thread: the row buffers kept from call to call (and the source rows cached
    # in them when upscaling) must never leak into the next frame.
    flipped = np.ascontiguousarray(photo[::-1, ::-1])
    # upscale (cached source rows; from a 2-row strip, the rows a call ends with are the
    # rows the next call starts with), downscale
    for rows, size in [(slice(None), (700, 650)), (slice(0, 2), (600, 9)), (slice(None), (61, 37))]:
        a, b = np.ascontiguousarray(photo[rows]), np.ascontiguousarray(flipped[rows])
        pipe = pipeline(*size, dtype="uint8", color="bgr")
        other = pipeline(13, 300, dtype="uint8", color="bgr")
        out, scratch = pipe.new_output(), other.new_output()
        for frame, between in ((a, False), (b, False), (a, True)):
            if between:
                other(flipped, scratch)
            pipe(frame, out)
            want = reference_bgr(frame, *size, 1.0, 0.0, "uint8")
            msg = first_mismatch(out[0], want)
            assert not msg, (size, msg)


def test_plan_cache_keeps_a_bounded_number_of_frame_shapes(rng):
    pipe = pipeline(16, 12, dtype="uint8", color="bgr")
    out = pipe.new_output()
    frames = [make_frame(rng, "bgr", 20 + 2 * k, 18) for k in range(12)]
    for frame in frames + frames[:3]:
        pipe(frame, out)
        assert np.array_equal(out[0], convert(frame, "bgr", 16, 12)), frame.shape
    assert len(pipe._plans) <= 8 and set(pipe._whole_frame) <= {key[0] for key in pipe._plans}


def test_pipeline_writes_into_model_like_buffers(rng):
    spec = TensorSpec("in", (1, 3, 32, 48), np.dtype(np.float32), Layout.NCHW)
    pipe = Pipeline.for_input(spec, color="nv12", mean=0.0, std=255.0)
    assert pipe.output_shape == (1, 3, 32, 48) and pipe.layout == Layout.NCHW
    out = np.zeros(pipe.output_shape, np.float32)
    frame = make_frame(rng, "nv12", 64, 40)
    assert isinstance(pipe(frame, out), Letterbox)
    assert out.min() >= 0.0 and out.max() <= 1.0 and out.std() > 0
    # the batch dimension may be dropped
    out3 = np.zeros(pipe.output_shape[1:], np.float32)
    pipe(frame, out3)
    assert np.array_equal(out3, out[0])


def test_spec_with_dynamic_size_needs_size():
    spec = TensorSpec("in", (1, 3, -1, -1), np.dtype(np.float32), Layout.NCHW)
    with pytest.raises(ValueError, match="size=\\(width, height\\)"):
        Pipeline.for_input(spec)
    assert Pipeline.for_input(spec, size=(20, 10)).output_shape == (1, 3, 10, 20)


def test_quantized_spec_parameters_are_used():
    spec = TensorSpec("in", (1, 2, 2, 3), np.dtype(np.uint8), Layout.NHWC, Quantization((2.0,), (10,)))
    pipe = Pipeline.for_input(spec, color="gray", mean=0.0, std=1.0)
    out = pipe.new_output()
    pipe(np.full((4, 4), 100, np.uint8), out)
    assert (out == 60).all()  # 100 / 2 + 10


def test_frame_size_reads_each_layout(rng):
    assert frame_size(make_frame(rng, "nv12", 64, 40), "nv12") == (64, 40)
    assert frame_size(make_frame(rng, "yuyv", 64, 40), "yuyv") == (64, 40)
    assert frame_size(make_frame(rng, "bgra", 5, 3), "bgra") == (5, 3)
