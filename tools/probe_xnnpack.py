"""Probe which nodes XNNPACK takes in an installed TFLite runtime; write tables/xnnpack_<pkg>_<ver>.json.

For each op, a baseline one-op model (float32, constant weights, usual options) and
variants that change one attribute at a time (runtime weights, int8, no bias, beta=0,
1x1 pooling with stride 2, a dynamic batch, ...) run in a worker process with the default
delegates (tools/runtime_worker.py). Whether XNNPACK took the node is recovered from the
interpreter's own op list: the synthetic DELEGATE nodes and a walk back from their
outputs. Each record stores the node's features (edgeinf.compat.features) and the answer.
Every other op the runtime registers is probed with a generic one- and two-input model.

Usage:
    python tools/probe_xnnpack.py --python /work/venv/bin/python --package ai_edge_litert
    python tools/probe_xnnpack.py --python /work/venv-legacy/bin/python --package tflite_runtime
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from probe_tflite import runtime_version  # noqa: E402
from runtime_worker import RuntimeWorker, delegate_partitions  # noqa: E402

from edgeinf.compat.features import node_features  # noqa: E402
from edgeinf.errors import ModelFileError  # noqa: E402
from edgeinf.formats.tflite import read_tflite  # noqa: E402
from edgeinf.formats.tflite_schema import schema  # noqa: E402
from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model, pack  # noqa: E402

RNG = np.random.default_rng(7)
Q_IN = {"scale": 0.05, "zero_point": 0}


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


def _q(dtype: str) -> dict:
    return dict(Q_IN) if dtype == "int8" else {}


# ---- builders: each returns (model bytes, index of the probed op) ------------------------------


def unary(op, dtype="float32", rank=4, options=None, dynamic=False):
    g = Graph()
    shape = (1, 4, 4, 8)[4 - rank :] if rank < 4 else (1, 4, 4, 8)
    in_dtype, out_dtype = dtype, dtype
    if op == "QUANTIZE":
        in_dtype, out_dtype = "float32", "int8"
    if op == "DEQUANTIZE":
        in_dtype, out_dtype = "int8", "float32"
    x = g.inp(shape, in_dtype, dynamic=dynamic, **_q(in_dtype))
    oq = _q(out_dtype)
    if op == "LOGISTIC" and out_dtype == "int8":
        oq = {"scale": 1 / 256, "zero_point": -128}
    if op == "TANH" and out_dtype == "int8":
        oq = {"scale": 1 / 128, "zero_point": 0}
    y = g.tensor(shape, out_dtype, **oq)
    return g, g.op(op, [x], [y], options), [y]


def softmax(beta=1.0, dtype="float32", dynamic=False):
    g = Graph()
    x = g.inp((1, 16), dtype, dynamic=dynamic, **_q(dtype))
    y = g.tensor((1, 16), dtype, **({"scale": 1 / 256, "zero_point": -128} if dtype == "int8" else {}))
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
        data = RNG.uniform(-1, 1, size=other_shape).astype(np.float32)
        w = (
            g.const(np.clip(np.round(data / 0.05), -127, 127).astype(np.int8), **Q_IN)
            if dtype == "int8"
            else g.const(data)
        )
    else:
        w = g.inp(other_shape, dtype, **_q(dtype))
    y = g.tensor(shape, dtype, **({"scale": 0.1, "zero_point": 0} if dtype == "int8" else {}))
    opts = None
    if op in _BINARY_OPTIONS:
        opts = _opts(_BINARY_OPTIONS[op], fusedActivationFunction=_act(activation or "NONE"))
    return g, g.op(op, [x, w], [y], opts), [y]


def _weights(shape, dtype, per_channel_axis=0):
    data = RNG.uniform(-1, 1, size=shape).astype(np.float32)
    if dtype != "int8":
        return {"array": data}
    n = shape[per_channel_axis]
    scales = [0.01 * (1 + i % 3) for i in range(n)]
    sc = np.asarray(scales, np.float32).reshape([-1 if a == per_channel_axis else 1 for a in range(len(shape))])
    q = np.clip(np.round(data / sc), -127, 127).astype(np.int8)
    return {"array": q, "scale": scales, "zero_point": [0] * n, "quantized_dimension": per_channel_axis}


def _conv_like(op, static, dtype, activation, stride, padding, dilation, dynamic, w_shape, out_c, bias_scale_axis):
    g = Graph()
    x = g.inp((1, 8, 8, 4), dtype, dynamic=dynamic, **_q(dtype))
    if static[1] == "C":
        w = _weights(w_shape, dtype, bias_scale_axis)
        arr = w.pop("array")
        wt = g.const(arr, **w)
    else:
        wt = g.inp(w_shape, dtype, **_q(dtype))
    bias = -1
    if len(static) == 3 and static[2] != "-":
        if dtype == "int8":
            b = g.const(np.zeros(out_c, np.int32), scale=[0.05 * 0.01] * out_c, zero_point=[0] * out_c)
        else:
            b = g.const(RNG.uniform(-1, 1, size=out_c).astype(np.float32)) if static[2] == "C" else g.inp((out_c,))
        bias = b
    out_hw = 8 // stride if padding == "SAME" else (8 - (3 - 1) * dilation - 1) // stride + 1
    y = g.tensor((1, out_hw, out_hw, out_c), dtype, **({"scale": 0.2, "zero_point": 0} if dtype == "int8" else {}))
    fields = dict(
        padding=_pad(padding), strideW=stride, strideH=stride, dilationWFactor=dilation, dilationHFactor=dilation,
        fusedActivationFunction=_act(activation),
    )  # fmt: skip
    if op == "DEPTHWISE_CONV_2D":
        fields["depthMultiplier"] = 1
    opts = _opts("Conv2DOptions" if op == "CONV_2D" else "DepthwiseConv2DOptions", **fields)
    ins = [x, wt, bias] if len(static) == 3 else [x, wt]
    return g, g.op(op, ins, [y], opts), [y]


def conv2d(static="RCC", dtype="float32", activation="NONE", stride=1, padding="SAME", dilation=1, dynamic=False):
    return _conv_like("CONV_2D", static, dtype, activation, stride, padding, dilation, dynamic, (6, 3, 3, 4), 6, 0)


def depthwise(static="RCC", dtype="float32", activation="NONE", stride=1, padding="SAME", dilation=1, dynamic=False):
    return _conv_like(
        "DEPTHWISE_CONV_2D", static, dtype, activation, stride, padding, dilation, dynamic, (1, 3, 3, 4), 4, 3
    )


def fully_connected(static="RCC", dtype="float32", keep_num_dims=False, activation="NONE", dynamic=False):
    g = Graph()
    x = g.inp((2, 16), dtype, dynamic=dynamic, **_q(dtype))
    if static[1] == "C":
        w = _weights((8, 16), dtype, 0)
        wt = g.const(w.pop("array"), **w)
    else:
        wt = g.inp((8, 16), dtype, **_q(dtype))
    bias = -1
    if len(static) == 3 and static[2] != "-":
        if dtype == "int8":
            bias = g.const(np.zeros(8, np.int32), scale=[0.05 * 0.01] * 8, zero_point=[0] * 8)
        else:
            bias = g.const(np.zeros(8, np.float32)) if static[2] == "C" else g.inp((8,))
    y = g.tensor((2, 8), dtype, **({"scale": 0.2, "zero_point": 0} if dtype == "int8" else {}))
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


def reshape(static="RC", new_shape_option=False, dynamic=False):
    g = Graph()
    x = g.inp((1, 4, 4, 8), dynamic=dynamic)
    ins = [x]
    if static != "R":
        ins.append(g.const(np.array([1, 128], np.int32)) if static[1] == "C" else g.inp((2,), "int32"))
    y = g.tensor((1, 128))
    opts = _opts("ReshapeOptions", newShape=[1, 128]) if new_shape_option else None
    return g, g.op("RESHAPE", ins, [y], opts), [y]


def transpose(static="RC"):
    g = Graph()
    x = g.inp((1, 4, 6, 8))
    perm = g.const(np.array([0, 3, 1, 2], np.int32)) if static[1] == "C" else g.inp((4,), "int32")
    y = g.tensor((1, 8, 4, 6))
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


def resize_bilinear(static="RC", align_corners=False, half_pixel_centers=False):
    g = Graph()
    x = g.inp((1, 4, 4, 8))
    size = g.const(np.array([8, 8], np.int32)) if static[1] == "C" else g.inp((2,), "int32")
    y = g.tensor((1, 8, 8, 8))
    opts = _opts("ResizeBilinearOptions", alignCorners=align_corners, halfPixelCenters=half_pixel_centers)
    return g, g.op("RESIZE_BILINEAR", [x, size], [y], opts), [y]


def slice_(static="RCC"):
    g = Graph()
    x = g.inp((1, 4, 4, 8))
    begin = g.const(np.array([0, 1, 1, 0], np.int32)) if static[1] == "C" else g.inp((4,), "int32")
    size = g.const(np.array([1, 2, 2, 8], np.int32))
    y = g.tensor((1, 2, 2, 8))
    return g, g.op("SLICE", [x, begin, size], [y]), [y]


def strided_slice(static="RCCC", step=1):
    g = Graph()
    x = g.inp((1, 4, 4, 8))
    begin = g.const(np.array([0, 0, 0, 0], np.int32)) if static[1] == "C" else g.inp((4,), "int32")
    end = g.const(np.array([1, 4, 4, 8], np.int32))
    strides = g.const(np.array([1, step, step, 1], np.int32))
    y = g.tensor((1, 4 // step, 4 // step, 8))
    return g, g.op("STRIDED_SLICE", [x, begin, end, strides], [y], _opts("StridedSliceOptions")), [y]


def split(static="CR"):
    g = Graph()
    axis = g.const(np.array(3, np.int32).reshape(())) if static[0] == "C" else g.inp((), "int32")
    x = g.inp((1, 4, 4, 8))
    a, b = g.tensor((1, 4, 4, 4)), g.tensor((1, 4, 4, 4))
    return g, g.op("SPLIT", [axis, x], [a, b], _opts("SplitOptions", numSplits=2)), [a, b]


def depth_space(op):
    g = Graph()
    if op == "DEPTH_TO_SPACE":
        x, y = g.inp((1, 4, 4, 8)), g.tensor((1, 8, 8, 2))
        opts = _opts("DepthToSpaceOptions", blockSize=2)
    else:
        x, y = g.inp((1, 4, 4, 8)), g.tensor((1, 2, 2, 32))
        opts = _opts("SpaceToDepthOptions", blockSize=2)
    return g, g.op(op, [x], [y], opts), [y]


def batch_matmul(static="RR"):
    g = Graph()
    a = g.inp((1, 4, 8))
    b = g.const(RNG.uniform(-1, 1, size=(1, 8, 6)).astype(np.float32)) if static[1] == "C" else g.inp((1, 8, 6))
    y = g.tensor((1, 4, 6))
    return g, g.op("BATCH_MATMUL", [a, b], [y], _opts("BatchMatMulOptions")), [y]


def expand_dims(static="RC"):
    g = Graph()
    x = g.inp((1, 4, 8))
    axis = g.const(np.array([1], np.int32)) if static[1] == "C" else g.inp((1,), "int32")
    y = g.tensor((1, 1, 4, 8))
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


def densify_sparse_const():
    # a constant sparse (CSR) tensor, densified then dequantized/used like converters emit
    g = Graph()
    x = g.inp((4, 4))
    dense = np.zeros((4, 4), np.float32)
    dense[0, 1], dense[2, 3], dense[3, 0] = 1.0, 2.0, 3.0
    values = dense[dense != 0]
    c = g.const(values)
    d = g.tensor((4, 4))
    target = g.op("DENSIFY", [c], [d])
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


def specs():
    """(op, builder, baseline kwargs, [variant kwargs...]) for every op probed with care."""
    out = []
    for op in UNARY:
        variants = (
            [{"dtype": "int8"}, {"rank": 2}, {"dynamic": True}]
            if op not in ("QUANTIZE", "DEQUANTIZE")
            else [{"rank": 2}]
        )
        out.append((op, lambda op=op, **kw: unary(op, **kw), {}, variants))
    out.append(("SOFTMAX", softmax, {}, [{"beta": None}, {"beta": 2.0}, {"dtype": "int8"}, {"dynamic": True}]))
    out.append(("LEAKY_RELU", leaky_relu, {}, [{"alpha": None}, {"dtype": "int8"}]))
    for op in BINARY:
        variants = [{"static": "RC"}, {"dtype": "int8"}, {"dynamic": True}]
        if op in _BINARY_OPTIONS:
            variants.append({"activation": "RELU"})
        out.append((op, lambda op=op, **kw: binary(op, **kw), {}, variants))
    out.append(("PRELU", lambda **kw: binary("PRELU", **kw), {"static": "RC"}, [{"static": "RR"}]))
    conv_variants = [
        {"static": "RRC"}, {"static": "RC-"}, {"static": "RC"}, {"static": "RCR"}, {"dtype": "int8"}, {"stride": 2}, {"padding": "VALID"},
        {"dilation": 2}, {"activation": "RELU6"}, {"activation": "RELU"}, {"dynamic": True},
    ]  # fmt: skip
    out.append(("CONV_2D", conv2d, {}, conv_variants))
    out.append(("DEPTHWISE_CONV_2D", depthwise, {}, conv_variants))
    fc_variants = [
        {"static": "RRC"},
        {"static": "RC-"},
        {"static": "RC"},
        {"dtype": "int8"},
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
            {"dtype": "int8"},
            {"activation": "RELU"},
        ]
        out.append((op, lambda op=op, **kw: pool(op, **kw), {}, pool_variants))
    for op in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN"):
        out.append(
            (
                op,
                lambda op=op, **kw: reduce(op, **kw),
                {},
                [{"static": "RR"}, {"keep_dims": False}, {"dtype": "int8"}, {"dynamic": True}],
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
            ],
        )
    )
    out.append(("TRANSPOSE", transpose, {}, [{"static": "RR"}]))
    out.append(("PAD", pad, {}, [{"static": "RR"}, {"dtype": "int8"}]))
    out.append(("CONCATENATION", concatenation, {}, [{"n": 1}, {"n": 3}, {"n": 5}, {"dtype": "int8"}]))
    out.append(
        (
            "RESIZE_BILINEAR",
            resize_bilinear,
            {},
            [{"static": "RR"}, {"align_corners": True}, {"half_pixel_centers": True}],
        )
    )
    out.append(("SLICE", slice_, {}, [{"static": "RRC"}]))
    out.append(("STRIDED_SLICE", strided_slice, {}, [{"static": "RRCC"}, {"step": 2}]))
    out.append(("SPLIT", split, {}, [{"static": "RR"}]))
    out.append(("DEPTH_TO_SPACE", lambda **kw: depth_space("DEPTH_TO_SPACE"), {}, []))
    out.append(("SPACE_TO_DEPTH", lambda **kw: depth_space("SPACE_TO_DEPTH"), {}, []))
    out.append(("BATCH_MATMUL", batch_matmul, {}, [{"static": "RC"}]))
    out.append(("EXPAND_DIMS", expand_dims, {}, [{"static": "RR"}]))
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
            ops[op] = records
        # special structures: fp16 weights via DEQUANTIZE, sparse weights via DENSIFY
        g, target, outputs = dequantize_fp16_const()
        rec = _run_probe(worker, path, g.build(outputs), target)
        rec["variant"] = {"input": "fp16 constant"}
        ops.setdefault("DEQUANTIZE", []).append(rec)
        if resolver.get("DENSIFY"):
            g, target, outputs, dense = densify_sparse_const()
            data = _with_sparsity(g.build(outputs), g.ops[target].inputs[0], dense)
            rec = _run_probe(worker, path, data, target)
            rec["variant"] = {"input": "sparse constant"}
            ops["DENSIFY"] = [rec]
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
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    taken = sorted(op for op, recs in ops.items() if any(r.get("delegated") for r in recs))
    print(f"{out}: {len(ops)} ops probed, XNNPACK takes {len(taken)} in some form")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--package", default="ai_edge_litert", choices=["ai_edge_litert", "tflite_runtime"])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "edgeinf/compat/tables")
    args = parser.parse_args(argv)
    probe(args.python, args.package, args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
