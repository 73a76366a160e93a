"""1x1 convolutions to very few output channels (the face detectors' score heads) run on the
engine's narrow pointwise path on AVX2, and those to other counts below 16 end their
channel blocks in a partial store: equal to LiteRT's reference kernels on every kernel
path, on one thread and split by rows over several, with input depths off the 16-value
block and pixel counts off the 8-pixel group."""

from __future__ import annotations

import numpy as np
import pytest
from engine_models import Graph, assert_engine_exact, engine, random_inputs, random_q


@pytest.mark.parametrize("out_c", [1, 2, 3, 4, 5, 8, 12, 15])
@pytest.mark.parametrize("in_c", [16, 29, 48])
@pytest.mark.parametrize("threads", [1, 2])
def test_narrow_pointwise_equals_the_reference(out_c, in_c, threads):
    rng = np.random.default_rng(out_c * 100 + in_c + threads)
    g = Graph(rng)
    x = g.tensor((1, 37, 35, in_c), q=random_q(rng))  # 1295 pixels: a short last group
    y = g.conv(x, out_c, 1, out_q=random_q(rng, 0.05, 0.5), activation="relu6" if out_c == 3 else "none")
    assert_engine_exact(g.build([x], [y]), rng, threads=threads)


@pytest.mark.parametrize("stride", [2, 3])
@pytest.mark.parametrize("threads", [1, 3])
def test_strided_narrow_pointwise(stride, threads):
    rng = np.random.default_rng(stride * 10 + threads)
    g = Graph(rng)
    x = g.tensor((1, 61, 47, 40), q=random_q(rng))
    y = g.conv(x, 3, 1, stride=stride, padding="valid", out_q=random_q(rng, 0.05, 0.5))
    assert_engine_exact(g.build([x], [y]), rng, threads=threads)


def test_narrow_pointwise_in_a_batch():
    rng = np.random.default_rng(3)
    g = Graph(rng)
    x = g.tensor((3, 20, 21, 24), q=random_q(rng))
    y = g.conv(x, 4, 1, out_q=random_q(rng, 0.05, 0.5))
    assert_engine_exact(g.build([x], [y]), rng, threads=2)


def test_one_and_two_threads_give_the_same_outputs():
    rng = np.random.default_rng(9)
    g = Graph(rng)
    x = g.tensor((1, 96, 96, 32), q=random_q(rng))  # the full-range detector's 32 -> 8 projection
    a = g.conv(x, 8, 1, out_q=random_q(rng, 0.05, 0.5))
    b = g.conv(a, None, 3, depthwise=True, out_q=random_q(rng, 0.05, 0.5))  # 8 channels, padded
    y = g.conv(b, 1, 1, out_q=random_q(rng, 0.05, 0.5))  # a one-channel head
    data = g.build([x], [a, y])
    one, two = engine(data, 1), engine(data, 2)
    for _ in range(3):
        inputs = random_inputs(rng, one)
        got = []
        for backend in (one, two):
            for i, v in enumerate(inputs):
                backend.set_input(i, v)
            got.append([o.copy() for o in backend.invoke()])
        for a1, a2 in zip(*got):
            np.testing.assert_array_equal(a1, a2)
