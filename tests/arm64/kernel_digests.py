"""Fixed-seed results of the integer-exact native kernels, as one sha256 per case and kernel path.

The kernels promise bit-exact integer results on every path (scalar, AVX2, NEON, NEON with
dot product), so these digests must be equal across paths on one machine and across
machines: the x86 host and the emulated (or real) Pi. Run as a script it prints JSON::

    {"machine": "x86_64", "isas": ["scalar", "avx2"], "cases": {"<case>": {"<isa>": "<sha256>"}}}

A case is a function of a seeded generator that calls one kernel and returns its outputs
(numpy arrays). Inputs include the edge values the kernels promise to handle (extremes,
ties, tails shorter than a vector), so a difference shows up in the digest.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from collections.abc import Callable

import numpy as np

from edgeinf.isa import supported_isas, use_isa

SEED = 20261130
CASES: dict[str, Callable[[np.random.Generator], object]] = {}


def case(name: str):
    """Register a digest case under ``name``."""

    def register(fn):
        CASES[name] = fn
        return fn

    return register


# -- cases ---------------------------------------------------------------------------------
# Preprocessing (csrc/kernels/u8_image_to_tensor): integer outputs are exact by the project's
# rule and float32 outputs are documented as 0 ULP from the scalar reference on every path.
# Source and output sizes are odd and straddle the 8/16/32-element vector widths.
_PREPROCESS_COLORS = {"rgb": 3, "bgr": 3, "rgba": 4, "bgra": 4, "gray": 1, "nv12": 0, "nv21": 0, "i420": 0, "yuyv": 2}


def _frame(rng: np.random.Generator, color: str, width: int, height: int) -> np.ndarray:
    channels = _PREPROCESS_COLORS[color]
    if channels == 0:  # 4:2:0, planes stacked as (h * 3/2, w)
        return rng.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return rng.integers(0, 256, shape, dtype=np.uint8)


def _preprocess(rng: np.random.Generator, dtype: str, resize: str) -> list[np.ndarray]:
    from edgeinf.preprocess import Pipeline
    from edgeinf.types import Layout, Quantization, TensorSpec

    outputs = []
    for color in _PREPROCESS_COLORS:
        for layout, (out_w, out_h) in (("NHWC", (33, 17)), ("NCHW", (17, 31))):
            shape = (1, out_h, out_w, 3) if layout == "NHWC" else (1, 3, out_h, out_w)
            quant = None if dtype == "float32" else Quantization((1 / 128,), (-3 if dtype == "int8" else 128,))
            spec = TensorSpec("input", shape, np.dtype(dtype), Layout(layout), quant)
            pipe = Pipeline.for_input(
                spec, color=color, resize=resize, letterbox=layout == "NCHW", mean=(123.7, 116.3, 103.5), std=57.4
            )
            out = pipe.new_output()
            pipe(_frame(rng, color, 46, 38), out, roi=(3, 2, 41, 35))
            outputs.append(out.view(np.uint32) if dtype == "float32" else out)
    return outputs


for _dtype in ("int8", "uint8", "float32"):
    for _resize in ("nearest", "bilinear", "area"):
        case(f"u8_image_to_tensor/{_dtype}/{_resize}")(
            lambda rng, dtype=_dtype, resize=_resize: _preprocess(rng, dtype, resize)
        )


# int8 operators (csrc/kernels/qs8_*): exact by construction. Inputs span the int8 extremes,
# zero points at both ends, and K/C/width values off the 8/16-lane and 4-deep dot-product
# blocking, so the tails of every vector path are in the digest.


def _int8(rng: np.random.Generator, shape) -> np.ndarray:
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    x.flat[:2] = (-128, 127)
    return x


def _bias(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(-(2**16), 2**16, n, dtype=np.int32)


def _layer(rng: np.random.Generator, kind: str, weight_shape, channels: int, scales=(0.002, 0.02), **options):
    """A ``quant.<kind>`` layer with random int8 weights of ``weight_shape``, then an int32
    bias and weight scales in ``scales`` for its ``channels`` output channels."""
    from edgeinf import quant

    weights, bias = _int8(rng, weight_shape), _bias(rng, channels)
    return getattr(quant, kind)(weights, bias, weight_scale=rng.uniform(*scales, channels), **options)


@case("qs8/fully_connected")
def _fully_connected(rng):
    return [
        _layer(rng, "FullyConnected", (n, k), n, scales=(0.001, 0.02), input_scale=0.05, input_zero_point=zp,
               output_scale=0.9, output_zero_point=-5, activation=act)(_int8(rng, (rows, k)))
        for n, k, rows, zp, act in (
            (37, 83, 5, -128, "none"),
            (16, 64, 3, 127, "relu6"),
            (1, 1, 1, 0, "relu"),
            (9, 257, 4, 3, "none"),
        )
    ]  # fmt: skip


@case("qs8/conv2d")
def _conv2d(rng):
    return [
        _layer(rng, "Conv2D", (o, kh, kw, i), o, stride=stride, padding=padding, dilation=dilation,
               input_scale=0.02, input_zero_point=-7, output_scale=0.3, output_zero_point=4,
               activation="relu6")(_int8(rng, (2, 11, 9, i)))
        for o, kh, kw, i, stride, padding, dilation in (
            (19, 3, 3, 13, 1, "same", 1),
            (8, 1, 1, 32, 2, "valid", 1),
            (5, 3, 2, 3, (2, 1), "same", 2),
        )
    ]  # fmt: skip


@case("qs8/depthwise_conv2d")
def _depthwise(rng):
    return [
        _layer(rng, "DepthwiseConv2D", (1, 3, 3, c * mult), c * mult, depth_multiplier=mult, stride=stride,
               padding=padding, input_scale=0.02, input_zero_point=127, output_scale=0.25,
               output_zero_point=-128)(_int8(rng, (1, 13, 10, c)))
        for c, mult, stride, padding in ((17, 1, 1, "same"), (8, 2, 2, "valid"), (3, 3, 1, "same"))
    ]  # fmt: skip


@case("qs8/depthwise_conv2d_3x3_steps")
def _depthwise_steps(rng):
    # The SIMD 3x3 schedule: steps of 4 output pixels and their 2- and 1-pixel remainders
    # (width 13 at strides 1 and 2), 16-channel blocks plus a tail, repeated-channel rows
    # (multiplier 2) with multipliers above 1 (left shifts) on small products, no -128
    # weight (paired taps on NEON) in the last one.
    from edgeinf import quant

    outputs = []
    for c, mult, stride, padding in (
        (53, 1, 1, "same"),
        (53, 1, 2, "valid"),
        (24, 2, 1, "same"),
        (32, 1, (2, 1), "same"),
    ):
        weights = _int8(rng, (1, 3, 3, c * mult))
        x = _int8(rng, (1, 9, 13, c))
        scales, out_scale = rng.uniform(0.002, 0.02, c * mult), 0.25
        if mult == 2:
            weights //= 32
            x = (x // 16 - 120).astype(np.int8)
            scales, out_scale = rng.uniform(0.002, 0.003, c * mult), 0.02 * 0.0016
        if c == 32:
            weights[weights == -128] = -127
        layer = quant.DepthwiseConv2D(
            weights, _bias(rng, c * mult) // (16 if mult == 1 else 4096), depth_multiplier=mult, stride=stride, padding=padding,
            input_scale=0.02, input_zero_point=-128, weight_scale=scales, output_scale=out_scale,
            output_zero_point=3, activation="relu6" if c == 32 else "none",
        )  # fmt: skip
        outputs.append(layer(x))
    return outputs


@case("qs8/conv2d_few_input_channels")
def _conv2d_stem(rng):
    # The direct kernel of convolutions with at most 4 input channels (the 3-channel stem).
    return [
        _layer(rng, "Conv2D", (o, kh, kw, i), o, stride=stride, padding=padding, input_scale=0.02,
               input_zero_point=127, output_scale=0.5, output_zero_point=-4)(_int8(rng, (2, 19, 23, i)))
        for o, kh, kw, i, stride, padding in (
            (32, 3, 3, 3, 2, "same"),
            (19, 3, 3, 3, 1, "valid"),
            (40, 5, 5, 1, (1, 2), "same"),
        )
    ]  # fmt: skip


@case("qs8/requantize_pool_elementwise")
def _weightless(rng):
    from edgeinf import quant

    acc = rng.integers(-(2**31), 2**31, (7, 35), dtype=np.int64).astype(np.int32)
    acc.flat[:2] = (-(2**31), 2**31 - 1)
    multipliers, shifts = rng.integers(2**30, 2**31, 35).astype(np.int32), rng.integers(-12, 3, 35).astype(np.int32)
    x = _int8(rng, (1, 9, 11, 19))
    a, b = _int8(rng, (3, 37)), _int8(rng, (3, 37))
    return [
        quant.requantize(acc, multipliers, shifts, -3),
        quant.max_pool(x, 3, 2, "same"),
        quant.average_pool(x, (2, 3), 1, "valid"),
        quant.add(
            a, b, a_scale=0.1, a_zero_point=-128, b_scale=0.07, b_zero_point=5, output_scale=0.2, output_zero_point=0
        ),
        quant.mul(
            a, b, a_scale=0.1, a_zero_point=3, b_scale=0.07, b_zero_point=-2, output_scale=0.5, output_zero_point=1
        ),
        quant.softmax(_int8(rng, (4, 33)), input_scale=0.1),
        quant.logistic(_int8(rng, (3, 41)), input_scale=0.06, input_zero_point=-9),
        quant.quantize(rng.uniform(-20, 20, (3, 29)).astype(np.float32), 0.125, -1),
    ]


# -- digests ---------------------------------------------------------------------------------


def as_outputs(value) -> list[np.ndarray]:
    """A case's result as a flat list of contiguous arrays."""
    if isinstance(value, (tuple, list)):
        return [array for item in value for array in as_outputs(item)]
    return [np.ascontiguousarray(value)]


def digest_of(value) -> str:
    """sha256 over dtype, shape and bytes of each output array."""
    digest = hashlib.sha256()
    for array in as_outputs(value):
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def run_case(name: str, isa: str):
    """The outputs of one case on one kernel path."""
    with use_isa(isa):
        return CASES[name](np.random.default_rng(SEED))


def digests(isas: list[str] | None = None) -> dict:
    isas = isas or supported_isas()
    return {
        "machine": platform.machine(),
        "isas": isas,
        "cases": {name: {isa: digest_of(run_case(name, isa)) for isa in isas} for name in sorted(CASES)},
    }


def first_difference(a: np.ndarray, b: np.ndarray) -> str:
    """Where two outputs first differ, for a mismatch message."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    index = int(np.flatnonzero(a.ravel() != b.ravel())[0])
    return f"first difference at flat index {index}: {a.ravel()[index]!r} vs {b.ravel()[index]!r}"


if __name__ == "__main__":
    json.dump(digests(), sys.stdout, indent=1, sort_keys=True)
    print()
