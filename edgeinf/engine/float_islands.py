"""Float islands: a DEQUANTIZE of an int8 / uint8 activation, a chain of float elementwise
operators, and a QUANTIZE back, run as one per-channel 256-entry table.

Quantizers keep some operators in float (``edgeinf quantize`` leaves PRELU float, for
one): the graph then holds ``DEQUANTIZE -> PRELU -> QUANTIZE``. Every output value of such
a chain depends on one input value and its channel only, so the chain is a lookup table
per channel of the last axis. The tables are computed at load by running the same float32
arithmetic, in the same order, as TFLite's reference kernels (dequantize, each operator,
quantize with ``round(x / scale)`` half away from zero), so the engine's outputs are those
of LiteRT bit for bit.

>>> islands = find_islands(model.main)            # doctest: +SKIP
>>> island_tables(model, islands[0]).shape         # doctest: +SKIP
(16, 256)
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections import defaultdict
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..errors import UnsupportedOperatorError
from ..formats.tflite import Operator, Subgraph, TfliteModel
from . import quantization as qz
from .quantization import where

MAX_CHANNELS = 1 << 14
"""Tables cost 256 bytes per channel; a chain over more channels stays on LiteRT."""

# Float activations an ADD / SUB / MUL may fuse (TFLite's ActivationFunctionType codes).
_FUSED_BOUNDS = {0: (None, None), 1: (0.0, None), 2: (-1.0, 1.0), 3: (0.0, 6.0)}
_UNARY = {"RELU", "RELU6", "RELU_N1_TO_1", "LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU"}
_WITH_CONSTANT = {"PRELU", "ADD", "SUB", "MUL"}


@dataclass(frozen=True)
class FloatIsland:
    """``dequantize`` -> ``chain`` (float elementwise operators, in order) -> ``quantize``."""

    dequantize: Operator
    chain: tuple[Operator, ...]
    quantize: Operator

    @property
    def operators(self) -> tuple[Operator, ...]:
        return (self.dequantize, *self.chain, self.quantize)

    @property
    def name(self) -> str:
        return "+".join(op.opcode.name for op in self.operators)


def find_islands(sg: Subgraph) -> list[FloatIsland]:
    """The float islands of ``sg``: each intermediate float tensor is read by the next
    operator of the chain only and is not a graph output."""
    readers: dict[int, list[Operator]] = defaultdict(list)
    for op in sg.operators:
        for t in set(op.inputs):
            if t >= 0:
                readers[t].append(op)
    outputs = set(sg.outputs)
    islands = []
    for op in sg.operators:
        if op.opcode.name != "DEQUANTIZE" or len(op.inputs) != 1 or len(op.outputs) != 1:
            continue
        source = sg.tensors[op.inputs[0]]
        if source.dtype not in ("INT8", "UINT8") or source.is_constant:
            continue
        chain: list[Operator] = []
        current = op.outputs[0]
        while True:
            if sg.tensors[current].dtype != "FLOAT32" or current in outputs or len(readers[current]) != 1:
                break
            (nxt,) = readers[current]
            if len(nxt.outputs) != 1 or tuple(sg.tensors[nxt.outputs[0]].shape) != tuple(source.shape):
                break
            name = nxt.opcode.name
            if name == "QUANTIZE" and sg.tensors[nxt.outputs[0]].dtype in ("INT8", "UINT8"):
                islands.append(FloatIsland(op, tuple(chain), nxt))
                break
            if not _chainable(sg, nxt, current):
                break
            chain.append(nxt)
            current = nxt.outputs[0]
    return islands


def _chainable(sg: Subgraph, op: Operator, value: int) -> bool:
    """``op`` applies to the chain's ``value`` alone, or to it and a constant (the value
    first, or either way round for the commutative ADD and MUL)."""
    name, inputs = op.opcode.name, tuple(op.inputs)
    if name in _UNARY:
        return inputs == (value,)
    if name not in _WITH_CONSTANT or len(inputs) != 2 or value not in inputs:
        return False
    other = inputs[1] if inputs[0] == value else inputs[0]
    value_first = inputs[0] == value
    return other >= 0 and sg.tensors[other].is_constant and (value_first or name in ("ADD", "MUL"))


def island_tables(model: TfliteModel, island: FloatIsland) -> np.ndarray:
    """The int8 bytes the island writes for each (channel, input byte): shape
    ``[channels, 256]`` (channels of the last axis; 1 when no operand varies by channel).

    Raises:
        UnsupportedOperatorError: an operand that varies beyond the last axis, a fused
            activation or a result (NaN) the tables cannot reproduce.
        ModelFileError: quantization TFLite itself would refuse.
    """
    sg = model.main
    x, y = sg.tensors[island.dequantize.inputs[0]], sg.tensors[island.quantize.outputs[0]]
    in_q = qz.activation(island.dequantize, x, ("INT8", "UINT8"))
    out_q = qz.activation(island.quantize, y, ("INT8", "UINT8"))
    channels = int(x.shape[-1]) if x.shape else 1
    if channels > MAX_CHANNELS:
        raise UnsupportedOperatorError(f"{where(island.dequantize)}: a float chain over {channels} channels")
    # reference_ops::Dequantize: scale * (q - zero_point), rounded once to float32.
    values = (np.float32(in_q.scale) * (qz.byte_values(in_q) - in_q.zero_point).astype(np.float32))[:, None]
    for op in island.chain:
        values = _apply(model, op, values, channels)
    return _quantize(island.quantize, values, out_q).T.copy()


def _constant(model: TfliteModel, op: Operator, value_input: int, channels: int) -> np.ndarray:
    """The float32 constant operand of ``op`` as a row over the last axis (or one value)."""
    sg = model.main
    k = 1 - value_input
    t = sg.tensors[op.inputs[k]]
    if t.dtype != "FLOAT32":
        raise UnsupportedOperatorError(f"{where(op, t)}: a float chain needs a FLOAT32 operand, got {t.dtype}")
    data = model.tensor_data(0, t.index)
    if data is None:
        raise UnsupportedOperatorError(f"{where(op, t)}: the operand must be a constant")
    x_rank = len(sg.tensors[op.inputs[value_input]].shape)
    shape = tuple(int(d) for d in t.shape)
    if len(shape) > max(x_rank, 1) or any(d != 1 for d in shape[:-1]) or (shape and shape[-1] not in (1, channels)):
        raise UnsupportedOperatorError(f"{where(op, t)}: an operand of shape {list(shape)} varies beyond the channels")
    return np.ascontiguousarray(data, np.float32).reshape(-1)[None, :]


def _clamp(values: np.ndarray, low: float | None, high: float | None) -> np.ndarray:
    if low is not None:
        values = np.maximum(values, np.float32(low))
    if high is not None:
        values = np.minimum(values, np.float32(high))
    return values


def _apply(model: TfliteModel, op: Operator, x: np.ndarray, channels: int) -> np.ndarray:
    """One float operator of TFLite's reference kernels on ``x`` ([256, 1 or channels], float32)."""
    name = op.opcode.name
    f32 = np.float32
    with np.errstate(all="ignore"):
        if name == "RELU":
            return _clamp(x, 0.0, None)
        if name == "RELU6":
            return _clamp(x, 0.0, 6.0)
        if name == "RELU_N1_TO_1":
            return _clamp(x, -1.0, 1.0)
        if name == "LEAKY_RELU":
            alpha = f32(op.options.get("alpha", 0.0))
            return np.where(x > 0, x, x * alpha)
        if name == "HARD_SWISH":
            return x * np.minimum(f32(6), np.maximum(f32(0), x + f32(3))) / f32(6)
        if name == "TANH":
            return _libm_map(x, "tanhf")
        if name == "LOGISTIC":
            # reference_ops::Logistic: exp(x) below -9, 1 above 16.619047, else 1 / (1 + exp(-x)).
            exp_neg = _libm_map(-x, "expf")
            result = f32(1) / (f32(1) + exp_neg)
            result = np.where(x < f32(-9.0), _libm_map(x, "expf"), result)
            return np.where(x > f32(16.619047164916992188), f32(1), result).astype(f32)
        value_input = 0 if not model.main.tensors[op.inputs[0]].is_constant else 1
        c = _constant(model, op, value_input, channels)
        if name == "PRELU":
            return np.where(x >= 0, x, x * c).astype(f32)
        code = op.options.get("fused_activation_function", 0)
        if code not in _FUSED_BOUNDS:
            raise UnsupportedOperatorError(f"{where(op)}: fused activation {code} in a float chain")
        if name == "ADD":
            out = x + c
        elif name == "MUL":
            out = x * c
        else:  # SUB: the chain's value is the first operand (see _chainable)
            out = x - c
        return _clamp(out.astype(f32), *_FUSED_BOUNDS[code])


def _quantize(op: Operator, x: np.ndarray, out_q: qz.ActQuant) -> np.ndarray:
    """reference_ops::AffineQuantize: round(x / scale) in float32 (half away from zero),
    plus the zero point, clamped to the type."""
    if np.isnan(x).any():
        raise UnsupportedOperatorError(f"{where(op)}: the float chain gives NaN")
    with np.errstate(all="ignore"):
        r = x.astype(np.float32) / np.float32(out_q.scale)
    rounded = np.trunc(r)
    rounded = rounded + np.where(np.abs(r - rounded) >= np.float32(0.5), np.sign(r), np.float32(0))
    lo, hi = qz.TYPE_RANGE[out_q.dtype]
    q = np.clip(rounded.astype(np.float64) + out_q.zero_point, lo, hi).astype(np.int64)
    return qz.table_bytes(q, out_q.dtype)


def _libm_map(x: np.ndarray, function: str) -> np.ndarray:
    """The C library's float function on each value (the one TFLite's kernels call)."""
    fn = _libm_function(function)
    flat = np.ascontiguousarray(x, np.float32).reshape(-1)
    return np.array([fn(float(v)) for v in flat], np.float32).reshape(x.shape)


@cache
def _libm_function(name: str):
    libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    fn = getattr(libm, name)
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn
