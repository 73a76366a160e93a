"""Split a model into segments the engine runs and segments LiteRT runs.

The main graph's operators, in execution order, are grouped into runs of native operators
(`node_support`) and runs of the others. A native run that only moves or converts data
(RESHAPE, QUANTIZE, CONCATENATION, ...) is not worth leaving LiteRT for: it joins the
LiteRT segments around it. Each LiteRT segment becomes a model of its own, cut from the
original with edgeinf's writer: the same tensors, buffers and other subgraphs, the main
graph's operators restricted to the segment, and its inputs and outputs the tensors that
cross the segment's edge.

Stateful operators (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, CALL_ONCE) keep their
variables inside one LiteRT interpreter, so they must all fall in one LiteRT segment, and
no resource or variant tensor may cross a segment's edge; otherwise `partition` refuses
and the whole model runs on LiteRT.

>>> parts = partition(model, node_support(model))       # doctest: +SKIP
>>> [(p.native, len(p.operators)) for p in parts]       # doctest: +SKIP
[(True, 12), (False, 1), (True, 30)]
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnsupportedOperatorError
from ..formats.tflite import TfliteModel
from .plan import NodeSupport

# Operators that move or convert data only: a native segment of nothing else stays on LiteRT.
DATA_MOVEMENT = frozenset(
    {"RESHAPE", "SQUEEZE", "TRANSPOSE", "SPLIT", "SPLIT_V", "STRIDED_SLICE", "CONCATENATION", "PAD", "PADV2",
     "RESIZE_NEAREST_NEIGHBOR", "QUANTIZE", "DEQUANTIZE"}
)  # fmt: skip
STATEFUL = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"})
_NUMERIC = frozenset({"FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16", "INT32", "INT64", "BOOL", "FLOAT64"})


@dataclass(frozen=True)
class Segment:
    """Operators (indices, in execution order) that one runtime runs in one go; ``inputs``
    are the tensors it reads that it does not produce (constants aside), ``outputs`` the
    tensors it produces that a later segment reads or the model gives."""

    native: bool
    operators: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def partition(model: TfliteModel, support: list[NodeSupport]) -> list[Segment]:
    """The model's segments, in execution order.

    Raises:
        UnsupportedOperatorError: the model cannot be split (stateful operators on both
            sides of a native segment, a resource tensor crossing segments, no native
            segment worth running): run it whole on LiteRT.
    """
    sg = model.main
    ops = sg.operators
    runs: list[tuple[bool, list[int]]] = []
    for node in support:
        if runs and runs[-1][0] == node.native:
            runs[-1][1].append(node.index)
        else:
            runs.append((node.native, [node.index]))
    # A native run of data movement alone goes to LiteRT; neighbours of one kind merge.
    merged: list[tuple[bool, list[int]]] = []
    for native, indices in runs:
        if native and all(ops[i].opcode.name in DATA_MOVEMENT for i in indices):
            native = False
        if merged and merged[-1][0] == native:
            merged[-1][1].extend(indices)
        else:
            merged.append((native, list(indices)))
    if not any(native for native, _ in merged):
        raise UnsupportedOperatorError("no part of the model that the engine runs is worth a segment of its own")
    if all(native for native, _ in merged):
        raise UnsupportedOperatorError("the engine runs every operator, but not the model as a whole")
    stateful = [k for k, (_, indices) in enumerate(merged) if any(ops[i].opcode.name in STATEFUL for i in indices)]
    if len(stateful) > 1:
        raise UnsupportedOperatorError(
            "stateful operators (variables) lie in LiteRT segments on both sides of a native one"
        )
    produced_by: dict[int, int] = {}
    for k, (_, indices) in enumerate(merged):
        for i in indices:
            for t in ops[i].outputs:
                if t >= 0:
                    produced_by[t] = k
    read_by: dict[int, set[int]] = {}
    for k, (_, indices) in enumerate(merged):
        for i in indices:
            for t in ops[i].inputs:
                if t >= 0 and t in produced_by:
                    read_by.setdefault(t, set()).add(k)
    graph_inputs, graph_outputs = set(sg.inputs), set(sg.outputs)
    segments = []
    for k, (native, indices) in enumerate(merged):
        reads: list[int] = []
        for i in indices:
            for t in ops[i].inputs:
                external = t in graph_inputs or (t in produced_by and produced_by[t] != k)
                if t >= 0 and external and t not in reads:
                    reads.append(t)
        writes = [
            t
            for i in indices
            for t in ops[i].outputs
            if t >= 0 and (t in graph_outputs or any(r != k for r in read_by.get(t, ())))
        ]
        for t in reads + writes:
            if sg.tensors[t].dtype not in _NUMERIC:
                raise UnsupportedOperatorError(
                    f"tensor {t} {sg.tensors[t].name!r} ({sg.tensors[t].dtype}) would cross between runtimes"
                )
        segments.append(Segment(native, tuple(indices), tuple(reads), tuple(dict.fromkeys(writes))))
    return segments


def cut_model(data: bytes, segment: Segment) -> bytes:
    """The model ``data`` with its main graph restricted to ``segment``'s operators,
    inputs and outputs (tensors, buffers and other subgraphs unchanged; the signatures,
    which name the whole model's inputs, dropped). Buffers no operator of any subgraph
    of the cut model reads are emptied, so the cut holds only its own weights."""
    from ..formats.tflite_writer import pack, unpack

    model = unpack(data)
    main = model.subgraphs[0]
    main.operators = [main.operators[i] for i in segment.operators]
    main.inputs = list(segment.inputs)
    main.outputs = list(segment.outputs)
    model.signatureDefs = []
    used_buffers = {0} | {m.buffer for m in model.metadata or []}
    for sg in model.subgraphs:
        used = {t for op in sg.operators for t in (*list(op.inputs), *list(op.outputs)) if t >= 0}
        used |= set(sg.inputs) | set(sg.outputs)
        used_buffers |= {sg.tensors[t].buffer for t in used}
    for i, buffer in enumerate(model.buffers):
        if i not in used_buffers:
            buffer.data = None
    return pack(model)
