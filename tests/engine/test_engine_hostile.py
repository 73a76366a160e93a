"""Hostile quantization parameters, many at random: the engine's plan refuses them with an
edgeinf error or runs them exactly as LiteRT's reference kernels do; never a crash."""

from __future__ import annotations

import numpy as np
import pytest
from engine_models import Graph, engine, first_mismatch, random_inputs, random_q, reference_outputs

from edgeinf.errors import EdgeInfError
from edgeinf.formats.tflite import read_tflite

BAD_SCALES = [0.0, -0.5, float("nan"), float("inf"), 1e-30, 1e30, 1e-9, 3e4]
BAD_ZERO_POINTS = [-129, 128, 200, -1000, 255, 127, -128]


def network(rng) -> Graph:
    g = Graph(rng)
    x = g.tensor((1, 8, 8, 4), q=random_q(rng))
    a = g.conv(x, 8, 3, out_q=random_q(rng, 0.05, 0.2), activation="relu6")
    b = g.conv(a, None, 3, depthwise=True, out_q=random_q(rng, 0.05, 0.2))
    c = g.binary("ADD", a, b, out_q=random_q(rng, 0.05, 0.3))
    d = g.pool("MAX_POOL_2D", c, 2, 2)
    e = g.reshape(d, (1, 128))
    f = g.fully_connected(e, 10, out_q=random_q(rng, 0.1, 0.5))
    g.softmax(f)
    return g


def mutate(g: Graph, rng) -> str:
    t = int(rng.integers(len(g.tensors)))
    td = g.tensors[t]
    kind = rng.choice(["scale", "zero_point", "axis", "per_channel"])
    if kind == "scale":
        value = float(rng.choice(BAD_SCALES))
        td.scale = [value] * len(td.scale) if isinstance(td.scale, list) else value
    elif kind == "zero_point":
        value = int(rng.choice(BAD_ZERO_POINTS))
        td.zero_point = [value] * len(td.zero_point) if isinstance(td.zero_point, list) else value
    elif kind == "axis":
        td.quantized_dimension = int(rng.integers(0, 4))
    else:  # one scale per index of some axis where the op expects another
        dim = int(rng.integers(len(td.shape))) if td.shape else 0
        n = td.shape[dim] if td.shape else 1
        td.scale = [float(np.float32(rng.uniform(0.001, 0.1)))] * n
        td.zero_point = [0] * n
        td.quantized_dimension = dim
    return f"tensor {t} {kind}"


@pytest.mark.parametrize("seed", range(150))
def test_hostile_quantization_never_crashes(seed):
    rng = np.random.default_rng(seed)
    g = network(rng)
    what = [mutate(g, rng) for _ in range(1 + seed % 3)]
    try:
        data = g.build([0], [len(g.tensors) - 1])
        read_tflite(data)
    except (ValueError, EdgeInfError):
        return  # the writer or the reader refuses it before the engine sees it
    try:
        backend = engine(data)
    except EdgeInfError:
        return  # refused with a clear error (ModelFileError or UnsupportedOperatorError)
    inputs = random_inputs(rng, backend)
    try:
        want = reference_outputs(data, inputs)
    except (RuntimeError, ValueError) as exc:
        pytest.fail(f"{what}: the engine accepted a model LiteRT refuses ({exc})")
    for i, x in enumerate(inputs):
        backend.set_input(i, x)
    for k, (got, expected) in enumerate(zip(backend.invoke(), want)):
        assert not first_mismatch(got, expected), f"{what}: output {k}: {first_mismatch(got, expected)}"
