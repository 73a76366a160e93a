"""`CompatReport`: the result of a check, and its text and JSON views.

The report is data; ``to_text()``, ``to_json()`` and the CLI's exit code are views of
it. The JSON layout is versioned (``"schema": "edgeinf.compat/1"``) and documented in
docs/compat.md; fields are only ever added within a schema version.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA = "edgeinf.compat/1"
STATUSES = ("delegated", "cpu", "unsupported", "unknown")


@dataclass(frozen=True)
class NodeStatus:
    """How one backend handles one node.

    Attributes:
        status: ``delegated`` (runs on the backend's delegate: XNNPACK, Vulkan),
            ``cpu`` (runs on the runtime's own CPU kernels; for a delegate, a fallback),
            ``unsupported`` (the runtime refuses or fails on it), ``unknown`` (no table says).
        reason: why, in one sentence (empty when it simply runs).
        suggestion: what to do about it, if anything.
        source: which table or rule decided (e.g. ``probe:xnnpack ai_edge_litert 2.3.0``).
    """

    status: str
    reason: str = ""
    suggestion: str = ""
    source: str = ""


@dataclass(frozen=True)
class NodeReport:
    index: int
    subgraph: int
    name: str
    key: str  # e.g. tflite:CONV_2D, tflite:CUSTOM:MyOp, ncnn:Convolution, onnx:Conv
    op: str
    version: int | None
    status: dict[str, NodeStatus] = field(default_factory=dict)


@dataclass(frozen=True)
class BackendVerdict:
    """The verdict for one backend.

    Attributes:
        verdict: ``YES`` (every node runs, all on the fast path), ``PARTIAL`` (it runs, but
            some nodes fall back to CPU kernels or are unknown), ``NO`` (it will not run).
        target: the runtime and version checked, e.g. ``tflite_runtime 2.14.0``.
        delegate: the delegate considered (``xnnpack``, ``vulkan``) or None.
        partitions: node indices of each delegate partition (subgraph 0), in execution order.
        transitions: switches between the CPU and the delegate during one run.
        transition_bytes: bytes of the tensors crossing those switches.
        via: for ONNX input, the converter the verdict assumes (``pnnx``, ``onnx2tf``).
        advice: performance warnings, each with what to do (e.g. an int8 model that XNNPACK
            splits around CPU ops and that will run slower than its float original).
    """

    backend: str
    target: str
    verdict: str
    runnable: bool
    delegate: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    partitions: tuple[tuple[int, ...], ...] = ()
    transitions: int = 0
    transition_bytes: int = 0
    blockers: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    via: str | None = None
    note: str | None = None
    advice: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompatReport:
    """Everything the check found, per node and per backend.

    >>> report = edgeinf.check("face_detection_short_range.tflite")   # doctest: +SKIP
    >>> report.verdict("tflite"), report.runnable("tflite")             # doctest: +SKIP
    ('YES', True)
    """

    path: str
    format: str
    file_bytes: int
    nodes: tuple[NodeReport, ...]
    backends: dict[str, BackendVerdict]
    weight_bytes: int = 0
    activation_bytes: int | None = None
    activation_peak_bytes: int | None = None
    macs: int | None = None
    subgraphs: int = 1
    custom_ops: tuple[str, ...] = ()
    flex_ops: tuple[str, ...] = ()
    control_flow: tuple[str, ...] = ()
    dynamic_inputs: tuple[dict, ...] = ()
    sparse_tensors: int = 0
    dtypes: dict[str, int] = field(default_factory=dict)
    unsupported_dtypes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    min_runtime_version: str | None = None
    notes: tuple[str, ...] = ()

    # -- questions -----------------------------------------------------------------
    def _backend(self, backend: str) -> BackendVerdict:
        try:
            return self.backends[backend]
        except KeyError:
            raise KeyError(f"this report has no backend {backend!r}; it checked {sorted(self.backends)}") from None

    def verdict(self, backend: str) -> str:
        """``"YES"``, ``"PARTIAL"`` or ``"NO"`` for a backend this report checked."""
        return self._backend(backend).verdict

    def runnable(self, backend: str) -> bool:
        """True when the backend will load, allocate and invoke the model."""
        return self._backend(backend).runnable

    def problems(self, backend: str) -> list[tuple[NodeReport, NodeStatus]]:
        """Every node the backend cannot run, with why."""
        return [
            (n, n.status[backend])
            for n in self.nodes
            if backend in n.status and n.status[backend].status == "unsupported"
        ]

    def op_summary(self) -> list[dict[str, Any]]:
        """Nodes grouped by (key, version) with a count and the status per backend."""
        groups: dict[tuple, dict[str, Any]] = {}
        for n in self.nodes:
            k = (n.key, n.version)
            g = groups.setdefault(k, {"key": n.key, "version": n.version, "count": 0, "status": {}})
            g["count"] += 1
            for b, st in n.status.items():
                g["status"].setdefault(b, Counter())[st.status] += 1
        out = []
        for g in groups.values():
            g["status"] = {b: (next(iter(c)) if len(c) == 1 else dict(c)) for b, c in g["status"].items()}
            out.append(g)
        return out

    # -- views ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The documented JSON structure (schema ``edgeinf.compat/1``)."""
        return {
            "schema": SCHEMA,
            "model": {
                "path": self.path,
                "format": self.format,
                "file_bytes": self.file_bytes,
                "weight_bytes": self.weight_bytes,
                "activation_bytes": self.activation_bytes,
                "activation_peak_bytes": self.activation_peak_bytes,
                "macs": self.macs,
                "subgraphs": self.subgraphs,
                "nodes": len(self.nodes),
                "min_runtime_version": self.min_runtime_version,
            },
            "backends": {
                name: {
                    "target": b.target,
                    "verdict": b.verdict,
                    "runnable": b.runnable,
                    "delegate": b.delegate,
                    "via": b.via,
                    "counts": dict(b.counts),
                    "partitions": [list(p) for p in b.partitions],
                    "transitions": b.transitions,
                    "transition_bytes": b.transition_bytes,
                    "blockers": list(b.blockers),
                    "tables": list(b.tables),
                    "note": b.note,
                    "advice": list(b.advice),
                }
                for name, b in self.backends.items()
            },
            "nodes": [
                {
                    "index": n.index,
                    "subgraph": n.subgraph,
                    "name": n.name,
                    "key": n.key,
                    "op": n.op,
                    "version": n.version,
                    "status": {b: asdict(s) for b, s in n.status.items()},
                }
                for n in self.nodes
            ],
            "ops": self.op_summary(),
            "custom_ops": list(self.custom_ops),
            "flex_ops": list(self.flex_ops),
            "control_flow": list(self.control_flow),
            "dynamic_inputs": [dict(d) for d in self.dynamic_inputs],
            "sparse_tensors": self.sparse_tensors,
            "dtypes": dict(self.dtypes),
            "unsupported_dtypes": {b: list(v) for b, v in self.unsupported_dtypes.items()},
            "notes": list(self.notes),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_text(self) -> str:
        """A readable report: verdicts, an op table, every problem, and notes."""
        lines = [
            f"{self.path}  ({self.format}, {_bytes(self.file_bytes)}, {len(self.nodes)} nodes, {self.subgraphs} subgraph(s))"
        ]
        facts = [f"weights {_bytes(self.weight_bytes)}"]
        if self.activation_peak_bytes is not None:
            facts.append(
                f"activations ~{_bytes(self.activation_peak_bytes)} peak ({_bytes(self.activation_bytes or 0)} if none reused)"
            )
        if self.macs is not None:
            facts.append(f"{self.macs / 1e6:.1f} M MACs")
        if self.min_runtime_version:
            facts.append(f"min_runtime_version {self.min_runtime_version}")
        lines.append("  " + ", ".join(facts))
        lines.append("")
        for name, verdict in self.backends.items():
            via = f" via {verdict.via}" if verdict.via else ""
            dl = ""
            if verdict.delegate and verdict.runnable:
                dl = (
                    f", {verdict.delegate}: {len(verdict.partitions)} partition(s),"
                    f" {verdict.transitions} CPU/delegate transition(s)"
                )
            counts = ", ".join(f"{v} {k}" for k, v in verdict.counts.items() if v)
            lines.append(f"{name:<8} {verdict.verdict:<8} on {verdict.target}{via}{dl}  [{counts}]")
            if verdict.note:
                lines.append(f"         note: {verdict.note}")
            for advice in verdict.advice:
                lines.append(f"         warning: {advice}")
            if verdict.blockers:
                lines.append(f"         {len(verdict.blockers)} node(s) cannot run: see the findings below")
        lines.append("")
        summary = self.op_summary()
        backends = list(self.backends)
        width = max([len(_op_label(g)) for g in summary] + [10])
        lines.append(f"{'op':<{width}}  {'count':>5}  " + "  ".join(f"{b:<12}" for b in backends))
        for g in sorted(summary, key=lambda g: -g["count"]):
            cells = []
            for b in backends:
                st = g["status"].get(b, "-")
                cells.append(f"{st if isinstance(st, str) else ','.join(f'{k}:{v}' for k, v in st.items()):<12}")
            lines.append(f"{_op_label(g):<{width}}  {g['count']:>5}  " + "  ".join(cells))
        shown = set()
        problem_lines = []
        for n in self.nodes:
            for b, st in n.status.items():
                if st.status not in ("unsupported", "unknown") and not (
                    st.status == "cpu" and self.backends[b].delegate
                ):
                    continue
                key = (b, n.key, n.version, st.status, st.reason)
                if key in shown:
                    continue
                shown.add(key)
                same = sum(
                    1
                    for m in self.nodes
                    if m.key == n.key
                    and m.version == n.version
                    and b in m.status
                    and m.status[b].status == st.status
                    and m.status[b].reason == st.reason
                )
                where = f"node {n.index}" + (f" (+{same - 1} more)" if same > 1 else "")
                problem_lines.append(f"  [{b}] {st.status:<11} {n.key} v{n.version} at {where}: {st.reason}")
                if st.suggestion:
                    problem_lines.append(f"{'':16}-> {st.suggestion}")
        if problem_lines:
            lines += ["", "findings:"] + problem_lines
        extra = []
        if self.custom_ops:
            extra.append(f"custom ops: {', '.join(self.custom_ops)}")
        if self.flex_ops:
            extra.append(f"Flex (Select TF) ops: {', '.join(self.flex_ops)}")
        if self.control_flow:
            extra.append(f"control flow: {', '.join(self.control_flow)}")
        for d in self.dynamic_inputs:
            extra.append(f"dynamic input {d['name']}: {d['shape']}")
        if self.sparse_tensors:
            extra.append(f"sparse tensors: {self.sparse_tensors}")
        for b, dts in self.unsupported_dtypes.items():
            if dts:
                extra.append(f"[{b}] dtypes it lacks: {', '.join(dts)}")
        extra += list(self.notes)
        if extra:
            lines += ["", "notes:"] + [f"  {e}" for e in extra]
        return "\n".join(lines)


def _op_label(g: dict) -> str:
    return g["key"] + (f" v{g['version']}" if g["version"] is not None else "")


def _bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"
