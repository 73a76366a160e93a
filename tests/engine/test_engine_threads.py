"""The engine on several threads: layers large enough to be split (convolutions by bands
of output rows, elementwise steps by chunks) still equal LiteRT's reference kernels."""

from __future__ import annotations

import os
import platform

import numpy as np
import pytest
from engine_models import Graph, assert_engine_exact, engine, random_inputs, random_q

from edgeinf import _C
from edgeinf.board import detect as detect_board


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize(
    "kernel, stride, dilation, padding",
    [(3, 1, 1, "same"), (3, 2, 1, "same"), (5, 2, 1, "valid"), (3, 1, 2, "same"), (7, 1, 1, "same")],
)
def test_split_convolutions(threads, kernel, stride, dilation, padding):
    rng = np.random.default_rng(threads * 10 + kernel)
    g = Graph(rng)
    x = g.tensor((1, 96, 80, 16), q=random_q(rng))  # layers over 2M multiply-adds: split
    a = g.conv(x, 32, kernel, stride=stride, dilation=dilation, padding=padding, out_q=random_q(rng, 0.05, 0.5))
    b = g.conv(a, None, kernel, stride=stride, dilation=dilation, padding=padding, depthwise=True,
               out_q=random_q(rng, 0.05, 0.5))  # fmt: skip
    assert_engine_exact(g.build([x], [b]), rng, threads=threads)


@pytest.mark.parametrize("threads", [2, 4])
def test_split_elementwise_and_padded_depthwise(threads):
    rng = np.random.default_rng(threads)
    g = Graph(rng)
    x = g.tensor((1, 120, 100, 24), q=random_q(rng))  # large enough to split
    d = g.conv(x, None, 3, depthwise=True, out_q=random_q(rng, 0.05, 0.5))  # 24 channels
    s = g.binary("ADD", x, d, out_q=random_q(rng, 0.05, 0.5))
    alpha = g.tensor((24,), q=(0.01, 0), data=rng.integers(-128, 128, (24,), dtype=np.int8))
    p = g.tensor((1, 120, 100, 24), q=random_q(rng, 0.05, 0.5))
    g.op("PRELU", [s, alpha], [p])
    y = g.unary("LOGISTIC", p, out_q=(1.0 / 256, -128))
    assert_engine_exact(g.build([x], [y]), rng, threads=threads)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize(
    "shape, out_c, kernel, padding",
    [
        ((1, 3, 3, 32), 1404, 3, "valid"),  # one output pixel: tiles write into the output
        ((1, 3, 3, 128), 400, 1, "valid"),  # 3 rows: tiles through the scratch
        ((1, 4, 5, 96), 250, 3, "same"),
    ],
)
def test_split_few_row_convolutions_by_channels(threads, shape, out_c, kernel, padding):
    rng = np.random.default_rng(threads + out_c)
    g = Graph(rng)
    x = g.tensor(shape, q=random_q(rng))
    y = g.conv(x, out_c, kernel, padding=padding, out_q=random_q(rng, 0.05, 0.5), activation="relu6")
    assert_engine_exact(g.build([x], [y]), rng, threads=threads)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("op", ["ADD", "MUL"])
@pytest.mark.parametrize("shape", [(1, 12, 12, 64), (1, 12, 12, 192), (1, 7, 9, 131)])
def test_mid_sized_arithmetic_splits(threads, op, shape):
    # ADD and MUL cost several copies per value: from about 8K values they split, in
    # chunks of whole 64-value runs (the last one shorter, off the kernels' 16-value step).
    rng = np.random.default_rng(threads + shape[3])
    g = Graph(rng)
    x = g.tensor(shape, q=random_q(rng))
    b = g.tensor(shape, q=random_q(rng))
    y = g.binary(op, x, b, out_q=random_q(rng, 0.05, 0.5))
    assert_engine_exact(g.build([x, b], [y]), rng, threads=threads)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("other", [(1, 1, 100, 24), (1, 120, 1, 24), (1, 120, 100, 1)])
def test_split_broadcast_binary(threads, op, other):
    rng = np.random.default_rng(threads)
    g = Graph(rng)
    x = g.tensor((1, 120, 100, 24), q=random_q(rng))  # its rows split over the threads
    b = g.tensor(other, q=random_q(rng))
    y = g.binary(op, x, b, out_q=random_q(rng, 0.05, 0.5))
    assert_engine_exact(g.build([x, b], [y]), rng, threads=threads)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("op", ["MAX_POOL_2D", "AVERAGE_POOL_2D"])
@pytest.mark.parametrize("size, stride, padding", [(3, 2, "same"), (2, 2, "valid"), (5, 1, "same"), (4, 3, "same")])
def test_split_pools(threads, op, size, stride, padding):
    rng = np.random.default_rng(threads * 10 + size)
    g = Graph(rng)
    x = g.tensor((1, 97, 80, 24), q=random_q(rng))  # output rows split into bands
    y = g.pool(op, x, size, stride, padding)
    assert_engine_exact(g.build([x], [y]), rng, threads=threads)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("pads", [[(0, 0), (0, 0), (0, 0), (0, 8)], [(0, 0), (0, 0), (0, 0), (0, 40)],
                                  [(0, 0), (1, 2), (0, 3), (0, 1)]])  # fmt: skip
def test_split_pad_and_concatenation(threads, pads):
    rng = np.random.default_rng(threads)
    g = Graph(rng)
    q = random_q(rng)
    x = g.tensor((1, 97, 80, 24), q=q)  # channels appended (per pixel) or rows padded, split
    p = g.pad(x, pads, None)
    y = g.concat([x, x], 3)
    assert_engine_exact(g.build([x], [p, y]), rng, threads=threads)


@pytest.mark.parametrize("threads", [2, 3])
def test_split_quantize_and_dequantize(threads):
    rng = np.random.default_rng(threads)
    g = Graph(rng)
    x = g.tensor((1, 97, 80, 8), "float32")
    q = g.unary("QUANTIZE", x, out_q=random_q(rng, 0.02, 0.05))
    y = g.unary("DEQUANTIZE", q, out_q=None, dtype="float32")
    assert_engine_exact(g.build([x], [q, y]), rng, threads=threads)


def test_a_program_keeps_its_threads():
    program = _C.EngineProgram(64, 3)
    assert program.threads == 3
    for _ in range(1000):
        program.run()  # no steps: the workers are not woken, nothing to join


@pytest.mark.parametrize("threads", [0, 257])
def test_thread_count_is_bounded(threads):
    with pytest.raises(ValueError, match="threads"):
        _C.EngineProgram(64, threads)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("channels", [12, 24, 28, 42])
def test_depthwise_channels_off_the_simd_block(threads, channels):
    # Fewer than 16 channels run padded to 16; more, on AVX2, end with an overlapping block
    # (the face detectors' 24-, 28- and 42-channel layers), split over threads.
    rng = np.random.default_rng(channels + threads)
    g = Graph(rng)
    x = g.tensor((1, 144, 136, channels), q=random_q(rng))  # over 2M multiply-adds: split
    d = g.conv(x, None, 3, depthwise=True, out_q=random_q(rng, 0.05, 0.5))
    s = g.conv(d, None, 3, stride=2, depthwise=True, out_q=random_q(rng, 0.05, 0.5))
    plan = assert_engine_exact(g.build([x], [s]), rng, threads=threads)
    assert plan["ops"] == {"DEPTHWISE_CONV_2D": 2}


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("shape", [(1, 24, 24, 64), (1, 48, 48, 32), (1, 48, 44, 12), (1, 96, 96, 8)])
def test_mid_sized_depthwise_split_by_rows(threads, shape):
    # Layers of 0.3-1 M multiply-adds (the face models' middle depthwise convolutions) split
    # into row bands; the padded ones (8, 12 channels) also split their copies.
    rng = np.random.default_rng(shape[3] + threads)
    g = Graph(rng)
    x = g.tensor(shape, q=random_q(rng))
    d = g.conv(x, None, 3, depthwise=True, out_q=random_q(rng, 0.05, 0.5))
    assert_engine_exact(g.build([x], [d]), rng, threads=threads)


def test_depthwise_padding_only_where_the_kernel_has_a_scalar_tail():
    from edgeinf.engine import plan_model
    from edgeinf.formats.tflite import read_tflite

    rng = np.random.default_rng(5)
    methods = {}
    for channels in (8, 12, 16, 24, 28, 48):
        g = Graph(rng)
        x = g.tensor((1, 9, 9, channels), q=random_q(rng))
        d = g.conv(x, None, 3, depthwise=True, out_q=random_q(rng, 0.05, 0.5))
        methods[channels] = plan_model(read_tflite(g.build([x], [d]))).steps[0].method
    direct = "depthwise_conv2d"
    assert methods[16] == methods[48] == direct
    # every x86 path but scalar runs AVX2's depthwise kernel, blocks of 16 (the last one
    # overlapping the one before): 8 to 15 channels would leave it a scalar tail, except on
    # avx512vnni and avx512amx, which run them at a stride of 1 as they are; the NEON kernels end any
    # count from 8 up with a block of 16 or 8 overlapping the one before
    x86_simd = platform.machine() in ("x86_64", "AMD64") and _C.active_isa() != "scalar"
    padded = x86_simd and _C.active_isa() not in ("avx512vnni", "avx512amx")
    assert methods[8] == methods[12] == ("depthwise_conv2d_padded" if padded else direct)
    assert methods[24] == methods[28] == direct


def test_profile_times_each_step():
    rng = np.random.default_rng(11)
    g = Graph(rng)
    x = g.tensor((1, 20, 20, 16), q=random_q(rng))
    a = g.conv(x, 24, 3, out_q=random_q(rng, 0.05, 0.5))
    y = g.binary("ADD", a, a, out_q=random_q(rng, 0.05, 0.5))
    backend = engine(g.build([x], [y]), 2)
    program = backend._program
    times = program.profile(5)
    assert len(times) == len(program) == 2
    assert all(t >= 0 for t in times)
    with pytest.raises(ValueError, match="runs"):
        program.profile(0)


def _invoke(backend, inputs) -> list[np.ndarray]:
    for i, x in enumerate(inputs):
        backend.set_input(i, x)
    return [o.copy() for o in backend.invoke()]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
@pytest.mark.skipif(
    detect_board().emulated,
    reason="under qemu a split step takes long enough for the pinned worker to be scheduled within it",
)
def test_runs_go_to_the_caller_alone_while_its_worker_gets_no_cpu():
    # Pinned to one CPU (threads inherit it), the caller and its worker take turns: the worker
    # joins few of a run's split steps, so the runs that follow leave it asleep. Every run,
    # alone or split, gives the outputs of one thread.
    rng = np.random.default_rng(21)
    g = Graph(rng)
    x = g.tensor((1, 48, 48, 16), q=random_q(rng))  # every layer split on two threads
    a = g.conv(x, 32, 3, out_q=random_q(rng, 0.05, 0.5))
    b = g.conv(a, None, 3, depthwise=True, out_q=random_q(rng, 0.05, 0.5))
    c = g.conv(b, 16, 1, out_q=random_q(rng, 0.05, 0.5))
    y = g.binary("ADD", x, c, out_q=random_q(rng, 0.05, 0.5))
    data = g.build([x], [y])
    one = engine(data, 1)
    inputs = random_inputs(rng, one)
    want = _invoke(one, inputs)
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        two = engine(data, 2)
        # 40 runs at least; more (up to 400) until one goes alone, for a host whose other load
        # lets the worker keep up at first
        for run in range(400):
            for got, expected in zip(_invoke(two, inputs), want):
                np.testing.assert_array_equal(got, expected)
            if run >= 39 and two._program.runs_alone > 0:
                break
    finally:
        os.sched_setaffinity(0, cpus)
    assert two._program.runs_alone > 0


def test_two_threads_on_free_cpus_split_the_steps():
    rng = np.random.default_rng(22)
    g = Graph(rng)
    x = g.tensor((1, 64, 64, 16), q=random_q(rng))
    y = g.conv(x, 32, 3, out_q=random_q(rng, 0.05, 0.5))
    backend = engine(g.build([x], [y]), 2)
    program = backend._program
    assert program.runs_alone == 0  # nothing judged yet
    program.profile(3)  # profiling always splits: no run is left to the caller
    assert program.runs_alone == 0
