"""INT8 operators with TFLite's exact arithmetic, on numpy arrays.

Every operator here gives the same int8 output, bit for bit, as TFLite's reference
kernels for the same model (checked against ai-edge-litert in the tests): parameters are
derived from float32 scales exactly as TFLite's ``Prepare`` functions derive them (which
products are taken in float32 and which in float64 matters), and the arithmetic is
gemmlowp's fixed point (``quantize_multiplier``, ``saturating_rounding_doubling_high_mul``,
``rounding_divide_by_pot``). The work runs in C++ (``edgeinf._C``) on the fastest kernel
path of the CPU (AVX2, NEON, NEON dot product), with the GIL released.

Weights are symmetric int8 (zero point 0, TFLite's int8 specification), per tensor or per
output channel; activations are int8 with any zero point in [-128, 127].

Every bad argument raises `edgeinf.InputError` (a ValueError) naming what was expected and
what came. A batch (or row) dimension of 0 gives an empty output of the matching shape; a
spatial, channel or weight dimension of 0 is an InputError.

Validation happens once, in the native bindings (csrc/bindings/quant_arrays.h): ``_C`` is
private but callable, so it checks everything that could touch memory or break a kernel's
assumptions, for every caller. This module turns Python values into the bindings' typed
arguments (numbers, int32 arrays, names to codes) and checks only what its own arithmetic
needs: the scales it multiplies and divides, the shapes it reads.

>>> import numpy as np
>>> from edgeinf import quant
>>> w = np.array([[1, -2], [3, 4]], np.int8)
>>> fc = quant.FullyConnected(w, input_scale=0.5, input_zero_point=0, weight_scale=0.25,
...                           output_scale=0.125, output_zero_point=0)
>>> fc(np.array([[2, 1]], np.int8)).tolist()
[[0, 10]]
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Union

import numpy as np

from . import _C
from ._C import _run_layer
from .errors import InputError

log = logging.getLogger(__name__)

Scale = Union[float, Sequence[float], np.ndarray]

ACTIVATIONS = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}
"""Fused activations, with TFLite's ActivationFunctionType codes."""

SOFTMAX_OUTPUT = (1.0 / 256, -128)
"""Scale and zero point of int8 softmax and logistic outputs (fixed by TFLite)."""

__all__ = [
    "ACTIVATIONS",
    "SOFTMAX_OUTPUT",
    "Conv2D",
    "DepthwiseConv2D",
    "FullyConnected",
    "activation_range",
    "add",
    "average_pool",
    "conv_output_size",
    "dequantize",
    "logistic",
    "max_pool",
    "mul",
    "multiply_by_quantized_multiplier",
    "quantize",
    "quantize_multiplier",
    "requantize",
    "softmax",
]


# ---------------------------------------------------------------- validation helpers


def _int8(x: np.ndarray, what: str) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise InputError(f"{what}: expected a numpy int8 array, got {type(x).__name__}")
    if x.dtype != np.int8:
        raise InputError(f"{what}: expected dtype int8, got {x.dtype}")
    return np.ascontiguousarray(x)


def _run(capsule, x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``run(x, out)`` of a prepared layer, by its capsule through ``_C._run_layer`` (not
    pybind11's dispatcher, about a microsecond less per call). The native side checks a
    C-contiguous int8 array itself (and the output geometry), so the usual call skips the
    Python checks, about a microsecond; they run only when it rejects ``x``, to name the
    problem or to copy a strided array."""
    try:
        return _run_layer(capsule, x, out)
    except (TypeError, ValueError):
        return _run_layer(capsule, _int8(x, "x"), out)


def _real(v, what: str) -> float:
    """``v`` as a Python float; InputError for anything that is not a real number."""
    if isinstance(v, (bool, np.bool_)):
        raise InputError(f"{what}: expected a number, got {v!r}")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise InputError(f"{what}: expected a number, got {v!r}") from None


def _int(v, what: str, lo: int, hi: int) -> int:
    """``v`` as a Python int in [lo, hi]; InputError otherwise (bools are not integers here)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise InputError(f"{what}: expected an integer, got {v!r}")
    if not lo <= int(v) <= hi:
        raise InputError(f"{what}: expected an integer in [{lo}, {hi}], got {v}")
    return int(v)


_INT32 = (-(2**31), 2**31 - 1)
_MAX_GEOMETRY = 2**31 - 1  # strides, dilations, pool sizes: the native checks bound them further


def _int32_array(v, what: str) -> np.ndarray:
    """An integer scalar or sequence as a contiguous 1-D int32 array, refusing values that would wrap."""
    try:
        arr = np.atleast_1d(np.asarray(v))
    except (TypeError, ValueError):
        raise InputError(f"{what}: expected integers, got {v!r}") from None
    if arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise InputError(f"{what}: expected an integer or a 1-D sequence of integers, got {v!r}")
    if arr.size and (arr.min() < _INT32[0] or arr.max() > _INT32[1]):
        raise InputError(f"{what}: values must fit int32, got {v!r}")
    return np.ascontiguousarray(arr.astype(np.int32))


def _float32(s: float, what: str) -> float:
    """``s`` rounded to float32, as TFLite keeps scales (the bindings check its range)."""
    return float(np.float32(_real(s, what)))


def _scale(s: float, what: str) -> float:
    """A scale this module computes with: float32, positive and finite."""
    value = _float32(s, f"{what} scale")
    if not (math.isfinite(value) and value > 0.0):
        raise InputError(f"{what}: scale must be positive and finite (as float32), got {s!r}")
    return value


def _scales(s: Scale, what: str, count: int | None = None) -> np.ndarray:
    try:
        arr = np.atleast_1d(np.asarray(s, dtype=np.float64)).astype(np.float32)
    except (TypeError, ValueError):
        raise InputError(f"{what}: expected a scale or a sequence of scales, got {s!r}") from None
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"{what}: expected a scale or a 1-D sequence of scales, got shape {arr.shape}")
    if count is not None and arr.size not in (1, count):
        raise InputError(f"{what}: expected 1 or {count} scales (one per output channel), got {arr.size}")
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{what}: scales must be positive and finite (as float32), got {arr[i]!r} at index {i}")
    return arr


def _zero_point(z: int, what: str) -> int:
    """``z`` as a Python int; the bindings check the int8 range, here only what a C int32 can carry."""
    if isinstance(z, (bool, np.bool_)) or not isinstance(z, (int, np.integer)):
        raise InputError(f"{what}: zero point must be an integer, got {z!r}")
    if not _INT32[0] <= int(z) <= _INT32[1]:
        raise InputError(f"{what}: zero point must fit int32, got {z}")
    return int(z)


def _int8_zero_point(z: int, what: str) -> int:
    """The zero point of an int8 tensor, in [-128, 127] (the kernels negate it into an offset)."""
    value = _zero_point(z, what)
    if not -128 <= value <= 127:
        raise InputError(f"{what}: zero point of an int8 tensor must be in [-128, 127], got {value}")
    return value


def _activation(activation: str) -> int:
    try:
        return ACTIVATIONS[activation]
    except KeyError:
        raise InputError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}") from None


def _pair(v: int | Sequence[int], what: str) -> tuple[int, int]:
    try:
        pair = (v, v) if isinstance(v, (int, np.integer)) else tuple(v)
    except TypeError:
        pair = ()
    if len(pair) != 2 or not all(
        isinstance(p, (int, np.integer)) and not isinstance(p, (bool, np.bool_)) and 1 <= p <= _MAX_GEOMETRY
        for p in pair
    ):
        raise InputError(f"{what}: expected a positive integer or a pair of them (below 2**31), got {v!r}")
    return int(pair[0]), int(pair[1])


def _bias(bias: np.ndarray | None, n: int) -> np.ndarray | None:
    if bias is None:
        return None
    if not isinstance(bias, np.ndarray) or bias.dtype != np.int32:
        raise InputError(f"bias: expected an int32 array, got {getattr(bias, 'dtype', type(bias).__name__)}")
    if bias.shape != (n,):
        raise InputError(f"bias: expected shape ({n},), got {bias.shape}")
    return np.ascontiguousarray(bias)


def _multipliers(reals: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    pairs = [_C.quantize_multiplier(float(r)) for r in reals]
    return np.array([p[0] for p in pairs], np.int32), np.array([p[1] for p in pairs], np.int32)


# ---------------------------------------------------------------- parameters


def quantize_multiplier(real_multiplier: float) -> tuple[int, int]:
    """TFLite's ``QuantizeMultiplier``: a real factor as a Q31 multiplier and a shift.

    Returns:
        ``(multiplier, shift)`` with ``real ~= multiplier * 2**(shift - 31)``.

    >>> quantize_multiplier(0.5)
    (1073741824, 0)
    """
    return _C.quantize_multiplier(_real(real_multiplier, "real_multiplier"))


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TFLite's ``MultiplyByQuantizedMultiplier`` (double rounding) on an int32 array.

    >>> multiply_by_quantized_multiplier(np.array([100, -100, 3], np.int32), 1073741824, 0).tolist()
    [50, -50, 2]
    """
    return _C.multiply_by_quantized_multiplier(
        np.ascontiguousarray(x), _int(multiplier, "multiplier", *_INT32), _int(shift, "shift", *_INT32)
    )


def activation_range(activation: str, scale: float, zero_point: int) -> tuple[int, int]:
    """The int8 clamp of a fused activation, as TFLite's CalculateActivationRangeQuantized.

    >>> activation_range("relu6", 0.05, -128)
    (-128, -8)
    """
    return _C.activation_range(
        _activation(activation), _float32(scale, "output scale"), _zero_point(zero_point, "output")
    )


def conv_output_size(size: int, filter_size: int, stride: int, dilation: int, padding: str) -> tuple[int, int]:
    """Output length and leading padding of a convolution / pool axis, as TFLite computes them.

    Returns:
        ``(output_size, pad_before)``; SAME padding puts the odd extra element after.

    >>> conv_output_size(7, 3, 2, 1, "same")
    (4, 1)
    """
    size = _int(size, "size", 0, 2**62)
    filter_size = _int(filter_size, "filter_size", 1, 2**31 - 1)
    stride = _int(stride, "stride", 1, 2**31 - 1)
    dilation = _int(dilation, "dilation", 1, 2**31 - 1)
    effective = (filter_size - 1) * dilation + 1
    if padding == "same":
        out = (size + stride - 1) // stride
    elif padding == "valid":
        out = (size + stride - effective) // stride
    else:
        raise InputError(f"padding must be 'same' or 'valid', got {padding!r}")
    if out < 1:
        raise InputError(
            f"input size {size} is smaller than the filter extent {effective} with {padding!r} padding: no output"
        )
    total = max(0, (out - 1) * stride + effective - size)
    return out, total // 2


# ---------------------------------------------------------------- element-wise conversions


def _channel_view(x: np.ndarray, n: int, axis: int | None) -> tuple[int, int]:
    """(outer, inner) of x seen as [outer, n, inner] around ``axis``."""
    if axis is None or n == 1:
        return 1, x.size
    if not -x.ndim <= axis < x.ndim:
        raise InputError(f"axis {axis} is out of range for an array of shape {x.shape}")
    axis %= x.ndim
    if x.shape[axis] != n:
        raise InputError(f"expected {x.shape[axis]} scales for axis {axis} of shape {x.shape}, got {n}")
    return int(np.prod(x.shape[:axis], dtype=np.int64)), int(np.prod(x.shape[axis + 1 :], dtype=np.int64))


def quantize(
    x: np.ndarray, scale: Scale, zero_point: int | Sequence[int], axis: int | None = None, out: np.ndarray | None = None
) -> np.ndarray:
    """float32 -> int8 as TFLite's QUANTIZE: ``clamp(round(x / scale) + zero_point)``.

    The division is in float32 and rounds half away from zero. A NaN gives the zero point.

    Args:
        x: float32 array.
        scale, zero_point: per tensor, or per index of ``axis`` (sequences).
        axis: the channel axis of per-channel parameters.
        out: optional int8 output of x's shape.

    >>> quantize(np.array([0.26, -1.0, 100.0], np.float32), 0.1, 1).tolist()
    [4, -9, 127]
    """
    x = np.asarray(x)
    scales = _scales(scale, "quantize")
    zps = np.array([_zero_point(z, "quantize") for z in np.atleast_1d(zero_point)], np.int32)
    if zps.size != scales.size:
        raise InputError(f"quantize: {scales.size} scales but {zps.size} zero points")
    outer, inner = _channel_view(x, scales.size, axis)
    return _C.quantize(np.ascontiguousarray(x), scales, zps, outer, inner, out)


def dequantize(
    q: np.ndarray, scale: Scale, zero_point: int | Sequence[int], axis: int | None = None, out: np.ndarray | None = None
) -> np.ndarray:
    """int8 -> float32 as TFLite's DEQUANTIZE: ``scale * (q - zero_point)``.

    >>> dequantize(np.array([4, -9], np.int8), 0.5, 1).tolist()
    [1.5, -5.0]
    """
    q = _int8(q, "q")
    scales = _scales(scale, "dequantize")
    zps = np.array([_zero_point(z, "dequantize") for z in np.atleast_1d(zero_point)], np.int32)
    if zps.size != scales.size:
        raise InputError(f"dequantize: {scales.size} scales but {zps.size} zero points")
    outer, inner = _channel_view(q, scales.size, axis)
    return _C.dequantize(q, scales, zps, outer, inner, out)


def requantize(
    acc: np.ndarray,
    multiplier: int | Sequence[int] | np.ndarray,
    shift: int | Sequence[int] | np.ndarray,
    zero_point: int,
    act_min: int = -128,
    act_max: int = 127,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """int32 accumulators -> int8 with per-channel (last axis) or per-tensor parameters.

    ``out = clamp(multiply_by_quantized_multiplier(acc, m, s) + zero_point, act_min, act_max)``

    >>> requantize(np.array([[100, -100]], np.int32), 1073741824, 0, 3).tolist()
    [[53, -47]]
    """
    m, s = _int32_array(multiplier, "multiplier"), _int32_array(shift, "shift")
    act_min, act_max = _int(act_min, "act_min", *_INT32), _int(act_max, "act_max", *_INT32)
    return _C.requantize(np.ascontiguousarray(acc), m, s, _zero_point(zero_point, "output"), act_min, act_max, out)


# ---------------------------------------------------------------- layers with weights


class _Quantized:
    """Shared checks of the layers: input/output parameters and the activation clamp."""

    def _io(self, input_scale, input_zero_point, output_scale, output_zero_point, activation):
        self.input_scale = _scale(input_scale, "input")
        self.input_zero_point = _zero_point(input_zero_point, "input")
        self.output_scale = _scale(output_scale, "output")
        self.output_zero_point = _zero_point(output_zero_point, "output")
        self.activation = activation
        self.act_min, self.act_max = activation_range(activation, self.output_scale, self.output_zero_point)

    def _window(self, weights, stride, padding, dilation, io) -> tuple[int, int, int, int, bool]:
        """Checks and keeps a convolution's window and quantization (``io``: the arguments of
        `_io`); returns the native layer's (stride_h, stride_w, dilation_h, dilation_w, same)."""
        if padding not in ("same", "valid"):
            raise InputError(f"padding must be 'same' or 'valid', got {padding!r}")
        self._io(*io)
        self.stride, self.dilation, self.padding = _pair(stride, "stride"), _pair(dilation, "dilation"), padding
        self.kernel_size = weights.shape[1:3]
        return (*self.stride, *self.dilation, padding == "same")

    def _fixed_point(self, weight_scale: Scale, channels: int) -> tuple:
        """Keeps the per-channel fixed-point multipliers and shifts of ``input_scale *
        weight_scale / output_scale`` (convolutions always take this float64 product, as
        PopulateConvolutionQuantizationParams does); returns the native layer's
        (multiplier, shift, output_zero_point, act_min, act_max)."""
        ws = _scales(weight_scale, "weight", channels)
        reals = [self.input_scale * float(ws[c % ws.size]) / self.output_scale for c in range(channels)]
        self.multiplier, self.shift = _multipliers(reals)
        return self.multiplier, self.shift, self.output_zero_point, self.act_min, self.act_max


class FullyConnected(_Quantized):
    """int8 fully connected layer (TFLite FULLY_CONNECTED), also the int8 GEMM.

    ``y[..., n] = clamp(round(acc * input_scale * weight_scale[n] / output_scale) + output_zero_point)``
    with ``acc = bias[n] + sum_k w[n, k] * (x[..., k] - input_zero_point)`` in int32 and the
    product and rounding (half away from zero) in float64: TFLite's reference kernel
    requantizes FULLY_CONNECTED this way since LiteRT 2.0 (its optimized kernel and
    XNNPACK use other roundings; see docs/int8.md).

    Args:
        weights: int8 ``[N, K]`` (TFLite's filter layout), zero point 0.
        bias: optional int32 ``[N]`` in units of ``input_scale * weight_scale``.
        input_scale, input_zero_point, output_scale, output_zero_point: activation quantization.
        weight_scale: one scale, or ``N`` scales for per-channel weights.
        activation: fused clamp: ``"none"``, ``"relu"``, ``"relu6"``, ``"relu_n1_to_1"``.

    Raises:
        InputError: wrong dtype or shape, non-positive or non-finite scale, zero point
            outside int8, or a scale ratio no multiplier can represent.
    """

    def __init__(
        self,
        weights: np.ndarray,
        bias: np.ndarray | None = None,
        *,
        input_scale: float,
        input_zero_point: int,
        weight_scale: Scale,
        output_scale: float,
        output_zero_point: int,
        activation: str = "none",
    ):
        weights = _int8(weights, "weights")
        if weights.ndim != 2:
            raise InputError(f"weights: expected [N, K], got shape {weights.shape}")
        n = weights.shape[0]
        self._io(input_scale, input_zero_point, output_scale, output_zero_point, activation)
        ws = _scales(weight_scale, "weight", n)
        # TFLite's reference FULLY_CONNECTED requantizes in double (round half away from
        # zero) with this factor per channel, not with a fixed-point multiplier.
        self.scale = np.array([self.input_scale * float(ws[c % ws.size]) / self.output_scale for c in range(n)])
        requantization = (self.scale, self.output_zero_point, self.act_min, self.act_max)
        self._op = _C.Qs8FullyConnected(weights, _bias(bias, n), self.input_zero_point, requantization)
        self._capsule = self._op._capsule()  # for _run: points at self._op, which lives as long

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Apply to int8 ``x[..., K]``; returns (or fills ``out``) int8 ``[..., N]``."""
        return _run(self._capsule, x, out)


class Conv2D(_Quantized):
    """int8 2-D convolution, NHWC (TFLite CONV_2D).

    Args:
        weights: int8 ``[O, KH, KW, I]`` (TFLite's OHWI filter), zero point 0.
        bias: optional int32 ``[O]``.
        stride, dilation: an int or ``(h, w)``.
        padding: ``"same"`` or ``"valid"``, with TFLite's split of odd padding.
        weight_scale: one scale or ``O`` scales (per output channel).
        others: as `FullyConnected`.
    """

    def __init__(
        self,
        weights: np.ndarray,
        bias: np.ndarray | None = None,
        *,
        stride: int | Sequence[int] = 1,
        padding: str = "same",
        dilation: int | Sequence[int] = 1,
        input_scale: float,
        input_zero_point: int,
        weight_scale: Scale,
        output_scale: float,
        output_zero_point: int,
        activation: str = "none",
    ):
        weights = _int8(weights, "weights")
        if weights.ndim != 4:
            raise InputError(f"weights: expected OHWI [O, KH, KW, I], got shape {weights.shape}")
        o = weights.shape[0]
        io = (input_scale, input_zero_point, output_scale, output_zero_point, activation)
        spatial = self._window(weights, stride, padding, dilation, io)
        requantization = self._fixed_point(weight_scale, o)
        self._op = _C.Qs8Conv2d(weights, _bias(bias, o), self.input_zero_point, requantization, spatial)
        self._capsule = self._op._capsule()  # for _run: points at self._op, which lives as long

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Apply to int8 NHWC ``x``; returns int8 ``[N, OH, OW, O]``."""
        return _run(self._capsule, x, out)


class DepthwiseConv2D(_Quantized):
    """int8 depthwise 2-D convolution, NHWC (TFLite DEPTHWISE_CONV_2D).

    Args:
        weights: int8 ``[1, KH, KW, C * depth_multiplier]`` (TFLite's layout), zero point 0.
        depth_multiplier: output channels per input channel.
        others: as `Conv2D`; per-channel scales run along the last weight axis.
    """

    def __init__(
        self,
        weights: np.ndarray,
        bias: np.ndarray | None = None,
        *,
        depth_multiplier: int = 1,
        stride: int | Sequence[int] = 1,
        padding: str = "same",
        dilation: int | Sequence[int] = 1,
        input_scale: float,
        input_zero_point: int,
        weight_scale: Scale,
        output_scale: float,
        output_zero_point: int,
        activation: str = "none",
    ):
        weights = _int8(weights, "weights")
        if weights.ndim != 4 or weights.shape[0] != 1:
            raise InputError(f"weights: expected [1, KH, KW, C], got shape {weights.shape}")
        c = weights.shape[3]
        io = (input_scale, input_zero_point, output_scale, output_zero_point, activation)
        spatial = self._window(weights, stride, padding, dilation, io)
        self.depth_multiplier = _int(depth_multiplier, "depth_multiplier", 1, max(1, c))
        requantization = self._fixed_point(weight_scale, c)
        self._op = _C.Qs8DepthwiseConv2d(
            weights, _bias(bias, c), self.depth_multiplier, self.input_zero_point, requantization, spatial
        )
        self._capsule = self._op._capsule()  # for _run: points at self._op, which lives as long

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Apply to int8 NHWC ``x``; returns int8 ``[N, OH, OW, C * depth_multiplier]``."""
        return _run(self._capsule, x, out)


# ---------------------------------------------------------------- weightless operators


def _operator(name: str, doc: str, operator: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``operator`` named and documented as a public function: each pair of operators with
    one signature (max_pool and average_pool, add and mul) comes from one definition."""
    operator.__name__ = operator.__qualname__ = name
    operator.__doc__ = doc
    return operator


def _pool(is_max: bool, name: str, doc: str) -> Callable[..., np.ndarray]:
    def pool(
        x: np.ndarray,
        pool_size: int | Sequence[int],
        stride: int | Sequence[int] | None = None,
        padding: str = "valid",
        activation: str = "none",
        scale: float | None = None,
        zero_point: int | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        x = _int8(x, "x")
        if x.ndim != 4:
            raise InputError(f"x: expected NHWC, got shape {x.shape}")
        fh, fw = _pair(pool_size, "pool_size")
        sh, sw = _pair(stride if stride is not None else (fh, fw), "stride")
        act_min, act_max = -128, 127
        if activation != "none":
            if scale is None or zero_point is None:
                raise InputError(f"activation {activation!r} needs the tensor's scale and zero_point")
            act_min, act_max = activation_range(activation, scale, zero_point)
        oh, pt = conv_output_size(x.shape[1], fh, sh, 1, padding)
        ow, pl = conv_output_size(x.shape[2], fw, sw, 1, padding)
        return _C.pool(is_max, x, fh, fw, sh, sw, oh, ow, pt, pl, act_min, act_max, out)

    return _operator(name, doc, pool)


max_pool = _pool(
    True,
    "max_pool",
    """int8 max pooling, NHWC (TFLite MAX_POOL_2D); input and output share quantization.

    ``max_pool(x, pool_size, stride=None, padding="valid", activation="none", scale=None,
    zero_point=None, out=None)``: ``stride`` defaults to ``pool_size``; ``scale`` and
    ``zero_point`` are needed only to place a fused activation's clamp.

    >>> max_pool(np.arange(16, dtype=np.int8).reshape(1, 4, 4, 1), 2).reshape(-1).tolist()
    [5, 7, 13, 15]
    """,
)

average_pool = _pool(
    False,
    "average_pool",
    """int8 average pooling, NHWC (TFLite AVERAGE_POOL_2D); arguments as `max_pool`.

    Windows are clipped to the image (padding never counts) and the mean rounds half
    away from zero, as TFLite's reference kernel.

    >>> average_pool(np.array([1, 2, -1, -2], np.int8).reshape(1, 2, 2, 1), 2).reshape(-1).tolist()
    [0]
    """,
)


def _broadcast(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = _int8(a, "a"), _int8(b, "b")
    if a.shape != b.shape:
        try:
            a, b = (np.ascontiguousarray(v) for v in np.broadcast_arrays(a, b))
        except ValueError:
            raise InputError(f"a and b: shapes {a.shape} and {b.shape} do not broadcast") from None
    return a, b


def _binary(
    name: str, rescale: Callable[[float, float, float], tuple[int, ...]], doc: str
) -> Callable[..., np.ndarray]:
    """A two-input operator: ``rescale(a_scale, b_scale, output_scale)`` gives the native
    parameters between the input offsets and the output zero point (`_C.add`, `_C.mul`)."""
    native = getattr(_C, name)

    def binary(
        a: np.ndarray,
        b: np.ndarray,
        *,
        a_scale: float,
        a_zero_point: int,
        b_scale: float,
        b_zero_point: int,
        output_scale: float,
        output_zero_point: int,
        activation: str = "none",
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        a, b = _broadcast(a, b)
        sa, sb, so = _scale(a_scale, "a"), _scale(b_scale, "b"), _scale(output_scale, "output")
        za, zb = _int8_zero_point(a_zero_point, "a"), _int8_zero_point(b_zero_point, "b")
        zo = _int8_zero_point(output_zero_point, "output")
        rescaling = rescale(sa, sb, so)
        lo, hi = activation_range(activation, so, zo)
        return native(a, b, (-za, -zb, *rescaling, zo, lo, hi), out)

    return _operator(name, doc, binary)


def _add_rescale(sa: float, sb: float, so: float) -> tuple[int, ...]:
    """ADD's left shift and the (multiplier, shift) of each input and of the output."""
    left_shift = 20
    twice_max = 2.0 * max(sa, sb)
    real_a, real_b = sa / twice_max, sb / twice_max
    real_out = twice_max / float(np.float32((1 << left_shift) * np.float32(so)))
    if not 0.0 < real_out < 1.0:
        raise InputError(
            f"add: output scale {so!r} is too small for inputs of scales {sa!r} and {sb!r} (TFLite needs "
            f"2 * max(input scales) < 2^20 * output scale)"
        )
    (ma, sha), (mb, shb), (mo, sho) = (_C.quantize_multiplier(r) for r in (real_a, real_b, real_out))
    return left_shift, ma, sha, mb, shb, mo, sho


def _mul_rescale(sa: float, sb: float, so: float) -> tuple[int, ...]:
    """MUL's output (multiplier, shift)."""
    # TFLite multiplies and divides the three scales in float32 before widening.
    real = float(np.float32(np.float32(sa) * np.float32(sb)) / np.float32(so))
    m, s = _C.quantize_multiplier(real)
    if s > 14:
        raise InputError(f"mul: the scale ratio {real!r} (a_scale * b_scale / output_scale) is too large")
    return m, s


add = _binary(
    "add",
    _add_rescale,
    """int8 addition with requantization (TFLite ADD), numpy broadcasting.

    ``add(a, b, *, a_scale, a_zero_point, b_scale, b_zero_point, output_scale,
    output_zero_point, activation="none", out=None)``

    >>> add(np.array([10], np.int8), np.array([20], np.int8), a_scale=0.1, a_zero_point=0,
    ...     b_scale=0.1, b_zero_point=0, output_scale=0.2, output_zero_point=0).tolist()
    [15]
    """,
)

mul = _binary(
    "mul",
    _mul_rescale,
    """int8 multiplication with requantization (TFLite MUL), numpy broadcasting; arguments as `add`.

    >>> mul(np.array([10], np.int8), np.array([20], np.int8), a_scale=0.1, a_zero_point=0,
    ...     b_scale=0.1, b_zero_point=0, output_scale=0.1, output_zero_point=0).tolist()
    [20]
    """,
)


def softmax(x: np.ndarray, *, input_scale: float, beta: float = 1.0, out: np.ndarray | None = None) -> np.ndarray:
    """int8 softmax over the last axis (TFLite SOFTMAX reference kernel).

    The output has scale 1/256 and zero point -128 (`SOFTMAX_OUTPUT`).

    >>> softmax(np.array([[0, 0]], np.int8), input_scale=0.1).tolist()
    [[0, 0]]
    """
    return _C.softmax(_int8(x, "x"), _float32(input_scale, "input scale"), _float32(beta, "beta"), out)


def logistic(x: np.ndarray, *, input_scale: float, input_zero_point: int, out: np.ndarray | None = None) -> np.ndarray:
    """int8 logistic (sigmoid), TFLite LOGISTIC: output scale 1/256, zero point -128.

    >>> logistic(np.array([0], np.int8), input_scale=0.1, input_zero_point=0).tolist()
    [0]
    """
    x = _int8(x, "x")
    return _C.logistic(x, _float32(input_scale, "input scale"), _zero_point(input_zero_point, "input"), out)
