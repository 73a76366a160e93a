"""Models with operators the engine lacks: native segments on the engine, the rest on
LiteRT (cut sub-models), the outputs those of LiteRT's reference kernels bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from engine_models import Graph, first_mismatch, random_q, reference_outputs

import edgeinf
from edgeinf.engine import cut_model, node_support, partition
from edgeinf.errors import UnsupportedOperatorError
from edgeinf.formats.tflite import read_tflite
from edgeinf.formats.tflite_schema import schema


def load_reference_split(tmp_path, data: bytes):
    path = tmp_path / "model.tflite"
    path.write_bytes(data)
    return edgeinf.load(path, backend="edgeinf", num_threads=2, reference=True)


def assert_same_as_reference(model, data: bytes, rng, runs: int = 3) -> None:
    for _ in range(runs):
        x = rng.integers(-128, 128, model.inputs[0].shape, dtype=np.int8)
        want = reference_outputs(data, [x])
        for (name, got), w in zip(model.run(x).items(), want):
            assert not first_mismatch(got, w), name


def space_to_depth(g: Graph, x: int) -> int:
    n, h, w, c = g.shape(x)
    y = g.tensor((n, h // 2, w // 2, c * 4), q=g.q(x))
    opts = schema().SpaceToDepthOptionsT()
    opts.blockSize = 2
    return g.op("SPACE_TO_DEPTH", [x], [y], opts, 2)


@pytest.mark.parametrize("seed", range(3))
def test_an_unsupported_op_in_the_middle(tmp_path, seed):
    rng = np.random.default_rng(seed)
    g = Graph(rng)
    x = g.tensor((1, 12, 12, 3), q=random_q(rng))
    a = g.conv(x, 8, 3, out_q=random_q(rng, 0.05, 0.2), activation="relu")
    b = space_to_depth(g, a)
    y = g.conv(b, 16, 1, out_q=random_q(rng, 0.05, 0.5))
    data = g.build([x], [y])
    with load_reference_split(tmp_path, data) as model:
        assert model.backend == "edgeinf"
        assert [s["runtime"] for s in model.details["segments"]] == ["edgeinf", "tflite", "edgeinf"]
        assert model.details["fallback_nodes"] == {1: "operator 1 (SPACE_TO_DEPTH) is not an operator the engine runs"}
        assert [p["ops"] for p in model.details["plans"]] == [{"CONV_2D": 1}, {"CONV_2D": 1}]
        assert_same_as_reference(model, data, rng)


def test_a_later_segment_reads_tensors_of_two_earlier_ones(tmp_path):
    """conv -> a; MAXIMUM(a, c) on LiteRT -> b; ADD(a, b) on the engine reads a and b."""
    rng = np.random.default_rng(5)
    g = Graph(rng)
    x = g.tensor((1, 8, 8, 4), q=random_q(rng))
    a = g.conv(x, 8, 3, out_q=(0.05, -3))
    c = g.tensor((8,), q=(0.05, -3), data=rng.integers(-20, 20, 8, dtype=np.int8))
    b = g.tensor((1, 8, 8, 8), q=(0.05, -3))
    g.op("MAXIMUM", [a, c], [b], schema().MaximumMinimumOptionsT(), 2)
    y = g.binary("ADD", a, b, out_q=(0.1, 4))
    data = g.build([x], [y])
    parsed = read_tflite(data)
    segments = partition(parsed, node_support(parsed))
    assert [(s.native, s.operators) for s in segments] == [(True, (0,)), (False, (1,)), (True, (2,))]
    assert segments[2].inputs == (a, b)
    with load_reference_split(tmp_path, data) as model:
        assert_same_as_reference(model, data, rng)


def variable_graph(rng, *, split_state: bool) -> tuple[bytes, Graph]:
    """A stateful model: VAR_HANDLE, ASSIGN_VARIABLE of an activation, READ_VARIABLE.
    With ``split_state`` a native conv lies between the assignment and the read."""
    g = Graph(rng)
    s = schema()
    x = g.tensor((1, 8, 8, 4), q=(0.04, 2))
    handle = g.tensor((), "RESOURCE")
    opts = s.VarHandleOptionsT()
    opts.sharedName = "state"
    a = g.conv(x, 4, 3, out_q=(0.05, 1))
    g.op("VAR_HANDLE", [], [handle], opts)
    g.ops.append(type(g.ops[0])("ASSIGN_VARIABLE", [handle, a], [], s.AssignVariableOptionsT()))
    if split_state:
        a = g.conv(a, 4, 1, out_q=(0.05, 1))
    read = g.tensor((1, 8, 8, 4), q=(0.05, 1))
    g.op("READ_VARIABLE", [handle], [read], s.ReadVariableOptionsT())
    y = g.binary("ADD", a, read, out_q=(0.1, 0))
    return g.build([x], [y]), g


def test_stateful_operators_run_in_one_litert_segment(tmp_path):
    rng = np.random.default_rng(9)
    data, _ = variable_graph(rng, split_state=False)
    with load_reference_split(tmp_path, data) as model:
        assert [s["runtime"] for s in model.details["segments"]] == ["edgeinf", "tflite", "edgeinf"]
        assert set(model.details["fallback_nodes"]) == {1, 2, 3}
        assert_same_as_reference(model, data, rng)


def test_stateful_operators_on_both_sides_of_a_native_segment_run_whole_on_litert(tmp_path):
    rng = np.random.default_rng(10)
    data, _ = variable_graph(rng, split_state=True)
    parsed = read_tflite(data)
    with pytest.raises(UnsupportedOperatorError, match="stateful"):
        partition(parsed, node_support(parsed))
    with load_reference_split(tmp_path, data) as model:
        assert model.backend == "tflite"
        assert "stateful" in model.details["not_split"]
        assert_same_as_reference(model, data, rng)


def test_a_cut_model_holds_only_its_own_weights():
    rng = np.random.default_rng(2)
    g = Graph(rng)
    x = g.tensor((1, 12, 12, 8), q=random_q(rng))
    a = g.conv(x, 64, 3, out_q=random_q(rng, 0.05, 0.2))
    b = space_to_depth(g, a)
    g.conv(b, 64, 3, out_q=random_q(rng, 0.05, 0.5))
    data = g.build([x], [len(g.tensors) - 1])
    parsed = read_tflite(data)
    (_, middle, _) = partition(parsed, node_support(parsed))
    cut = cut_model(data, middle)
    assert len(cut) < len(data) // 4  # the two convolutions' weights are gone
    assert [op.opcode.name for op in read_tflite(cut).main.operators] == ["SPACE_TO_DEPTH"]


def test_a_model_with_its_weights_after_the_flatbuffer_splits_exactly(tmp_path):
    """`edgeinf quantize` writes weights after the flatbuffer (as ai-edge-quantizer does): the
    LiteRT segments cut from such a model carry them, and the split runs as the whole does."""
    from dataclasses import replace

    from edgeinf.backends.partitioned import PartitionedBackend
    from edgeinf.formats.tflite_writer import unpack

    quantize = pytest.importorskip("edgeinf.quantize", reason="edgeinf quantize builds the int8 face models")
    path = quantize.int8_path("face_detection_short_range")
    data = path.read_bytes()
    stored = schema().ModelT.InitFromPackedBuf(bytearray(data), 0).buffers
    assert any(getattr(b, "offset", 0) > 1 for b in stored)  # weights after the flatbuffer
    assert all(getattr(b, "offset", 0) <= 1 for b in unpack(data).buffers)  # read back in
    parsed = read_tflite(data)
    support = node_support(parsed)
    pool = next(n.index for n in support if n.op == "MAX_POOL_2D")
    support[pool] = replace(support[pool], native=False, reason="taken off the engine by the test")
    segments = partition(parsed, support)
    assert [s.native for s in segments] == [True, False, True]
    backend = PartitionedBackend(path, data, parsed, support, segments, num_threads=2, reference=True)
    try:
        rng = np.random.default_rng(3)
        for _ in range(2):
            x = rng.integers(-128, 128, backend.inputs[0].shape, dtype=np.int8)
            backend.set_input(0, x)
            for got, want in zip(backend.invoke(), reference_outputs(data, [x])):
                assert not first_mismatch(got, want)
    finally:
        backend.close()
