"""Shared helpers of the preprocessing tests: frame makers, pipelines, mismatch messages."""

from __future__ import annotations

import numpy as np

from edgeinf.preprocess import Pipeline
from edgeinf.types import Layout, Quantization, TensorSpec

PACKED_CHANNELS = {"rgb": 3, "bgr": 3, "rgba": 4, "bgra": 4, "gray": 1, "yuyv": 2}


def make_frame(rng: np.random.Generator, color: str, width: int, height: int) -> np.ndarray:
    """A random uint8 frame of the given format (4:2:0 as (h*3/2, w), YUYV as (h, w, 2))."""
    if color in ("nv12", "nv21", "i420"):
        return rng.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8)
    c = PACKED_CHANNELS[color]
    shape = (height, width) if c == 1 else (height, width, c)
    return rng.integers(0, 256, shape, dtype=np.uint8)


def spec_for(width, height, channels=3, dtype="float32", layout="NHWC", scale=1 / 128, zero_point=0):
    dt = np.dtype(dtype)
    shape = (1, height, width, channels) if layout == "NHWC" else (1, channels, height, width)
    q = Quantization((scale,), (zero_point,)) if dt != np.float32 else None
    return TensorSpec("input", shape, dt, Layout(layout), q)


def pipeline(width, height, channels=3, dtype="float32", layout="NHWC", scale=1 / 128, zero_point=0, **options):
    spec = spec_for(width, height, channels, dtype, layout, scale, zero_point)
    return Pipeline.for_input(spec, **options)


def first_mismatch(got: np.ndarray, want: np.ndarray, tol: float = 0) -> str:
    """'' when equal within tol, else a message naming the first differing index and values."""
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    bad = np.abs(got.astype(np.float64) - want.astype(np.float64)) > tol
    if not bad.any():
        return ""
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{int(bad.sum())} of {bad.size} differ (tol {tol}); first at {idx}: got {got[idx]!r}, want {want[idx]!r}"
