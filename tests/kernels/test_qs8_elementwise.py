"""int8 pooling, add, mul, softmax, logistic, quantize and dequantize against TFLite's
reference kernels (one-op models on LiteRT), on every kernel path of this CPU."""

from __future__ import annotations

import numpy as np
import pytest
from qs8_oracle import (
    ACTIVATIONS,
    EMULATED,
    assert_same,
    binary_model,
    pool_model,
    random_int8,
    random_scale,
    random_zero_point,
    run,
    run_each_isa,
    softmax_model,
    unary_model,
)

from edgeinf import _C, quant
from edgeinf.isa import use_isa

CASES = 10 if EMULATED else 40


@pytest.mark.parametrize("op", ["MAX_POOL_2D", "AVERAGE_POOL_2D"])
@pytest.mark.parametrize("case", range(CASES))
def test_pooling_matches_tflite_reference(op, case):
    rng = np.random.default_rng(4000 + case + (0 if op == "MAX_POOL_2D" else 500))
    pool = tuple(int(v) for v in rng.choice([1, 2, 3, 5], 2))
    stride = tuple(int(v) for v in rng.choice([1, 2, 3], 2))
    padding = "same" if rng.random() < 0.5 else "valid"
    h = int(rng.integers(pool[0], 14 if not EMULATED else 8))
    w = int(rng.integers(pool[1], 14 if not EMULATED else 8))
    c = int(rng.choice([1, 3, 8, 16, 17, 33]))
    q = (random_scale(rng), random_zero_point(rng))
    act = ACTIVATIONS[case % 4]
    x = random_int8(rng, (int(rng.integers(1, 3)), h, w, c))
    want = run(pool_model(op, x.shape, pool=pool, stride=stride, padding=padding, q=q, activation=act), [x])
    fn = quant.max_pool if op == "MAX_POOL_2D" else quant.average_pool
    kw = dict(pool_size=pool, stride=stride, padding=padding, activation=act, scale=q[0], zero_point=q[1])
    for isa, got in run_each_isa(lambda: fn(x, **kw)).items():
        assert_same(got, want, f"{op} x={x.shape} pool={pool} stride={stride} {padding} act={act} on {isa}")


def test_average_pool_rounds_half_away_from_zero():
    # Windows of 2 with sums +-1 and +-3: the reference rounds 0.5 to 1 and -0.5 to -1.
    x = np.array([0, 1, 0, -1, 1, 2, -1, -2], np.int8).reshape(1, 1, 8, 1)
    want = run(pool_model("AVERAGE_POOL_2D", x.shape, pool=(1, 2), stride=(1, 2), padding="valid", q=(0.1, 0)), [x])
    assert want.reshape(-1).tolist() == [1, -1, 2, -2]
    for isa, got in run_each_isa(lambda: quant.average_pool(x, (1, 2))).items():
        assert_same(got, want, f"average pool ties on {isa}")


@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("case", range(CASES))
def test_add_mul_match_tflite_reference(op, case):
    rng = np.random.default_rng(5000 + case + (0 if op == "ADD" else 500))
    shape = [int(v) for v in rng.integers(1, 9, int(rng.integers(1, 5)))]
    shape_b = list(shape)
    if case % 3 == 1:  # broadcast one operand
        shape_b = [1] * len(shape)
    elif case % 3 == 2:
        shape_b[-1] = 1
    qa, qb = (random_scale(rng), random_zero_point(rng)), (random_scale(rng), random_zero_point(rng))
    if op == "ADD":
        qo = (float(np.float32(max(qa[0], qb[0]) * np.exp(rng.uniform(-1.5, 1.0)))), random_zero_point(rng))
    else:
        qo = (float(np.float32(qa[0] * qb[0] * 128 * np.exp(rng.uniform(-2.0, 1.0)))), random_zero_point(rng))
    act = ACTIVATIONS[case % 4]
    a, b = random_int8(rng, shape), random_int8(rng, shape_b)
    want = run(binary_model(op, a.shape, b.shape, shape, qa=qa, qb=qb, qo=qo, activation=act), [a, b])
    fn = quant.add if op == "ADD" else quant.mul
    kw = dict(a_scale=qa[0], a_zero_point=qa[1], b_scale=qb[0], b_zero_point=qb[1], output_scale=qo[0],
              output_zero_point=qo[1], activation=act)  # fmt: skip
    for isa, got in run_each_isa(lambda: fn(a, b, **kw)).items():
        assert_same(got, want, f"{op} a={a.shape} b={b.shape} act={act} on {isa}")


@pytest.mark.parametrize("case", range(CASES))
def test_softmax_matches_tflite_reference(case):
    rng = np.random.default_rng(6000 + case)
    rows = int(rng.integers(1, 5))
    depth = int(rng.choice([1, 2, 5, 10, 16, 100, 300, 1001]))
    in_q = (random_scale(rng, 0.01, 0.5), random_zero_point(rng))
    beta = float(np.float32(rng.choice([1.0, 1.0, 0.5, 2.0, 3.7])))
    x = random_int8(rng, (rows, depth))
    if case % 4 == 0:  # many equal maxima and values far below the maximum
        x[:, ::3] = 127
    want = run(softmax_model(x.shape, in_q=in_q, beta=beta), [x])
    for isa, got in run_each_isa(lambda: quant.softmax(x, input_scale=in_q[0], beta=beta)).items():
        assert_same(got, want, f"softmax {x.shape} scale={in_q[0]} beta={beta} on {isa}")


@pytest.mark.parametrize("case", range(CASES))
def test_logistic_matches_tflite_reference(case):
    rng = np.random.default_rng(7000 + case)
    in_q = (random_scale(rng, 0.005, 0.5), random_zero_point(rng))
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)  # every input value
    x = np.concatenate([x, random_int8(rng, (1, 256))], axis=1)
    want = run(unary_model("LOGISTIC", x.shape, in_q=in_q, out_q=quant.SOFTMAX_OUTPUT), [x])
    for isa, got in run_each_isa(lambda: quant.logistic(x, input_scale=in_q[0], input_zero_point=in_q[1])).items():
        assert_same(got, want, f"logistic scale={in_q[0]} zp={in_q[1]} on {isa}")


@pytest.mark.parametrize("case", range(CASES))
def test_quantize_matches_tflite_reference(case):
    rng = np.random.default_rng(8000 + case)
    q = (random_scale(rng, 1e-3, 1.0), random_zero_point(rng))
    n = int(rng.choice([1, 7, 16, 33, 1000]))
    x = (rng.standard_normal(n) * q[0] * 100).astype(np.float32)
    # exact ties at .5 steps, and values beyond the int8 range
    x[: n // 4] = ((rng.integers(-300, 300, n // 4) + 0.5) * np.float32(q[0])).astype(np.float32)
    want = run(unary_model("QUANTIZE", x.shape, in_q=None, out_q=q, in_dtype="float32"), [x])
    for isa, got in run_each_isa(lambda: quant.quantize(x, q[0], q[1])).items():
        assert_same(got, want, f"quantize n={n} q={q} on {isa}")


@pytest.mark.parametrize("case", range(CASES))
def test_dequantize_matches_tflite_reference(case):
    rng = np.random.default_rng(9000 + case)
    q = (random_scale(rng, 1e-4, 10.0), random_zero_point(rng))
    x = random_int8(rng, (int(rng.choice([1, 5, 16, 40])),))
    want = run(unary_model("DEQUANTIZE", x.shape, in_q=q, out_q=None, out_dtype="float32"), [x])
    for isa, got in run_each_isa(lambda: quant.dequantize(x, q[0], q[1])).items():
        assert got.dtype == np.float32
        assert_same(got.view(np.int32), want.view(np.int32), f"dequantize bits q={q} on {isa}")


@pytest.mark.parametrize("case", range(6))
def test_add_of_every_value_pair_matches_tflite_reference(case):
    # All 256 x 256 pairs of int8 inputs: the AVX2 path rescales each input with 32-bit
    # multiplies (the input multiplier split at 2^11), which must equal the reference's
    # 64-bit high multiply for every value and zero point.
    rng = np.random.default_rng(7000 + case)
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    zero_points = [-128, 127, 0, -1]
    qa = (random_scale(rng), zero_points[case % 4] if case < 4 else random_zero_point(rng))
    qb = (random_scale(rng) * (1000.0 if case == 5 else 1.0), zero_points[(case + 1) % 4])
    qo = (float(np.float32(max(qa[0], qb[0]) * np.exp(rng.uniform(-1.5, 1.0)))), random_zero_point(rng))
    act = ACTIVATIONS[case % 4]
    want = run(binary_model("ADD", a.shape, b.shape, list(a.shape), qa=qa, qb=qb, qo=qo, activation=act), [a, b])
    kw = dict(a_scale=qa[0], a_zero_point=qa[1], b_scale=qb[0], b_zero_point=qb[1], output_scale=qo[0],
              output_zero_point=qo[1], activation=act)  # fmt: skip
    for isa, got in run_each_isa(lambda: quant.add(a, b, **kw)).items():
        assert_same(got, want, f"ADD of every pair, qa={qa} qb={qb} qo={qo} act={act} on {isa}")


@pytest.mark.parametrize("ratio", [1.0, 2.0, 0.5, 0.25, 3.0])
def test_add_of_every_value_pair_with_related_scales(ratio):
    # The input of the larger scale is rescaled by exactly 1/2 (multiplier 2^30, shift 0),
    # which the AVX2 path turns into a shift; equal scales give both inputs that factor, and
    # a scale ratio of a power of two gives the other one 2^30 with a nonzero shift.
    rng = np.random.default_rng(int(ratio * 100))
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256).reshape(1, 256, 256)
    scale = random_scale(rng)
    qa, qb = (scale, random_zero_point(rng)), (float(np.float32(scale * ratio)), random_zero_point(rng))
    qo = (float(np.float32(max(qa[0], qb[0]) * 1.7)), random_zero_point(rng))
    want = run(binary_model("ADD", a.shape, b.shape, list(a.shape), qa=qa, qb=qb, qo=qo, activation="none"), [a, b])
    kw = dict(a_scale=qa[0], a_zero_point=qa[1], b_scale=qb[0], b_zero_point=qb[1], output_scale=qo[0],
              output_zero_point=qo[1])  # fmt: skip
    for isa, got in run_each_isa(lambda: quant.add(a, b, **kw)).items():
        assert_same(got, want, f"ADD of every pair, qa={qa} qb={qb} qo={qo} on {isa}")


def add_params(qa, qb, qo, activation: str) -> tuple[int, ...]:
    """ADD's 12 native parameters (qs8::AddParams), as quant.add computes them."""
    lo, hi = quant.activation_range(activation, qo[0], qo[1])
    return (-qa[1], -qb[1], *quant._add_rescale(qa[0], qb[0], qo[0]), qo[1], lo, hi)


@pytest.mark.parametrize("case", range(12))
def test_add_through_its_linear_form_equals_the_reference_on_every_pair(case):
    # The engine's ADD runs, on AVX2, AVX-512 and NEON, a linear form fit at load to all 65536 input pairs;
    # it must give the reference result on each pair for any scales, zero points and
    # activation, and exist for such ordinary parameters (else the fast path is lost).
    rng = np.random.default_rng(9100 + case)
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    sa = random_scale(rng)
    sb = [sa, float(np.float32(sa * 2)), random_scale(rng)][case % 3]
    qa, qb = (sa, random_zero_point(rng)), (sb, [-128, 127, 0, random_zero_point(rng)][case % 4])
    qo = (float(np.float32(max(sa, sb) * np.exp(rng.uniform(-1.5, 1.0)))), random_zero_point(rng))
    params = add_params(qa, qb, qo, ACTIVATIONS[case % 4])
    assert _C.add_linear_form(params) is not None, f"no linear form for ADD {params}"
    with use_isa("scalar"):
        want = _C.add(a, b, params)
    for isa, got in run_each_isa(lambda: _C.add_prepared(a, b, params)).items():
        assert_same(got, want, f"ADD's linear form, params={params} on {isa}")
    n = len(a) - 37  # a length that ends in each vector loop's tail
    for isa, got in run_each_isa(lambda: _C.add_prepared(a[:n], b[:n], params)).items():
        assert_same(got, want[:n], f"ADD's linear form on {n} values, params={params} on {isa}")


@pytest.mark.parametrize("gain", [0.5, 8.0, 20.0, 40.0, 100.0])
def test_add_linear_form_of_every_shift_equals_the_reference(gain):
    # The larger the inputs' scales against the output's, the coarser the linear form's
    # shift (22, 19, 17, 16 and 15 here): the NEON kernel takes the bias and the shift by 16
    # in one high-half add from 17 up, and the general shift below.
    rng = np.random.default_rng(int(gain * 10))
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    sa = random_scale(rng)
    qa, qb = (sa, random_zero_point(rng)), (float(np.float32(sa * 0.7)), random_zero_point(rng))
    qo = (float(np.float32(sa / gain)), random_zero_point(rng))
    params = add_params(qa, qb, qo, "none")
    form = _C.add_linear_form(params)
    assert form is not None, f"no linear form for ADD {params}"
    with use_isa("scalar"):
        want = _C.add(a, b, params)
    for isa, got in run_each_isa(lambda: _C.add_prepared(a, b, params)).items():
        assert_same(got, want, f"ADD's linear form {form}, params={params} on {isa}")


# ADD parameters (qs8::AddParams) whose linear form has int16 coefficients: output zero
# points near an end of the range, ReLU and narrower clamps (int16 steps 6 to 8, shifts 19 to
# 23). Ordinary ones, the face detectors' among them, take the int32 form.
INT16_FORM_PARAMS = [
    (29, 4, 20, 1073741824, 0, 1346397709, -4, 1726803427, -20, 94, -128, 127),
    (-65, -109, 20, 1393623963, -2, 1073741824, 0, 1537748866, -17, -126, -128, 127),
    (9, 98, 20, 1431574375, -2, 1073741824, 0, 1227260964, -16, 24, -128, 127),
    (-36, 40, 20, 1230528699, -1, 1073741824, 0, 2056734174, -17, 87, 87, 127),
    (-96, -86, 20, 1073741824, 0, 1109226478, -2, 1307519969, -15, 37, 37, 127),
    (-123, -48, 20, 1201052420, -1, 1073741824, 0, 1454661061, -20, -37, -37, -31),
]
INT32_FORM_PARAMS = [
    (128, -2, 20, 1808960512, -2, 1073741824, 0, 1950076798, -18, -128, -128, 127),  # face_detection_full_range
    (128, -41, 20, 1833883763, -2, 1073741824, 0, 1398192687, -17, -128, -128, 127),  # face_detection_short_range
]


@pytest.mark.parametrize("params", INT16_FORM_PARAMS + INT32_FORM_PARAMS)
def test_add_int16_and_int32_linear_forms_equal_the_reference_on_every_pair(params):
    # The NEON kernel multiplies int16 lanes by the int16 form's coefficients, and splits the
    # int32 form's at 2^16; with the int8 range it narrows without a clamp. Every length ends
    # in another tail of the vector loops.
    form = _C.add_linear_form(params)
    assert form is not None, f"no linear form for ADD {params}"
    assert (form[4] >= 0) == (params in INT16_FORM_PARAMS), f"ADD {params}: form {form}"
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    with use_isa("scalar"):
        want = _C.add(a, b, params)
    for n in (len(a), len(a) - 37, 15, 17, 47, 63, 65, 100):
        for isa, got in run_each_isa(lambda x=a[-n:], y=b[-n:]: _C.add_prepared(x, y, params)).items():
            assert_same(got, want[-n:], f"ADD's linear form {form} on {n} values, params={params} on {isa}")


def test_add_linear_forms_of_random_scales_equal_the_reference():
    # Scale ratios from 1/20 to 20, output scales from 0.1 to 4 times the larger input's, every
    # activation: both forms occur, and each is exact on every pair.
    rng = np.random.default_rng(9300)
    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    steps = set()
    for case in range(12 if EMULATED else 48):
        sa = random_scale(rng)
        sb = float(np.float32(sa * np.exp(rng.uniform(np.log(0.05), np.log(20.0)))))
        qo = (float(np.float32(max(sa, sb) * np.exp(rng.uniform(np.log(0.1), np.log(4.0))))), random_zero_point(rng))
        params = add_params((sa, random_zero_point(rng)), (sb, random_zero_point(rng)), qo, ACTIVATIONS[case % 4])
        form = _C.add_linear_form(params)
        if form is None:
            continue
        steps.add(form[4])
        with use_isa("scalar"):
            want = _C.add(a, b, params)
        for isa, got in run_each_isa(lambda p=params: _C.add_prepared(a, b, p)).items():
            assert_same(got, want, f"ADD's linear form {form}, params={params} on {isa}")
    assert -1 in steps and max(steps) >= 0, f"int16 steps seen: {sorted(steps)}"


@pytest.mark.parametrize("op", ["MAX_POOL_2D", "AVERAGE_POOL_2D"])
@pytest.mark.parametrize("c", [24, 28, 42, 88])
def test_pooling_channels_past_a_simd_block(op, c):
    # Channel counts above 16 that are not a multiple of 16 end with a block overlapping
    # the one before (the face detectors' 28-, 42- and 88-channel max pools).
    rng = np.random.default_rng(c + (0 if op == "MAX_POOL_2D" else 100))
    q = (random_scale(rng), random_zero_point(rng))
    x = random_int8(rng, (1, 12, 10, c))
    want = run(pool_model(op, x.shape, pool=(2, 2), stride=(2, 2), padding="valid", q=q, activation="none"), [x])
    fn = quant.max_pool if op == "MAX_POOL_2D" else quant.average_pool
    kw = dict(pool_size=(2, 2), stride=(2, 2), padding="valid", scale=q[0], zero_point=q[1])
    for isa, got in run_each_isa(lambda: fn(x, **kw)).items():
        assert_same(got, want, f"{op} x={x.shape} on {isa}")


@pytest.mark.parametrize("c, act", [(16, "relu6"), (40, "relu_n1_to_1"), (72, "none")])
def test_max_pool_of_whole_2x2_windows(c, act):
    # 2x2 windows at stride 2 that all lie inside the image (odd sizes leave the last row
    # and column out), two images, clamped by the fused activation: NEON's short path.
    rng = np.random.default_rng(c)
    q = (random_scale(rng), random_zero_point(rng))
    x = random_int8(rng, (2, 9, 7, c))
    want = run(
        pool_model("MAX_POOL_2D", x.shape, pool=(2, 2), stride=(2, 2), padding="valid", q=q, activation=act), [x]
    )
    kw = dict(pool_size=(2, 2), stride=(2, 2), padding="valid", activation=act, scale=q[0], zero_point=q[1])
    for isa, got in run_each_isa(lambda: quant.max_pool(x, **kw)).items():
        assert_same(got, want, f"MAX_POOL_2D x={x.shape} act={act} on {isa}")


@pytest.mark.parametrize(
    "shape, pool, stride, padding, act",
    [
        ((2, 11, 13, 40), (3, 3), (2, 2), "same", "relu6"),  # 3x3 windows, clipped at every edge
        ((1, 10, 9, 20), (2, 2), (2, 2), "same", "none"),  # 2x2 windows, the last column clipped
        ((1, 9, 12, 72), (2, 3), (1, 2), "valid", "relu_n1_to_1"),  # other window shapes
        ((1, 7, 8, 33), (5, 5), (3, 3), "same", "none"),  # windows wider than the padding
    ],
)
def test_max_pool_rows_inside_and_clipped(shape, pool, stride, padding, act):
    # The row-by-row max pooling: windows inside the image (unrolled for 2x2 and 3x3) and
    # clipped ones at the edges, 32 or 16 channels per piece with an overlapping last one.
    rng = np.random.default_rng(sum(shape))
    q = (random_scale(rng), random_zero_point(rng))
    x = random_int8(rng, shape)
    want = run(pool_model("MAX_POOL_2D", x.shape, pool=pool, stride=stride, padding=padding, q=q, activation=act), [x])
    kw = dict(pool_size=pool, stride=stride, padding=padding, activation=act, scale=q[0], zero_point=q[1])
    for isa, got in run_each_isa(lambda: quant.max_pool(x, **kw)).items():
        assert_same(got, want, f"MAX_POOL_2D x={x.shape} pool={pool} stride={stride} {padding} act={act} on {isa}")


@pytest.mark.parametrize(
    "left_shift, in1, in2, out_rescale",
    [
        (16, (1 << 30, 0), (1518500250, -1), (1 << 30, -16)),  # left shift other than int8's 20
        (20, (1 << 30, 0), (1518500250, 0), (1395864371, -21)),  # a factor in [1/2, 1) without a shift
        (20, (1 << 30, -20), (1518500250, -21), (1395864371, 0)),  # the output without a right shift
    ],
)
def test_add_parameters_off_tflites_int8_form(left_shift, in1, in2, out_rescale):
    # Parameters the SIMD paths' short forms leave to their general one: every value pair
    # equal to the scalar reference's.
    from edgeinf import _C

    a = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    b = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    params = (-5, 17, left_shift, *in1, *in2, *out_rescale, 3, -128, 127)  # qs8::AddParams, in order
    got = run_each_isa(lambda: _C.add(a, b, params))
    for isa, values in got.items():
        assert_same(values, got["scalar"], f"ADD {params} on {isa}")
