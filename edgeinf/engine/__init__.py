"""edgeinf's int8 engine: fully quantized .tflite models on edgeinf's own kernels.

A model is planned once at load (`plan_model`: checks, fusion, one arena), turned into
one native Program (`build_program`) whose ``run()`` executes the whole graph in C++ with
the GIL released. ``edgeinf.load(path, backend="edgeinf")`` is the user-facing way in;
the operators the engine cannot run exactly go to LiteRT (`partition`), with the reasons reported.
"""

from __future__ import annotations

from .partition import Segment, cut_model, partition
from .plan import NodeSupport, Plan, node_support, plan_model, plan_part
from .program import build_program

__all__ = [
    "NodeSupport",
    "Plan",
    "Segment",
    "build_program",
    "cut_model",
    "node_support",
    "partition",
    "plan_model",
    "plan_part",
]
