"""edgeinf's int8 engine: fully quantized .tflite models on edgeinf's own kernels.

A model is planned once at load (`plan_model`: checks, fusion, one arena), turned into
one native Program (`build_program`) whose ``run()`` executes the whole graph in C++ with
the GIL released. ``edgeinf.load(path, backend="edgeinf")`` is the user-facing way in;
a model the engine cannot run exactly goes to LiteRT instead, with the reason reported.
"""

from __future__ import annotations

from .plan import NodeSupport, Plan, node_support, plan_model
from .program import build_program

__all__ = ["NodeSupport", "Plan", "build_program", "node_support", "plan_model"]
