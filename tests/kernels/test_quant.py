"""Fixed-point building blocks of edgeinf.quant against independent Python big-integer
implementations of gemmlowp / TFLite semantics; every kernel path against the scalar one
on edge values (INT32 extremes, ties, vector tails); bad input raising ValueError."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from qs8_oracle import assert_same, run_each_isa

from edgeinf import _C, quant
from edgeinf.errors import InputError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def py_quantize_multiplier(real: float) -> tuple[int, int]:
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    scaled = q * 2**31
    fixed = int(math.floor(scaled + 0.5)) if scaled >= 0 else -int(math.floor(-scaled + 0.5))
    if fixed == 2**31:
        fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return fixed, shift


def wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def py_srdhm(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = 2**30 if ab >= 0 else 1 - 2**30
    return int((ab + nudge) / 2**31) if abs(ab) < 2**52 else math.trunc((ab + nudge) / 2**31)


def py_srdhm_exact(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = 2**30 if ab >= 0 else 1 - 2**30
    num = ab + nudge
    q = abs(num) // 2**31  # C division truncates toward zero
    return q if num >= 0 else -q


def py_rdbpot(x: int, e: int) -> int:
    mask = (1 << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if remainder > threshold else 0)


def py_mbqm(x: int, m: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return py_rdbpot(py_srdhm_exact(wrap32(x << left), m), right)


def test_quantize_multiplier_matches_tflite_definition():
    rng = np.random.default_rng(1)
    values = [0.0, 1.0, 0.5, 2.0**-31, 2.0**-32, 0.99999999999, 1 - 2.0**-33, 3.0, 2.0**29, 1e-12]
    values += list(np.exp(rng.uniform(-25, 10, 2000)))
    for v in values:
        assert quant.quantize_multiplier(float(v)) == py_quantize_multiplier(float(v)), v


def test_multiply_by_quantized_multiplier_matches_gemmlowp_semantics():
    rng = np.random.default_rng(2)
    xs = np.concatenate(
        [rng.integers(INT32_MIN, INT32_MAX, 3000, dtype=np.int64),
         [INT32_MIN, INT32_MAX, 0, 1, -1, 2**30, -(2**30), 3 * 2**29, -3 * 2**29]]
    ).astype(np.int32)  # fmt: skip
    for _ in range(60):
        m = int(rng.integers(2**30, 2**31))
        shift = int(rng.integers(-31, 31))
        got = quant.multiply_by_quantized_multiplier(xs, m, shift)
        want = np.array([py_mbqm(int(x), m, shift) for x in xs], np.int64).astype(np.int32)
        assert_same(got, want, f"MBQM m={m} shift={shift}")


def test_double_rounding_of_tflite():
    # multiplier 2^30 (0.5) and shift -1 divide by 4 in two rounded steps: x / 2 rounds
    # ties toward +inf, the shift rounds ties away from zero. So 2 -> 1 -> 1 and
    # -2 -> -1 -> -1, and 1 -> 1 (0.5 up) -> 1 (0.5 away): 0.25 becomes 1, as in TFLite.
    x = np.array([2, -2, 6, -6, 1, -1, 3, -3], np.int32)
    got = quant.multiply_by_quantized_multiplier(x, 2**30, -1)
    assert got.tolist() == [1, -1, 2, -2, 1, 0, 1, -1]


@pytest.mark.parametrize("channels", [1, 7, 8, 15, 16, 17, 31, 33, 64])
def test_requantize_every_path_equals_scalar_on_edge_values(channels):
    rng = np.random.default_rng(100 + channels)
    acc = rng.integers(INT32_MIN, INT32_MAX, (5, channels), dtype=np.int64).astype(np.int32)
    acc[0, :] = INT32_MIN
    acc[1, :] = INT32_MAX
    acc[2, :] = rng.integers(-1000, 1000, channels)
    mult = rng.integers(2**30, 2**31, channels).astype(np.int32)
    shift = rng.integers(-31, 31, channels).astype(np.int32)
    zp, lo, hi = int(rng.integers(-128, 128)), -100, 120
    want = np.empty_like(acc, dtype=np.int8)
    for c in range(channels):
        for r in range(acc.shape[0]):
            v = py_mbqm(int(acc[r, c]), int(mult[c]), int(shift[c])) + zp
            want[r, c] = min(max(v, lo), hi)
    for isa, got in run_each_isa(lambda: quant.requantize(acc, mult, shift, zp, lo, hi)).items():
        assert_same(got, want, f"requantize {channels} channels on {isa}")


def test_activation_ranges():
    assert quant.activation_range("none", 0.1, 5) == (-128, 127)
    assert quant.activation_range("relu", 0.1, 5) == (5, 127)
    assert quant.activation_range("relu6", 0.1, -128) == (-128, -68)
    assert quant.activation_range("relu_n1_to_1", 0.01, 0) == (-100, 100)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 100])
def test_quantize_dequantize_round_trip_and_per_channel(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32)
    scales = np.array([0.01, 0.02, 0.05], np.float32)
    zps = [0, -128, 127]
    q = quant.quantize(x, scales, zps, axis=0)
    for c in range(3):
        assert_same(q[c], quant.quantize(np.ascontiguousarray(x[c]), scales[c], zps[c]), f"channel {c}")
        back = quant.dequantize(q[c], scales[c], zps[c])
        inside = (q[c] > -128) & (q[c] < 127)
        assert np.all(np.abs(back - x[c])[inside] <= scales[c] / 2 * (1 + 1e-6))
    assert quant.quantize(np.array([np.nan, np.inf, -np.inf], np.float32), 0.1, 3).tolist() == [3, 127, -128]


# ---------------------------------------------------------------- bad input


def _fc(**over):
    kw = dict(input_scale=0.1, input_zero_point=0, weight_scale=0.01, output_scale=0.2, output_zero_point=0)
    kw.update(over)
    w = over.pop("weights", np.ones((4, 3), np.int8))
    kw.pop("weights", None)
    return quant.FullyConnected(w, **kw)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(input_scale=0.0), "positive and finite"),
        (dict(input_scale=float("nan")), "positive and finite"),
        (dict(output_scale=-1.0), "positive and finite"),
        (dict(weight_scale=float("inf")), "positive and finite"),
        (dict(weight_scale=[0.1, 0.2]), "expected 1 or 4 scales"),
        (dict(input_zero_point=128), r"\[-128, 127\], got 128"),
        (dict(output_zero_point=-129), r"\[-128, 127\], got -129"),
        (dict(activation="tanh"), "activation must be one of"),
        (dict(weights=np.ones((4, 3), np.float32)), "expected dtype int8, got float32"),
        (dict(weights=np.ones((4, 3, 1), np.int8)), r"expected \[N, K\]"),
    ],
)
def test_fully_connected_rejects_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _fc(**kwargs)


def test_layers_run_through_their_capsule_only():
    """The per-call entry point takes a prepared layer's capsule and nothing else."""
    fc = _fc()
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    np.testing.assert_array_equal(_C._run_layer(fc._capsule, x), fc._op.run(x, None))
    with pytest.raises(TypeError, match="x must be a numpy array, got list"):
        _C._run_layer(fc._capsule, [[0, 0, 0]])
    with pytest.raises(InputError, match="expected a numpy int8 array, got list"):
        fc([[0, 0, 0]])  # the layer names the problem after the native side refuses it
    with pytest.raises(ValueError, match="invalid PyCapsule"):
        _C._run_layer(object(), x)
    plan = _C.ImagePlan("bgr", (4, 4), (0, 0, 4, 4), (2, 2, 3), "NHWC", "float32", "bilinear", False, False,
                        "limited", (1.0,) * 3, (0.0,) * 3, (0.0,) * 3, 0.0, 0.0, 1)  # fmt: skip
    with pytest.raises(ValueError, match="'edgeinf.ImagePlan' is not a prepared layer"):
        _C._run_layer(plan._capsule(), x)
    with pytest.raises(TypeError, match=r"expects \(layer capsule, x\[, out\]\), got 1 arguments"):
        _C._run_layer(fc._capsule)


def test_operators_reject_bad_arrays():
    fc = _fc()
    with pytest.raises(InputError, match="expected dtype int8, got int16"):
        fc(np.zeros((2, 3), np.int16))
    with pytest.raises(ValueError, match=r"last dimension of 3 .* got shape \(2, 4\)"):
        fc(np.zeros((2, 4), np.int8))
    with pytest.raises(ValueError, match=r"out: expected shape \(2, 4\), got \(2, 5\)"):
        fc(np.zeros((2, 3), np.int8), out=np.zeros((2, 5), np.int8))
    ro = np.zeros((2, 4), np.int8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fc(np.zeros((2, 3), np.int8), out=ro)
    with pytest.raises(ValueError, match="bias: expected shape"):
        quant.FullyConnected(np.ones((4, 3), np.int8), np.zeros(5, np.int32), input_scale=0.1, input_zero_point=0,
                             weight_scale=0.1, output_scale=0.1, output_zero_point=0)  # fmt: skip
    conv = quant.Conv2D(np.ones((2, 3, 3, 4), np.int8), input_scale=0.1, input_zero_point=0, weight_scale=0.1,
                        output_scale=0.1, output_zero_point=0, padding="valid")  # fmt: skip
    with pytest.raises(ValueError, match="expected 4 channels"):
        conv(np.zeros((1, 5, 5, 3), np.int8))
    with pytest.raises(ValueError, match="shift must be in"):  # a scale ratio of 1e12 has no Q31 multiplier
        quant.Conv2D(np.ones((2, 1, 1, 4), np.int8), input_scale=1.0, input_zero_point=0, weight_scale=1.0,
                     output_scale=1e-12, output_zero_point=0)  # fmt: skip
    with pytest.raises(ValueError, match="smaller than the filter extent"):
        conv(np.zeros((1, 2, 5, 4), np.int8))
    with pytest.raises(ValueError, match="NHWC"):
        conv(np.zeros((5, 5, 4), np.int8))
    with pytest.raises(ValueError, match="padding must be"):
        quant.max_pool(np.zeros((1, 4, 4, 1), np.int8), 2, padding="full")
    with pytest.raises(ValueError, match="do not broadcast"):
        quant.add(np.zeros(3, np.int8), np.zeros(4, np.int8), a_scale=0.1, a_zero_point=0, b_scale=0.1,
                  b_zero_point=0, output_scale=0.1, output_zero_point=0)  # fmt: skip
    with pytest.raises(ValueError, match="too small"):
        quant.add(np.zeros(3, np.int8), np.zeros(3, np.int8), a_scale=1.0, a_zero_point=0, b_scale=1.0,
                  b_zero_point=0, output_scale=1e-7, output_zero_point=0)  # fmt: skip
    with pytest.raises(ValueError, match="beta"):
        quant.softmax(np.zeros((1, 3), np.int8), input_scale=0.1, beta=0.0)
    with pytest.raises(ValueError, match="expected dtype float32"):
        quant.quantize(np.zeros(3, np.float64), 0.1, 0)


def test_layers_take_strided_inputs_and_name_wrong_types():
    # The layers call the native side first; a strided view goes through the checked path,
    # which copies it, and must give the contiguous copy's result.
    rng = np.random.default_rng(7)
    q = dict(input_scale=0.05, input_zero_point=-2, weight_scale=0.01, output_scale=0.03, output_zero_point=1)
    w = rng.integers(-127, 128, (8, 3, 3, 6), dtype=np.int8)
    layers = [
        (_fc(weights=w.reshape(8, -1)[:, :6], **q), rng.integers(-128, 128, (5, 12), dtype=np.int8)[:, ::2]),
        (quant.Conv2D(w, stride=2, **q), rng.integers(-128, 128, (1, 9, 14, 6), dtype=np.int8)[:, :, ::2]),
        (quant.DepthwiseConv2D(w[:1], **q), rng.integers(-128, 128, (2, 7, 7, 12), dtype=np.int8)[..., ::2]),
    ]
    for layer, x in layers:
        assert not x.flags.c_contiguous
        assert_same(layer(x), layer(np.ascontiguousarray(x)), type(layer).__name__)
        with pytest.raises(InputError, match="expected a numpy int8 array, got list"):
            layer(x.tolist())
        with pytest.raises(InputError, match="expected dtype int8, got int16"):
            layer(x.astype(np.int16))


def test_native_layer_validates_before_touching_memory():
    # The private module is the last line of defence: wrong dtypes, layouts and shapes
    # raise ValueError there too, never crash.
    w = np.ones((4, 3), np.int8)
    fc = _C.Qs8FullyConnected(w, None, 0, (np.array([0.5]), 0, -128, 127))
    with pytest.raises(ValueError, match="expected dtype int8, got float64"):
        fc.run(np.zeros((2, 3)), None)
    with pytest.raises(ValueError, match="C-contiguous"):
        fc.run(np.zeros((3, 2), np.int8).T, None)
    with pytest.raises(ValueError, match="scale must be finite"):
        _C.Qs8FullyConnected(w, None, 0, (np.array([np.nan]), 0, -128, 127))
    with pytest.raises(ValueError, match="activation range"):
        _C.Qs8FullyConnected(w, None, 0, (np.array([0.5]), 0, 10, -10))
    with pytest.raises(ValueError, match="zero point"):
        _C.Qs8FullyConnected(w, None, 200, (np.array([0.5]), 0, -128, 127))
    with pytest.raises(ValueError, match="empty window"):
        _C.pool(False, np.zeros((1, 2, 2, 1), np.int8), 1, 1, 1, 1, 4, 4, 3, 3, -128, 127, None)
    with pytest.raises(ValueError, match="strides and dilations"):
        _C.pool(True, np.zeros((1, 2, 2, 1), np.int8), 1, 1, 0, 1, 1, 1, 0, 0, -128, 127, None)
    with pytest.raises(ValueError, match="shift must be in"):
        _C.requantize(np.zeros(4, np.int32), np.array([1 << 30], np.int32), np.array([40], np.int32), 0, -128, 127)
    with pytest.raises(ValueError, match="equal shapes"):
        _C.mul(np.zeros(3, np.int8), np.zeros(4, np.int8), (0, 0, 1 << 30, 0, 0, -128, 127), None)


def test_native_layers_check_what_the_kernels_only_assert():
    # The kernels' weight preparation and requantization state their preconditions as debug
    # asserts; the bindings are the one place that checks them, for every caller of _C.
    w = np.ones((4, 3), np.int8)
    RQ = (np.array([1 << 30], np.int32), np.array([0], np.int32), 0, -128, 127)  # requantization: one for all
    with pytest.raises(InputError, match=r"at least one output channel and one input value, got \[0, 3\]"):
        _C.Qs8FullyConnected(np.ones((0, 3), np.int8), None, 0, (np.array([0.5]), 0, -128, 127))
    with pytest.raises(InputError, match="requantization scale must be finite and >= 0, got -0.5"):
        _C.Qs8FullyConnected(w, None, 0, (np.array([-0.5]), 0, -128, 127))
    with pytest.raises(InputError, match=r"at least one output channel and one input value, got \[2, 0\]"):
        _C.Qs8Conv2d(np.ones((2, 3, 3, 0), np.int8), None, 0, RQ, (1, 1, 1, 1, True))
    with pytest.raises(InputError, match=r"at least one output channel and one input value, got \[0, 9\]"):
        _C.Qs8DepthwiseConv2d(np.ones((1, 3, 3, 0), np.int8), None, 1, 0, RQ, (1, 1, 1, 1, True))
    with pytest.raises(InputError, match="multiplier must be >= 0, got -1 at channel 1"):
        _C.requantize(np.zeros((1, 2), np.int32), np.array([1, -1], np.int32), np.array([0], np.int32), 0)
    with pytest.raises(InputError, match="output zero point must be in"):
        _C.requantize(np.zeros(2, np.int32), np.array([1], np.int32), np.array([0], np.int32), 300)
    # the Python layer leaves these to the bindings and still names the problem
    with pytest.raises(InputError, match="beta must be positive and finite"):
        quant.softmax(np.zeros((1, 3), np.int8), input_scale=0.1, beta=0.0)
    with pytest.raises(InputError, match=r"x: expected a non-empty last axis, got shape \(2, 0\)"):
        quant.softmax(np.zeros((2, 0), np.int8), input_scale=0.1)
    with pytest.raises(InputError, match=r"zero point must be in \[-128, 127\], got 300"):
        quant.logistic(np.zeros(3, np.int8), input_scale=0.1, input_zero_point=300)


def test_operators_made_from_one_definition_keep_their_own_names_signatures_and_docs():
    # add/mul and max_pool/average_pool each come from one definition (quant._binary, quant._pool)
    binary = ["a", "b", "a_scale", "a_zero_point", "b_scale", "b_zero_point", "output_scale", "output_zero_point"]
    pool = ["x", "pool_size", "stride", "padding", "activation", "scale", "zero_point", "out"]
    for fn, name, tflite, params in (
        (quant.add, "add", "TFLite ADD", binary + ["activation", "out"]),
        (quant.mul, "mul", "TFLite MUL", binary + ["activation", "out"]),
        (quant.max_pool, "max_pool", "MAX_POOL_2D", pool),
        (quant.average_pool, "average_pool", "AVERAGE_POOL_2D", pool),
    ):
        assert (fn.__name__, fn.__qualname__) == (name, name)
        assert tflite in fn.__doc__
        assert list(inspect.signature(fn).parameters) == params
    assert inspect.signature(quant.add).parameters["a_scale"].kind is inspect.Parameter.KEYWORD_ONLY
    with pytest.raises(TypeError):
        quant.mul(np.zeros(1, np.int8), np.zeros(1, np.int8), 0.1, 0, 0.1, 0, 0.1, 0)  # the scales are keywords
