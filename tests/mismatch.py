"""The message of a failed exact comparison of two arrays, shared by the int8 kernel and
engine tests: it names the first differing index and both values."""

from __future__ import annotations

import numpy as np


def first_mismatch(got: np.ndarray, want: np.ndarray) -> str:
    """'' when ``got`` equals ``want`` in dtype, shape and every value, else what differs first."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{got.shape} != expected {want.dtype}{want.shape}"
    diff = np.argwhere(got != want)
    if diff.size == 0:
        return ""
    idx = tuple(int(i) for i in diff[0])
    return f"{len(diff)} of {got.size} values differ; first at index {idx}: got {got[idx]}, expected {want[idx]}"
