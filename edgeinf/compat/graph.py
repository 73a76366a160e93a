"""Graph arithmetic for the report: delegate partitions, activation memory, MACs."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from ..formats.tflite import Subgraph


def partition(
    inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]], on_delegate: Sequence[bool]
) -> list[tuple[bool, list[int]]]:
    """Split nodes into subsets the way TFLite does before handing them to a delegate.

    Same result as TFLite's ``PartitionGraphIntoIndependentNodeSubsets`` (greedy): each
    subset takes, sweep after sweep in node order, every ready node of the subset's kind
    (the kind of its first ready node); a tensor is ready once its producer is placed.

    The sweeps are simulated with ready queues instead of rescanning every node, so the
    cost is O(E log N) for E tensor references, whatever order the nodes are listed in.

    Args:
        inputs, outputs: tensor indices per node (-1 = absent).
        on_delegate: per node, whether the delegate takes it.

    Returns:
        ``(is_delegate_subset, node indices)`` in execution order.
    """
    n = len(on_delegate)
    produced: set[int] = set()
    for i in range(n):
        produced.update(t for t in outputs[i] if t >= 0)
    # waiting[i]: distinct produced tensors node i still waits for; consumers[t]: who reads t
    waiting = [0] * n
    consumers: dict[int, list[int]] = {}
    for i in range(n):
        for t in set(inputs[i]):
            if t in produced:
                waiting[i] += 1
                consumers.setdefault(t, []).append(i)
    ready: dict[bool, list[int]] = {True: [], False: []}  # ready, unplaced nodes by kind (heaps)
    for i in range(n):
        if waiting[i] == 0:
            ready[bool(on_delegate[i])].append(i)
    placed = 0
    subsets: list[tuple[bool, list[int]]] = []
    while placed < n:
        if not ready[True] and not ready[False]:  # a cycle or a dangling input: the rest is one CPU subset
            done = {i for _, members in subsets for i in members}
            subsets.append((False, [i for i in range(n) if i not in done]))
            break
        # the subset's kind is that of the first ready node in node order
        kind = not ready[False] or (bool(ready[True]) and ready[True][0] < ready[False][0])
        this_sweep = ready[kind]
        next_sweep: list[int] = []
        ready[kind] = []
        members: list[int] = []
        while this_sweep:
            i = heapq.heappop(this_sweep)
            members.append(i)
            for t in outputs[i]:
                if t in produced:
                    produced.discard(t)  # the first producer placed makes t ready
                    for j in consumers.get(t, ()):
                        waiting[j] -= 1
                        if waiting[j] == 0:
                            if bool(on_delegate[j]) != kind:
                                heapq.heappush(ready[not kind], j)
                            else:  # later in this sweep if after i, else in the next sweep
                                heapq.heappush(this_sweep if j > i else next_sweep, j)
            if not this_sweep:
                this_sweep, next_sweep = next_sweep, []
        placed += len(members)
        subsets.append((kind, members))
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
    freed_after: dict[int, list[int]] = {}  # op index -> tensors whose last reader it is
    live: dict[int, int] = {}
    current = 0

    def allocate(t: int, at: int) -> None:
        nonlocal current
        live[t] = sg.tensors[t].nbytes
        current += live[t]
        freed_after.setdefault(max(last_use.get(t, -1), at), []).append(t)

    for t in sg.inputs:
        if t not in constant and t not in live:
            allocate(t, 0)
    peak = total = current
    for j, op in enumerate(sg.operators):
        for t in op.outputs:
            if t >= 0 and t not in constant and t not in live:
                allocate(t, j)
                total += live[t]
        peak = max(peak, current)
        for t in freed_after.pop(j, ()):
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
