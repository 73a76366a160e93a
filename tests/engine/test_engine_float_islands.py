"""Float islands (DEQUANTIZE -> float elementwise chain -> QUANTIZE) run as per-channel
tables, bit for bit against LiteRT's reference kernels. Every input is exhaustive: each
channel sees all 256 byte values, so every table entry is checked."""

from __future__ import annotations

import numpy as np
import pytest
from engine_models import Graph, assert_engine_exact, engine, first_mismatch, random_q, reference_outputs

from edgeinf import kernels
from edgeinf.engine import node_support
from edgeinf.formats.tflite import read_tflite
from edgeinf.formats.tflite_schema import schema

CHANNELS = 6


def every_byte(shape, dtype, rng) -> np.ndarray:
    """An input of ``shape`` (16 x 16 pixels) where each channel holds all 256 values, in
    its own order."""
    n, h, w, c = shape
    assert h * w == 256
    values = np.stack([rng.permutation(256) for _ in range(c)], axis=-1).reshape(shape)
    return (values if dtype == "uint8" else values - 128).astype(dtype)


def float_tensor(g: Graph, shape) -> int:
    return g.tensor(shape, "float32")


def constant(g: Graph, values, shape=None) -> int:
    values = np.asarray(values, np.float32)
    return g.tensor(values.shape if shape is None else shape, "float32", data=values.reshape(shape or values.shape))


def chain_op(g: Graph, rng, name: str, x: int) -> int:
    """One float operator on ``x``; its constants (per channel where it takes them) random."""
    shape = g.shape(x)
    channels = shape[-1]
    y = float_tensor(g, shape)
    s = schema()
    if name == "PRELU":
        alpha = constant(g, rng.uniform(-0.5, 1.5, channels), (1, 1, channels))
        return g.op("PRELU", [x, alpha], [y])
    if name == "LEAKY_RELU":
        opts = s.LeakyReluOptionsT()
        opts.alpha = 0.1
        return g.op(name, [x], [y], opts)
    if name in ("ADD", "SUB", "MUL", "MUL_SCALAR", "ADD_RELU6", "ADD_CONSTANT_FIRST"):
        base = name.split("_")[0]
        opts = {"ADD": s.AddOptionsT, "SUB": s.SubOptionsT, "MUL": s.MulOptionsT}[base]()
        opts.fusedActivationFunction = 3 if name == "ADD_RELU6" else 0
        c = constant(g, [1.75]) if name == "MUL_SCALAR" else constant(g, rng.uniform(-2, 2, channels))
        inputs = [c, x] if name == "ADD_CONSTANT_FIRST" else [x, c]
        return g.op(base, inputs, [y], opts, 2 if base != "SUB" else 3)
    return g.op(name, [x], [y])


def island_model(rng, chain, in_dtype="int8", out_dtype="int8", channels=CHANNELS, in_q=None) -> bytes:
    g = Graph(rng)
    shape = (1, 16, 16, channels)
    in_q = in_q or random_q(rng, 0.02, 0.2)
    if in_dtype == "uint8":
        in_q = (in_q[0], in_q[1] + 128)
    x = g.tensor(shape, in_dtype, q=in_q)
    value = g.unary("DEQUANTIZE", x, out_q=None, dtype="float32")
    for name in chain:
        value = chain_op(g, rng, name, value)
    out_q = random_q(rng, 0.005, 0.05)
    if out_dtype == "uint8":
        out_q = (out_q[0], out_q[1] + 128)
    y = g.unary("QUANTIZE", value, out_q=out_q, dtype=out_dtype)
    return g.build([x], [y])


def assert_island_exact(data: bytes, rng, threads: int = 1) -> dict:
    backend = engine(data, threads)
    spec = backend.inputs[0]
    x = every_byte(spec.shape, spec.dtype, rng)
    want = reference_outputs(data, [x])
    for isa in kernels.supported_isas():
        with kernels.use_isa(isa):
            backend.set_input(0, x)
            got = backend.invoke()
        msg = first_mismatch(got[0], want[0])
        assert not msg, f"on {isa}: {msg}"
    return backend.details["plan"]


CHAINS = [
    (),
    ("PRELU",),
    ("LEAKY_RELU",),
    ("RELU",),
    ("RELU6",),
    ("RELU_N1_TO_1",),
    ("LOGISTIC",),
    ("TANH",),
    ("HARD_SWISH",),
    ("ADD",),
    ("ADD_CONSTANT_FIRST",),
    ("SUB",),
    ("MUL",),
    ("MUL_SCALAR",),
    ("ADD_RELU6",),
    ("MUL", "ADD", "RELU6"),
    ("PRELU", "TANH"),
]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("chain", CHAINS, ids=lambda c: "+".join(c) or "nothing")
def test_float_chain_runs_as_one_table(seed, chain):
    rng = np.random.default_rng(seed)
    plan = assert_island_exact(island_model(rng, chain), rng)
    assert plan["steps"] == 1, plan
    assert plan["ops"] == {"+".join(("DEQUANTIZE", *chain, "QUANTIZE")).replace("_SCALAR", "")
                           .replace("_RELU6", "").replace("_CONSTANT_FIRST", ""): 1}  # fmt: skip


@pytest.mark.parametrize("in_dtype, out_dtype", [("uint8", "int8"), ("int8", "uint8"), ("uint8", "uint8")])
def test_float_prelu_between_unsigned_tensors(in_dtype, out_dtype):
    rng = np.random.default_rng(7)
    assert_island_exact(island_model(rng, ("PRELU",), in_dtype, out_dtype), rng)


@pytest.mark.parametrize("channels", [2, 3, 16, 40, 128])
def test_a_prelu_island_runs_as_two_lines_per_channel(channels):
    """A float PRELU's tables are two lines per channel, rounded: the engine proves that at
    load and SIMD paths compute the lines rather than look each value up, bit for bit as
    the reference on every input byte (channel counts around the 32-value vector step)."""
    rng = np.random.default_rng(channels)
    in_q = (float(rng.uniform(0.02, 0.2)), int(rng.integers(-100, 100)))  # negative inputs: two lines
    data = island_model(rng, ("PRELU",), channels=channels, in_q=in_q)
    assert_island_exact(data, rng)
    assert engine(data)._program.step_names() == ["DEQUANTIZE+PRELU+QUANTIZE (two lines)"]


@pytest.mark.parametrize("chain, in_dtype", [(("HARD_SWISH",), "int8"), (("TANH",), "int8"), (("PRELU",), "uint8")])
def test_tables_that_are_not_two_lines_stay_tables(chain, in_dtype):
    """Curves are no pair of lines, and a uint8 input has no split where a PRELU's meet (its
    bytes above 127 read as negative int8): those islands keep their lookups."""
    rng = np.random.default_rng(5)
    data = island_model(rng, chain, in_dtype=in_dtype, channels=16)
    assert_island_exact(data, rng)
    assert engine(data)._program.step_names() == ["+".join(("DEQUANTIZE", *chain, "QUANTIZE"))]


def test_a_large_island_splits_over_threads():
    rng = np.random.default_rng(3)
    g = Graph(rng)
    x = g.tensor((1, 16, 16 * 64, CHANNELS), q=(0.05, 3))  # above the parallel threshold
    value = chain_op(g, rng, "PRELU", g.unary("DEQUANTIZE", x, out_q=None, dtype="float32"))
    y = g.unary("QUANTIZE", value, out_q=(0.02, -5))
    data = g.build([x], [y])
    backend = engine(data, threads=2)
    xs = np.concatenate([every_byte((1, 16, 16, CHANNELS), "int8", rng) for _ in range(64)], axis=2)
    backend.set_input(0, xs)
    assert not first_mismatch(backend.invoke()[0], reference_outputs(data, [xs])[0])


def test_node_support_names_the_island():
    rng = np.random.default_rng(1)
    nodes = node_support(read_tflite(island_model(rng, ("PRELU",))))
    assert [n.native for n in nodes] == [True] * 3
    assert all("DEQUANTIZE+PRELU+QUANTIZE" in n.how for n in nodes)


def test_a_float_value_read_twice_is_not_an_island():
    """The float tensor feeds the chain and is also a model output: the chain cannot fold,
    and the float PRELU keeps the model off the engine, with the reason."""
    rng = np.random.default_rng(2)
    g = Graph(rng)
    x = g.tensor((1, 16, 16, CHANNELS), q=(0.05, 0))
    value = g.unary("DEQUANTIZE", x, out_q=None, dtype="float32")
    y = g.unary("QUANTIZE", chain_op(g, rng, "PRELU", value), out_q=(0.02, 0))
    nodes = node_support(read_tflite(g.build([x], [y, value])))
    assert [n.native for n in nodes] == [True, False, True]
    assert "FLOAT32" in nodes[1].reason


def test_an_operand_varying_over_rows_is_not_an_island():
    rng = np.random.default_rng(4)
    g = Graph(rng)
    x = g.tensor((1, 16, 16, CHANNELS), q=(0.05, 0))
    value = g.unary("DEQUANTIZE", x, out_q=None, dtype="float32")
    c = constant(g, rng.uniform(-1, 1, (1, 16, 1, 1)))
    y = float_tensor(g, (1, 16, 16, CHANNELS))
    opts = schema().MulOptionsT()
    g.op("MUL", [value, c], [y], opts, 2)
    out = g.unary("QUANTIZE", y, out_q=(0.02, 0))
    nodes = node_support(read_tflite(g.build([x], [out])))
    assert not nodes[1].native


def test_a_constant_minus_the_value_is_not_folded():
    """SUB(c, x) is not a chain step (only x - c is): the float SUB is left to LiteRT."""
    rng = np.random.default_rng(8)
    g = Graph(rng)
    x = g.tensor((1, 16, 16, CHANNELS), q=(0.05, 0))
    value = g.unary("DEQUANTIZE", x, out_q=None, dtype="float32")
    y = float_tensor(g, (1, 16, 16, CHANNELS))
    g.op("SUB", [constant(g, [1.0]), value], [y], schema().SubOptionsT(), 3)
    out = g.unary("QUANTIZE", y, out_q=(0.02, 0))
    nodes = node_support(read_tflite(g.build([x], [out])))
    assert [n.native for n in nodes] == [True, False, True]


def test_a_nan_alpha_leaves_the_prelu_to_litert(tmp_path):
    """NaN through the chain has no defined int8 value: no table, and the model gives
    exactly what LiteRT gives."""
    import edgeinf

    rng = np.random.default_rng(11)
    g = Graph(rng)
    x = g.tensor((1, 16, 16, CHANNELS), q=(0.05, 0))
    value = g.unary("DEQUANTIZE", x, out_q=None, dtype="float32")
    alpha = constant(g, [np.nan] + [0.5] * (CHANNELS - 1), (1, 1, CHANNELS))
    y = float_tensor(g, (1, 16, 16, CHANNELS))
    g.op("PRELU", [value, alpha], [y])
    out = g.unary("QUANTIZE", y, out_q=(0.02, 0))
    data = g.build([x], [out])
    nodes = node_support(read_tflite(data))
    assert [n.native for n in nodes] == [True, False, True]
    path = tmp_path / "nan_alpha.tflite"
    path.write_bytes(data)
    with edgeinf.load(path, backend="edgeinf", num_threads=1, xnnpack=False) as model:
        assert model.backend == "tflite"
        with edgeinf.load(path, backend="tflite", num_threads=1, xnnpack=False) as litert:
            xs = every_byte((1, 16, 16, CHANNELS), "int8", rng)
            assert np.array_equal(model.run(xs)[model.outputs[0].name], litert.run(xs)[litert.outputs[0].name])


@pytest.mark.parametrize(
    "n, tables, message",
    [
        (12, np.zeros((5, 256), np.int8), "channels do not divide"),
        (12, np.zeros((4, 255), np.int8), "tables"),
        (12, np.zeros((0, 256), np.int8), "channels do not divide"),
        (12, np.zeros(256, np.int8), "tables"),
        (1 << 20, np.zeros((4, 256), np.int8), "outside the arena"),
        (12, np.zeros((4, 256), np.int8), "split outside"),
    ],
)
@pytest.mark.parametrize("after_add", [False, True])
def test_the_native_table_step_refuses_bad_arguments(n, tables, message, after_add):
    from edgeinf import _C

    program = _C.EngineProgram(1024, 1)
    split = 129 if message == "split outside" else 0
    with pytest.raises(ValueError, match=message):
        if after_add:  # the ADD's own parameters valid: (zero points, left shift 20, scales, output, range)
            params = (0, 0, 20, 1 << 30, 0, 1 << 30, 0, 1 << 30, -1, 0, -128, 127)
            program.add_channel_lut(op="X", x_offset=0, y_offset=256, out_offset=512, n=n, params=params,
                                    tables=tables, split=split)  # fmt: skip
        else:
            program.channel_lut(op="X", in_offset=0, out_offset=512, n=n, tables=tables, split=split)


def test_the_native_add_table_step_refuses_bad_add_parameters():
    from edgeinf import _C

    program = _C.EngineProgram(1024, 1)
    params = (0, 0, 23, 1 << 30, 0, 1 << 30, 0, 1 << 30, -1, 0, -128, 127)
    with pytest.raises(ValueError, match="left shift"):
        program.add_channel_lut(op="X", x_offset=0, y_offset=256, out_offset=512, n=12, params=params,
                                tables=np.zeros((4, 256), np.int8), split=0)  # fmt: skip


def run_channel_tables(tables: np.ndarray, split: int, rng, extra_pixels: int = 0) -> tuple[str, dict]:
    """A one-step program of ``tables`` ([channels, 256]) on every input byte of each
    channel (then ``extra_pixels`` random pixels, so that vector loops end in their
    tails): the step's name and, per kernel path, the first output that differs from
    the tables' own entries (empty when none does)."""
    from edgeinf import _C

    channels = len(tables)
    pixels = 256 + extra_pixels
    n = pixels * channels
    program = _C.EngineProgram(2 * n, 1)
    program.channel_lut(op="T", in_offset=0, out_offset=n, n=n, tables=tables, split=split)
    x = every_byte((1, 16, 16, channels), "int8", rng).reshape(256, channels)
    x = np.concatenate([x, rng.integers(-128, 128, (extra_pixels, channels), dtype=np.int8)])
    program.view(0, (pixels, channels), np.dtype(np.int8))[...] = x
    want = tables[np.arange(channels), x.view(np.uint8)]
    mismatches = {}
    for isa in kernels.supported_isas():
        with kernels.use_isa(isa):
            program.run()
        mismatches[isa] = first_mismatch(program.view(n, (pixels, channels), np.dtype(np.int8)).copy(), want)
    return program.step_names()[0], mismatches


def lines_tables(m: np.ndarray, b: np.ndarray, split: int) -> np.ndarray:
    """Tables of clamp(floor((m * q + b) / 2^20)), lower line (row 0 of m, b) below split."""
    q = np.arange(256).astype(np.int64)
    q = np.where(q >= 128, q - 256, q)
    side = (q >= split).astype(int)
    y = (m[side].T * q + b[side].T) >> 20
    return np.ascontiguousarray(np.clip(y, -128, 127).astype(np.int8))


# Channel counts and pixel counts around the SIMD variants' 16-, 32- and 64-value steps.
@pytest.mark.parametrize("seed, channels, extra_pixels", [(0, 24, 0), (1, 24, 3), (2, 5, 7), (3, 72, 1), (4, 16, 5)])
def test_tables_drawn_from_two_lines_are_found_to_be_lines(seed, channels, extra_pixels):
    rng = np.random.default_rng(seed)
    split = int(rng.integers(-128, 129))
    m = rng.integers(-(1 << 22), 1 << 22, (2, channels), dtype=np.int64) >> rng.integers(0, 8, (2, channels))
    b = rng.integers(-(1 << 27), 1 << 27, (2, channels), dtype=np.int64)
    name, mismatches = run_channel_tables(lines_tables(m, b, split), split, rng, extra_pixels)
    assert name == "T (two lines)"
    assert not any(mismatches.values()), mismatches


@pytest.mark.parametrize(
    "case",
    ["all -128", "all 127", "constant", "one entry off", "random", "steep"],
)
def test_edge_tables_are_lines_only_where_they_are(case):
    """Saturated and constant tables are lines; a line with one entry moved by one, or a
    random table, is not and keeps its lookups. Every path gives the tables' entries."""
    rng = np.random.default_rng(9)
    channels, split = 8, -3
    ones = np.ones((2, channels), np.int64)
    tables = {
        "all -128": np.full((channels, 256), -128, np.int8),
        "all 127": np.full((channels, 256), 127, np.int8),
        "constant": np.full((channels, 256), 5, np.int8),
        "steep": lines_tables(ones * 3 << 20, ones * 0, split),
        "random": rng.integers(-128, 128, (channels, 256)).astype(np.int8),
    }.get(case)
    if case == "one entry off":
        tables = lines_tables(ones * 700_000, ones * 300_000, split)
        tables[3, 40] += 1
    name, mismatches = run_channel_tables(tables, split, rng)
    is_lines = case not in ("one entry off", "random")
    assert name == ("T (two lines)" if is_lines else "T")
    assert not any(mismatches.values()), mismatches


def residual_prelu_model(rng, shape, *, activation="none", sum_read_twice=False, broadcast=False) -> bytes:
    """ADD(x, y) -> DEQUANTIZE -> PRELU -> QUANTIZE, as after a residual block; the sum also
    an output of its own (``sum_read_twice``), or y one pixel broadcast over x (``broadcast``)."""
    g = Graph(rng)
    x = g.tensor(shape, q=random_q(rng, 0.02, 0.2))
    y = g.tensor((1, 1, 1, shape[-1]) if broadcast else shape, q=random_q(rng, 0.02, 0.2))
    total = g.binary(
        "ADD", x, y, out_q=(float(rng.uniform(0.03, 0.3)), int(rng.integers(-60, 60))), activation=activation
    )
    value = chain_op(g, rng, "PRELU", g.unary("DEQUANTIZE", total, out_q=None, dtype="float32"))
    out = g.unary("QUANTIZE", value, out_q=random_q(rng, 0.005, 0.05))
    return g.build([x, y], [out, total] if sum_read_twice else [out])


def exact_steps(data: bytes, rng, threads: int = 1) -> list[str]:
    """The engine's steps of ``data``, once its outputs are asserted exact on every path."""
    assert_engine_exact(data, rng, threads=threads)
    return engine(data, threads)._program.step_names()


# Shapes around the fused kernel's 64- and 16-value steps and the chunks of the unfused
# paths, and one large enough to split over threads.
@pytest.mark.parametrize(
    "seed, shape, threads, activation",
    [(0, (1, 16, 16, 16), 1, "none"), (1, (1, 7, 9, 24), 1, "relu"), (2, (1, 5, 3, 5), 1, "none"),
     (3, (1, 33, 31, 40), 2, "relu6"), (4, (1, 96, 96, 16), 2, "none")],
)  # fmt: skip
def test_an_add_and_the_prelu_after_it_run_as_one_step(seed, shape, threads, activation):
    rng = np.random.default_rng(seed)
    steps = exact_steps(residual_prelu_model(rng, shape, activation=activation), rng, threads)
    assert steps == ["ADD+DEQUANTIZE+PRELU+QUANTIZE (two lines)"]


@pytest.mark.parametrize("case", ["sum read twice", "broadcast"])
def test_an_add_stays_a_step_of_its_own_where_the_prelu_is_not_its_only_reader(case):
    rng = np.random.default_rng(11)
    data = residual_prelu_model(
        rng, (1, 8, 8, 16), sum_read_twice=case == "sum read twice", broadcast=case == "broadcast"
    )
    assert exact_steps(data, rng) == ["ADD", "DEQUANTIZE+PRELU+QUANTIZE (two lines)"]
