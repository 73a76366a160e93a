"""Graph arithmetic for the report: delegate partitions, activation memory, MACs."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..formats.tflite import Subgraph

_NOT_READY = -1
_ALWAYS_READY = -2


def partition(
    inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]], on_delegate: Sequence[bool]
) -> list[tuple[bool, list[int]]]:
    """Split nodes into subsets the way TFLite does before handing them to a delegate.

    Same rule as TFLite's ``PartitionGraphIntoIndependentNodeSubsets`` (greedy): each
    subset takes, sweep after sweep in node order, every ready node of the subset's kind
    (the kind of its first ready node); a tensor is ready once its producer is placed.

    Args:
        inputs, outputs: tensor indices per node (-1 = absent).
        on_delegate: per node, whether the delegate takes it.

    Returns:
        ``(is_delegate_subset, node indices)`` in execution order.
    """
    n = len(on_delegate)
    epoch: dict[int, int] = {}
    for outs in outputs:
        for t in outs:
            if t >= 0:
                epoch[t] = _NOT_READY
    placed = [False] * n
    subsets: list[tuple[bool, list[int]]] = []
    while not all(placed):
        kind: bool | None = None
        members: list[int] = []
        current = len(subsets)
        progress = True
        while progress:
            progress = False
            for i in range(n):
                if placed[i] or any(t >= 0 and epoch.get(t, _ALWAYS_READY) == _NOT_READY for t in inputs[i]):
                    continue
                if kind is None:
                    kind = on_delegate[i]
                if on_delegate[i] != kind:
                    continue
                placed[i] = True
                members.append(i)
                for t in outputs[i]:
                    if t >= 0:
                        epoch[t] = current
                progress = True
        if not members:  # a cycle or a dangling input: leave the rest as one CPU subset
            subsets.append((False, [i for i in range(n) if not placed[i]]))
            break
        subsets.append((bool(kind), members))
    return subsets


def transition_bytes(sg: Subgraph, subsets: list[tuple[bool, list[int]]]) -> int:
    """Bytes of activation tensors produced in one subset and read in another of the other kind."""
    where = {}
    for k, (_, members) in enumerate(subsets):
        for i in members:
            for t in sg.operators[i].outputs:
                if t >= 0:
                    where[t] = k
    total = 0
    seen = set()
    for k, (kind, members) in enumerate(subsets):
        for i in members:
            for t in sg.operators[i].inputs:
                src = where.get(t)
                if t >= 0 and src is not None and subsets[src][0] != kind and (t, k) not in seen:
                    seen.add((t, k))
                    total += sg.tensors[t].nbytes
    return total


def activation_memory(sg: Subgraph) -> tuple[int, int]:
    """(sum of all activation tensors, peak of those alive at once in execution order).

    The peak is a lower bound of what an arena needs (allocators add alignment and
    fragmentation); the sum is what no reuse at all would take.
    """
    constant = {t.index for t in sg.tensors if t.is_constant}
    last_use: dict[int, int] = {}
    for j, op in enumerate(sg.operators):
        for t in op.inputs:
            if t >= 0:
                last_use[t] = j
    for t in sg.outputs:
        last_use[t] = len(sg.operators)
    live = {t: sg.tensors[t].nbytes for t in sg.inputs if t not in constant}
    current = sum(live.values())
    peak = current
    total = current
    for j, op in enumerate(sg.operators):
        for t in op.outputs:
            if t >= 0 and t not in constant and t not in live:
                live[t] = sg.tensors[t].nbytes
                current += live[t]
                total += live[t]
        peak = max(peak, current)
        for t in list(live):
            if last_use.get(t, -1) <= j:
                current -= live.pop(t)
    return total, peak


def macs(sg: Subgraph) -> int:
    """Multiply-accumulates of the convolution and matrix ops (elementwise ops not counted)."""
    total = 0
    t = sg.tensors
    for op in sg.operators:
        name = op.opcode.name
        ins = [i for i in op.inputs]
        if not op.outputs or op.outputs[0] < 0:
            continue
        out = t[op.outputs[0]]
        if name == "CONV_2D" and len(ins) > 1 and ins[1] >= 0:
            w = t[ins[1]].shape  # OHWI
            if len(w) == 4:
                total += out.num_elements * w[1] * w[2] * w[3]
        elif name == "DEPTHWISE_CONV_2D" and len(ins) > 1 and ins[1] >= 0:
            w = t[ins[1]].shape  # 1HWO
            if len(w) == 4:
                total += out.num_elements * w[1] * w[2]
        elif name == "FULLY_CONNECTED" and len(ins) > 1 and ins[1] >= 0:
            w = t[ins[1]].shape  # [out, in]
            if len(w) == 2:
                total += out.num_elements * w[1]
        elif name == "TRANSPOSE_CONV" and len(ins) > 2 and ins[1] >= 0 and ins[2] >= 0:
            w = t[ins[1]].shape  # OHWI
            if len(w) == 4:
                total += t[ins[2]].num_elements * w[0] * w[1] * w[2]
        elif name == "BATCH_MATMUL" and len(ins) > 1:
            a = t[ins[0]].shape
            if a:
                adj_x = bool(op.options.get("adj_x", False))
                k = a[-2] if adj_x else a[-1]
                total += out.num_elements * k
        elif name == "CONV_3D" and len(ins) > 1 and ins[1] >= 0:
            w = t[ins[1]].shape  # DHWIO
            if len(w) == 5:
                total += out.num_elements * math.prod(w[:4])
    return total
