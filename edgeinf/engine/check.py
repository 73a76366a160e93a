"""Which runtime runs each operator of a model loaded with ``backend="edgeinf"``, and why:
the report of ``edgeinf check --backend edgeinf MODEL``.

The verdict is the load's own decision, made the same way (`node_support`, `plan_model`,
`partition`) without building anything: ``NATIVE`` (the whole model on the engine),
``SPLIT`` (native segments on the engine, the rest on LiteRT) or ``LITERT`` (the whole
model on LiteRT, with why it cannot be split).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from ..errors import ModelFileError, UnsupportedOperatorError
from ..formats.tflite import TfliteModel
from .partition import partition
from .plan import node_support, plan_model

SCHEMA = "edgeinf.engine-check/1"


@dataclass(frozen=True)
class NodePlacement:
    index: int
    op: str
    runtime: str  # "edgeinf" or "tflite"
    native: bool  # the engine runs this operator (it may still go to LiteRT with its segment)
    reason: str = ""  # why LiteRT runs it
    how: str = ""  # how the engine runs it, when folded into others


@dataclass(frozen=True)
class EngineCheck:
    path: str
    verdict: str  # NATIVE, SPLIT or LITERT
    nodes: tuple[NodePlacement, ...]
    segments: tuple[dict, ...] = ()
    not_split: str = ""  # for LITERT: why the model is not split

    @property
    def native_count(self) -> int:
        return sum(n.runtime == "edgeinf" for n in self.nodes)

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "path": self.path,
            "backend": "edgeinf",
            "verdict": self.verdict,
            "operators": len(self.nodes),
            "on_engine": self.native_count,
            "on_litert": len(self.nodes) - self.native_count,
            "segments": list(self.segments),
            "not_split": self.not_split or None,
            "nodes": [asdict(n) for n in self.nodes],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        total, native = len(self.nodes), self.native_count
        if self.verdict == "NATIVE":
            head = f"NATIVE: all {total} operators run on the int8 engine"
        elif self.verdict == "SPLIT":
            head = (
                f"SPLIT: {native} of {total} operators run on the int8 engine, {total - native} on LiteRT "
                f"({len(self.segments)} segments)"
            )
        else:
            head = f"LITERT: the whole model runs on LiteRT ({self.not_split})"
        width = max((len(n.op) for n in self.nodes), default=2)
        lines = [f"{self.path} with backend edgeinf: {head}", f"  {'node':>4}  {'op':<{width}}  {'runs on':<7}  why"]
        for n in self.nodes:
            why = n.reason if n.runtime == "tflite" else n.how
            lines.append(f"  {n.index:>4}  {n.op:<{width}}  {n.runtime:<7}  {why}".rstrip())
        return "\n".join(lines)


def check_engine(model: TfliteModel, path: str = "") -> EngineCheck:
    """Where each operator of ``model`` runs with ``backend="edgeinf"``, and why."""
    support = node_support(model)
    reason = ""
    if all(n.native for n in support):
        try:
            plan_model(model)
        except (UnsupportedOperatorError, ModelFileError) as exc:
            reason = str(exc)
        else:
            nodes = tuple(NodePlacement(n.index, n.op, "edgeinf", True, how=n.how) for n in support)
            every = {"runtime": "edgeinf", "operators": [n.index for n in nodes]}
            return EngineCheck(path, "NATIVE", nodes, (every,))
    try:
        segments = partition(model, support)
    except UnsupportedOperatorError as exc:
        reason = f"{reason}; not split: {exc}" if reason else str(exc)
        nodes = tuple(
            NodePlacement(n.index, n.op, "tflite", n.native, n.reason or "the whole model runs on LiteRT", n.how)
            for n in support
        )
        return EngineCheck(path, "LITERT", nodes, not_split=reason)
    on_engine = {i for s in segments if s.native for i in s.operators}
    nodes = tuple(
        NodePlacement(n.index, n.op, "edgeinf", True, how=n.how)
        if n.index in on_engine
        else NodePlacement(
            n.index, n.op, "tflite", n.native, n.reason or "native, but in a LiteRT segment (data movement only)"
        )
        for n in support
    )
    summary = tuple({"runtime": "edgeinf" if s.native else "tflite", "operators": list(s.operators)} for s in segments)
    return EngineCheck(path, "SPLIT", nodes, summary)
