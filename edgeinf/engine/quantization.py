"""Quantization parameters of the engine's steps, derived exactly as TFLite's ``Prepare``
functions derive them (which products are float32 and which float64 matters for bit
exactness), and the checks TFLite's Prepare makes on them.

Every function raises `ModelFileError` for parameters TFLite itself would refuse (a
non-positive scale, a zero point outside the type, a filter zero point other than 0)
and `UnsupportedOperatorError` for valid ones the engine does not run (per-channel
activations, int16), so a model either plans exactly or falls back.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np

from .. import _C
from ..errors import ModelFileError, UnsupportedOperatorError
from ..formats.tflite import Tensor

TYPE_RANGE = {"INT8": (-128, 127), "UINT8": (0, 255)}

# TFLite's ActivationFunctionType codes the int8 kernels take (TANH and SIGN_BIT they do not).
FUSED_ACTIVATIONS = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6"}


@dataclass(frozen=True)
class ActQuant:
    """Per-tensor quantization of an activation: real = scale * (q - zero_point)."""

    scale: float  # the float32 value, as a Python float
    zero_point: int
    dtype: str


def where(op, tensor: Tensor | None = None) -> str:
    """``operator 3 (CONV_2D)`` or ``operator 3 (CONV_2D) tensor 7 'name'`` for messages."""
    text = f"operator {op.index} ({op.opcode.name})"
    return text if tensor is None else f"{text} tensor {tensor.index} {tensor.name!r}"


def valid_scale(value: float, what: str) -> float:
    scale = float(np.float32(value))
    if not (math.isfinite(scale) and scale > 0.0):
        raise ModelFileError(f"{what}: scale must be positive and finite, got {value!r}")
    return scale


def activation(op, tensor: Tensor, dtypes=("INT8",)) -> ActQuant:
    """The per-tensor quantization of an int8 (or listed type) activation."""
    what = where(op, tensor)
    if tensor.dtype not in dtypes:
        raise UnsupportedOperatorError(f"{what}: the engine runs {'/'.join(dtypes)} here, the model has {tensor.dtype}")
    q = tensor.quantization
    if q is None or not q.scales:
        raise ModelFileError(f"{what}: a quantized {tensor.dtype} tensor without a scale")
    if len(q.scales) != 1:
        raise UnsupportedOperatorError(f"{what}: per-channel quantization of an activation ({len(q.scales)} scales)")
    zero_point = int(q.zero_points[0]) if q.zero_points else 0
    lo, hi = TYPE_RANGE[tensor.dtype]
    if not lo <= zero_point <= hi:
        raise ModelFileError(f"{what}: zero point {zero_point} is outside {tensor.dtype}'s range [{lo}, {hi}]")
    return ActQuant(valid_scale(q.scales[0], what), zero_point, tensor.dtype)


def weight_scales(op, tensor: Tensor, channels: int, axis: int) -> np.ndarray:
    """The float32 scales of a symmetric int8 filter, one per output channel (replicated
    when per tensor). TFLite refuses a nonzero filter zero point."""
    what = where(op, tensor)
    if tensor.dtype != "INT8":
        raise UnsupportedOperatorError(f"{what}: filters must be INT8 here, the model has {tensor.dtype}")
    q = tensor.quantization
    if q is None or not q.scales:
        raise ModelFileError(f"{what}: an INT8 filter without a scale")
    if any(int(z) != 0 for z in q.zero_points):
        bad = next(int(z) for z in q.zero_points if int(z) != 0)
        raise ModelFileError(f"{what}: filter zero points must be 0 (symmetric int8), got {bad}")
    if len(q.scales) not in (1, channels):
        raise ModelFileError(
            f"{what}: expected 1 or {channels} filter scales (one per output channel), got {len(q.scales)}"
        )
    if len(q.scales) > 1 and q.quantized_dimension != axis:
        raise ModelFileError(
            f"{what}: per-channel filter scales must run along axis {axis}, the model says {q.quantized_dimension}"
        )
    scales = np.array([valid_scale(s, f"{what} channel {c}") for c, s in enumerate(q.scales)], np.float64)
    return np.broadcast_to(scales, (channels,)).copy()


def bias(op, tensor: Tensor | None, data: np.ndarray | None, channels: int, input_scale: float, scales, out_scale):
    """The int32 bias of a conv / FC (or None), checked like TFLite checks it."""
    if tensor is None:
        return None
    what = where(op, tensor)
    if tensor.dtype != "INT32":
        raise UnsupportedOperatorError(f"{what}: the bias must be INT32 for int8 inputs, the model has {tensor.dtype}")
    if data is None:
        raise UnsupportedOperatorError(f"{what}: the bias is not a constant")
    if data.size != channels:
        raise ModelFileError(f"{what}: expected {channels} bias values (one per output channel), got {data.size}")
    q = tensor.quantization
    if q is not None and q.scales:
        if len(q.scales) not in (1, channels):
            raise ModelFileError(f"{what}: expected 1 or {channels} bias scales, got {len(q.scales)}")
        for c in range(channels):
            # TFLite's GetQuantizedConvolutionMultipler: the bias scale must be input * filter scale.
            product = float(np.float32(np.float32(input_scale) * np.float32(scales[c])))
            bias_scale = float(q.scales[c % len(q.scales)])
            if not math.isfinite(bias_scale) or abs(product - bias_scale) / out_scale > 0.02:
                raise ModelFileError(
                    f"{what}: bias scale {bias_scale!r} of channel {c} is not input scale x filter scale ({product!r})"
                )
    return data.reshape(channels).astype(np.int32)


def fused_activation(op, code: int) -> str:
    if code not in FUSED_ACTIVATIONS:
        raise UnsupportedOperatorError(f"{where(op)}: fused activation {code} is not supported on int8")
    return FUSED_ACTIVATIONS[code]


def activation_range(op, kind: str, out: ActQuant) -> tuple[int, int]:
    """TFLite's CalculateActivationRangeQuantized for a fused activation."""
    codes = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}
    return _C.activation_range(codes[kind], out.scale, out.zero_point)


def multipliers(op, reals) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's QuantizeMultiplier of each real factor; factors no int32 multiplier and
    shift in [-31, 30] represent are left to LiteRT."""
    pairs = [_C.quantize_multiplier(float(r)) for r in reals]
    shifts = [s for _, s in pairs]
    if any(not -31 <= s <= 30 for s in shifts):
        raise UnsupportedOperatorError(f"{where(op)}: a requantization factor outside 2^-31..2^30 ({min(reals)!r})")
    return np.array([m for m, _ in pairs], np.int32), np.array(shifts, np.int32)


def round_half_away(x: float) -> int:
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def byte_values(q: ActQuant) -> np.ndarray:
    """The input value (int32) of each table index 0..255 (the input's byte)."""
    values = np.arange(256, dtype=np.int32)
    if q.dtype == "INT8":
        values = values.astype(np.uint8).view(np.int8).astype(np.int32)
    return np.ascontiguousarray(values)


def float_function_table(in_q: ActQuant, out_q: ActQuant, libm_function: str) -> np.ndarray:
    """TFLite's LUTPopulate for int8: dequantize (float32), apply the C library's float
    function (the one TFLite calls), scale by 1 / output scale, round half away from zero,
    add the zero point, saturate."""
    fn = getattr(_libm(), libm_function)
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    inverse = np.float32(1.0) / np.float32(out_q.scale)
    out = np.empty(256, np.int64)
    for i, v in enumerate(byte_values(in_q)):
        x = np.float32(in_q.scale) * np.float32(int(v) - in_q.zero_point)
        y = np.float32(fn(float(x))) * inverse
        out[i] = round_half_away(float(y)) + out_q.zero_point
    lo, hi = TYPE_RANGE[out_q.dtype]
    return table_bytes(np.clip(out, lo, hi), out_q.dtype)


def _libm():
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


def _srdhm16(a: int, b: int) -> int:
    """gemmlowp's SaturatingRoundingDoublingHighMul on int16."""
    if a == b == -32768:
        return 32767
    ab = a * b
    nudge = (1 << 14) if ab >= 0 else 1 - (1 << 14)
    return trunc_div(ab + nudge, 1 << 15)


def trunc_div(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _rdbpot(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def _saturate16(v: int) -> int:
    return max(-32768, min(32767, v))


def _int16_multiplier(multiplier: int) -> int:
    """TFLite's DownScaleInt32ToInt16Multiplier."""
    if multiplier >= (1 << 31) - 1 - (1 << 15):
        return 32767
    return (multiplier + (1 << 15)) >> 16


def hard_swish_table(in_q: ActQuant, out_q: ActQuant) -> np.ndarray | None:
    """TFLite's reference int8 HARD_SWISH (16-bit fixed point, HardSwishPrepare's float32
    factors) on each input byte; None when its Prepare would refuse the scales."""
    input_scale, output_scale = np.float32(in_q.scale), np.float32(out_q.scale)
    hires = np.float32(1.0 / 128.0) * input_scale
    out_m, out_exp = _C.quantize_multiplier(float(hires / output_scale))
    relu_m, relu_exp = _C.quantize_multiplier(float(hires / np.float32(3.0 / 32768.0)))
    if out_exp > 0:
        return None
    out_m16, relu_m16 = _int16_multiplier(out_m), _int16_multiplier(relu_m)
    out = np.empty(256, np.int64)
    for i, v in enumerate(byte_values(in_q)):
        x = int(v) - in_q.zero_point
        hires_value = x * 128
        preshift = _srdhm16(hires_value, out_m16)
        reluish = hires_value
        if relu_exp > 0:
            reluish = _saturate16(reluish * (1 << (relu_exp - 1)))
        reluish = _srdhm16(reluish, relu_m16)
        if relu_exp > 0:
            reluish = _saturate16(reluish * 2)
        if relu_exp < 0:
            reluish = _rdbpot(reluish, -relu_exp)
        reluish = (reluish + (1 << 15)) >> 1
        # SaturatingDoublingHighMul: no rounding.
        product = 32767 if reluish == preshift == -32768 else trunc_div(reluish * preshift, 1 << 15)
        out[i] = _rdbpot(product, -out_exp) + out_q.zero_point
    lo, hi = TYPE_RANGE[out_q.dtype]
    return table_bytes(np.clip(out, lo, hi), out_q.dtype)


def requantize_table(
    in_q: ActQuant, out_q: ActQuant, multiplier: int, shift: int, act_min: int, act_max: int
) -> np.ndarray:
    """The 256-entry table of ``clamp(MultiplyByQuantizedMultiplier(q - zp_in, m, s) + zp_out)``
    (TFLite's Requantize and quantized ReluX), indexed by the input's byte."""
    values = byte_values(in_q)
    shifted = _C.multiply_by_quantized_multiplier(np.ascontiguousarray(values - in_q.zero_point), multiplier, shift)
    out = np.clip(shifted.astype(np.int64) + out_q.zero_point, act_min, act_max)
    return table_bytes(out, out_q.dtype)


def table_bytes(values: np.ndarray, dtype: str) -> np.ndarray:
    """Output values (in the output type's range) as the int8 bytes the LUT step writes."""
    return values.astype(np.uint8 if dtype == "UINT8" else np.int8).view(np.int8)
