"""What a TFLite runtime really delegated, and the check's prediction held against it.

LiteRT keeps every original node in its op list and appends one ``DELEGATE`` node per
XNNPACK kernel it created. A kernel's nodes are the ones reached walking back from the
DELEGATE node's outputs through their producers, stopping at the DELEGATE node's inputs.
`edgeinf.load` reads this after ``allocate_tensors`` and, where the check predicted
something else, logs both sides and corrects the report it keeps (``model.report``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Iterable, Mapping

from .graph import partition, transition_bytes
from .report import CompatReport, NodeStatus

log = logging.getLogger(__name__)


def delegate_partitions(ops: Iterable[Mapping]) -> tuple[list[list[int]], list[int]]:
    """XNNPACK partitions from an interpreter's op list (``Interpreter._get_ops_details()``).

    Args:
        ops: dicts with ``index``, ``op_name``, ``inputs`` and ``outputs`` (tensor indices).

    Returns:
        (each delegate kernel's original node indices, sorted, in the order the kernels were
        created; the original nodes left on the CPU, sorted).
    """
    ops = list(ops)
    originals = [o for o in ops if o["op_name"] != "DELEGATE"]
    producer = {int(t): int(o["index"]) for o in originals for t in o["outputs"]}
    inputs_of = {int(o["index"]): [int(t) for t in o["inputs"]] for o in originals}
    partitions = []
    for kernel in (o for o in ops if o["op_name"] == "DELEGATE"):
        stop = {int(t) for t in kernel["inputs"]}
        seen: set[int] = set()
        stack = [int(t) for t in kernel["outputs"]]
        while stack:
            t = stack.pop()
            if t in stop or t not in producer or producer[t] in seen:
                continue
            seen.add(producer[t])
            stack.extend(inputs_of[producer[t]])
        partitions.append(sorted(seen))
    delegated = {n for p in partitions for n in p}
    return partitions, sorted(int(o["index"]) for o in originals if int(o["index"]) not in delegated)


@dataclasses.dataclass(frozen=True)
class Disagreement:
    """Where the prediction and the runtime differ (node indices of subgraph 0)."""

    predicted: tuple[tuple[int, ...], ...]
    actual: tuple[tuple[int, ...], ...]
    taken_not_predicted: tuple[int, ...]
    predicted_not_taken: tuple[int, ...]

    def describe(self, op_names: Mapping[int, str]) -> str:
        def nodes(indices: tuple[int, ...]) -> str:
            shown = ", ".join(f"{i} {op_names.get(i, '?')}" for i in indices[:8])
            return shown + (f" (+{len(indices) - 8} more)" if len(indices) > 8 else "")

        parts = [f"predicted {len(self.predicted)} XNNPACK partition(s), the runtime made {len(self.actual)}"]
        if self.predicted_not_taken:
            parts.append(f"left on the CPU against the prediction: {nodes(self.predicted_not_taken)}")
        if self.taken_not_predicted:
            parts.append(f"delegated against the prediction: {nodes(self.taken_not_predicted)}")
        return "; ".join(parts)


def compare(predicted: Iterable[Iterable[int]], actual: Iterable[Iterable[int]]) -> Disagreement | None:
    """None when both sides have the same partitions (as node sets), else what differs."""
    said_parts = tuple(tuple(sorted(p)) for p in predicted)
    did_parts = tuple(tuple(sorted(p)) for p in actual)
    if sorted(said_parts) == sorted(did_parts):
        return None
    said = {n for p in said_parts for n in p}
    did = {n for p in did_parts for n in p}
    return Disagreement(said_parts, did_parts, tuple(sorted(did - said)), tuple(sorted(said - did)))


def reconcile(report: CompatReport, actual: list[list[int]], runtime: str, graph) -> CompatReport:
    """The report with its TFLite delegation replaced by what the runtime did.

    Logs a warning with both sides when they differ; returns the report unchanged when
    they agree.

    Args:
        report: a check of a .tflite model (``backends["tflite"]`` present).
        actual: the runtime's delegate partitions (`delegate_partitions`).
        runtime: the runtime's label, e.g. ``ai_edge_litert 2.3.0``.
        graph: the model's main subgraph (``TfliteModel.main``), to recount transitions.
    """
    verdict = report.backends.get("tflite")
    if verdict is None or verdict.delegate != "xnnpack":
        return report
    diff = compare(verdict.partitions, actual)
    if diff is None:
        return report
    main_nodes = {n.index: n for n in report.nodes if n.subgraph == 0}
    log.warning(
        "%s: the check against %s disagrees with %s: %s",
        report.path,
        verdict.target,
        runtime,
        diff.describe({i: n.op for i, n in main_nodes.items()}),
    )
    delegated = {n for p in actual for n in p}
    source = f"runtime:{runtime}"
    nodes = []
    for n in report.nodes:
        st = n.status.get("tflite")
        if n.subgraph == 0 and st is not None and st.status in ("delegated", "cpu", "unknown"):
            if n.index in delegated and st.status != "delegated":
                st = NodeStatus("delegated", f"{runtime} delegated it (the tables said {st.status})", "", source)
            elif n.index not in delegated and st.status != "cpu":
                st = NodeStatus(
                    "cpu", f"{runtime} left it on the CPU (the tables said {st.status})", st.suggestion, source
                )
            n = dataclasses.replace(n, status={**n.status, "tflite": st})
        nodes.append(n)
    subsets = partition(
        [op.inputs for op in graph.operators],
        [op.outputs for op in graph.operators],
        [op.index in delegated for op in graph.operators],
    )
    seen = Counter(n.status["tflite"].status for n in nodes if "tflite" in n.status)
    counts = {k: seen.get(k, 0) for k in verdict.counts}
    corrected = dataclasses.replace(
        verdict,
        partitions=tuple(tuple(sorted(p)) for p in actual),
        transitions=max(0, len(subsets) - 1) if actual else 0,
        transition_bytes=transition_bytes(graph, subsets) if actual else 0,
        counts=counts,
        verdict=verdict_for(verdict.runnable, counts, len(actual)),
        note=((verdict.note + "; ") if verdict.note else "") + f"delegation as observed on {runtime} at load",
    )
    return dataclasses.replace(report, nodes=tuple(nodes), backends={**report.backends, "tflite": corrected})


def verdict_for(runnable: bool, counts: Mapping[str, int], partitions: int) -> str:
    """``NO`` when it cannot run, ``YES`` when every node is delegated in at most one
    partition, else ``PARTIAL``."""
    if not runnable:
        return "NO"
    if counts.get("cpu", 0) == 0 and counts.get("unknown", 0) == 0 and partitions <= 1:
        return "YES"
    return "PARTIAL"
