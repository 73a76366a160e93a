"""Small int8 graphs for the engine tests, written with edgeinf's own .tflite writer, and
the oracle: LiteRT's reference kernels (``OpResolverType.BUILTIN_REF``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from edgeinf import kernels
from edgeinf.formats.tflite import read_tflite
from edgeinf.formats.tflite_schema import schema
from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model
from edgeinf.quant import conv_output_size

# tests/ holds the comparison message shared with the kernel tests; the benchmarks import
# this module with only tests/engine on their path.
TESTS = str(Path(__file__).resolve().parents[1])
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
from mismatch import first_mismatch  # noqa: E402

litert = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is the oracle of the engine tests")

ACT = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}


def f32(x: float) -> float:
    return float(np.float32(x))


class Graph:
    """Tensors and operators of one subgraph; ``add_*`` append an operator and return
    its output tensor index."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.tensors: list[TensorDef] = []
        self.ops: list[OpDef] = []

    def tensor(self, shape, dtype="int8", q=None, data=None, **extra) -> int:
        quant = {} if q is None else {"scale": q[0], "zero_point": q[1]}
        self.tensors.append(TensorDef(f"t{len(self.tensors)}", tuple(shape), dtype, data=data, **quant, **extra))
        return len(self.tensors) - 1

    def shape(self, t: int) -> tuple[int, ...]:
        return tuple(self.tensors[t].shape)

    def q(self, t: int) -> tuple[float, int]:
        return self.tensors[t].scale, self.tensors[t].zero_point

    def op(self, name, inputs, outputs, options=None, version=1) -> int:
        self.ops.append(OpDef(name, list(inputs), list(outputs), options=options, version=version))
        return outputs[0]

    def build(self, inputs, outputs) -> bytes:
        return build_model(self.tensors, self.ops, list(inputs), list(outputs))

    # -- operators with weights ---------------------------------------------------
    def conv(self, x, out_c, kernel=3, *, stride=1, dilation=1, padding="same", out_q, per_channel=True,
             activation="none", depthwise=False, multiplier=1):  # fmt: skip
        n, h, w, c = self.shape(x)
        in_scale = self.q(x)[0]
        o = c * multiplier if depthwise else out_c
        ws = np.float32(self.rng.uniform(0.002, 0.02, o if per_channel else 1))
        wshape = (1, kernel, kernel, o) if depthwise else (o, kernel, kernel, c)
        weights = self.rng.integers(-127, 128, wshape, dtype=np.int8)
        bias = self.rng.integers(-3000, 3000, o).astype(np.int32)
        wt = self.tensor(wshape, data=weights, scale=ws.tolist(), zero_point=[0] * ws.size,
                         quantized_dimension=3 if depthwise else 0)  # fmt: skip
        bt = self.tensor((o,), "int32", data=bias, scale=(np.float32(in_scale) * ws).tolist(), zero_point=[0] * ws.size)
        oh = conv_output_size(h, kernel, stride, dilation, padding)[0]
        ow = conv_output_size(w, kernel, stride, dilation, padding)[0]
        y = self.tensor((n, oh, ow, o), q=out_q)
        s = schema()
        opts = s.DepthwiseConv2DOptionsT() if depthwise else s.Conv2DOptionsT()
        opts.padding = 0 if padding == "same" else 1
        opts.strideH = opts.strideW = stride
        opts.dilationHFactor = opts.dilationWFactor = dilation
        opts.fusedActivationFunction = ACT[activation]
        if depthwise:
            opts.depthMultiplier = multiplier
        return self.op("DEPTHWISE_CONV_2D" if depthwise else "CONV_2D", [x, wt, bt], [y], opts, 3)

    def fully_connected(self, x, n_out, *, out_q, per_channel=False, activation="none", keep_num_dims=False):
        shape = self.shape(x)
        k = shape[-1]
        rows = int(np.prod(shape)) // k
        ws = np.float32(self.rng.uniform(0.002, 0.02, n_out if per_channel else 1))
        weights = self.rng.integers(-127, 128, (n_out, k), dtype=np.int8)
        bias = self.rng.integers(-3000, 3000, n_out).astype(np.int32)
        wt = self.tensor((n_out, k), data=weights, scale=ws.tolist(), zero_point=[0] * ws.size)
        in_scale = self.q(x)[0]
        bt = self.tensor(
            (n_out,), "int32", data=bias, scale=(np.float32(in_scale) * ws).tolist(), zero_point=[0] * ws.size
        )
        y = self.tensor((*shape[:-1], n_out) if keep_num_dims else (rows, n_out), q=out_q)
        opts = schema().FullyConnectedOptionsT()
        opts.fusedActivationFunction = ACT[activation]
        opts.keepNumDims = keep_num_dims
        return self.op("FULLY_CONNECTED", [x, wt, bt], [y], opts, 4 if per_channel else 4)

    # -- the rest ------------------------------------------------------------------
    def binary(self, name, a, b, *, out_q, activation="none"):
        shape = np.broadcast_shapes(self.shape(a), self.shape(b))
        y = self.tensor(shape, q=out_q)
        opts = {"ADD": schema().AddOptionsT, "MUL": schema().MulOptionsT, "SUB": schema().SubOptionsT}[name]()
        opts.fusedActivationFunction = ACT[activation]
        return self.op(name, [a, b], [y], opts, 2)

    def pool(self, name, x, size=2, stride=2, padding="valid", activation="none"):
        n, h, w, c = self.shape(x)
        oh = conv_output_size(h, size, stride, 1, padding)[0]
        ow = conv_output_size(w, size, stride, 1, padding)[0]
        y = self.tensor((n, oh, ow, c), q=self.q(x))
        opts = schema().Pool2DOptionsT()
        opts.padding = 0 if padding == "same" else 1
        opts.strideH = opts.strideW = stride
        opts.filterHeight = opts.filterWidth = size
        opts.fusedActivationFunction = ACT[activation]
        return self.op(name, [x], [y], opts, 2)

    def reshape(self, x, shape):
        st = self.tensor((len(shape),), "int32", data=np.array(shape, np.int32))
        y = self.tensor(shape, q=self.q(x))
        opts = schema().ReshapeOptionsT()
        opts.newShape = list(shape)
        return self.op("RESHAPE", [x, st], [y], opts)

    def pad(self, x, pads, value=None):
        pt = self.tensor((len(pads), 2), "int32", data=np.array(pads, np.int32))
        shape = tuple(d + a + b for d, (a, b) in zip(self.shape(x), pads))
        y = self.tensor(shape, q=self.q(x))
        if value is None:
            return self.op("PAD", [x, pt], [y], version=2)
        vt = self.tensor((), "int8", q=self.q(x), data=np.array(value, np.int8))
        return self.op("PADV2", [x, pt, vt], [y], version=2)

    def concat(self, parts, axis):
        shape = list(self.shape(parts[0]))
        shape[axis] = sum(self.shape(p)[axis] for p in parts)
        y = self.tensor(shape, q=self.q(parts[0]))
        opts = schema().ConcatenationOptionsT()
        opts.axis = axis
        return self.op("CONCATENATION", parts, [y], opts, 2)

    def unary(self, name, x, *, out_q, dtype="int8", options=None, version=2):
        y = self.tensor(self.shape(x), dtype, q=out_q)
        return self.op(name, [x], [y], options, version)

    def softmax(self, x, beta=1.0):
        opts = schema().SoftmaxOptionsT()
        opts.beta = beta
        return self.unary("SOFTMAX", x, out_q=(1.0 / 256, -128), options=opts)


def random_q(rng, lo=0.01, hi=0.1) -> tuple[float, int]:
    zp = int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))
    return f32(np.exp(rng.uniform(np.log(lo), np.log(hi)))), zp


def reference_outputs(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    interp = litert.Interpreter(
        model_content=data, num_threads=1, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF
    )
    interp.allocate_tensors()
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def engine(data: bytes, threads: int = 1):
    """The engine backend on ``data`` (raises rather than falling back)."""
    from edgeinf.backends.edgeinf import EngineBackend

    return EngineBackend(read_tflite(data), num_threads=threads)


def random_inputs(rng, backend) -> list[np.ndarray]:
    out = []
    for spec in backend.inputs:
        if spec.dtype == np.float32:
            out.append(rng.uniform(-4, 4, spec.shape).astype(np.float32))
        else:
            info = np.iinfo(spec.dtype)
            out.append(rng.integers(info.min, info.max + 1, spec.shape, dtype=spec.dtype))
    return out


def assert_engine_exact(data: bytes, rng, runs: int = 2, threads: int = 1) -> dict:
    """Run ``data`` on the engine (on ``threads`` threads) under every kernel path this CPU
    has and on LiteRT's reference kernels; assert every output equal, bit for bit. Returns
    the plan summary."""
    backend = engine(data, threads)
    for _ in range(runs):
        inputs = random_inputs(rng, backend)
        want = reference_outputs(data, inputs)
        for isa in kernels.supported_isas() + kernels.emulated_isas():
            with kernels.use_isa(isa):
                for i, x in enumerate(inputs):
                    backend.set_input(i, x)
                got = backend.invoke()
            for k, (g, w) in enumerate(zip(got, want)):
                msg = first_mismatch(g, w)
                assert not msg, f"output {k} on {isa}: {msg}"
    return backend.details["plan"]


def fold_float16_weights(data: bytes) -> bytes:
    """The model with every float16 constant behind a DEQUANTIZE stored as float32 and the
    DEQUANTIZE removed: TFLite's calibrator cannot quantize the float16 form."""
    from edgeinf.formats.tflite_writer import pack, unpack

    s = schema()
    model = unpack(data)
    sg = model.subgraphs[0]
    kept = []
    for op in sg.operators:
        code = model.operatorCodes[op.opcodeIndex]
        source = sg.tensors[op.inputs[0]]
        buffer = model.buffers[source.buffer]
        if (
            max(code.builtinCode, code.deprecatedBuiltinCode) == s.BuiltinOperator.DEQUANTIZE
            and source.type == s.TensorType.FLOAT16
            and buffer.data is not None
            and len(buffer.data)
        ):
            values = np.frombuffer(np.asarray(buffer.data, np.uint8).tobytes(), np.float16).astype(np.float32)
            folded = s.BufferT()
            folded.data = np.frombuffer(values.tobytes(), np.uint8)
            model.buffers.append(folded)
            sg.tensors[op.outputs[0]].buffer = len(model.buffers) - 1
            continue
        kept.append(op)
    sg.operators = kept
    used = sorted({op.opcodeIndex for op in kept})  # an unused DEQUANTIZE code would still be registered
    model.operatorCodes = [model.operatorCodes[i] for i in used]
    for op in kept:
        op.opcodeIndex = used.index(op.opcodeIndex)
    return pack(model)


def calibrate_int8(source: bytes, samples: list[np.ndarray]) -> bytes:
    """``source`` (a float .tflite) quantized by TFLite's own post-training calibrator (the
    converter's, in the LiteRT wheel): int8 activations, weights, input and output, int32
    bias, per-channel weights. The calibrator keeps a pointer into the bytes it was given:
    they stay referenced until it is gone."""
    from ai_edge_litert import _pywrap_tensorflow_lite_calibration_wrapper as calibration

    wrapper = calibration.CalibrationWrapper(source, [], [])
    wrapper.Prepare()
    for x in samples:
        wrapper.FeedTensor([x])
    int8 = np.dtype(np.int8).num
    data = bytes(wrapper.QuantizeModel(int8, int8, False, int8, np.dtype(np.int32).num, False, False))
    del wrapper
    return data


def add_mean(g: Graph, x: int, axes, keep_dims: bool, out_q) -> int:
    """MEAN of ``x`` over ``axes``; the output shape follows keep_dims."""
    shape = g.shape(x)
    norm = {a % len(shape) for a in axes}
    out = (
        tuple(1 if d in norm else n for d, n in enumerate(shape))
        if keep_dims
        else tuple(n for d, n in enumerate(shape) if d not in norm)
    )
    at = g.tensor((len(axes),), "int32", data=np.array(axes, np.int32))
    y = g.tensor(out, q=out_q)
    opts = schema().ReducerOptionsT()
    opts.keepDims = keep_dims
    return g.op("MEAN", [x, at], [y], opts, 2)
