"""The native affine crop (edgeinf._C.warp_affine): every SIMD path equals the scalar
reference bit for bit, the values stay within two levels of OpenCV's warpAffine
(INTER_LINEAR, black border; mean difference under half a level), and bad arguments are refused before any memory is read."""

from __future__ import annotations

import math

import numpy as np
import pytest
from preprocess_helpers import first_mismatch

from edgeinf import _C
from edgeinf.errors import InputError
from edgeinf.isa import supported_isas, use_isa

cv2 = pytest.importorskip("cv2")

SIMD = [isa for isa in supported_isas() if isa != "scalar"]
UNIT = ((1.0, 1.0, 1.0), (0.0, 0.0, 0.0))


def crop_map(angle: float, scale: float, cx: float, cy: float, size: int) -> np.ndarray:
    """The 2x3 map from crop pixels to image positions: a square of `size` pixels, rotated and scaled about (cx, cy)."""
    c, s = math.cos(angle), math.sin(angle)
    m = np.array([[c * scale, -s * scale, 0.0], [s * scale, c * scale, 0.0]])
    m[:, 2] = np.array([cx, cy]) - m[:, :2] @ [size / 2, size / 2]
    return m


def warp(isa, image, m, out_shape, index=(0, 1, 2), scale=(1.0, 1.0, 1.0), bias=(0.0, 0.0, 0.0)):
    out = np.full(out_shape, np.nan, np.float32)  # stale values must not survive
    with use_isa(isa):
        _C.warp_affine(image, out, tuple(m.ravel()), index, scale, bias)
    return out


def smooth_image(rng, h, w, c):
    image = rng.integers(0, 256, (h, w, c), np.uint8)
    return cv2.GaussianBlur(image, (5, 5), 1.5).reshape(h, w, c)


# Rotations, shrinks and enlargements; crops inside the image, across its edges and corners,
# and wholly outside it.
CROPS = [
    (0.0, 1.0, 40, 30),
    (0.3, 0.8, 41.5, 29.25),
    (-1.2, 2.7, 60, 45),
    (3.0, 0.37, 10, 5),
    (0.7, 1.9, 79, 59),
    (-2.2, 1.3, 0, 0),
    (1.1, 1.0, 300, 200),
]


@pytest.mark.skipif(not SIMD, reason="no SIMD path is built and supported on this machine")
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("out_c", [1, 3])
def test_simd_equals_scalar(channels, out_c, rng):
    image = smooth_image(rng, 60, 80, channels)
    index = (min(2, channels - 1), 0, channels - 1)[:out_c] + (0,) * (3 - out_c)
    for angle, scale, cx, cy in CROPS:
        for size in (1, 2, 7, 33, 64):
            m = crop_map(angle, scale, cx, cy, size)
            want = warp("scalar", image, m, (size, size, out_c), index, (0.0173, 1 / 255, 2.0), (-1.0, 0.0, 0.5))
            for isa in SIMD:
                got = warp(isa, image, m, (size, size, out_c), index, (0.0173, 1 / 255, 2.0), (-1.0, 0.0, 0.5))
                msg = first_mismatch(got.view(np.uint32), want.view(np.uint32))
                assert not msg, f"{isa} vs scalar, {channels} channels, crop {angle, scale, cx, cy, size}: {msg}"


@pytest.mark.parametrize("isa", supported_isas())
def test_within_two_levels_of_opencv_warp_affine(isa, rng):
    image = smooth_image(rng, 120, 160, 3)
    for angle, scale, cx, cy in CROPS:
        m = crop_map(angle, scale, 2 * cx, 2 * cy, 64)
        got = warp(isa, image, m, (1, 64, 64, 3))[0]
        want = cv2.warpAffine(
            image, m, (64, 64), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderValue=(0, 0, 0)
        ).astype(np.float32)
        # OpenCV samples at 1/32 pixel and rounds to whole levels; this samples at 1/128 and
        # keeps the fraction: steep edges differ by more than one level at a few pixels
        assert not first_mismatch(got, want, tol=2.0), first_mismatch(got, want, tol=2.0)
        assert np.abs(got - want).mean() < 0.35


def test_strided_rows_and_channel_order(rng):
    frame = smooth_image(rng, 50, 90, 4)
    view = frame[5:45, 10:80]  # rows longer than the pixels they hold
    m = crop_map(0.4, 0.9, 35, 20, 24)
    rgb = warp("scalar", np.ascontiguousarray(view[..., [2, 1, 0]]), m, (24, 24, 3))
    for isa in supported_isas():
        got = warp(isa, view, m, (24, 24, 3), index=(2, 1, 0))
        assert not first_mismatch(got, rgb), first_mismatch(got, rgb)


def test_the_border_is_black_and_the_normalization_applies(rng):
    image = np.full((10, 10, 3), 200, np.uint8)
    m = np.array([[1.0, 0.0, -20.0], [0.0, 1.0, 0.0]])  # every output pixel left of the image
    for isa in supported_isas():
        assert np.all(warp(isa, image, m, (4, 4, 3), scale=(2.0,) * 3, bias=(-1.0,) * 3) == -1.0)
        inside = warp(isa, image, np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 2.0]]), (4, 4, 3), scale=(1 / 255,) * 3)
        assert np.allclose(inside, 200 / 255, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("image", "out", "matrix", "index", "message"),
    [
        (np.zeros((4, 4, 3), np.float32), np.zeros((2, 2, 3), np.float32), None, (0, 1, 2), "uint8"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 2, 3), np.float64), None, (0, 1, 2), "float32"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((3, 2, 2), np.float32)[..., :2].T, None, (0, 1, 2), "C-contiguous"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 2, 2), np.float32), None, (0, 1, 2), "channels must be 1 or 3"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 2, 3), np.float32), None, (0, 1, 3), "channel index"),
        (np.zeros((4, 4, 3), np.uint8)[:, ::-1], np.zeros((2, 2, 3), np.float32), None, (0, 1, 2), "packed pixels"),
        (np.zeros((4, 4, 5), np.uint8), np.zeros((2, 2, 3), np.float32), None, (0, 1, 2), "bytes per pixel"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((2, 2, 3), np.float32), (1, 0, 20000, 0, 1, 0), (0, 1, 2), "|m|"),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((9000, 1, 3), np.float32), None, (0, 1, 2), "output height"),
        (
            np.zeros((4, 4, 3), np.uint8),
            np.zeros((2, 2, 3), np.float32),
            (1, 0, math.nan, 0, 1, 0),
            (0, 1, 2),
            "finite",
        ),
        (np.zeros((4, 4, 3), np.uint8), np.zeros((800, 800, 3), np.float32), (30, 0, 0, 0, 1, 0), (0, 1, 2), "farther"),
    ],
)
def test_bad_arguments_are_refused_naming_the_problem(image, out, matrix, index, message):
    matrix = matrix or (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
    with pytest.raises(InputError, match=message.replace("|", r"\|")):
        _C.warp_affine(image, out, matrix, index, *UNIT)
