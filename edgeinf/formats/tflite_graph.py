"""Structure rules every runtime relies on, checked on a read .tflite before any runtime sees it.

TFLite runs a subgraph's operators in the order the file lists them and trusts the
graph: an operator that writes one of the graph's inputs or a constant, two operators
writing one tensor, an operator reading a tensor that a later operator writes (a cycle
is such a case), or an output nothing writes make tflite-runtime 2.14 crash or compute
garbage without a word; LiteRT rejects only some of them. These rules hold for every
model a converter writes, so breaking one is a corrupt file.
"""

from __future__ import annotations

from ..errors import ModelFileError


def check_graph(model, what: str) -> None:
    """Check each subgraph's data flow (one pass over the operators).

    Raises:
        ModelFileError: naming the subgraph, the operator, the tensor and the rule broken.
    """
    for sg in model.subgraphs:
        _check_subgraph(sg, what)


def _describe(sg, t: int) -> str:
    return f"tensor {t} {sg.tensors[t].name!r}"


def _check_subgraph(sg, what: str) -> None:
    where = f"{what}: subgraph {sg.index}"
    tensors = sg.tensors
    graph_inputs = set(sg.inputs)
    writer: dict[int, int] = {}  # tensor -> the operator that writes it
    for op in sg.operators:
        for t in op.outputs:
            if t < 0:
                continue
            name = f"operator {op.index} ({op.opcode.name})"
            if t in graph_inputs:
                raise ModelFileError(f"{where}: {name} writes {_describe(sg, t)}, one of the graph's inputs")
            if tensors[t].is_constant:
                raise ModelFileError(
                    f"{where}: {name} writes {_describe(sg, t)}, a constant ({tensors[t].data_size} bytes in the file)"
                )
            if t in writer:
                first = sg.operators[writer[t]]
                other = "itself" if first.index == op.index else f"operator {first.index} ({first.opcode.name})"
                raise ModelFileError(f"{where}: {name} writes {_describe(sg, t)}, which {other} writes too")
            writer[t] = op.index

    def available(t: int, before: int) -> bool:
        """Whether tensor t holds data when operator `before` runs."""
        tensor = tensors[t]
        if t in graph_inputs or tensor.is_constant or tensor.is_variable:
            return True
        if t in writer:
            return writer[t] < before
        return tensor.nbytes == 0  # an empty tensor has nothing to read

    for op in sg.operators:
        for t in op.inputs:
            if t < 0 or available(t, op.index):
                continue
            name = f"operator {op.index} ({op.opcode.name})"
            if t in writer:
                later = sg.operators[writer[t]]
                raise ModelFileError(
                    f"{where}: {name} reads {_describe(sg, t)} before operator {later.index} ({later.opcode.name}) "
                    "writes it: operators must be listed in execution order, and a cycle has none"
                )
            raise ModelFileError(
                f"{where}: {name} reads {_describe(sg, t)}, which is no graph input, constant or variable "
                "and which no operator writes"
            )
    for t in sg.outputs:
        if not available(t, len(sg.operators)):
            raise ModelFileError(f"{where}: graph output {_describe(sg, t)} is written by no operator")
