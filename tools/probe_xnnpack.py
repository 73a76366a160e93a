"""Probe which nodes XNNPACK takes in an installed TFLite runtime; write tables/xnnpack_<pkg>_<ver>.json.

For each op, a baseline one-op model (float32, constant weights, usual options) and
variants that change one or two attributes (runtime weights; int8, uint8 and int16
activations; per-tensor and per-channel weights; PRELU slope shapes [1,1,C], [C], one
value and a full map; fused activations; strides and dilations; beta=0; 1x1 pooling with
stride 2; requantizing QUANTIZE; a dynamic batch; ...) run in a worker process with the default
delegates (tools/runtime_worker.py). Whether XNNPACK took the node is recovered from the
interpreter's own op list: the synthetic DELEGATE nodes and a walk back from their
outputs. Each record stores the node's features (edgeinf.compat.features) and the answer.
Every other op the runtime registers is probed with a generic one- and two-input model.

Usage:
    python tools/probe_xnnpack.py --python /work/venv/bin/python --package ai_edge_litert
    python tools/probe_xnnpack.py --python /work/venv-legacy/bin/python --package tflite_runtime
"""

from __future__ import annotations

import datetime
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
from probe_tflite import probe_main, runtime_version
from runtime_worker import RuntimeWorker, delegate_partitions
from table_file import write_table

from edgeinf.compat.features import node_features
from edgeinf.errors import ModelFileError
from edgeinf.formats.tflite import read_tflite
from edgeinf.formats.tflite_schema import schema
from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model, pack

RNG = np.random.default_rng(7)
# quantized activation types: numpy type, value range, zero point of an activation
QUANT = {
    "int8": (np.int8, -128, 127, 0),
    "uint8": (np.uint8, 0, 255, 128),
    "int16": (np.int16, -32767, 32767, 0),
}


class Graph:
    """A tiny builder for probe models: inputs, constants, outputs and ops."""

    def __init__(self):
        self.tensors: list[TensorDef] = []
        self.ops: list[OpDef] = []
        self.inputs: list[int] = []

    def _add(self, td: TensorDef) -> int:
        self.tensors.append(td)
        return len(self.tensors) - 1

    def inp(self, shape, dtype="float32", dynamic=False, **q) -> int:
        sig = (-1,) + tuple(shape[1:]) if dynamic else None
        i = self._add(TensorDef(f"in{len(self.inputs)}", tuple(shape), dtype, shape_signature=sig, **q))
        self.inputs.append(i)
        return i

    def const(self, array, dtype=None, **q) -> int:
        array = np.asarray(array)
        return self._add(TensorDef(f"c{len(self.tensors)}", array.shape, dtype or array.dtype, data=array, **q))

    def tensor(self, shape, dtype="float32", **q) -> int:
        return self._add(TensorDef(f"t{len(self.tensors)}", tuple(shape), dtype, **q))

    def op(self, name, ins, outs, options=None, version=1) -> int:
        self.ops.append(OpDef(name, list(ins), list(outs), options=options, version=version))
        return len(self.ops) - 1

    def build(self, outputs) -> bytes:
        return build_model(self.tensors, self.ops, self.inputs, list(outputs))


def _opts(cls_name: str, **fields):
    obj = getattr(schema(), cls_name + "T")()
    for k, v in fields.items():
        setattr(obj, k, v)
    return obj


def _act(name: str) -> int:
    return getattr(schema().ActivationFunctionType, name)


def _pad(name: str) -> int:
    return getattr(schema().Padding, name)


def _q(dtype: str, scale: float = 0.05) -> dict:
    """Quantization of an activation of this type (none for float)."""
    if dtype not in QUANT:
        return {}
    return {"scale": scale / 256 if dtype == "int16" else scale, "zero_point": QUANT[dtype][3]}


def _unit_q(dtype: str, signed_output: bool) -> dict:
    """Output quantization of LOGISTIC (0..1), TANH (-1..1) and SOFTMAX, as their kernels require."""
    if dtype == "int16":
        return {"scale": 1 / 32768, "zero_point": 0}
    if dtype == "uint8":
        return {"scale": 1 / 128 if signed_output else 1 / 256, "zero_point": 128 if signed_output else 0}
    if dtype == "int8":
        return {"scale": 1 / 128, "zero_point": 0} if signed_output else {"scale": 1 / 256, "zero_point": -128}
    return {}


def _const_q(g: Graph, data: np.ndarray, dtype: str, scale: float) -> int:
    """A constant quantized per tensor to ``dtype`` (float data kept float)."""
    if dtype not in QUANT:
        return g.const(data.astype(np.float32))
    np_type, lo, hi, zero = QUANT[dtype]
    values = np.clip(np.round(data / scale) + zero, lo, hi).astype(np_type)
    return g.const(values, scale=scale, zero_point=zero)


# ---- builders: each returns (model bytes, index of the probed op) ------------------------------


def unary(op, dtype="float32", rank=4, options=None, dynamic=False, to=None):
    """A one-input op; QUANTIZE goes from ``dtype`` (float32 by default) to ``to`` (int8 by
    default; a requantization when both are integer), DEQUANTIZE from ``dtype`` to float32."""
    g = Graph()
    shape = (1, 4, 4, 8)[4 - rank :] if rank < 4 else (1, 4, 4, 8)
    in_dtype, out_dtype = dtype, dtype
    if op == "QUANTIZE":
        out_dtype = to or "int8"
    if op == "DEQUANTIZE":
        in_dtype, out_dtype = ("int8" if dtype == "float32" else dtype), "float32"
    x = g.inp(shape, in_dtype, dynamic=dynamic, **_q(in_dtype))
    oq = _q(out_dtype, 0.07)
    if op in ("LOGISTIC", "TANH"):
        oq = _unit_q(out_dtype, signed_output=op == "TANH")
    y = g.tensor(shape, out_dtype, **oq)
    return g, g.op(op, [x], [y], options), [y]


def softmax(beta=1.0, dtype="float32", dynamic=False):
    g = Graph()
    x = g.inp((1, 16), dtype, dynamic=dynamic, **_q(dtype))
    y = g.tensor((1, 16), dtype, **_unit_q(dtype, signed_output=False))
    opts = None if beta is None else _opts("SoftmaxOptions", beta=beta)
    return g, g.op("SOFTMAX", [x], [y], opts), [y]


def leaky_relu(alpha=0.2, dtype="float32"):
    g = Graph()
    x = g.inp((1, 4, 4, 8), dtype, **_q(dtype))
    y = g.tensor((1, 4, 4, 8), dtype, **_q(dtype))
    opts = None if alpha is None else _opts("LeakyReluOptions", alpha=alpha)
    return g, g.op("LEAKY_RELU", [x], [y], opts), [y]


_BINARY_OPTIONS = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions"}


def binary(op, static="RR", dtype="float32", activation=None, dynamic=False):
    g = Graph()
    shape = (1, 4, 4, 8)
    x = g.inp(shape, dtype, dynamic=dynamic, **_q(dtype))
    other_shape = (1, 1, 8) if op == "PRELU" else shape
    if static[1] == "C":
        # away from zero: a divisor that quantizes to 0 fails DIV at invoke
        w = _const_q(g, RNG.uniform(0.2, 1, size=other_shape), dtype, _q(dtype).get("scale", 0))
    else:
        w = g.inp(other_shape, dtype, **_q(dtype))
    y = g.tensor(shape, dtype, **_q(dtype, 0.1))
    opts = None
    if op in _BINARY_OPTIONS:
        opts = _opts(_BINARY_OPTIONS[op], fusedActivationFunction=_act(activation or "NONE"))
    return g, g.op(op, [x, w], [y], opts), [y]


def prelu(dtype="float32", slope=(1, 1, 8), quant="per-tensor"):
    """PRELU of a [1,4,4,8] input with a constant slope of shape ``slope``, quantized
    per tensor or per channel (the last axis) like the input's type."""
    g = Graph()
    shape = (1, 4, 4, 8)
    x = g.inp(shape, dtype, **_q(dtype))
    data = RNG.uniform(0.05, 0.5, size=slope)
    if dtype in QUANT and quant == "per-channel":
        n = slope[-1]
        np_type, lo, hi, _ = QUANT[dtype]
        values = np.clip(np.round(data / 0.004), lo, hi).astype(np_type)
        a = g.const(values, scale=[0.004] * n, zero_point=[0] * n, quantized_dimension=len(slope) - 1)
    else:
        a = _const_q(g, data, dtype, 0.004 if dtype != "int16" else 0.5 / 32767)
    y = g.tensor(shape, dtype, **_q(dtype))
    return g, g.op("PRELU", [x, a], [y]), [y]


def _weights(shape, dtype, per_channel_axis=0, quant="per-channel"):
    """Filter weights: float for float models; int8 (for int8 and int16 activations) per
    channel or per tensor; uint8 per tensor with zero point 128."""
    data = RNG.uniform(-1, 1, size=shape).astype(np.float32)
    if dtype not in QUANT:
        return {"array": data}
    if dtype == "uint8":
        q = np.clip(np.round(data / 0.01) + 128, 0, 255).astype(np.uint8)
        return {"array": q, "scale": 0.01, "zero_point": 128}
    if quant == "per-tensor":
        return {"array": np.clip(np.round(data / 0.01), -127, 127).astype(np.int8), "scale": 0.01, "zero_point": 0}
    n = shape[per_channel_axis]
    scales = [0.01 * (1 + i % 3) for i in range(n)]
    sc = np.asarray(scales, np.float32).reshape([-1 if a == per_channel_axis else 1 for a in range(len(shape))])
    q = np.clip(np.round(data / sc), -127, 127).astype(np.int8)
    return {"array": q, "scale": scales, "zero_point": [0] * n, "quantized_dimension": per_channel_axis}


def _bias(g: Graph, n: int, dtype: str, static: str, weights: dict) -> int:
    """A bias: int32 for 8-bit models, int64 for int16 ones, float otherwise; quantized
    per channel when the weights are (input scale times weight scale)."""
    if dtype in QUANT:
        np_type = np.int64 if dtype == "int16" else np.int32
        scale = np.asarray(weights["scale"], np.float64) * _q(dtype)["scale"]
        if scale.ndim:
            return g.const(np.zeros(n, np_type), scale=scale.tolist(), zero_point=[0] * n)
        return g.const(np.zeros(n, np_type), scale=float(scale), zero_point=0)
    return g.const(RNG.uniform(-1, 1, size=n).astype(np.float32)) if static == "C" else g.inp((n,))


# per convolution: the weights' shape, the output channels, the weights' per-channel axis
_CONV_WEIGHTS = {"CONV_2D": ((6, 3, 3, 4), 6, 0), "DEPTHWISE_CONV_2D": ((1, 3, 3, 4), 4, 3)}


def conv_like(
    op, static="RCC", dtype="float32", quant="per-channel", activation="NONE", stride=1, padding="SAME", dilation=1,
    dynamic=False,
):  # fmt: skip
    """A CONV_2D or DEPTHWISE_CONV_2D on a (1, 8, 8, 4) input."""
    w_shape, out_c, w_axis = _CONV_WEIGHTS[op]
    g = Graph()
    x = g.inp((1, 8, 8, 4), dtype, dynamic=dynamic, **_q(dtype))
    w = _weights(w_shape, dtype, w_axis, quant)
    wt = g.const(w.pop("array"), **w) if static[1] == "C" else g.inp(w_shape, dtype, **_q(dtype))
    bias = -1
    if len(static) == 3 and static[2] != "-":
        bias = _bias(g, out_c, dtype, static[2], w)
    out_hw = 8 // stride if padding == "SAME" else (8 - (3 - 1) * dilation - 1) // stride + 1
    y = g.tensor((1, out_hw, out_hw, out_c), dtype, **_q(dtype, 0.2))
    fields = dict(
        padding=_pad(padding), strideW=stride, strideH=stride, dilationWFactor=dilation, dilationHFactor=dilation,
        fusedActivationFunction=_act(activation),
    )  # fmt: skip
    if op == "DEPTHWISE_CONV_2D":
        fields["depthMultiplier"] = 1
    opts = _opts("Conv2DOptions" if op == "CONV_2D" else "DepthwiseConv2DOptions", **fields)
    ins = [x, wt, bias] if len(static) == 3 else [x, wt]
    return g, g.op(op, ins, [y], opts), [y]


def fully_connected(
    static="RCC", dtype="float32", quant="per-channel", keep_num_dims=False, activation="NONE", dynamic=False
):
    g = Graph()
    x = g.inp((2, 16), dtype, dynamic=dynamic, **_q(dtype))
    w = _weights((8, 16), dtype, 0, quant)
    wt = g.const(w.pop("array"), **w) if static[1] == "C" else g.inp((8, 16), dtype, **_q(dtype))
    bias = -1
    if len(static) == 3 and static[2] != "-":
        bias = _bias(g, 8, dtype, static[2], w)
    y = g.tensor((2, 8), dtype, **_q(dtype, 0.2))
    opts = _opts("FullyConnectedOptions", keepNumDims=keep_num_dims, fusedActivationFunction=_act(activation))
    ins = [x, wt, bias] if len(static) == 3 else [x, wt]
    return g, g.op("FULLY_CONNECTED", ins, [y], opts), [y]


def transpose_conv(static="CCR", bias=False):
    g = Graph()
    shape = g.const(np.array([1, 8, 8, 6], np.int32))
    w = g.const(RNG.uniform(-1, 1, size=(6, 3, 3, 4)).astype(np.float32)) if static[1] == "C" else g.inp((6, 3, 3, 4))
    x = g.inp((1, 4, 4, 4))
    ins = [shape, w, x]
    if bias:
        ins.append(g.const(np.zeros(6, np.float32)))
    y = g.tensor((1, 8, 8, 6))
    opts = _opts("TransposeConvOptions", padding=_pad("SAME"), strideW=2, strideH=2)
    return g, g.op("TRANSPOSE_CONV", ins, [y], opts, version=3 if bias else 1), [y]


def pool(op, filt=2, stride=2, padding="VALID", dtype="float32", activation="NONE"):
    g = Graph()
    x = g.inp((1, 8, 8, 4), dtype, **_q(dtype))
    out = 8 // stride if padding == "SAME" else (8 - filt) // stride + 1
    y = g.tensor((1, out, out, 4), dtype, **_q(dtype))
    opts = _opts(
        "Pool2DOptions", padding=_pad(padding), strideW=stride, strideH=stride, filterWidth=filt, filterHeight=filt,
        fusedActivationFunction=_act(activation),
    )  # fmt: skip
    return g, g.op(op, [x], [y], opts), [y]


def reduce(op, static="RC", keep_dims=True, dtype="float32", dynamic=False):
    g = Graph()
    x = g.inp((1, 4, 4, 8), dtype, dynamic=dynamic, **_q(dtype))
    axes = g.const(np.array([1, 2], np.int32)) if static[1] == "C" else g.inp((2,), "int32")
    y = g.tensor((1, 1, 1, 8) if keep_dims else (1, 8), dtype, **_q(dtype))
    return g, g.op(op, [x, axes], [y], _opts("ReducerOptions", keepDims=keep_dims)), [y]


def reshape(static="RC", new_shape_option=False, dynamic=False, dtype="float32"):
    g = Graph()
    x = g.inp((1, 4, 4, 8), dtype, dynamic=dynamic, **_q(dtype))
    ins = [x]
    if static != "R":
        ins.append(g.const(np.array([1, 128], np.int32)) if static[1] == "C" else g.inp((2,), "int32"))
    y = g.tensor((1, 128), dtype, **_q(dtype))
    opts = _opts("ReshapeOptions", newShape=[1, 128]) if new_shape_option else None
    return g, g.op("RESHAPE", ins, [y], opts), [y]


def transpose(static="RC", dtype="float32"):
    g = Graph()
    x = g.inp((1, 4, 6, 8), dtype, **_q(dtype))
    perm = g.const(np.array([0, 3, 1, 2], np.int32)) if static[1] == "C" else g.inp((4,), "int32")
    y = g.tensor((1, 8, 4, 6), dtype, **_q(dtype))
    return g, g.op("TRANSPOSE", [x, perm], [y]), [y]


def pad(static="RC", dtype="float32"):
    g = Graph()
    x = g.inp((1, 4, 4, 8), dtype, **_q(dtype))
    pads = np.array([[0, 0], [1, 1], [2, 2], [0, 0]], np.int32)
    p = g.const(pads) if static[1] == "C" else g.inp((4, 2), "int32")
    y = g.tensor((1, 6, 8, 8), dtype, **_q(dtype))
    return g, g.op("PAD", [x, p], [y]), [y]


def concatenation(n=2, dtype="float32"):
    g = Graph()
    xs = [g.inp((1, 4, 4, 8), dtype, **_q(dtype)) for _ in range(n)]
    y = g.tensor((1, 4, 4, 8 * n), dtype, **_q(dtype))
    return g, g.op("CONCATENATION", xs, [y], _opts("ConcatenationOptions", axis=3)), [y]


def resize_bilinear(static="RC", align_corners=False, half_pixel_centers=False, dtype="float32"):
    g = Graph()
    x = g.inp((1, 4, 4, 8), dtype, **_q(dtype))
    size = g.const(np.array([8, 8], np.int32)) if static[1] == "C" else g.inp((2,), "int32")
    y = g.tensor((1, 8, 8, 8), dtype, **_q(dtype))
    opts = _opts("ResizeBilinearOptions", alignCorners=align_corners, halfPixelCenters=half_pixel_centers)
    return g, g.op("RESIZE_BILINEAR", [x, size], [y], opts), [y]


def slice_(static="RCC", dtype="float32"):
    g = Graph()
    x = g.inp((1, 4, 4, 8), dtype, **_q(dtype))
    begin = g.const(np.array([0, 1, 1, 0], np.int32)) if static[1] == "C" else g.inp((4,), "int32")
    size = g.const(np.array([1, 2, 2, 8], np.int32))
    y = g.tensor((1, 2, 2, 8), dtype, **_q(dtype))
    return g, g.op("SLICE", [x, begin, size], [y]), [y]


def strided_slice(static="RCCC", step=1, dtype="float32", shrink=False, masks=False, offset=False):
    """A [1,4,4,8] slice; ``shrink`` drops axis 1 (shrink_axis_mask), ``masks`` sets
    begin_mask and end_mask on the last axis, ``offset`` makes end relative to begin."""
    g = Graph()
    x = g.inp((1, 4, 4, 8), dtype, **_q(dtype))
    begin = g.const(np.array([0, 0, 0, 0], np.int32)) if static[1] == "C" else g.inp((4,), "int32")
    end = g.const(np.array([1, 1 if shrink else 4, 4, 8], np.int32))
    strides = g.const(np.array([1, step, step, 1], np.int32))
    out = (1, 4 // step, 8) if shrink else (1, 4 // step, 4 // step, 8)
    y = g.tensor(out, dtype, **_q(dtype))
    opts = _opts(
        "StridedSliceOptions", shrinkAxisMask=0b0010 if shrink else 0, beginMask=0b1000 if masks else 0,
        endMask=0b1000 if masks else 0, offset=offset,
    )  # fmt: skip
    return g, g.op("STRIDED_SLICE", [x, begin, end, strides], [y], opts), [y]


def split(static="CR", dtype="float32"):
    g = Graph()
    axis = g.const(np.array(3, np.int32).reshape(())) if static[0] == "C" else g.inp((), "int32")
    x = g.inp((1, 4, 4, 8), dtype, **_q(dtype))
    a, b = g.tensor((1, 4, 4, 4), dtype, **_q(dtype)), g.tensor((1, 4, 4, 4), dtype, **_q(dtype))
    return g, g.op("SPLIT", [axis, x], [a, b], _opts("SplitOptions", numSplits=2)), [a, b]


def depth_space(op, dtype="float32"):
    g = Graph()
    if op == "DEPTH_TO_SPACE":
        x, y = g.inp((1, 4, 4, 8), dtype, **_q(dtype)), g.tensor((1, 8, 8, 2), dtype, **_q(dtype))
        opts = _opts("DepthToSpaceOptions", blockSize=2)
    else:
        x, y = g.inp((1, 4, 4, 8), dtype, **_q(dtype)), g.tensor((1, 2, 2, 32), dtype, **_q(dtype))
        opts = _opts("SpaceToDepthOptions", blockSize=2)
    return g, g.op(op, [x], [y], opts), [y]


def batch_matmul(static="RR", dtype="float32"):
    g = Graph()
    a = g.inp((1, 4, 8), dtype, **_q(dtype))
    if static[1] == "C":
        b = _const_q(g, RNG.uniform(-1, 1, size=(1, 8, 6)), dtype, _q(dtype).get("scale", 0))
    else:
        b = g.inp((1, 8, 6), dtype, **_q(dtype))
    y = g.tensor((1, 4, 6), dtype, **_q(dtype, 0.2))
    return g, g.op("BATCH_MATMUL", [a, b], [y], _opts("BatchMatMulOptions")), [y]


def expand_dims(static="RC", dtype="float32"):
    g = Graph()
    x = g.inp((1, 4, 8), dtype, **_q(dtype))
    axis = g.const(np.array([1], np.int32)) if static[1] == "C" else g.inp((1,), "int32")
    y = g.tensor((1, 1, 4, 8), dtype, **_q(dtype))
    return g, g.op("EXPAND_DIMS", [x, axis], [y]), [y]


def dequantize_fp16_const():
    # DEQUANTIZE of fp16 constants feeding a float op: the pattern of fp16-weight models
    g = Graph()
    x = g.inp((1, 4, 4, 8))
    c = g.const(RNG.uniform(-1, 1, size=(1, 4, 4, 8)).astype(np.float16))
    d = g.tensor((1, 4, 4, 8))
    target = g.op("DEQUANTIZE", [c], [d])
    y = g.tensor((1, 4, 4, 8))
    g.op("ADD", [x, d], [y], _opts("AddOptions"))
    return g, target, [y]


def densify_sparse_const(dtype="float32"):
    # a constant sparse (CSR) tensor, densified then dequantized/used like converters emit
    # (float16 values: densified, then a DEQUANTIZE to float32)
    g = Graph()
    x = g.inp((4, 4))
    dense = np.zeros((4, 4), dtype)
    dense[0, 1], dense[2, 3], dense[3, 0] = 1.0, 2.0, 3.0
    values = dense[dense != 0]
    c = g.const(values)
    d = g.tensor((4, 4), dtype)
    target = g.op("DENSIFY", [c], [d])
    if dtype == "float16":
        f = g.tensor((4, 4))
        g.op("DEQUANTIZE", [d], [f])
        d = f
    y = g.tensor((4, 4))
    g.op("ADD", [x, d], [y], _opts("AddOptions"))
    return g, target, [y], dense


def _with_sparsity(data: bytes, tensor_index: int, dense: np.ndarray) -> bytes:
    s = schema()
    model = unpack_unchecked(data)
    t = model.subgraphs[0].tensors[tensor_index]
    t.shape = np.array(dense.shape, np.int32)
    sp = s.SparsityParametersT()
    sp.traversalOrder = [0, 1]
    d0 = s.DimensionMetadataT()
    d0.format, d0.denseSize = s.DimensionType.DENSE, dense.shape[0]
    d1 = s.DimensionMetadataT()
    d1.format = s.DimensionType.SPARSE_CSR
    seg, idx = [0], []
    for row in dense:
        nz = np.flatnonzero(row)
        idx.extend(nz.tolist())
        seg.append(seg[-1] + len(nz))
    d1.arraySegmentsType = s.SparseIndexVector.Int32Vector
    d1.arraySegments = s.Int32VectorT()
    d1.arraySegments.values = seg
    d1.arrayIndicesType = s.SparseIndexVector.Int32Vector
    d1.arrayIndices = s.Int32VectorT()
    d1.arrayIndices.values = idx
    sp.dimMetadata = [d0, d1]
    t.sparsity = sp
    return pack(model)


def unpack_unchecked(data: bytes):
    return schema().ModelT.InitFromPackedBuf(bytearray(data), 0)


UNARY = [
    "ABS", "CEIL", "COS", "ELU", "EXP", "FLOOR", "GELU", "HARD_SWISH", "LOG", "LOGISTIC", "NEG", "RELU", "RELU6",
    "RELU_N1_TO_1", "ROUND", "RSQRT", "SIN", "SQRT", "SQUARE", "TANH", "QUANTIZE", "DEQUANTIZE",
]  # fmt: skip
BINARY = ["ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"]


# float -> uint8 / int16, and requantizations between integer types
_QUANTIZE_PAIRS = [
    {"to": "uint8"}, {"to": "int16"}, {"dtype": "int8", "to": "int8"}, {"dtype": "uint8", "to": "uint8"},
    {"dtype": "uint8", "to": "int8"}, {"dtype": "int8", "to": "uint8"}, {"dtype": "int16", "to": "int16"},
]  # fmt: skip


def specs():
    """(op, builder, baseline kwargs, [variant kwargs...]) for every op probed with care."""
    out = []
    for op in UNARY:
        variants = (
            [{"dtype": "int8"}, {"dtype": "uint8"}, {"dtype": "int16"}, {"rank": 2}, {"dynamic": True}]
            if op not in ("QUANTIZE", "DEQUANTIZE")
            else [{"rank": 2}, *_QUANTIZE_PAIRS]
            if op == "QUANTIZE"
            else [{"rank": 2}, {"dtype": "uint8"}, {"dtype": "int16"}]
        )
        out.append((op, lambda op=op, **kw: unary(op, **kw), {}, variants))
    quantized = [{"dtype": "int8"}, {"dtype": "uint8"}, {"dtype": "int16"}]
    out.append(("SOFTMAX", softmax, {}, [{"beta": None}, {"beta": 2.0}, *quantized, {"dynamic": True}]))
    out.append(("LEAKY_RELU", leaky_relu, {}, [{"alpha": None}, *quantized]))
    for op in BINARY:
        variants = [{"static": "RC"}, *quantized, {"dtype": "int8", "static": "RC"}, {"dynamic": True}]
        if op in _BINARY_OPTIONS:
            variants += [{"activation": "RELU"}, {"activation": "RELU6"}, {"dtype": "int8", "activation": "RELU6"}]
        out.append((op, lambda op=op, **kw: binary(op, **kw), {}, variants))
    # the slope forms converters emit ([1,1,C] from Keras, [C], one value, a full map), in
    # every activation type, per tensor and per channel
    out.append(("PRELU", lambda **kw: binary("PRELU", **kw), {"static": "RC"}, [{"static": "RR"}]))
    prelu_variants = [
        {"dtype": dtype, "slope": slope, "quant": quant}
        for dtype in ("float32", "int8", "uint8", "int16")
        for slope in ((1, 1, 8), (8,), (1,), (1, 4, 4, 8))
        for quant in (("per-tensor", "per-channel") if dtype != "float32" else ("per-tensor",))
        if not (quant == "per-channel" and slope == (1,))
    ]
    out.append(("PRELU", prelu, prelu_variants[0], prelu_variants[1:]))
    conv_variants = [
        {"static": "RRC"}, {"static": "RC-"}, {"static": "RC"}, {"static": "RCR"}, {"stride": 2}, {"padding": "VALID"},
        {"dilation": 2}, {"stride": 2, "padding": "VALID"}, {"activation": "RELU6"}, {"activation": "RELU"},
        {"activation": "RELU_N1_TO_1"}, {"dynamic": True},
        {"dtype": "int8"}, {"dtype": "int8", "quant": "per-tensor"}, {"dtype": "int8", "stride": 2},
        {"dtype": "int8", "dilation": 2}, {"dtype": "int8", "activation": "RELU6"}, {"dtype": "int8", "activation": "RELU"},
        {"dtype": "int8", "padding": "VALID"}, {"dtype": "uint8"}, {"dtype": "int16"},
    ]  # fmt: skip
    for op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        out.append((op, lambda op=op, **kw: conv_like(op, **kw), {}, conv_variants))
    fc_variants = [
        {"static": "RRC"},
        {"static": "RC-"},
        {"static": "RC"},
        {"dtype": "int8"},
        {"dtype": "int8", "quant": "per-tensor"},
        {"dtype": "int8", "activation": "RELU"},
        {"dtype": "uint8"},
        {"dtype": "int16"},
        {"keep_num_dims": True},
        {"activation": "RELU"},
        {"dynamic": True},
    ]
    out.append(("FULLY_CONNECTED", fully_connected, {}, fc_variants))
    out.append(("TRANSPOSE_CONV", transpose_conv, {}, [{"bias": True}, {"static": "CRR"}]))
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        pool_variants = [
            {"filt": 1, "stride": 2},
            {"filt": 1, "stride": 1},
            {"stride": 1, "padding": "SAME"},
            *quantized,
            {"activation": "RELU"},
        ]
        out.append((op, lambda op=op, **kw: pool(op, **kw), {}, pool_variants))
    for op in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN"):
        out.append(
            (
                op,
                lambda op=op, **kw: reduce(op, **kw),
                {},
                [{"static": "RR"}, {"keep_dims": False}, *quantized, {"dynamic": True}],
            )
        )
    out.append(
        (
            "RESHAPE",
            reshape,
            {},
            [
                {"static": "RR"},
                {"static": "R", "new_shape_option": True},
                {"new_shape_option": True},
                {"dynamic": True},
                *quantized,
                {"dtype": "int8", "new_shape_option": True},
            ],
        )
    )
    out.append(("TRANSPOSE", transpose, {}, [{"static": "RR"}, *quantized]))
    out.append(("PAD", pad, {}, [{"static": "RR"}, *quantized]))
    out.append(("CONCATENATION", concatenation, {}, [{"n": 1}, {"n": 3}, {"n": 5}, *quantized]))
    out.append(
        (
            "RESIZE_BILINEAR",
            resize_bilinear,
            {},
            [
                {"static": "RR"},
                {"align_corners": True},
                {"half_pixel_centers": True},
                *quantized,
                {"dtype": "int8", "half_pixel_centers": True},
                {"dtype": "int8", "align_corners": True},
            ],
        )
    )
    out.append(("SLICE", slice_, {}, [{"static": "RRC"}, *quantized]))
    slice_variants = [{"static": "RRCC"}, {"step": 2}, {"shrink": True}, {"masks": True}, {"offset": True}, *quantized]
    slice_variants += [{"dtype": "int8", "shrink": True}, {"dtype": "int8", "masks": True}]
    out.append(("STRIDED_SLICE", strided_slice, {}, slice_variants))
    out.append(("SPLIT", split, {}, [{"static": "RR"}, *quantized]))
    for op in ("DEPTH_TO_SPACE", "SPACE_TO_DEPTH"):
        out.append((op, lambda op=op, **kw: depth_space(op, **kw), {}, quantized))
    out.append(
        ("BATCH_MATMUL", batch_matmul, {}, [{"static": "RC"}, {"dtype": "int8"}, {"dtype": "int8", "static": "RC"}])
    )
    out.append(("EXPAND_DIMS", expand_dims, {}, [{"static": "RR"}, *quantized]))
    return out


def generic(op: str, n_inputs: int):
    g = Graph()
    xs = [g.inp((1, 2, 2, 8)) for _ in range(n_inputs)]
    y = g.tensor((1, 2, 2, 8))
    return g, g.op(op, xs, [y]), [y]


def _run_probe(worker, path: Path, data: bytes, target: int) -> dict:
    path.write_bytes(data)
    try:
        model = read_tflite(data)
    except ModelFileError as exc:  # a node its kernel cannot take: edgeinf refuses it before any runtime
        return {"features": {}, "error": f"edgeinf: {str(exc)[:200]}", "delegated": None}
    sg = model.main
    features = node_features(model, sg, sg.operators[target])
    reply = worker.ask({"kind": "tflite", "path": str(path), "action": "run", "delegate": True})
    record = {"features": features}
    if not reply.get("ok"):
        record["error"] = f"{reply.get('stage')}: " + (reply.get("error") or "?").splitlines()[0][:200]
    if "ops" not in reply:  # failed before delegation was decided
        record["delegated"] = None
        return record
    partitions, _ = delegate_partitions(reply["ops"])
    record["delegated"] = any(target in p for p in partitions)
    return record


def probe(python: str, package: str, out_dir: Path) -> Path:
    version = runtime_version(python, package)
    resolver = json.loads((out_dir / f"tflite_{package}_{version}.json").read_text())["builtins"]
    ops: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp, RuntimeWorker(python, package, timeout_s=30) as worker:
        path = Path(tmp) / "p.tflite"
        for op, builder, base, variants in specs():
            if not resolver.get(op):
                continue
            records = []
            for kw in [base] + [dict(base, **v) for v in variants]:
                try:
                    g, target, outputs = builder(**kw)
                    data = g.build(outputs)
                except Exception as exc:  # a builder bug must not stop the table
                    records.append({"features": {}, "delegated": None, "error": f"build: {exc}", "variant": kw})
                    continue
                rec = _run_probe(worker, path, data, target)
                rec["variant"] = {k: v for k, v in kw.items()}
                records.append(rec)
            ops.setdefault(op, []).extend(records)
        # special structures: fp16 weights via DEQUANTIZE, sparse weights via DENSIFY
        g, target, outputs = dequantize_fp16_const()
        rec = _run_probe(worker, path, g.build(outputs), target)
        rec["variant"] = {"input": "fp16 constant"}
        ops.setdefault("DEQUANTIZE", []).append(rec)
        if resolver.get("DENSIFY"):
            for dtype in ("float32", "float16"):
                g, target, outputs, dense = densify_sparse_const(dtype)
                data = _with_sparsity(g.build(outputs), g.ops[target].inputs[0], dense)
                rec = _run_probe(worker, path, data, target)
                rec["variant"] = {"input": f"sparse {dtype} constant"}
                ops.setdefault("DENSIFY", []).append(rec)
        for op, versions in sorted(resolver.items()):
            if not versions or op in ops:
                continue
            records = []
            for n in (1, 2):
                g, target, outputs = generic(op, n)
                try:
                    data = g.build(outputs)
                except Exception as exc:
                    records.append(
                        {"features": {}, "delegated": None, "error": f"build: {exc}", "variant": {"generic_inputs": n}}
                    )
                    continue
                rec = _run_probe(worker, path, data, target)
                rec["variant"] = {"generic_inputs": n}
                records.append(rec)
            ops[op] = records
    table = {
        "_comment": "Generated by tools/probe_xnnpack.py; do not edit. op -> probe records; the first is the baseline.",
        "runtime": package,
        "version": version,
        "delegate": "xnnpack (the default delegate, OpResolverType.AUTO)",
        "probed": datetime.date.today().isoformat(),
        "method": "one-op models run (allocate + invoke) in a worker process; a node counts as delegated when a "
        "DELEGATE node's partition, recovered from _get_ops_details(), contains it",
        "ops": ops,
    }
    out = out_dir / f"xnnpack_{package}_{version}.json"
    taken = sorted(op for op, recs in ops.items() if any(r.get("delegated") for r in recs))
    write_table(out, table, f"{len(ops)} ops probed, XNNPACK takes {len(taken)} in some form")
    return out


def main(argv=None) -> int:
    return probe_main(probe, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
