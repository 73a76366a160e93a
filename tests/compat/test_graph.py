"""Graph arithmetic stays linear in the graph's size, whatever order the nodes are listed in."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

import edgeinf
from edgeinf.compat.graph import partition

_NOT_READY = object()


def _sweep_partition(inputs, outputs, on_delegate):
    """TFLite's PartitionGraphIntoIndependentNodeSubsets written as it reads (sweep after sweep
    over every node): the reference `partition` must agree with, quadratic on purpose."""
    n = len(on_delegate)
    ready = {t: _NOT_READY for outs in outputs for t in outs if t >= 0}
    placed = [False] * n
    subsets = []
    while not all(placed):
        kind, members, progress = None, [], True
        while progress:
            progress = False
            for i in range(n):
                if placed[i] or any(t >= 0 and ready.get(t) is _NOT_READY for t in inputs[i]):
                    continue
                if kind is None:
                    kind = on_delegate[i]
                if on_delegate[i] != kind:
                    continue
                placed[i], progress = True, True
                members.append(i)
                for t in outputs[i]:
                    ready[t] = True
        if not members:
            subsets.append((False, [i for i in range(n) if not placed[i]]))
            break
        subsets.append((bool(kind), members))
    return subsets


class _CountingList(list):
    """A list that counts item reads: the work a graph walk does."""

    reads = 0

    def __getitem__(self, i):
        _CountingList.reads += 1
        return super().__getitem__(i)


def _reverse_chain(n: int):
    """Node k computes tensor k+1 from tensor k, listed last node first."""
    inputs = [[n - 1 - k] for k in range(n)]
    outputs = [[n - k] for k in range(n)]
    return inputs, outputs


@pytest.mark.parametrize("seed", range(30))
def test_partition_agrees_with_the_sweeping_reference(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 40)
    order = list(range(n))
    rng.shuffle(order)  # node k computes tensor order[k] + 1 from earlier tensors, listed in any order
    inputs = [[rng.randint(0, order[k]) for _ in range(rng.randint(1, 3))] + [-1] * rng.randint(0, 1) for k in range(n)]
    outputs = [[order[k] + 1] for k in range(n)]
    on_delegate = [rng.random() < 0.6 for _ in range(n)]
    if seed % 5 == 0 and n > 2:  # a cycle: nodes that can never run become one CPU subset
        inputs[0].append(outputs[1][0])
        inputs[1].append(outputs[0][0])
    assert partition(inputs, outputs, on_delegate) == _sweep_partition(inputs, outputs, on_delegate)


def test_partition_of_a_reverse_ordered_chain_reads_each_node_a_bounded_number_of_times():
    n = 20_000
    inputs, outputs = _reverse_chain(n)
    inputs, outputs = _CountingList(inputs), _CountingList(outputs)
    _CountingList.reads = 0
    subsets = partition(inputs, outputs, [True] * n)
    assert subsets == [(True, list(range(n - 1, -1, -1)))]
    assert _CountingList.reads <= 4 * n, f"{_CountingList.reads} node reads for {n} nodes"


def _chain_model(path: Path, n: int, reverse: bool = False) -> Path:
    """A chain of n ops alternating ADD (XNNPACK takes it) and EXP (tflite-runtime 2.14's XNNPACK
    does not): every op starts a new delegate partition."""
    from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model

    tensors = [TensorDef("w", (1, 4), "float32", data=np.ones((1, 4), np.float32))]
    tensors += [TensorDef(f"t{i}", (1, 4), "float32") for i in range(n + 1)]
    ops = [OpDef("ADD", [i + 1, 0], [i + 2]) if i % 2 else OpDef("EXP", [i + 1], [i + 2]) for i in range(n)]
    path.write_bytes(build_model(tensors, ops[::-1] if reverse else ops, inputs=[1], outputs=[n + 1]))
    return path


def _lines_run_in_compat(fn) -> int:
    """Python lines executed inside edgeinf.compat while fn runs (a count of work, not a time)."""
    count = 0
    compat = str(Path(edgeinf.__file__).parent / "compat")

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def on_call(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(compat) else None

    sys.settrace(on_call)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def test_check_of_a_chain_of_partitions_is_linear(tmp_path):
    pytest.importorskip("flatbuffers")
    small = _chain_model(tmp_path / "small.tflite", 500)
    large = _chain_model(tmp_path / "large.tflite", 2000)
    target = "tflite-runtime 2.14.0"
    assert len(edgeinf.check(small, target=target).backends["tflite"].partitions) == 250
    work_small = _lines_run_in_compat(lambda: edgeinf.check(small, target=target))
    work_large = _lines_run_in_compat(lambda: edgeinf.check(large, target=target))
    # linear: 4x the nodes is about 4x the work (a quadratic walk would be about 16x)
    assert work_large < 5 * work_small, f"500 nodes: {work_small} lines, 2000 nodes: {work_large} lines"


def test_a_reverse_ordered_chain_is_refused(tmp_path):
    # TFLite runs operators in the listed order: on the CPU path, reversed ops read tensors
    # nothing has written yet (XNNPACK happens to reorder its own partitions).
    path = _chain_model(tmp_path / "reversed.tflite", 20_000, reverse=True)
    with pytest.raises(
        edgeinf.ModelFileError, match=r"reversed\.tflite: subgraph 0: operator 0 \(ADD\) reads tensor 20000 "
    ):
        edgeinf.check(path)
