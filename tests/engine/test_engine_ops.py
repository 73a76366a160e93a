"""Each operator of the int8 engine, bit for bit against LiteRT's reference kernels, on
tiny models built per op with hand-set quantization (several seeds, every kernel path)."""

from __future__ import annotations

import numpy as np
import pytest
from engine_models import Graph, add_mean, assert_engine_exact, f32, random_q

SEEDS = range(3)


# Most tests run once per seed of SEEDS: they take ``rng`` (a generator of that seed; this
# module's own, in place of the suite's fixed one), ``g`` (an empty graph drawing on it) and,
# where the seed itself matters, ``seed``.
@pytest.fixture(params=SEEDS)
def seed(request) -> int:
    return request.param


@pytest.fixture
def rng(seed) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.fixture
def g(rng) -> Graph:
    return Graph(rng)


@pytest.mark.parametrize(
    "in_c, out_c, kernel, stride, dilation, padding, per_channel, activation",
    [
        (3, 16, 3, 2, 1, "same", True, "relu6"),  # a stem: few input channels, direct kernel
        (8, 24, 1, 1, 1, "valid", True, "none"),  # pointwise: the GEMM
        (16, 8, 3, 1, 2, "same", False, "relu"),  # dilated, per-tensor filter scale
        (5, 7, 5, 3, 1, "valid", True, "relu_n1_to_1"),
    ],
)
def test_conv_2d(in_c, out_c, kernel, stride, dilation, padding, per_channel, activation, rng, g):
    x = g.tensor((1, 11, 13, in_c), q=random_q(rng))
    y = g.conv(x, out_c, kernel, stride=stride, dilation=dilation, padding=padding, out_q=random_q(rng, 0.05, 0.5),
               per_channel=per_channel, activation=activation)  # fmt: skip
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize(
    "channels, multiplier, kernel, stride, padding",
    [
        (16, 1, 3, 1, "same"),
        (8, 2, 3, 2, "same"),
        (19, 1, 5, 2, "valid"),  # channels padded to 32 for the SIMD blocks
        (24, 1, 3, 1, "same"),  # padded, on the 3x3 path
        (40, 1, 3, 2, "same"),
    ],
)
def test_depthwise_conv_2d(channels, multiplier, kernel, stride, padding, rng, g):
    x = g.tensor((1, 10, 9, channels), q=random_q(rng))
    y = g.conv(x, None, kernel, stride=stride, padding=padding, out_q=random_q(rng, 0.02, 0.2), depthwise=True,
               multiplier=multiplier, activation="relu6")  # fmt: skip
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("shape, per_channel", [((1, 40), False), ((3, 33), True), ((1, 2, 3, 17), False)])
def test_fully_connected(shape, per_channel, rng, g):
    x = g.tensor(shape, q=random_q(rng))
    y = g.fully_connected(x, 12, out_q=random_q(rng, 0.1, 1.0), per_channel=per_channel, activation="relu")
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("op", ["ADD", "MUL", "SUB"])
@pytest.mark.parametrize("shape_a, shape_b", [((1, 6, 5, 8), (1, 6, 5, 8)), ((1, 6, 5, 8), (1, 1, 1, 8)),
                                              ((2, 1, 5, 3), (1, 4, 1, 3))])  # fmt: skip
def test_add_mul(op, shape_a, shape_b, seed, rng, g):
    a = g.tensor(shape_a, q=random_q(rng))
    b = g.tensor(shape_b, q=random_q(rng))
    y = g.binary(op, a, b, out_q=random_q(rng, 0.02, 0.2), activation="relu" if seed else "none")
    assert_engine_exact(g.build([a, b], [y]), rng)


def test_add_of_a_constant(rng, g):
    a = g.tensor((1, 4, 4, 6), q=random_q(rng))
    b = g.tensor((1, 1, 1, 6), q=random_q(rng), data=rng.integers(-128, 128, (1, 1, 1, 6), dtype=np.int8))
    y = g.binary("ADD", a, b, out_q=random_q(rng))
    assert_engine_exact(g.build([a], [y]), rng)


@pytest.mark.parametrize("op", ["MAX_POOL_2D", "AVERAGE_POOL_2D"])
@pytest.mark.parametrize("size, stride, padding", [(2, 2, "valid"), (3, 2, "same"), (3, 1, "same")])
def test_pool(op, size, stride, padding, seed, rng, g):
    x = g.tensor((1, 9, 7, 12), q=random_q(rng))
    y = g.pool(op, x, size, stride, padding, activation="relu6" if seed == 1 else "none")
    assert_engine_exact(g.build([x], [y]), rng)


def test_reshape_between_conv_and_fully_connected(rng, g):
    x = g.tensor((1, 6, 6, 4), q=random_q(rng))
    c = g.conv(x, 8, 3, stride=2, out_q=random_q(rng, 0.05, 0.5))
    r = g.reshape(c, (1, 72))
    y = g.fully_connected(r, 10, out_q=random_q(rng, 0.1, 1.0))
    plan = assert_engine_exact(g.build([x], [y]), rng)
    assert "RESHAPE" not in plan["ops"], plan  # shares memory: no step


@pytest.mark.parametrize("value", [None, -7])
def test_pad(value, rng, g):
    x = g.tensor((1, 5, 4, 3), q=random_q(rng))
    y = g.pad(x, [(0, 0), (1, 2), (0, 3), (0, 1)], value)
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("axis", [3, 1, -1])
def test_concatenation_same_scale(axis, rng, g):
    q = random_q(rng)
    a = g.tensor((1, 4, 5, 3), q=q)
    b = g.tensor((1, 4, 5, 3) if axis != 1 else (1, 2, 5, 3), q=q)
    c = g.tensor((1, 4, 5, 3), q=q, data=rng.integers(-128, 128, (1, 4, 5, 3), dtype=np.int8)) if axis != 1 else a
    y = g.concat([a, b, c], axis if axis >= 0 else 3)
    assert_engine_exact(g.build([a, b], [y]), rng)


def test_quantize_conv_dequantize(rng, g):
    """A float model boundary: QUANTIZE float32 -> int8, a conv, DEQUANTIZE int8 -> float32."""
    x = g.tensor((1, 8, 8, 3), "float32")
    q = g.unary("QUANTIZE", x, out_q=random_q(rng, 0.02, 0.05))
    c = g.conv(q, 8, 3, out_q=random_q(rng, 0.05, 0.5), activation="relu")
    y = g.unary("DEQUANTIZE", c, out_q=None, dtype="float32")
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("in_dtype, out_dtype", [("int8", "int8"), ("uint8", "int8"), ("int8", "uint8")])
def test_requantizing_quantize(in_dtype, out_dtype, rng, g):
    in_q, out_q = random_q(rng), random_q(rng)
    if in_dtype == "uint8":
        in_q = (in_q[0], in_q[1] + 128)
    if out_dtype == "uint8":
        out_q = (out_q[0], out_q[1] + 128)
    x = g.tensor((1, 7, 5, 3), in_dtype, q=in_q)
    y = g.unary("QUANTIZE", x, out_q=out_q, dtype=out_dtype)
    assert_engine_exact(g.build([x], [y]), rng)


def test_dequantize_uint8(rng, g):
    x = g.tensor((2, 33), "uint8", q=(random_q(rng)[0], int(rng.integers(0, 256))))
    y = g.unary("DEQUANTIZE", x, out_q=None, dtype="float32")
    assert_engine_exact(g.build([x], [y]), rng)


def test_logistic(rng, g):
    x = g.tensor((1, 9, 31), q=random_q(rng, 0.01, 0.2))
    y = g.unary("LOGISTIC", x, out_q=(1.0 / 256, -128))
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_softmax(beta, rng, g):
    x = g.tensor((3, 21), q=random_q(rng, 0.01, 0.2))
    y = g.softmax(x, beta)
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("op", ["RELU", "RELU6", "RELU_N1_TO_1"])
def test_standalone_relu_rescaling(op, rng, g):
    """RELU with its own output quantization: a rescale and a clamp (a table step)."""
    x = g.tensor((1, 6, 6, 5), q=random_q(rng, 0.01, 0.1))
    y = g.unary(op, x, out_q=random_q(rng, 0.01, 0.1), version=1)
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("op", ["RELU", "RELU6"])
def test_relu_after_conv_is_fused(op, rng, g):
    x = g.tensor((1, 8, 8, 4), q=random_q(rng))
    c = g.conv(x, 8, 3, out_q=(f32(0.04), -3))
    y = g.unary(op, c, out_q=(f32(0.04), -3), version=1)
    plan = assert_engine_exact(g.build([x], [y]), rng)
    assert plan["ops"] == {f"CONV_2D+{op}": 1}, plan


def test_small_network_shares_the_arena(rng, g):
    """conv -> depthwise -> conv -> residual add -> pool -> FC -> softmax: every output
    exact, and the arena smaller than the sum of the activations (lifetimes reuse it)."""
    x = g.tensor((1, 16, 16, 3), q=random_q(rng))
    a = g.conv(x, 16, 3, stride=2, out_q=random_q(rng, 0.05, 0.2), activation="relu6")
    b = g.conv(a, None, 3, out_q=random_q(rng, 0.05, 0.2), depthwise=True, activation="relu6")
    c = g.conv(b, 16, 1, out_q=random_q(rng, 0.05, 0.2))
    d = g.binary("ADD", a, c, out_q=random_q(rng, 0.05, 0.3))
    e = g.pool("AVERAGE_POOL_2D", d, 8, 8)
    f = g.reshape(e, (1, 16))
    h = g.fully_connected(f, 10, out_q=random_q(rng, 0.1, 0.5))
    y = g.softmax(h)
    data = g.build([x], [y, h])
    plan = assert_engine_exact(data, rng)
    activations = sum(int(np.prod(g.shape(t))) for t in (x, a, b, c, d, e, h, y))
    assert plan["arena_bytes"] < activations, plan


@pytest.mark.parametrize(
    "channels, alpha_shape",
    [(6, (1, 1, 6)), (6, (6,)), (6, (1,)), (16, (16,)), (8, (1, 1, 8)), (24, (24,)), (48, (1, 1, 1, 48))],
)
def test_prelu(channels, alpha_shape, rng, g):
    """One alpha per channel: tables on the scalar path and for channel counts that are not
    a multiple of 8, the fixed-point formula on 8 or 16 lanes on AVX2."""
    x = g.tensor((1, 5, 4, channels), q=random_q(rng))
    alpha_q = (f32(rng.uniform(0.001, 0.01)), int(rng.integers(-20, 20)))
    alpha = g.tensor(alpha_shape, q=alpha_q, data=rng.integers(-128, 128, alpha_shape, dtype=np.int8))
    y = g.tensor((1, 5, 4, channels), q=random_q(rng))
    g.op("PRELU", [x, alpha], [y])
    assert_engine_exact(g.build([x], [y]), rng)


def test_relu_after_add_is_fused(rng, g):
    a = g.tensor((1, 4, 4, 8), q=random_q(rng))
    b = g.tensor((1, 4, 4, 8), q=random_q(rng))
    s = g.binary("ADD", a, b, out_q=(f32(0.05), 7))
    y = g.unary("RELU6", s, out_q=(f32(0.05), 7), version=1)
    plan = assert_engine_exact(g.build([a, b], [y]), rng)
    assert plan["ops"] == {"ADD+RELU6": 1}, plan


@pytest.mark.parametrize(
    "shape, axes, keep_dims, same_q",
    [
        ((1, 7, 5, 12), [1, 2], True, False),  # global average pool
        ((2, 4, 4, 8), [2, -3], True, False),
        ((1, 7, 5, 12), [1, 2], False, True),
        ((1, 7, 5, 12), [1, 2], False, False),
        ((3, 10, 6), [1], False, True),
        ((1, 6, 6, 4), [3], True, True),
        ((1, 50, 40, 3), [1, 2], True, False),  # 2000 values: 1 / count folded with a shift of 10
    ],
)
def test_mean(shape, axes, keep_dims, same_q, rng, g):
    q = random_q(rng)
    x = g.tensor(shape, q=q)
    y = add_mean(g, x, axes, keep_dims, q if same_q else random_q(rng))
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("out_q", [(1.0 / 128, 0), None])
def test_tanh(out_q, rng, g):
    x = g.tensor((1, 9, 31), q=random_q(rng, 0.01, 0.2))
    y = g.unary("TANH", x, out_q=out_q or random_q(rng, 0.005, 0.02))
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("alpha", [0.2, 0.01, 1.5])
def test_leaky_relu(alpha, rng, g):
    from edgeinf.formats.tflite_schema import schema

    x = g.tensor((1, 6, 7, 5), q=random_q(rng))
    opts = schema().LeakyReluOptionsT()
    opts.alpha = alpha
    y = g.unary("LEAKY_RELU", x, out_q=random_q(rng), options=opts)
    assert_engine_exact(g.build([x], [y]), rng)


def _int32(g: Graph, values) -> int:
    values = np.asarray(values, np.int32)
    return g.tensor(values.shape, "int32", data=values)


@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (0, 3, 1, 2), (3, 2, 1, 0)])
def test_transpose(perm, rng, g):
    from edgeinf.formats.tflite_schema import schema

    shape = (1, 4, 6, 5)
    x = g.tensor(shape, q=random_q(rng))
    y = g.tensor(tuple(shape[p] for p in perm), q=g.q(x))
    g.op("TRANSPOSE", [x, _int32(g, perm)], [y], schema().TransposeOptionsT(), 2)
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("axis", [3, 1, -1])
def test_split(axis, rng, g):
    from edgeinf.formats.tflite_schema import schema

    x = g.tensor((1, 6, 4, 6), q=random_q(rng))
    shape = list(g.shape(x))
    shape[axis] //= 3
    outs = [g.tensor(tuple(shape), q=g.q(x)) for _ in range(3)]
    opts = schema().SplitOptionsT()
    opts.numSplits = 3
    g.op("SPLIT", [_int32(g, [axis]), x], outs, opts, 2)
    assert_engine_exact(g.build([x], outs), rng)


def test_split_v(rng, g):
    from edgeinf.formats.tflite_schema import schema

    x = g.tensor((1, 5, 4, 9), q=random_q(rng))
    outs = [g.tensor((1, 5, 4, n), q=g.q(x)) for n in (2, 3, 4)]
    opts = schema().SplitVOptionsT()
    opts.numSplits = 3
    g.op("SPLIT_V", [x, _int32(g, [2, -1, 4]), _int32(g, [3])], outs, opts, 2)
    assert_engine_exact(g.build([x], outs), rng)


@pytest.mark.parametrize(
    "begin, end, strides, begin_mask, end_mask, shrink",
    [
        ((0, 1, 0, 2), (1, 5, 6, 7), (1, 1, 2, 1), 0, 0, 0),
        ((0, -3, 1, 0), (1, -1, 5, 8), (1, 1, 1, 3), 0b0001, 0b1000, 0),
        ((0, 4, 5, 0), (1, 0, 0, 8), (1, -1, -2, 1), 0, 0b0110, 0),
        ((0, 2, 0, 0), (1, 3, 6, 8), (1, 1, 1, 1), 0, 0, 0b0010),
    ],
)
def test_strided_slice(begin, end, strides, begin_mask, end_mask, shrink, rng, g):
    from edgeinf.formats.tflite_schema import schema

    shape = (1, 6, 6, 8)
    x = g.tensor(shape, q=random_q(rng))
    keys = []
    for d in range(4):
        if shrink >> d & 1:
            keys.append(begin[d])
            continue
        keys.append(slice(None if begin_mask >> d & 1 else begin[d], None if end_mask >> d & 1 else end[d], strides[d]))
    out_shape = np.zeros(shape)[tuple(keys)].shape
    y = g.tensor(out_shape, q=g.q(x))
    opts = schema().StridedSliceOptionsT()
    opts.beginMask, opts.endMask, opts.shrinkAxisMask = begin_mask, end_mask, shrink
    g.op("STRIDED_SLICE", [x, _int32(g, begin), _int32(g, end), _int32(g, strides)], [y], opts, 2)
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("size", [(10, 14), (3, 5), (9, 9)])
@pytest.mark.parametrize("align_corners, half_pixel_centers", [(False, False), (True, False), (False, True)])
def test_resize_nearest_neighbor(size, align_corners, half_pixel_centers, rng, g):
    x = g.tensor((1, 5, 7, 3), q=random_q(rng))
    assert_engine_exact(_resize(g, "RESIZE_NEAREST_NEIGHBOR", x, size, align_corners, half_pixel_centers), rng)


def _resize(g: Graph, op: str, x: int, size, align_corners: bool, half_pixel_centers: bool) -> bytes:
    """The model of ``op`` (RESIZE_NEAREST_NEIGHBOR or RESIZE_BILINEAR) taking NHWC ``x`` to
    ``size``, its output in ``x``'s quantization."""
    from edgeinf.formats.tflite_schema import schema

    options = {
        "RESIZE_NEAREST_NEIGHBOR": schema().ResizeNearestNeighborOptionsT,
        "RESIZE_BILINEAR": schema().ResizeBilinearOptionsT,
    }
    batch, _, _, channels = g.shape(x)
    y = g.tensor((batch, *size, channels), q=g.q(x))
    opts = options[op]()
    opts.alignCorners, opts.halfPixelCenters = align_corners, half_pixel_centers
    g.op(op, [x, _int32(g, size)], [y], opts, 3)
    return g.build([x], [y])


@pytest.mark.parametrize("seed", range(12))  # input scales from 0.005 to 0.3: left and right reluish shifts
def test_hard_swish(seed):
    rng = np.random.default_rng(seed)
    g = Graph(rng)
    x = g.tensor((1, 8, 8, 4), q=random_q(rng, 0.005, 0.3))
    y = g.unary("HARD_SWISH", x, out_q=random_q(rng, 0.005, 0.3), version=1)
    assert_engine_exact(g.build([x], [y]), rng)


@pytest.mark.parametrize("size", [(10, 14), (3, 5), (9, 9), (5, 7)])
@pytest.mark.parametrize("align_corners, half_pixel_centers", [(False, False), (True, False), (False, True)])
def test_resize_bilinear(size, align_corners, half_pixel_centers, rng, g):
    x = g.tensor((1, 5, 7, 3), q=random_q(rng))
    assert_engine_exact(_resize(g, "RESIZE_BILINEAR", x, size, align_corners, half_pixel_centers), rng)


@pytest.mark.parametrize("channels, threads", [(48, 1), (19, 2), (8, 3), (37, 1)])
def test_resize_bilinear_channel_blocks(channels, threads):
    # The AVX2 path computes 8 channels per step (the rest by the scalar formula), the
    # AVX-512 one 16 (the rest masked), and the output rows split over threads; values at
    # the int8 edges round at +-2^19 exactly.
    rng = np.random.default_rng(channels)
    g = Graph(rng)
    x = g.tensor((2, 32, 31, channels), q=random_q(rng))
    data = _resize(g, "RESIZE_BILINEAR", x, (64, 65), align_corners=False, half_pixel_centers=True)
    assert_engine_exact(data, rng, runs=3, threads=threads)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("op", ["ADD", "SUB"])
def test_add_sub_every_pair_of_values(seed, op):
    """ADD and SUB run as a table of every (x, y) pair's result: fed all 65536 pairs, each
    entry is compared, under quantizations from near-equal input scales to far apart ones."""
    from engine_models import engine, first_mismatch, reference_outputs

    from edgeinf import kernels

    rng = np.random.default_rng(seed)
    g = Graph(rng)
    spread = 10.0 ** rng.uniform(0, 2)  # ratio of the input scales
    a = g.tensor((1, 256, 256, 1), q=random_q(rng, 0.01, 0.02))
    b = g.tensor((1, 256, 256, 1), q=random_q(rng, 0.01 * spread, 0.02 * spread))
    y = g.binary(op, a, b, out_q=random_q(rng, 0.02, 0.2 * spread), activation="relu6" if seed % 3 == 2 else "none")
    data = g.build([a, b], [y])
    values = np.arange(-128, 128, dtype=np.int8)
    x1 = np.repeat(values, 256).reshape(1, 256, 256, 1)
    x2 = np.tile(values, 256).reshape(1, 256, 256, 1)
    want = reference_outputs(data, [x1, x2])[0]
    backend = engine(data, 1)
    for isa in kernels.supported_isas():
        with kernels.use_isa(isa):
            backend.set_input(0, x1)
            backend.set_input(1, x2)
            got = backend.invoke()[0]
        assert not first_mismatch(got, want), f"{op} on {isa}: {first_mismatch(got, want)}"
