"""int8 fully connected / GEMM, conv2d and depthwise conv2d against TFLite's reference kernels.

Each case is a one-op int8 .tflite model with random weights, biases, scales and zero
points (the int8 edges -128 and 127 included), run by LiteRT's reference kernels; every
kernel path of this CPU must give exactly the same int8 output.
"""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest
from qs8_oracle import (
    ACTIVATIONS,
    EMULATED,
    assert_same,
    conv_model,
    dwconv_model,
    fc_model,
    random_int8,
    random_scale,
    random_zero_point,
    run,
    run_each_isa,
)

from edgeinf import quant

CASES = 12 if EMULATED else 60


def _output_scale(rng, in_scale, w_scale, k):
    # Around the accumulator's spread (uniform int8 inputs and weights: a standard deviation
    # of about 74 * 74 * sqrt(k)); the random factor makes some cases saturate and most not.
    spread = float(in_scale) * float(np.max(w_scale)) * 74.0 * 74.0 * np.sqrt(k)
    return float(np.float32(spread / 127.0 * np.exp(rng.uniform(-2.0, 1.0))))


def _weight_scales(rng, n):
    if rng.random() < 0.5:
        return random_scale(rng, 1e-3, 0.05)
    return np.array([random_scale(rng, 1e-3, 0.05) for _ in range(n)], np.float32)


@pytest.mark.parametrize("case", range(CASES))
def test_fully_connected_matches_tflite_reference(case):
    rng = np.random.default_rng(1000 + case)
    m = int(rng.choice([1, 2, 5, 6, 7, 13]))
    k = int(rng.choice([1, 3, 8, 16, 33, 64, 100]))
    n = int(rng.choice([1, 7, 8, 15, 16, 17, 40]))
    in_q = (random_scale(rng), random_zero_point(rng))
    ws = _weight_scales(rng, n)
    out_q = (_output_scale(rng, in_q[0], ws, k), random_zero_point(rng))
    w = random_int8(rng, (n, k))
    bias = rng.integers(-(2**14), 2**14, n).astype(np.int32)
    act = ACTIVATIONS[case % 4]
    x = random_int8(rng, (m, k))
    assert_fc_matches_reference(x, w, bias, in_q, out_q, ws, act, note=f"act={act}")


def assert_fc_matches_reference(x, weights, bias, in_q, out_q, ws, act="none", note=""):
    """edgeinf's FullyConnected on every ISA gives TFLite's reference output bit for bit.
    Returns the reference output."""
    (m, k), n = x.shape, weights.shape[0]
    model = fc_model(m, k, n, in_q=in_q, out_q=out_q, weights=weights, weight_scale=ws, bias=bias, activation=act)
    want = run(model, [x])
    fc = quant.FullyConnected(
        weights, bias, input_scale=in_q[0], input_zero_point=in_q[1], weight_scale=ws, output_scale=out_q[0],
        output_zero_point=out_q[1], activation=act,
    )  # fmt: skip
    for isa, got in run_each_isa(lambda: fc(x)).items():
        assert_same(got, want, f"FC m={m} k={k} n={n} {note} on {isa}")
    return want


@pytest.mark.parametrize("m, k, n", [(2, 1, 9), (6, 4, 8), (7, 33, 17), (13, 64, 40)])
@pytest.mark.parametrize("weights", ["symmetric", "extremes"])
def test_fully_connected_tiles_with_symmetric_weights_match_tflite_reference(m, k, n, weights):
    # Without a -128 weight the NEON tiles add two K pairs' products in int16 before
    # widening; "extremes" (x = -128, weights +-127) are the largest sums that must fit.
    rng = np.random.default_rng(m * 10000 + k * 100 + n)
    in_q = (random_scale(rng), random_zero_point(rng))
    ws = _weight_scales(rng, n)
    out_q = (_output_scale(rng, in_q[0], ws, k), random_zero_point(rng))
    if weights == "extremes":
        w = np.where(rng.random((n, k)) < 0.5, -127, 127).astype(np.int8)
        x = np.where(rng.random((m, k)) < 0.8, -128, 127).astype(np.int8)
    else:
        w = rng.integers(-127, 128, (n, k), dtype=np.int8)
        x = random_int8(rng, (m, k))
    bias = rng.integers(-(2**14), 2**14, n).astype(np.int32)
    assert_fc_matches_reference(x, w, bias, in_q, out_q, ws, note=f"{weights} weights")


@pytest.mark.parametrize("k, n", [(1, 64), (33, 130), (300, 200), (64, 263), (48, 20), (96, 45)])
@pytest.mark.parametrize("weights", ["symmetric", "with -128", "extremes"])
def test_batch1_fully_connected_matches_tflite_reference(k, n, weights):
    # One row and wide outputs: the GEMV path (groups of four 16-column panels, then
    # single panels, the last one partial; on NEON dot product 32-column panels, the last
    # one 8, 16 or 24 wide, K in steps of 32 after an odd 16). Symmetric weights ([-127, 127], what TFLite
    # writes) take AVX2's multiply of |x| by sign-adjusted weights; a -128 weight takes
    # the tiles. "extremes": x = -128 and weights of +-127, the largest pair products.
    rng = np.random.default_rng(k * 1000 + n)
    in_q = (random_scale(rng), random_zero_point(rng))
    ws = _weight_scales(rng, n)
    out_q = (_output_scale(rng, in_q[0], ws, k), random_zero_point(rng))
    if weights == "extremes":
        w = rng.choice(np.array([-127, 127], np.int8), (n, k))
        x = np.full((1, k), -128, np.int8)
    else:
        w = random_int8(rng, (n, k)) if weights == "with -128" else rng.integers(-127, 128, (n, k), dtype=np.int8)
        if weights == "with -128":
            w[rng.integers(n), rng.integers(k)] = -128
        x = random_int8(rng, (1, k))
    bias = rng.integers(-(2**14), 2**14, n).astype(np.int32)
    assert_fc_matches_reference(x, w, bias, in_q, out_q, ws, note=f"{weights} weights")


# Long K: NEON runs 16 K values of each row against 16 of each column from some K on
# (neon.cc, kLongK) and K pairs below: K on both sides, odd and off the multiples of 16,
# row counts ending inside a tile, weights with -128 (one product per int16 lane) and the
# largest products that two per lane must hold.
@pytest.mark.parametrize("k", [31, 47, 48, 63, 64, 65, 95, 96, 100, 129, 176])
@pytest.mark.parametrize("weights", ["symmetric", "with -128", "extremes"])
def test_fully_connected_long_k_matches_tflite_reference(k, weights):
    rng = np.random.default_rng(9000 + 10 * k + len(weights))
    m = int(rng.choice([1, 2, 3, 7]))
    n = int(rng.choice([5, 8, 19]))
    in_q = (random_scale(rng), random_zero_point(rng))
    ws = _weight_scales(rng, n)
    out_q = (_output_scale(rng, in_q[0], ws, k), random_zero_point(rng))
    if weights == "extremes":
        w = rng.choice(np.array([-127, 127], np.int8), (n, k))
        x = np.where(rng.random((m, k)) < 0.8, -128, 127).astype(np.int8)
    else:
        w = random_int8(rng, (n, k)) if weights == "with -128" else rng.integers(-127, 128, (n, k), dtype=np.int8)
        if weights == "with -128":
            w[rng.integers(n), :] = -128
        x = random_int8(rng, (m, k))
    bias = rng.integers(-(2**14), 2**14, n).astype(np.int32)
    assert_fc_matches_reference(x, w, bias, in_q, out_q, ws, note=f"{weights} weights")


def _before_guard_page(x: np.ndarray) -> np.ndarray:
    """A copy of x whose last byte is the last before an inaccessible page: a kernel that
    reads past the end of its input faults instead of reading its neighbour's bytes."""
    page = mmap.PAGESIZE
    pages = (x.nbytes + page - 1) // page + 1
    buf = mmap.mmap(-1, pages * page)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    start = ctypes.c_char.from_buffer(buf)
    if libc.mprotect(ctypes.addressof(start) + (pages - 1) * page, page, 0) != 0:  # PROT_NONE
        pytest.skip(f"mprotect: errno {ctypes.get_errno()}")
    out = np.frombuffer(buf, np.int8, count=x.size, offset=(pages - 1) * page - x.nbytes).reshape(x.shape)
    out[...] = x
    return out


# K not a multiple of 16: the SDOT tiles read their rows in place to K exactly (the last
# 4, 8 or 12 values by loads of those bytes), the last row ending the caller's buffer;
# row counts ending inside and at a tile of 8, columns ending inside a panel of 8. On
# plain NEON, K of 64 and 80 are read in place by 16 values, 72 after a copy.
@pytest.mark.parametrize("k", [4, 8, 12, 20, 24, 36, 64, 72, 80])
@pytest.mark.parametrize("m, n", [(1, 20), (8, 12), (13, 28), (16, 6), (23, 1)])
def test_fully_connected_rows_read_to_their_end(k, m, n):
    rng = np.random.default_rng(7000 + 100 * k + m)
    in_q = (random_scale(rng), random_zero_point(rng))
    ws = _weight_scales(rng, n)
    out_q = (_output_scale(rng, in_q[0], ws, k), random_zero_point(rng))
    w = rng.integers(-127, 128, (n, k), dtype=np.int8)
    bias = rng.integers(-(2**14), 2**14, n).astype(np.int32)
    x = _before_guard_page(random_int8(rng, (m, k)))
    assert_fc_matches_reference(x, w, bias, in_q, out_q, ws, act=ACTIVATIONS[k % 4], note="guarded")


@pytest.mark.parametrize("k", [8, 12, 20, 24, 36])
@pytest.mark.parametrize("variant", ["per_channel", "per_tensor_no_shift"])
def test_conv2d_pointwise_rows_read_to_their_end(k, variant):
    rng = np.random.default_rng(7500 + k + (variant != "per_channel"))
    o = [12, 28, 8, 48, 1][k % 5]
    in_q, ws, out_q, act = _schedule_quantization(rng, variant, [-128, 127, 9], o, k, "relu")
    weights = rng.integers(-127, 128, (o, 1, 1, k), dtype=np.int8)
    bias = rng.integers(-(2**14), 2**14, o).astype(np.int32)
    x = _before_guard_page(random_int8(rng, (1, 7, 9, k)))
    assert_conv_matches_reference(x, weights, bias, (1, 1), (1, 1), "valid", in_q, out_q, ws, act, note=variant)


def test_fully_connected_saturates_like_tflite():
    # A huge bias and a small output scale drive every output to the int8 limits.
    rng = np.random.default_rng(7)
    m, k, n = 3, 20, 24
    w = random_int8(rng, (n, k))
    bias = np.where(np.arange(n) % 2 == 0, 2**30, -(2**30)).astype(np.int32)
    x = random_int8(rng, (m, k))
    want = assert_fc_matches_reference(x, w, bias, (0.05, -128), (0.001, 127), 0.01, note="saturating")
    assert set(np.unique(want)) == {-128, 127}


def test_fully_connected_batches_leading_dims():
    rng = np.random.default_rng(3)
    w = random_int8(rng, (5, 12))
    fc = quant.FullyConnected(w, None, input_scale=0.02, input_zero_point=3, weight_scale=0.01,
                              output_scale=0.05, output_zero_point=-1)  # fmt: skip
    x = random_int8(rng, (2, 3, 12))
    assert_same(fc(x), fc(x.reshape(6, 12)).reshape(2, 3, 5), "leading dimensions")


def _conv_case(rng, depthwise: bool):
    b = 1 if rng.random() < 0.7 else 2
    h, w = (int(v) for v in rng.integers(1, 12 if not EMULATED else 8, 2))
    c = int(rng.choice([1, 3, 4, 8, 16, 17, 32]))
    kh, kw = (int(v) for v in rng.choice([1, 2, 3, 5], 2))
    stride = tuple(int(v) for v in rng.choice([1, 1, 2, 3], 2))
    dilation = (1, 1) if rng.random() < 0.6 else tuple(int(v) for v in rng.choice([1, 2], 2))
    padding = "same" if rng.random() < 0.5 else "valid"
    if padding == "valid":
        h = max(h, (kh - 1) * dilation[0] + 1)
        w = max(w, (kw - 1) * dilation[1] + 1)
    return b, h, w, c, kh, kw, stride, dilation, padding


@pytest.mark.parametrize("case", range(CASES))
def test_conv2d_matches_tflite_reference(case):
    rng = np.random.default_rng(2000 + case)
    b, h, w, c, kh, kw, stride, dilation, padding = _conv_case(rng, False)
    o = int(rng.choice([1, 4, 8, 16, 19, 32]))
    in_q = (random_scale(rng), random_zero_point(rng))
    ws = _weight_scales(rng, o)
    out_q = (_output_scale(rng, in_q[0], ws, kh * kw * c), random_zero_point(rng))
    weights = random_int8(rng, (o, kh, kw, c))
    bias = rng.integers(-(2**14), 2**14, o).astype(np.int32)
    act = ACTIVATIONS[case % 4]
    x = random_int8(rng, (b, h, w, c))
    assert_conv_matches_reference(x, weights, bias, stride, dilation, padding, in_q, out_q, ws, act, note=f"act={act}")


def assert_conv_matches_reference(x, weights, bias, stride, dilation, padding, in_q, out_q, ws, act, note):
    """edgeinf's Conv2D on every ISA gives TFLite's reference output bit for bit."""
    model = conv_model(x.shape, weights, bias, stride=stride, dilation=dilation, padding=padding, in_q=in_q,
                       out_q=out_q, weight_scale=ws, activation=act)  # fmt: skip
    want = run(model, [x])
    conv = quant.Conv2D(weights, bias, stride=stride, padding=padding, dilation=dilation, input_scale=in_q[0],
                        input_zero_point=in_q[1], weight_scale=ws, output_scale=out_q[0],
                        output_zero_point=out_q[1], activation=act)  # fmt: skip
    what = f"conv x={x.shape} w={weights.shape} s={stride} d={dilation} {padding} {note}"
    for isa, got in run_each_isa(lambda: conv(x)).items():
        assert_same(got, want, f"{what} on {isa}")


@pytest.mark.parametrize("case", range(CASES))
def test_depthwise_conv2d_matches_tflite_reference(case):
    rng = np.random.default_rng(3000 + case)
    b, h, w, c, kh, kw, stride, dilation, padding = _conv_case(rng, True)
    multiplier = 1 if rng.random() < 0.75 else int(rng.choice([2, 3]))
    oc = c * multiplier
    in_q = (random_scale(rng), random_zero_point(rng))
    ws = _weight_scales(rng, oc)
    out_q = (_output_scale(rng, in_q[0], ws, kh * kw), random_zero_point(rng))
    weights = random_int8(rng, (1, kh, kw, oc))
    bias = rng.integers(-(2**12), 2**12, oc).astype(np.int32)
    act = ACTIVATIONS[case % 4]
    x = random_int8(rng, (b, h, w, c))
    assert_dwconv_matches_reference(
        x, weights, bias, multiplier, stride, dilation, padding, in_q, out_q, ws, act, note=f"act={act}"
    )


def assert_dwconv_matches_reference(
    x, weights, bias, multiplier, stride, dilation, padding, in_q, out_q, ws, act, note
):
    """edgeinf's DepthwiseConv2D on every ISA gives TFLite's reference output bit for bit."""
    model = dwconv_model(x.shape, weights, bias, multiplier=multiplier, stride=stride, dilation=dilation,
                         padding=padding, in_q=in_q, out_q=out_q, weight_scale=ws, activation=act)  # fmt: skip
    want = run(model, [x])
    dw = quant.DepthwiseConv2D(weights, bias, depth_multiplier=multiplier, stride=stride, padding=padding,
                               dilation=dilation, input_scale=in_q[0], input_zero_point=in_q[1], weight_scale=ws,
                               output_scale=out_q[0], output_zero_point=out_q[1], activation=act)  # fmt: skip
    what = f"dwconv x={x.shape} w={weights.shape} m={multiplier} s={stride} d={dilation} {padding} {note}"
    for isa, got in run_each_isa(lambda: dw(x)).items():
        assert_same(got, want, f"{what} on {isa}")


SCHEDULE_VARIANTS = ["per_channel", "per_tensor_left_shift", "per_tensor_large_left_shift", "per_tensor_no_shift"]


def _schedule_quantization(rng, variant, zero_points, out_channels, taps, activation):
    """(input q, weight scales, output q, activation) of a schedule case: per-channel weight
    scales, or one weight scale with an output scale below input * weight scale, so that the
    multipliers exceed 1 and shift left (by 1, or by 10: beyond what the AVX2 kernels fold
    into the weights), or slightly above it, so that no channel shifts (a multiplier of 0.7:
    the requantization without a rounding shift)."""
    in_q = (random_scale(rng), int(rng.choice(zero_points)))
    if variant == "per_channel":
        ws = np.array([random_scale(rng, 1e-3, 0.05) for _ in range(out_channels)], np.float32)
        return in_q, ws, (_output_scale(rng, in_q[0], ws, taps), int(rng.integers(-128, 128))), activation
    ws = random_scale(rng, 1e-3, 0.05)
    factor = {"per_tensor_left_shift": 0.77, "per_tensor_large_left_shift": 1 / 600, "per_tensor_no_shift": 1 / 0.7}[
        variant
    ]
    return in_q, ws, (float(np.float32(in_q[0] * ws * factor)), int(rng.integers(-128, 128))), "none"


def _small_products(x, weights, bias, zero_point, variant):
    """Shrunk inputs, weights and bias, so that left-shifted outputs do not all saturate
    (the per-tensor variants; per-channel cases keep theirs). With a multiplier of 600
    only accumulators of -1, 0 and 1 (mostly 0) stay unsaturated."""
    if variant == "per_channel":
        return x, weights, bias
    if variant == "per_tensor_large_left_shift":
        rng = np.random.default_rng(x.size)
        step = rng.choice(np.array([-1, 0, 0, 0, 0, 0, 1]), x.shape)
        x = np.clip(step + zero_point, -128, 127).astype(np.int8)
        weights = rng.choice(np.array([-1, 0, 0, 1], np.int8), weights.shape)
        return x, weights, np.zeros_like(bias)
    x = np.clip(x.astype(np.int32) // 16 + zero_point, -128, 127).astype(np.int8)
    return x, (weights // 64).astype(np.int8), bias // 512


# Explicit shapes for the SIMD schedules the random cases reach only by chance. Depthwise:
# 3x3 with a horizontal stride of 1 (2) runs steps of 4 (3) output pixels (widths that
# leave 2- and 1-pixel remainders; steps inside the image and over the padding), other
# filters and dilations go pixel by pixel, a depth multiplier above 1 reads rows with
# repeated channels; channel counts straddle the 16/8-channel blocks. Weights without
# -128 take NEON's paired taps. With the dot product, filters of 3 and 5 columns run
# unrolled and a 2x2 filter the general form.
DW_SHAPES = [
    # (h, w, c, multiplier, (kh, kw), stride, dilation, padding)
    (7, 11, 16, 1, (3, 3), (1, 1), (1, 1), "same"),
    (6, 10, 37, 1, (3, 3), (1, 1), (1, 1), "valid"),
    (9, 13, 48, 1, (3, 3), (2, 2), (1, 1), "same"),
    (8, 9, 21, 1, (3, 3), (2, 2), (1, 1), "valid"),
    (5, 7, 32, 1, (3, 3), (1, 2), (1, 1), "same"),
    (7, 6, 24, 1, (3, 3), (2, 1), (1, 1), "same"),
    (9, 9, 16, 1, (3, 3), (1, 1), (2, 2), "same"),
    (8, 11, 19, 1, (5, 5), (1, 1), (1, 1), "same"),
    (6, 8, 17, 1, (2, 4), (1, 2), (1, 1), "valid"),
    (7, 9, 8, 2, (3, 3), (1, 1), (1, 1), "same"),
    (6, 7, 11, 3, (3, 3), (2, 2), (1, 1), "same"),
    (5, 6, 20, 2, (1, 3), (1, 1), (1, 2), "valid"),
    (7, 9, 40, 1, (3, 3), (2, 2), (1, 1), "same"),
    (6, 11, 17, 1, (3, 3), (2, 2), (1, 1), "valid"),
    (6, 7, 18, 1, (2, 2), (2, 1), (1, 1), "same"),
    # pairs of 16-channel blocks (avx512vnni): an overlapping last pair, an odd block count
    # (run by the AVX2 kernel), 5x5 and dilated filters on the pixel-by-pixel schedule
    (7, 10, 56, 1, (3, 3), (1, 1), (1, 1), "same"),
    (8, 9, 80, 1, (3, 3), (2, 2), (1, 1), "same"),
    (6, 7, 29, 2, (5, 5), (1, 1), (1, 1), "same"),
    (5, 9, 64, 1, (3, 3), (1, 1), (2, 2), "valid"),
    (6, 8, 96, 1, (3, 3), (1, 1), (1, 1), "valid"),
    # fewer than 16 channels (avx512vnni: the flat schedule at a horizontal stride of 1, 64
    # values per step): rows wide enough for steps clear of the padding, rows that end
    # within a step, odd widths, padding on both sides, groups of 4 taps with 1-3 taps left
    # (a 1x1 filter, a 3x1 column), dilation, depth multipliers, a vertical stride of 2;
    # a horizontal stride of 2 stays on the blocks
    (5, 30, 8, 1, (3, 3), (1, 1), (1, 1), "same"),
    (6, 21, 12, 1, (3, 3), (2, 1), (1, 1), "same"),
    (7, 19, 4, 2, (3, 3), (1, 1), (1, 1), "valid"),
    (5, 23, 3, 1, (5, 5), (1, 1), (1, 1), "same"),
    (6, 37, 1, 1, (3, 3), (1, 1), (2, 2), "same"),
    (5, 9, 5, 3, (2, 3), (1, 1), (1, 1), "same"),
    (4, 11, 12, 1, (1, 1), (1, 1), (1, 1), "valid"),
    (6, 13, 6, 1, (3, 1), (1, 1), (1, 1), "same"),
    (5, 17, 10, 1, (3, 3), (1, 1), (1, 3), "valid"),
    (6, 9, 8, 1, (3, 3), (1, 2), (1, 1), "same"),
    # NEON's last block ending at the last channel: 8 overlapping a 16-block, two 8-blocks
    # of 9 to 15 channels, 16 overlapping, at strides 1 and 2
    (6, 7, 20, 1, (3, 3), (1, 1), (1, 1), "same"),
    (6, 9, 12, 1, (3, 3), (1, 1), (1, 1), "same"),
    (5, 10, 42, 1, (3, 3), (1, 1), (1, 1), "valid"),
    (7, 8, 28, 1, (3, 3), (2, 2), (1, 1), "same"),
    # the dot product's 3-column rows at stride 2: four filter rows, two, and a row narrower
    # than the filter (its one pixel at the edge)
    (7, 11, 32, 1, (4, 3), (2, 2), (1, 1), "same"),
    (6, 9, 20, 1, (2, 3), (1, 2), (1, 1), "valid"),
    (5, 2, 16, 1, (3, 3), (2, 2), (1, 1), "same"),
]


@pytest.mark.parametrize("shape", range(len(DW_SHAPES)))
@pytest.mark.parametrize("variant", SCHEDULE_VARIANTS)
def test_depthwise_conv2d_simd_schedules(shape, variant):
    h, w, c, multiplier, (kh, kw), stride, dilation, padding = DW_SHAPES[shape]
    rng = np.random.default_rng(4000 + 10 * shape + (variant != "per_channel"))
    oc = c * multiplier
    in_q, ws, out_q, act = _schedule_quantization(rng, variant, [-128, 127, 3], oc, kh * kw, "relu6")
    weights = random_int8(rng, (1, kh, kw, oc))
    if shape % 2:
        weights[weights == -128] = -127
    bias = rng.integers(-(2**12), 2**12, oc).astype(np.int32)
    x = random_int8(rng, (1 + shape % 2, h, w, c))
    x, weights, bias = _small_products(x, weights, bias, in_q[1], variant)
    assert_dwconv_matches_reference(
        x, weights, bias, multiplier, stride, dilation, padding, in_q, out_q, ws, act, note=variant
    )


# conv2d with at most 4 input channels runs the direct kernel (window rows x packed
# weights): the 3-channel stem and its neighbours, output channels off the 8/16 blocks,
# windows over the padding on every side, dilation, large K (7x7x3).
STEM_SHAPES = [
    # (h, w, c, o, (kh, kw), stride, dilation, padding)
    (17, 15, 3, 32, (3, 3), (2, 2), (1, 1), "same"),
    (16, 16, 3, 32, (3, 3), (2, 2), (1, 1), "valid"),
    (9, 12, 3, 19, (3, 3), (1, 1), (1, 1), "same"),
    (11, 10, 1, 8, (5, 5), (2, 1), (1, 1), "same"),
    (10, 9, 4, 40, (3, 3), (1, 2), (2, 1), "same"),
    (13, 14, 2, 16, (3, 2), (2, 2), (1, 2), "valid"),
    (15, 15, 3, 24, (7, 7), (2, 2), (1, 1), "same"),
    # the face detectors' 5x5/2 stem (K = 75), and three 16-channel blocks and one of 8 (K = 9)
    (13, 12, 3, 24, (5, 5), (2, 2), (1, 1), "same"),
    (10, 11, 1, 56, (3, 3), (2, 2), (1, 1), "valid"),
]


@pytest.mark.parametrize("shape", range(len(STEM_SHAPES)))
@pytest.mark.parametrize("variant", SCHEDULE_VARIANTS)
def test_conv2d_few_input_channels(shape, variant):
    h, w, c, o, (kh, kw), stride, dilation, padding = STEM_SHAPES[shape]
    rng = np.random.default_rng(5000 + 10 * shape + (variant != "per_channel"))
    # symmetric weights in every other shape: without a -128 weight NEON sums two products in int16
    x_shape, weight_shape = (1 + shape % 2, h, w, c), (o, kh, kw, c)
    assert_conv_schedule_matches_reference(
        rng, variant, x_shape, weight_shape, stride, dilation, padding, [-128, 127, -3], "relu", shape % 2 == 0
    )


def assert_conv_schedule_matches_reference(
    rng, variant, x_shape, weight_shape, stride, dilation, padding, zero_points, activation, symmetric=False
):
    """A Conv2D schedule case: the quantization of ``variant`` (`_schedule_quantization`),
    random weights, bias and input, compared on every ISA with TFLite's reference.
    ``symmetric``: no weight of -128 (TFLite's int8 weights; kernels may pair products)."""
    o, kh, kw, c = weight_shape
    in_q, ws, out_q, act = _schedule_quantization(rng, variant, zero_points, o, kh * kw * c, activation)
    weights = random_int8(rng, weight_shape)
    bias = rng.integers(-(2**14), 2**14, o).astype(np.int32)
    x = random_int8(rng, x_shape)
    x, weights, bias = _small_products(x, weights, bias, in_q[1], variant)
    if symmetric:
        weights[weights == -128] = -127
    assert_conv_matches_reference(x, weights, bias, stride, dilation, padding, in_q, out_q, ws, act, note=variant)


# conv2d with more than 4 input channels runs as GEMM over an indirection buffer; on AVX2,
# with an even channel count and more than one tap, over input rows converted once per
# chunk of output pixels. Shapes for its schedules: blocks of rows and slices of K that
# start inside a tap, chunks of pixels that end inside an output row or span two images,
# padding on every side with strides and dilation, and an odd channel count (int8 route).
GEMM_CONV_SHAPES = [
    # (batch, h, w, c, o, (kh, kw), stride, dilation, padding)
    (1, 28, 28, 64, 24, (3, 3), (1, 1), (1, 1), "same"),
    (2, 45, 45, 8, 16, (3, 3), (1, 1), (1, 1), "same"),
    (1, 66, 60, 6, 8, (3, 3), (1, 1), (1, 1), "valid"),
    (1, 23, 19, 10, 19, (5, 5), (2, 2), (2, 1), "same"),
    (1, 15, 17, 9, 20, (3, 3), (2, 1), (1, 1), "same"),
]


@pytest.mark.parametrize("shape", range(len(GEMM_CONV_SHAPES)))
@pytest.mark.parametrize("per_channel", [True, False])
def test_conv2d_gemm_schedules(shape, per_channel):
    b, h, w, c, o, (kh, kw), stride, dilation, padding = GEMM_CONV_SHAPES[shape]
    rng = np.random.default_rng(6000 + 10 * shape + per_channel)
    in_q = (random_scale(rng), int(rng.choice([-128, 127, 5])))
    ws = np.array([random_scale(rng, 0.01, 0.02) for _ in range(o)], np.float32) if per_channel else random_scale(rng)
    weights = random_int8(rng, (o, kh, kw, c))
    bias = rng.integers(-(2**14), 2**14, o).astype(np.int32)
    x = random_int8(rng, (b, h, w, c))
    # Outputs spread over the int8 range rather than saturated: the accumulators' spread is
    # about sqrt(K) * rms(x - zero point) * rms(w).
    spread = np.sqrt(kh * kw * c * np.mean((x - np.float64(in_q[1])) ** 2)) * 74.0
    out_q = (float(np.float32(in_q[0] * np.max(ws) * spread / 50)), int(rng.integers(-128, 128)))
    assert_conv_matches_reference(
        x, weights, bias, stride, dilation, padding, in_q, out_q, ws, "none", note=f"per_channel={per_channel}"
    )


# 1x1 filters of 5 to 128 input channels run the direct kernel on AVX2 (the GEMM route on
# NEON and above 128 channels): channel counts odd and even, output channels off the 16
# blocks, strides that skip pixels, two images, the every-variant requantization.
POINTWISE_SHAPES = [
    # (batch, h, w, c, o, stride)
    (1, 13, 11, 8, 32, (1, 1)),
    (2, 9, 7, 5, 12, (1, 1)),
    (1, 12, 12, 24, 28, (1, 1)),
    (1, 10, 9, 37, 19, (2, 2)),
    (1, 6, 7, 128, 40, (1, 1)),
    (1, 5, 6, 129, 24, (1, 1)),
]


@pytest.mark.parametrize("shape", range(len(POINTWISE_SHAPES)))
@pytest.mark.parametrize("variant", SCHEDULE_VARIANTS)
def test_conv2d_pointwise(shape, variant):
    b, h, w, c, o, stride = POINTWISE_SHAPES[shape]
    rng = np.random.default_rng(8000 + 10 * shape + (variant != "per_channel"))
    assert_conv_schedule_matches_reference(
        rng, variant, (b, h, w, c), (o, 1, 1, c), stride, (1, 1), "valid", [-128, 127, 9], "relu6"
    )
