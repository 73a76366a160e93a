"""The float form of the requantization (the AVX2 and NEON GEMM, conv and depthwise kernels).

Where construction finds it exact, those kernels requantize with one float multiply-add
instead of TFLite's fixed-point steps (csrc/quant/rq_float.cc, proven with each ISA's
own instructions by rq_float__avx2.cc and rq_float__neon.cc). These tests sweep every accumulator whose output is not saturated, including exact ties, and
check what happens under another rounding mode, against LiteRT's reference kernels.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from contextlib import contextmanager

import numpy as np
import pytest
from qs8_oracle import assert_same, conv_model, dwconv_model, fc_model, isa_paths, run, run_each_isa

from edgeinf import quant

AVX2 = "avx2" in isa_paths()
NEON = "neon" in isa_paths()
# the build's vector ISA fits the float form where it is exact
FITS = AVX2 or NEON

# (input scale, weight scale, output scale): multipliers of 1.058 (the benchmark's), 0.5 and
# 0.25 exactly (powers of two: half of all accumulators are ties), 2 and 7.9 (left shifts
# folded into the weights), 0.3 and 1/40 (right shifts: the offset depends on the sign).
SCALES = [
    (0.02, 0.005, 0.02 * 0.005 / 1.058),
    (0.5, 0.25, 0.25),
    (0.5, 0.125, 0.25),
    (0.02, 0.005, 0.02 * 0.005 / 2.0),
    (0.03, 0.007, 0.03 * 0.007 / 7.9),
    (0.02, 0.005, 0.02 * 0.005 / 0.3),
    (0.011, 0.013, 0.011 * 0.013 * 40),
]


def _sweep(in_q, w_scale, out_q, channels=None):
    """A 1x1 depthwise layer of weights 1 whose 256-pixel input holds every int8 value once
    and whose bias steps by 256 per channel: its accumulators are consecutive integers
    covering the multiplier's whole unsaturated range (and saturated ones each side)."""
    multiplier = in_q[0] * w_scale / out_q[0]
    unsaturated = 256 / multiplier + 512
    channels = channels or 16 * int(np.ceil(unsaturated / 256 / 16))  # whole 16-channel blocks: the SIMD kernel's
    centre = -out_q[1] / multiplier  # the accumulator whose output is 0
    first = int(centre - channels * 128)
    bias = (first + 256 * np.arange(channels) + 128 + in_q[1]).astype(np.int32)
    x = np.repeat(np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16, 1), channels, axis=3)
    weights = np.ones((1, 1, 1, channels), np.int8)
    return x, weights, bias


def _check_dw(x, weights, bias, in_q, w_scale, out_q, activation="none"):
    model = dwconv_model(x.shape, weights, bias, multiplier=1, stride=(1, 1), dilation=(1, 1), padding="valid",
                         in_q=in_q, out_q=out_q, weight_scale=w_scale, activation=activation)  # fmt: skip
    want = run(model, [x])
    dw = quant.DepthwiseConv2D(weights, bias, padding="valid", input_scale=in_q[0], input_zero_point=in_q[1],
                               weight_scale=w_scale, output_scale=out_q[0], output_zero_point=out_q[1],
                               activation=activation)  # fmt: skip
    for isa, got in run_each_isa(lambda: dw(x)).items():
        assert_same(got, want, f"sweep of {in_q} {w_scale} {out_q} {activation} on {isa}")
    return dw, want


@pytest.mark.parametrize("scales", SCALES)
@pytest.mark.parametrize("zero_points", [(0, 0), (-3, 5), (127, -128), (-128, 127)])
def test_every_unsaturated_accumulator_requantizes_as_tflite(scales, zero_points):
    in_scale, w_scale, out_scale = (float(np.float32(s)) for s in scales)
    in_q, out_q = (in_scale, zero_points[0]), (out_scale, zero_points[1])
    x, weights, bias = _sweep(in_q, w_scale, out_q)
    dw, want = _check_dw(x, weights, bias, in_q, w_scale, out_q)
    assert want.min() == -128 and want.max() == 127, "the sweep reaches both saturations"
    if FITS:
        assert dw._op._float_requantization, "expected the float form for these scales"


@pytest.mark.parametrize("activation", ["relu", "relu6", "relu_n1_to_1"])
def test_float_form_with_an_activation_clamp(activation):
    in_q, w_scale, out_q = (0.02, 4), 0.005, (float(np.float32(0.02 * 0.005 / 0.3)), -7)
    x, weights, bias = _sweep(in_q, w_scale, out_q)
    dw, _ = _check_dw(x, weights, bias, in_q, w_scale, out_q, activation)
    if FITS:
        assert dw._op._float_requantization


def test_too_many_unsaturated_accumulators_keep_the_fixed_point_form():
    """With a multiplier of 1/5000 and a bias of 2^21, a channel's unsaturated accumulators
    are more than the fit checks (2^20): no float form, and the results are still TFLite's."""
    in_q, w_scale, out_q = (0.02, 4), 0.005, (float(np.float32(0.02 * 0.005 * 5000)), 1)
    x, weights, bias = _sweep(in_q, w_scale, out_q, channels=64)
    bias[-1] = 2**21
    dw, _ = _check_dw(x, weights, bias, in_q, w_scale, out_q)
    assert not dw._op._float_requantization


def test_direct_conv_takes_the_float_form():
    """The stem-like direct convolution (at most 4 input channels) shares the form."""
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (1, 12, 12, 3), dtype=np.int8)
    weights = rng.integers(-127, 128, (16, 3, 3, 3), dtype=np.int8)
    bias = rng.integers(-5000, 5000, 16).astype(np.int32)
    in_q, w_scale, out_q = (0.02, -3), 0.005, (float(np.float32(0.02 * 0.005 * 150)), 4)
    model = conv_model(x.shape, weights, bias, stride=(2, 2), dilation=(1, 1), padding="same", in_q=in_q,
                       out_q=out_q, weight_scale=w_scale, activation="none")  # fmt: skip
    want = run(model, [x])
    conv = quant.Conv2D(weights, bias, stride=2, padding="same", input_scale=in_q[0], input_zero_point=in_q[1],
                        weight_scale=w_scale, output_scale=out_q[0], output_zero_point=out_q[1])  # fmt: skip
    for isa, got in run_each_isa(lambda: conv(x)).items():
        assert_same(got, want, f"direct conv on {isa}")
    assert len(np.unique(want)) > 100
    if FITS:
        assert conv._op._float_requantization


def _gemm_sweep(scales):
    """A 1x1 convolution with 8 input channels, which runs as a GEMM: output channel c
    weighs input channel 0 by 1 and the others by 0, so it sweeps like the depthwise layer.
    Returns the layer, its input and TFLite's output."""
    in_scale, w_scale, out_scale = (float(np.float32(s)) for s in scales)
    in_q, out_q = (in_scale, -5), (out_scale, 9)
    x1, _, bias = _sweep(in_q, w_scale, out_q)
    channels = bias.size
    rng = np.random.default_rng(channels)
    x = rng.integers(-128, 128, (1, 16, 16, 8), dtype=np.int8)
    x[..., 0] = x1[..., 0]
    weights = np.zeros((channels, 1, 1, 8), np.int8)
    weights[:, 0, 0, 0] = 1
    model = conv_model(x.shape, weights, bias, stride=(1, 1), dilation=(1, 1), padding="valid", in_q=in_q,
                       out_q=out_q, weight_scale=w_scale, activation="none")  # fmt: skip
    want = run(model, [x])
    conv = quant.Conv2D(weights, bias, padding="valid", input_scale=in_q[0], input_zero_point=in_q[1],
                        weight_scale=w_scale, output_scale=out_q[0], output_zero_point=out_q[1])  # fmt: skip
    assert want.min() == -128 and want.max() == 127
    return conv, x, want


@pytest.mark.parametrize("scales", SCALES)
def test_gemm_epilogue_requantizes_every_unsaturated_accumulator_as_tflite(scales):
    """The GEMM's epilogue has the float form too (the multiplier's left shift applied
    there, not folded)."""
    conv, x, want = _gemm_sweep(scales)
    for isa, got in run_each_isa(lambda: conv(x)).items():
        assert_same(got, want, f"GEMM sweep of {scales} on {isa}")
    if FITS:
        assert conv._op._float_requantization


@pytest.mark.skipif(platform.system() != "Linux", reason="glibc fesetround")
@pytest.mark.parametrize("scales", SCALES)
def test_gemm_epilogue_fixed_point_steps_requantize_every_unsaturated_accumulator_as_tflite(scales):
    """The same sweep under round-toward-zero, where the kernels take TFLite's fixed-point
    steps: a multiplier below 1 shifts every channel right (the NEON dot-product tiles' form
    without the left shift), one above 1 left."""
    conv, x, want = _gemm_sweep(scales)
    with _rounding_toward_zero():
        results = run_each_isa(lambda: conv(x))
    for isa, got in results.items():
        assert_same(got, want, f"GEMM sweep of {scales} in fixed point on {isa}")


@pytest.mark.parametrize("scales", SCALES)
@pytest.mark.parametrize("per_channel", [False, True])
def test_fully_connected_float_form_replaces_the_double_requantization(scales, per_channel):
    """TFLite's reference FULLY_CONNECTED requantizes in double (round half away from zero);
    the float form stands in for that too. Batched rows sweep as above; one row (the GEMV)
    sweeps across output channels, channel c's bias being one more than channel c - 1's."""
    in_scale, w_scale, out_scale = (float(np.float32(s)) for s in scales)
    in_q, out_q = (in_scale, 3), (out_scale, -6)
    x1, _, bias = _sweep(in_q, w_scale, out_q)
    channels = bias.size
    rng = np.random.default_rng(channels)
    ws = np.full(channels, w_scale, np.float32) * (rng.uniform(0.999, 1.0, channels) if per_channel else 1)
    x = rng.integers(-128, 128, (256, 8), dtype=np.int8)
    x[:, 0] = x1[0, ..., 0].ravel()
    weights = np.zeros((channels, 8), np.int8)
    weights[:, 0] = 1
    fc = quant.FullyConnected(weights, bias, input_scale=in_q[0], input_zero_point=in_q[1], weight_scale=ws,
                              output_scale=out_q[0], output_zero_point=out_q[1])  # fmt: skip
    want = run(fc_model(256, 8, channels, in_q=in_q, out_q=out_q, weights=weights, weight_scale=ws, bias=bias), [x])
    for isa, got in run_each_isa(lambda: fc(x)).items():
        assert_same(got, want, f"FC sweep of {scales} on {isa}")
    assert want.min() == -128 and want.max() == 127
    if FITS:
        assert fc._op._float_requantization

    # one row at the input zero point: the accumulators are the biases, consecutive (every
    # few for a small multiplier: each channel's fit checks its whole range, and a layer's
    # checks are bounded)
    step = max(1, channels * 256 // 2048)
    row_bias = (bias[0] - 128 - in_q[1] + np.arange(0, channels * 256, step)).astype(np.int32)
    n = row_bias.size
    row_weights = np.zeros((n, 8), np.int8)
    row_weights[:, 0] = 1
    row_ws = np.resize(ws, n)
    gemv = quant.FullyConnected(row_weights, row_bias, input_scale=in_q[0], input_zero_point=in_q[1],
                                weight_scale=row_ws, output_scale=out_q[0], output_zero_point=out_q[1])  # fmt: skip
    one = x[:1].copy()
    one[0, 0] = in_q[1]
    model = fc_model(1, 8, n, in_q=in_q, out_q=out_q, weights=row_weights, weight_scale=row_ws, bias=row_bias)
    want = run(model, [one])
    for isa, got in run_each_isa(lambda: gemv(one)).items():
        assert_same(got, want, f"one-row FC sweep of {scales} on {isa}")
    assert want.min() == -128 and want.max() == 127
    if FITS:
        assert gemv._op._float_requantization


# glibc's fesetround sets both the x87 and the SSE (MXCSR) rounding modes on x86-64, FPCR's
# RMode on aarch64.
_FE_TONEAREST = 0
_FE_TOWARDZERO = 0xC00000 if platform.machine() == "aarch64" else 0xC00


@contextmanager
def _rounding_toward_zero():
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    assert libm.fesetround(_FE_TOWARDZERO) == 0
    try:
        yield
    finally:
        libm.fesetround(_FE_TONEAREST)


@pytest.mark.skipif(not FITS or platform.system() != "Linux", reason="no float form here; glibc fesetround")
def test_another_rounding_mode_falls_back_to_the_fixed_point_form():
    in_q, w_scale, out_q = (0.02, -3), 0.005, (float(np.float32(0.02 * 0.005 / 0.3)), 5)
    x, weights, bias = _sweep(in_q, w_scale, out_q)
    fitted, want = _check_dw(x, weights, bias, in_q, w_scale, out_q)
    assert fitted._op._float_requantization
    with _rounding_toward_zero():
        # run under the other mode: the kernel checks the mode at each call
        got_fitted = run_each_isa(lambda: fitted(x))
        # built under it: the fit declines
        built = quant.DepthwiseConv2D(weights, bias, padding="valid", input_scale=in_q[0], input_zero_point=in_q[1],
                                      weight_scale=w_scale, output_scale=out_q[0], output_zero_point=out_q[1])  # fmt: skip
    for isa, got in got_fitted.items():
        assert_same(got, want, f"float-form layer under round-toward-zero on {isa}")
    assert not built._op._float_requantization
    assert_same(built(x), want, "layer built under round-toward-zero")


@pytest.mark.parametrize("scales", SCALES)
@pytest.mark.parametrize("channels", [24, 40])
def test_direct_conv_blocks_of_8_requantize_as_tflite_in_both_forms(scales, channels):
    """A 1x1 convolution of one input channel with weights 1 runs the direct kernel and sweeps
    like the depthwise layer; 24 and 40 channels end in a block of 8 (NEON's 8-column
    tiles). Run again under round-toward-zero, the fixed-point steps (with multipliers below
    1/2 every shift is to the right: the NEON dot-product kernel's shorter form)."""
    in_scale, w_scale, out_scale = (float(np.float32(s)) for s in scales)
    in_q, out_q = (in_scale, -5), (out_scale, 9)
    x, weights, bias = _sweep(in_q, w_scale, out_q, channels=channels)
    x, weights = np.ascontiguousarray(x[..., :1]), weights.reshape(channels, 1, 1, 1)
    model = conv_model(x.shape, weights, bias, stride=(1, 1), dilation=(1, 1), padding="valid", in_q=in_q,
                       out_q=out_q, weight_scale=w_scale, activation="none")  # fmt: skip
    want = run(model, [x])
    conv = quant.Conv2D(weights, bias, padding="valid", input_scale=in_q[0], input_zero_point=in_q[1],
                        weight_scale=w_scale, output_scale=out_q[0], output_zero_point=out_q[1])  # fmt: skip
    for isa, got in run_each_isa(lambda: conv(x)).items():
        assert_same(got, want, f"direct conv sweep of {scales}, {channels} channels on {isa}")
    if not FITS or platform.system() != "Linux":
        return
    with _rounding_toward_zero():
        got_fixed = run_each_isa(lambda: conv(x))
    for isa, got in got_fixed.items():
        assert_same(got, want, f"direct conv sweep of {scales}, {channels} channels, fixed point, on {isa}")
