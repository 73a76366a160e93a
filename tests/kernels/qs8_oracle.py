"""TFLite as the oracle of the int8 kernels: one-op int8 models, run on LiteRT.

Models are written with the project's own writer (`edgeinf.formats.tflite_writer`) and
run with ai-edge-litert's reference kernels (``OpResolverType.BUILTIN_REF``) and with
XNNPACK (the default delegate), one thread.
"""

from __future__ import annotations

import platform

import numpy as np
import pytest
from mismatch import first_mismatch

from edgeinf.isa import emulated_isas, supported_isas, use_isa

litert = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is the oracle of the int8 tests")
from edgeinf.formats.tflite_schema import schema  # noqa: E402
from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model  # noqa: E402

ACT_CODES = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}
ACTIVATIONS = ["none", "relu", "relu6", "relu_n1_to_1"]  # random cases take them in turn
# Under emulation (the aarch64 CI runs) the random sweeps run fewer and smaller cases.
EMULATED = platform.machine() in ("aarch64", "arm64")


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    msg = first_mismatch(got, want)
    assert not msg, f"{what}: {msg}"


def isa_paths() -> list[str]:
    """Every kernel path this CPU can run (scalar first), then the test paths that emulate
    an instruction it lacks (the VNNI GEMM on AVX2)."""
    return supported_isas() + emulated_isas()


def run_each_isa(fn) -> dict[str, np.ndarray]:
    """fn() under every supported kernel path."""
    results = {}
    for isa in isa_paths():
        with use_isa(isa):
            results[isa] = fn()
    return results


def interpreter(model: bytes, kind: str):
    """A LiteRT interpreter on reference kernels (``"reference"``) or XNNPACK (``"xnnpack"``)."""
    resolver = litert.OpResolverType.BUILTIN_REF if kind == "reference" else litert.OpResolverType.AUTO
    interp = litert.Interpreter(model_content=model, num_threads=1, experimental_op_resolver_type=resolver)
    interp.allocate_tensors()
    return interp


def delegated(interp) -> bool:
    """True when XNNPACK took the op (the graph shows a DELEGATE node)."""
    return any(op["op_name"] == "DELEGATE" for op in interp._get_ops_details())


def run(model: bytes, inputs: list[np.ndarray], kind: str = "reference") -> np.ndarray:
    interp = interpreter(model, kind)
    for detail, value in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], value)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def _scale_zp(scale, zp):
    return dict(scale=scale, zero_point=zp)


# ---------------------------------------------------------------- one-op models


def _weights_and_bias(weights, bias, in_scale, weight_scale, axis=0) -> list[TensorDef]:
    """The int8 weight tensor (scales per tensor or along ``axis``, zero point 0) and its int32
    bias (scale input scale x weight scale), as TFLite's quantization spec wants them."""
    ws = np.atleast_1d(np.asarray(weight_scale, np.float32))
    zeros = [0] * ws.size
    return [
        TensorDef("w", weights.shape, "int8", data=weights, scale=ws.tolist(), zero_point=zeros, quantized_dimension=axis),
        TensorDef("b", (weights.shape[axis],), "int32", data=bias, scale=(np.float32(in_scale) * ws).tolist(),
                  zero_point=zeros),
    ]  # fmt: skip


def fc_model(m, k, n, *, in_q, out_q, weights, weight_scale, bias, activation="none"):
    s = schema()
    tensors = [
        TensorDef("x", (m, k), "int8", **_scale_zp(in_q[0], in_q[1])),
        *_weights_and_bias(weights, bias, in_q[0], weight_scale),
        TensorDef("y", (m, n), "int8", **_scale_zp(out_q[0], out_q[1])),
    ]
    opts = s.FullyConnectedOptionsT()
    opts.fusedActivationFunction = ACT_CODES[activation]
    opts.keepNumDims = True
    return build_model(tensors, [OpDef("FULLY_CONNECTED", [0, 1, 2], [3], options=opts, version=4)], [0], [3])


def _convolution_model(op, opts, x_shape, weights, bias, channel_axis, *, stride, dilation, padding, in_q, out_q,
                       weight_scale, activation):  # fmt: skip
    """A one-op model of CONV_2D or DEPTHWISE_CONV_2D (``opts`` its options, output channels
    along ``channel_axis`` of the weights)."""
    from edgeinf.quant import conv_output_size

    oh, ow = (
        conv_output_size(x_shape[1 + d], weights.shape[1 + d], stride[d], dilation[d], padding)[0] for d in (0, 1)
    )
    tensors = [
        TensorDef("x", tuple(x_shape), "int8", **_scale_zp(in_q[0], in_q[1])),
        *_weights_and_bias(weights, bias, in_q[0], weight_scale, axis=channel_axis),
        TensorDef("y", (x_shape[0], oh, ow, weights.shape[channel_axis]), "int8", **_scale_zp(out_q[0], out_q[1])),
    ]
    opts.padding = 0 if padding == "same" else 1
    opts.strideH, opts.strideW = stride
    opts.dilationHFactor, opts.dilationWFactor = dilation
    opts.fusedActivationFunction = ACT_CODES[activation]
    return build_model(tensors, [OpDef(op, [0, 1, 2], [3], options=opts, version=3)], [0], [3])


def conv_model(x_shape, weights, bias, *, activation="none", **geometry_and_quantization):
    """CONV_2D of OHWI ``weights``; keywords: stride, dilation, padding, in_q, out_q, weight_scale."""
    opts = schema().Conv2DOptionsT()
    return _convolution_model("CONV_2D", opts, x_shape, weights, bias, 0, activation=activation,
                              **geometry_and_quantization)  # fmt: skip


def dwconv_model(x_shape, weights, bias, *, multiplier, activation="none", **geometry_and_quantization):
    """DEPTHWISE_CONV_2D of 1HWC ``weights``; keywords as `conv_model`."""
    opts = schema().DepthwiseConv2DOptionsT()
    opts.depthMultiplier = multiplier
    return _convolution_model("DEPTHWISE_CONV_2D", opts, x_shape, weights, bias, 3, activation=activation,
                              **geometry_and_quantization)  # fmt: skip


def pool_model(op, x_shape, *, pool, stride, padding, q, activation="none"):
    s = schema()
    b, h, w, c = x_shape
    from edgeinf.quant import conv_output_size

    oh, _ = conv_output_size(h, pool[0], stride[0], 1, padding)
    ow, _ = conv_output_size(w, pool[1], stride[1], 1, padding)
    tensors = [
        TensorDef("x", tuple(x_shape), "int8", **_scale_zp(*q)),
        TensorDef("y", (b, oh, ow, c), "int8", **_scale_zp(*q)),
    ]
    opts = s.Pool2DOptionsT()
    opts.padding = 0 if padding == "same" else 1
    opts.strideH, opts.strideW = stride
    opts.filterHeight, opts.filterWidth = pool
    opts.fusedActivationFunction = ACT_CODES[activation]
    return build_model(tensors, [OpDef(op, [0], [1], options=opts, version=2)], [0], [1])


def binary_model(op, shape_a, shape_b, out_shape, *, qa, qb, qo, activation="none"):
    s = schema()
    tensors = [
        TensorDef("a", tuple(shape_a), "int8", **_scale_zp(*qa)),
        TensorDef("b", tuple(shape_b), "int8", **_scale_zp(*qb)),
        TensorDef("y", tuple(out_shape), "int8", **_scale_zp(*qo)),
    ]
    opts = s.AddOptionsT() if op == "ADD" else s.MulOptionsT()
    opts.fusedActivationFunction = ACT_CODES[activation]
    return build_model(tensors, [OpDef(op, [0, 1], [2], options=opts, version=2)], [0, 1], [2])


def unary_model(op, shape, *, in_q, out_q, options=None, in_dtype="int8", out_dtype="int8", version=2):
    tensors = [
        TensorDef("x", tuple(shape), in_dtype, **({} if in_q is None else _scale_zp(*in_q))),
        TensorDef("y", tuple(shape), out_dtype, **({} if out_q is None else _scale_zp(*out_q))),
    ]
    return build_model(tensors, [OpDef(op, [0], [1], options=options, version=version)], [0], [1])


def softmax_model(shape, *, in_q, beta):
    s = schema()
    opts = s.SoftmaxOptionsT()
    opts.beta = beta
    return unary_model("SOFTMAX", shape, in_q=in_q, out_q=(1.0 / 256, -128), options=opts)


# ---------------------------------------------------------------- random parameters


def random_int8(rng, shape) -> np.ndarray:
    """Uniform int8 values over the whole range."""
    return rng.integers(-128, 128, shape, dtype=np.int8)


def random_scale(rng, lo=1e-3, hi=0.1) -> float:
    """A float32-representable scale, log-uniform in [lo, hi]."""
    return float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


def random_zero_point(rng) -> int:
    """Zero points with the edges -128 and 127 drawn often."""
    r = rng.random()
    if r < 0.2:
        return -128
    if r < 0.35:
        return 127
    if r < 0.45:
        return 0
    return int(rng.integers(-128, 128))
